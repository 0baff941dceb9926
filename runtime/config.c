/*
 * config: loading, overriding, validating and writing the INI configuration.
 *
 * The program declares its keys once in a table (struct cfg_key); this file is the only
 * place that turns text into values. iniparser reads the file, but only as a splitter of
 * sections, keys and raw strings: every value is parsed here, strictly, because
 * iniparser's own getters are lenient in ways that hide mistakes ("010" read as octal 8,
 * "3abc" read as 3). Everything that does not match the table is an ERR_CONFIG naming the
 * file, the section and the key. A load either applies every value of the file or none.
 */
#include "config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <iniparser.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longest value text kept (struct cfg_value.text holds it with its terminator). */
#define VALUE_MAX ((int)sizeof(((struct cfg_value *)0)->text) - 1)

/* ---------------------------------------------------------------- small helpers */

static int streq_ci(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
			return 0;
	return *a == *b;
}

static int is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\f' || ch == '\v';
}

/* Copies src into dst (size dstlen) without surrounding whitespace and without one
 * pair of surrounding quotes ("..." or '...'). Returns -1 if it does not fit. */
static int clean_value(const char *src, char *dst, size_t dstlen)
{
	const char *b = src, *end = src + strlen(src);
	while (b < end && is_space(*b))
		b++;
	while (end > b && is_space(end[-1]))
		end--;
	if (end - b >= 2 && (*b == '"' || *b == '\'') && end[-1] == *b) {
		b++;
		end--;
		while (b < end && is_space(*b))
			b++;
		while (end > b && is_space(end[-1]))
			end--;
	}
	if ((size_t)(end - b) >= dstlen)
		return -1;
	memmove(dst, b, (size_t)(end - b));
	dst[end - b] = '\0';
	return 0;
}

int cfg_near_distance(const char *word, const char *cand)
{
	int prev[66], row[66], cur[66], la = (int)strlen(word), lb = (int)strlen(cand);
	int limit = la / 3 < 1 ? 1 : la / 3 > 3 ? 3 : la / 3;
	if (la > 64 || lb > 64)
		return INT_MAX;
	/* optimal string alignment: insertions, deletions, substitutions and swaps of two
	 * neighbouring letters ("modle" is one edit from "model") */
	for (int j = 0; j <= lb; j++)
		row[j] = j;
	for (int i = 1; i <= la; i++) {
		cur[0] = i;
		for (int j = 1; j <= lb; j++) {
			int best = row[j - 1] + (word[i - 1] != cand[j - 1]);
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (i > 1 && j > 1 && word[i - 1] == cand[j - 2] && word[i - 2] == cand[j - 1] &&
			    prev[j - 2] + 1 < best)
				best = prev[j - 2] + 1;
			cur[j] = best;
		}
		memcpy(prev, row, sizeof row);
		memcpy(row, cur, sizeof cur);
	}
	return row[lb] <= limit ? row[lb] : INT_MAX;
}

/* " (did you mean 'x'?)" when a declared name is close to `word`, else "". `section`
 * NULL: compare with section names, otherwise with the key names of that section. */
static void suggest(const struct cfg *c, const char *section, const char *word, char *out,
		    size_t outlen)
{
	const char *best = NULL;
	int best_d = INT_MAX;
	out[0] = '\0';
	for (int i = 0; i < c->n; i++) {
		const struct cfg_key *k = &c->keys[i];
		const char *cand = section ? k->name : k->section;
		if (section && strcmp(k->section, section) != 0)
			continue;
		int d = cfg_near_distance(word, cand);
		if (d < best_d) {
			best_d = d;
			best = cand;
		}
	}
	if (best)
		snprintf(out, outlen, " (did you mean '%s'?)", best);
}

static int find_index(const struct cfg *c, const char *section, const char *name)
{
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->keys[i].section, section) == 0 && strcmp(c->keys[i].name, name) == 0)
			return i;
	return -1;
}

static int section_known(const struct cfg *c, const char *section)
{
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->keys[i].section, section) == 0)
			return 1;
	return 0;
}

