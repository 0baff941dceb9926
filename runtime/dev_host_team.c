/*
 * dev_host_team: a device thread's helpers (see dev_host_team.h). One mutex and two
 * condition variables: an operation is a round number the helpers wait for; the device
 * thread runs part 0 itself, then waits until the helpers' count drops to zero.
 */
#include "dev_host_team.h"

#include <stdlib.h>
#include <string.h>

struct helper_arg {
	struct team *t;
	int index; /* helper 0 runs part 1 */
};

static void *helper_main(void *p)
{
	struct helper_arg *ha = p;
	struct team *t = ha->t;
	const int index = ha->index;
	unsigned long seen = 0;
	free(ha);
	pthread_mutex_lock(&t->lock);
	for (;;) {
		while (!t->stop && t->round == seen)
			pthread_cond_wait(&t->wake, &t->lock);
		if (t->stop)
			break;
		seen = t->round;
		if (index + 1 < t->parts) {
			team_fn fn = t->fn;
			void *arg = t->arg;
			int parts = t->parts;
			pthread_mutex_unlock(&t->lock);
			fn(arg, index + 1, parts);
			pthread_mutex_lock(&t->lock);
		}
		if (--t->pending == 0)
			pthread_cond_signal(&t->done);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* Stops the first `started` helpers and releases what team_init made. */
static void team_stop(struct team *t, int started)
{
	pthread_mutex_lock(&t->lock);
	t->stop = 1;
	pthread_cond_broadcast(&t->wake);
	pthread_mutex_unlock(&t->lock);
	for (int h = 0; h < started; h++)
		pthread_join(t->helpers[h], NULL);
	free(t->helpers);
	pthread_cond_destroy(&t->done);
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof *t);
	t->threads = 1;
}

int team_init(struct team *t, int threads, struct err *e)
{
	memset(t, 0, sizeof *t);
	if (threads < 1 || threads > TEAM_MAX_THREADS)
		return ERR(e, ERR_CONFIG, "threads per device: %d is outside 1..%d", threads,
			   TEAM_MAX_THREADS);
	t->threads = threads;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->wake, NULL);
	pthread_cond_init(&t->done, NULL);
	if (threads == 1)
		return ERR_OK;
	t->helpers = calloc((size_t)threads - 1, sizeof *t->helpers);
	if (!t->helpers) {
		team_stop(t, 0);
		return ERR(e, ERR_NOMEM, "out of memory for %d helper threads", threads - 1);
	}
	for (int h = 0; h < threads - 1; h++) {
		struct helper_arg *ha = malloc(sizeof *ha);
		if (ha)
			*ha = (struct helper_arg){t, h};
		if (!ha || pthread_create(&t->helpers[h], NULL, helper_main, ha) != 0) {
			free(ha);
			team_stop(t, h);
			return ERR(e, ERR_DEVICE, "cannot start helper thread %d of %d", h + 1,
				   threads - 1);
		}
	}
	return ERR_OK;
}

void team_run(struct team *t, team_fn fn, void *arg, int parts)
{
	if (parts <= 1 || t->threads <= 1) {
		for (int p = 0; p < parts; p++)
			fn(arg, p, parts);
		return;
	}
	pthread_mutex_lock(&t->lock);
	t->fn = fn;
	t->arg = arg;
	t->parts = parts;
	t->pending = t->threads - 1;
	t->round++;
	pthread_cond_broadcast(&t->wake);
	pthread_mutex_unlock(&t->lock);
	fn(arg, 0, parts);
	pthread_mutex_lock(&t->lock);
	while (t->pending > 0)
		pthread_cond_wait(&t->done, &t->lock);
	pthread_mutex_unlock(&t->lock);
}

void team_destroy(struct team *t)
{
	/* a team of one thread has no helpers but still its lock and conditions */
	team_stop(t, t->threads - 1);
}
