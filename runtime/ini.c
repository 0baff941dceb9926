/*
 * ini: the INI reader, the one place that knows iniparser (see ini.h).
 */
#include "ini.h"

#include <ctype.h>
#include <errno.h>
#include <iniparser.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\f' || ch == '\v';
}

/* iniparser reports syntax errors through a process-wide callback that prints to
 * stderr by default; while we load, it writes into this buffer instead. */
static _Thread_local char ini_error[512];

static int capture_ini_error(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (ini_error[0])
		return 0; /* keep the first message */
	size_t j = 0;
	for (size_t i = 0; buf[i] && j + 1 < sizeof ini_error; i++) {
		char ch = buf[i] == '\n' ? ' ' : buf[i];
		if (ch == ' ' && (j == 0 || ini_error[j - 1] == ' '))
			continue;
		ini_error[j++] = ch;
	}
	while (j > 0 && ini_error[j - 1] == ' ')
		j--;
	ini_error[j] = '\0';
	return 0;
}

/* The INI reader keeps the last of two assignments to one key without a word: refuse a
 * key set twice (in one section, or in a section that appears twice), naming both lines.
 * Lines are read as the reader sees them: comments (; #), [section], key = value. */
static int refuse_duplicate_keys(const char *file, const char *where, struct err *e)
{
	FILE *f = fopen(file, "r");
	char line[4096], section[128] = "";
	struct seen {
		char name[256];
		int line;
	} *seen = NULL;
	size_t n = 0, cap = 0;
	int lineno = 0, rc = ERR_OK;
	if (!f)
		return ERR_OK; /* the reader reports it */
	int continued = 0; /* the previous line ended with a backslash: this one goes on */
	while (rc == ERR_OK && fgets(line, sizeof line, f)) {
		char *b = line, *end, *eq;
		int was_continued = continued;
		lineno++;
		while (is_space(*b))
			b++;
		end = b + strlen(b);
		while (end > b && is_space(end[-1]))
			*--end = '\0';
		continued = end > b && end[-1] == '\\';
		if (was_continued || *b == '\0' || *b == ';' || *b == '#')
			continue;
		if (*b == '[') {
			char *close = strchr(b, ']');
			char *from = b + 1, *to = close ? close : b + 1;
			while (from < to && is_space(*from)) /* "[ data ]" is [data] */
				from++;
			while (to > from && is_space(to[-1]))
				to--;
			size_t len = (size_t)(to - from);
			snprintf(section, sizeof section, "%.*s", (int)(len < 127 ? len : 127), from);
			for (char *q = section; *q; q++)
				*q = (char)tolower((unsigned char)*q);
			continue;
		}
		if (!(eq = strchr(b, '=')))
			continue;
		while (eq > b && is_space(eq[-1]))
			eq--;
		char name[256];
		snprintf(name, sizeof name, "%s.%.*s", section, (int)(eq - b), b);
		for (char *q = name; *q; q++)
			*q = (char)tolower((unsigned char)*q);
		for (size_t i = 0; i < n; i++)
			if (!strcmp(seen[i].name, name)) {
				char *dot = strchr(name, '.');
				*dot = '\0';
				rc = ERR(e, ERR_CONFIG, "%s:%d: [%s] %s is set a second time (first at "
					 "line %d)", where, lineno, name, dot + 1, seen[i].line);
				break;
			}
		if (rc != ERR_OK)
			break;
		if (n == cap) {
			struct seen *ns = realloc(seen, (cap ? 2 * cap : 64) * sizeof *ns);
			if (!ns) {
				rc = ERR(e, ERR_NOMEM, "%s: out of memory", where);
				break;
			}
			seen = ns;
			cap = cap ? 2 * cap : 64;
		}
		snprintf(seen[n].name, sizeof seen[n].name, "%s", name);
		seen[n++].line = lineno;
	}
	free(seen);
	fclose(f);
	return rc;
}

static dictionary *ini_load(const char *file, const char *where, struct err *e)
{
	dictionary *d;
	if (refuse_duplicate_keys(file, where, e) != ERR_OK)
		return NULL;
	ini_error[0] = '\0';
	iniparser_set_error_callback(capture_ini_error);
	d = iniparser_load(file);
	iniparser_set_error_callback(NULL);
	if (!d) {
		/* Name the source as the caller knows it, not the temporary file. */
		char msg[sizeof ini_error + 256];
		const char *src = ini_error, *hit;
		size_t used = 0, flen = strlen(file);
		if (strncmp(src, "iniparser: ", 11) == 0)
			src += 11;
		while ((hit = strstr(src, file)) != NULL && flen > 0) {
			used += (size_t)snprintf(msg + used, sizeof msg - used, "%.*s%s",
						 (int)(hit - src), src, where);
			if (used >= sizeof msg)
				break;
			src = hit + flen;
		}
		if (used < sizeof msg)
			snprintf(msg + used, sizeof msg - used, "%s", src);
		ERR(e, ERR_CONFIG, "%s: cannot parse: %s", where,
		    msg[0] ? msg : "unreadable INI text");
	}
	return d;
}

