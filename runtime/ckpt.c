/*
 * ckpt: the checkpoint store (protocol and guarantees described in ckpt.h).
 *
 * Writing: files go into a temporary sibling directory, each fsynced and digested as it
 * is written; the manifest is written last, so a directory without MANIFEST.json is by
 * construction incomplete. Publishing is one rename (or one exchange when the step is
 * being rewritten), followed by an fsync of the parent directory.
 * Reading: the manifest (jansson) is the single source of truth; every check compares the
 * files on disk against it.
 */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "jsonx.h"

struct ckpt_writer {
	char root[FSX_PATH_MAX];
	char tmp[FSX_PATH_MAX];   /* root/.step-NNNN.tmp.<pid> */
	char final[FSX_PATH_MAX]; /* root/step-NNNN */
	uint64_t step;
	struct ckpt_file *files;
	size_t n, cap;
};

/* --- names --- */

void ckpt_step_name(uint64_t step, char *out, size_t cap)
{
	snprintf(out, cap, "step-%04" PRIu64, step);
}

/* Parses the digits of a canonical step number at s (stops at the first non-digit);
 * returns the number of characters consumed, or 0. */
static size_t parse_step_digits(const char *s, uint64_t *step)
{
	uint64_t v = 0;
	size_t n = 0;
	char canon[32];
	while (s[n] >= '0' && s[n] <= '9') {
		unsigned d = (unsigned)(s[n] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return 0;
		v = v * 10 + d;
		n++;
	}
	snprintf(canon, sizeof canon, "%04" PRIu64, v);
	if (n == 0 || strlen(canon) != n || memcmp(canon, s, n) != 0)
		return 0;
	*step = v;
	return n;
}

int ckpt_parse_step_name(const char *name, uint64_t *step)
{
	uint64_t v;
	size_t n;
	if (strncmp(name, "step-", 5) != 0)
		return 0;
	n = parse_step_digits(name + 5, &v);
	if (n == 0 || name[5 + n] != '\0')
		return 0;
	*step = v;
	return 1;
}

/* Parses a pid (1..12 digits) at *p, advancing *p past it; 0 if there is none. */
static int parse_pid(const char **p, long *pid)
{
	long v = 0;
	int n = 0;
	for (; **p >= '0' && **p <= '9'; (*p)++, n++) {
		if (n == 12)
			return 0;
		v = v * 10 + (**p - '0');
	}
	*pid = v;
	return n > 0;
}

/* ".step-NNNN.tmp.<pid>", ".step-NNNN.old.<pid>" or "step-NNNN.kept.<pid>[.<k>]". */
static int parse_aside_name(const char *name, enum ckpt_kind *kind, uint64_t *step, long *pid)
{
	uint64_t v;
	size_t n;
	const char *p;
	long pv, k;
	int hidden = name[0] == '.';
	if (strncmp(name + hidden, "step-", 5) != 0)
		return 0;
	n = parse_step_digits(name + hidden + 5, &v);
	if (n == 0)
		return 0;
	p = name + hidden + 5 + n;
	if (hidden && !strncmp(p, ".tmp.", 5))
		*kind = CKPT_PARTIAL;
	else if (hidden && !strncmp(p, ".old.", 5))
		*kind = CKPT_TRASH;
	else if (!hidden && !strncmp(p, ".kept.", 6))
		*kind = CKPT_KEPT;
	else
		return 0;
	p += *kind == CKPT_KEPT ? 6 : 5;
	if (!parse_pid(&p, &pv))
		return 0;
	if (*kind == CKPT_KEPT && *p == '.') {
		p++;
		if (!parse_pid(&p, &k))
			return 0;
	}
	if (*p)
		return 0;
	*step = v;
	*pid = pv;
	return 1;
}

static int valid_file_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= CKPT_NAME_MAX || name[0] == '.' || !strcmp(name, CKPT_MANIFEST))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static const struct ckpt_file *find_file(const struct ckpt_file *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

const char *ckpt_problem_name(enum ckpt_problem p)
{
	switch (p) {
	case CKPT_OK: return "ok";
	case CKPT_NO_DIR: return "no directory";
	case CKPT_NO_MANIFEST: return "no manifest";
	case CKPT_BAD_MANIFEST: return "unparsable manifest";
	case CKPT_STEP_MISMATCH: return "step mismatch";
	case CKPT_MISSING_FILE: return "missing file";
	case CKPT_SIZE_MISMATCH: return "size mismatch";
	case CKPT_DIGEST_MISMATCH: return "digest mismatch";
	case CKPT_NOT_LISTED: return "not in manifest";
	case CKPT_IS_ROOT: return "directory of checkpoints";
	}
	return "unknown";
}

/* --- writing --- */

int ckpt_begin(const char *root, uint64_t step, struct ckpt_writer **out, struct err *e)
{
	char name[64];
	struct ckpt_writer *w;
	int rc;

	*out = NULL;
	w = calloc(1, sizeof *w);
	if (!w)
		return ERR(e, ERR_NOMEM, "checkpoint: out of memory");
	w->step = step;
	ERR_TRY_GOTO(rc, fsx_mkdirs(root, e), fail);
	snprintf(w->root, sizeof w->root, "%s", root);
	ckpt_step_name(step, name, sizeof name);
	ERR_TRY_GOTO(rc, fsx_join(w->final, sizeof w->final, root, name, e), fail);
	snprintf(name, sizeof name, ".step-%04" PRIu64 ".tmp.%ld", step, (long)getpid());
	ERR_TRY_GOTO(rc, fsx_join(w->tmp, sizeof w->tmp, root, name, e), fail);
	ERR_TRY_GOTO(rc, fsx_remove_tree(w->tmp, e), fail);
	if (mkdir(w->tmp, 0777) != 0) {
		rc = ERR_ERRNO(e, "cannot create checkpoint directory %s", w->tmp);
		goto fail;
	}
	*out = w;
	return 0;
fail:
	w->tmp[0] = '\0'; /* nothing of ours to remove */
	ckpt_abort(w);
	return rc;
}

int ckpt_add(struct ckpt_writer *w, const char *name, const void *data, size_t len,
	     struct err *e)
{
	struct fsx_part whole = {data, len};
	return ckpt_add_parts(w, name, &whole, 1, e);
}

int ckpt_file_begin(struct ckpt_writer *w, const char *name, struct ckpt_file_writer *fw,
		    struct err *e)
{
	char path[FSX_PATH_MAX];
	int rc;
	memset(fw, 0, sizeof *fw);
	fw->file.fd = -1;
	if (!valid_file_name(name))
		return ERR(e, ERR_DATA, "checkpoint %s: invalid file name '%s'", w->final, name);
	if (find_file(w->files, w->n, name))
		return ERR(e, ERR_DATA, "checkpoint %s: file '%s' added twice", w->final, name);
	if (w->n == w->cap) {
		size_t ncap = w->cap ? 2 * w->cap : 8;
		struct ckpt_file *p = realloc(w->files, ncap * sizeof *p);
		if (!p)
			return ERR(e, ERR_NOMEM, "checkpoint %s: out of memory", w->final);
		w->files = p;
		w->cap = ncap;
	}
	if ((rc = fsx_join(path, sizeof path, w->tmp, name, e)) ||
	    (rc = digest_init(&fw->digest, e)))
		return rc;
	if ((rc = fsx_writer_open(&fw->file, path, e))) {
		ckpt_file_abort(fw);
		return rc;
	}
	fw->w = w;
	snprintf(fw->name, sizeof fw->name, "%s", name);
	return 0;
}

int ckpt_file_write(struct ckpt_file_writer *fw, const void *data, size_t len, struct err *e)
{
	int rc = fsx_writer_write(&fw->file, data, len, e);
	if (rc == 0)
		rc = digest_update(fw->digest, data, len, e);
	if (rc) {
		ckpt_file_abort(fw);
		return rc;
	}
	fw->size += len;
	return 0;
}

int ckpt_file_end(struct ckpt_file_writer *fw, struct err *e)
{
	struct ckpt_writer *w = fw->w;
	struct ckpt_file *f = &w->files[w->n];
	int rc = fsx_writer_commit(&fw->file, e);
	if (rc) {
		ckpt_file_abort(fw);
		return rc;
	}
	memset(f, 0, sizeof *f);
	snprintf(f->name, sizeof f->name, "%s", fw->name);
	f->size = fw->size;
	rc = digest_final(fw->digest, f->sha256, e); /* frees the state, also on failure */
	fw->digest = NULL;
	if (rc)
		return rc;
	w->n++;
	return 0;
}

void ckpt_file_abort(struct ckpt_file_writer *fw)
{
	fsx_writer_abort(&fw->file);
	digest_free(fw->digest);
	fw->digest = NULL;
}

int ckpt_add_parts(struct ckpt_writer *w, const char *name, const struct fsx_part *parts,
		   int n, struct err *e)
{
	struct ckpt_file_writer fw;
	int rc = ckpt_file_begin(w, name, &fw, e);
	for (int i = 0; i < n && rc == 0; i++)
		rc = ckpt_file_write(&fw, parts[i].data, parts[i].len, e);
	return rc ? rc : ckpt_file_end(&fw, e);
}

static int write_manifest(struct ckpt_writer *w, struct err *e)
{
	char path[FSX_PATH_MAX];
	json_t *root = NULL, *files;
	char *text = NULL;
	int rc = 0;

	root = json_object();
	files = json_array();
	if (!root || !files || json_object_set_new(root, "format", json_string(CKPT_FORMAT)) ||
	    json_object_set_new(root, "step", json_integer((json_int_t)w->step)) ||
	    json_object_set_new(root, "files", files)) {
		if (!root)
			json_decref(files);
		rc = ERR(e, ERR_IO, "checkpoint %s: cannot build manifest", w->final);
		goto out;
	}
	for (size_t i = 0; i < w->n; i++) {
		json_t *f = json_pack("{s:s, s:I, s:s}", "name", w->files[i].name, "size",
				      (json_int_t)w->files[i].size, "sha256", w->files[i].sha256);
		if (!f || json_array_append_new(files, f)) {
			rc = ERR(e, ERR_IO, "checkpoint %s: cannot build manifest", w->final);
			goto out;
		}
	}
	text = jsonx_dumps(root, JSON_INDENT(2));
	if (!text) {
		rc = ERR(e, ERR_IO, "checkpoint %s: cannot serialize manifest", w->final);
		goto out;
	}
	size_t len = strlen(text);
	char *t = realloc(text, len + 2);
	if (!t) {
		rc = ERR(e, ERR_NOMEM, "checkpoint %s: out of memory", w->final);
		goto out;
	}
	text = t;
	text[len++] = '\n';
	text[len] = '\0';
	if ((rc = fsx_join(path, sizeof path, w->tmp, CKPT_MANIFEST, e)) ||
	    (rc = fsx_write_durable(path, text, len, e)))
		goto out;
out:
	free(text);
	json_decref(root);
	return rc;
}

static int verify_dir(const char *dir, struct ckpt_report *r_out, int look_inside,
		      const struct ckpt_scan *scan, struct err *e);

/* Whether the step-NNNN in the way (dir) may be deleted once replaced: only a directory
 * (not a link) that verifies and holds nothing but the files its manifest lists, i.e.
 * exactly what this store wrote. Otherwise 0, with the reason in why. */
int ckpt_removable(const char *dir, char *why, size_t cap)
{
	struct ckpt_report r;
	struct err ve;
	struct stat st;
	int ok;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(why, cap, "%.900s is not a directory", dir);
		return 0;
	}
	err_clear(&ve);
	ok = verify_dir(dir, &r, 0, NULL, &ve) == 0;
	if (!ok)
		snprintf(why, cap, "%s", ve.msg);
	else if (r.nextra) {
		ok = 0;
		snprintf(why, cap, "checkpoint %.400s is valid but holds files its manifest does not "
			 "list, which may be someone's: %.500s", dir, r.warning);
	}
	ckpt_report_free(&r);
	return ok;
}

