/*
 * kernel: the emulated device's kernel launches, and its memcheck and racecheck.
 *
 * A launch is validated as the real runtime does (block of at most 1024 threads, 64 in
 * z, grid limits, dynamic shared memory within the default 48 KiB, the stream on the
 * current device) and, stricter, every pointer argument must be device memory of the
 * stream's device or pinned host memory. The kernel then runs on the stream's worker,
 * block after block (one block at a time in the process: __shared__ variables are
 * statics). A block's threads are fibers on the worker's
 * stack-switching loop: each runs until it reaches __syncthreads or returns; when every
 * live thread waits at the barrier, all go on. Fibers are created once per worker
 * (makecontext) and switched with _setjmp/_longjmp, without system calls.
 *
 * The backend's .cu files are compiled with the compiler's thread-sanitizer
 * instrumentation but without its runtime: every load and store calls a __tsan_ hook
 * defined here. Inside a kernel a hook checks the address:
 *   shared memory   racecheck: two threads of the block touching one byte between two
 *                   barriers, one of them writing, is a race; a read of a byte no
 *                   thread of the block wrote is a read of uninitialized shared memory
 *   guard bytes     memcheck: out of bounds of the allocation next to them
 *   freed memory    use after free
 *   another device  memory of a device other than the kernel's
 * and in the backend's host code, a load or store of device memory is a host
 * dereference of a device pointer (a crash on a real GPU): reported, then abort().
 * A kernel's fault is reported on stderr and becomes the device's sticky error.
 */
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_runtime.h"
#include "emu.h"

#define FIBER_STACK (256u << 10)
#define DEFAULT_SHMEM (48u << 10)


