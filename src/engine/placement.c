/*
 * placement: where the ranks run (see placement.h).
 *
 * One decision shared by the engine and `env`: the backend, each rank's GPU and the
 * collective, from [devices] and what the machine offers. It is a pure function of its
 * inputs, so the CPU test suite checks every branch, GPU or not.
 *
 * The rule on falling back to the CPU: `backend = auto` may run on the CPU only when the
 * user asked for nothing GPU-specific. Naming GPUs (devices.ids) or the NCCL collective
 * is asking for GPUs: when they cannot be had, the run is refused with the reason,
 * instead of a CPU run that would end "every check passed" without ever touching a GPU.
 */
#include "placement.h"

#include <stdio.h>
#include <string.h>

#include "ddptok_config.h"
#include "gemm.h"
#include "procs.h"
#include "world.h"
#if DDPTOK_HAVE_CUDA
#include "gpu.h"
#endif

/* Whether ranks q and r run on the same host (NULL hosts: one host). */
static int same_host(const struct rank_hosts *h, int q, int r)
{
	return !h || h->host[q] == h->host[r];
}

static int on_this_host(const struct rank_hosts *h, int r)
{
	return !h || h->host[r] == h->here;
}

static int ranks_on_this_host(const struct rank_hosts *h, int world)
{
	int here = 0;
	for (int r = 0; r < world; r++)
		here += on_this_host(h, r);
	return here;
}

/* Whether two ranks of one host are given the same GPU. */
static int ids_repeat(const int *ids, int n, const struct rank_hosts *h)
{
	for (int r = 0; r < n; r++)
		for (int q = 0; q < r; q++)
			if (ids[q] == ids[r] && same_host(h, q, r))
				return 1;
	return 0;
}

/* The default GPU of rank r: the ranks of its host numbered in rank order (rank r with
 * one process; with several, each host's processes take its GPUs in turn). */
static int host_slot(const struct rank_hosts *h, int r)
{
	int slot = 0;
	for (int q = 0; q < r; q++)
		slot += same_host(h, q, r);
	return slot;
}

int placement_rank_hosts(const struct settings *s, struct rank_hosts *h, struct err *e)
{
	const struct world *wd = world_get();
	int local, first;
	ERR_TRY(procs_local_ranks(s, &local, &first, e));
	memset(h, 0, sizeof *h);
	for (int p = 0; p < wd->procs; p++) {
		int host = p; /* the first process on the same host names it */
		for (int q = 0; q < p; q++)
			if (strcmp(wd->hosts[q], wd->hosts[p]) == 0) {
				host = q;
				break;
			}
		for (int l = 0; l < local; l++)
			h->host[p * local + l] = host;
		if (p == wd->proc)
			h->here = host;
	}
	return ERR_OK;
}

/* What in the settings asks for GPUs (NULL: nothing), for the messages of a refusal. */
static const char *gpu_request(const struct settings *s)
{
	if (s->backend == BACKEND_CUDA)
		return "devices.backend = cuda";
	if (s->n_ids)
		return "devices.ids names GPUs";
	if (s->collective == COLLECTIVE_NCCL)
		return "devices.collective = nccl";
	return NULL;
}

