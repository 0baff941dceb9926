/*
 * devcheck: env --check, the device plan tried for real (see devcheck.h).
 *
 * Each rank checks its own device on its own thread (a GPU context belongs to the
 * thread that drives it), against a host backend it creates beside it. The inputs are
 * small and fixed by the rank, so a failure repeats.
 */
#include "devcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "prng.h"

enum {
	TANH_ROWS = 7, TANH_COLS = 333,             /* element-wise kernel */
	GEMM_M = 48, GEMM_N = 40, GEMM_K = 96,      /* GEMM */
	SUM_COUNT = 4099,                           /* allreduce elements */
};
#define GEMM_TOL 1e-5 /* of sum_k |a||b|: float32 is ~1e-7, TF32 ~5e-4 */

struct check_rank {
	struct dev *dev;  /* the plan's device */
	struct dev *host; /* the host backend, the reference */
	double gemm_err;  /* worst |gpu - host| / bound */
	/* the buffer of a failed allreduce, released with the device once every rank has
	 * left (a stalled peer may still write into it: coll.h) */
	float *kept;
};

struct check_run {
	const struct settings *s;
	const struct placement *p;
	struct coll *coll;
	int corrupt_rank;
	struct check_rank rk[MAX_WORLD];
};

static int open_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct check_run *cr = arg;
	struct check_rank *k = &cr->rk[rank];
	ERR_TRY(placement_create_dev(cr->p, rank, 0, 0, 0, 0, &k->dev, e));
	return dev_host_create(rank, &k->host, e);
}

static int close_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct check_run *cr = arg;
	if (cr->rk[rank].kept)
		cr->rk[rank].dev->ops->release(cr->rk[rank].dev, cr->rk[rank].kept);
	dev_destroy(cr->rk[rank].dev);
	dev_destroy(cr->rk[rank].host);
	cr->rk[rank].dev = cr->rk[rank].host = NULL;
	return ERR_OK;
}

/* Allocates n floats on d and uploads x there (or only zeroes when x is NULL). */
static int put(struct dev *d, const float *x, size_t n, float **out, struct err *e)
{
	ERR_TRY(d->ops->alloc(d, n * sizeof(float), (void **)out, e));
	if (x)
		ERR_TRY(d->ops->upload(d, *out, x, n * sizeof(float), e));
	return ERR_OK;
}

/* bias_tanh on device d into host `z_out`; `x` holds rows*cols + cols floats (z, then
 * the bias). The kernel shares its formula with the host (kmath.h): the bits must agree. */
static int run_kernel(struct dev *d, const float *x, float *z_out, struct err *e)
{
	const size_t n = (size_t)TANH_ROWS * TANH_COLS;
	float *z = NULL, *bias = NULL;
	int rc;
	if ((rc = put(d, x, n, &z, e)) == ERR_OK && (rc = put(d, x + n, TANH_COLS, &bias, e)) == ERR_OK &&
	    (rc = d->ops->bias_tanh(d, TANH_ROWS, TANH_COLS, bias, z, e)) == ERR_OK)
		rc = d->ops->download(d, z_out, z, n * sizeof(float), e);
	d->ops->release(d, z);
	d->ops->release(d, bias);
	return rc;
}

/* c = a b (row-major, m x k times k x n) on device d into host `c`. */
static int run_gemm(struct dev *d, const float *a, const float *b, float *c, struct err *e)
{
	float *da = NULL, *db = NULL, *dc = NULL;
	int rc;
	if ((rc = put(d, a, (size_t)GEMM_M * GEMM_K, &da, e)) == ERR_OK &&
	    (rc = put(d, b, (size_t)GEMM_K * GEMM_N, &db, e)) == ERR_OK &&
	    (rc = put(d, NULL, (size_t)GEMM_M * GEMM_N, &dc, e)) == ERR_OK &&
	    (rc = d->ops->gemm(d, 0, 0, GEMM_M, GEMM_N, GEMM_K, 1.0f, da, GEMM_K, db, GEMM_N,
			       0.0f, dc, GEMM_N, e)) == ERR_OK)
		rc = d->ops->download(d, c, dc, (size_t)GEMM_M * GEMM_N * sizeof(float), e);
	d->ops->release(d, da);
	d->ops->release(d, db);
	d->ops->release(d, dc);
	return rc;
}

