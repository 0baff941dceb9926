/*
 * test-config: the configuration layer (runtime/config.c) and the key table (src/keys.c).
 *
 * Checks that the defaults and every shipped .ini load, that malformed, unknown and
 * out-of-range values are refused with ERR_CONFIG and a message naming the key, that
 * --set overrides work and refuse what they should, that relations between keys are
 * enforced, that cfg_write output reads back to identical values, and that
 * cfg_diff(..., CFG_MATH) sees math keys only. Expected values come from the specification of
 * the keys, not from the code under test.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-run.h"
#include "coll.h"
#include "config.h"
#include "err.h"
#include "optim.h"
#include "settings.h"

#ifndef DDPTOK_CONF_DIR
#define DDPTOK_CONF_DIR "conf"
#endif

static const char *conf_dir(void)
{
	const char *d = getenv("DDPTOK_CONF_DIR");
	return d && d[0] ? d : DDPTOK_CONF_DIR;
}

/* A fresh cfg over the program's table. */
static void init_defaults(struct cfg *c)
{
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(cfg_init(c, settings_keys, &e), ERR_OK);
	ck_assert_int_eq(e.code, ERR_OK);
}

/* Loads `text`; expects ERR_CONFIG with every NULL-terminated needle in the message. */
static void expect_text_error(const char *text, ...)
{
	struct cfg c;
	struct err e;
	va_list ap;
	init_defaults(&c);
	err_clear(&e);
	int rc = cfg_load_text(&c, text, "test.ini", &e);
	ck_assert_msg(rc == ERR_CONFIG, "text <<%s>> gave %d (%s), expected ERR_CONFIG", text, rc,
		      e.msg);
	ck_assert_int_eq(e.code, ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "test.ini") != NULL, "message lacks origin: %s", e.msg);
	va_start(ap, text);
	for (const char *needle = va_arg(ap, const char *); needle;
	     needle = va_arg(ap, const char *))
		ck_assert_msg(strstr(e.msg, needle) != NULL, "message '%s' lacks '%s'", e.msg,
			      needle);
	va_end(ap);
	cfg_free(&c);
}

/* Applies --set; expects ERR_CONFIG with "--set" and `needle` in the message. */
static void expect_set_error(const char *assignment, const char *needle)
{
	struct cfg c;
	struct err e;
	init_defaults(&c);
	err_clear(&e);
	int rc = cfg_set(&c, assignment, &e);
	ck_assert_msg(rc == ERR_CONFIG, "--set %s gave %d (%s)", assignment, rc, e.msg);
	ck_assert_msg(strstr(e.msg, "--set") != NULL, "message lacks --set: %s", e.msg);
	if (needle)
		ck_assert_msg(strstr(e.msg, needle) != NULL, "message '%s' lacks '%s'", e.msg,
			      needle);
	cfg_free(&c);
}

/* Applies the assignments then settings_from_cfg; expects ERR_CONFIG naming both keys. */
static void expect_relation_error(const char *set1, const char *set2, const char *key1,
				  const char *key2)
{
	struct cfg c;
	struct err e;
	struct settings s;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_set(&c, set1, &e), ERR_OK);
	if (set2)
		ck_assert_int_eq(cfg_set(&c, set2, &e), ERR_OK);
	int rc = settings_from_cfg(&c, &s, &e);
	if (rc == ERR_OK) /* the relation of the runs that stop at stop_at */
		rc = settings_check_stop_at(&c, &s, &e);
	ck_assert_msg(rc == ERR_CONFIG, "%s %s: relation not refused (%d)", set1,
		      set2 ? set2 : "", rc);
	ck_assert_msg(strstr(e.msg, key1) && strstr(e.msg, key2), "message '%s' lacks %s / %s",
		      e.msg, key1, key2);
	cfg_free(&c);
}

START_TEST(defaults_load)
{
	struct cfg c;
	struct err e;
	struct settings s;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_uint_eq(s.seed, 1234);
	ck_assert_str_eq(s.outputs, "outputs/defaults"); /* no file: "defaults" names it */
	ck_assert_str_eq(s.artifacts, "artifacts/defaults");
	ck_assert_int_eq(s.log_level, 1);
	ck_assert_int_eq(s.train_count, 1024);
	ck_assert_int_eq(s.validation_count, 128);
	ck_assert_int_eq(s.test_count, 256);
	ck_assert_int_eq(s.min_len, 16);
	ck_assert_int_eq(s.max_len, 128);
	ck_assert_int_eq(s.vocab, 128);
	ck_assert_int_eq(s.prefix_max, 0);
	ck_assert_int_eq(s.branching, 4);
	ck_assert_int_eq(s.context, 8);
	ck_assert_int_eq(s.embed, 32);
	ck_assert_int_eq(s.hidden, 512);
	ck_assert_int_eq(s.layout, LAYOUT_PACKED);
	ck_assert_int_eq(s.updates, 100);
	ck_assert_int_eq(s.stop_at, 0); /* no planned stop by default */
	ck_assert_int_eq(s.accumulation, 2);
	ck_assert_int_eq(s.batch_size, 8);
	ck_assert_double_eq(s.lr, 0.2);
	ck_assert_double_eq(s.momentum, 0.9);
	ck_assert_double_eq(s.weight_decay, 0.0);
	ck_assert_int_eq(s.normalization, NORM_GLOBAL_TOKEN);
	ck_assert_int_eq(s.rank_split, RANK_SPLIT_LENGTH_BANDS);
	ck_assert_int_eq(s.empty_window, EMPTY_ERROR);
	ck_assert_int_eq(s.checkpoint_every, 0);
	ck_assert_int_eq(s.world, 2);
	ck_assert_int_eq(s.backend, BACKEND_AUTO);
	ck_assert_int_eq(s.reduce, COLL_AVG);
	ck_assert_int_eq(s.collective, COLLECTIVE_AUTO);
	ck_assert_int_eq(s.n_ids, 0);
	ck_assert_double_eq(s.timeout_s, 120.0);
	ck_assert_double_eq(s.atol, 1e-6);
	ck_assert_double_eq(s.rtol, 1e-4);
	ck_assert_int_eq(s.ex_short, 12);
	ck_assert_int_eq(s.ex_long_before, 12);
	ck_assert_int_eq(s.ex_long_after, 36);
	ck_assert_str_eq(c.vals[0].origin, "default");
	cfg_free(&c);
}
END_TEST

