/*
 * elastic: exact mode's checkpoints resume on another device count.
 *
 * In exact mode ([train] shards = K) nothing a window computes depends on W: the sampler
 * draws one list per window, and the gradient is one tree over the K shards. What a
 * checkpoint records per rank (rank-R.json's history) does, so the trainer also keeps a
 * history per shard, stored in state.json ("exact": shards, shard_order, history); the
 * rank histories at any W are then sums over the ranks' shards, and a run resumed on
 * another W writes the rank files a run on that W from the start would have written.
 * devices.world and train.accumulation (K / W) are then the only math keys a resume may
 * change, and only in exact mode.
 *
 * Identical bits are promised on one backend, machine type and set of library versions:
 * every checkpoint records them (state.json "machine": the GEMM implementation, its build
 * and kernels, or
 * the GPU model, count and SMs, the driver and the CUDA runtime, cuBLAS and NCCL
 * versions). An exact-mode resume on another backend is refused; any resume on another
 * machine type or library versions goes on, saying that bitwise continuation is not
 * promised there. The cpu backend's GEMM implementation (state.json "gemm") is stricter:
 * one per run, so a resume under another one is refused unless allowed explicitly, and
 * then recorded as a change of devices.gemm.
 */
#ifndef DDPTOK_ELASTIC_H
#define DDPTOK_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "env.h"
#include "settings.h"
#include "shard.h"
#include "train_history.h"

/* What a checkpoint records for this: the machine its bits depended on and, in exact mode,
 * the history of every shard. */
struct elastic_record {
	char machine[512];   /* what the bits depended on (see above), or "unrecorded" */
	char gemm[16];       /* cpu backend: the GEMM implementation (gemm.h), "" unrecorded */
	int shards;          /* exact mode's K, 0 outside it */
	struct train_history shard_hist[SHARD_MAX]; /* exact mode: per shard */
};

/* Adds one window to the per-shard histories (exact mode: shard_hist[0..K)). */
void elastic_history_add(struct train_history *shard_hist, const struct window *w,
			 int declined);
/* The per-rank histories hist[0..world) at `step` from the K per-shard ones. */
void elastic_rank_history(const struct train_history *shard_hist, int shards, int world,
			  int64_t step, struct train_history *hist);
/* Exact mode: the rank histories hist[0..world) of checkpoint dir must be what its shard
 * histories add up to (each rank computed its block of shards): ERR_DATA naming the first
 * rank that differs. Nothing to check outside exact mode (rec->shards = 0). */
int elastic_check_rank_totals(const char *dir, const struct elastic_record *rec,
			      const struct train_history *hist, int world, int64_t step,
			      struct err *e);
/* What the engine's bits depend on beyond the program, in words (see above). */
void elastic_machine(const struct engine *eng, char *out, size_t cap);
/* The GEMM implementation whose bits the engine's results hold (gemm.h's name), NULL
 * off the cpu backend. */
const char *elastic_gemm(const struct engine *eng);
/* A resume from checkpoint dir whose GEMM was `recorded` ("" unrecorded: nothing to
 * check) under this engine's: ERR_DATA naming both when they differ, unless `allow`;
 * *changed is then 1 (else 0). */
int elastic_check_gemm(const char *dir, const char *recorded, const struct engine *eng,
		       int allow, int *changed, struct err *e);
/* state.json's "exact" object (a json_t *; NULL outside exact mode): the shards and shard
 * order of s and the per-shard histories. */
void *elastic_state_json(const struct settings *s, const struct train_history *shard_hist);
/* Reads state.json's "machine" and, when present, its "exact" object into rec (a
 * checkpoint of exact mode must have one that fits its `step` steps). st is the
 * state.json object of checkpoint dir. */
int elastic_state_parse(const char *dir, void *st, int64_t step, struct elastic_record *rec,
			struct err *e);
/* Whether both configurations are in exact mode with the same shards: the device count
 * may change there (the KEY_ELASTIC keys, devices.world and train.accumulation, may
 * differ between the checkpoint and the resume). */
int elastic_resizable(const struct cfg *cur, const struct cfg *stored);
/* Whether a checkpoint of `world` ranks and `shards` shards (0: not exact mode) may run
 * on the world of settings s (always on its own world; another one only in exact mode
 * with the same shards). */
int elastic_world_ok(int world, int shards, const struct settings *s);
/* A resume from checkpoint dir, written by `backend` on `machine`: in exact mode refused
 * on another backend; in any mode, on another machine type or library versions, a note
 * that bitwise continuation is not promised. */
int elastic_check_machine(const struct env *v, const char *dir, const char *backend,
			  const char *machine, const struct engine *eng, struct err *e);

#endif
