/*
 * data_text: the text source's reader: the documents of text_docs.h, tokenized by the
 * configured tokenizer on every core, each followed by the end-of-text id (a target: the
 * model learns where a document ends); a prompt's ids are context (mask 0), its
 * completion's and the end-of-text id targets.
 */
#ifndef DDPTOK_DATA_TEXT_H
#define DDPTOK_DATA_TEXT_H

#include "data.h"
#include "err.h"

int data_read_text(struct data_set *d, const char *path, struct err *e);

#endif