START_TEST(every_key_documented)
{
	int n = 0;
	for (const struct cfg_key *k = settings_keys; k->section; k++, n++) {
		ck_assert_msg(k->doc && strlen(k->doc) > 10, "[%s] %s lacks a doc line", k->section,
			      k->name);
		ck_assert_msg(!strchr(k->doc, '\n'), "[%s] %s doc is not one line", k->section,
			      k->name);
	}
	/* the table was read (not a key count: every new key would have to edit this test) */
	ck_assert_int_ge(n, 40);
}
END_TEST

static void load_conf(const char *name, struct cfg *c, struct settings *s)
{
	char path[1024];
	struct err e;
	snprintf(path, sizeof path, "%s/%s", conf_dir(), name);
	init_defaults(c);
	err_clear(&e);
	int rc = cfg_load_file(c, path, &e);
	ck_assert_msg(rc == ERR_OK, "%s: %s", path, e.msg);
	ck_assert_str_eq(c->path, path);
	rc = settings_from_cfg(c, s, &e);
	ck_assert_msg(rc == ERR_OK, "%s: %s", path, e.msg);
}

START_TEST(shipped_minimum)
{
	struct cfg c, d;
	struct settings s;
	load_conf("minimum.ini", &c, &s);
	init_defaults(&d);
	/* minimum.ini is the defaults written out in full: every key, same values, but for
	 * its planned stop (the seed's, at 50 of 100 updates; the default is none) */
	for (int i = 0; i < c.n; i++) {
		ck_assert_msg(strcmp(c.vals[i].origin, c.path) == 0, "[%s] %s not written in %s",
			      c.keys[i].section, c.keys[i].name, c.path);
		if (!strcmp(c.keys[i].name, "stop_at")) {
			ck_assert_str_eq(c.vals[i].text, "50");
			ck_assert_str_eq(d.vals[i].text, "0");
			continue;
		}
		ck_assert_msg(strcmp(c.vals[i].text, d.vals[i].text) == 0, "[%s] %s: %s != %s",
			      c.keys[i].section, c.keys[i].name, c.vals[i].text, d.vals[i].text);
	}
	ck_assert_int_eq(s.world, 2);
	ck_assert_int_eq(s.rank_split, RANK_SPLIT_LENGTH_BANDS);
	ck_assert_int_eq(s.layout, LAYOUT_PACKED);
	ck_assert_int_eq(s.updates, 100);
	ck_assert_int_eq(s.stop_at, 50);
	ck_assert_double_eq(s.lr, 0.2);
	cfg_free(&c);
	cfg_free(&d);
}
END_TEST

START_TEST(shipped_adapt_tokens)
{
	struct cfg c;
	struct settings s;
	load_conf("adapt-tokens.ini", &c, &s);
	ck_assert_int_eq(s.batching, BATCHING_TOKENS);
	ck_assert_int_eq(s.micro_tokens, 256);
	ck_assert_int_eq(s.layout, LAYOUT_PADDED);
	ck_assert_int_eq(s.rank_split, RANK_SPLIT_LENGTH_BANDS);
	cfg_free(&c);
}
END_TEST

START_TEST(shipped_masked)
{
	struct cfg c, m;
	struct settings s, sm;
	char diff[512];
	load_conf("masked.ini", &c, &s);
	load_conf("minimum.ini", &m, &sm);
	ck_assert_int_eq(s.prefix_max, 12);
	ck_assert_int_eq(s.rank_split, RANK_SPLIT_BALANCED);
	/* Exactly those two math keys differ from minimum.ini. */
	ck_assert_int_eq(cfg_diff(&c, &m, CFG_MATH, 0, diff, sizeof diff), 2);
	ck_assert_ptr_nonnull(strstr(diff, "data.prefix_max: 12 != 0"));
	ck_assert_ptr_nonnull(strstr(diff, "train.plan: balanced != length_bands"));
	cfg_free(&c);
	cfg_free(&m);
}
END_TEST

START_TEST(shipped_adamw)
{
	struct cfg c, m;
	struct settings s, sm;
	char diff[1024];
	load_conf("adamw.ini", &c, &s);
	load_conf("minimum.ini", &m, &sm);
	ck_assert_int_eq(s.optimizer, OPTIM_ADAMW);
	ck_assert_int_eq(s.schedule, SCHEDULE_COSINE);
	ck_assert_double_gt(s.clip, 0.0);
	/* only optimizer keys differ from minimum.ini */
	ck_assert_int_eq(cfg_diff(&c, &m, CFG_MATH, 0, diff, sizeof diff), 7);
	static const char *const keys[] = {"train.optimizer", "train.lr:", "train.schedule",
					   "train.warmup", "train.lr_min", "train.clip",
					   "train.weight_decay"};
	for (int k = 0; k < 7; k++)
		ck_assert_msg(strstr(diff, keys[k]), "%s: %s", keys[k], diff);
	cfg_free(&c);
	cfg_free(&m);
}
END_TEST

START_TEST(shipped_exercise)
{
	struct cfg c;
	struct settings s;
	load_conf("exercise.ini", &c, &s);
	ck_assert_int_eq(s.world, 2);
	ck_assert_int_eq(s.accumulation, 1);
	ck_assert_int_eq(s.batch_size, 1);
	ck_assert_int_eq(s.ex_short, 12);
	ck_assert_int_eq(s.ex_long_before, 12);
	ck_assert_int_eq(s.ex_long_after, 36);
	cfg_free(&c);
}
END_TEST

/* {config} in [run] outputs and artifacts is the configuration file's name without .ini,
 * wherever it stands; a value without it is taken as written */
