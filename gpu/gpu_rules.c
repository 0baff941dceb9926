/*
 * gpu_rules: the GPU path's decisions that need no GPU (see gpu_rules.h).
 */
#include "gpu_rules.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int gpu_driver_branch_needed(int runtime_version)
{
	/* A CUDA major release runs on every driver of its first branch and later (minor
	 * version compatibility): CUDA 12.x on R525 and newer, CUDA 13.x on R580 and newer. */
	switch (runtime_version / 1000) {
	case 12:
		return 525;
	case 13:
		return 580;
	default:
		return 0;
	}
}

/* A release looks like DIGITS.DIGITS[.DIGITS]; returns its length at s, 0 if none. */
static size_t release_len(const char *s)
{
	size_t n = 0;
	int groups = 0;
	for (;;) {
		size_t d = 0;
		while (isdigit((unsigned char)s[n + d]))
			d++;
		if (d == 0)
			break;
		groups++;
		n += d;
		if (s[n] != '.' || !isdigit((unsigned char)s[n + 1]))
			break;
		n++;
	}
	return groups >= 2 ? n : 0;
}

int gpu_driver_release_parse(const char *banner, char *out, size_t outlen)
{
	/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  <date>" and the open
	 * modules' "... Open Kernel Module for x86_64  570.124.06  Release Build ...": the
	 * first release-shaped word after "Kernel Module" */
	const char *p = banner ? strstr(banner, "Kernel Module") : NULL;
	if (!p || !outlen)
		return -1;
	for (; *p && *p != '\n'; p++) {
		/* a release starts a word; the banner's first byte has no byte before it */
		if (p == banner || (p[-1] != ' ' && p[-1] != '\t'))
			continue;
		size_t n = release_len(p);
		if (n && (p[n] == ' ' || p[n] == '\t' || p[n] == '\n' || p[n] == '\0')) {
			if (n >= outlen)
				return -1;
			memcpy(out, p, n);
			out[n] = '\0';
			return 0;
		}
	}
	return -1;
}

void gpu_driver_message(char *out, size_t outlen, const char *release, int driver_version,
			int runtime_version)
{
	char found[96], needed[96];
	int branch = gpu_driver_branch_needed(runtime_version);
	if (driver_version <= 0 && (!release || !*release)) {
		/* the runtime answers "insufficient driver" when there is no driver at all */
		snprintf(out, outlen, "no NVIDIA driver is loaded (the CUDA %d.%d runtime of this "
			 "build finds none)", runtime_version / 1000, runtime_version % 1000 / 10);
		return;
	}
	const char *rel = release && *release ? release : "of unknown release";
	if (driver_version > 0)
		snprintf(found, sizeof found, "driver %s (supports CUDA up to %d.%d)", rel,
			 driver_version / 1000, driver_version % 1000 / 10);
	else
		snprintf(found, sizeof found, "driver %s", rel);
	if (branch)
		snprintf(needed, sizeof needed, "driver %d or newer", branch);
	else
		snprintf(needed, sizeof needed, "a driver that supports CUDA %d.%d",
			 runtime_version / 1000, runtime_version % 1000 / 10);
	snprintf(out, outlen, "the NVIDIA driver is too old for this build: found %s, this build "
		 "uses the CUDA %d.%d runtime, which needs %s; update the driver, or build with a "
		 "CUDA toolkit the driver supports (the container's CUDA_IMAGE build argument)",
		 found, runtime_version / 1000, runtime_version % 1000 / 10, needed);
}

int gpu_nccl_env_disable_nvls(const char *nccl_algo, const char *nccl_nvls_enable, char *note,
			      size_t notelen)
{
	/* NVLink SHARP reduces inside the NVSwitch, in an order that may change from call to
	 * call: a sum over it is not bit-reproducible, and a resumed run would drift from a
	 * continuous one. A user who set either variable made that choice deliberately. */
	const char *why = NULL, *value = NULL;
	if (nccl_nvls_enable && *nccl_nvls_enable) {
		why = "NCCL_NVLS_ENABLE";
		value = nccl_nvls_enable;
	} else if (nccl_algo && *nccl_algo) {
		why = "NCCL_ALGO";
		value = nccl_algo;
	}
	if (note && notelen) {
		if (why)
			snprintf(note, notelen, "NVLink SHARP left as %s=%s says (the sums may "
				 "not repeat bit for bit if it is used)", why, value);
		else
			snprintf(note, notelen, "NVLink SHARP disabled (NCCL_NVLS_ENABLE=0): its "
				 "in-switch sums do not repeat bit for bit");
	}
	return why == NULL;
}

