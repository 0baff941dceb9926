/*
 * machine: the CPU backend's description for checkpoints (see machine.h).
 */
#include "machine.h"

#include <stdio.h>

#include "gemm.h"

void machine_cpu_describe(char *out, size_t cap)
{
	char gemm[256];
	gemm_describe(gemm_chosen(), gemm, sizeof gemm);
#if defined(__clang__)
	const char *compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
	const char *compiler = "gcc " __VERSION__;
#else
	const char *compiler = "unknown";
#endif
	snprintf(out, cap, "gemm %s; compiler %s", gemm, compiler);
}