START_TEST(config_name_in_dirs)
{
	struct cfg c;
	struct err e;
	struct settings s;
	char name[64];
	init_defaults(&c);
	err_clear(&e);
	snprintf(c.path, sizeof c.path, "%s", "some/dir/gpt-tiny.ini");
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_str_eq(s.outputs, "outputs/gpt-tiny");
	ck_assert_str_eq(s.artifacts, "artifacts/gpt-tiny");
	ck_assert_int_eq(cfg_set(&c, "run.outputs=/x/{config}-out/{config}", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "run.artifacts=mine", &e), ERR_OK);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_str_eq(s.outputs, "/x/gpt-tiny-out/gpt-tiny");
	ck_assert_str_eq(s.artifacts, "mine");
	snprintf(c.path, sizeof c.path, "%s", "run.conf");
	settings_config_name(&c, name, sizeof name);
	ck_assert_str_eq(name, "run.conf"); /* only .ini is taken off */
	cfg_free(&c);
}
END_TEST

START_TEST(shipped_tiny)
{
	struct cfg c;
	struct settings s;
	load_conf("tiny.ini", &c, &s);
	ck_assert_int_eq(s.train_count, 64);
	ck_assert_int_eq(s.validation_count, 16);
	ck_assert_int_eq(s.test_count, 32);
	ck_assert_int_eq(s.min_len, 4);
	ck_assert_int_eq(s.max_len, 16);
	ck_assert_int_eq(s.vocab, 16);
	ck_assert_int_eq(s.context, 3);
	ck_assert_int_eq(s.embed, 4);
	ck_assert_int_eq(s.hidden, 8);
	ck_assert_int_eq(s.updates, 6);
	ck_assert_int_eq(s.stop_at, 0); /* trains to updates; the protocol stops at 3 */
	ck_assert_int_eq(s.accumulation, 2);
	ck_assert_int_eq(s.batch_size, 2);
	ck_assert_int_eq(s.world, 2);
	ck_assert_str_eq(s.outputs, "outputs/tiny");
	ck_assert_str_eq(s.artifacts, "artifacts/tiny");
	cfg_free(&c);
}
END_TEST

START_TEST(missing_file)
{
	struct cfg c;
	struct err e;
	char path[1100];
	init_defaults(&c);
	snprintf(path, sizeof path, "%s/no-such-file.ini", conf_dir());
	err_clear(&e);
	ck_assert_int_eq(cfg_load_file(&c, path, &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, path));
	ck_assert_ptr_nonnull(strstr(e.msg, strerror(ENOENT)));
	err_clear(&e);
	ck_assert_int_eq(cfg_load_file(&c, conf_dir(), &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, strerror(EISDIR)));
	cfg_free(&c);
}
END_TEST

START_TEST(unknown_section_and_key)
{
	expect_text_error("[train]\nlr = 0.1\n[trian]\nupdates = 3\n", "[trian]", "unknown section",
			  NULL);
	expect_text_error("[train]\nlerning_rate = 0.1\n", "[train] lerning_rate", "unknown key",
			  NULL);
	/* A known key in the wrong section is unknown there. */
	expect_text_error("[model]\nlr = 0.1\n", "[model] lr", "unknown key", NULL);
	/* Keys before any section. */
	expect_text_error("lr = 0.1\n[train]\nupdates = 3\n", "lr", "outside", NULL);
	/* A line iniparser cannot parse: named in the source, not in a temporary file. */
	expect_text_error("[train]\nthis is not an assignment\n", "syntax", "test.ini", NULL);
	/* A section name that holds ':' (its keys are invisible to the section API). */
	expect_text_error("[train]\nupdates = 3\n[a:b]\nk = 1\n", "[a:b]: unknown section", NULL);
	/* The same key twice, in one section or a repeated one. */
	expect_text_error("[train]\nupdates = 3\nupdates = 4\n", "test.ini:3: [train] updates is "
			  "set a second time (first at line 2)", NULL);
	expect_text_error("[train]\nupdates = 3\n[data]\ntrain = 5\n[Train]\nUpdates = 4\n",
			  "test.ini:6: [train] updates is set a second time (first at line 2)", NULL);
	/* Nothing of a refused text is applied. */
	struct cfg c;
	struct err e;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[train]\nupdates = 7\n[trian]\n", "t", &e), ERR_CONFIG);
	ck_assert_int_eq(cfg_int(&c, "train", "updates"), 100);
	cfg_free(&c);
}
END_TEST

START_TEST(strict_integers)
{
	static const char *bad[] = { "010", "3abc", "", "1e3", "0x10", "1.0", "+", "-", "1 2",
				     "00", "9223372036854775808", "99999999999999999999" };
	char text[256];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(text, sizeof text, "[train]\nupdates = %s\n", bad[i]);
		expect_text_error(text, "[train] updates", NULL);
	}
	/* Quoted integers are still integers after the quotes go; signs are allowed. */
	struct cfg c;
	struct err e;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[train]\nupdates = \"+200\"\nstop_at = 0199\n", "t",
				       &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "[train] stop_at"));
	/* The failed load applied nothing, not even the valid updates line. */
	ck_assert_int_eq(cfg_int(&c, "train", "updates"), 100);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[train]\nupdates = \"+200\"\n", "t", &e), ERR_OK);
	ck_assert_int_eq(cfg_int(&c, "train", "updates"), 200);
	ck_assert_str_eq(cfg_str(&c, "train", "updates"), "200");
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[data]\nprefix_max = -0\n", "t", &e), ERR_OK);
	ck_assert_int_eq(cfg_int(&c, "data", "prefix_max"), 0);
	cfg_free(&c);
}
END_TEST

START_TEST(strict_floats)
{
	static const char *bad[] = { "nan", "inf", "-inf", "0.1x", "", "0x1p-3", "1e999", ".",
				     "e5", "1,5", "1e-400" };
	char text[256];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(text, sizeof text, "[parity]\natol = %s\n", bad[i]);
		expect_text_error(text, "[parity] atol", NULL);
	}
	struct cfg c;
	struct err e;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[parity]\natol = 1e-6\nrtol = .5\n[train]\nlr = 5E-1\n",
				       "t", &e), ERR_OK);
	ck_assert_double_eq(cfg_float(&c, "parity", "atol"), 1e-6);
	ck_assert_double_eq(cfg_float(&c, "parity", "rtol"), 0.5);
	ck_assert_double_eq(cfg_float(&c, "train", "lr"), 0.5);
	cfg_free(&c);
}
END_TEST