/* Shortest "%.*g" text (from 15 digits up) that reads back as exactly v, with a tidy
 * exponent ("1e-06" becomes "1e-6"). */
static void format_double(double v, char *out, size_t outlen)
{
	char buf[64];
	if (v == 0)
		v = 0; /* no "-0" */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	char *e = strchr(buf, 'e');
	if (e) {
		char *src = e + 1, *dst = e + 1;
		if (*src == '+')
			src++;
		else if (*src == '-')
			*dst++ = *src++;
		while (*src == '0' && src[1])
			src++;
		memmove(dst, src, strlen(src) + 1);
	}
	snprintf(out, outlen, "%s", buf);
}

/* Text of a bound as the user would write it. */
static void format_bound(const struct cfg_key *k, double v, char *out, size_t outlen)
{
	if (k->type == CFG_INT)
		snprintf(out, outlen, "%lld", (long long)v);
	else
		format_double(v, out, outlen);
}

static void format_range(const struct cfg_key *k, char *out, size_t outlen)
{
	char lo[64], hi[64];
	format_bound(k, k->min, lo, sizeof lo);
	format_bound(k, k->max, hi, sizeof hi);
	snprintf(out, outlen, "%c%s, %s%c", (k->open & CFG_OPEN_MIN) ? '(' : '[', lo, hi,
		 (k->open & CFG_OPEN_MAX) ? ')' : ']');
}

/* ------------------------------------------------------------------ value parsing */

/* Base 10, optional sign, digits only, no leading zeros except "0", no overflow. */
static int parse_int(const char *s, long long *out)
{
	const char *p = s;
	int neg = 0;
	unsigned long long acc = 0, limit;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (!isdigit((unsigned char)*p))
		return -1;
	if (*p == '0' && p[1] != '\0')
		return -1;
	limit = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		unsigned d = (unsigned)(*p - '0');
		if (acc > (limit - d) / 10)
			return -2;
		acc = acc * 10 + d;
	}
	if (neg)
		*out = acc == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)acc;
	else
		*out = (long long)acc;
	return 0;
}

/* Decimal notation only (digits, sign, point, exponent), whole string, finite. */
static int parse_float(const char *s, double *out)
{
	char *end;
	int digits = 0;
	if (*s == '\0')
		return -1;
	for (const char *p = s; *p; p++) {
		if (isdigit((unsigned char)*p))
			digits++;
		else if (!strchr("+-.eE", *p))
			return -1;
	}
	if (!digits)
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end != '\0')
		return -1;
	if (errno == ERANGE || !isfinite(v))
		return -2;
	*out = v == 0 ? 0 : v;
	return 0;
}