/* The backend for `gpus` usable GPUs; fills p->backend and p->why. */
static int plan_backend(const struct settings *s, const struct rank_hosts *h, int gpus,
			const char *gpu_why, struct placement *p, struct err *e)
{
	const int w = s->world;
	const char *asked = gpu_request(s);
	int here = ranks_on_this_host(h, w); /* those that need its GPUs */
	char ranks[64];
	if (here == w)
		snprintf(ranks, sizeof ranks, "W = %d ranks", w);
	else
		snprintf(ranks, sizeof ranks, "%d of the W = %d ranks on this host", here, w);
	if (s->backend == BACKEND_CPU) {
		snprintf(p->why, sizeof p->why, "cpu (requested by devices.backend)");
		return ERR_OK;
	}
	if (gpus <= 0) {
		if (asked)
			return ERR(e, ERR_DEVICE, "%s but no GPU is usable: %s (set devices.backend "
				   "= cpu to run on the CPU)", asked, gpu_why);
		snprintf(p->why, sizeof p->why, "cpu (auto: %s)", gpu_why);
		return ERR_OK;
	}
	for (int r = 0; r < w && s->n_ids; r++)
		if (on_this_host(h, r) && p->ids[r] >= gpus)
			return ERR(e, ERR_CONFIG, "devices.ids: rank %d is given GPU %d but %d GPU%s "
				   "visible (ids 0..%d)", r, p->ids[r], gpus,
				   gpus == 1 ? " is" : "s are", gpus - 1);
	if (!s->n_ids && here > gpus) {
		if (asked)
			return ERR(e, ERR_CONFIG, "%s: %s but only %d GPU%s visible; give "
				   "each rank a device with devices.ids (ranks may share one, e.g. "
				   "0,0, with devices.collective = host)", asked, ranks, gpus,
				   gpus == 1 ? " is" : "s are");
		snprintf(p->why, sizeof p->why, "cpu (auto: %s, %d GPU%s visible; to "
			 "share GPUs set devices.ids, e.g. 0,0)", ranks, gpus, gpus == 1 ? "" : "s");
		return ERR_OK;
	}
	p->backend = DEV_BACKEND_CUDA;
	snprintf(p->why, sizeof p->why, "cuda (%s, %d GPU%s visible)",
		 s->backend == BACKEND_CUDA ? "requested" : "auto", gpus, gpus == 1 ? "" : "s");
	return ERR_OK;
}

int placement_decide(const struct settings *s, const struct rank_hosts *hosts, int gpus,
		     const char *gpu_why, struct placement *p, struct err *e)
{
	const int w = s->world;
	memset(p, 0, sizeof *p);
	p->backend = DEV_BACKEND_CPU;
	for (int r = 0; r < w; r++)
		p->ids[r] = s->n_ids ? s->ids[r] : host_slot(hosts, r);
	if (!gpu_why || !*gpu_why)
		gpu_why = "no GPU visible";
	ERR_TRY(plan_backend(s, hosts, gpus, gpu_why, p, e));
	p->threads = dev_host_threads(s->threads, ranks_on_this_host(hosts, w));

	if (p->backend != DEV_BACKEND_CUDA) {
		ERR_TRY(gemm_select(s->gemm, p->gemm_why, sizeof p->gemm_why, e));
		p->gemm = gemm_chosen();
		if (s->collective == COLLECTIVE_NCCL)
			return ERR(e, ERR_CONFIG, "devices.collective = nccl needs the cuda backend, "
				   "and this run uses %s", p->why);
		snprintf(p->coll_why, sizeof p->coll_why, "host (the cpu backend's)");
		return ERR_OK;
	}
	int shared = ids_repeat(p->ids, w, hosts);
	if (s->collective == COLLECTIVE_HOST) {
		snprintf(p->coll_why, sizeof p->coll_why, "host (requested by devices.collective)");
	} else if (shared) {
		if (s->collective == COLLECTIVE_NCCL)
			return ERR(e, ERR_CONFIG, "devices.collective = nccl needs one GPU per rank "
				   "but devices.ids repeats a GPU; use devices.collective = host (or "
				   "auto) to share GPUs");
		snprintf(p->coll_why, sizeof p->coll_why, "host (auto: ranks share a GPU, which "
			 "NCCL does not allow)");
	} else {
		p->nccl = 1;
		snprintf(p->coll_why, sizeof p->coll_why, "nccl (%s)",
			 s->collective == COLLECTIVE_NCCL ? "requested" : "auto");
	}
	return ERR_OK;
}

int placement_create_dev(const struct placement *p, int rank, size_t upload_bytes,
			   size_t embed_slots, size_t embed_ids, size_t embed_dim, struct dev **out,
			   struct err *e)
{
	if (p->backend != DEV_BACKEND_CUDA)
		return dev_host_create_threads(rank, p->threads, out, e);
#if DDPTOK_HAVE_CUDA
	struct cuda_dev_sizes sizes = {upload_bytes, embed_slots, embed_ids, embed_dim};
	return cuda_dev_create(rank, p->ids[rank], &sizes, out, e);
#else
	return ERR(e, ERR_DEVICE, "this build has no CUDA backend");
#endif
}

