/*
 * app: the environment the commands give the core, and what they share (see app.h).
 */
#include "app.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signals.h"

static void app_log(void *arg, int level, const char *line)
{
	struct app *a = arg;
	if (level == ENV_PROGRESS && line) {
		printf("\r%s   ", line);
		a->progress_open = 1;
	} else {
		app_progress_close(a);
		if (line)
			printf("%s\n", line);
	}
	fflush(stdout);
}

void app_progress_close(struct app *a)
{
	if (a->progress_open)
		putchar('\n');
	a->progress_open = 0;
	fflush(stdout);
}

void app_env_init(struct app *a, int tty, int lines, const char *command)
{
	env_init(&a->env, &a->cfg, &a->s);
	a->env.log = app_log;
	a->env.log_arg = a;
	a->env.progress = tty;
	a->env.progress_lines = lines;
	a->env.stop = cli_signal_flag();
	a->env.engine.fault = a->o.fault;
	a->env.command = command;
}

/* --inject-drift: the smallest change there is, which the protocol's resume check must
 * see */
static void inject_drift(void *arg, struct checkpoint *ck, struct engine *eng)
{
	struct app *a = arg;
	struct err e;
	uint32_t bits;
	float first;
	err_clear(&e);
	if (ck->n == 0)
		return;
	/* parameter 0 of every replica: the parameters are replicated, nothing is gathered */
	if (engine_get_range(eng, ENGINE_VEC_PARAMS, 0, 1, &first, &e) == ERR_OK) {
		memcpy(&bits, &first, 4);
		bits ^= 1u;
		memcpy(&first, &bits, 4);
		engine_set_range(eng, ENGINE_VEC_PARAMS, 0, 1, &first, &e);
	}
	if (e.code)
		env_info(&a->env, "train: --inject-drift: %s", e.msg);
	else
		env_info(&a->env, "train: --inject-drift: parameter 0 of the resumed state has its "
			 "last bit flipped");
}

void app_train_hooks(struct app *a, struct train_opts *o)
{
	o->allow_gemm_change = a->o.allow_gemm_change;
	if (a->o.inject_drift) {
		o->on_resume = inject_drift;
		o->on_resume_arg = a;
	}
}

int app_train_opts(struct app *a, enum train_kind kind, const char *resume_dir,
		   struct train_opts *o, struct err *e)
{
	int rc = train_opts_for(&a->env, kind, resume_dir, o, e);
	if (rc == ERR_OK)
		app_train_hooks(a, o);
	return rc;
}

const char *app_nearest(const char *word, const char *(*name_of)(int i))
{
	const char *best = NULL, *name;
	int best_d = INT_MAX;
	for (int i = 0; (name = name_of(i)); i++) {
		int d = cfg_near_distance(word, name);
		if (d < best_d) {
			best_d = d;
			best = name;
		}
	}
	return best;
}

int app_next_id(const char **p, long long lo, long long hi, long long *v, int *len)
{
	char *end;
	while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
		(*p)++;
	if (!**p)
		return 0;
	errno = 0;
	*v = strtoll(*p, &end, 10);
	*len = (int)strcspn(*p, " \t\r\n");
	if (end == *p || errno || (*end && !strchr(" \t\r\n", *end)) || *v < lo || *v > hi)
		return -1;
	*p = end;
	return 1;
}
