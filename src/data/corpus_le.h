/*
 * corpus_le: little-endian integers in byte buffers, the byte order of the data lock's
 * serialization (corpus_lock.c) and of corpus.bin (corpus_store.c), whatever the host's.
 */
#ifndef DDPTOK_CORPUS_LE_H
#define DDPTOK_CORPUS_LE_H

#include <stdint.h>

void corpus_put_u32(uint8_t *p, uint32_t v);
void corpus_put_u64(uint8_t *p, uint64_t v);
uint32_t corpus_get_u32(const uint8_t *p);
uint64_t corpus_get_u64(const uint8_t *p);

#endif
