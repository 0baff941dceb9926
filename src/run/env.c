/*
 * env: the core's view of its driver (see env.h).
 */
#include "env.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsx.h"
#include "jsonx.h"
#include "memstat.h"

void env_init(struct env *v, const struct cfg *cfg, const struct settings *s)
{
	memset(v, 0, sizeof *v);
	v->cfg = cfg;
	v->s = s;
	engine_opts_init(&v->engine);
	v->command = "train";
}

int env_stop_requested(const struct env *v)
{
	return v->stop ? (int)*v->stop : 0;
}

const char *env_stop_name(int reason)
{
	return reason == SIGINT    ? "SIGINT"
	       : reason == SIGTERM ? "SIGTERM"
	       : reason == SIGPIPE ? "a closed output (SIGPIPE)"
				   : "a stop request";
}

/* A line longer than the stack buffer (sample's ids, say) is formatted again into one of
 * its size rather than cut: a cut line could end in part of a number. */
static void vlog(const struct env *v, int level, const char *fmt, va_list ap)
{
	char line[4096], *text = line;
	va_list again;
	if (!v->log || (level == ENV_PROGRESS && !v->progress) ||
	    v->s->log_level < (level == ENV_PROGRESS ? ENV_INFO : level))
		return;
	va_copy(again, ap);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	if (n >= (int)sizeof line && (text = malloc((size_t)n + 1)) != NULL)
		vsnprintf(text, (size_t)n + 1, fmt, again);
	else if (!text) /* out of memory: the cut line, marked */
		memcpy((text = line) + sizeof line - 4, "...", 4);
	va_end(again);
	v->log(v->log_arg, level, text);
	if (text != line)
		free(text);
}

void env_info(const struct env *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(v, ENV_INFO, fmt, ap);
	va_end(ap);
}

void env_show_memory(const struct env *v, const char *what, const struct mem_usage *m,
		     int64_t corpus_bytes)
{
	char text[200];
	mem_usage_format(m, text, sizeof text);
	if (corpus_bytes > 0)
		env_info(v, "%s: memory: %s; corpus %.1f MiB, mapped from its file", what, text,
			 (double)corpus_bytes / (1024.0 * 1024.0));
	else
		env_info(v, "%s: memory: %s; corpus in memory", what, text);
}

void env_debug(const struct env *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(v, ENV_DEBUG, fmt, ap);
	va_end(ap);
}

void env_progress(const struct env *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(v, ENV_PROGRESS, fmt, ap);
	va_end(ap);
}

void env_progress_end(const struct env *v)
{
	if (v->log && v->progress && v->s->log_level >= ENV_INFO)
		v->log(v->log_arg, ENV_PROGRESS, NULL);
}

int env_dir_ready(const char *dir, const char *key, struct err *e)
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

int env_outputs_ready(const struct env *v, struct err *e)
{
	return env_dir_ready(v->s->outputs, "[run] outputs", e);
}

int env_json_text(const void *json, int sort_keys, char **out, size_t *len, const char *what,
		  struct err *e)
{
	*out = NULL;
	if (!json)
		return ERR(e, ERR_NOMEM, "%s: cannot build JSON (out of memory)", what);
	size_t flags = JSON_INDENT(2) | (sort_keys ? JSON_SORT_KEYS : 0);
	char *t = jsonx_dumps((const json_t *)json, flags);
	if (!t)
		return ERR(e, ERR_IO, "%s: cannot serialize JSON", what);
	size_t n = strlen(t);
	char *b = realloc(t, n + 2);
	if (!b) {
		free(t);
		return ERR(e, ERR_NOMEM, "%s: out of memory", what);
	}
	b[n] = '\n';
	b[n + 1] = '\0';
	*out = b;
	*len = n + 1;
	return ERR_OK;
}

int env_write_json(const struct env *v, const char *name, void *json, struct err *e)
{
	char path[FSX_PATH_MAX], *buf;
	size_t len;
	int rc = fsx_join(path, sizeof path, v->s->outputs, name, e);
	if (rc != ERR_OK || (rc = env_json_text(json, 0, &buf, &len, path, e)) != ERR_OK)
		return rc;
	rc = fsx_write_atomic(path, buf, len, e);
	free(buf);
	return rc;
}
