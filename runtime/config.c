/*
 * config: loading, overriding, validating and writing the INI configuration.
 *
 * The program declares its keys once in a table (struct cfg_key); this file is the only
 * place that turns text into values. iniparser reads the file (through ini.h, which holds
 * everything it needs worked around), but only as a splitter of sections, keys and raw
 * strings: every value is parsed here, strictly, because
 * iniparser's own getters are lenient in ways that hide mistakes ("010" read as octal 8,
 * "3abc" read as 3). Everything that does not match the table is an ERR_CONFIG naming the
 * file, the section and the key. A load either applies every value of the file or none.
 */
#include "config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ini.h"

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
	/* strtod flags a subnormal result with ERANGE too, but it is the number written;
	 * what is refused is a number that overflows, or a non-zero one that underflows
	 * to zero (its value would silently not be the one written) */
	if (!isfinite(v) || (errno == ERANGE && v == 0))
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
				   "range (a non-zero magnitude from 4.9e-324 to 1.8e308)", where,
				   k->section, k->name, s);
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
		return ERR(e, ERR_NOMEM, "configuration table: out of memory");
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

/* A load stages every value of the source in a copy and commits only if all are valid. */
struct staging {
	struct cfg *c;
	struct cfg_value *vals;
	const char *where;
};

/* ini_visit_fn: a section must be declared, a key declared in it, its value valid. */
static int stage_entry(void *arg, const char *sec, const char *name, const char *raw,
		       struct err *e)
{
	struct staging *st = arg;
	const struct cfg *c = st->c;
	char hint[128];
	if (!name) {
		if (section_known(c, sec))
			return ERR_OK;
		suggest(c, NULL, sec, hint, sizeof hint);
		return ERR(e, ERR_CONFIG, "%s: [%s]: unknown section%s", st->where, sec, hint);
	}
	int idx = find_index(c, sec, name);
	if (idx < 0) {
		suggest(c, sec, name, hint, sizeof hint);
		return ERR(e, ERR_CONFIG, "%s: [%s] %s: unknown key%s", st->where, sec, name, hint);
	}
	return parse_value(&c->keys[idx], raw, st->where, st->where, &st->vals[idx], e);
}

/* Loads the file `path`, or the text `text` (path NULL), named `where`. */
static int load(struct cfg *c, const char *path, const char *text, const char *where,
		struct err *e)
{
	struct staging st = {c, malloc((c->n > 0 ? (size_t)c->n : 1) * sizeof *st.vals), where};
	int rc;
	if (!st.vals)
		return ERR(e, ERR_NOMEM, "%s: out of memory", where);
	memcpy(st.vals, c->vals, (size_t)c->n * sizeof *st.vals);
	rc = path ? ini_read_file(path, where, stage_entry, &st, e)
		  : ini_read_text(text, where, stage_entry, &st, e);
	if (rc == ERR_OK) {
		memcpy(c->vals, st.vals, (size_t)c->n * sizeof *st.vals);
		snprintf(c->path, sizeof c->path, "%s", where);
	}
	free(st.vals);
	return rc;
}

int cfg_load_file(struct cfg *c, const char *path, struct err *e)
{
	return load(c, path, NULL, path, e);
}

int cfg_load_text(struct cfg *c, const char *text, const char *origin, struct err *e)
{
	return load(c, NULL, text, origin ? origin : "(text)", e);
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

int cfg_put(struct cfg *c, const char *section, const char *name, const char *value,
	    const char *origin, struct err *e)
{
	int idx = find_index(c, section, name);
	assert(idx >= 0 && "undeclared configuration key");
	return parse_value(&c->keys[idx], value, origin, origin, &c->vals[idx], e);
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

const struct cfg_value *cfg_value_of(const struct cfg *c, const char *section,
				     const char *name)
{
	int idx = find_index(c, section, name);
	return idx < 0 ? NULL : &c->vals[idx];
}

int cfg_holds_default(const struct cfg *c, const char *section, const char *name)
{
	const struct cfg_key *k;
	const struct cfg_value *v = lookup(c, section, name, &k);
	struct cfg_value def;
	/* the default in the same canonical text as any value (cfg_init parsed it so) */
	return parse_value(k, k->def, "default", "default", &def, NULL) == ERR_OK &&
	       !strcmp(def.text, v->text);
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

int cfg_diff(const struct cfg *a, const struct cfg *b, unsigned flags, unsigned skip,
	     char *out, size_t outlen)
{
	size_t used = 0;
	int ndiff = 0, full = 0;
	char item[700];

	if (out && outlen)
		out[0] = '\0';
	for (int i = 0; i < a->n; i++) {
		const struct cfg_key *k = &a->keys[i];
		if (!(k->flags & flags) || (k->flags & skip))
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
		if (!(k->flags & flags) || (k->flags & skip) || find_index(a, k->section, k->name) >= 0)
			continue;
		ndiff++;
		snprintf(item, sizeof item, "%s.%s: (absent) != %s", k->section, k->name,
			 b->vals[j].text);
		append_item(out, outlen, &used, &full, item);
	}
	return ndiff;
}