/* Moves the step-NNNN in the way aside as step-NNNN.kept.<pid> (or .<pid>.<k> when that
 * name is taken); its new path goes to kept. */
static int keep_aside(struct ckpt_writer *w, char *kept, size_t cap, struct err *e)
{
	char name[96];
	int rc;
	for (int k = 0; k < 1000; k++) {
		if (k == 0)
			snprintf(name, sizeof name, "step-%04" PRIu64 ".kept.%ld", w->step,
				 (long)getpid());
		else
			snprintf(name, sizeof name, "step-%04" PRIu64 ".kept.%ld.%d", w->step,
				 (long)getpid(), k);
		if ((rc = fsx_join(kept, cap, w->root, name, e)))
			return rc;
		if (fsx_exists(kept))
			continue;
		if (rename(w->final, kept) != 0)
			return ERR_ERRNO(e, "cannot move %s (not a valid checkpoint) aside to %s",
					 w->final, kept);
		return 0;
	}
	return ERR(e, ERR_IO, "cannot move %s aside: every step-%04" PRIu64 ".kept.%ld.<k> name is "
		   "taken", w->final, w->step, (long)getpid());
}

/* Moves the finished temporary directory to its final name. On success w->tmp names what
 * is left to delete (the replaced valid copy) or is ""; info->kept names a step-NNNN
 * that was in the way and is kept. */
