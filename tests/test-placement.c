/*
 * test-device-plan: the GPU path's decisions, checked on the CPU.
 *
 * The device plan (placement_decide) for every case of [devices] against the GPUs
 * visible, with the rule that backend = auto falls back to the CPU only when nothing
 * GPU-specific was asked for; and the rules of gpu/gpu_rules.c: the driver a CUDA
 * runtime needs and the message a too-old driver gets, the NCCL environment of the
 * gradient communicator, the message of a collective that timed out, the plan of one
 * NCCL call, the sort's key bits, and the order embed_backward adds each token id's slots
 * in (gpu/gpu_rules.h, the functions its kernels run).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "placement.h"
#include "procs.h"
#include "gpu_rules.h"

/* The plan for ranks on the hosts h (NULL: all on this one). */
static struct placement plan_for(int world, int backend, int collective, const char *ids,
				 const struct rank_hosts *h, int gpus, int *rc, char *msg,
				 size_t cap)
{
	struct settings s;
	struct placement p;
	struct err e;
	memset(&s, 0, sizeof s);
	err_clear(&e);
	s.world = world;
	s.backend = backend;
	s.collective = collective;
	for (const char *c = ids; c && *c; c++)
		if (*c >= '0' && *c <= '9')
			s.ids[s.n_ids++] = *c - '0';
	*rc = placement_decide(&s, h, gpus, "no GPU here", &p, &e);
	snprintf(msg, cap, "%s", e.msg);
	return p;
}

static struct placement plan_of(int world, int backend, int collective, const char *ids,
				   int gpus, int *rc, char *msg, size_t cap)
{
	return plan_for(world, backend, collective, ids, NULL, gpus, rc, msg, cap);
}

START_TEST(placement_follows_the_gpus_visible)
{
	int rc;
	char msg[1024];
	struct placement p;
	/* no GPU: auto runs on the cpu, cuda is refused, nccl needs cuda */
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_AUTO, NULL, 0, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CPU);
	ck_assert_int_eq(p.nccl, 0);
	p = plan_of(2, BACKEND_CUDA, COLLECTIVE_AUTO, NULL, 0, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_DEVICE);
	ck_assert(strstr(msg, "devices.backend = cuda"));
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_NCCL, NULL, 0, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_DEVICE);
	ck_assert(strstr(msg, "devices.collective = nccl") && strstr(msg, "no GPU here"));
	p = plan_of(2, BACKEND_CPU, COLLECTIVE_NCCL, NULL, 4, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert(strstr(msg, "needs the cuda backend"));
	/* one GPU, W = 2: auto falls back to the cpu and says how to share the GPU; cuda
	 * without ids is refused; ids 0,0 share it over the host collective */
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_AUTO, NULL, 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CPU);
	ck_assert(strstr(p.why, "1 GPU visible") && strstr(p.why, "devices.ids"));
	p = plan_of(2, BACKEND_CUDA, COLLECTIVE_AUTO, NULL, 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert(strstr(msg, "devices.ids"));
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_AUTO, "0,0", 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CUDA);
	ck_assert_int_eq(p.nccl, 0);
	ck_assert(p.ids[0] == 0 && p.ids[1] == 0);
	p = plan_of(2, BACKEND_CUDA, COLLECTIVE_NCCL, "0,0", 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert(strstr(msg, "one GPU per rank"));
	/* an id past the GPUs visible names the rank and the id */
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_AUTO, "0,3", 2, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert(strstr(msg, "rank 1 is given GPU 3"));
	/* enough GPUs: cuda and NCCL, default ids, unless the host collective is asked for */
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_AUTO, NULL, 4, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CUDA);
	ck_assert_int_eq(p.nccl, 1);
	ck_assert(p.ids[0] == 0 && p.ids[1] == 1);
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_HOST, "3,1", 4, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.nccl, 0);
	ck_assert(p.ids[0] == 3 && p.ids[1] == 1);
	/* cpu requested: GPUs are ignored */
	p = plan_of(2, BACKEND_CPU, COLLECTIVE_AUTO, NULL, 4, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CPU);
}
END_TEST


