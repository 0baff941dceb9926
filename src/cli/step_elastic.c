/*
 * step_elastic: the protocol's elastic step (exact mode only): the stopped run's checkpoint
 * is resumed on other device counts, to the end of the run, and each must end where the
 * continuous run ended, in every bit of the parameters and momentum.
 *
 * The other worlds are the neighbours of devices.world among the valid ones (a power of
 * two dividing train.shards, at most 8): twice as many devices and half as many (or one),
 * e.g. 2 -> 4 and 2 -> 1. Each resumed run gets the configuration with devices.world and
 * train.accumulation (shards / world) changed, writes no checkpoint and no metrics (its
 * state is compared in memory), and uses the protocol's options otherwise (--inject-drift
 * included: a drifted resume must fail here too).
 */
#include "step_elastic.h"

#include <stdio.h>
#include <string.h>

/* The configuration of a with devices.world = world (accumulation following), into
 * copy and s. */
static int config_for_world(const struct app *a, int world, struct cfg *copy,
			    struct settings *s, struct err *e)
{
	char assign[2][64];
	ERR_TRY(cfg_init(copy, a->cfg.keys, e));
	for (int i = 0; i < a->cfg.n; i++)
		copy->vals[i] = a->cfg.vals[i];
	snprintf(copy->path, sizeof copy->path, "%s", a->cfg.path);
	snprintf(assign[0], sizeof assign[0], "devices.world=%d", world);
	snprintf(assign[1], sizeof assign[1], "train.accumulation=%d", a->s.shards / world);
	for (int k = 0; k < 2; k++)
		ERR_TRY(cfg_set(copy, assign[k], e));
	return settings_from_cfg(copy, s, e);
}

/* Resumes `from` on `world` devices to the end of the run; compares with cont. */
static int resume_on(struct app *a, int world, const char *from, const struct train_result *cont,
		     struct resume_check *rs, struct err *e)
{
	struct cfg copy = {0};
	struct settings s;
	struct train_opts o;
	struct train_result res;
	memset(&res, 0, sizeof res);
	int rc = config_for_world(a, world, &copy, &s, e);
	if (rc == ERR_OK)
		rc = app_train_opts(a, TRAIN_RESUME, from, &o, e);
	if (rc == ERR_OK) {
		struct env v = a->env;
		v.cfg = &copy;
		v.s = &s;
		o.ckpt_root[0] = '\0';
		o.metrics_path[0] = '\0';
		rc = train_run(&v, &o, &res, e);
	}
	if (rc == ERR_OK)
		resume_compare(res.params, res.momentum, res.step, cont->params, cont->momentum,
			       cont->step, res.n, res.state_n, rs);
	train_result_free(&res);
	if (copy.vals)
		cfg_free(&copy);
	return rc;
}

int elastic_step(struct app *a, const char *from, const struct train_result *cont,
		 struct elastic_check *res, struct err *e)
{
	const int w = a->s.world, k = a->s.shards;
	memset(res, 0, sizeof *res);
	res->from_world = w;
	if (w * 2 <= k && w * 2 <= 8)
		res->worlds[res->runs++] = w * 2;
	if (w > 1)
		res->worlds[res->runs++] = w / 2;
	if (!from[0] || !cont->params)
		return ERR(e, ERR_CHECK, "no elastic comparison: the %s run did not finish",
			   !from[0] ? "stopped" : "continuous");
	res->ok = 1;
	for (int i = 0; i < res->runs; i++) {
		struct resume_check *rs = &res->resume[i];
		ERR_TRY(resume_on(a, res->worlds[i], from, cont, rs, e));
		env_info(&a->env, "elastic: W = %d -> %d, step %lld: %zu of %zu parameters differ in "
			 "any bit, momentum %s -> %s", w, res->worlds[i], (long long)rs->step,
			 rs->params_differing, rs->n, rs->momentum_differing ? "differs" : "identical",
			 rs->ok ? "bit-identical to the continuous run" : "MISMATCH");
		res->ok &= rs->ok;
	}
	if (!res->ok)
		return ERR(e, ERR_CHECK, "a run resumed on another device count does not end "
			   "bit-identical to the continuous run on %d", w);
	return ERR_OK;
}