namespace {

struct fiber {
	jmp_buf ctx;
	ucontext_t uc;
	char *stack;
	bool started, done, waiting;
	uint3 tid;
	unsigned flat;
};

/* one byte of shared memory: who wrote and read it in which barrier interval */
struct shadow {
	uint32_t w_epoch, r_epoch;
	uint16_t w_tid, r_tid;
	bool r_many;
};

struct block_run {
	jmp_buf ctx;
	emu::kernel_packet *pk;
	const char *name;
	int device;
	uint3 bid;
	dim3 bdim, gdim;
	uint32_t first_epoch, epoch;
	bool faulted;
};

thread_local block_run *t_run;
thread_local fiber *t_fiber;

std::mutex g_kernel_mu; /* one block at a time: __shared__ variables are statics */
/* The fibers, every stream worker's in turn (under g_kernel_mu): an idle fiber waits at
 * the top of its loop and runs on whichever thread resumes it. */
std::vector<fiber *> t_pool;
uint32_t g_epoch;       /* barrier intervals, under g_kernel_mu */

/* The shadow of the memory a kernel touches outside device memory and its stacks: its
 * __shared__ variables (statics of the kernels' files), page by page. */
enum { PAGE = 4096 };
std::unordered_map<uintptr_t, std::unique_ptr<shadow[]>> g_shadow;
uintptr_t g_shadow_page = ~(uintptr_t)0;
shadow *g_shadow_last;

shadow &shadow_of(const char *a)
{
	uintptr_t page = (uintptr_t)a / PAGE;
	if (page != g_shadow_page) {
		auto &p = g_shadow[page];
		if (!p)
			p.reset(new shadow[PAGE]());
		g_shadow_page = page;
		g_shadow_last = p.get();
	}
	return g_shadow_last[(uintptr_t)a % PAGE];
}

void fiber_main()
{
	for (;;) {
		t_run->pk->run_thread();
		fiber *f = t_fiber;
		f->done = true;
		if (!_setjmp(f->ctx))
			_longjmp(t_run->ctx, 1);
	}
}

fiber *new_fiber()
{
	fiber *f = new fiber();
	void *m = mmap(nullptr, FIBER_STACK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		emu::report("cannot map a fiber stack");
		abort();
	}
	f->stack = (char *)m;
	mprotect(f->stack, 4096, PROT_NONE); /* a stack overflow faults */
	getcontext(&f->uc);
	f->uc.uc_stack.ss_sp = f->stack;
	f->uc.uc_stack.ss_size = FIBER_STACK;
	f->uc.uc_link = nullptr;
	makecontext(&f->uc, fiber_main, 0);
	return f;
}

/* Runs f until it waits at a barrier or its thread returns. */
void resume(fiber *f)
{
	t_fiber = f;
	if (!_setjmp(t_run->ctx)) {
		if (!f->started) {
			f->started = true;
			setcontext(&f->uc);
		}
		_longjmp(f->ctx, 1);
	}
	t_fiber = nullptr;
}

void run_block(block_run &r)
{
	unsigned n = r.bdim.x * r.bdim.y * r.bdim.z;
	while (t_pool.size() < n)
		t_pool.push_back(new_fiber());
	r.first_epoch = r.epoch = ++g_epoch;
	for (unsigned i = 0; i < n; i++) {
		fiber *f = t_pool[i];
		f->done = f->waiting = false;
		f->flat = i;
		f->tid = uint3{i % r.bdim.x, i / r.bdim.x % r.bdim.y, i / (r.bdim.x * r.bdim.y)};
	}
	for (;;) {
		unsigned waiting = 0;
		for (unsigned i = 0; i < n; i++)
			if (!t_pool[i]->done && !t_pool[i]->waiting)
				resume(t_pool[i]);
		for (unsigned i = 0; i < n; i++) {
			waiting += t_pool[i]->waiting;
			t_pool[i]->waiting = false;
		}
		if (!waiting)
			return;
		r.epoch = ++g_epoch; /* every live thread reached the barrier */
	}
}

void run_grid(block_run &r)
{
	std::lock_guard<std::mutex> lock(g_kernel_mu);
	t_run = &r;
	for (unsigned z = 0; z < r.gdim.z; z++)
		for (unsigned y = 0; y < r.gdim.y; y++)
			for (unsigned x = 0; x < r.gdim.x && !r.faulted; x++) {
				r.bid = uint3{x, y, z};
				run_block(r);
			}
	t_run = nullptr;
}

/* A fault of the running kernel: the first is reported, the device's sticky error. */
void kernel_fault(cudaError_t st, const char *what, const void *addr, const char *detail)
{
	block_run &r = *t_run;
	if (r.faulted)
		return;
	r.faulted = true;
	uint3 t = t_fiber->tid;
	emu::fault(r.device, st, "%s in kernel %s, block (%u,%u,%u) thread (%u,%u,%u): %p %s",
		   what, r.name, r.bid.x, r.bid.y, r.bid.z, t.x, t.y, t.z, addr, detail);
}

void race(const void *addr, const char *how, unsigned other)
{
	char detail[200];
	snprintf(detail, sizeof detail, "(shared memory) %s thread %u of the block between the "
		 "same two barriers: a missing __syncthreads?", how, other);
	kernel_fault(cudaErrorLaunchFailure, "racecheck: shared-memory race", addr, detail);
}

void shared_access(const char *a, size_t size, bool write)
{
	block_run &r = *t_run;
	uint16_t me = (uint16_t)t_fiber->flat;
	for (size_t i = 0; i < size && !r.faulted; i++) {
		shadow &s = shadow_of(a + i);
		if (write) {
			if (s.w_epoch == r.epoch && s.w_tid != me)
				return race(a + i, "was written before by", s.w_tid);
			if (s.r_epoch == r.epoch && (s.r_many || s.r_tid != me))
				return race(a + i, "is written after a read by", s.r_tid);
			s.w_epoch = r.epoch;
			s.w_tid = me;
		} else {
			if (s.w_epoch == r.epoch && s.w_tid != me)
				return race(a + i, "is read after a write by", s.w_tid);
			if (s.w_epoch < r.first_epoch)
				return kernel_fault(cudaErrorLaunchFailure, "initcheck: read of "
						    "uninitialized shared memory", a + i,
						    "(no thread of the block wrote it)");
			if (s.r_epoch == r.epoch && s.r_tid != me)
				s.r_many = true;
			else if (s.r_epoch != r.epoch)
				s = shadow{s.w_epoch, r.epoch, s.w_tid, me, false};
		}
	}
}

/* the allocations a kernel touched last, valid while no free happened since */
struct ok_range {
	const char *lo, *hi;
};
enum { OK_CACHE = 8 };
thread_local ok_range t_ok[OK_CACHE];
thread_local unsigned t_ok_frees, t_ok_next;

bool cached(const char *a, size_t size)
{
	if (t_ok_frees != emu::g_frees.load()) {
		memset(t_ok, 0, sizeof t_ok);
		t_ok_frees = emu::g_frees.load();
		return false;
	}
	for (const ok_range &r : t_ok)
		if (a >= r.lo && a + size <= r.hi)
			return true;
	return false;
}

void kernel_access(const char *a, size_t size, bool write)
{
	if (a >= t_fiber->stack && a < t_fiber->stack + FIBER_STACK)
		return;
	const char *pk = (const char *)t_run->pk;
	if (a >= pk && a < pk + t_run->pk->bytes)
		return;
	if (cached(a, size))
		return;
	emu::block b;
	char detail[200];
	switch (emu::locate(a, &b)) {
	case emu::where::inside:
		if (b.device != -1 && b.device != t_run->device) {
			snprintf(detail, sizeof detail, "is memory of device %d", b.device);
			return kernel_fault(cudaErrorIllegalAddress, "memcheck: access to another "
					    "device's memory", a, detail);
		}
		if (a + size > b.base + b.size)
			break;
		t_ok[t_ok_next++ % OK_CACHE] = ok_range{b.base, b.base + b.size};
		return;
	case emu::where::redzone:
		break;
	case emu::where::freed:
		snprintf(detail, sizeof detail, "lies in %zu bytes at %p freed before", b.size,
			 (void *)b.base);
		return kernel_fault(cudaErrorIllegalAddress, "memcheck: use after free", a, detail);
	case emu::where::unknown: /* neither device memory nor a stack: __shared__ */
		return shared_access(a, size, write);
	}
	long off = a < b.base ? -(long)(b.base - a) : (long)(a - (b.base + b.size));
	snprintf(detail, sizeof detail, "%s %zu bytes %ld bytes %s the end of an allocation of "
		 "%zu bytes at %p", write ? "writes" : "reads", size, off < 0 ? -off : off,
		 a < b.base ? "before the start of" : "past", b.size, (void *)b.base);
	if (a < b.base)
		snprintf(detail, sizeof detail, "%s %zu bytes %ld bytes before an allocation of %zu "
			 "bytes at %p", write ? "writes" : "reads", size, -off, b.size, (void *)b.base);
	kernel_fault(cudaErrorIllegalAddress, "memcheck: out of bounds", a, detail);
}

void host_access(const char *a, size_t size, bool write)
{
	emu::block b;
	if (emu::locate(a, &b) != emu::where::inside || b.device < 0)
		return;
	emu::report("host code %s %zu bytes at %p, memory of device %d (a device pointer "
		    "dereferenced on the host: a crash on a real GPU)", write ? "writes" : "reads",
		    size, (const void *)a, b.device);
	abort();
}

inline void access(const void *addr, size_t size, bool write)
{
	if (t_run && t_fiber)
		kernel_access((const char *)addr, size, write);
	else
		host_access((const char *)addr, size, write);
}

} // namespace

