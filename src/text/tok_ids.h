/*
 * tok_ids: a growing array of token ids, what the tokenizers append to.
 */
#ifndef DDPTOK_TOK_IDS_H
#define DDPTOK_TOK_IDS_H

#include <stddef.h>
#include <stdint.h>

struct tok_ids {
	int32_t *v;
	size_t n, cap;
};

/* Room for `more` ids after the n held; -1 when out of memory. */
int tok_ids_reserve(struct tok_ids *a, size_t more);
/* Appends one id; -1 when out of memory. */
int tok_ids_push(struct tok_ids *a, int32_t id);
void tok_ids_free(struct tok_ids *a);

#endif
