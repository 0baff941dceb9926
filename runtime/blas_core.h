/*
 * blas_core: which BLAS library the host backend links and which kernel it runs, and
 * whether that kernel is narrower than the CPU.
 *
 * OpenBLAS built for several CPUs (DYNAMIC_ARCH, as distributions ship it) picks its
 * kernel when it loads, from the CPU model it knows; on a model newer than the library
 * it may fall back to its oldest kernel (Prescott, SSE3) and run sgemm several times
 * slower than the CPU allows. OPENBLAS_CORETYPE=NAME in the environment chooses the
 * kernel instead. This module names the kernel and says when to set that variable; it
 * changes nothing itself (a different kernel may round the GEMMs differently).
 */
#ifndef DDPTOK_BLAS_CORE_H
#define DDPTOK_BLAS_CORE_H

#include <stddef.h>

/* the widest vector instructions a CPU offers or a BLAS kernel uses */
enum blas_isa {
	BLAS_ISA_UNKNOWN = -1,
	BLAS_ISA_SSE = 0,  /* SSE2/SSE3 */
	BLAS_ISA_AVX = 1,  /* 256-bit float, no FMA */
	BLAS_ISA_AVX2 = 2, /* AVX2 and FMA */
	BLAS_ISA_AVX512 = 3, /* AVX-512 F, BW, DQ and VL */
};

/* The library's description (openblas_get_config) or "unknown BLAS". */
const char *blas_library(void);
/* The kernel OpenBLAS runs (openblas_get_corename), or NULL when the library does not say. */
const char *blas_core_name(void);
/* The widest of enum blas_isa that this CPU runs (BLAS_ISA_UNKNOWN off x86-64). */
enum blas_isa blas_cpu_isa(void);
/* The widest instructions an OpenBLAS kernel of that name uses (any letter case);
 * BLAS_ISA_UNKNOWN for a name it does not know. */
enum blas_isa blas_core_isa(const char *core);
/* Whether the kernel `core` is narrower than a CPU offering `cpu`: 1 with the advice
 * (which kernel to ask for, how) in out, 0 with out empty when the kernel fits or either
 * side is unknown. */
int blas_core_advice(enum blas_isa cpu, const char *core, char *out, size_t cap);
/* The library and its kernel in one line ("OpenBLAS 0.3.21 ..., kernel Haswell") into line;
 * returns blas_core_advice for this CPU and that kernel, the advice in advice. */
int blas_describe(char *line, size_t cap, char *advice, size_t advice_cap);

#endif