/* The worst |got - want| relative to the bound sum_k |a||b| of each element. */
static double gemm_error(const float *a, const float *b, const float *got, const float *want)
{
	double worst = 0.0;
	for (int i = 0; i < GEMM_M; i++)
		for (int j = 0; j < GEMM_N; j++) {
			double bound = 0.0;
			for (int q = 0; q < GEMM_K; q++)
				bound += fabs((double)a[i * GEMM_K + q] * b[q * GEMM_N + j]);
			double d = fabs((double)got[i * GEMM_N + j] - want[i * GEMM_N + j]);
			double rel = bound > 0 ? d / bound : d;
			if (isnan(d))
				return INFINITY;
			if (rel > worst)
				worst = rel;
		}
	return worst;
}

/* Rank r's contribution to element i: small integers, so every order of summation gives
 * the same exact float, which the CPU knows. */
static float contribution(int rank, size_t i)
{
	return (float)((rank + 1) * ((int)(i % 17) - 8));
}

static int check_allreduce(struct check_run *cr, int rank, enum coll_op op, float *x,
			   struct err *e)
{
	struct dev *d = cr->rk[rank].dev;
	const int w = cr->s->world;
	float *buf = NULL;
	for (size_t i = 0; i < SUM_COUNT; i++)
		x[i] = contribution(rank, i);
	int rc = put(d, x, SUM_COUNT, &buf, e);
	if (rc == ERR_OK) {
		rc = cr->coll->ops->allreduce(cr->coll, rank, d, buf, SUM_COUNT, COLL_F32, op, 0, e);
		if (rc != ERR_OK) {
			cr->rk[rank].kept = buf;
			return rc;
		}
		rc = d->ops->download(d, x, buf, SUM_COUNT * sizeof(float), e);
	}
	d->ops->release(d, buf);
	if (rc != ERR_OK)
		return rc;
	if (rank == cr->corrupt_rank)
		x[0] += 1.0f;
	for (size_t i = 0; i < SUM_COUNT; i++) {
		float sum = 0.0f;
		for (int r = 0; r < w; r++)
			sum += contribution(r, i);
		float want = op == COLL_AVG ? sum / (float)w : sum; /* coll.h's definition */
		if (memcmp(&x[i], &want, sizeof want) != 0)
			return ERR(e, ERR_DEVCHECK, "rank %d: allreduce %s over the %s collective: "
				   "element %zu is %.9g, the CPU computes %.9g", rank, coll_op_name(op),
				   cr->coll->ops->name, i, x[i], want);
	}
	return ERR_OK;
}

static void fill(struct prng *r, float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = 6.0f * prng_unit(r) - 3.0f;
}