extern "C" {

uint3 emu_thread_idx(void) { return t_fiber->tid; }
uint3 emu_block_idx(void) { return t_run->bid; }
dim3 emu_block_dim(void) { return t_run->bdim; }
dim3 emu_grid_dim(void) { return t_run->gdim; }

void emu_syncthreads(void)
{
	fiber *f = t_fiber;
	f->waiting = true;
	if (!_setjmp(f->ctx))
		_longjmp(t_run->ctx, 1);
}

/* the instrumentation's entry points (see the top) */
#define HOOKS(n)                                                                              \
	void __tsan_read##n(void *a) { access(a, n, false); }                                 \
	void __tsan_write##n(void *a) { access(a, n, true); }                                 \
	void __tsan_unaligned_read##n(void *a) { access(a, n, false); }                       \
	void __tsan_unaligned_write##n(void *a) { access(a, n, true); }
HOOKS(1)
HOOKS(2)
HOOKS(4)
HOOKS(8)
HOOKS(16)
#undef HOOKS
void __tsan_read_range(void *a, unsigned long size) { access(a, size, false); }
void __tsan_write_range(void *a, unsigned long size) { access(a, size, true); }
void __tsan_init(void) {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}

} /* extern "C" */

static bool dims_ok(const char *name, dim3 grid, dim3 block, size_t shmem)
{
	unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
	const char *why = nullptr;
	if (!block.x || !block.y || !block.z || !grid.x || !grid.y || !grid.z)
		why = "a grid or block dimension is 0";
	else if (block.x > 1024 || block.y > 1024 || block.z > 64 || threads > 1024)
		why = "the block exceeds 1024 threads (1024 x 1024 x 64 per dimension)";
	else if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
		why = "the grid exceeds 2^31-1 x 65535 x 65535 blocks";
	else if (shmem > DEFAULT_SHMEM)
		why = "dynamic shared memory exceeds the default 48 KiB";
	if (why)
		emu::report("launch of %s <<<(%u,%u,%u), (%u,%u,%u), %zu>>>: %s", name, grid.x,
			    grid.y, grid.z, block.x, block.y, block.z, shmem, why);
	return !why;
}

