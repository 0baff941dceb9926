/*
 * corpus_le: little-endian integers in byte buffers (see corpus_le.h).
 */
#include "corpus_le.h"

void corpus_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void corpus_put_u64(uint8_t *p, uint64_t v)
{
	corpus_put_u32(p, (uint32_t)v);
	corpus_put_u32(p + 4, (uint32_t)(v >> 32));
}

uint32_t corpus_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

uint64_t corpus_get_u64(const uint8_t *p)
{
	return (uint64_t)corpus_get_u32(p) | (uint64_t)corpus_get_u32(p + 4) << 32;
}
