/*
 * utf8: the validity of UTF-8 text, as the tokenizers need it (PCRE2 and SentencePiece
 * take only valid UTF-8), and its repair.
 *
 * Valid means RFC 3629: shortest forms only, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF. An invalid sequence is replaced, as Python's and Rust's lossy decoders do, by
 * one U+FFFD per maximal prefix of a valid sequence (Unicode's "substitution of maximal
 * subparts"), so that the replaced text is the one those libraries give.
 */
#ifndef DDPTOK_UTF8_H
#define DDPTOK_UTF8_H

#include <stddef.h>

/* The length of the valid sequence starting at p (at most n bytes), or 0 when it is not
 * one; *bad then gets the length of the maximal subpart to replace (>= 1). */
size_t utf8_seq(const unsigned char *p, size_t n, size_t *bad);

/* The offset of the first byte of s[0..n) that starts no valid sequence, or n when the
 * whole text is valid. */
size_t utf8_invalid_at(const char *s, size_t n);

/* s[0..n) with every invalid sequence replaced by U+FFFD, into a new buffer (*out, *out_len;
 * NUL-terminated); *replaced gets how many were. -1 when out of memory. */
int utf8_repair(const char *s, size_t n, char **out, size_t *out_len, size_t *replaced);

#endif