/* Every pointer argument: null, or memory the kernel's device may touch. */
static bool pointers_ok(const char *name, int device, const void *const *ptrs, int n)
{
	for (int i = 0; i < n; i++) {
		emu::block b;
		if (!ptrs[i])
			continue;
		emu::where w = emu::locate(ptrs[i], &b);
		if (w == emu::where::redzone)
			continue; /* one past the end: only an access would be wrong */
		if (w == emu::where::inside && (b.device == device || b.device == -1))
			continue;
		emu::report("launch of %s on device %d: pointer argument %p is %s", name, device,
			    ptrs[i], w == emu::where::freed ? "freed memory"
				     : w == emu::where::inside ? "another device's memory"
							      : "not device memory (a host pointer?)");
		return false;
	}
	return true;
}

cudaError_t emu_submit_kernel(const char *name, emu::kernel_packet *pk, dim3 grid, dim3 block,
			      size_t shmem, cudaStream_t stream, const void *const *pointers,
			      int n_pointers)
{
	int device = emu::stream_device(stream);
	cudaError_t st = cudaSuccess;
	if (device < 0) {
		emu::report("launch of %s: stream %p is not a live stream", name, (void *)stream);
		st = cudaErrorInvalidResourceHandle;
	} else if (device != emu::current_device()) {
		emu::report("launch of %s: the stream is device %d's, the thread's current device is "
			    "%d", name, device, emu::current_device());
		st = cudaErrorInvalidResourceHandle;
	} else if (emu::sticky(device) != cudaSuccess) {
		st = emu::sticky(device);
	} else if (!dims_ok(name, grid, block, shmem)) {
		st = cudaErrorInvalidConfiguration;
	} else if (!pointers_ok(name, device, pointers, n_pointers)) {
		st = cudaErrorInvalidValue;
	}
	if (st != cudaSuccess) {
		delete pk;
		return emu::set_last(st);
	}
	emu::enqueue(stream, [=] {
		block_run r = {};
		r.pk = pk;
		r.name = name;
		r.device = device;
		r.bdim = block;
		r.gdim = grid;
		run_grid(r);
		delete pk;
	});
	return cudaSuccess;
}