START_TEST(auto_never_falls_back_when_gpus_were_named)
{
	int rc;
	char msg[1024];
	struct placement p;
	/* devices.ids names GPUs: no GPU is a refusal with the reason, not a CPU run */
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_AUTO, "0,0", 0, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_DEVICE);
	ck_assert_msg(strstr(msg, "devices.ids") && strstr(msg, "no GPU here"), "%s", msg);
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_AUTO, "0,1", 0, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_DEVICE);
	/* the NCCL collective asked for with too few GPUs: refused, not the CPU */
	p = plan_of(2, BACKEND_AUTO, COLLECTIVE_NCCL, NULL, 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert_msg(strstr(msg, "devices.collective = nccl") && strstr(msg, "W = 2"), "%s", msg);
	/* nothing GPU-specific: the fallback stays, and says so */
	p = plan_of(3, BACKEND_AUTO, COLLECTIVE_AUTO, NULL, 2, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CPU);
	ck_assert(strstr(p.why, "auto"));
}
END_TEST

/* One rank per process, the processes on the hosts `hosts` ("00": one host, "01": two);
 * this process is on host `here`. */
static struct placement plan_on_hosts(const char *hosts, int here, int collective,
				      const char *ids, int gpus, int *rc, char *msg, size_t cap)
{
	struct rank_hosts h;
	memset(&h, 0, sizeof h);
	for (int r = 0; hosts[r]; r++)
		h.host[r] = hosts[r] - '0';
	h.here = here;
	return plan_for((int)strlen(hosts), BACKEND_AUTO, collective, ids, &h, gpus, rc, msg,
			cap);
}

