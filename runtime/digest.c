/*
 * digest: SHA-256 through OpenSSL EVP, formatted as lowercase hex.
 */
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

struct digest {
	EVP_MD_CTX *ctx;
};

static void to_hex(const unsigned char *md, unsigned n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}

int digest_init(struct digest **out, struct err *e)
{
	struct digest *d = malloc(sizeof *d);
	*out = NULL;
	if (!d)
		return ERR(e, ERR_NOMEM, "sha256: out of memory");
	d->ctx = EVP_MD_CTX_new();
	if (!d->ctx || EVP_DigestInit_ex(d->ctx, EVP_sha256(), NULL) != 1) {
		digest_free(d);
		return ERR(e, ERR_DEVICE, "sha256: cannot initialize libcrypto digest");
	}
	*out = d;
	return 0;
}

int digest_update(struct digest *d, const void *data, size_t len, struct err *e)
{
	if (len && EVP_DigestUpdate(d->ctx, data, len) != 1)
		return ERR(e, ERR_DEVICE, "sha256: libcrypto digest update failed");
	return 0;
}

int digest_final(struct digest *d, char hex[DIGEST_HEX_SIZE], struct err *e)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	int rc = 0;
	if (EVP_DigestFinal_ex(d->ctx, md, &n) != 1 || n != 32) {
		hex[0] = '\0';
		rc = ERR(e, ERR_DEVICE, "sha256: libcrypto digest final failed");
	} else {
		to_hex(md, n, hex);
	}
	digest_free(d);
	return rc;
}

void digest_free(struct digest *d)
{
	if (!d)
		return;
	EVP_MD_CTX_free(d->ctx);
	free(d);
}

int digest_sha256(const void *data, size_t len, char hex[DIGEST_HEX_SIZE], struct err *e)
{
	struct digest *d;
	int rc;
	if ((rc = digest_init(&d, e)))
		return rc;
	if ((rc = digest_update(d, data, len, e))) {
		digest_free(d);
		return rc;
	}
	return digest_final(d, hex, e);
}

int digest_file(const char *path, char hex[DIGEST_HEX_SIZE], uint64_t *size, struct err *e)
{
	unsigned char buf[1 << 16];
	struct digest *d = NULL;
	uint64_t total = 0;
	int rc;

	hex[0] = '\0';
	if (size)
		*size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ERR_ERRNO(e, "cannot open %s", path);
	ERR_TRY_GOTO(rc, digest_init(&d, e), out);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = ERR_ERRNO(e, "cannot read %s", path);
			goto out;
		}
		if (n == 0)
			break;
		ERR_TRY_GOTO(rc, digest_update(d, buf, (size_t)n, e), out);
		total += (uint64_t)n;
	}
	rc = digest_final(d, hex, e);
	d = NULL;
	if (!rc && size)
		*size = total;
out:
	digest_free(d);
	close(fd);
	return rc;
}

int digest_is_hex(const char *s)
{
	size_t i;
	for (i = 0; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 64;
}
