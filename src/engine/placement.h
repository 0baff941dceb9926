/*
 * placement: where the ranks run. One decision shared by the engine and `env`: the
 * backend, each rank's GPU and the collective, from [devices] and what the machine
 * offers, and the devices and collective made from it.
 */
#ifndef DDPTOK_PLACEMENT_H
#define DDPTOK_PLACEMENT_H

#include <stddef.h>

#include "coll.h"
#include "dev.h"
#include "err.h"
#include "ranks.h"
#include "settings.h"

/* Where the ranks run: the backend, each rank's device and the collective, decided from
 * [devices] and the GPUs visible. */
struct placement {
	int backend;              /* enum dev_backend */
	int nccl;                 /* 1: NCCL collective; 0: the host allreduce */
	int ids[MAX_WORLD];  /* device of each rank, by global rank (cuda backend) */
	int threads;              /* threads of each rank (cpu backend; devices.threads resolved) */
	char why[256];            /* how the backend was chosen, for the user */
	char coll_why[160];       /* how the collective was chosen */
	int gemm;                 /* cpu backend: enum gemm_impl, the process's sgemm */
	char gemm_why[160];       /* how it was chosen */
};

/* Which ranks share a host, for numbering GPUs when a run spans several processes:
 * host[g] names the host of global rank g (equal numbers: the same host), `here` this
 * process's. */
struct rank_hosts {
	int host[MAX_WORLD];
	int here;
};

/* The hosts of this run's ranks (world.h); ERR_CONFIG when devices.world does not divide
 * among the processes (procs_local_ranks). */
int placement_rank_hosts(const struct settings *s, struct rank_hosts *h, struct err *e);

/* Decides the device plan for `gpus` usable GPUs (gpu_why: why there are none, when 0)
 * on this host, for ranks placed on hosts as `hosts` says (NULL: all on this one).
 * backend = auto takes cuda when every rank of this host has a GPU to run on: as many
 * visible (by default a host's ranks take its GPUs 0, 1, ... in rank order), or
 * devices.ids given (ids may repeat: ranks then share a GPU). It falls back to the
 * cpu backend, saying why, only when nothing GPU-specific was asked for (devices.ids,
 * collective = nccl); otherwise the run is refused with the reason. collective = auto
 * takes NCCL on the cuda backend unless ranks share a GPU. Choices that cannot run are
 * ERR_CONFIG / ERR_DEVICE naming the key. No side effect: the engine and `env` share it. */
int placement_decide(const struct settings *s, const struct rank_hosts *hosts, int gpus,
		     const char *gpu_why, struct placement *p, struct err *e);
/* The usable GPUs for the settings (none asked of the driver when devices.backend = cpu,
 * or in a build without the CUDA backend); `why` says why there are none. */
int placement_gpus(const struct settings *s, int *gpus, char *why, size_t whylen,
		     struct err *e);
/* The device of global rank `rank` as the plan says (call on that rank's device
 * thread). A GPU allocates what its operations need once, here: pinned staging for
 * upload_bytes queued between two waits, and the workspace of an embed_backward over
 * embed_slots context slots of ids below embed_ids, embeddings embed_dim wide (0, 0, 0, 0:
 * the smallest, any id). */
int placement_create_dev(const struct placement *p, int rank, size_t upload_bytes,
			   size_t embed_slots, size_t embed_ids, size_t embed_dim, struct dev **out,
			   struct err *e);
/* The plan's collective over `world` ranks meeting at `barrier` (not owned); the host
 * collective stages up to max_count elements. */
int placement_create_coll(const struct placement *p, int world, struct barrier *barrier,
			    size_t max_count, struct coll **out, struct err *e);
/* The collective of this process's `local` ranks, global ranks first.. (world.h): as
 * placement_create_coll in a world of one; with several processes, once every process
 * is found to have decided the same backend and collective, one spanning them all (the
 * host collective over MPI, or one NCCL clique whose id process 0 makes and sends). On
 * failure *out may hold a collective to destroy. */
int placement_create_coll_procs(const struct placement *p, int local, int first,
				struct barrier *barrier, size_t max_count, double timeout_s,
				struct coll **out, struct err *e);

#endif