static int parse_bool(const char *s, int *out)
{
	static const char *yes[] = { "true", "yes", "1" };
	static const char *no[] = { "false", "no", "0" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		if (streq_ci(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (streq_ci(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

/* Index of s in "a|b|c" (case-insensitive), copying the declared spelling; -1 if none. */
static int parse_enum(const char *choices, const char *s, char *canon, size_t canonlen)
{
	int idx = 0;
	const char *p = choices;
	size_t n = strlen(s);
	while (p && *p) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && strncasecmp(p, s, n) == 0) {
			snprintf(canon, canonlen, "%.*s", (int)len, p);
			return idx;
		}
		idx++;
		p = bar ? bar + 1 : NULL;
	}
	return -1;
}

static int in_range(const struct cfg_key *k, double v)
{
	if ((k->open & CFG_OPEN_MIN) ? !(v > k->min) : !(v >= k->min))
		return 0;
	if ((k->open & CFG_OPEN_MAX) ? !(v < k->max) : !(v <= k->max))
		return 0;
	return 1;
}

/* The value text s (cleaned) of key k, typed into v; `where` names the source. */
static int parse_number(const struct cfg_key *k, const char *s, const char *where,
			struct cfg_value *v, struct err *e)
{
	char range[160];
	int rc;
	if (k->type == CFG_INT) {
		long long i = 0;
		rc = parse_int(s, &i);
		if (rc == -2)
			return ERR(e, ERR_CONFIG, "%s: [%s] %s = %s: integer overflow", where,
				   k->section, k->name, s);
		if (rc < 0)
			return ERR(e, ERR_CONFIG,
				   "%s: [%s] %s = '%s': not an integer (base 10, optional sign, "
				   "no leading zeros)", where, k->section, k->name, s);
		v->i = i;
		v->f = (double)i;
		snprintf(v->text, sizeof v->text, "%lld", i);
	} else {
		double f = 0;
		rc = parse_float(s, &f);
		if (rc == -2)
			return ERR(e, ERR_CONFIG, "%s: [%s] %s = %s: not a finite number in double "
				   "range", where, k->section, k->name, s);
		if (rc < 0)
			return ERR(e, ERR_CONFIG, "%s: [%s] %s = '%s': not a decimal number", where,
				   k->section, k->name, s);
		v->f = f;
		format_double(f, v->text, sizeof v->text);
	}
	if (!in_range(k, v->f)) {
		format_range(k, range, sizeof range);
		return ERR(e, ERR_CONFIG, "%s: [%s] %s = %s: out of range %s", where, k->section,
			   k->name, s, range);
	}
	return ERR_OK;
}

static int parse_word(const struct cfg_key *k, const char *s, const char *where,
		      struct cfg_value *v, struct err *e)
{
	int b, idx;
	switch (k->type) {
	case CFG_BOOL:
		if (parse_bool(s, &b) < 0)
			return ERR(e, ERR_CONFIG, "%s: [%s] %s = '%s': expected true/false, yes/no "
				   "or 1/0", where, k->section, k->name, s);
		v->i = b;
		v->f = b;
		snprintf(v->text, sizeof v->text, "%s", b ? "true" : "false");
		return ERR_OK;
	case CFG_ENUM:
		idx = parse_enum(k->choices, s, v->text, sizeof v->text);
		if (idx < 0)
			return ERR(e, ERR_CONFIG, "%s: [%s] %s = '%s': expected one of %s", where,
				   k->section, k->name, s, k->choices ? k->choices : "(none)");
		v->i = idx;
		v->f = idx;
		return ERR_OK;
	case CFG_STRING:
		for (const char *p = s; *p; p++)
			if (iscntrl((unsigned char)*p))
				return ERR(e, ERR_CONFIG, "%s: [%s] %s: control character in value",
					   where, k->section, k->name);
		if (strchr(s, '"') && strchr(s, '\''))
			return ERR(e, ERR_CONFIG, "%s: [%s] %s = %s: a value cannot hold both "
				   "kinds of quote", where, k->section, k->name, s);
		snprintf(v->text, sizeof v->text, "%s", s);
		return ERR_OK;
	default:
		return ERR(e, ERR_CONFIG, "%s: [%s] %s: undeclared type %d", where, k->section,
			   k->name, (int)k->type);
	}
}

/*
 * Parses `raw` for key k into *out, origin `origin`. `where` names the source in
 * messages ("conf/x.ini", "--set", "default").
 */
static int parse_value(const struct cfg_key *k, const char *raw, const char *where,
		       const char *origin, struct cfg_value *out, struct err *e)
{
	char s[sizeof out->text];
	struct cfg_value v;

	memset(&v, 0, sizeof v);
	if (clean_value(raw, s, sizeof s) < 0)
		return ERR(e, ERR_CONFIG, "%s: [%s] %s: value too long (at most %d characters)",
			   where, k->section, k->name, VALUE_MAX);
	if (k->type == CFG_INT || k->type == CFG_FLOAT)
		ERR_TRY(parse_number(k, s, where, &v, e));
	else
		ERR_TRY(parse_word(k, s, where, &v, e));
	snprintf(v.origin, sizeof v.origin, "%s", origin);
	*out = v;
	return ERR_OK;
}

/* ---------------------------------------------------------------------- lifecycle */

int cfg_init(struct cfg *c, const struct cfg_key *keys, struct err *e)
{
	int n = 0;

	memset(c, 0, sizeof *c);
	while (keys[n].section)
		n++;
	c->keys = keys;
	c->n = n;
	c->vals = calloc(n > 0 ? (size_t)n : 1, sizeof *c->vals);
	if (!c->vals) {
		c->n = 0;
		return ERR(e, ERR_CONFIG, "configuration table: out of memory");
	}
	for (int i = 0; i < n; i++) {
		const struct cfg_key *k = &keys[i];
		if (!k->name || !k->name[0] || !k->section[0] || strchr(k->section, ':') ||
		    (k->type == CFG_ENUM && !k->choices) || !k->def) {
			ERR(e, ERR_CONFIG, "configuration table: entry %d ([%s] %s) is incomplete", i,
			    k->section, k->name ? k->name : "(null)");
			goto fail;
		}
		if (find_index(c, k->section, k->name) != i) {
			ERR(e, ERR_CONFIG, "configuration table: [%s] %s declared twice", k->section,
			    k->name);
			goto fail;
		}
		if (parse_value(k, k->def, "default", "default", &c->vals[i], e))
			goto fail;
	}
	return ERR_OK;
fail:
	cfg_free(c);
	return e ? e->code : ERR_CONFIG;
}

void cfg_free(struct cfg *c)
{
	if (!c)
		return;
	free(c->vals);
	c->vals = NULL;
	c->n = 0;
	c->keys = NULL;
}

/* ------------------------------------------------------------------------ loading */

/* Everything that works around iniparser is in this section: its error messages captured
 * instead of printed (capture_ini_error), a key set twice refused instead of silently
 * overridden (refuse_duplicate_keys), the temporary file it reads named as the caller's
 * source (ini_load), entries its section API cannot list (report_stray), and text loaded
 * through a temporary file because it reads files only (cfg_load_text). */

/* iniparser reports syntax errors through a process-wide callback that prints to
 * stderr by default; while we load, it writes into this buffer instead. */
static _Thread_local char ini_error[512];

static int capture_ini_error(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (ini_error[0])
		return 0; /* keep the first message */
	size_t j = 0;
	for (size_t i = 0; buf[i] && j + 1 < sizeof ini_error; i++) {
		char ch = buf[i] == '\n' ? ' ' : buf[i];
		if (ch == ' ' && (j == 0 || ini_error[j - 1] == ' '))
			continue;
		ini_error[j++] = ch;
	}
	while (j > 0 && ini_error[j - 1] == ' ')
		j--;
	ini_error[j] = '\0';
	return 0;
}

/* The INI reader keeps the last of two assignments to one key without a word: refuse a
 * key set twice (in one section, or in a section that appears twice), naming both lines.
 * Lines are read as the reader sees them: comments (; #), [section], key = value. */
static int refuse_duplicate_keys(const char *file, const char *where, struct err *e)
{
	FILE *f = fopen(file, "r");
	char line[4096], section[128] = "";
	struct seen {
		char name[256];
		int line;
	} *seen = NULL;
	size_t n = 0, cap = 0;
	int lineno = 0, rc = ERR_OK;
	if (!f)
		return ERR_OK; /* the reader reports it */
	int continued = 0; /* the previous line ended with a backslash: this one goes on */
	while (rc == ERR_OK && fgets(line, sizeof line, f)) {
		char *b = line, *end, *eq;
		int was_continued = continued;
		lineno++;
		while (is_space(*b))
			b++;
		end = b + strlen(b);
		while (end > b && is_space(end[-1]))
			*--end = '\0';
		continued = end > b && end[-1] == '\\';
		if (was_continued || *b == '\0' || *b == ';' || *b == '#')
			continue;
		if (*b == '[') {
			char *close = strchr(b, ']');
			char *from = b + 1, *to = close ? close : b + 1;
			while (from < to && is_space(*from)) /* "[ data ]" is [data] */
				from++;
			while (to > from && is_space(to[-1]))
				to--;
			size_t len = (size_t)(to - from);
			snprintf(section, sizeof section, "%.*s", (int)(len < 127 ? len : 127), from);
			for (char *q = section; *q; q++)
				*q = (char)tolower((unsigned char)*q);
			continue;
		}
		if (!(eq = strchr(b, '=')))
			continue;
		while (eq > b && is_space(eq[-1]))
			eq--;
		char name[256];
		snprintf(name, sizeof name, "%s.%.*s", section, (int)(eq - b), b);
		for (char *q = name; *q; q++)
			*q = (char)tolower((unsigned char)*q);
		for (size_t i = 0; i < n; i++)
			if (!strcmp(seen[i].name, name)) {
				char *dot = strchr(name, '.');
				*dot = '\0';
				rc = ERR(e, ERR_CONFIG, "%s:%d: [%s] %s is set a second time (first at "
					 "line %d)", where, lineno, name, dot + 1, seen[i].line);
				break;
			}
		if (rc != ERR_OK)
			break;
		if (n == cap) {
			struct seen *ns = realloc(seen, (cap ? 2 * cap : 64) * sizeof *ns);
			if (!ns) {
				rc = ERR(e, ERR_CONFIG, "%s: out of memory", where);
				break;
			}
			seen = ns;
			cap = cap ? 2 * cap : 64;
		}
		snprintf(seen[n].name, sizeof seen[n].name, "%s", name);
		seen[n++].line = lineno;
	}
	free(seen);
	fclose(f);
	return rc;
}

static dictionary *ini_load(const char *file, const char *where, struct err *e)
{
	dictionary *d;
	if (refuse_duplicate_keys(file, where, e) != ERR_OK)
		return NULL;
	ini_error[0] = '\0';
	iniparser_set_error_callback(capture_ini_error);
	d = iniparser_load(file);
	iniparser_set_error_callback(NULL);
	if (!d) {
		/* Name the source as the caller knows it, not the temporary file. */
		char msg[sizeof ini_error + 256];
		const char *src = ini_error, *hit;
		size_t used = 0, flen = strlen(file);
		if (strncmp(src, "iniparser: ", 11) == 0)
			src += 11;
		while ((hit = strstr(src, file)) != NULL && flen > 0) {
			used += (size_t)snprintf(msg + used, sizeof msg - used, "%.*s%s",
						 (int)(hit - src), src, where);
			if (used >= sizeof msg)
				break;
			src = hit + flen;
		}
		if (used < sizeof msg)
			snprintf(msg + used, sizeof msg - used, "%s", src);
		ERR(e, ERR_CONFIG, "%s: cannot parse: %s", where,
		    msg[0] ? msg : "unreadable INI text");
	}
	return d;
}

/* Names an entry of the dictionary that the section API did not show (a key before
 * any section, a section name with ':' in it). */
static int report_stray(const struct cfg *c, const dictionary *d, const char *where,
			struct err *e)
{
	for (ssize_t i = 0; i < d->size; i++) {
		const char *key = d->key[i];
		const char *colon;
		if (!key)
			continue;
		colon = strchr(key, ':');
		if (d->val[i] == NULL) {
			if (!colon)
				continue; /* a section: checked already */
			return ERR(e, ERR_CONFIG, "%s: [%s]: unknown section", where, key);
		}
		if (colon == key)
			return ERR(e, ERR_CONFIG, "%s: %s: key outside of any section", where,
				   key + 1);
		if (colon) {
			char sec[256];
			snprintf(sec, sizeof sec, "%.*s", (int)(colon - key), key);
			if (!section_known(c, sec) || find_index(c, sec, colon + 1) < 0)
				return ERR(e, ERR_CONFIG, "%s: [%s] %s: unknown key or section", where,
					   sec, colon + 1);
		}
	}
	return ERR(e, ERR_CONFIG, "%s: unexpected entries the configuration cannot name", where);
}

/* Applies every entry of d to a copy of c's values; commits only if all are valid. */
static int apply_dict(struct cfg *c, dictionary *d, const char *where, struct err *e)
{
	struct cfg_value *staged = NULL;
	const char **names = NULL;
	char hint[128];
	int nsec, seen = 0, rc = ERR_OK;

	staged = malloc((c->n > 0 ? (size_t)c->n : 1) * sizeof *staged);
	if (!staged) {
		rc = ERR(e, ERR_CONFIG, "%s: out of memory", where);
		goto out;
	}
	memcpy(staged, c->vals, (size_t)c->n * sizeof *staged);

	nsec = iniparser_getnsec(d);
	for (int s = 0; s < nsec; s++) {
		const char *sec = iniparser_getsecname(d, s);
		int nkeys;
		if (!sec)
			continue;
		seen++;
		if (!section_known(c, sec)) {
			suggest(c, NULL, sec, hint, sizeof hint);
			rc = ERR(e, ERR_CONFIG, "%s: [%s]: unknown section%s", where, sec, hint);
			goto out;
		}
		nkeys = iniparser_getsecnkeys(d, sec);
		if (nkeys <= 0)
			continue;
		free(names);
		names = calloc((size_t)nkeys, sizeof *names);
		if (!names) {
			rc = ERR(e, ERR_CONFIG, "%s: out of memory", where);
			goto out;
		}
		if (!iniparser_getseckeys(d, sec, names)) {
			rc = ERR(e, ERR_CONFIG, "%s: [%s]: cannot list keys", where, sec);
			goto out;
		}
		for (int j = 0; j < nkeys; j++) {
			const char *full = names[j], *name, *raw;
			size_t sl = strlen(sec);
			if (!full)
				continue;
			seen++;
			name = strncmp(full, sec, sl) == 0 && full[sl] == ':' ? full + sl + 1 : full;
			int idx = find_index(c, sec, name);
			if (idx < 0) {
				suggest(c, sec, name, hint, sizeof hint);
				rc = ERR(e, ERR_CONFIG, "%s: [%s] %s: unknown key%s", where, sec, name,
					 hint);
				goto out;
			}
			raw = iniparser_getstring(d, full, NULL);
			rc = parse_value(&c->keys[idx], raw ? raw : "", where, where, &staged[idx], e);
			if (rc)
				goto out;
		}
	}
	/* Entries the section API cannot see (keys before the first section, section
	 * names containing ':') make the counts differ. */
	if (seen != d->n) {
		rc = report_stray(c, d, where, e);
		goto out;
	}
	memcpy(c->vals, staged, (size_t)c->n * sizeof *staged);
out:
	free(names);
	free(staged);
	return rc;
}

int cfg_load_file(struct cfg *c, const char *path, struct err *e)
{
	struct stat st;
	dictionary *d = NULL;
	FILE *f;
	int rc;

	if (stat(path, &st) != 0)
		return ERR(e, ERR_CONFIG, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return ERR(e, ERR_CONFIG, "%s: %s", path, strerror(EISDIR));
	f = fopen(path, "r");
	if (!f)
		return ERR(e, ERR_CONFIG, "%s: %s", path, strerror(errno));
	fclose(f);

	d = ini_load(path, path, e);
	if (!d)
		return e ? e->code : ERR_CONFIG;
	rc = apply_dict(c, d, path, e);
	iniparser_freedict(d);
	if (rc == ERR_OK)
		snprintf(c->path, sizeof c->path, "%s", path);
	return rc;
}

int cfg_load_text(struct cfg *c, const char *text, const char *origin, struct err *e)
{
	const char *dir = getenv("TMPDIR");
	char tmpl[1024];
	dictionary *d = NULL;
	size_t len = strlen(text), done = 0;
	int fd, rc;

	if (!origin)
		origin = "(text)";
	if (!dir || !dir[0])
		dir = "/tmp";
	if ((size_t)snprintf(tmpl, sizeof tmpl, "%s/ddptok-cfg-XXXXXX", dir) >= sizeof tmpl)
		return ERR(e, ERR_IO, "%s: temporary directory name too long", origin);
	fd = mkstemp(tmpl);
	if (fd < 0)
		return ERR_ERRNO(e, "%s: cannot create a temporary file in %s", origin, dir);
	while (done < len) {
		ssize_t w = write(fd, text + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = ERR_ERRNO(e, "%s: cannot write temporary file %s", origin, tmpl);
			close(fd);
			unlink(tmpl);
			return rc;
		}
		done += (size_t)w;
	}
	if (close(fd) != 0) {
		rc = ERR_ERRNO(e, "%s: cannot write temporary file %s", origin, tmpl);
		unlink(tmpl);
		return rc;
	}
	d = ini_load(tmpl, origin, e);
	unlink(tmpl);
	if (!d)
		return e ? e->code : ERR_CONFIG;
	rc = apply_dict(c, d, origin, e);
	iniparser_freedict(d);
	if (rc == ERR_OK)
		snprintf(c->path, sizeof c->path, "%s", origin);
	return rc;
}

int cfg_set(struct cfg *c, const char *assignment, struct err *e)
{
	char buf[1024], sec[128], name[128], hint[128];
	char *eq, *dot, *lhs;
	int idx;

	if (!assignment || strlen(assignment) >= sizeof buf)
		return ERR(e, ERR_CONFIG, "--set: assignment missing or too long");
	snprintf(buf, sizeof buf, "%s", assignment);
	eq = strchr(buf, '=');
	if (!eq)
		return ERR(e, ERR_CONFIG, "--set '%s': expected section.key=value", assignment);
	*eq = '\0';
	if (clean_value(buf, buf, sizeof buf) < 0) /* trims in place: never longer */
		return ERR(e, ERR_CONFIG, "--set '%s': expected section.key=value", assignment);
	lhs = buf;
	dot = strchr(lhs, '.');
	if (!dot || dot == lhs || dot[1] == '\0' || strchr(dot + 1, '.') ||
	    (size_t)(dot - lhs) >= sizeof sec || strlen(dot + 1) >= sizeof name)
		return ERR(e, ERR_CONFIG, "--set '%s': expected section.key=value", assignment);
	snprintf(sec, sizeof sec, "%.*s", (int)(dot - lhs), lhs);
	snprintf(name, sizeof name, "%s", dot + 1);
	for (char *p = sec; *p; p++) {
		if (is_space(*p))
			return ERR(e, ERR_CONFIG, "--set '%s': expected section.key=value",
				   assignment);
		*p = (char)tolower((unsigned char)*p);
	}
	for (char *p = name; *p; p++) {
		if (is_space(*p))
			return ERR(e, ERR_CONFIG, "--set '%s': expected section.key=value",
				   assignment);
		*p = (char)tolower((unsigned char)*p);
	}
	if (!section_known(c, sec)) {
		suggest(c, NULL, sec, hint, sizeof hint);
		return ERR(e, ERR_CONFIG, "--set: [%s]: unknown section%s", sec, hint);
	}
	idx = find_index(c, sec, name);
	if (idx < 0) {
		suggest(c, sec, name, hint, sizeof hint);
		return ERR(e, ERR_CONFIG, "--set: [%s] %s: unknown key%s", sec, name, hint);
	}
	return parse_value(&c->keys[idx], eq + 1, "--set", "--set", &c->vals[idx], e);
}

/* ------------------------------------------------------------------------- access */

static const struct cfg_value *lookup(const struct cfg *c, const char *section,
				      const char *name, const struct cfg_key **key)
{
	int idx = find_index(c, section, name);
	assert(idx >= 0 && "undeclared configuration key");
	if (idx < 0)
		abort();
	if (key)
		*key = &c->keys[idx];
	return &c->vals[idx];
}

long long cfg_int(const struct cfg *c, const char *section, const char *name)
{
	const struct cfg_key *k;
	const struct cfg_value *v = lookup(c, section, name, &k);
	assert(k->type == CFG_INT || k->type == CFG_BOOL || k->type == CFG_ENUM);
	return v->i;
}

double cfg_float(const struct cfg *c, const char *section, const char *name)
{
	const struct cfg_key *k;
	const struct cfg_value *v = lookup(c, section, name, &k);
	assert(k->type == CFG_FLOAT || k->type == CFG_INT);
	return v->f;
}

const char *cfg_str(const struct cfg *c, const char *section, const char *name)
{
	return lookup(c, section, name, NULL)->text;
}

int cfg_enum(const struct cfg *c, const char *section, const char *name)
{
	const struct cfg_key *k;
	const struct cfg_value *v = lookup(c, section, name, &k);
	assert(k->type == CFG_ENUM || k->type == CFG_BOOL);
	return (int)v->i;
}

/* ------------------------------------------------------------------------ storing */

void cfg_store(const struct cfg *c, void *target)
{
	for (int i = 0; i < c->n; i++) {
		const struct cfg_key *k = &c->keys[i];
		const struct cfg_value *v = &c->vals[i];
		char *at = (char *)target + k->at;
		switch (k->field) {
		case CFG_FIELD_INT: {
			int x = (int)v->i; /* ranges are declared within int */
			assert(k->size == sizeof x && k->type != CFG_FLOAT && k->type != CFG_STRING);
			memcpy(at, &x, sizeof x);
			break;
		}
		case CFG_FIELD_ULLONG: {
			unsigned long long x = (unsigned long long)v->i;
			assert(k->size == sizeof x && k->type == CFG_INT && k->min >= 0);
			memcpy(at, &x, sizeof x);
			break;
		}
		case CFG_FIELD_DOUBLE:
			assert(k->size == sizeof v->f && k->type != CFG_STRING);
			memcpy(at, &v->f, sizeof v->f);
			break;
		case CFG_FIELD_TEXT:
			assert(k->size > 0);
			snprintf(at, k->size, "%s", v->text);
			break;
		case CFG_FIELD_NONE:
			break;
		}
	}
}

/* ------------------------------------------------------------------------ writing */

int cfg_write(const struct cfg *c, FILE *f)
{
	for (int i = 0; i < c->n; i++) {
		const char *sec = c->keys[i].section;
		int first = 1;
		for (int j = 0; j < i; j++)
			if (strcmp(c->keys[j].section, sec) == 0)
				first = 0;
		if (!first)
			continue; /* section already written with all its keys */
		fprintf(f, "%s[%s]\n", i ? "\n" : "", sec);
		for (int j = i; j < c->n; j++) {
			const struct cfg_key *k = &c->keys[j];
			const char *t = c->vals[j].text;
			if (strcmp(k->section, sec) != 0)
				continue;
			if (k->type == CFG_STRING) {
				char q = strchr(t, '"') ? '\'' : '"';
				fprintf(f, "%s = %c%s%c\n", k->name, q, t, q);
			} else {
				fprintf(f, "%s = %s\n", k->name, t);
			}
		}
	}
	return ferror(f) ? -1 : 0;
}

/* Appends "; item" (or "item" first) to out; once full, ends it with "; ..." and appends
 * nothing more. */
static void append_item(char *out, size_t outlen, size_t *used, int *full, const char *item)
{
	size_t len = strlen(item) + (*used ? 2 : 0);
	if (!out || outlen == 0 || *full)
		return;
	if (*used + len < outlen) {
		snprintf(out + *used, outlen - *used, "%s%s", *used ? "; " : "", item);
		*used += len;
	} else {
		*full = 1;
		if (*used + 5 < outlen)
			memcpy(out + *used, "; ...", 6);
	}
}

int cfg_diff(const struct cfg *a, const struct cfg *b, unsigned flags, char *out,
	     size_t outlen)
{
	size_t used = 0;
	int ndiff = 0, full = 0;
	char item[700];

	if (out && outlen)
		out[0] = '\0';
	for (int i = 0; i < a->n; i++) {
		const struct cfg_key *k = &a->keys[i];
		if (!(k->flags & flags))
			continue;
		int j = find_index(b, k->section, k->name);
		const char *ta = a->vals[i].text, *tb = j >= 0 ? b->vals[j].text : "(absent)";
		if (strcmp(ta, tb) == 0)
			continue;
		ndiff++;
		snprintf(item, sizeof item, "%s.%s: %s != %s", k->section, k->name, ta, tb);
		append_item(out, outlen, &used, &full, item);
	}
	/* Keys only the stored side declares also count. */
	for (int j = 0; j < b->n; j++) {
		const struct cfg_key *k = &b->keys[j];
		if (!(k->flags & flags) || find_index(a, k->section, k->name) >= 0)
			continue;
		ndiff++;
		snprintf(item, sizeof item, "%s.%s: (absent) != %s", k->section, k->name,
			 b->vals[j].text);
		append_item(out, outlen, &used, &full, item);
	}
	return ndiff;
}