void gpu_coll_timeout_message(char *out, size_t outlen, int rank, int device, double timeout_s,
			      const int *arrived, int world)
{
	char here[128] = "", missing[128] = "";
	size_t nh = 0, nm = 0;
	for (int r = 0; r < world; r++) {
		char *buf = arrived[r] ? here : missing;
		size_t *n = arrived[r] ? &nh : &nm;
		if (*n < sizeof here)
			*n += (size_t)snprintf(buf + *n, sizeof here - *n, "%s%d", *n ? "," : "", r);
	}
	if (nm)
		snprintf(out, outlen, "rank %d device %d: allreduce timed out after %g s "
			 "(devices.timeout): rank%s %s reached it, rank%s %s did not (a peer that "
			 "failed or hangs before the collective)", rank, device, timeout_s,
			 strchr(here, ',') ? "s" : "", nh ? here : "none", strchr(missing, ',') ? "s" : "",
			 missing);
	else
		snprintf(out, outlen, "rank %d device %d: allreduce timed out after %g s "
			 "(devices.timeout): every rank (%s) reached it, so the transport between the "
			 "GPUs hangs; try NCCL_P2P_DISABLE=1, and NCCL_DEBUG=INFO to see which path "
			 "NCCL takes", rank, device, timeout_s, here);
}

long gpu_poll_pause_ns(double waited_s)
{
	if (waited_s < 1.5e-3)
		return 0;
	return waited_s < 20e-3 ? 20000L : 500000L;
}

/* Appends `step` to the plan being built at steps[*n]. */
static void plan_add(enum gpu_coll_step *steps, int *n, enum gpu_coll_step step)
{
	if (*n < GPU_COLL_MAX_STEPS - 1)
		steps[(*n)++] = step;
}

int gpu_coll_plan(int tree, int host_buf, int avg, enum gpu_coll_step *steps)
{
	int n = 0;
	plan_add(steps, &n, host_buf ? GPU_STEP_STAGE_IN : tree ? GPU_STEP_SLICE_IN
							       : GPU_STEP_ALLREDUCE);
	if (tree && !host_buf) {
		/* reduce-scatter by exchange, the tree's adds, then the all-gather */
		plan_add(steps, &n, GPU_STEP_EXCHANGE);
		plan_add(steps, &n, GPU_STEP_ENQUEUED);
		plan_add(steps, &n, GPU_STEP_TREE_ADD);
	}
	if (tree)
		plan_add(steps, &n, GPU_STEP_ALLGATHER);
	else if (host_buf)
		plan_add(steps, &n, GPU_STEP_ALLREDUCE);
	plan_add(steps, &n, GPU_STEP_ENQUEUED);
	if (avg && !tree)
		plan_add(steps, &n, GPU_STEP_DIVIDE);
	if (host_buf)
		plan_add(steps, &n, GPU_STEP_STAGE_OUT);
	else if (tree)
		plan_add(steps, &n, GPU_STEP_SLICE_OUT);
	plan_add(steps, &n, GPU_STEP_WAIT);
	if (host_buf)
		plan_add(steps, &n, GPU_STEP_UNSTAGE);
	steps[n] = GPU_STEP_END;
	return n;
}

int gpu_zero_plan(int gather, int tree, int avg, enum gpu_coll_step *steps)
{
	int n = 0;
	if (gather) {
		plan_add(steps, &n, GPU_STEP_SHARD_IN);
		plan_add(steps, &n, GPU_STEP_ALLGATHER);
		plan_add(steps, &n, GPU_STEP_ENQUEUED);
		plan_add(steps, &n, GPU_STEP_SLICE_OUT);
	} else {
		/* the vector cut into W zero-padded slices; this rank's reduced slice back */
		plan_add(steps, &n, GPU_STEP_SLICE_IN);
		plan_add(steps, &n, tree ? GPU_STEP_EXCHANGE : GPU_STEP_REDUCE_SCATTER);
		plan_add(steps, &n, GPU_STEP_ENQUEUED);
		if (tree)
			plan_add(steps, &n, GPU_STEP_TREE_ADD);
		else if (avg)
			plan_add(steps, &n, GPU_STEP_DIVIDE);
		plan_add(steps, &n, GPU_STEP_SHARD_OUT);
	}
	plan_add(steps, &n, GPU_STEP_WAIT);
	steps[n] = GPU_STEP_END;
	return n;
}

int gpu_sort_key_bits(size_t ids)
{
	int bits = 1;
	if (ids == 0 || ids > ((size_t)1 << 31))
		return 31;
	while (((size_t)1 << bits) < ids)
		bits++;
	return bits;
}

size_t gpu_embed_partial_rows(size_t slots)
{
	size_t rows = slots / GPU_EMBED_CHUNK_MIN;
	return rows ? rows : 1;
}