/* A subnormal is a number in double range (strtod's ERANGE for it is no overflow); one
 * that underflows to zero is refused, naming the range. */
START_TEST(subnormal_floats)
{
	struct cfg c;
	struct err e;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[train]\nlr = 1e-320\n[parity]\natol = 4.9e-324\n",
				       "t", &e), ERR_OK);
	ck_assert(cfg_float(&c, "train", "lr") == 1e-320);
	ck_assert(cfg_float(&c, "parity", "atol") == 4.9e-324);
	cfg_free(&c);
	expect_text_error("[train]\nlr = 1e-400\n", "[train] lr", "1e-400", "4.9e-324", NULL);
}
END_TEST

START_TEST(out_of_range)
{
	expect_text_error("[train]\nupdates = 0\n", "[train] updates", "0", "[1, 1000000]", NULL);
	expect_text_error("[data]\nvocab = 300000\n", "[data] vocab", "300000", "[8, 262144]", NULL);
	expect_text_error("[run]\nseed = 2147483648\n", "[run] seed", "2147483648",
			  "[0, 2147483647]", NULL);
	expect_text_error("[run]\nseed = -1\n", "[run] seed", NULL);
	expect_text_error("[devices]\nworld = 9\n", "[devices] world", "9", "[1, 8]", NULL);
	/* Open bounds: lr in (0, 10], momentum in [0, 1). */
	expect_text_error("[train]\nlr = 0\n", "[train] lr", "(0, 10]", NULL);
	expect_text_error("[train]\nlr = 10.5\n", "[train] lr", "10.5", NULL);
	expect_text_error("[train]\nmomentum = 1\n", "[train] momentum", "[0, 1)", NULL);
	expect_text_error("[parity]\nrtol = -1e-9\n", "[parity] rtol", "-1e-9", NULL);

	/* The bounds themselves are accepted where the range is closed. */
	struct cfg c;
	struct err e;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[train]\nlr = 10\nmomentum = 0\n[run]\nseed = "
				       "2147483647\n[devices]\nworld = 8\n", "t", &e), ERR_OK);
	ck_assert_int_eq(cfg_int(&c, "run", "seed"), 2147483647);
	cfg_free(&c);
}
END_TEST

START_TEST(enums)
{
	expect_text_error("[train]\nplan = bands\n", "[train] plan", "bands",
			  "length_bands|balanced", NULL);
	expect_text_error("[devices]\nreduce = mean\n", "[devices] reduce", NULL);
	expect_text_error("[train]\nnormalization = \n", "[train] normalization", NULL);

	struct cfg c;
	struct err e;
	struct settings s;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[run]\nlog_level = Debug\n[devices]\nreduce = sum\n"
				       "backend = cuda\ncollective = nccl\n[train]\n"
				       "normalization = double_accumulation\nempty_window = skip\n"
				       "[model]\nlayout = padded\n", "t", &e), ERR_OK);
	ck_assert_str_eq(cfg_str(&c, "run", "log_level"), "debug");
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(s.log_level, 2);
	ck_assert_int_eq(s.reduce, COLL_SUM);
	ck_assert_int_eq(s.backend, BACKEND_CUDA);
	ck_assert_int_eq(s.collective, COLLECTIVE_NCCL);
	ck_assert_int_eq(s.normalization, NORM_DOUBLE_ACCUM);
	ck_assert_int_eq(s.empty_window, EMPTY_SKIP);
	ck_assert_int_eq(s.layout, LAYOUT_PADDED);
	cfg_free(&c);
}
END_TEST

/* cfg_store puts each key's value in its own field of struct settings: a value set for one
 * key reaches the field the table names, the fields do not overlap, and only [devices]
 * ids and [data] split (lists settings_from_cfg parses) have none. */
START_TEST(every_key_lands_in_its_field)
{
	struct cfg c;
	struct err e;
	struct settings s;
	int n_fields = 0;
	err_clear(&e);
	for (const struct cfg_key *k = settings_keys; k->section; k++) {
		char set[160], name[64];
		snprintf(name, sizeof name, "%s.%s", k->section, k->name);
		if (k->field == CFG_FIELD_NONE) {
			ck_assert_msg(!strcmp(name, "devices.ids") || !strcmp(name, "data.split"),
				      "%s lands in no field", name);
			continue;
		}
		n_fields++;
		ck_assert_msg(k->at + k->size <= sizeof s, "%s lands outside struct settings", name);
		for (const struct cfg_key *o = settings_keys; o < k; o++)
			if (o->field != CFG_FIELD_NONE)
				ck_assert_msg(o->at + o->size <= k->at || k->at + k->size <= o->at,
					      "%s.%s and %s share a field", o->section, o->name, name);
		/* a value other than the default: the upper bound, the other enum choice, a
		 * path */
		if (k->type == CFG_STRING)
			snprintf(set, sizeof set, "%s=somewhere", name);
		else if (k->type == CFG_ENUM)
			snprintf(set, sizeof set, "%s=%s", name,
				 strncmp(k->choices, k->def, strlen(k->def)) == 0 ?
				 strchr(k->choices, '|') + 1 : k->choices);
		else if (k->open & CFG_OPEN_MAX)
			snprintf(set, sizeof set, "%s=%.17g", name, (k->min + k->max) / 2);
		else
			snprintf(set, sizeof set, "%s=%.17g", name, k->max);
		char *bar = strchr(set, '|');
		if (bar)
			*bar = '\0';
		init_defaults(&c);
		ck_assert_msg(cfg_set(&c, set, &e) == ERR_OK, "%s: %s", set, e.msg);
		memset(&s, 0xa5, sizeof s);
		cfg_store(&c, &s);
		const char *at = (const char *)&s + k->at;
		const struct cfg_value *v = &c.vals[k - settings_keys];
		int x;
		unsigned long long u;
		double f;
		switch (k->field) {
		case CFG_FIELD_INT:
			memcpy(&x, at, sizeof x);
			ck_assert_msg(x == v->i, "%s: field holds %d", set, x);
			break;
		case CFG_FIELD_ULLONG:
			memcpy(&u, at, sizeof u);
			ck_assert_msg(u == (unsigned long long)v->i, "%s: field holds %llu", set, u);
			break;
		case CFG_FIELD_DOUBLE:
			memcpy(&f, at, sizeof f);
			ck_assert_msg(f == v->f, "%s: field holds %g", set, f);
			break;
		default:
			ck_assert_str_eq(at, "somewhere");
		}
		cfg_free(&c);
	}
	ck_assert_int_ge(n_fields, 37);
}
END_TEST