static int publish(struct ckpt_writer *w, struct ckpt_commit_info *info, struct err *e)
{
	char trash[FSX_PATH_MAX], name[64];
	int rc;

	if (!fsx_exists(w->final)) {
		if (rename(w->tmp, w->final) != 0)
			return ERR_ERRNO(e, "cannot rename %s to %s", w->tmp, w->final);
		w->tmp[0] = '\0';
		return 0;
	}
	if (!ckpt_removable(w->final, info->kept_why, sizeof info->kept_why)) {
		/* Not a valid checkpoint of ours: there is none for this step to preserve, so
		 * it can leave before the new one arrives, under a name that says it is kept. */
		if ((rc = keep_aside(w, info->kept, sizeof info->kept, e)))
			return rc;
		if (rename(w->tmp, w->final) != 0) {
			rc = ERR_ERRNO(e, "cannot rename %s to %s", w->tmp, w->final);
			if (rename(info->kept, w->final) != 0)
				err_prefix(e, "the directory that was in the way is now %s", info->kept);
			else
				info->kept[0] = '\0';
			return rc;
		}
		w->tmp[0] = '\0';
		return 0;
	}

	snprintf(name, sizeof name, ".step-%04" PRIu64 ".old.%ld", w->step, (long)getpid());
	if ((rc = fsx_join(trash, sizeof trash, w->root, name, e)) || (rc = fsx_remove_tree(trash, e)))
		return rc;
	/* Rewriting a step: swap, so that step-NNNN never stops existing, then give the old
	 * copy its own name at once (under the temporary name it would read as a partial
	 * write if the process died now). */
	if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->final, RENAME_EXCHANGE) == 0) {
		if (rename(w->tmp, trash) == 0)
			snprintf(w->tmp, sizeof w->tmp, "%s", trash);
		return 0; /* w->tmp now holds the old copy */
	}
	if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
		return ERR_ERRNO(e, "cannot exchange %s and %s", w->tmp, w->final);

	/* No exchange on this file system: move the old copy aside first. */
	if (rename(w->final, trash) != 0)
		return ERR_ERRNO(e, "cannot rename %s to %s", w->final, trash);
	if (rename(w->tmp, w->final) != 0) {
		rc = ERR_ERRNO(e, "cannot rename %s to %s", w->tmp, w->final);
		if (rename(trash, w->final) != 0) /* put the old one back */
			err_prefix(e, "old checkpoint left at %s", trash);
		return rc;
	}
	snprintf(w->tmp, sizeof w->tmp, "%s", trash);
	return 0;
}

