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

int app_dir_ready(const char *dir, const char *key, struct err *e)
{
	int rc = fsx_mkdirs(dir, e);
	if (rc != ERR_OK) {
		err_prefix(e, "directory %s (%s)", dir, key);
		return rc;
	}
	if (access(dir, W_OK) != 0)
		return ERR_ERRNO(e, "directory %s (%s) is not writable", dir, key);
	return ERR_OK;
}

int app_outputs_ready(struct app *a, struct err *e)
{
	return app_dir_ready(a->outputs, "[run] outputs", e);
}

int app_corpus(struct app *a, struct corpus *c, struct err *e)
{
	return corpus_build(&a->s, c, e);
}

int app_json_text(const void *json, int sort_keys, char **out, size_t *len, const char *what,
		  struct err *e)
{
	*out = NULL;
	if (!json)
		return ERR(e, ERR_IO, "%s: cannot build JSON (out of memory)", what);
	size_t flags = JSON_INDENT(2) | JSON_REAL_PRECISION(17) | (sort_keys ? JSON_SORT_KEYS : 0);
	char *t = json_dumps((const json_t *)json, flags);
	if (!t)
		return ERR(e, ERR_IO, "%s: cannot serialize JSON", what);
	size_t n = strlen(t);
	char *b = realloc(t, n + 2);
	if (!b) {
		free(t);
		return ERR(e, ERR_IO, "%s: out of memory", what);
	}
	b[n] = '\n';
	b[n + 1] = '\0';
	*out = b;
	*len = n + 1;
	return ERR_OK;
}

int app_write_json(struct app *a, const char *name, void *json, struct err *e)
{
	char path[2048], *buf;
	size_t len;
	int rc = app_path(path, sizeof path, a->outputs, name, e);
	if (rc != ERR_OK || (rc = app_json_text(json, 0, &buf, &len, path, e)) != ERR_OK)
		return rc;
	rc = fsx_write_atomic(path, buf, len, e);
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
