/*
 * app: helpers shared by the commands (see app.h).
 */
#include "app.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsx.h"

int app_path(char *out, size_t outlen, const char *dir, const char *name, struct err *e)
{
	return fsx_join(out, outlen, dir, name, e);
}

int app_outputs_ready(struct app *a, struct err *e)
{
	int rc = fsx_mkdirs(a->outputs, e);
	if (rc != ERR_OK) {
		err_prefix(e, "outputs directory ([run] outputs = %s)", a->outputs);
		return rc;
	}
	if (access(a->outputs, W_OK) != 0)
		return ERR(e, ERR_IO, "outputs directory %s ([run] outputs) is not writable",
			   a->outputs);
	return ERR_OK;
}

int app_corpus(struct app *a, struct corpus *c, struct err *e)
{
	return corpus_build(&a->s, c, e);
}

int app_write_json(struct app *a, const char *name, void *json, struct err *e)
{
	char path[2048];
	int rc = app_path(path, sizeof path, a->outputs, name, e);
	if (rc != ERR_OK)
		return rc;
	char *text = json_dumps((json_t *)json, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	if (!text)
		return ERR(e, ERR_IO, "%s: cannot serialize JSON", path);
	size_t len = strlen(text);
	char *buf = realloc(text, len + 2);
	if (!buf) {
		free(text);
		return ERR(e, ERR_IO, "out of memory");
	}
	buf[len] = '\n';
	rc = fsx_write_atomic(path, buf, len + 1, e);
	free(buf);
	return rc;
}

static void vlog(const struct app *a, int level, const char *fmt, va_list ap)
{
	if (a->s.log_level < level)
		return;
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

void app_info(const struct app *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(a, 1, fmt, ap);
	va_end(ap);
}

void app_debug(const struct app *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(a, 2, fmt, ap);
	va_end(ap);
}
