/*
 * engine_keep: the engines one protocol holds open across its steps, so that the steps
 * on the same devices share one engine (its device threads, devices and collective; on
 * a GPU its streams, cuBLAS handles and NCCL communicators) instead of each making its
 * own.
 *
 * engine_keep_take() hands out a held engine that fits the step's settings
 * (engine_fits), reset to what a new engine would be (engine_reset), or creates one and
 * holds it; engine_keep_give() takes it back. A poisoned engine (an operation of an
 * earlier step failed on it, so its barrier or collective may be aborted) is never
 * handed out again: it is destroyed and a new one made in its place. With several
 * processes they first agree on that (one process's poisoned engine is replaced by
 * all), since making a collective is a meeting of every process.
 *
 * A command that runs alone passes no keep (NULL): take creates an engine, give
 * destroys it.
 */
#ifndef DDPTOK_ENGINE_KEEP_H
#define DDPTOK_ENGINE_KEEP_H

#include "engine.h"

/* Engines held at once: the protocol's own, exact mode's two other device counts and the
 * exercise's two ranks; beyond that the least recently made idle one is destroyed. */
#define ENGINE_KEEP_MAX 4

struct engine_keep {
	struct engine *eng[ENGINE_KEEP_MAX];
	int lent[ENGINE_KEEP_MAX]; /* handed out and not given back */
	int n;
	int created;  /* engines it created */
	int reused;   /* times it handed out a held engine again, reset */
	int replaced; /* poisoned engines it destroyed instead of reusing */
};

void engine_keep_init(struct engine_keep *k);
/* An engine for settings s on corpus c with options opts (NULL: the defaults), as
 * engine_create would give it: a held one reset, or a new one (k NULL: always new). */
int engine_keep_take(struct engine_keep *k, const struct settings *s, const struct corpus *c,
		     const struct engine_opts *opts, struct engine **out, struct err *e);
/* Gives back what take handed out (k NULL: destroys it). */
void engine_keep_give(struct engine_keep *k, struct engine *eng);
/* Destroys every engine held. */
void engine_keep_close(struct engine_keep *k);

#endif