int placement_create_coll(const struct placement *p, int world, struct barrier *barrier,
			    size_t max_count, struct coll **out, struct err *e)
{
	if (!p->nccl)
		return coll_host_create(world, barrier, max_count, out, e);
#if DDPTOK_HAVE_CUDA
	return nccl_coll_create(world, p->ids, barrier, max_count, out, e);
#else
	return ERR(e, ERR_DEVICE, "this build has no CUDA backend");
#endif
}

/* NCCL over this process's ranks of a clique spanning every process: process 0 makes
 * the clique's unique id and the others receive it. */
static int create_nccl_span(const struct placement *p, int local, int first,
			    struct barrier *barrier, size_t max_count, double timeout_s,
			    struct coll **out, struct err *e)
{
#if DDPTOK_HAVE_CUDA
	const struct world *wd = world_get();
	struct nccl_span span;
	memset(&span, 0, sizeof span);
	span.world = local * wd->procs;
	span.first = first;
	int rc = wd->proc == 0 ? nccl_unique_id(span.id, e) : ERR_OK;
	ERR_TRY(procs_from_process0(rc, span.id, sizeof span.id, "the NCCL unique id", timeout_s,
				    e));
	return nccl_coll_create_span(local, p->ids + first, &span, barrier, max_count, out, e);
#else
	(void)p, (void)local, (void)first, (void)barrier, (void)max_count, (void)timeout_s;
	(void)out;
	return ERR(e, ERR_DEVICE, "this build has no CUDA backend");
#endif
}

/* what each process says of its placement, compared across processes */
struct placement_view {
	int backend, nccl;
	char why[448]; /* the backend and collective, and why */
};

/* Every process decided the same backend and collective as process 0 (GPUs differ between
 * hosts, or some have none); ERR_CONFIG naming a process that differs and both plans
 * otherwise, on every process. */
static int agree_placement(const struct placement *p, double timeout_s, struct err *e)
{
	const struct world *wd = world_get();
	struct placement_view mine, all[WORLD_MAX_PROCS];
	memset(&mine, 0, sizeof mine);
	mine.backend = p->backend;
	mine.nccl = p->nccl;
	snprintf(mine.why, sizeof mine.why, "%s, collective %s", p->why, p->coll_why);
	ERR_TRY(world_allgather(&mine, sizeof mine, all, timeout_s,
				"the comparison of the device plans", e));
	for (int q = 1; q < wd->procs; q++)
		if (all[q].backend != all[0].backend || all[q].nccl != all[0].nccl) {
			world_failed_together(); /* every process compared the same plans */
			return ERR(e, ERR_CONFIG, "the processes would run on different devices: %s "
				   "runs %s; %s runs %s (every process must take the same backend "
				   "and collective: set devices.backend and devices.collective)",
				   world_proc_name(0), all[0].why, world_proc_name(q), all[q].why);
		}
	return ERR_OK;
}

int placement_create_coll_procs(const struct placement *p, int local, int first,
				struct barrier *barrier, size_t max_count, double timeout_s,
				struct coll **out, struct err *e)
{
	const struct world *wd = world_get();
	if (wd->procs == 1)
		return placement_create_coll(p, local, barrier, max_count, out, e);
	/* a process that chose otherwise would wait in another collective */
	ERR_TRY(agree_placement(p, timeout_s, e));
	if (p->nccl)
		return create_nccl_span(p, local, first, barrier, max_count, timeout_s, out, e);
	ERR_TRY(coll_host_create(local, barrier, max_count, out, e));
	return coll_host_span_processes(*out, wd->procs, wd->proc, timeout_s, e);
}

int placement_gpus(const struct settings *s, int *gpus, char *why, size_t whylen,
		     struct err *e)
{
	*gpus = 0;
	snprintf(why, whylen, "this build has no CUDA backend (meson option cuda)");
#if DDPTOK_HAVE_CUDA
	if (s->backend != BACKEND_CPU)
		return gpu_device_count(gpus, why, whylen, e);
#endif
	return ERR_OK;
}