int ckpt_commit_ex(struct ckpt_writer *w, struct ckpt_commit_info *info_out, struct err *e)
{
	struct ckpt_commit_info local, *info = info_out ? info_out : &local;
	int rc;

	memset(info, 0, sizeof *info);
	if ((rc = write_manifest(w, e)) || (rc = fsx_fsync_dir(w->tmp, e)) ||
	    (rc = publish(w, info, e)))
		goto out;
	ERR_TRY_GOTO(rc, fsx_fsync_dir(w->root, e), out);
	snprintf(info->path, sizeof info->path, "%s", w->final);
	if (w->tmp[0]) {
		/* the replaced copy: removed now; if that fails it stays (ckpt_list reports it) */
		struct err re;
		err_clear(&re);
		if (fsx_remove_tree(w->tmp, &re) != 0)
			snprintf(info->leftover, sizeof info->leftover, "%s", w->tmp);
		w->tmp[0] = '\0';
	}
out:
	/* On failure w->tmp is our unpublished data. */
	ckpt_abort(w);
	return rc;
}

int ckpt_commit(struct ckpt_writer *w, char *path_out, size_t cap, struct err *e)
{
	struct ckpt_commit_info info;
	int rc = ckpt_commit_ex(w, &info, e);
	if (path_out && cap)
		snprintf(path_out, cap, "%s", rc ? "" : info.path);
	return rc;
}

void ckpt_abort(struct ckpt_writer *w)
{
	if (!w)
		return;
	if (w->tmp[0]) {
		struct err ignored;
		err_clear(&ignored);
		fsx_remove_tree(w->tmp, &ignored);
	}
	free(w->files);
	free(w);
}

/* --- reading --- */

static void report_init(struct ckpt_report *r)
{
	memset(r, 0, sizeof *r);
}

void ckpt_report_free(struct ckpt_report *r)
{
	if (!r)
		return;
	free(r->files);
	fsx_free_names(r->extra, r->nextra);
	report_init(r);
}

static int bad_manifest(struct ckpt_report *r, struct err *e, const char *dir, const char *why)
{
	r->problem = CKPT_BAD_MANIFEST;
	return ERR(e, ERR_DATA, "checkpoint %s: unparsable manifest %s: %s", dir, CKPT_MANIFEST, why);
}

/* dir has no manifest. If it holds checkpoint entries it is a root, given where a single
 * checkpoint was expected: say so and name its newest valid step-NNNN. 0 if it holds none. */
static int root_given(const char *dir, struct ckpt_report *r, struct err *e)
{
	struct ckpt_listing l;
	struct err le;
	char best[FSX_PATH_MAX];
	uint64_t step = 0;
	size_t nstep = 0;

	err_clear(&le);
	if (ckpt_list(dir, &l, &le) != 0 || l.n == 0) {
		ckpt_listing_free(&l);
		return 0;
	}
	for (size_t i = 0; i < l.n; i++)
		nstep += l.v[i].kind == CKPT_STEP;
	ckpt_listing_free(&l);
	r->problem = CKPT_IS_ROOT;
	if (nstep == 0)
		return ERR(e, ERR_DATA, "%s is a directory of checkpoints, not a checkpoint, and it "
			   "holds no published step-NNNN (only leftovers of interrupted writes)", dir);
	err_clear(&le);
	if (ckpt_latest_valid(dir, best, sizeof best, &step, NULL, &le) == 0)
		return ERR(e, ERR_DATA, "%s is a directory of checkpoints, not a checkpoint: its newest "
			   "valid one is %s (step %" PRIu64 "); name that one", dir, best, step);
	return ERR(e, ERR_DATA, "%s is a directory of checkpoints, not a checkpoint, and none of "
		   "the %zu in it is valid (%s)", dir, nstep, le.msg);
}

