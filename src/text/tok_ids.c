/*
 * tok_ids: a growing array of token ids (see tok_ids.h).
 */
#include "tok_ids.h"

#include <stdlib.h>

int tok_ids_reserve(struct tok_ids *a, size_t more)
{
	if (a->n + more <= a->cap)
		return 0;
	size_t cap = a->cap ? a->cap : 256;
	while (cap < a->n + more)
		cap *= 2;
	int32_t *v = realloc(a->v, cap * sizeof *v);
	if (!v)
		return -1;
	a->v = v;
	a->cap = cap;
	return 0;
}

int tok_ids_push(struct tok_ids *a, int32_t id)
{
	if (tok_ids_reserve(a, 1))
		return -1;
	a->v[a->n++] = id;
	return 0;
}

void tok_ids_free(struct tok_ids *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}
