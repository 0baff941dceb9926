/*
 * gpu_env: what the CUDA side of this machine looks like, and the CUDA error mapping.
 *
 * gpu_device_count() decides whether the program can use the CUDA backend at all: a
 * machine without GPU or driver answers an error from cudaGetDeviceCount(), which here
 * becomes "0 devices" plus the reason, never a failure. gpu_env_report() prints the
 * versions and devices for `ddptok-run` diagnostics and tools/gpu-check.sh.
 */
#include "gpu.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_rules.h"

/* The driver release the kernel module reports ("" when none is loaded). */
static void driver_release(char *out, size_t outlen)
{
	char banner[512];
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	size_t n = f ? fread(banner, 1, sizeof banner - 1, f) : 0;
	if (f)
		fclose(f);
	banner[n] = '\0';
	if (gpu_driver_release_parse(banner, out, outlen) != 0)
		out[0] = '\0';
}

/* What the runtime's answer means for the user; a driver too old for this build gets
 * the versions found and needed. */
static void explain_status(cudaError_t st, char *why, size_t whylen)
{
	if (st == cudaErrorInsufficientDriver) {
		char release[64];
		int drv = 0, rt = 0;
		driver_release(release, sizeof release);
		cudaDriverGetVersion(&drv);
		cudaRuntimeGetVersion(&rt);
		gpu_driver_message(why, whylen, release, drv, rt);
		return;
	}
	snprintf(why, whylen, "%s (%s)", cudaGetErrorString(st), cudaGetErrorName(st));
}

int gpu_cuda_error(struct err *e, const char *file, int line, int status, const char *call,
		   int rank, int device)
{
	cudaError_t st = (cudaError_t)status;
	char who[64] = "";
	if (rank >= 0 && device >= 0)
		snprintf(who, sizeof who, "rank %d device %d: ", rank, device);
	else if (device >= 0)
		snprintf(who, sizeof who, "device %d: ", device);
	return err_set(e, ERR_DEVICE, file, line, "%s%s failed at %s:%d: %s (%s)", who, call, file,
		       line, cudaGetErrorString(st), cudaGetErrorName(st));
}

int gpu_device_count(int *count, char *why, size_t whylen, struct err *e)
{
	int n = 0;
	cudaError_t st = cudaGetDeviceCount(&n);
	*count = 0;
	if (st != cudaSuccess) {
		cudaGetLastError(); /* not sticky: leave the runtime clean */
		if (why && whylen)
			explain_status(st, why, whylen);
		return ERR_OK;
	}
	*count = n;
	if (why && whylen) {
		if (n == 0)
			snprintf(why, whylen, "the CUDA runtime sees no device");
		else
			snprintf(why, whylen, "%d CUDA device%s visible", n, n == 1 ? "" : "s");
	}
	return ERR_OK;
}

/* NCCL's version code as text: 2.9 and later encode major * 10000 + minor * 100 + patch */
static void nccl_version_text(int v, char *out, size_t cap)
{
	if (v >= 20900)
		snprintf(out, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	else
		snprintf(out, cap, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}

static void print_version(FILE *out, const char *what, int v)
{
	fprintf(out, "%-14s %d.%d\n", what, v / 1000, (v % 1000) / 10);
}

int gpu_env_report(FILE *out, struct err *e)
{
	int drv = 0, rt = 0, nccl = 0, n = 0;
	char release[64];
	if (cudaRuntimeGetVersion(&rt) == cudaSuccess) {
		print_version(out, "CUDA runtime", rt);
		if (gpu_driver_branch_needed(rt))
			fprintf(out, "%-14s driver %d or newer\n", "needs", gpu_driver_branch_needed(rt));
	}
	driver_release(release, sizeof release);
	if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0) {
		cudaGetLastError();
		fprintf(out, "%-14s none: no NVIDIA driver is loaded\n", "CUDA driver");
	} else {
		fprintf(out, "%-14s %s, supports CUDA up to %d.%d\n", "NVIDIA driver",
			*release ? release : "(release unknown)", drv / 1000, drv % 1000 / 10);
	}
	char note[200];
	gpu_nccl_env_disable_nvls(getenv("NCCL_ALGO"), getenv("NCCL_NVLS_ENABLE"), note, sizeof note);
	fprintf(out, "%-14s %s\n", "NCCL sums", note);
	if (ncclGetVersion(&nccl) == ncclSuccess) {
		char text[32];
		nccl_version_text(nccl, text, sizeof text);
		fprintf(out, "%-14s %s\n", "NCCL", text);
	}
	cudaError_t st = cudaGetDeviceCount(&n);
	if (st != cudaSuccess) {
		char why[512];
		cudaGetLastError();
		explain_status(st, why, sizeof why);
		fprintf(out, "%-14s none: %s\n", "GPUs", why);
		return ERR_OK;
	}
	if (n == 0) {
		fprintf(out, "%-14s none visible\n", "GPUs");
		return ERR_OK;
	}
	fprintf(out, "%-14s %d\n", "GPUs", n);
	for (int i = 0; i < n; i++) {
		struct cudaDeviceProp p;
		st = cudaGetDeviceProperties(&p, i);
		if (st != cudaSuccess)
			return gpu_cuda_error(e, __FILE__, __LINE__, (int)st, "cudaGetDeviceProperties",
					      -1, i);
		fprintf(out, "  GPU %d: %s, %.1f GiB, compute capability %d.%d, %d SMs, PCI %04x:%02x:%02x\n",
			i, p.name, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.major,
			p.minor, p.multiProcessorCount, p.pciDomainID, p.pciBusID, p.pciDeviceID);
	}
	return ERR_OK;
}

void gpu_describe(const int *ids, int n, char *out, size_t cap)
{
	struct cudaDeviceProp p, q;
	int rt = 0, drv = 0, nccl = 0, blas[3] = {0, 0, 0}, gpus = 0, mixed = 0;
	char name[sizeof p.name + 1] = "unknown GPU", release[64], nccl_text[32];
	int major = 0, minor = 0, sms = 0;
	if (n > 0 && cudaGetDeviceProperties(&p, ids[0]) == cudaSuccess) {
		snprintf(name, sizeof name, "%s", p.name);
		major = p.major;
		minor = p.minor;
		sms = p.multiProcessorCount;
	}
	for (int r = 0; r < n; r++) {
		int seen = 0;
		for (int k = 0; k < r; k++)
			seen |= ids[k] == ids[r];
		gpus += !seen;
		if (!seen && r > 0 && (cudaGetDeviceProperties(&q, ids[r]) != cudaSuccess ||
				       strcmp(q.name, name) != 0 || q.multiProcessorCount != sms))
			mixed = 1;
	}
	cudaGetLastError();
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	driver_release(release, sizeof release);
	ncclGetVersion(&nccl);
	nccl_version_text(nccl, nccl_text, sizeof nccl_text);
	cublasGetProperty(MAJOR_VERSION, &blas[0]);
	cublasGetProperty(MINOR_VERSION, &blas[1]);
	cublasGetProperty(PATCH_LEVEL, &blas[2]);
	snprintf(out, cap, "%d x %s%s (compute capability %d.%d, %d SMs); driver %s (CUDA %d.%d); "
		 "CUDA runtime %d.%d, cuBLAS %d.%d.%d, NCCL %s", gpus, name,
		 mixed ? " and other GPUs" : "", major, minor, sms, *release ? release : "unknown",
		 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10, blas[0], blas[1], blas[2],
		 nccl_text);
}