/* Reads the text of dir/MANIFEST.json into text[len] (free it). A directory without one is
 * reported as a root of checkpoints when it holds some and look_inside. */
static int read_manifest_text(const char *dir, struct ckpt_report *r, int look_inside,
			      char **text, size_t *len, struct err *e)
{
	char path[FSX_PATH_MAX];
	struct stat st;
	int rc;

	if (!fsx_is_dir(dir)) {
		r->problem = CKPT_NO_DIR;
		return ERR(e, ERR_DATA, "checkpoint %s does not exist or is not a directory", dir);
	}
	if ((rc = fsx_join(path, sizeof path, dir, CKPT_MANIFEST, e)))
		return rc;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT) {
			if (look_inside && (rc = root_given(dir, r, e)))
				return rc;
			r->problem = CKPT_NO_MANIFEST;
			return ERR(e, ERR_DATA, "checkpoint %s has no %s: incomplete checkpoint, not used",
				   dir, CKPT_MANIFEST);
		}
		return ERR_ERRNO(e, "cannot stat %s", path);
	}
	if (!S_ISREG(st.st_mode))
		return bad_manifest(r, e, dir, "not a regular file");
	return fsx_read_all(path, text, len, e);
}

/* Entry i of the manifest's "files" (JSON `f`), checked and appended to r->files. */
static int add_manifest_entry(const char *dir, json_t *f, size_t i, struct ckpt_report *r,
			      struct err *e)
{
	char why[300];
	json_t *jn = json_object_get(f, "name"), *js = json_object_get(f, "size"),
	       *jh = json_object_get(f, "sha256");
	if (!json_is_object(f) || !json_is_string(jn) || !json_is_integer(js) ||
	    !json_is_string(jh) || json_integer_value(js) < 0) {
		snprintf(why, sizeof why, "entry %zu lacks a string \"name\", an integer \"size\" "
			 "or a string \"sha256\"", i);
		return bad_manifest(r, e, dir, why);
	}
	const char *name = json_string_value(jn), *hex = json_string_value(jh);
	if (!valid_file_name(name))
		snprintf(why, sizeof why, "entry %zu: invalid file name '%.100s'", i, name);
	else if (find_file(r->files, r->nfiles, name))
		snprintf(why, sizeof why, "file '%s' listed twice", name);
	else if (!digest_is_hex(hex))
		snprintf(why, sizeof why, "file '%s': \"sha256\" is not 64 lowercase hex digits", name);
	else {
		struct ckpt_file *cf = &r->files[r->nfiles++];
		snprintf(cf->name, sizeof cf->name, "%s", name);
		cf->size = (uint64_t)json_integer_value(js);
		memcpy(cf->sha256, hex, DIGEST_HEX_SIZE);
		r->total_bytes += cf->size;
		return ERR_OK;
	}
	return bad_manifest(r, e, dir, why);
}

/* The parsed manifest `root` into r: its format, step and file list. */
static int parse_manifest(const char *dir, json_t *root, struct ckpt_report *r, struct err *e)
{
	json_t *v = json_object_get(root, "format"), *files;
	if (!json_is_string(v) || strcmp(json_string_value(v), CKPT_FORMAT) != 0)
		return bad_manifest(r, e, dir, "\"format\" is not \"" CKPT_FORMAT "\"");
	v = json_object_get(root, "step");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad_manifest(r, e, dir, "\"step\" is not a non-negative integer");
	r->step = (uint64_t)json_integer_value(v);
	files = json_object_get(root, "files");
	if (!json_is_array(files))
		return bad_manifest(r, e, dir, "\"files\" is not an array");
	size_t n = json_array_size(files);
	r->files = calloc(n ? n : 1, sizeof *r->files);
	if (!r->files)
		return ERR(e, ERR_NOMEM, "checkpoint %s: out of memory", dir);
	for (size_t i = 0; i < n; i++)
		ERR_TRY(add_manifest_entry(dir, json_array_get(files, i), i, r, e));
	return ERR_OK;
}

/* Reads and checks dir/MANIFEST.json into r (step, files, nfiles, total_bytes). A missing
 * manifest in a directory that holds checkpoints is reported as such when look_inside. */