START_TEST(norm_names)
{
	static const char *names[] = { "global_token", "mean_of_means", "microbatch_mean",
				       "double_accumulation" };
	ck_assert_int_eq(NORM_COUNT, 4);
	for (int i = 0; i < NORM_COUNT; i++) {
		char set[128];
		struct cfg c;
		struct err e;
		struct settings s;
		ck_assert_str_eq(norm_mode_name(i), names[i]);
		ck_assert_int_eq(norm_mode_parse(names[i]), i);
		/* The config's enum index agrees with enum norm_mode. */
		init_defaults(&c);
		err_clear(&e);
		snprintf(set, sizeof set, "train.normalization=%s", names[i]);
		ck_assert_int_eq(cfg_set(&c, set, &e), ERR_OK);
		ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
		ck_assert_int_eq(s.normalization, i);
		cfg_free(&c);
	}
	ck_assert_int_eq(norm_mode_parse("global"), -1);
	ck_assert_int_eq(norm_mode_parse(""), -1);
}
END_TEST

/* A table of its own for what the program's table does not declare (bools). */
static const struct cfg_key test_keys[] = {
	{ .section = "a", .name = "flag", .type = CFG_BOOL, .def = "false", .doc = "a flag" },
	{ .section = "a", .name = "n", .type = CFG_INT, .def = "3", .min = -5, .max = 5,
	  .flags = CFG_MATH, .doc = "a number" },
	{ .section = "b", .name = "s", .type = CFG_STRING, .def = "x", .doc = "a string" },
	{ .section = "a", .name = "x", .type = CFG_FLOAT, .def = "0.5", .min = 0, .max = 1,
	  .doc = "a fraction" },
	{ NULL },
};

START_TEST(bools)
{
	static const struct { const char *text; int value; } good[] = {
		{ "true", 1 }, { "false", 0 }, { "yes", 1 }, { "no", 0 }, { "1", 1 }, { "0", 0 },
		{ "TRUE", 1 }, { "No", 0 },
	};
	static const char *bad[] = { "2", "maybe", "", "truee", "01" };
	struct cfg c;
	struct err e;
	char text[128];
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		err_clear(&e);
		ck_assert_int_eq(cfg_init(&c, test_keys, &e), ERR_OK);
		snprintf(text, sizeof text, "[a]\nflag = %s\n", good[i].text);
		ck_assert_int_eq(cfg_load_text(&c, text, "t", &e), ERR_OK);
		ck_assert_int_eq(cfg_int(&c, "a", "flag"), good[i].value);
		ck_assert_str_eq(cfg_str(&c, "a", "flag"), good[i].value ? "true" : "false");
		cfg_free(&c);
	}
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err_clear(&e);
		ck_assert_int_eq(cfg_init(&c, test_keys, &e), ERR_OK);
		snprintf(text, sizeof text, "[a]\nflag = %s\n", bad[i]);
		ck_assert_int_eq(cfg_load_text(&c, text, "bool.ini", &e), ERR_CONFIG);
		ck_assert_ptr_nonnull(strstr(e.msg, "bool.ini: [a] flag"));
		cfg_free(&c);
	}
	/* Negative ranges work for integers. */
	err_clear(&e);
	ck_assert_int_eq(cfg_init(&c, test_keys, &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "a.n=-5", &e), ERR_OK);
	ck_assert_int_eq(cfg_int(&c, "a", "n"), -5);
	ck_assert_int_eq(cfg_set(&c, "a.n=-6", &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "[-5, 5]"));
	cfg_free(&c);
}
END_TEST

START_TEST(set_overrides)
{
	struct cfg c;
	struct err e;
	struct settings s;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_set(&c, "train.lr=0.1", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, " model.hidden = 256 ", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "Train.Plan=balanced", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "run.outputs=\"out dir\"", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "devices.ids=0, 1", &e), ERR_OK);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_double_eq(s.lr, 0.1);
	ck_assert_int_eq(s.hidden, 256);
	ck_assert_int_eq(s.rank_split, RANK_SPLIT_BALANCED);
	ck_assert_str_eq(s.outputs, "out dir");
	ck_assert_int_eq(s.n_ids, 2);
	ck_assert_int_eq(s.ids[0], 0);
	ck_assert_int_eq(s.ids[1], 1);
	for (int i = 0; i < c.n; i++)
		if (!strcmp(c.keys[i].name, "lr"))
			ck_assert_str_eq(c.vals[i].origin, "--set");
	/* A --set after a file load wins over the file. */
	char path[1100];
	snprintf(path, sizeof path, "%s/tiny.ini", conf_dir());
	ck_assert_int_eq(cfg_load_file(&c, path, &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "train.updates=7", &e), ERR_OK);
	ck_assert_int_eq(cfg_int(&c, "train", "updates"), 7);
	ck_assert_int_eq(cfg_int(&c, "model", "hidden"), 8);
	cfg_free(&c);
}
END_TEST

START_TEST(set_malformed)
{
	expect_set_error("trainlr=1", "trainlr=1");
	expect_set_error("train.lr", "train.lr");
	expect_set_error("=1", NULL);
	expect_set_error(".lr=1", NULL);
	expect_set_error("train.=1", NULL);
	expect_set_error("train.lr.x=1", NULL);
	expect_set_error("tr ain.lr=1", NULL);
	expect_set_error("train.lerning_rate=0.1", "[train] lerning_rate");
	expect_set_error("trian.lr=0.1", "[trian]");
	expect_set_error("train.updates=010", "[train] updates");
	expect_set_error("train.lr=abc", "[train] lr");
	expect_set_error("train.plan=", "[train] plan");
}
END_TEST

