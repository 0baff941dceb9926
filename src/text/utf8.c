/*
 * utf8: validation and lossy repair of UTF-8 (see utf8.h).
 */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* The range the second byte of a sequence must lie in, by its lead byte (Unicode's table
 * 3-7 of well-formed byte sequences); the later bytes lie in 80..BF. */
static int second_range(unsigned char lead, unsigned char *lo, unsigned char *hi)
{
	*lo = 0x80;
	*hi = 0xBF;
	if (lead >= 0xC2 && lead <= 0xDF)
		return 2;
	if (lead == 0xE0)
		*lo = 0xA0;
	else if (lead == 0xED)
		*hi = 0x9F;
	if (lead >= 0xE0 && lead <= 0xEF)
		return 3;
	if (lead == 0xF0)
		*lo = 0x90;
	else if (lead == 0xF4)
		*hi = 0x8F;
	return lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
}

size_t utf8_seq(const unsigned char *p, size_t n, size_t *bad)
{
	unsigned char lo, hi;
	size_t len, k;
	*bad = 1;
	if (p[0] < 0x80)
		return 1;
	len = (size_t)second_range(p[0], &lo, &hi);
	if (!len)
		return 0;
	for (k = 1; k < len; k++) {
		if (k >= n || p[k] < lo || p[k] > hi) {
			*bad = k;
			return 0;
		}
		lo = 0x80;
		hi = 0xBF;
	}
	return len;
}

size_t utf8_invalid_at(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t at = 0, bad;
	while (at < n) {
		/* runs of ASCII, the common case, eight bytes at a time */
		while (at + 8 <= n) {
			unsigned long long w;
			memcpy(&w, p + at, 8);
			if (w & 0x8080808080808080ull)
				break;
			at += 8;
		}
		if (at >= n)
			break;
		size_t len = utf8_seq(p + at, n - at, &bad);
		if (!len)
			return at;
		at += len;
	}
	return n;
}

int utf8_repair(const char *s, size_t n, char **out, size_t *out_len, size_t *replaced)
{
	/* each invalid byte becomes at most 3 bytes */
	char *o = malloc(n * 3 + 1);
	size_t at = 0, w = 0, bad;
	*replaced = 0;
	if (!o)
		return -1;
	while (at < n) {
		size_t len = utf8_seq((const unsigned char *)s + at, n - at, &bad);
		if (len) {
			memcpy(o + w, s + at, len);
			w += len;
			at += len;
		} else {
			memcpy(o + w, "\xEF\xBF\xBD", 3);
			w += 3;
			at += bad;
			(*replaced)++;
		}
	}
	o[w] = '\0';
	*out = o;
	*out_len = w;
	return 0;
}
