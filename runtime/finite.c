/*
 * finite: the scan for NaN and infinity (see finite.h).
 */
#include "finite.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* One thread's range and what it found there. */
struct finite_part {
	const float *x;
	size_t begin, end;
	struct finite_report rep;
	pthread_t tid;
	int started;
};

/* An exponent of all ones is NaN or infinity: tested on the bits, a loop that vectorizes
 * (isfinite would not under the project's strict floating-point flags). */
static int nonfinite_bits(uint32_t u)
{
	return (u & 0x7f800000u) == 0x7f800000u;
}

/* Floats per block of the counting loop: a fixed trip count, which the compiler
 * vectorizes at -O2 too. */
#define FINITE_BLOCK 64

static size_t count_nonfinite(const float *x, size_t begin, size_t end)
{
	size_t bad = 0, i = begin;
	for (; i + FINITE_BLOCK <= end; i += FINITE_BLOCK) {
		uint32_t in_block = 0;
		for (int k = 0; k < FINITE_BLOCK; k++) {
			uint32_t u;
			memcpy(&u, &x[i + (size_t)k], sizeof u);
			in_block += (uint32_t)nonfinite_bits(u);
		}
		bad += in_block;
	}
	for (; i < end; i++) {
		uint32_t u;
		memcpy(&u, &x[i], sizeof u);
		bad += (size_t)nonfinite_bits(u);
	}
	return bad;
}

static void scan_range(struct finite_part *p)
{
	p->rep.bad = count_nonfinite(p->x, p->begin, p->end);
	p->rep.first = 0;
	for (size_t i = p->begin; p->rep.bad && i < p->end; i++) {
		uint32_t u;
		memcpy(&u, &p->x[i], sizeof u);
		if (nonfinite_bits(u)) {
			p->rep.first = i;
			break;
		}
	}
}

static void *scan_thread(void *arg)
{
	scan_range(arg);
	return NULL;
}

static int scan_threads(size_t chunks)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	size_t threads = online > 0 ? (size_t)online : 1;
	if (threads > FINITE_MAX_THREADS)
		threads = FINITE_MAX_THREADS;
	return (int)(threads < chunks ? threads : chunks);
}

void finite_scan(const float *x, size_t n, struct finite_report *out)
{
	struct finite_part parts[FINITE_MAX_THREADS];
	size_t chunks = (n + FINITE_CHUNK - 1) / FINITE_CHUNK;
	int threads = n ? scan_threads(chunks) : 1;
	for (int t = 0; t < threads; t++) {
		struct finite_part *p = &parts[t];
		memset(p, 0, sizeof *p);
		p->x = x;
		p->begin = chunks * (size_t)t / (size_t)threads * FINITE_CHUNK;
		p->end = chunks * (size_t)(t + 1) / (size_t)threads * FINITE_CHUNK;
		if (p->end > n)
			p->end = n;
		/* part 0 is the caller's */
		p->started = t > 0 && pthread_create(&p->tid, NULL, scan_thread, p) == 0;
	}
	memset(out, 0, sizeof *out);
	for (int t = 0; t < threads; t++) {
		struct finite_part *p = &parts[t];
		if (p->started)
			pthread_join(p->tid, NULL);
		else
			scan_range(p);
		if (p->rep.bad && out->bad == 0)
			out->first = p->rep.first;
		out->bad += p->rep.bad;
	}
}
