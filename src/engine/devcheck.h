/*
 * devcheck: does the device plan really work here? (`ddptok-run CONFIG env --check`)
 *
 * For every rank of the configuration's device plan, on its own device thread: create
 * its device (on a GPU: context, stream, cuBLAS handle), run an element-wise kernel and
 * compare it bit for bit with the host backend, run a GEMM and compare it with the host
 * backend within 1e-5 of sum_k |a||b| (float32 without TF32 or other reduced-precision
 * shortcuts stays far inside; TF32 does not), then an allreduce (sum and avg) over the
 * plan's collective (NCCL or the host collective) of integer-valued contributions,
 * whose exact result the CPU computes here: every rank must receive it exactly. The
 * first failure is ERR_DEVCHECK naming the rank, its device and the check.
 */
#ifndef DDPTOK_DEVCHECK_H
#define DDPTOK_DEVCHECK_H

#include <stdio.h>

#include "placement.h"
#include "settings.h"

/* Runs the checks for plan `p` over s->world ranks, one line per rank on `out`.
 * corrupt_rank >= 0 (a testing aid) adds 1 to that rank's received allreduce result
 * before it is compared, so that the check is shown to fail. */
int devcheck_run(const struct settings *s, const struct placement *p, int corrupt_rank,
		 FILE *out, struct err *e);

#endif
