/*
 * text_docs: the documents of the text source ([data] source = text), as text, before
 * they are tokenized: what data_text.c encodes and tokenizer-train learns from.
 *
 * [data] path is a .txt or .jsonl file, or a directory whose *.txt and *.jsonl files are
 * read in name order. A .txt file is one document, or several separated by
 * [data] delimiter; empty documents are skipped. A .jsonl file holds one object a line:
 * {"text": ...} or {"prompt": ..., "completion": ...}, with an optional "split" ("train",
 * "validation", "test"); other keys are ignored, blank lines skipped.
 *
 * Bytes that are not UTF-8 are refused, naming the file and the byte offset in it, or
 * replaced by U+FFFD ([data] invalid_utf8), as Python's errors="replace" does.
 */
#ifndef DDPTOK_TEXT_DOCS_H
#define DDPTOK_TEXT_DOCS_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "err.h"

struct text_doc {
	const char *prompt; /* NULL: none (every token a target) */
	size_t prompt_len;
	const char *text;   /* the document, or the completion */
	size_t len;
	int split;          /* enum split, or DATA_SPLIT_BY_RULE */
	const char *file;   /* where it was found, for messages */
	int64_t line;       /* jsonl: its line; 0 for a .txt document */
};

struct text_docs {
	struct text_doc *doc;
	size_t n, cap;
	char **files;       /* the files read, in order */
	size_t n_files;
	struct data_map *maps; /* their mappings, which the .txt documents point into */
	char **owned;       /* the strings the documents point into otherwise */
	size_t n_owned, cap_owned;
	size_t replaced;    /* invalid sequences replaced by U+FFFD */
};

struct text_read_opts {
	const char *delimiter; /* escapes already read; "" or NULL: one document per file */
	int replace_invalid;   /* 1: U+FFFD; 0: refused */
};

/* Reads every document under path into t; each file's bytes enter d's files digest
 * (data_map_file), and d reports the reading of each file. */
int text_docs_read(struct text_docs *t, struct data_set *d, const char *path,
		   const struct text_read_opts *o, struct err *e);
void text_docs_free(struct text_docs *t);

/* [data] delimiter with its escapes (\n, \t, \\) read into out (cap bytes): ERR_CONFIG
 * for another escape or a text too long. */
int text_delimiter(const char *written, char *out, size_t cap, struct err *e);

#endif
