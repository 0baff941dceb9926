/*
 * cmd_tokenize: the tokenize and tokenizer-train commands, which read only the
 * configuration's [tokenizer] (and, for training, [data]): no corpus, no model.
 */
#ifndef DDPTOK_CMD_TOKENIZE_H
#define DDPTOK_CMD_TOKENIZE_H

#include "app.h"
#include "err.h"

/* tokenize FILE: the ids of the text, whitespace-separated, on stdout; --decode FILE:
 * the text of the ids; --bench FILE: encoding speed, one thread and every core. */
int cmd_tokenize(struct app *a, struct err *e);
/* tokenizer-train: a SentencePiece model ([tokenizer] train_type, train_vocab) trained on
 * the text of [data] path, written to [tokenizer] file. */
int cmd_tokenizer_train(struct app *a, struct err *e);

#endif