START_TEST(relations)
{
	expect_relation_error("train.stop_at=100", NULL, "stop_at", "updates");
	expect_relation_error("train.updates=10", "train.stop_at=20", "stop_at", "updates");
	expect_relation_error("data.min_len=200", NULL, "min_len", "max_len");
	expect_relation_error("data.prefix_max=16", NULL, "prefix_max", "min_len");
	expect_relation_error("devices.ids=0,1,2", NULL, "ids", "world");
	expect_relation_error("devices.ids=0", NULL, "ids", "world");
	expect_relation_error("train.batching=tokens", "train.shards=4", "batching", "shards");
	expect_relation_error("train.batching=tokens", "train.batch_size=64", "batching",
			      "batch_size");

	/* Malformed ordinal lists. */
	static const char *bad_ids[] = { "0,,1", "01,1", "0,1,", "a,b", "-1,0", "0;1" };
	for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
		struct cfg c;
		struct err e;
		struct settings s;
		char set[64];
		init_defaults(&c);
		err_clear(&e);
		snprintf(set, sizeof set, "devices.ids=%s", bad_ids[i]);
		ck_assert_int_eq(cfg_set(&c, set, &e), ERR_OK);
		ck_assert_msg(settings_from_cfg(&c, &s, &e) == ERR_CONFIG, "ids %s accepted",
			      bad_ids[i]);
		ck_assert_ptr_nonnull(strstr(e.msg, "[devices] ids"));
		cfg_free(&c);
	}

	/* Boundaries that must pass: stop_at = updates - 1, prefix_max = min_len - 1,
	 * min_len = max_len, duplicate ids (refused later, with the collective). */
	struct cfg c;
	struct err e;
	struct settings s;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_set(&c, "train.stop_at=99", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "data.prefix_max=15", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "data.max_len=16", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "devices.ids=3,3", &e), ERR_OK);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(s.ids[0], 3);
	ck_assert_int_eq(s.ids[1], 3);
	cfg_free(&c);

	/* The message names the file the values came from. */
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[train]\nupdates = 5\nstop_at = 5\n", "rel.ini", &e),
			 ERR_OK);
	/* only a run that stops at stop_at refuses it (train --continuous never reads it) */
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(settings_check_stop_at(&c, &s, &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "rel.ini"));
	ck_assert_ptr_nonnull(strstr(e.msg, "[train] stop_at"));
	ck_assert_ptr_nonnull(strstr(e.msg, "[train] updates"));
	cfg_free(&c);
}
END_TEST

static char *write_to_string(const struct cfg *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(cfg_write(c, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

START_TEST(write_round_trip)
{
	struct cfg a, b;
	struct err e;
	init_defaults(&a);
	err_clear(&e);
	ck_assert_int_eq(cfg_set(&a, "train.lr=0.30000000000000004", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "train.momentum=0.1", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "parity.atol=3.3e-7", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "run.outputs=out;dir #1", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "run.artifacts=it's here", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "data.prefix_max=7", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "devices.reduce=sum", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "devices.ids=1,0", &e), ERR_OK);

	char *text = write_to_string(&a);
	/* Sections appear once, in table order, as "[section]" lines. */
	const char *run = strstr(text, "[run]\n"), *data = strstr(text, "[data]\n");
	const char *ex = strstr(text, "[exercise]\n");
	ck_assert_ptr_nonnull(run);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(ex);
	ck_assert(run < data && data < ex);
	ck_assert_ptr_null(strstr(run + 1, "[run]"));
	ck_assert_ptr_nonnull(strstr(text, "\nhidden = 512\n"));

	init_defaults(&b);
	ck_assert_msg(cfg_load_text(&b, text, "stored", &e) == ERR_OK, "%s\n%s", e.msg, text);
	for (int i = 0; i < a.n; i++) {
		ck_assert_msg(strcmp(a.vals[i].text, b.vals[i].text) == 0, "[%s] %s: %s != %s",
			      a.keys[i].section, a.keys[i].name, a.vals[i].text, b.vals[i].text);
		ck_assert(a.vals[i].i == b.vals[i].i);
		ck_assert(memcmp(&a.vals[i].f, &b.vals[i].f, sizeof(double)) == 0);
		ck_assert_str_eq(b.vals[i].origin, "stored");
	}
	ck_assert_str_eq(cfg_str(&b, "run", "outputs"), "out;dir #1");
	ck_assert_str_eq(cfg_str(&b, "run", "artifacts"), "it's here");
	ck_assert(cfg_float(&b, "train", "lr") == 0.1 + 0.2);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, NULL, 0), 0);

	/* Writing the reloaded values gives the same text. */
	char *again = write_to_string(&b);
	ck_assert_str_eq(text, again);
	free(again);
	free(text);
	cfg_free(&a);
	cfg_free(&b);
}
END_TEST

START_TEST(diff_math)
{
	struct cfg a, b;
	struct err e;
	char out[256];
	init_defaults(&a);
	init_defaults(&b);
	err_clear(&e);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, out, sizeof out), 0);
	ck_assert_str_eq(out, "");

	/* Non-math keys are ignored. */
	ck_assert_int_eq(cfg_set(&a, "run.outputs=elsewhere", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "parity.atol=0.5", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "devices.backend=cpu", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "train.checkpoint_every=5", &e), ERR_OK);
	/* the length of a run is not math: a resume may continue it further */
	ck_assert_int_eq(cfg_set(&a, "train.updates=200", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "train.stop_at=150", &e), ERR_OK);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, out, sizeof out), 0);
	ck_assert_str_eq(out, "");

	/* Math keys are seen and described. */
	ck_assert_int_eq(cfg_set(&a, "model.hidden=256", &e), ERR_OK);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, out, sizeof out), 1);
	ck_assert_str_eq(out, "model.hidden: 256 != 512");
	ck_assert_int_eq(cfg_set(&a, "train.lr=0.5", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "devices.reduce=sum", &e), ERR_OK);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, out, sizeof out), 3);
	ck_assert_ptr_nonnull(strstr(out, "train.lr: 0.5 != 0.2"));
	ck_assert_ptr_nonnull(strstr(out, "devices.reduce: sum != avg"));

	/* A short buffer is truncated but still terminated, and the count is complete. */
	char small[20];
	memset(small, 'x', sizeof small);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, small, sizeof small), 3);
	ck_assert(memchr(small, '\0', sizeof small) != NULL);

	/* The same value written differently is no difference. */
	ck_assert_int_eq(cfg_set(&b, "model.hidden=+256", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&b, "train.lr=5e-1", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&b, "devices.reduce=SUM", &e), ERR_OK);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, out, sizeof out), 0);

	/* Keys a checkpoint may differ in are skipped by their flag only: the session's
	 * normalization (KEY_MODE), the device count of exact mode (KEY_ELASTIC); the shape
	 * keys are a group of their own. */
	ck_assert_int_eq(cfg_set(&a, "train.normalization=mean_of_means", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "devices.world=4", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&a, "train.accumulation=1", &e), ERR_OK);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, 0, out, sizeof out), 3);
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, KEY_MODE, out, sizeof out), 2);
	ck_assert_ptr_null(strstr(out, "normalization"));
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, KEY_ELASTIC, out, sizeof out), 1);
	ck_assert_str_eq(out, "train.normalization: mean_of_means != global_token");
	ck_assert_int_eq(cfg_diff(&a, &b, CFG_MATH, KEY_MODE | KEY_ELASTIC, out, sizeof out), 0);
	ck_assert_int_eq(cfg_diff(&a, &b, KEY_SHAPE, 0, out, sizeof out), 0);
	ck_assert_int_eq(cfg_set(&a, "data.vocab=64", &e), ERR_OK);
	ck_assert_int_eq(cfg_diff(&a, &b, KEY_SHAPE, 0, out, sizeof out), 1);
	ck_assert_str_eq(out, "data.vocab: 64 != 128");
	cfg_free(&a);
	cfg_free(&b);
}
END_TEST

