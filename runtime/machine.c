/*
 * machine: the CPU backend's description for checkpoints (see machine.h).
 */
#include "machine.h"

#include <stdio.h>

#include "blas_core.h"

void machine_cpu_describe(char *out, size_t cap)
{
	const char *config = blas_library();
	const char *core = blas_core_name();
#if defined(__clang__)
	const char *compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
	const char *compiler = "gcc " __VERSION__;
#else
	const char *compiler = "unknown";
#endif
	snprintf(out, cap, "%s, core %s; compiler %s", config,
		 core ? core : "unknown", compiler);
}
