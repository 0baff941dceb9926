/*
 * data_jsonl: one sequence per line, as a JSON object
 *     {"tokens": [ids...], "mask": [0 or 1 (or false/true) per token], "split": "train"}
 * "mask" is optional (absent: every token a target), and so is "split" ("train",
 * "validation" or "test"; absent: the split rule decides). Other keys are ignored, so a
 * file that also carries the text can be read as it is. Blank lines are skipped.
 *
 * The file is memory-mapped and parsed one line at a time (jansson), so a large file is
 * never held twice; every error names the file and the line.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "data_jsonl.h"

struct jsonl_buf {
	int64_t *tokens, *mask;
	size_t cap;
};

static int buf_reserve(struct jsonl_buf *b, size_t n)
{
	int64_t *t, *m;
	if (n <= b->cap)
		return 0;
	t = realloc(b->tokens, n * sizeof *t);
	if (t)
		b->tokens = t;
	m = t ? realloc(b->mask, n * sizeof *m) : NULL;
	if (!m)
		return -1;
	b->mask = m;
	b->cap = n;
	return 0;
}

static int parse_split(const json_t *v, const char *file, int64_t line, int *split,
		       struct err *e)
{
	if (!v) {
		*split = DATA_SPLIT_BY_RULE;
		return ERR_OK;
	}
	if (json_is_string(v) && (*split = data_split_parse(json_string_value(v))) >= 0)
		return ERR_OK;
	return ERR(e, ERR_DATA, "%s:%" PRId64 ": \"split\" must be \"train\", \"validation\" or "
		   "\"test\"", file, line);
}

/* Copies the integers of "tokens" and the 0/1 values of "mask" into b. */
static int parse_arrays(const json_t *obj, const char *file, int64_t line,
			struct jsonl_buf *b, size_t *len, int *has_mask, struct err *e)
{
	const json_t *tok = json_object_get(obj, "tokens"), *mask = json_object_get(obj, "mask");
	size_t n;

	if (!json_is_array(tok))
		return ERR(e, ERR_DATA, "%s:%" PRId64 ": no \"tokens\" array", file, line);
	n = json_array_size(tok);
	if (mask && (!json_is_array(mask) || json_array_size(mask) != n))
		return ERR(e, ERR_DATA, "%s:%" PRId64 ": \"mask\" must be an array as long as "
			   "\"tokens\" (%zu)", file, line, n);
	if (buf_reserve(b, n + 1))
		return ERR(e, ERR_NOMEM, "%s:%" PRId64 ": out of memory for %zu tokens", file,
			   line, n);
	for (size_t k = 0; k < n; k++) {
		const json_t *t = json_array_get(tok, k);
		if (!json_is_integer(t))
			return ERR(e, ERR_DATA, "%s:%" PRId64 ": tokens[%zu] is not an integer", file,
				   line, k);
		b->tokens[k] = json_integer_value(t);
		if (mask) {
			const json_t *m = json_array_get(mask, k);
			if (json_is_boolean(m))
				b->mask[k] = json_is_true(m);
			else if (json_is_integer(m))
				b->mask[k] = json_integer_value(m);
			else
				return ERR(e, ERR_DATA, "%s:%" PRId64 ": mask[%zu] is neither 0/1 nor "
					   "false/true", file, line, k);
		}
	}
	*len = n;
	*has_mask = mask != NULL;
	return ERR_OK;
}

static int add_line(struct data_set *d, const char *file, int64_t line, const char *text,
		    size_t len, struct jsonl_buf *b, struct err *e)
{
	json_error_t jerr;
	json_t *obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	size_t n = 0;
	int split = DATA_SPLIT_BY_RULE, has_mask = 0, rc;

	if (!obj)
		return ERR(e, ERR_DATA, "%s:%" PRId64 ": not valid JSON (column %d): %s", file, line,
			   jerr.column, jerr.text);
	if (!json_is_object(obj))
		rc = ERR(e, ERR_DATA, "%s:%" PRId64 ": not a JSON object", file, line);
	else
		rc = parse_arrays(obj, file, line, b, &n, &has_mask, e);
	if (!rc)
		rc = parse_split(json_object_get(obj, "split"), file, line, &split, e);
	json_decref(obj);
	if (!rc) {
		struct data_ints t = { b->tokens, DATA_I64 }, m = { has_mask ? b->mask : NULL, DATA_I64 };
		struct data_where w = { file, line, 0, NULL };
		rc = data_add(d, &t, &m, (int64_t)n, split, &w, e);
	}
	return rc;
}

static int blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return 0;
	return 1;
}

int data_read_jsonl(struct data_set *d, const char *path, struct err *e)
{
	struct data_map map;
	struct jsonl_buf b = { NULL, NULL, 0 };
	int64_t line = 0;
	size_t at = 0;
	int rc = data_map_file(d, path, &map, e);

	while (!rc && at < map.len) {
		const char *start = (const char *)map.p + at;
		const char *nl = memchr(start, '\n', map.len - at);
		size_t n = nl ? (size_t)(nl - start) : map.len - at;
		line++;
		if (!blank(start, n))
			rc = add_line(d, path, line, start, n, &b, e);
		at += n + 1;
		if ((line & 1023) == 0)
			data_report_read(d, path, at < map.len ? at : map.len, map.len);
	}
	free(b.tokens);
	free(b.mask);
	data_unmap(&map);
	return rc;
}