/* The protocol's planned stop: without train.stop_at it stops halfway, written into the
 * configuration (so that checkpoints and reports show it); updates = 1 has no halfway. */
START_TEST(protocol_stop_at)
{
	struct cfg c;
	struct err e;
	struct settings s;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_set(&c, "train.updates=7", &e), ERR_OK);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(s.stop_at, 0);
	ck_assert_int_eq(settings_check_stop_at(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(s.stop_at, 3);
	ck_assert_int_eq(cfg_int(&c, "train", "stop_at"), 3);
	ck_assert_int_eq(cfg_set(&c, "train.stop_at=5", &e), ERR_OK);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(settings_check_stop_at(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(s.stop_at, 5); /* a configured stop is kept */
	ck_assert_int_eq(cfg_set(&c, "train.stop_at=0", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "train.updates=1", &e), ERR_OK);
	ck_assert_int_eq(settings_from_cfg(&c, &s, &e), ERR_OK);
	ck_assert_int_eq(settings_check_stop_at(&c, &s, &e), ERR_CONFIG);
	ck_assert_ptr_nonnull(strstr(e.msg, "updates >= 2"));
	cfg_free(&c);
}
END_TEST

/* A file source left without train.plan and train.sampling takes balanced and epochs,
 * recorded as the file-data default (and written so by cfg_write); given, a plan is kept
 * (the length bands then draw independently); the synthetic source keeps the table's
 * defaults; epochs with the length bands are refused naming both keys. */
START_TEST(file_source_defaults)
{
	static const struct {
		const char *source, *sets;
		int plan, sampling, plan_chosen, sampling_chosen;
	} cases[] = {
		{"npy", "", RANK_SPLIT_BALANCED, SAMPLING_EPOCHS, 1, 1},
		{"jsonl", "train.plan=length_bands", RANK_SPLIT_LENGTH_BANDS, SAMPLING_INDEPENDENT, 0, 0},
		{"llmc", "train.plan=length_bands", RANK_SPLIT_LENGTH_BANDS, SAMPLING_INDEPENDENT, 0, 0},
		{"megatron", "train.sampling=independent", RANK_SPLIT_BALANCED, SAMPLING_INDEPENDENT, 1, 0},
		{"npy", "train.shards=4", RANK_SPLIT_BALANCED, SAMPLING_EPOCHS, 1, 1},
		{"synthetic", "", RANK_SPLIT_LENGTH_BANDS, SAMPLING_INDEPENDENT, 0, 0},
	};
	char set[128];
	struct err e;
	for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
		struct cfg c;
		struct settings s;
		init_defaults(&c);
		err_clear(&e);
		snprintf(set, sizeof set, "data.source=%s", cases[t].source);
		ck_assert_int_eq(cfg_set(&c, set, &e), ERR_OK);
		if (strcmp(cases[t].source, "synthetic"))
			ck_assert_int_eq(cfg_set(&c, "data.path=somewhere", &e), ERR_OK);
		if (cases[t].sets[0])
			ck_assert_int_eq(cfg_set(&c, cases[t].sets, &e), ERR_OK);
		ck_assert_msg(settings_for_source(&c, &e) == ERR_OK, "%s", e.msg);
		ck_assert_msg(settings_from_cfg(&c, &s, &e) == ERR_OK, "%s", e.msg);
		ck_assert_int_eq(s.rank_split, cases[t].plan);
		ck_assert_int_eq(s.sampling, cases[t].sampling);
		ck_assert_int_eq(settings_file_default(&c, "train", "plan"), cases[t].plan_chosen);
		ck_assert_int_eq(settings_file_default(&c, "train", "sampling"),
				 cases[t].sampling_chosen);
		/* what config.ini records */
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		ck_assert_int_eq(cfg_write(&c, f), 0);
		fclose(f);
		snprintf(set, sizeof set, "\nsampling = %s\n",
			 cases[t].sampling == SAMPLING_EPOCHS ? "epochs" : "independent");
		ck_assert_msg(strstr(text, set), "%s", text);
		snprintf(set, sizeof set, "\nplan = %s\n", rank_split_name(cases[t].plan));
		ck_assert_msg(strstr(text, set), "%s", text);
		free(text);
		cfg_free(&c);
	}
	expect_relation_error("train.sampling=epochs", NULL, "sampling = epochs",
			      "plan = length_bands");
}
END_TEST

/* The keys only the synthetic source reads are refused for a file source, in the file or
 * with --set, naming the key, its value, where it came from and what decides instead;
 * left at their defaults they are no error. */
START_TEST(synthetic_keys_refused_for_files)
{
	static const char *const keys[] = {"train", "validation", "test", "vocab", "prefix_max",
					   "branching"};
	char set[128], want[128];
	struct err e;
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		struct cfg c;
		init_defaults(&c);
		err_clear(&e);
		ck_assert_int_eq(cfg_load_text(&c, "[data]\nsource = jsonl\npath = x.jsonl\n",
					       "mine.ini", &e), ERR_OK);
		ck_assert_int_eq(settings_for_source(&c, &e), ERR_OK);
		snprintf(set, sizeof set, "data.%s=9", keys[k]);
		ck_assert_int_eq(cfg_set(&c, set, &e), ERR_OK);
		ck_assert_int_eq(settings_for_source(&c, &e), ERR_CONFIG);
		snprintf(want, sizeof want, "mine.ini: [data] %s = 9 (from --set): only the "
			 "synthetic source reads it; with [data] source = jsonl", keys[k]);
		ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
		cfg_free(&c);
	}
	struct cfg c;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_load_text(&c, "[data]\nsource = npy\npath = d\ntrain = 100\n",
				       "mine.ini", &e), ERR_OK);
	ck_assert_int_eq(settings_for_source(&c, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "mine.ini: [data] train = 100: only the synthetic source"),
		      "%s", e.msg);
	ck_assert_msg(strstr(e.msg, "[data] split decides the splits"), "%s", e.msg);
	cfg_free(&c);
}
END_TEST

