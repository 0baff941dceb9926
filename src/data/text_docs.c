/*
 * text_docs: gathering the documents of the text source (see text_docs.h).
 */
#include "text_docs.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fsx.h"
#include "utf8.h"

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && !strcmp(s + n - k, tail);
}

static int add_doc(struct text_docs *t, const struct text_doc *doc, struct err *e)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct text_doc *p = realloc(t->doc, cap * sizeof *p);
		if (!p)
			return ERR(e, ERR_NOMEM, "%s: out of memory for %zu documents", doc->file, cap);
		t->doc = p;
		t->cap = cap;
	}
	t->doc[t->n++] = *doc;
	return ERR_OK;
}

/* keeps p (malloc'd) until text_docs_free; frees it and fails when it cannot */
static int own(struct text_docs *t, char *p, struct err *e)
{
	if (t->n_owned == t->cap_owned) {
		size_t cap = t->cap_owned ? t->cap_owned * 2 : 1024;
		char **q = realloc(t->owned, cap * sizeof *q);
		if (!q) {
			free(p);
			return ERR(e, ERR_NOMEM, "text: out of memory");
		}
		t->owned = q;
		t->cap_owned = cap;
	}
	t->owned[t->n_owned++] = p;
	return ERR_OK;
}

/* The text of a file or a line, valid UTF-8: as it is, or repaired into an owned copy;
 * `base` is the text's offset in its file, for the message. */
static int valid_text(struct text_docs *t, const struct text_read_opts *o, const char *file,
		      uint64_t base, const char **p, size_t *n, struct err *e)
{
	size_t bad = utf8_invalid_at(*p, *n), replaced;
	char *fixed;
	if (bad == *n)
		return ERR_OK;
	if (!o->replace_invalid)
		return ERR(e, ERR_DATA, "%s: byte %" PRIu64 ": not UTF-8 (0x%02x); [data] "
			   "invalid_utf8 = replace puts U+FFFD in its place", file, base + bad,
			   (unsigned)(unsigned char)(*p)[bad]);
	if (utf8_repair(*p, *n, &fixed, n, &replaced))
		return ERR(e, ERR_NOMEM, "%s: out of memory", file);
	t->replaced += replaced;
	*p = fixed;
	return own(t, fixed, e);
}

static int read_txt(struct text_docs *t, const struct data_map *m, const char *file,
		    const struct text_read_opts *o, struct err *e)
{
	const char *p = (const char *)m->p;
	size_t n = m->len, dl = o->delimiter ? strlen(o->delimiter) : 0;
	ERR_TRY(valid_text(t, o, file, 0, &p, &n, e));
	while (n > 0) {
		const char *cut = dl ? memmem(p, n, o->delimiter, dl) : NULL;
		size_t len = cut ? (size_t)(cut - p) : n;
		struct text_doc doc = { NULL, 0, p, len, DATA_SPLIT_BY_RULE, file, 0 };
		if (len)
			ERR_TRY(add_doc(t, &doc, e));
		if (!cut)
			break;
		p = cut + dl;
		n -= len + dl;
	}
	return ERR_OK;
}

/* A JSON string member as an owned copy (jansson's strings are valid UTF-8). */
static int member(struct text_docs *t, const json_t *obj, const char *name, const char **p,
		  size_t *n, struct err *e)
{
	const json_t *v = json_object_get(obj, name);
	*p = NULL;
	*n = 0;
	if (!v)
		return ERR_OK;
	if (!json_is_string(v))
		return ERR(e, ERR_DATA, "\"%s\" is not a string", name);
	*n = json_string_length(v);
	char *copy = malloc(*n + 1);
	if (!copy)
		return ERR(e, ERR_NOMEM, "out of memory for \"%s\"", name);
	memcpy(copy, json_string_value(v), *n + 1);
	*p = copy;
	return own(t, copy, e);
}

static int parse_record(struct text_docs *t, const json_t *obj, struct text_doc *doc,
			struct err *e)
{
	const char *split;
	size_t split_len;
	if (!json_is_object(obj))
		return ERR(e, ERR_DATA, "not a JSON object");
	ERR_TRY(member(t, obj, "text", &doc->text, &doc->len, e));
	if (doc->text && json_object_get(obj, "completion"))
		return ERR(e, ERR_DATA, "both \"text\" and \"completion\": give one");
	if (!doc->text) {
		ERR_TRY(member(t, obj, "prompt", &doc->prompt, &doc->prompt_len, e));
		ERR_TRY(member(t, obj, "completion", &doc->text, &doc->len, e));
		if (!doc->prompt || !doc->text)
			return ERR(e, ERR_DATA, "expected \"text\", or \"prompt\" and \"completion\"");
	}
	ERR_TRY(member(t, obj, "split", &split, &split_len, e));
	doc->split = split ? data_split_parse(split) : DATA_SPLIT_BY_RULE;
	if (doc->split < 0)
		return ERR(e, ERR_DATA, "\"split\" must be \"train\", \"validation\" or \"test\"");
	return ERR_OK;
}

