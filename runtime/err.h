/*
 * err: the one error type of ddptok.
 *
 * Library code never exits: a function that can fail takes a `struct err *`, fills it
 * through ERR()/ERR_AT() and returns the code. The codes double as the program's exit
 * statuses (README "Exit codes"), so main() only has to print the message and return
 * e.code. Foreign error spaces (errno, pthread, CUDA, cuBLAS, NCCL) are mapped in by the
 * check macros of the modules that call them, with file:line attached.
 */
#ifndef DDPTOK_ERR_H
#define DDPTOK_ERR_H

#include <errno.h>
#include <stdarg.h>

enum err_code {
	ERR_OK = 0,
	ERR_CHECK = 1,       /* a verification failed (parity, resume equality, corrupt checkpoint) */
	ERR_USAGE = 2,       /* bad command line */
	ERR_CONFIG = 3,      /* bad configuration file, key or value */
	ERR_IO = 4,          /* file system: unreadable, unwritable, short write */
	ERR_DATA = 5,        /* data lock, checkpoint or corpus mismatch; refused resume */
	ERR_DEVICE = 6,      /* device, thread or collective failure */
	ERR_EMPTY = 7,       /* window without any supervised token, empty_window = error */
	ERR_INTERRUPTED = 8, /* stopped by a signal after checkpointing */
	ERR_ABORTED = 9,     /* released because another rank failed (never the root cause) */
	ERR_DEVCHECK = 10,   /* env --check: a device, kernel, GEMM or collective gave a wrong
				or no result */
	ERR_NOMEM = 11,      /* out of memory (host or device allocation) */
	ERR_NONFINITE = 12,  /* a loss, gradient or state went NaN or infinite: the run stopped
				without publishing it */
};

struct err {
	int code;
	const char *file; /* source location of the failure, for debugging */
	int line;
	char msg[1024];
};

void err_clear(struct err *e);
/* Fills e (if not already holding an error) and returns code. */
int err_set(struct err *e, int code, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int err_vset(struct err *e, int code, const char *file, int line, const char *fmt, va_list ap);
/* Prepends "prefix: " to an existing message (adds context while unwinding). */
void err_prefix(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* errno -> ERR_IO with "what: strerror" message. */
int err_errno(struct err *e, int errnum, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
const char *err_code_name(int code);

#define ERR(e, code, ...) err_set((e), (code), __FILE__, __LINE__, __VA_ARGS__)
/* Returns the code of a failing call from the enclosing function (no cleanup needed). */
#define ERR_TRY(call)                    \
	do {                             \
		int err_try_rc_ = (call); \
		if (err_try_rc_ != ERR_OK) \
			return err_try_rc_; \
	} while (0)

/* The same with cleanup: stores the code of a failing call in rc and jumps to label. */
#define ERR_TRY_GOTO(rc, call, label)            \
	do {                                     \
		if (((rc) = (call)) != ERR_OK) \
			goto label;              \
	} while (0)

#define ERR_ERRNO(e, ...) err_errno((e), errno, __FILE__, __LINE__, __VA_ARGS__)

#endif
