/*
 * step_elastic: the protocol's elastic step (exact mode): checkpoint `from` resumed on
 * the other valid device counts next to devices.world, each compared with the continuous
 * run `cont` (bit for bit).
 */
#ifndef DDPTOK_STEP_ELASTIC_H
#define DDPTOK_STEP_ELASTIC_H

#include "app.h"
#include "checks.h"
#include "train_loop.h"

struct elastic_check {
	int from_world;
	int runs;                       /* 0: no other valid world (train.shards = 1) */
	int worlds[2];
	struct resume_check resume[2];
	int ok;
};
int elastic_step(struct app *a, const char *from, const struct train_result *cont,
		 struct elastic_check *res, struct err *e);

#endif