static int read_jsonl_line(struct text_docs *t, const char *file, int64_t line, uint64_t base,
			   const char *p, size_t n, const struct text_read_opts *o, struct err *e)
{
	json_error_t jerr;
	struct text_doc doc = { NULL, 0, NULL, 0, DATA_SPLIT_BY_RULE, file, line };
	ERR_TRY(valid_text(t, o, file, base, &p, &n, e));
	json_t *obj = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!obj)
		return ERR(e, ERR_DATA, "%s:%" PRId64 ": not valid JSON (column %d): %s", file,
			   line, jerr.column, jerr.text);
	int rc = parse_record(t, obj, &doc, e);
	json_decref(obj);
	if (rc) {
		err_prefix(e, "%s:%" PRId64, file, line);
		return rc;
	}
	return doc.len || doc.prompt_len ? add_doc(t, &doc, e) : ERR_OK;
}

static int read_jsonl(struct text_docs *t, struct data_set *d, const struct data_map *m,
		      const char *file, const struct text_read_opts *o, struct err *e)
{
	const char *text = (const char *)m->p;
	size_t at = 0;
	for (int64_t line = 1; at < m->len; line++) {
		const char *nl = memchr(text + at, '\n', m->len - at);
		size_t n = nl ? (size_t)(nl - text - at) : m->len - at;
		size_t k = 0;
		while (k < n && strchr(" \t\r", text[at + k]))
			k++;
		if (k < n)
			ERR_TRY(read_jsonl_line(t, file, line, at, text + at, n, o, e));
		at += n + 1;
		if ((line & 1023) == 0)
			data_report_read(d, file, at < m->len ? at : m->len, m->len);
	}
	return ERR_OK;
}

/* the files under path: itself, or a directory's *.txt and *.jsonl in name order */
static int list_files(struct text_docs *t, const char *path, struct err *e)
{
	char **names = NULL, full[FSX_PATH_MAX];
	size_t count = 0;
	if (!fsx_is_dir(path)) {
		names = malloc(sizeof *names);
		if (!names || !(names[0] = strdup(path))) {
			free(names);
			return ERR(e, ERR_NOMEM, "%s: out of memory", path);
		}
		t->files = names;
		t->n_files = 1;
		return ERR_OK;
	}
	ERR_TRY(fsx_list_dir(path, &names, &count, e));
	t->files = calloc(count ? count : 1, sizeof *t->files);
	for (size_t i = 0; t->files && i < count; i++)
		if ((ends_with(names[i], ".txt") || ends_with(names[i], ".jsonl")) &&
		    !fsx_join(full, sizeof full, path, names[i], NULL))
			t->files[t->n_files++] = strdup(full);
	fsx_free_names(names, count);
	if (!t->files)
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	for (size_t i = 0; i < t->n_files; i++)
		if (!t->files[i])
			return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	if (!t->n_files)
		return ERR(e, ERR_DATA, "%s: no .txt or .jsonl file in this directory", path);
	return ERR_OK;
}

int text_docs_read(struct text_docs *t, struct data_set *d, const char *path,
		   const struct text_read_opts *o, struct err *e)
{
	memset(t, 0, sizeof *t);
	ERR_TRY(list_files(t, path, e));
	if (!(t->maps = calloc(t->n_files, sizeof *t->maps)))
		return ERR(e, ERR_NOMEM, "%s: out of memory", path);
	for (size_t i = 0; i < t->n_files; i++) {
		const char *file = t->files[i];
		ERR_TRY(data_map_file(d, file, &t->maps[i], e));
		if (ends_with(file, ".jsonl"))
			ERR_TRY(read_jsonl(t, d, &t->maps[i], file, o, e));
		else
			ERR_TRY(read_txt(t, &t->maps[i], file, o, e));
		data_report_read(d, file, t->maps[i].len, t->maps[i].len);
	}
	return ERR_OK;
}

void text_docs_free(struct text_docs *t)
{
	for (size_t i = 0; i < t->n_files; i++) {
		if (t->maps)
			data_unmap(&t->maps[i]);
		free(t->files[i]);
	}
	for (size_t i = 0; i < t->n_owned; i++)
		free(t->owned[i]);
	free(t->files);
	free(t->maps);
	free(t->owned);
	free(t->doc);
	memset(t, 0, sizeof *t);
}

int text_delimiter(const char *written, char *out, size_t cap, struct err *e)
{
	size_t w = 0;
	for (const char *p = written; *p; p++) {
		char c = *p;
		if (c == '\\') {
			c = p[1] == 'n' ? '\n' : p[1] == 't' ? '\t' : p[1] == '\\' ? '\\' : 0;
			if (!c)
				return ERR(e, ERR_CONFIG, "[data] delimiter = %s: only \\n, \\t and \\\\ "
					   "are escapes", written);
			p++;
		}
		if (w + 1 >= cap)
			return ERR(e, ERR_CONFIG, "[data] delimiter = %s: too long", written);
		out[w++] = c;
	}
	out[w] = '\0';
	return ERR_OK;
}
