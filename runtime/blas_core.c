/*
 * blas_core: the BLAS library and kernel the host backend runs (see blas_core.h).
 */
#include "blas_core.h"

#include <cblas.h>
#include <stdio.h>
#include <strings.h>

#include "ddptok_config.h"

const char *blas_library(void)
{
#if DDPTOK_HAVE_OPENBLAS_CONFIG
	return openblas_get_config();
#else
	return "unknown BLAS";
#endif
}

const char *blas_core_name(void)
{
#if DDPTOK_HAVE_OPENBLAS_CORENAME
	return openblas_get_corename();
#else
	return NULL;
#endif
}

enum blas_isa blas_cpu_isa(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
		return BLAS_ISA_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return BLAS_ISA_AVX2;
	if (__builtin_cpu_supports("avx"))
		return BLAS_ISA_AVX;
	return BLAS_ISA_SSE;
#else
	return BLAS_ISA_UNKNOWN;
#endif
}

/* OpenBLAS's x86-64 kernel names (DYNAMIC_ARCH), by the instructions they use */
static const struct {
	const char *name;
	enum blas_isa isa;
} blas_cores[] = {
	{"Prescott", BLAS_ISA_SSE},       {"Core2", BLAS_ISA_SSE},
	{"Penryn", BLAS_ISA_SSE},         {"Dunnington", BLAS_ISA_SSE},
	{"Nehalem", BLAS_ISA_SSE},        {"Atom", BLAS_ISA_SSE},
	{"Opteron", BLAS_ISA_SSE},        {"Opteron(SSE3)", BLAS_ISA_SSE},
	{"Barcelona", BLAS_ISA_SSE},      {"Nano", BLAS_ISA_SSE},
	{"Bobcat", BLAS_ISA_SSE},
	{"Sandybridge", BLAS_ISA_AVX},    {"Bulldozer", BLAS_ISA_AVX},
	{"Piledriver", BLAS_ISA_AVX},     {"Steamroller", BLAS_ISA_AVX},
	{"Excavator", BLAS_ISA_AVX},      {"Haswell", BLAS_ISA_AVX2},
	{"Zen", BLAS_ISA_AVX2},           {"SkylakeX", BLAS_ISA_AVX512},
	{"Cooperlake", BLAS_ISA_AVX512},  {"SapphireRapids", BLAS_ISA_AVX512},
};

enum blas_isa blas_core_isa(const char *core)
{
	for (size_t i = 0; core && i < sizeof blas_cores / sizeof blas_cores[0]; i++)
		if (strcasecmp(core, blas_cores[i].name) == 0)
			return blas_cores[i].isa;
	return BLAS_ISA_UNKNOWN;
}

/* the kernel to ask for on a CPU of that width (the plainest one that uses all of it) */
static const char *blas_core_for(enum blas_isa cpu)
{
	switch (cpu) {
	case BLAS_ISA_AVX512:
		return "SkylakeX";
	case BLAS_ISA_AVX2:
		return "Haswell";
	case BLAS_ISA_AVX:
		return "Sandybridge";
	default:
		return "Prescott";
	}
}

int blas_core_advice(enum blas_isa cpu, const char *core, char *out, size_t cap)
{
	enum blas_isa used = blas_core_isa(core);
	if (cap)
		out[0] = '\0';
	if (cpu == BLAS_ISA_UNKNOWN || used == BLAS_ISA_UNKNOWN || used >= cpu)
		return 0;
	snprintf(out, cap, "OpenBLAS runs its %s kernel on a CPU that has wider vectors; set "
		 "OPENBLAS_CORETYPE=%s in the environment for the faster GEMMs (a library built "
		 "with DYNAMIC_ARCH honours it; the GEMMs may then round differently)",
		 core, blas_core_for(cpu));
	return 1;
}

int blas_describe(char *line, size_t cap, char *advice, size_t advice_cap)
{
	const char *core = blas_core_name();
	snprintf(line, cap, "%s, kernel %s", blas_library(), core ? core : "not named");
	return blas_core_advice(blas_cpu_isa(), core, advice, advice_cap);
}
