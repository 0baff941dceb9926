/*
 * digest: SHA-256 of buffers and files, as lowercase hex.
 *
 * Checkpoint manifests, the data lock and report files identify content by its SHA-256.
 * This is a thin layer over OpenSSL's EVP interface (libcrypto) so that the rest of the
 * code deals only in 64-character hex strings plus a NUL (DIGEST_HEX_SIZE bytes).
 * A failure of libcrypto itself (allocation) is ERR_DEVICE; reading a file is ERR_IO.
 */
#ifndef DDPTOK_DIGEST_H
#define DDPTOK_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define DIGEST_HEX_SIZE 65 /* 64 hex digits + NUL */

/* Opaque streaming state. */
struct digest;

/* One-shot digest of a buffer. */
int digest_sha256(const void *data, size_t len, char hex[DIGEST_HEX_SIZE], struct err *e);

/* Streaming: digest_init, any number of digest_update, then digest_final, which writes
 * the hex digest and frees the state (also when it fails). digest_free abandons a state
 * without finishing it (NULL is fine). */
int digest_init(struct digest **out, struct err *e);
int digest_update(struct digest *d, const void *data, size_t len, struct err *e);
int digest_final(struct digest *d, char hex[DIGEST_HEX_SIZE], struct err *e);
void digest_free(struct digest *d);

/* Digest of a file's content, read in blocks; *size (if not NULL) gets its length. */
int digest_file(const char *path, char hex[DIGEST_HEX_SIZE], uint64_t *size, struct err *e);

/* Whether s is exactly 64 lowercase hex digits. */
int digest_is_hex(const char *s);

#endif
