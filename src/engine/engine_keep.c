/*
 * engine_keep: engines held across the steps of a protocol (see engine_keep.h).
 */
#include "engine_keep.h"

#include <string.h>

#include "world.h"

void engine_keep_init(struct engine_keep *k)
{
	memset(k, 0, sizeof *k);
}

/* The first idle engine that fits s, or -1. */
static int keep_find(const struct engine_keep *k, const struct settings *s)
{
	for (int i = 0; i < k->n; i++)
		if (!k->lent[i] && engine_fits(k->eng[i], s))
			return i;
	return -1;
}

/* Destroys engine i and closes the gap (the order stays that of creation). */
static void keep_drop(struct engine_keep *k, int i)
{
	engine_destroy(k->eng[i]);
	for (int j = i; j + 1 < k->n; j++) {
		k->eng[j] = k->eng[j + 1];
		k->lent[j] = k->lent[j + 1];
	}
	k->n--;
}

/* Whether engine i is poisoned on any process: they all decide alike, so that every
 * process makes its new collective together. */
static int keep_poisoned(const struct engine_keep *k, int i, double timeout_s, int *poisoned,
			 struct err *e)
{
	*poisoned = k->eng[i]->poisoned;
	return world_max_int(poisoned, timeout_s, "the agreement on reusing an engine", e);
}

/* Makes room for one more engine: the oldest idle one goes. */
static int keep_room(struct engine_keep *k, struct err *e)
{
	if (k->n < ENGINE_KEEP_MAX)
		return ERR_OK;
	for (int i = 0; i < k->n; i++)
		if (!k->lent[i]) {
			keep_drop(k, i);
			return ERR_OK;
		}
	return ERR(e, ERR_USAGE, "%d engines are in use at once: no room for another",
		   ENGINE_KEEP_MAX);
}

int engine_keep_take(struct engine_keep *k, const struct settings *s, const struct corpus *c,
		     const struct engine_opts *opts, struct engine **out, struct err *e)
{
	*out = NULL;
	if (!k)
		return engine_create(s, c, opts, out, e);
	int i = keep_find(k, s), poisoned = 0;
	if (i >= 0) {
		ERR_TRY(keep_poisoned(k, i, s->timeout_s, &poisoned, e));
		if (!poisoned) {
			ERR_TRY(engine_reset(k->eng[i], s, c, opts, e));
			k->lent[i] = 1;
			k->reused++;
			*out = k->eng[i];
			return ERR_OK;
		}
		keep_drop(k, i);
		k->replaced++;
	}
	struct engine *made;
	ERR_TRY(keep_room(k, e));
	ERR_TRY(engine_create(s, c, opts, &made, e));
	k->eng[k->n] = made;
	k->lent[k->n++] = 1;
	k->created++;
	*out = made;
	return ERR_OK;
}

void engine_keep_give(struct engine_keep *k, struct engine *eng)
{
	if (!k) {
		engine_destroy(eng);
		return;
	}
	for (int i = 0; i < k->n; i++)
		if (k->eng[i] == eng) {
			k->lent[i] = 0;
			eng->corpus = NULL; /* the step's corpus goes with it */
			return;
		}
	engine_destroy(eng); /* not one of k's (never the case): not leaked */
}

void engine_keep_close(struct engine_keep *k)
{
	while (k->n > 0)
		keep_drop(k, k->n - 1);
}
