/*
 * test-gpt: the GPT model (src/model/gpt*.c) on its own.
 *
 * Its gradient against a float64 re-implementation written here from docs/gpt.md (each
 * document on its own, central differences of the float64 loss sum), on every tensor,
 * in both layouts; documents of one microbatch never see each other (a document's
 * logits keep their bits whatever its neighbour holds), and that check fails on a batch
 * whose documents share a segment; the attention's heads batched in groups of any size
 * give the bits of all at once, and the groups fit the score buffers' budget; the tensor
 * list, the initialization and the shapes the settings refuse.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check-run.h"
#include "corpus.h"
#include "corpus_arrays.h"
#include "gpt.h"
#include "gpt_batch.h"
#include "gpt_shape.h"
#include "gpt_step.h"
#include "gpt_ws.h"
#include "model.h"
#include "testutil.h"

/* ---- the float64 re-implementation (docs/gpt.md) ---- */

/* y (n) = W (n x k, row-major) x + b */
static void ref_linear(const double *W, const double *b, const double *x, int n, int k,
		       double *y)
{
	for (int i = 0; i < n; i++) {
		double s = b ? b[i] : 0.0;
		for (int j = 0; j < k; j++)
			s += W[(size_t)i * k + j] * x[j];
		y[i] = s;
	}
}

static void ref_layernorm(const double *x, const double *w, const double *b, int n, double *y)
{
	double mean = 0.0, var = 0.0;
	for (int j = 0; j < n; j++)
		mean += x[j] / n;
	for (int j = 0; j < n; j++)
		var += (x[j] - mean) * (x[j] - mean) / n;
	double rstd = 1.0 / sqrt(var + 1e-5);
	for (int j = 0; j < n; j++)
		y[j] = (x[j] - mean) * rstd * w[j] + b[j];
}

