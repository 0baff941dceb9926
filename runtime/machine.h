/*
 * machine: what the bits of a CPU-backend result depend on beyond the program's own code,
 * in words: the GEMM implementation (gemm.h) with its build and the kernels it chose for
 * this CPU, and the compiler. Exact mode promises identical bits only where these are the same (a
 * checkpoint records them; gpu/ has its own for the CUDA backend).
 */
#ifndef DDPTOK_MACHINE_H
#define DDPTOK_MACHINE_H

#include <stddef.h>

/* e.g. "gemm openblas (OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64,
 * kernel Haswell); compiler gcc 12.2.0" (cap >= 1). */
void machine_cpu_describe(char *out, size_t cap);

#endif