START_TEST(ranks_of_several_hosts_number_each_hosts_gpus)
{
	int rc;
	char msg[1024];
	struct placement p;
	/* two processes on one host with 2 GPUs: GPUs 0 and 1, over NCCL */
	p = plan_on_hosts("00", 0, COLLECTIVE_AUTO, NULL, 2, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CUDA);
	ck_assert(p.nccl && p.ids[0] == 0 && p.ids[1] == 1);
	/* two hosts with one GPU each: GPU 0 on each, NCCL (nothing is shared) */
	p = plan_on_hosts("01", 1, COLLECTIVE_AUTO, NULL, 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.backend, DEV_BACKEND_CUDA);
	ck_assert(p.nccl && p.ids[0] == 0 && p.ids[1] == 0);
	/* explicit ids 0,0: shared on one host (the host collective), not on two */
	p = plan_on_hosts("00", 0, COLLECTIVE_AUTO, "0,0", 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.nccl, 0);
	p = plan_on_hosts("01", 0, COLLECTIVE_NCCL, "0,0", 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert_int_eq(p.nccl, 1);
	/* only this host's ranks need its GPUs: 3 ranks here, 1 elsewhere, 2 GPUs */
	p = plan_on_hosts("0001", 0, COLLECTIVE_NCCL, NULL, 2, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert_msg(strstr(msg, "3 of the W = 4 ranks on this host"), "%s", msg);
	p = plan_on_hosts("0001", 1, COLLECTIVE_NCCL, NULL, 2, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	ck_assert(p.ids[2] == 2 && p.ids[3] == 0);
	/* an explicit id past this host's GPUs is refused; another host's is not checked */
	p = plan_on_hosts("01", 0, COLLECTIVE_AUTO, "0,3", 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_OK);
	p = plan_on_hosts("01", 1, COLLECTIVE_AUTO, "0,3", 1, &rc, msg, sizeof msg);
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert_msg(strstr(msg, "rank 1 is given GPU 3"), "%s", msg);
}
END_TEST

START_TEST(driver_requirement)
{
	ck_assert_int_eq(gpu_driver_branch_needed(13000), 580);
	ck_assert_int_eq(gpu_driver_branch_needed(13020), 580);
	ck_assert_int_eq(gpu_driver_branch_needed(12080), 525);
	ck_assert_int_eq(gpu_driver_branch_needed(11080), 0);

	char rel[64];
	ck_assert_int_eq(gpu_driver_release_parse("NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
						  "535.154.05  Thu Dec 28 15:37:48 UTC 2023\nGCC "
						  "version:  gcc 12.3.0\n", rel, sizeof rel), 0);
	ck_assert_str_eq(rel, "535.154.05");
	ck_assert_int_eq(gpu_driver_release_parse("NVRM version: NVIDIA UNIX Open Kernel Module for "
						  "x86_64  570.124.06  Release Build  (dvs-builder@"
						  "U16-I3-B03-4-3)  Wed Feb 26 2025\n", rel,
						  sizeof rel), 0);
	ck_assert_str_eq(rel, "570.124.06");
	ck_assert_int_eq(gpu_driver_release_parse("no module here\n", rel, sizeof rel), -1);
	ck_assert_int_eq(gpu_driver_release_parse(NULL, rel, sizeof rel), -1);
	ck_assert_int_eq(gpu_driver_release_parse("Kernel Module  570.124.06 x", rel, 5), -1);

	/* an R535 driver (CUDA 12.2) under a CUDA 13.0 build: both versions, in words */
	char msg[512];
	gpu_driver_message(msg, sizeof msg, "535.154.05", 12020, 13000);
	ck_assert_msg(strstr(msg, "driver 535.154.05") && strstr(msg, "CUDA up to 12.2") &&
		      strstr(msg, "CUDA 13.0 runtime") && strstr(msg, "driver 580 or newer"), "%s",
		      msg);
	gpu_driver_message(msg, sizeof msg, "535.54.03", 0, 12040);
	ck_assert_msg(strstr(msg, "driver 535.54.03") && strstr(msg, "driver 525 or newer"), "%s",
		      msg);
	gpu_driver_message(msg, sizeof msg, NULL, 12020, 13000);
	ck_assert_msg(strstr(msg, "of unknown release (supports CUDA up to 12.2)"), "%s", msg);
	/* no driver at all gives the same runtime answer: not called too old */
	gpu_driver_message(msg, sizeof msg, "", 0, 13000);
	ck_assert_msg(strstr(msg, "no NVIDIA driver is loaded") && !strstr(msg, "too old"), "%s",
		      msg);
}
END_TEST

START_TEST(nccl_environment_keeps_sums_repeatable)
{
	char note[256];
	ck_assert_int_eq(gpu_nccl_env_disable_nvls(NULL, NULL, note, sizeof note), 1);
	ck_assert(strstr(note, "NCCL_NVLS_ENABLE=0"));
	ck_assert_int_eq(gpu_nccl_env_disable_nvls("", "", note, sizeof note), 1);
	/* the user's own choice is left alone, and named */
	ck_assert_int_eq(gpu_nccl_env_disable_nvls("Ring", NULL, note, sizeof note), 0);
	ck_assert_msg(strstr(note, "NCCL_ALGO=Ring"), "%s", note);
	ck_assert_int_eq(gpu_nccl_env_disable_nvls(NULL, "1", note, sizeof note), 0);
	ck_assert_msg(strstr(note, "NCCL_NVLS_ENABLE=1"), "%s", note);
	ck_assert_int_eq(gpu_nccl_env_disable_nvls("Tree", "0", NULL, 0), 0);
}
END_TEST

START_TEST(timeout_message_says_who_arrived)
{
	char msg[512];
	int some[3] = {1, 0, 1}, all[2] = {1, 1};
	gpu_coll_timeout_message(msg, sizeof msg, 0, 4, 30.0, some, 3);
	ck_assert_msg(strstr(msg, "rank 0 device 4") && strstr(msg, "30 s") &&
		      strstr(msg, "ranks 0,2 reached it, rank 1 did not"), "%s", msg);
	ck_assert(!strstr(msg, "NCCL_P2P_DISABLE"));
	gpu_coll_timeout_message(msg, sizeof msg, 1, 1, 5.0, all, 2);
	ck_assert_msg(strstr(msg, "every rank (0,1) reached it") && strstr(msg, "NCCL_P2P_DISABLE=1") &&
		      strstr(msg, "NCCL_DEBUG=INFO"), "%s", msg);
	ck_assert(!strstr(msg, "never joined"));
}
END_TEST

/* The collective's poll loop spins through the first 1.5 ms of a wait (a small allreduce's
 * time, shorter than a sleeping thread's wake-up), then sleeps briefly, then longer. */
START_TEST(poll_spins_before_it_sleeps)
{
	ck_assert_int_eq(gpu_poll_pause_ns(0.0), 0);
	ck_assert_int_eq(gpu_poll_pause_ns(1.0e-3), 0);
	ck_assert_int_eq(gpu_poll_pause_ns(1.6e-3), 20000);
	ck_assert_int_eq(gpu_poll_pause_ns(19e-3), 20000);
	ck_assert_int_eq(gpu_poll_pause_ns(0.5), 500000);
}
END_TEST

/* What a collective call queues before its one wait for the device (the plan coll_nccl.c
 * carries out): per call exactly one GPU_STEP_WAIT; every NCCL call is followed by an
 * ENQUEUED before anything else is queued behind it; only host work after the wait. A
 * window's two collectives (the counts and loss sum from a host buffer, the gradient in
 * device memory) wait twice, in either mode. */
/* The waits of one plan of n steps, its rules checked (`what` names it in failures). */
static int steps_waits(const enum gpu_coll_step *steps, int n, int host_buf, const char *what)
{
	int waits = 0, after_wait = 0;
	ck_assert_int_eq(steps[n], GPU_STEP_END);
	for (int i = 0; i < n; i++) {
		enum gpu_coll_step s = steps[i];
		if (s == GPU_STEP_ALLREDUCE || s == GPU_STEP_EXCHANGE || s == GPU_STEP_ALLGATHER ||
		    s == GPU_STEP_REDUCE_SCATTER)
			ck_assert_msg(steps[i + 1] == GPU_STEP_ENQUEUED,
				      "%s: step %d queues behind NCCL before it queued its call",
				      what, i + 1);
		if (after_wait)
			ck_assert_msg(s == GPU_STEP_UNSTAGE, "%s: step %d after the wait", what, i);
		if (s == GPU_STEP_WAIT)
			waits++, after_wait = 1;
	}
	ck_assert_int_eq(steps[n - 1], host_buf ? GPU_STEP_UNSTAGE : GPU_STEP_WAIT);
	return waits;
}

static int plan_waits(int tree, int host_buf, int avg)
{
	enum gpu_coll_step steps[GPU_COLL_MAX_STEPS];
	char what[64];
	int n = gpu_coll_plan(tree, host_buf, avg, steps);
	snprintf(what, sizeof what, "tree %d host %d avg %d", tree, host_buf, avg);
	return steps_waits(steps, n, host_buf, what);
}

/* Whether a plan (ended by GPU_STEP_END) has `step`. */
static int steps_have(const enum gpu_coll_step *steps, enum gpu_coll_step step)
{
	for (int i = 0; steps[i] != GPU_STEP_END; i++)
		if (steps[i] == step)
			return 1;
	return 0;
}

static int plan_has(int tree, int host_buf, int avg, enum gpu_coll_step step)
{
	enum gpu_coll_step steps[GPU_COLL_MAX_STEPS];
	gpu_coll_plan(tree, host_buf, avg, steps);
	return steps_have(steps, step);
}

START_TEST(collective_waits_once_per_call)
{
	for (int host_buf = 0; host_buf <= 1; host_buf++) {
		for (int avg = 0; avg <= 1; avg++)
			ck_assert_int_eq(plan_waits(0, host_buf, avg), 1);
		ck_assert_int_eq(plan_waits(1, host_buf, 0), 1);
	}
	/* a window: the totals from a host buffer, then the gradient on the device */
	ck_assert_int_eq(plan_waits(0, 1, 0) + plan_waits(0, 0, 1), 2);
	ck_assert_int_eq(plan_waits(1, 1, 0) + plan_waits(1, 0, 0), 2);
	/* the steps each call needs are there: avg divides (not the tree), a host buffer is
	 * staged both ways, the tree adds its slices and gathers them */
	ck_assert(plan_has(0, 0, 1, GPU_STEP_DIVIDE) && !plan_has(0, 0, 0, GPU_STEP_DIVIDE));
	ck_assert(!plan_has(1, 0, 1, GPU_STEP_DIVIDE));
	ck_assert(plan_has(0, 1, 0, GPU_STEP_STAGE_IN) && plan_has(0, 1, 0, GPU_STEP_STAGE_OUT));
	ck_assert(plan_has(1, 1, 0, GPU_STEP_ALLGATHER) && !plan_has(1, 1, 0, GPU_STEP_ALLREDUCE));
	ck_assert(plan_has(1, 0, 0, GPU_STEP_EXCHANGE) && plan_has(1, 0, 0, GPU_STEP_TREE_ADD) &&
		  plan_has(1, 0, 0, GPU_STEP_SLICE_OUT));
}
END_TEST

static int zero_has(int gather, int tree, int avg, enum gpu_coll_step step)
{
	enum gpu_coll_step steps[GPU_COLL_MAX_STEPS];
	gpu_zero_plan(gather, tree, avg, steps);
	return steps_have(steps, step);
}

/* The sharded optimizer's reduce-scatter and all-gather keep the rules of every call
 * (one wait, nothing queued behind an NCCL call before NCCL queued it); the
 * reduce-scatter adds in the tree in exact mode, divides its slice for avg outside it,
 * and puts the slice back; the all-gather sends the slice and copies the whole back. */
START_TEST(zero_calls_wait_once)
{
	for (int gather = 0; gather <= 1; gather++)
		for (int tree = 0; tree <= 1; tree++)
			for (int avg = 0; avg <= 1; avg++) {
				enum gpu_coll_step steps[GPU_COLL_MAX_STEPS];
				char what[64];
				int n = gpu_zero_plan(gather, tree, avg, steps);
				snprintf(what, sizeof what, "zero: gather %d tree %d avg %d", gather,
					 tree, avg);
				ck_assert_int_eq(steps_waits(steps, n, 0, what), 1);
			}
	ck_assert(zero_has(0, 1, 0, GPU_STEP_EXCHANGE) && zero_has(0, 1, 0, GPU_STEP_TREE_ADD) &&
		  !zero_has(0, 1, 0, GPU_STEP_REDUCE_SCATTER));
	ck_assert(zero_has(0, 0, 0, GPU_STEP_REDUCE_SCATTER) && !zero_has(0, 0, 0, GPU_STEP_DIVIDE));
	ck_assert(zero_has(0, 0, 1, GPU_STEP_DIVIDE) && !zero_has(0, 1, 1, GPU_STEP_DIVIDE));
	ck_assert(zero_has(0, 0, 0, GPU_STEP_SLICE_IN) && zero_has(0, 0, 0, GPU_STEP_SHARD_OUT));
	ck_assert(zero_has(1, 0, 0, GPU_STEP_SHARD_IN) && zero_has(1, 0, 0, GPU_STEP_ALLGATHER) &&
		  zero_has(1, 0, 0, GPU_STEP_SLICE_OUT) && !zero_has(1, 0, 0, GPU_STEP_SHARD_OUT));
}
END_TEST

/* embed_backward's radix sort orders ceil(log2 V) key bits for ids below V. */
START_TEST(sort_orders_the_bits_of_the_largest_id)
{
	ck_assert_int_eq(gpu_sort_key_bits(64), 6);
	ck_assert_int_eq(gpu_sort_key_bits(65), 7);
	ck_assert_int_eq(gpu_sort_key_bits(256), 8);
	ck_assert_int_eq(gpu_sort_key_bits(50257), 16);
	ck_assert_int_eq(gpu_sort_key_bits(2), 1);
	ck_assert_int_eq(gpu_sort_key_bits(1), 1);
	ck_assert_int_eq(gpu_sort_key_bits(0), 31);
	ck_assert_int_eq(gpu_sort_key_bits(((size_t)1 << 31) + 1), 31);
}
END_TEST

/* An id's chunks: one chain (the CPU backend's order) below 128 slots, then chunks of
 * max(64, floor(sqrt n)) slots, the last taking the remainder, so that both levels stay
 * about sqrt(n) additions long. */
START_TEST(embed_chunks_follow_the_square_root)
{
	for (int r = 0; r <= 46340; r += r < 300 ? 1 : 97) {
		ck_assert_int_eq(gpu_isqrt(r * r), r);
		if (r > 0)
			ck_assert_int_eq(gpu_isqrt(r * r - 1), r - 1);
		if (r < 46340)
			ck_assert_int_eq(gpu_isqrt(r * r + 2 * r), r); /* (r + 1)^2 - 1 */
	}
	ck_assert_int_eq(gpu_isqrt(INT32_MAX), 46340);
	ck_assert_int_eq(gpu_embed_chunks(1), 1);
	ck_assert_int_eq(gpu_embed_chunks(127), 1);
	ck_assert_int_eq(gpu_embed_chunks(128), 2);
	ck_assert_int_eq(gpu_embed_chunk_len(128), 64);
	ck_assert_int_eq(gpu_embed_chunk_len(5000), 70);
	ck_assert_int_eq(gpu_embed_chunks(5000), 71);
	ck_assert_int_eq(gpu_embed_chunks(500000), 707);
	ck_assert_int_eq(gpu_embed_chunks(INT32_MAX), 46341);
	for (int n = 1; n < 300000; n += n < 5000 ? 1 : 37) {
		int len = gpu_embed_chunk_len(n), k = gpu_embed_chunks(n);
		ck_assert_int_ge(len, GPU_EMBED_CHUNK_MIN);
		ck_assert_int_eq(k == 1, n < 2 * GPU_EMBED_CHUNK_MIN);
		if (k == 1)
			continue;
		ck_assert_int_le(k, n / GPU_EMBED_CHUNK_MIN);
		int last = n - (k - 1) * len; /* the longest chunk */
		ck_assert_msg(last >= len && last < 2 * len, "n %d: last chunk %d of len %d", n,
			      last, len);
		int r = gpu_isqrt(n);
		/* the chain: the last chunk, then k - 1 folds; docs/gpus.md's figures */
		if (r >= GPU_EMBED_CHUNK_MIN)
			ck_assert_msg(last + k - 1 <= 3 * r + 1, "n %d: a chain of %d additions", n,
				      last + k - 1);
		else
			ck_assert_msg(last + k - 1 <= 189, "n %d: a chain of %d additions", n,
				      last + k - 1);
	}
}
END_TEST

/* Walks every sorted position of ids in the slot counts n[0..ids) laid one after the other
 * (ids with gaps between them, as a batch's sorted ids have), and checks what the plan
 * kernel's gpu_embed_plan_at answers from the sorted ids alone: each id's chunks
 * tile its positions in order, an id in one chunk goes straight into the gradient, the
 * others' chunk sums get consecutive rows, folded once at the id's first position, and
 * no row is used twice or lies past gpu_embed_partial_rows of the slots. */
static void check_embed_plan(const int *n, int ids)
{
/* without check's per-assertion bookkeeping: this visits some million positions */
#define PLAN_EXPECT(cond)                                                                    \
	do {                                                                                 \
		if (!(cond))                                                                 \
			ck_abort_msg("id %d (%d slots from %d), position %d: %s", k, n[k], lo, i,   \
				     #cond);                                                 \
	} while (0)
	int slots = 0;
	for (int k = 0; k < ids; k++)
		slots += n[k];
	size_t rows = gpu_embed_partial_rows((size_t)slots);
	unsigned char *used = calloc(rows, 1);
	int32_t *keys = malloc(sizeof(int32_t) * (size_t)slots);
	for (int k = 0, lo = 0; k < ids; lo += n[k], k++)
		for (int i = lo; i < lo + n[k]; i++)
			keys[i] = 3 * k + k % 2;
	for (int k = 0, lo = 0; k < ids; lo += n[k], k++) {
		int chunks = gpu_embed_chunks(n[k]), next = lo, c = 0, i = lo;
		for (; i < lo + n[k]; i++) {
			struct gpu_embed_pos p = gpu_embed_plan_at(keys, slots, i);
			PLAN_EXPECT(p.fold == (i == lo && chunks > 1 ? chunks : 0));
			if (i != next) {
				PLAN_EXPECT(p.chunk_end == 0);
				continue;
			}
			PLAN_EXPECT(p.chunk_end > i && p.chunk_end <= lo + n[k]);
			if (chunks == 1) {
				PLAN_EXPECT(p.dest_row == -1);
			} else {
				PLAN_EXPECT(p.dest_row == lo / GPU_EMBED_CHUNK_MIN + c);
				PLAN_EXPECT(p.dest_row >= 0 && (size_t)p.dest_row < rows);
				PLAN_EXPECT(!used[p.dest_row]);
				used[p.dest_row] = 1;
			}
			next = p.chunk_end;
			c++;
		}
		PLAN_EXPECT(next == lo + n[k]);
		PLAN_EXPECT(c == chunks);
	}
	free(used);
	free(keys);
#undef PLAN_EXPECT
}

START_TEST(embed_plan_tiles_each_id_and_shares_no_row)
{
	int n[400];
	/* ids of 128 slots (two chunks, the densest use of rows) after one of 1, so that
	 * no id starts at a multiple of 64 */
	n[0] = 1;
	for (int k = 1; k < 200; k++)
		n[k] = 128;
	check_embed_plan(n, 200);
	/* the thresholds side by side, then a padding id of 5,000 slots */
	int edges[] = {127, 128, 129, 63, 64, 65, 191, 192, 255, 256, 4225, 4224, 5000, 3};
	check_embed_plan(edges, (int)(sizeof edges / sizeof edges[0]));
	/* random mixes of rare and busy ids */
	unsigned int seed = 12345;
	for (int round = 0; round < 20; round++) {
		for (int k = 0; k < 400; k++) {
			seed = seed * 1103515245u + 12345u;
			unsigned int v = seed >> 8;
			n[k] = 1 + (int)(v % 8 == 0 ? v % 20000 : v % 140);
		}
		check_embed_plan(n, 400);
	}
	ck_assert_uint_eq(gpu_embed_partial_rows(0), 1);
	ck_assert_uint_eq(gpu_embed_partial_rows(127), 1);
	ck_assert_uint_eq(gpu_embed_partial_rows(128), 2);
	ck_assert_uint_eq(gpu_embed_partial_rows(6000), 93);
}
END_TEST

/* The share of ranks per process under mpirun -np P: a mismatch names what does not fit
 * (with devices.local = 0 the process count, never "devices.local = 0"), and what would. */
static void check_share(int world, int local_key, int procs, int want_local, const char *want)
{
	struct err e;
	int local = -1;
	err_clear(&e);
	int rc = procs_share(world, local_key, procs, &local, &e);
	if (!want) {
		ck_assert_int_eq(rc, ERR_OK);
		ck_assert_int_eq(local, want_local);
		return;
	}
	ck_assert_int_eq(rc, ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, want), "'%s' lacks '%s'", e.msg, want);
	ck_assert_msg(!strstr(e.msg, "devices.local = 0"), "%s", e.msg);
}

START_TEST(process_share_names_the_mismatch)
{
	check_share(4, 0, 2, 2, NULL);
	check_share(4, 2, 2, 2, NULL);
	check_share(2, 0, 1, 2, NULL);
	/* two devices per process configured (world 2 for one process), three started */
	check_share(2, 0, 3, 0, "devices.world = 2 ranks cannot be shared evenly by 3 processes "
		    "(fewer ranks than processes): start 1 or 2 processes, or set devices.world "
		    "to a multiple of 3");
	check_share(4, 0, 3, 0, "start 1, 2 or 4 processes");
	check_share(4, 2, 3, 0, "3 processes x devices.local = 2 ranks each make 6 ranks, and "
		    "devices.world = 4: start 2 processes, or set devices.world = 6");
	check_share(5, 2, 2, 0, "(not a multiple of devices.local): set devices.world = 4");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("device-plan");
	TCase *tc = tcase_create("device-plan");
	tcase_add_test(tc, placement_follows_the_gpus_visible);
	tcase_add_test(tc, process_share_names_the_mismatch);
	tcase_add_test(tc, auto_never_falls_back_when_gpus_were_named);
	tcase_add_test(tc, ranks_of_several_hosts_number_each_hosts_gpus);
	tcase_add_test(tc, driver_requirement);
	tcase_add_test(tc, nccl_environment_keeps_sums_repeatable);
	tcase_add_test(tc, timeout_message_says_who_arrived);
	tcase_add_test(tc, poll_spins_before_it_sleeps);
	tcase_add_test(tc, collective_waits_once_per_call);
	tcase_add_test(tc, zero_calls_wait_once);
	tcase_add_test(tc, sort_orders_the_bits_of_the_largest_id);
	tcase_add_test(tc, embed_chunks_follow_the_square_root);
	tcase_add_test(tc, embed_plan_tiles_each_id_and_shares_no_row);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