/* Names an entry of the dictionary that the section API did not show (a key before
 * any section, a section name with ':' in it); the entries it did show pass visit again. */
static int report_stray(const dictionary *d, const char *where, ini_visit_fn visit, void *arg,
			struct err *e)
{
	for (ssize_t i = 0; i < d->size; i++) {
		const char *key = d->key[i];
		const char *colon;
		char sec[256];
		int rc;
		if (!key)
			continue;
		colon = strchr(key, ':');
		if (d->val[i] == NULL) {
			if (!colon)
				continue; /* a section: visited already */
			return ERR(e, ERR_CONFIG, "%s: [%s]: unknown section", where, key);
		}
		if (colon == key)
			return ERR(e, ERR_CONFIG, "%s: %s: key outside of any section", where,
				   key + 1);
		if (!colon)
			continue;
		snprintf(sec, sizeof sec, "%.*s", (int)(colon - key), key);
		if ((rc = visit(arg, sec, NULL, NULL, e)) ||
		    (rc = visit(arg, sec, colon + 1, d->val[i], e)))
			return rc;
	}
	return ERR(e, ERR_CONFIG, "%s: unexpected entries the configuration cannot name", where);
}

/* Hands every section and entry of d to visit, in iniparser's order. */
static int visit_dict(dictionary *d, const char *where, ini_visit_fn visit, void *arg,
		      struct err *e)
{
	const char **names = NULL;
	int nsec = iniparser_getnsec(d), seen = 0, rc = ERR_OK;
	for (int s = 0; s < nsec && rc == ERR_OK; s++) {
		const char *sec = iniparser_getsecname(d, s);
		int nkeys;
		if (!sec)
			continue;
		seen++;
		if ((rc = visit(arg, sec, NULL, NULL, e)) || (nkeys = iniparser_getsecnkeys(d, sec)) <= 0)
			continue;
		free(names);
		if (!(names = calloc((size_t)nkeys, sizeof *names)))
			rc = ERR(e, ERR_NOMEM, "%s: out of memory", where);
		else if (!iniparser_getseckeys(d, sec, names))
			rc = ERR(e, ERR_CONFIG, "%s: [%s]: cannot list keys", where, sec);
		size_t sl = strlen(sec);
		for (int j = 0; j < nkeys && rc == ERR_OK; j++) {
			const char *full = names[j], *raw;
			if (!full)
				continue;
			seen++;
			raw = iniparser_getstring(d, full, NULL);
			rc = visit(arg, sec,
				   strncmp(full, sec, sl) == 0 && full[sl] == ':' ? full + sl + 1 : full,
				   raw ? raw : "", e);
		}
	}
	free(names);
	/* Entries the section API cannot see (keys before the first section, section
	 * names containing ':') make the counts differ. */
	if (rc == ERR_OK && seen != d->n)
		rc = report_stray(d, where, visit, arg, e);
	return rc;
}

int ini_read_file(const char *path, const char *where, ini_visit_fn visit, void *arg,
		  struct err *e)
{
	struct stat st;
	FILE *f;

	if (stat(path, &st) != 0)
		return ERR(e, ERR_CONFIG, "%s: %s", where, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return ERR(e, ERR_CONFIG, "%s: %s", where, strerror(EISDIR));
	f = fopen(path, "r");
	if (!f)
		return ERR(e, ERR_CONFIG, "%s: %s", where, strerror(errno));
	fclose(f);
	dictionary *d = ini_load(path, where, e);
	if (!d)
		return e ? e->code : ERR_CONFIG;
	int rc = visit_dict(d, where, visit, arg, e);
	iniparser_freedict(d);
	return rc;
}

int ini_read_text(const char *text, const char *origin, ini_visit_fn visit, void *arg,
		  struct err *e)
{
	const char *dir = getenv("TMPDIR");
	char tmpl[1024];
	dictionary *d = NULL;
	size_t len = strlen(text), done = 0;
	int fd, rc;

	if (!dir || !dir[0])
		dir = "/tmp";
	if ((size_t)snprintf(tmpl, sizeof tmpl, "%s/ddptok-cfg-XXXXXX", dir) >= sizeof tmpl)
		return ERR(e, ERR_IO, "%s: temporary directory name too long", origin);
	fd = mkstemp(tmpl);
	if (fd < 0)
		return ERR_ERRNO(e, "%s: cannot create a temporary file in %s", origin, dir);
	while (done < len) {
		ssize_t w = write(fd, text + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = ERR_ERRNO(e, "%s: cannot write temporary file %s", origin, tmpl);
			close(fd);
			unlink(tmpl);
			return rc;
		}
		done += (size_t)w;
	}
	if (close(fd) != 0) {
		rc = ERR_ERRNO(e, "%s: cannot write temporary file %s", origin, tmpl);
		unlink(tmpl);
		return rc;
	}
	d = ini_load(tmpl, origin, e);
	unlink(tmpl);
	if (!d)
		return e ? e->code : ERR_CONFIG;
	rc = visit_dict(d, origin, visit, arg, e);
	iniparser_freedict(d);
	return rc;
}