static int load_manifest(const char *dir, struct ckpt_report *r, int look_inside, struct err *e)
{
	char why[300], *text = NULL;
	size_t len;
	json_error_t jerr;
	int rc = read_manifest_text(dir, r, look_inside, &text, &len, e);
	if (rc)
		return rc;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!root) {
		snprintf(why, sizeof why, "invalid JSON at line %d: %s", jerr.line, jerr.text);
		return bad_manifest(r, e, dir, why);
	}
	rc = parse_manifest(dir, root, r, e);
	json_decref(root);
	return rc;
}

/* The last path component of dir, ignoring trailing slashes, into out. */
static void base_name(const char *dir, char *out, size_t cap)
{
	size_t end = strlen(dir), start;
	while (end > 1 && dir[end - 1] == '/')
		end--;
	start = end;
	while (start > 0 && dir[start - 1] != '/')
		start--;
	size_t n = end - start < cap - 1 ? end - start : cap - 1;
	memcpy(out, dir + start, n);
	out[n] = '\0';
}

struct ckpt_stream {
	int fd;
	const char *path;
	struct digest *digest;
	uint64_t at;
};

int ckpt_stream_read(struct ckpt_stream *s, void *buf, size_t len, size_t *got, struct err *e)
{
	char *to = buf;
	*got = 0;
	while (*got < len) {
		ssize_t n = read(s->fd, to + *got, len - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ERR_ERRNO(e, "cannot read %s", s->path);
		if (n == 0)
			break;
		ERR_TRY(digest_update(s->digest, to + *got, (size_t)n, e));
		*got += (size_t)n;
	}
	s->at += *got;
	return ERR_OK;
}

static void file_id(const struct stat *st, struct ckpt_file_id *id)
{
	*id = (struct ckpt_file_id){(uint64_t)st->st_dev, (uint64_t)st->st_ino,
				    (int64_t)st->st_ctim.tv_sec, (int64_t)st->st_ctim.tv_nsec};
}

/* The digest of listed file f at path, its bytes shown to scan->read on the way. */
static int digest_scanned(const char *path, struct ckpt_file *f, const struct ckpt_scan *scan,
			  char hex[DIGEST_HEX_SIZE], uint64_t *size, struct err *e)
{
	char rest[1 << 16];
	struct ckpt_stream s = {.fd = open(path, O_RDONLY | O_CLOEXEC), .path = path};
	struct stat st;
	size_t got = 1;
	int rc;
	if (s.fd < 0)
		return ERR_ERRNO(e, "cannot open %s", path);
	if (fstat(s.fd, &st) != 0) {
		rc = ERR_ERRNO(e, "cannot stat %s", path);
		goto out;
	}
	file_id(&st, &f->id);
	ERR_TRY_GOTO(rc, digest_init(&s.digest, e), out);
	ERR_TRY_GOTO(rc, scan->read(scan->arg, f, &s, e), out);
	while (got > 0)
		ERR_TRY_GOTO(rc, ckpt_stream_read(&s, rest, sizeof rest, &got, e), out);
	rc = digest_final(s.digest, hex, e);
	s.digest = NULL;
	*size = s.at;
out:
	digest_free(s.digest);
	close(s.fd);
	return rc;
}

/* Checks one listed file on disk (size, then digest; scan: see ckpt_verify_scan). */
static int check_file(const char *dir, struct ckpt_file *f, struct ckpt_report *r,
		      const struct ckpt_scan *scan, struct err *e)
{
	char path[FSX_PATH_MAX], hex[DIGEST_HEX_SIZE];
	struct stat st;
	uint64_t size;
	int rc;

	if ((rc = fsx_join(path, sizeof path, dir, f->name, e)))
		return rc;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT) {
			r->problem = CKPT_MISSING_FILE;
			return ERR(e, ERR_DATA, "checkpoint %s: missing file %s (listed in %s)", dir,
				   f->name, CKPT_MANIFEST);
		}
		return ERR_ERRNO(e, "cannot stat %s", path);
	}
	if (!S_ISREG(st.st_mode)) {
		r->problem = CKPT_MISSING_FILE;
		return ERR(e, ERR_DATA, "checkpoint %s: missing file %s (not a regular file)", dir, f->name);
	}
	if ((uint64_t)st.st_size != f->size)
		goto size_mismatch;
	if (scan && scan->wants(scan->arg, f->name))
		rc = digest_scanned(path, f, scan, hex, &size, e);
	else
		rc = digest_file(path, hex, &size, e);
	if (rc)
		return rc;
	if (size != f->size) {
		st.st_size = (off_t)size;
		goto size_mismatch;
	}
	if (strcmp(hex, f->sha256) != 0) {
		r->problem = CKPT_DIGEST_MISMATCH;
		return ERR(e, ERR_DATA, "checkpoint %s: digest mismatch for %s (corrupt): sha256 %s, "
			   "manifest says %s", dir, f->name, hex, f->sha256);
	}
	return 0;
