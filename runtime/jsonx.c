/*
 * jsonx: shortest round-trip reals in jansson's output (see jsonx.h).
 */
#include "jsonx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Jansson's spelling of an exponent: no '+', no leading zeros (1e+05 -> 1e5, 1e-06 -> 1e-6). */
static void tidy_exponent(char *buf)
{
	char *x = strchr(buf, 'e');
	if (!x)
		return;
	char *digits = x + 1;
	if (*digits == '+')
		memmove(digits, digits + 1, strlen(digits));
	else if (*digits == '-')
		digits++;
	size_t zeros = strspn(digits, "0");
	if (zeros && digits[zeros])
		memmove(digits, digits + zeros, strlen(digits + zeros) + 1);
}

int jsonx_real_text(double v, char *buf, size_t cap)
{
	int p = 1;
	while (p < 17) { /* 17 significant digits always read back the same double */
		snprintf(buf, cap, "%.*g", p, v);
		if (strtod(buf, NULL) == v)
			break;
		p++;
	}
	snprintf(buf, cap, "%.*g", p, v);
	/* %g turns to an exponent once it exceeds the digits asked for (1000 -> 1e+03 with one
	 * digit): below 1e17 write the number plainly, as the 17-digit form does */
	const char *x = strchr(buf, 'e');
	int exponent = x ? atoi(x + 1) : -1;
	if (x && exponent >= 0 && exponent < 17) {
		snprintf(buf, cap, "%.*g", exponent + 1, v);
		if (strtod(buf, NULL) != v)
			snprintf(buf, cap, "%.17g", v);
	}
	if (!strpbrk(buf, ".e") && strlen(buf) + 3 <= cap)
		strcat(buf, ".0"); /* read back as a real, not an integer */
	tidy_exponent(buf);
	return (int)strlen(buf);
}

/* The length of the number starting at s (JSON number characters). */
static size_t number_len(const char *s)
{
	return strspn(s, "0123456789+-.eE");
}

char *jsonx_dumps(const json_t *j, size_t flags)
{
	char *text = json_dumps(j, (flags & ~(size_t)JSON_REAL_PRECISION(31)) |
				       JSON_REAL_PRECISION(17));
	if (!text)
		return NULL;
	char *out = NULL;
	size_t outlen = 0;
	FILE *f = open_memstream(&out, &outlen);
	if (!f) {
		free(text);
		return NULL;
	}
	int in_string = 0;
	for (const char *s = text; *s;) {
		if (in_string) {
			if (*s == '\\' && s[1]) /* an escaped character, '"' included */
				fputc(*s++, f);
			else if (*s == '"')
				in_string = 0;
			fputc(*s++, f);
			continue;
		}
		if (*s == '"')
			in_string = 1;
		size_t n = (*s == '-' || (*s >= '0' && *s <= '9')) ? number_len(s) : 0;
		if (n == 0 || (!memchr(s, '.', n) && !memchr(s, 'e', n) && !memchr(s, 'E', n))) {
			/* not a number, or an integer: as jansson wrote it */
			size_t k = n ? n : 1;
			fwrite(s, 1, k, f);
			s += k;
			continue;
		}
		char buf[40];
		jsonx_real_text(strtod(s, NULL), buf, sizeof buf);
		fputs(buf, f);
		s += n;
	}
	free(text);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}
