/*
 * elastic: exact mode's per-shard histories, machine record and resume on another device
 * count (see elastic.h).
 */
#include "elastic.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "ddptok_config.h"
#include "gemm.h"
#include "machine.h"
#if DDPTOK_HAVE_CUDA
#include "gpu.h"
#endif

void elastic_history_add(struct train_history *shard_hist, const struct window *w,
			 int declined)
{
	for (int s = 0; s < w->world * w->micro; s++) {
		const struct microbatch *mb = shard_of(w, s);
		shard_hist[s].windows++;
		shard_hist[s].declined += declined != 0;
		shard_hist[s].sequences += mb->n;
		shard_hist[s].tokens += mb->tokens;
	}
}

void elastic_rank_history(const struct train_history *shard_hist, int shards, int world,
			  int64_t step, struct train_history *hist)
{
	int per = shards / world;
	for (int r = 0; r < world; r++) {
		memset(&hist[r], 0, sizeof hist[r]);
		hist[r].windows = step;
		hist[r].declined = shard_hist[0].declined; /* a window is declined by all */
		for (int s = r * per; s < (r + 1) * per; s++) {
			hist[r].sequences += shard_hist[s].sequences;
			hist[r].tokens += shard_hist[s].tokens;
		}
	}
}

int elastic_check_rank_totals(const char *dir, const struct elastic_record *rec,
			      const struct train_history *hist, int world, int64_t step,
			      struct err *e)
{
	struct train_history want[MAX_WORLD];
	if (rec->shards == 0)
		return ERR_OK;
	if (world < 1 || world > MAX_WORLD || rec->shards % world)
		return ERR(e, ERR_DATA, "checkpoint %s: %d ranks cannot share %d shards", dir,
			   world, rec->shards);
	elastic_rank_history(rec->shard_hist, rec->shards, world, step, want);
	for (int r = 0; r < world; r++)
		if (memcmp(&want[r], &hist[r], sizeof want[r]) != 0)
			return ERR(e, ERR_DATA, "checkpoint %s: rank-%d.json's history (%" PRId64
				   " sequences, %" PRId64 " tokens) is not what its shards in "
				   "state.json add up to (%" PRId64 " sequences, %" PRId64 " tokens)",
				   dir, r, hist[r].sequences, hist[r].tokens, want[r].sequences,
				   want[r].tokens);
	return ERR_OK;
}

void elastic_machine(const struct engine *eng, char *out, size_t cap)
{
	char what[400] = "";
	if (eng->placement.backend == DEV_BACKEND_CUDA) {
#if DDPTOK_HAVE_CUDA
		gpu_describe(eng->placement.ids, eng->world, what, sizeof what);
#endif
	} else {
		machine_cpu_describe(what, sizeof what);
	}
	snprintf(out, cap, "%s: %s", engine_backend_name(eng), what);
}

const char *elastic_gemm(const struct engine *eng)
{
	return eng->placement.backend == DEV_BACKEND_CPU ? gemm_impl_name(gemm_chosen()) : NULL;
}

int elastic_check_gemm(const char *dir, const char *recorded, const struct engine *eng,
		       int allow, int *changed, struct err *e)
{
	const char *now = elastic_gemm(eng);
	*changed = 0;
	if (!now || !recorded[0] || strcmp(recorded, now) == 0)
		return ERR_OK;
	if (!allow)
		return ERR(e, ERR_DATA, "checkpoint %s was trained with the %s GEMM and this run "
			   "would use %s: a run keeps one GEMM implementation, whose rounding its "
			   "bits hold; set devices.gemm = %s to resume it, or pass "
			   "--allow-gemm-change to go on with %s (recorded as a change)", dir,
			   recorded, now, recorded, now);
	*changed = 1;
	return ERR_OK;
}

void *elastic_state_json(const struct settings *s, const struct train_history *shard_hist)
{
	if (s->shards <= 0)
		return NULL;
	json_t *hist = json_array();
	for (int k = 0; k < s->shards; k++)
		json_array_append_new(hist, train_history_json(&shard_hist[k]));
	return json_pack("{s:i, s:s, s:o}", "shards", s->shards, "shard_order",
			 s->shard_order == SHARD_ORDER_BALANCED ? "balanced" : "length", "history",
			 hist);
}

int elastic_state_parse(const char *dir, void *st, int64_t step, struct elastic_record *rec,
			struct err *e)
{
	json_t *m = json_object_get(st, "machine"), *x = json_object_get(st, "exact");
	json_t *g = json_object_get(st, "gemm");
	snprintf(rec->machine, sizeof rec->machine, "%s",
		 json_is_string(m) ? json_string_value(m) : "unrecorded");
	snprintf(rec->gemm, sizeof rec->gemm, "%s", json_is_string(g) ? json_string_value(g) : "");
	rec->shards = 0;
	if (!x)
		return ERR_OK;
	json_t *k = json_object_get(x, "shards"), *hist = json_object_get(x, "history");
	int64_t shards = json_is_integer(k) ? json_integer_value(k) : -1;
	if (shards < 1 || shards > SHARD_MAX || (shards & (shards - 1)) ||
	    !json_is_array(hist) || json_array_size(hist) != (size_t)shards)
		return ERR(e, ERR_DATA, "checkpoint %s: state.json: \"exact\" holds no valid shard "
			   "count and history", dir);
	for (int s = 0; s < shards; s++) {
		struct train_history *h = &rec->shard_hist[s];
		if (train_history_parse(json_array_get(hist, (size_t)s), h) ||
		    !train_history_fits(h, step))
			return ERR(e, ERR_DATA, "checkpoint %s: state.json: the history of shard %d "
				   "does not fit %" PRId64 " steps", dir, s, step);
	}
	rec->shards = (int)shards;
	return ERR_OK;
}

int elastic_resizable(const struct cfg *cur, const struct cfg *stored)
{
	long long k = cfg_int(cur, "train", "shards");
	return k > 0 && cfg_int(stored, "train", "shards") == k;
}

int elastic_world_ok(int world, int shards, const struct settings *s)
{
	return world == s->world || (s->shards > 0 && shards == s->shards);
}

int elastic_check_machine(const struct env *v, const char *dir, const char *backend,
			  const char *machine, const struct engine *eng, struct err *e)
{
	char now[512];
	if (strcmp(backend, engine_backend_name(eng)) != 0) {
		if (v->s->shards <= 0)
			return ERR_OK; /* the trainer notes the change of backend */
		return ERR(e, ERR_DATA, "checkpoint %s was written by the %s backend and this run uses "
			   "%s: exact mode promises identical bits on one backend only (other GEMM "
			   "kernels), so bitwise continuation is not possible here; resume it with "
			   "devices.backend = %s", dir, backend, engine_backend_name(eng), backend);
	}
	elastic_machine(eng, now, sizeof now);
	if (strcmp(machine, now) != 0)
		env_info(v, "%s: note: checkpoint %s was written on [%s], this run is on [%s]: "
			 "identical bits are promised only on one machine type and set of library "
			 "versions, so bitwise continuation is not promised here", v->command, dir,
			 machine, now);
	return ERR_OK;
}
