/*
 * err: filling and decorating the error type declared in err.h.
 */
#include "err.h"

#include <stdio.h>
#include <string.h>

void err_clear(struct err *e)
{
	e->code = ERR_OK;
	e->file = NULL;
	e->line = 0;
	e->msg[0] = '\0';
}

int err_vset(struct err *e, int code, const char *file, int line, const char *fmt, va_list ap)
{
	if (!e)
		return code;
	if (e->code != ERR_OK)
		return e->code; /* keep the first (root) cause */
	e->code = code;
	e->file = file;
	e->line = line;
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	return code;
}

int err_set(struct err *e, int code, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(e, code, file, line, fmt, ap);
	va_end(ap);
	return e ? e->code : code;
}

int err_errno(struct err *e, int errnum, const char *file, int line, const char *fmt, ...)
{
	char what[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return err_set(e, ERR_IO, file, line, "%s: %s", what, strerror(errnum));
}

void err_prefix(struct err *e, const char *fmt, ...)
{
	char pre[512];
	va_list ap;
	if (!e || e->code == ERR_OK)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	size_t lp = strlen(pre), lm = strlen(e->msg);
	if (lp + 2 >= sizeof e->msg)
		return;
	if (lp + 2 + lm >= sizeof e->msg)
		lm = sizeof e->msg - lp - 3;
	memmove(e->msg + lp + 2, e->msg, lm);
	e->msg[lp + 2 + lm] = '\0';
	memcpy(e->msg, pre, lp);
	e->msg[lp] = ':';
	e->msg[lp + 1] = ' ';
}

const char *err_code_name(int code)
{
	switch (code) {
	case ERR_OK: return "ok";
	case ERR_CHECK: return "check failed";
	case ERR_USAGE: return "usage error";
	case ERR_CONFIG: return "configuration error";
	case ERR_IO: return "i/o error";
	case ERR_DATA: return "data error";
	case ERR_DEVICE: return "device error";
	case ERR_EMPTY: return "empty window";
	case ERR_INTERRUPTED: return "interrupted";
	case ERR_ABORTED: return "aborted";
	case ERR_DEVCHECK: return "device check";
	case ERR_NOMEM: return "out of memory";
	case ERR_NONFINITE: return "non-finite";
	default: return "error";
	}
}