size_mismatch:
	r->problem = CKPT_SIZE_MISMATCH;
	return ERR(e, ERR_DATA, "checkpoint %s: size mismatch for %s (%s): %" PRIu64 " bytes, "
		   "manifest says %" PRIu64, dir, f->name,
		   (uint64_t)st.st_size < f->size ? "truncated" : "grown", (uint64_t)st.st_size, f->size);
}

static int verify_dir(const char *dir, struct ckpt_report *r_out, int look_inside,
		      const struct ckpt_scan *scan, struct err *e)
{
	struct ckpt_report local, *r = r_out ? r_out : &local;
	char base[256];
	char **names = NULL;
	size_t count = 0;
	uint64_t named_step;
	int rc;

	report_init(r);
	ERR_TRY_GOTO(rc, load_manifest(dir, r, look_inside, e), out);
	base_name(dir, base, sizeof base);
	if (ckpt_parse_step_name(base, &named_step) && named_step != r->step) {
		r->problem = CKPT_STEP_MISMATCH;
		rc = ERR(e, ERR_DATA, "checkpoint %s: its manifest is for step %" PRIu64, dir, r->step);
		goto out;
	}
	for (size_t i = 0; i < r->nfiles; i++)
		ERR_TRY_GOTO(rc, check_file(dir, &r->files[i], r, scan, e), out);

	ERR_TRY_GOTO(rc, fsx_list_dir(dir, &names, &count, e), out);
	r->extra = calloc(count ? count : 1, sizeof *r->extra);
	if (!r->extra) {
		rc = ERR(e, ERR_NOMEM, "checkpoint %s: out of memory", dir);
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		if (!strcmp(names[i], CKPT_MANIFEST) || find_file(r->files, r->nfiles, names[i]))
			continue;
		r->extra[r->nextra++] = names[i];
		names[i] = NULL;
	}
	if (r->nextra) {
		size_t n = (size_t)snprintf(r->warning, sizeof r->warning,
					    "%zu file%s not listed in %s (ignored):", r->nextra,
					    r->nextra == 1 ? "" : "s", CKPT_MANIFEST);
		for (size_t i = 0; i < r->nextra && n < sizeof r->warning; i++)
			n += (size_t)snprintf(r->warning + n, sizeof r->warning - n, " %s", r->extra[i]);
		if (n >= sizeof r->warning && sizeof r->warning > 4)
			memcpy(r->warning + sizeof r->warning - 4, "...", 4);
	}
out:
	fsx_free_names(names, count);
	if (r == &local)
		ckpt_report_free(&local);
	return rc;
}

int ckpt_verify(const char *dir, struct ckpt_report *r, struct err *e)
{
	return verify_dir(dir, r, 1, NULL, e);
}

int ckpt_verify_scan(const char *dir, struct ckpt_report *r, const struct ckpt_scan *scan,
		     struct err *e)
{
	return verify_dir(dir, r, 1, scan, e);
}

/* Whether r's open file is still the one verified, with its size. */
static int reread_same(struct ckpt_reread *r, struct err *e)
{
	struct stat st;
	struct ckpt_file_id now;
	if (fstat(r->fd, &st) != 0)
		return ERR_ERRNO(e, "cannot stat %s/%s", r->dir, r->file.name);
	file_id(&st, &now);
	if (memcmp(&now, &r->file.id, sizeof now) == 0 && (uint64_t)st.st_size == r->file.size)
		return ERR_OK;
	return ERR(e, ERR_DATA, "checkpoint %s: %s changed after it was verified (another file "
		   "or new content under its name): load the checkpoint again", r->dir, r->file.name);
}