static int check_fn(int rank, void *ctx, void *arg, struct err *e)
{
	struct check_run *cr = arg;
	struct check_rank *k = &cr->rk[rank];
	const size_t nz = (size_t)TANH_ROWS * TANH_COLS, nx = nz + TANH_COLS;
	const size_t na = (size_t)GEMM_M * GEMM_K, nb = (size_t)GEMM_K * GEMM_N;
	const size_t nc = (size_t)GEMM_M * GEMM_N;
	float *mem = malloc((nx + 2 * nz + na + nb + 2 * nc + SUM_COUNT) * sizeof(float));
	if (!mem)
		return ERR(e, ERR_NOMEM, "rank %d: out of memory", rank);
	float *x = mem, *z = x + nx, *z_ref = z + nz, *a = z_ref + nz, *b = a + na, *c = b + nb;
	float *c_ref = c + nc, *sum = c_ref + nc;
	struct prng r;
	prng_seed(&r, 1234, (uint64_t)rank);
	fill(&r, x, nx);
	fill(&r, a, na);
	fill(&r, b, nb);
	int rc = run_kernel(k->dev, x, z, e);
	if (rc == ERR_OK && (rc = run_kernel(k->host, x, z_ref, e)) == ERR_OK &&
	    memcmp(z, z_ref, nz * sizeof(float)) != 0)
		rc = ERR(e, ERR_DEVCHECK, "rank %d: the bias_tanh kernel on the %s backend differs "
			 "from the host's in its bits (fused multiply-add or fast math?)", rank,
			 k->dev->ops->name);
	if (rc == ERR_OK && (rc = run_gemm(k->dev, a, b, c, e)) == ERR_OK &&
	    (rc = run_gemm(k->host, a, b, c_ref, e)) == ERR_OK) {
		k->gemm_err = gemm_error(a, b, c, c_ref);
		if (!(k->gemm_err <= GEMM_TOL))
			rc = ERR(e, ERR_DEVCHECK, "rank %d: GEMM %dx%dx%d on the %s backend is off by "
				 "%.3g of sum|a||b| (limit %g: reduced precision such as TF32?)", rank,
				 GEMM_M, GEMM_N, GEMM_K, k->dev->ops->name, k->gemm_err, GEMM_TOL);
	}
	if (rc == ERR_OK)
		rc = check_allreduce(cr, rank, COLL_SUM, sum, e);
	if (rc == ERR_OK)
		rc = check_allreduce(cr, rank, COLL_AVG, sum, e);
	free(mem);
	return rc;
}

static void print_check_run(const struct check_run *cr, FILE *out)
{
	for (int r = 0; r < cr->s->world; r++) {
		char where[32] = "cpu";
		if (cr->p->backend == DEV_BACKEND_CUDA)
			snprintf(where, sizeof where, "GPU %d", cr->p->ids[r]);
		fprintf(out, "check rank %d (%s): device ok, bias_tanh bit-exact, gemm %dx%dx%d "
			"error %.2g x sum|a||b| (limit %g), allreduce sum and avg exact over %s\n",
			r, where, GEMM_M, GEMM_N, GEMM_K, cr->rk[r].gemm_err, GEMM_TOL,
			cr->coll->ops->name);
	}
}

int devcheck_run(const struct settings *s, const struct placement *p, int corrupt_rank,
		 FILE *out, struct err *e)
{
	struct check_run cr;
	struct pool *pool = NULL;
	memset(&cr, 0, sizeof cr);
	cr.s = s;
	cr.p = p;
	cr.corrupt_rank = corrupt_rank;
	int rc = pool_create(s->world, s->timeout_s, &pool, e);
	if (rc == ERR_OK && (rc = pool_run(pool, open_fn, &cr, e)) == ERR_OK &&
	    (rc = placement_create_coll(p, s->world, pool_barrier(pool), SUM_COUNT, &cr.coll,
					  e)) == ERR_OK) {
		pool_set_coll(pool, cr.coll);
		if ((rc = pool_run(pool, check_fn, &cr, e)) == ERR_OK)
			print_check_run(&cr, out);
		pool_set_coll(pool, NULL);
	}
	/* a device thread the watchdog left behind may still be inside the collective, as in
	 * engine_destroy(): then nothing of it is freed, the process is ending */
	if (cr.coll && !(pool && pool_abandoned(pool)))
		coll_destroy(cr.coll);
	if (pool) {
		struct err ignore;
		err_clear(&ignore);
		pool_run(pool, close_fn, &cr, &ignore);
		pool_destroy(pool);
	}
	if (rc != ERR_OK) {
		err_prefix(e, "env --check");
		e->code = rc = ERR_DEVCHECK;
	}
	return rc;
}