/* train.tokens_per_update given alone: the rule's shape (the largest number of sequences
 * per microbatch that keeps it within 256 positions and divides the rank's sequences),
 * recorded in config.ini; given with batch_size or accumulation it is refused. */
START_TEST(tokens_per_update_chooses_the_microbatch_shape)
{
	int batch, acc;
	ck_assert(settings_microbatch_rule(24 * 64, 1, 64, 64, &batch, &acc));
	ck_assert_int_eq(batch, 4); /* 24 sequences: 4 x 6, not 24 x 1 */
	ck_assert_int_eq(acc, 6);
	ck_assert(settings_microbatch_rule(24 * 64, 2, 64, 64, &batch, &acc));
	ck_assert_int_eq(batch * acc, 12);
	ck_assert_int_eq(batch, 4);
	ck_assert(settings_microbatch_rule(7 * 32, 1, 32, 32, &batch, &acc));
	ck_assert_int_eq(batch, 7); /* 7 sequences of 32 fit one microbatch of 256 */
	ck_assert_int_eq(acc, 1);
	ck_assert(settings_microbatch_rule(13 * 64, 1, 64, 64, &batch, &acc));
	ck_assert_int_eq(batch, 1); /* 13 is prime: 13 microbatches of 1 */
	ck_assert(settings_microbatch_rule(4 * 1024, 1, 1024, 1024, &batch, &acc));
	ck_assert_int_eq(batch, 1); /* a sequence longer than 256 positions: one each */
	ck_assert(!settings_microbatch_rule(200 * 1024, 1, 1024, 1024, &batch, &acc));

	struct cfg c;
	struct settings s;
	struct err e;
	init_defaults(&c);
	err_clear(&e);
	ck_assert_int_eq(cfg_set(&c, "train.tokens_per_update=3072", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "data.min_len=32", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "data.max_len=96", &e), ERR_OK);
	ck_assert_msg(settings_microbatch_shape(&c, &e) == ERR_OK, "%s", e.msg);
	ck_assert_msg(settings_from_cfg(&c, &s, &e) == ERR_OK, "%s", e.msg);
	/* 3072 / 64 = 48 sequences over W = 2: 24 each; 256 / 96 = 2 per microbatch */
	ck_assert_int_eq(s.batch_size, 2);
	ck_assert_int_eq(s.accumulation, 12);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_int_eq(cfg_write(&c, f), 0);
	fclose(f);
	ck_assert_msg(strstr(text, "\naccumulation = 12\n") && strstr(text, "\nbatch_size = 2\n"),
		      "%s", text);
	free(text);
	cfg_free(&c);

	init_defaults(&c);
	ck_assert_int_eq(cfg_set(&c, "train.tokens_per_update=3072", &e), ERR_OK);
	ck_assert_int_eq(cfg_set(&c, "train.batch_size=4", &e), ERR_OK);
	ck_assert_int_eq(settings_microbatch_shape(&c, &e), ERR_CONFIG);
	ck_assert_msg(strstr(e.msg, "give it alone"), "%s", e.msg);
	cfg_free(&c);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, defaults_load);
	tcase_add_test(tc, config_name_in_dirs);
	tcase_add_test(tc, protocol_stop_at);
	tcase_add_test(tc, subnormal_floats);
	tcase_add_test(tc, every_key_documented);
	tcase_add_test(tc, shipped_minimum);
	tcase_add_test(tc, shipped_adapt_tokens);
	tcase_add_test(tc, shipped_masked);
	tcase_add_test(tc, shipped_adamw);
	tcase_add_test(tc, shipped_exercise);
	tcase_add_test(tc, shipped_tiny);
	tcase_add_test(tc, missing_file);
	tcase_add_test(tc, unknown_section_and_key);
	tcase_add_test(tc, strict_integers);
	tcase_add_test(tc, strict_floats);
	tcase_add_test(tc, out_of_range);
	tcase_add_test(tc, enums);
	tcase_add_test(tc, norm_names);
	tcase_add_test(tc, every_key_lands_in_its_field);
	tcase_add_test(tc, bools);
	tcase_add_test(tc, set_overrides);
	tcase_add_test(tc, set_malformed);
	tcase_add_test(tc, relations);
	tcase_add_test(tc, write_round_trip);
	tcase_add_test(tc, diff_math);

	suite_add_tcase(s, tc);
	TCase *source = tcase_create("source");
	tcase_add_test(source, file_source_defaults);
	tcase_add_test(source, synthetic_keys_refused_for_files);
	tcase_add_test(source, tokens_per_update_chooses_the_microbatch_shape);
	tcase_set_timeout(source, 30); /* milliseconds unloaded */
	suite_add_tcase(s, source);
	return s;
}

int main(void)
{
	return check_run(config_suite(), 0);
}