static double ref_gelu(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* causal attention of one document of n positions: qkv (n x 3C) -> out (n x C) */
static void ref_attention(const double *qkv, int n, int C, int H, double *out)
{
	int hd = C / H;
	double *p = malloc(sizeof(double) * n);
	for (int h = 0; h < H; h++)
		for (int t = 0; t < n; t++) {
			double mx = -INFINITY, sum = 0.0;
			for (int j = 0; j <= t; j++) {
				double s = 0.0;
				for (int c = 0; c < hd; c++)
					s += qkv[t * 3 * C + h * hd + c] * qkv[j * 3 * C + C + h * hd + c];
				p[j] = s / sqrt((double)hd);
				mx = p[j] > mx ? p[j] : mx;
			}
			for (int j = 0; j <= t; j++)
				sum += (p[j] = exp(p[j] - mx));
			for (int c = 0; c < hd; c++) {
				double o = 0.0;
				for (int j = 0; j <= t; j++)
					o += p[j] / sum * qkv[j * 3 * C + 2 * C + h * hd + c];
				out[t * C + h * hd + c] = o;
			}
		}
	free(p);
}

/* one block on the residual stream x (n x C), in place */
static void ref_block(const struct model_shape *m, const double *P, int l, double *x, int n)
{
	int C = GPT_C(m), C4 = 4 * C;
	const struct param_info *p = m->p;
#define T_(t, per) (P + p[t].offset + (size_t)l * (per))
	double *a = malloc(sizeof(double) * n * C), *qkv = malloc(sizeof(double) * n * 3 * C);
	double *o = malloc(sizeof(double) * n * C), *h = malloc(sizeof(double) * C4);
	double *y = malloc(sizeof(double) * C);
	for (int t = 0; t < n; t++) {
		ref_layernorm(x + t * C, T_(GPT_LN1W, C), T_(GPT_LN1B, C), C, a + t * C);
		ref_linear(T_(GPT_QKVW, 3 * C * C), T_(GPT_QKVB, 3 * C), a + t * C, 3 * C, C,
			   qkv + t * 3 * C);
	}
	ref_attention(qkv, n, C, GPT_H(m), o);
	for (int t = 0; t < n; t++) {
		ref_linear(T_(GPT_ATTPROJW, C * C), T_(GPT_ATTPROJB, C), o + t * C, C, C, y);
		for (int c = 0; c < C; c++)
			x[t * C + c] += y[c];
		ref_layernorm(x + t * C, T_(GPT_LN2W, C), T_(GPT_LN2B, C), C, a + t * C);
		ref_linear(T_(GPT_FCW, C4 * C), T_(GPT_FCB, C4), a + t * C, C4, C, h);
		for (int c = 0; c < C4; c++)
			h[c] = ref_gelu(h[c]);
		ref_linear(T_(GPT_FCPROJW, C * C4), T_(GPT_FCPROJB, C), h, C, C4, y);
		for (int c = 0; c < C; c++)
			x[t * C + c] += y[c];
	}
#undef T_
	free(a);
	free(qkv);
	free(o);
	free(h);
	free(y);
}

/* The loss sum of sequence id of c alone; logits (n x V) when not NULL. */
static double ref_document(const struct model_shape *m, const double *P, const struct corpus *c,
			   int id, double *logits_out)
{
	int n = corpus_len(c, id), C = GPT_C(m), V = m->vocab;
	const int32_t *tok = c->tokens + c->offset[id];
	const struct param_info *p = m->p;
	double *x = malloc(sizeof(double) * n * C), *f = malloc(sizeof(double) * C);
	double *z = malloc(sizeof(double) * V), loss = 0.0;
	for (int t = 0; t < n; t++)
		for (int k = 0; k < C; k++)
			x[t * C + k] = P[p[GPT_WTE].offset + (size_t)(t ? tok[t - 1] : DATA_BOS) * C + k] +
				       P[p[GPT_WPE].offset + (size_t)t * C + k];
	for (int l = 0; l < GPT_L(m); l++)
		ref_block(m, P, l, x, n);
	for (int t = 0; t < n; t++) {
		ref_layernorm(x + t * C, P + p[GPT_LNFW].offset, P + p[GPT_LNFB].offset, C, f);
		ref_linear(P + p[GPT_WTE].offset, NULL, f, V, C, z);
		if (logits_out)
			memcpy(logits_out + (size_t)t * V, z, sizeof(double) * V);
		if (!corpus_is_target(c, id, t))
			continue;
		double mx = -INFINITY, sum = 0.0;
		for (int v = 0; v < V; v++)
			mx = z[v] > mx ? z[v] : mx;
		for (int v = 0; v < V; v++)
			sum += exp(z[v] - mx);
		loss += mx + log(sum) - z[tok[t]];
	}
	free(x);
	free(f);
	free(z);
	return loss;
}

static double ref_loss(const struct model_shape *m, const double *P, const struct corpus *c,
		       const int *ids, int n)
{
	double s = 0.0;
	for (int i = 0; i < n; i++)
		s += ref_document(m, P, c, ids[i], NULL);
	return s;
}

/* ---- helpers ---- */

struct rig {
	struct settings s;
	struct corpus c;
	struct model_shape m;
	struct dev *d;
	struct model_ws *ws;
	struct model_batch *b;
	float *p;
};

static void rig_open(struct rig *r, const char *sets, int max_rows)
{
	struct err e;
	err_clear(&e);
	testutil_settings(&r->s, "model.kind=gpt %s", sets);
	ck_assert_msg(corpus_build(&r->s, &r->c, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(model_shape_init(&r->m, &r->s, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(dev_host_create(0, &r->d, &e), ERR_OK);
	ck_assert_msg(model_ws_create(r->d, &r->m, max_rows, &r->ws, &e) == ERR_OK, "%s", e.msg);
	ck_assert_int_eq(model_batch_alloc(&r->m, max_rows, &r->b, &e), ERR_OK);
	r->p = malloc(r->m.n_params * sizeof(float));
	model_init_params(&r->m, 11, r->p);
}

static void rig_close(struct rig *r)
{
	free(r->p);
	model_batch_free(r->b);
	model_ws_destroy(r->ws);
	dev_destroy(r->d);
	corpus_free(&r->c);
}

/* the tiny GPT of the gradient check */
#define TINY "model.layers=2 model.heads=2 model.width=16 model.context=8 data.vocab=12 " \
	     "data.min_len=3 data.max_len=8 data.prefix_max=2"

/* ---- the gradient ---- */

static void gradient_matches_double_in(int layout)
{
	struct rig r;
	struct err e;
	int ids[3] = {0, 5, 9};
	err_clear(&e);
	rig_open(&r, TINY, 3 * 8);
	/* the LayerNorm and bias values of a fresh model are special (1, 0): move them */
	for (size_t i = 0; i < r.m.n_params; i++)
		r.p[i] += 0.05f * sinf((float)i * 0.7f);
	ck_assert_int_eq(model_batch_build(r.b, &r.c, ids, 3, layout, &e), ERR_OK);
	ck_assert_int_gt(r.b->supervised, 0);
	float *g = calloc(r.m.n_params, sizeof(float));
	double loss = 0.0, scale = 0.25;
	ck_assert_int_eq(model_step(r.ws, r.p, g, r.b, (float)scale, 1.0, &loss, &e), ERR_OK);
	double *P = malloc(sizeof(double) * r.m.n_params);
	for (size_t i = 0; i < r.m.n_params; i++)
		P[i] = r.p[i];
	double want = ref_loss(&r.m, P, &r.c, ids, 3);
	ck_assert_msg(fabs(loss - want) <= 1e-5 * want, "loss %.9g, float64 %.9g", loss, want);
	/* every tensor, every element: central differences of the float64 loss sum */
	for (int t = 0; t < r.m.n_tensors; t++) {
		const struct param_info *pi = &r.m.p[t];
		double worst = 0.0, norm = 0.0;
		for (size_t k = pi->offset; k < pi->offset + pi->count; k++) {
			const double h = 1e-5;
			double keep = P[k];
			P[k] = keep + h;
			double up = ref_loss(&r.m, P, &r.c, ids, 3);
			P[k] = keep - h;
			double down = ref_loss(&r.m, P, &r.c, ids, 3);
			P[k] = keep;
			double ref = scale * (up - down) / (2 * h), diff = fabs(g[k] - ref);
			worst = diff > worst ? diff : worst;
			norm = fabs(ref) > norm ? fabs(ref) : norm;
		}
		ck_assert_msg(norm > 0.0, "%s: no gradient at all", pi->name);
		/* measured: below 2e-7 of the largest on every tensor */
		ck_assert_msg(worst <= 1e-5 * norm, "%s (%s): worst error %g, largest %g",
			      pi->name, layout == LAYOUT_PACKED ? "packed" : "padded", worst, norm);
	}
	free(P);
	free(g);
	rig_close(&r);
}

START_TEST(gradient_matches_double_packed)
{
	gradient_matches_double_in(LAYOUT_PACKED);
}
END_TEST

START_TEST(gradient_matches_double_padded)
{
	gradient_matches_double_in(LAYOUT_PADDED);
}
END_TEST

/* ---- the attention's heads in groups ---- */

/* loss and gradient of a step of three packed documents with the heads batched G at a
 * time (G = 0: the workspace's own choice); the gradient in a new array */
static float *step_in_groups(struct rig *r, int G, double *loss)
{
	struct err e;
	int ids[3] = {0, 5, 9};
	err_clear(&e);
	if (G)
		((struct gpt_ws *)r->ws)->heads_per_call = G;
	ck_assert_int_eq(model_batch_build(r->b, &r->c, ids, 3, LAYOUT_PACKED, &e), ERR_OK);
	float *g = calloc(r->m.n_params, sizeof(float));
	*loss = 0.0;
	ck_assert_int_eq(model_step(r->ws, r->p, g, r->b, 0.25f, 1.0, loss, &e), ERR_OK);
	return g;
}

/* One call for all heads, one per head, or groups of 3 with a last one of 1: the same
 * bits (every head's products and rows are the same operations in each). */
START_TEST(head_groups_give_the_bits_of_all_heads)
{
	struct rig r;
	double want_loss, loss;
	rig_open(&r, "model.layers=2 model.heads=4 model.width=16 model.context=8 "
		 "data.vocab=12 data.min_len=3 data.max_len=8 data.prefix_max=2", 3 * 8);
	ck_assert_int_eq(((struct gpt_ws *)r.ws)->heads_per_call, 4);
	float *want = step_in_groups(&r, 0, &want_loss);
	for (int G = 1; G <= 3; G += 2) {
		float *g = step_in_groups(&r, G, &loss);
		ck_assert_msg(memcmp(&loss, &want_loss, sizeof loss) == 0, "loss in groups of %d: "
			      "%.17g, all heads %.17g", G, loss, want_loss);
		ck_assert_msg(memcmp(g, want, r.m.n_params * sizeof(float)) == 0,
			      "gradient in groups of %d heads differs from all heads at once", G);
		free(g);
	}
	free(want);
	rig_close(&r);
}
END_TEST

/* the rule: every head where H x S x S fits GPT_SCORE_FLOATS (S: the shorter of the
 * context and the batch's rows), else as many as fit */
START_TEST(heads_per_call_fit_the_score_budget)
{
	const struct {
		int heads, context, rows, want;
	} cases[] = {{12, 1024, 4096, 12}, {16, 1024, 1024, 16}, {8, 2048, 2048, 4},
		     {16, 2048, 8192, 4}, {12, 4096, 4096, 1}, {12, 4096, 256, 12}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct settings s;
		struct model_shape m;
		struct err e;
		err_clear(&e);
		testutil_settings(&s, "model.kind=gpt model.heads=%d model.width=%d "
				  "model.context=%d data.max_len=%d", cases[i].heads,
				  16 * cases[i].heads, cases[i].context, cases[i].context);
		ck_assert_msg(model_shape_init(&m, &s, &e) == ERR_OK, "%s", e.msg);
		size_t S = gpt_ws_segment_max(&m, cases[i].rows);
		ck_assert_uint_eq(S, (size_t)(cases[i].rows < cases[i].context ? cases[i].rows
									 : cases[i].context));
		ck_assert_int_eq(gpt_ws_heads_per_call(&m, cases[i].rows), cases[i].want);
	}
}
END_TEST

/* ---- documents never see each other ---- */

/* the logits of the corpus's sequences ids[0..n) laid out (rows x V), in a new array */
static float *logits_of(struct rig *r, const struct corpus *c, const int *ids, int n, int layout,
			int merge)
{
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(model_batch_build(r->b, c, ids, n, layout, &e), ERR_OK);
	struct gpt_batch *b = (struct gpt_batch *)r->b;
	if (merge) { /* a broken layout: every row in one segment */
		b->seg[0] = 0;
		b->seg[1] = r->b->rows;
		b->n_seg = 1;
	}
	float *out = malloc(sizeof(float) * (size_t)r->b->rows * r->m.vocab);
	ck_assert_msg(gpt_logits(r->ws, r->p, r->b, out, &e) == ERR_OK, "%s", e.msg);
	return out;
}

/* a corpus of two sequences: a neighbour (length 5, its tokens from `first`), then
 * the document watched (length 4) */
static void two_docs(struct corpus *c, int first)
{
	int32_t len[2] = {5, 4}, pre[2] = {0, 1}, tok[9];
	struct err e;
	err_clear(&e);
	for (int i = 0; i < 5; i++)
		tok[i] = 4 + (first + 3 * i) % 8;
	for (int i = 0; i < 4; i++)
		tok[5 + i] = 4 + (2 * i + 1) % 8;
	ck_assert_msg(corpus_from_arrays(2, len, pre, tok, 12, c, &e) == ERR_OK, "%s", e.msg);
}

/* 1 when the watched document's logits (rows 5..8 of a packed or padded batch) are the
 * same bits with either neighbour; *diff: the largest difference */
static int watched_same(struct rig *r, int layout, int merge, double *diff)
{
	struct corpus a, b;
	int ids[2] = {0, 1}, V = r->m.vocab;
	two_docs(&a, 0);
	two_docs(&b, 5);
	float *la = logits_of(r, &a, ids, 2, layout, merge);
	float *lb = logits_of(r, &b, ids, 2, layout, merge);
	/* the watched document starts at row 5 in both layouts (padded: longest = 5) */
	size_t off = (size_t)5 * V, n = (size_t)4 * V;
	*diff = 0.0;
	for (size_t i = 0; i < n; i++)
		*diff = fmax(*diff, fabs((double)la[off + i] - lb[off + i]));
	int same = memcmp(la + off, lb + off, n * sizeof(float)) == 0;
	/* the neighbour did change its own logits */
	ck_assert(memcmp(la, lb, 5 * (size_t)V * sizeof(float)) != 0);
	free(la);
	free(lb);
	corpus_free(&a);
	corpus_free(&b);
	return same;
}

START_TEST(documents_never_see_each_other)
{
	struct rig r;
	double diff;
	rig_open(&r, TINY, 16);
	ck_assert(watched_same(&r, LAYOUT_PACKED, 0, &diff));
	ck_assert(watched_same(&r, LAYOUT_PADDED, 0, &diff));
	/* and the watched document's logits are those of the document alone, in float64 */
	struct corpus c;
	two_docs(&c, 0);
	int ids[2] = {0, 1}, V = r.m.vocab;
	float *l = logits_of(&r, &c, ids, 2, LAYOUT_PACKED, 0);
	double *P = malloc(sizeof(double) * r.m.n_params), ref[4 * 12];
	for (size_t i = 0; i < r.m.n_params; i++)
		P[i] = r.p[i];
	ref_document(&r.m, P, &c, 1, ref);
	for (int i = 0; i < 4 * V; i++)
		ck_assert_msg(fabs(l[5 * V + i] - ref[i]) < 1e-4, "logit %d: %g, float64 %g", i,
			      l[5 * V + i], ref[i]);
	free(P);
	free(l);
	corpus_free(&c);
	rig_close(&r);
}
END_TEST

START_TEST(the_isolation_check_catches_a_shared_segment)
{
	struct rig r;
	double diff;
	rig_open(&r, TINY, 16);
	/* the same batches with both documents in one segment: the watched one, after its
	 * neighbour, attends to it */
	ck_assert(!watched_same(&r, LAYOUT_PACKED, 1, &diff));
	ck_assert_msg(diff > 1e-3, "largest difference %g", diff);
	rig_close(&r);
}
END_TEST

/* ---- tensors, initialization, refused shapes ---- */

START_TEST(tensors_follow_llmc)
{
	static const char *const names[] = {"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb",
		"attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw",
		"lnfb"};
	static const int decay[] = {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};
	struct model_shape m;
	int L = 3, C = 8, V = 20, T = 6;
	gpt_shape(&m, V, L, 2, C, T);
	ck_assert_int_eq(m.n_tensors, GPT_NTENSORS);
	for (int t = 0; t < GPT_NTENSORS; t++) {
		ck_assert_str_eq(m.p[t].name, names[t]);
		ck_assert_int_eq(m.p[t].decay, decay[t]);
	}
	ck_assert_int_eq(m.p[GPT_QKVW].rows, L * 3 * C);
	ck_assert_int_eq(m.p[GPT_FCPROJW].cols, 4 * C);
	ck_assert_int_eq(m.p[GPT_FCB].cols, 4 * C);
	size_t want = (size_t)V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
	ck_assert_uint_eq(m.n_params, want);
	char text[200];
	model_shape_text(&m, text, sizeof text);
	ck_assert_str_eq(text, "gpt (vocab 20, layers 3, heads 2, width 8, context 6)");
}
END_TEST

/* model_init_next in pieces of any size, across tensors' boundaries, gives the values of
 * the whole vector made at once: the first parameters can be uploaded a piece at a time. */
START_TEST(initialization_in_pieces)
{
	struct model_shape m;
	struct model_init it;
	gpt_shape(&m, 64, 2, 4, 64, 32);
	size_t n = m.n_params, sizes[] = {1, 7, 4096, 63, 100000};
	float *whole = malloc(n * sizeof(float)), *pieces = malloc(n * sizeof(float));
	ck_assert(whole && pieces);
	gpt_init_params(&m, 3, whole);
	model_init_begin(&it, &m, 3);
	for (size_t lo = 0, k = 0; lo < n; k++) {
		size_t len = sizes[k % 5] < n - lo ? sizes[k % 5] : n - lo;
		model_init_next(&it, pieces + lo, len);
		lo += len;
	}
	ck_assert(memcmp(whole, pieces, n * sizeof(float)) == 0);
	model_init_params(&m, 4, pieces); /* another seed: other values */
	ck_assert(memcmp(whole, pieces, n * sizeof(float)) != 0);
	free(whole);
	free(pieces);
}
END_TEST

START_TEST(initialization_is_gpt2s)
{
	struct model_shape m;
	gpt_shape(&m, 64, 4, 4, 64, 32);
	float *a = malloc(m.n_params * sizeof(float)), *b = malloc(m.n_params * sizeof(float));
	gpt_init_params(&m, 3, a);
	gpt_init_params(&m, 3, b);
	ck_assert(memcmp(a, b, m.n_params * sizeof(float)) == 0);
	gpt_init_params(&m, 4, b);
	ck_assert(memcmp(a, b, m.n_params * sizeof(float)) != 0);
	for (int t = 0; t < m.n_tensors; t++) {
		const struct param_info *p = &m.p[t];
		double s = 0.0, s2 = 0.0;
		for (size_t k = 0; k < p->count; k++) {
			s += a[p->offset + k];
			s2 += (double)a[p->offset + k] * a[p->offset + k];
		}
		double mean = s / p->count, sd = sqrt(s2 / p->count - mean * mean);
		if (t == GPT_LN1W || t == GPT_LN2W || t == GPT_LNFW)
			ck_assert_msg(mean == 1.0 && sd == 0.0, "%s", p->name);
		else if (!p->decay)
			ck_assert_msg(s2 == 0.0, "%s", p->name);
		else {
			double want = t == GPT_ATTPROJW || t == GPT_FCPROJW ? 0.02 / sqrt(8.0) : 0.02;
			ck_assert_msg(fabs(sd - want) < 0.05 * want && fabs(mean) < 0.1 * want,
				      "%s: mean %g, sd %g (want %g)", p->name, mean, sd, want);
		}
	}
	/* the normal draws: mean 0, variance 1, and the tails of a normal */
	struct prng r;
	prng_seed(&r, 9, 1);
	double s = 0.0, s2 = 0.0;
	int beyond2 = 0, n = 200000;
	for (int i = 0; i < n; i++) {
		double z = gpt_normal(&r);
		s += z;
		s2 += z * z;
		beyond2 += fabs(z) > 2.0;
	}
	ck_assert(fabs(s / n) < 0.01 && fabs(s2 / n - 1.0) < 0.01);
	ck_assert_msg(fabs(beyond2 / (double)n - 0.0455) < 0.002, "%d beyond 2", beyond2);
	free(a);
	free(b);
}
END_TEST

START_TEST(shapes_the_settings_refuse)
{
	struct settings s;
	struct model_shape m;
	struct err e;
	err_clear(&e);
	testutil_settings(&s, "model.kind=gpt model.heads=3 model.width=16 model.context=16");
	ck_assert_int_eq(model_shape_init(&m, &s, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "model.heads = 3 does not divide model.width = 16"), "%s", e.msg);
	testutil_settings(&s, "model.kind=gpt model.heads=2 model.width=16 model.context=8");
	err_clear(&e);
	ck_assert_int_eq(model_shape_init(&m, &s, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "[model] context = 8 is shorter than [data] max_len = 16"),
		      "%s", e.msg);
	testutil_settings(&s, "model.kind=gpt model.heads=2 model.width=16 model.context=16");
	ck_assert_int_eq(model_shape_init(&m, &s, &e), ERR_OK);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gpt");
	TCase *tc = tcase_create("gpt");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, gradient_matches_double_packed);
	tcase_add_test(tc, gradient_matches_double_padded);
	tcase_add_test(tc, head_groups_give_the_bits_of_all_heads);
	tcase_add_test(tc, heads_per_call_fit_the_score_budget);
	tcase_add_test(tc, documents_never_see_each_other);
	tcase_add_test(tc, the_isolation_check_catches_a_shared_segment);
	tcase_add_test(tc, tensors_follow_llmc);
	tcase_add_test(tc, initialization_is_gpt2s);
	tcase_add_test(tc, initialization_in_pieces);
	tcase_add_test(tc, shapes_the_settings_refuse);
	suite_add_tcase(s, tc);
	return check_run(s, 0);
}
