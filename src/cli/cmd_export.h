/*
 * cmd_export: `export --llmc FILE`, a gpt checkpoint's weights as an llm.c GPT-2 model
 * file (gpt_llmc.h), which llm.c's trainer and `model.init = llmc:FILE` start from.
 */
#ifndef DDPTOK_CMD_EXPORT_H
#define DDPTOK_CMD_EXPORT_H

#include "app.h"
#include "checkpoint.h"

int cmd_export(struct app *a, struct err *e);
/* For the commands that read one gpt checkpoint (export, sample): refuses another
 * model.kind naming `what`, chooses the checkpoint as evaluate does (--checkpoint or the
 * latest run's newest valid one), loads it with its corpus (checked against this
 * configuration's shape and data lock) into ck and c. Free both on success. */
int cmd_export_load_gpt(struct app *a, const char *what, struct checkpoint *ck,
			struct corpus *c, struct err *e);

#endif
