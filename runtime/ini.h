/*
 * ini: the INI reader, and the one place that knows iniparser.
 *
 * iniparser splits a file into sections, keys and raw value strings; config.c parses
 * every value itself. What iniparser does not do is done here: its error messages are
 * captured instead of printed on stderr, and name the caller's source instead of a
 * temporary file; a key set twice (also through a repeated section), which it would
 * silently take the last of, is refused naming both lines; entries its section API cannot
 * list (a key before any section, a section name with ':') are refused; and text is
 * read through a temporary file, since it reads files only. Sections and keys reach the
 * caller lower-cased, as iniparser gives them.
 */
#ifndef DDPTOK_INI_H
#define DDPTOK_INI_H

#include "err.h"

/* Called for each section (key and raw NULL), then for each of its keys with the raw
 * value text; an error stops the reading and is returned. */
typedef int (*ini_visit_fn)(void *arg, const char *section, const char *key, const char *raw,
			    struct err *e);

/* Reads the file `path`; `where` names it in messages (ERR_CONFIG when it is missing,
 * unreadable, a directory or not valid INI). */
int ini_read_file(const char *path, const char *where, ini_visit_fn visit, void *arg,
		  struct err *e);
/* The same for INI text, named `origin` in messages. */
int ini_read_text(const char *text, const char *origin, ini_visit_fn visit, void *arg,
		  struct err *e);

#endif