int ckpt_reopen(const char *dir, const struct ckpt_file *f, struct ckpt_reread *r,
		struct err *e)
{
	char path[FSX_PATH_MAX];
	r->fd = -1;
	r->file = *f;
	snprintf(r->dir, sizeof r->dir, "%s", dir);
	ERR_TRY(fsx_join(path, sizeof path, dir, f->name, e));
	if ((r->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return ERR_ERRNO(e, "cannot open %s", path);
	int rc = reread_same(r, e);
	if (rc) {
		close(r->fd);
		r->fd = -1;
	}
	return rc;
}

int ckpt_reread_at(struct ckpt_reread *r, void *buf, size_t len, uint64_t at, struct err *e)
{
	char *to = buf;
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(r->fd, to + done, len - done, (off_t)(at + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ERR_ERRNO(e, "cannot read %s/%s", r->dir, r->file.name);
		if (n == 0)
			return ERR(e, ERR_DATA, "checkpoint %s: %s ends at byte %" PRIu64 ", shorter "
				   "than when it was verified", r->dir, r->file.name, at + done);
		done += (size_t)n;
	}
	return ERR_OK;
}

int ckpt_reread_end(struct ckpt_reread *r, struct err *e)
{
	int rc = r->fd < 0 ? ERR_OK : reread_same(r, e);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	return rc;
}

int ckpt_read(const char *dir, const char *name, char **buf, size_t *len, struct err *e)
{
	struct ckpt_report r;
	char path[FSX_PATH_MAX], hex[DIGEST_HEX_SIZE];
	const struct ckpt_file *f;
	int rc;

	*buf = NULL;
	*len = 0;
	report_init(&r);
	ERR_TRY_GOTO(rc, load_manifest(dir, &r, 1, e), out);
	if (!(f = find_file(r.files, r.nfiles, name))) {
		rc = ERR(e, ERR_DATA, "checkpoint %s: no file %s in its %s", dir, name, CKPT_MANIFEST);
		goto out;
	}
	ERR_TRY_GOTO(rc, fsx_join(path, sizeof path, dir, name, e), out);
	if (!fsx_exists(path)) {
		rc = ERR(e, ERR_DATA, "checkpoint %s: missing file %s (listed in %s)", dir, name,
			 CKPT_MANIFEST);
		goto out;
	}
	ERR_TRY_GOTO(rc, fsx_read_all(path, buf, len, e), out);
	if ((uint64_t)*len != f->size) {
		rc = ERR(e, ERR_DATA, "checkpoint %s: size mismatch for %s (%s): %zu bytes, manifest "
			 "says %" PRIu64, dir, name, (uint64_t)*len < f->size ? "truncated" : "grown",
			 *len, f->size);
		goto out;
	}
	ERR_TRY_GOTO(rc, digest_sha256(*buf, *len, hex, e), out);
	if (strcmp(hex, f->sha256) != 0) {
		rc = ERR(e, ERR_DATA, "checkpoint %s: digest mismatch for %s (corrupt): sha256 %s, "
			 "manifest says %s", dir, name, hex, f->sha256);
		goto out;
	}
out:
	if (rc) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
	ckpt_report_free(&r);
	return rc;
}

/* --- enumerating --- */

static int cmp_entries(const void *pa, const void *pb)
{
	const struct ckpt_entry *a = pa, *b = pb;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return strcmp(a->name, b->name);
}

void ckpt_listing_free(struct ckpt_listing *l)
{
	if (!l)
		return;
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int ckpt_list(const char *root, struct ckpt_listing *out, struct err *e)
{
	char **names = NULL;
	size_t count = 0;
	int rc;

	out->v = NULL;
	out->n = 0;
	if (!fsx_exists(root))
		return 0;
	if ((rc = fsx_list_dir(root, &names, &count, e)))
		return rc;
	out->v = calloc(count ? count : 1, sizeof *out->v);
	if (!out->v) {
		rc = ERR(e, ERR_NOMEM, "cannot list checkpoints in %s: out of memory", root);
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		struct ckpt_entry *en = &out->v[out->n];
		if (strlen(names[i]) >= sizeof en->name)
			continue;
		if (ckpt_parse_step_name(names[i], &en->step)) {
			en->kind = CKPT_STEP;
			en->pid = 0;
		} else if (!parse_aside_name(names[i], &en->kind, &en->step, &en->pid)) {
			continue;
		}
		snprintf(en->name, sizeof en->name, "%s", names[i]);
		ERR_TRY_GOTO(rc, fsx_join(en->path, sizeof en->path, root, names[i], e), out);
		out->n++;
	}
	qsort(out->v, out->n, sizeof *out->v, cmp_entries);
out:
	fsx_free_names(names, count);
	if (rc)
		ckpt_listing_free(out);
	return rc;
}

int ckpt_latest_valid(const char *root, char *path_out, size_t cap, uint64_t *step_out,
		      int *skipped, struct err *e)
{
	struct ckpt_listing l;
	struct err first;
	int rc, nskip = 0;

	if (path_out && cap)
		path_out[0] = '\0';
	if (skipped)
		*skipped = 0;
	err_clear(&first);
	if ((rc = ckpt_list(root, &l, e)))
		return rc;
	for (size_t i = l.n; i-- > 0;) {
		struct err one;
		if (l.v[i].kind != CKPT_STEP)
			continue;
		err_clear(&one);
		if (verify_dir(l.v[i].path, NULL, 0, NULL, &one) == 0) {
			if (path_out && cap)
				snprintf(path_out, cap, "%s", l.v[i].path);
			if (step_out)
				*step_out = l.v[i].step;
			if (skipped)
				*skipped = nskip;
			ckpt_listing_free(&l);
			return 0;
		}
		if (nskip++ == 0)
			first = one;
	}
	ckpt_listing_free(&l);
	if (skipped)
		*skipped = nskip;
	if (nskip)
		return ERR(e, ERR_DATA, "no valid checkpoint in %s (%d rejected; newest: %s)", root, nskip,
			   first.msg);
	return ERR(e, ERR_DATA, "no checkpoint in %s", root);
}
