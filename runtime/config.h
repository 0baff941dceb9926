/*
 * config: INI configuration with a declared key table.
 *
 * Every key is declared once (section, name, type, default, range or choices, flags such
 * as whether it changes the math, one doc line, and the field of the program's settings
 * struct its value lands in) by the program; this module loads an .ini file with
 * iniparser, applies `--set section.key=value` overrides, validates everything against
 * the table and stores the values into the settings struct (cfg_store). Unknown
 * sections/keys and malformed or out-of-range values are errors (ERR_CONFIG) naming the
 * file, section and key. Integers and floats are parsed
 * strictly (whole string, base 10, no "010" as octal, no trailing garbage, no overflow).
 */
#ifndef DDPTOK_CONFIG_H
#define DDPTOK_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

enum cfg_type { CFG_INT, CFG_FLOAT, CFG_STRING, CFG_ENUM, CFG_BOOL };

/* The C type of the settings field a key's value lands in (CFG_FIELD_NONE: the program
 * reads the value itself, e.g. a list it parses further). */
enum cfg_field { CFG_FIELD_NONE = 0, CFG_FIELD_INT, CFG_FIELD_ULLONG, CFG_FIELD_DOUBLE,
		 CFG_FIELD_TEXT };

struct cfg_key {
	const char *section;
	const char *name;
	enum cfg_type type;
	const char *def;     /* default, as it would be written in the file */
	double min, max;     /* CFG_INT / CFG_FLOAT range, inclusive unless `open` says */
	const char *choices; /* CFG_ENUM: "a|b|c" (stored as the index of the choice) */
	unsigned flags;      /* CFG_MATH and the program's own bits (CFG_USER << n) */
	const char *doc;     /* one line for --help and the README reference */
	unsigned open;       /* CFG_OPEN_MIN / CFG_OPEN_MAX: that bound is excluded */
	enum cfg_field field; /* where cfg_store() writes the value: its type, */
	size_t at, size;      /* offset and size in the settings struct */
};

/* cfg_key.open flags: the range is (min, ...] or [..., max) instead of inclusive. */
enum { CFG_OPEN_MIN = 1, CFG_OPEN_MAX = 2 };
/* cfg_key.flags: CFG_MATH, the key changes the computation (a resume refuses a change);
 * bits from CFG_USER up are the program's to define. */
enum { CFG_MATH = 1, CFG_USER = 1 << 8 };

/* The cfg_field of a struct member, for key tables: CFG_FIELD_OF(struct settings, seed). */
#define CFG_FIELD_OF(type, member)                                          \
	_Generic(((type *)0)->member, int: CFG_FIELD_INT,                   \
		 unsigned long long: CFG_FIELD_ULLONG, double: CFG_FIELD_DOUBLE, \
		 char *: CFG_FIELD_TEXT)
/* The three cfg_key members that place a key's value in member `member` of `type`. */
#define CFG_AT(type, member)                                                \
	.field = CFG_FIELD_OF(type, member), .at = offsetof(type, member),  \
	.size = sizeof(((type *)0)->member)

struct cfg_value {
	char text[256];  /* resolved value as text (canonical) */
	long long i;     /* CFG_INT, CFG_BOOL (0/1), CFG_ENUM (index in choices) */
	double f;        /* CFG_FLOAT */
	char origin[64]; /* "default", the file name, or "--set" */
};

struct cfg {
	const struct cfg_key *keys;
	int n;
	struct cfg_value *vals; /* n entries, same order as keys */
	char path[1024];        /* file it was loaded from */
};

/* Fills c with the defaults of the table (keys[] ends with a {NULL} entry). */
int cfg_init(struct cfg *c, const struct cfg_key *keys, struct err *e);
void cfg_free(struct cfg *c);
/* Loads `path` over the current values (missing/unreadable file: ERR_CONFIG). All or
 * nothing: on any error no value changes. On success c->path = path. */
int cfg_load_file(struct cfg *c, const char *path, struct err *e);
/* Parses loaded INI text (used by checkpoints, which store the resolved config).
 * `origin` names the text in messages and value origins; on success c->path = origin. */
int cfg_load_text(struct cfg *c, const char *text, const char *origin, struct err *e);
/* Applies "section.key=value". */
int cfg_set(struct cfg *c, const char *assignment, struct err *e);
/* Sets the declared key [section] name to `value`, recording `origin` as where it came
 * from (a rule of the program, e.g. a default that depends on another key). */
int cfg_put(struct cfg *c, const char *section, const char *name, const char *value,
	    const char *origin, struct err *e);
/* Typed access; aborting on an undeclared key is a programming error (assert). */
long long cfg_int(const struct cfg *c, const char *section, const char *name);
double cfg_float(const struct cfg *c, const char *section, const char *name);
const char *cfg_str(const struct cfg *c, const char *section, const char *name);
int cfg_enum(const struct cfg *c, const char *section, const char *name);
/* The value of [section] name, or NULL when the table declares no such key. */
const struct cfg_value *cfg_value_of(const struct cfg *c, const char *section,
				     const char *name);
/* Whether the declared key [section] name holds its table default (whatever said so). */
int cfg_holds_default(const struct cfg *c, const char *section, const char *name);
/* Stores every key that declares a field into the struct at `target` (zeroed first by
 * the caller): ints, enum indexes and bools as int (or unsigned long long), floats as
 * double, strings as text (cut to the field's size). One loop for the whole table. */
void cfg_store(const struct cfg *c, void *target);
/* How far `cand` is from `word` for a "did you mean" hint: the edits (insertion, deletion,
 * substitution, swap of two neighbours) between them, or INT_MAX when more than a third
 * of word's length (at least 1, at most 3). */
int cfg_near_distance(const char *word, const char *cand);
/* Writes every key with its resolved value as INI (sections in table order). */
int cfg_write(const struct cfg *c, FILE *f);
/* Compares the keys carrying any of `flags` (e.g. CFG_MATH) and none of `skip` of a
 * (current) with b (stored): returns the number of keys that differ and describes the
 * first ones in `out` ("model.hidden: 512 != 256; ..."). */
int cfg_diff(const struct cfg *a, const struct cfg *b, unsigned flags, unsigned skip,
	     char *out, size_t outlen);

#endif
