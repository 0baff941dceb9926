/*
 * ckpt: the checkpoint store, a directory of named files published atomically.
 *
 * Naming: ckpt_* is this store (files, manifest, digests, atomic publication) and knows no
 * content; checkpoint_* (src/train/checkpoint.c) is what a training checkpoint holds, written
 * and read back through this store.
 *
 * A checkpoint is the directory <root>/step-NNNN (NNNN = number of completed updates,
 * zero-padded to at least 4 digits; root is normally <artifacts>/checkpoints). The store
 * does not know what the files mean (parameters, optimizer state, configuration, sampler
 * state, rank parts are the trainer's business); it guarantees that a checkpoint it
 * accepts is exactly what was written:
 *
 *   - ckpt_begin() creates a temporary sibling "<root>/.step-NNNN.tmp.<pid>";
 *   - ckpt_add() writes each file there, fsyncs it and records its size and SHA-256;
 *   - ckpt_commit() writes MANIFEST.json last ({"format": CKPT_FORMAT, "step": N,
 *     "files": [{"name", "size", "sha256"}, ...]}), fsyncs it and the directory, then
 *     renames the directory to step-NNNN and fsyncs root. When step-NNNN already exists
 *     and is a valid checkpoint holding nothing but its listed files, the two directories
 *     are swapped in one renameat2(RENAME_EXCHANGE), the old one is renamed at once to
 *     ".step-NNNN.old.<pid>" and removed, so a valid checkpoint for that step exists at
 *     every instant. (File systems without RENAME_EXCHANGE fall back to moving the old
 *     one to ".step-NNNN.old.<pid>" first; a crash between the two renames then leaves
 *     it there.) When step-NNNN exists but is NOT such a checkpoint (no or a bad
 *     manifest, a damaged file, files the manifest does not list, not a directory), it
 *     is never deleted: it is renamed to "step-NNNN.kept.<pid>" (".<k>" appended if that
 *     name is taken) before the new one takes its name, and ckpt_commit_ex() says so.
 *   - ckpt_verify() accepts a directory only if MANIFEST.json is present and valid and
 *     every listed file has exactly the recorded size and digest.
 *
 * A crash at any point therefore leaves either the previous state or the new checkpoint,
 * plus possibly a temporary directory that is never accepted (it has no manifest, or it
 * is not named step-NNNN). ckpt_list() reports such leftovers; nothing deletes them
 * silently (except a writer reusing its own ".tmp.<pid>" or ".old.<pid>" name, which only
 * a dead process with the same pid can have left). Only a kill in the instant between
 * the exchange and the rename that follows it can leave a replaced (complete) copy under
 * the temporary name ".step-NNNN.tmp.<pid>".
 *
 * Checkpoint problems (no manifest, bad manifest, missing/truncated/altered files) are
 * ERR_DATA; failing system calls are ERR_IO. All functions name the directory/file.
 */
#ifndef DDPTOK_CKPT_H
#define DDPTOK_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "err.h"
#include "fsx.h"

#define CKPT_FORMAT "ddptok-checkpoint-1"
#define CKPT_MANIFEST "MANIFEST.json"
/* File names: 1..CKPT_NAME_MAX-1 characters from [A-Za-z0-9._-], not starting with '.',
 * not CKPT_MANIFEST. No subdirectories. */
#define CKPT_NAME_MAX 128

/* Which file ckpt_verify_scan digested (its device, inode and change time): a reader that
 * opens it again knows it has the same bytes unless these changed (ckpt_reopen). */
struct ckpt_file_id {
	uint64_t dev, ino;
	int64_t ctime_s, ctime_ns;
};

struct ckpt_file {
	char name[CKPT_NAME_MAX];
	uint64_t size;
	char sha256[DIGEST_HEX_SIZE];
	struct ckpt_file_id id; /* set for the files a scan reads (ckpt_verify_scan) */
};

/* --- writing --- */

struct ckpt_writer;

/* Starts checkpoint `step` under root (created if needed). A temporary directory of the
 * same name left by an earlier process with this pid is removed first. */
int ckpt_begin(const char *root, uint64_t step, struct ckpt_writer **out, struct err *e);
/* Writes one file (durably) and records it. Names must be unique within a checkpoint.
 * After a failure, call ckpt_abort(). */
int ckpt_add(struct ckpt_writer *w, const char *name, const void *data, size_t len,
	     struct err *e);
/* The same for a file given as n pieces (a header and its array, say), written and
 * digested one after the other without joining them in memory. */
int ckpt_add_parts(struct ckpt_writer *w, const char *name, const struct fsx_part *parts,
		   int n, struct err *e);
/* One file written piece by piece (a vector fetched from the devices in chunks, say),
 * durably and digested as it goes, so that it never needs to be whole in memory:
 *     ckpt_file_begin(w, name, &fw, e);  ckpt_file_write(&fw, ...)*;  ckpt_file_end(&fw, e);
 * A failed call has already released the file (ckpt_abort(w) removes what was written);
 * ckpt_file_abort releases one the caller gives up on. */
struct ckpt_file_writer {
	struct ckpt_writer *w;
	struct fsx_writer file;
	struct digest *digest;
	uint64_t size;
	char name[CKPT_NAME_MAX];
};
int ckpt_file_begin(struct ckpt_writer *w, const char *name, struct ckpt_file_writer *fw,
		    struct err *e);
int ckpt_file_write(struct ckpt_file_writer *fw, const void *data, size_t len, struct err *e);
int ckpt_file_end(struct ckpt_file_writer *fw, struct err *e);
void ckpt_file_abort(struct ckpt_file_writer *fw);
/* What ckpt_commit_ex did. */
struct ckpt_commit_info {
	char path[FSX_PATH_MAX];     /* the published step-NNNN */
	char kept[FSX_PATH_MAX];     /* "" or where a step-NNNN that was in the way and was not
				      * a valid checkpoint now is (step-NNNN.kept.<pid>) */
	char kept_why[1024];         /* why it was not replaceable (ckpt_verify's message, or
				      * the files its manifest does not list) */
	char leftover[FSX_PATH_MAX]; /* "" or a replaced valid copy that could not be removed */
};

/* Publishes the checkpoint. Always consumes w: on failure the temporary directory is
 * removed and the previous step-NNNN (if any) is still in place. When a step is
 * rewritten, a replaced valid copy is deleted after the swap (if that deletion fails it
 * stays, info->leftover names it, ckpt_list reports it, and the commit still succeeds);
 * a step-NNNN that was not a valid checkpoint is kept aside and named in info->kept.
 * info may be NULL. */
int ckpt_commit_ex(struct ckpt_writer *w, struct ckpt_commit_info *info, struct err *e);
/* ckpt_commit_ex that returns only the directory (path_out, cap bytes; may be NULL). */
int ckpt_commit(struct ckpt_writer *w, char *path_out, size_t cap, struct err *e);
/* 1 when dir is a valid checkpoint holding nothing but the files its manifest lists (all
 * written by the store: it may be deleted); else 0 with the reason in why. */
int ckpt_removable(const char *dir, char *why, size_t cap);
/* Discards an unfinished checkpoint (removes its temporary directory, frees w). NULL ok. */
void ckpt_abort(struct ckpt_writer *w);

/* --- checking and reading --- */

enum ckpt_problem {
	CKPT_OK = 0,
	CKPT_NO_DIR,          /* the directory does not exist or is not a directory */
	CKPT_NO_MANIFEST,     /* incomplete checkpoint (MANIFEST.json absent) */
	CKPT_BAD_MANIFEST,    /* MANIFEST.json unreadable, not JSON, or not our format */
	CKPT_STEP_MISMATCH,   /* manifest step differs from the step-NNNN directory name */
	CKPT_MISSING_FILE,    /* a listed file does not exist (or is not a regular file) */
	CKPT_SIZE_MISMATCH,   /* a listed file has another size (truncated or grown) */
	CKPT_DIGEST_MISMATCH, /* a listed file has the right size but other content */
	CKPT_NOT_LISTED,      /* ckpt_read: the name is not in the manifest */
	CKPT_IS_ROOT,         /* no manifest, but the directory holds checkpoints (step-NNNN or
			       * leftovers of writes): a root, not a checkpoint; the message
			       * names its newest valid step-NNNN */
};

const char *ckpt_problem_name(enum ckpt_problem p);

struct ckpt_report {
	enum ckpt_problem problem; /* CKPT_OK when the checkpoint is valid */
	uint64_t step;             /* from the manifest */
	struct ckpt_file *files;   /* the manifest's entries, in manifest order */
	size_t nfiles;
	uint64_t total_bytes;      /* sum of the listed sizes */
	char **extra;              /* files present but not in the manifest (sorted): */
	size_t nextra;             /* allowed, reported as the warning below */
	char warning[512];         /* "" or a line describing the extra files */
};

/* Verifies the checkpoint directory `dir` (it need not be named step-NNNN; if it is, the
 * manifest's step must match). r may be NULL; if not, it is always initialized (free it
 * with ckpt_report_free whatever the result) and r->problem classifies a failure. */
int ckpt_verify(const char *dir, struct ckpt_report *r, struct err *e);
void ckpt_report_free(struct ckpt_report *r);

/* ckpt_verify that shows its caller the content of the files it picks as it digests them,
 * so that a large file is read and digested once: for each listed file `wants` accepts,
 * `read` is called with its manifest entry (its id set) and pulls its bytes in order
 * through ckpt_stream_read; what it leaves unread is digested after it returns. read's
 * error (reading, memory) stops the verification; what it makes of the content is its
 * own, and counts only if the verification succeeds. */
struct ckpt_stream;
struct ckpt_scan {
	int (*wants)(void *arg, const char *name);
	int (*read)(void *arg, const struct ckpt_file *f, struct ckpt_stream *s, struct err *e);
	void *arg;
};
int ckpt_verify_scan(const char *dir, struct ckpt_report *r, const struct ckpt_scan *scan,
		     struct err *e);
/* The next bytes of the file, up to len (fewer only at its end): *got of them. */
int ckpt_stream_read(struct ckpt_stream *s, void *buf, size_t len, size_t *got, struct err *e);

/* A file ckpt_verify_scan read, opened again to be read without a second digest: refused
 * (ERR_DATA) unless it is the very file verified (f->id) and unchanged since. */
struct ckpt_reread {
	int fd;
	char dir[FSX_PATH_MAX];
	struct ckpt_file file;
};
int ckpt_reopen(const char *dir, const struct ckpt_file *f, struct ckpt_reread *r,
		struct err *e);
/* Exactly len bytes at offset at (a short file is one that changed: ERR_DATA). */
int ckpt_reread_at(struct ckpt_reread *r, void *buf, size_t len, uint64_t at, struct err *e);
/* Closes it: ERR_DATA if the file changed while it was read (nothing read from it counts). */
int ckpt_reread_end(struct ckpt_reread *r, struct err *e);

/* Reads file `name` of the checkpoint `dir` into a malloc'd, NUL-terminated buffer, after
 * checking it against the manifest (listed, same size, same SHA-256). Other files are
 * not checked: call ckpt_verify() first to accept a checkpoint as a whole. */
int ckpt_read(const char *dir, const char *name, char **buf, size_t *len, struct err *e);

/* --- enumerating --- */

enum ckpt_kind {
	CKPT_STEP,    /* step-NNNN: published (ckpt_verify tells whether it is valid) */
	CKPT_PARTIAL, /* .step-NNNN.tmp.<pid>: being written, or left by a crash */
	CKPT_TRASH,   /* .step-NNNN.old.<pid>: an older copy that was being replaced */
	CKPT_KEPT,    /* step-NNNN.kept.<pid>[.<k>]: a step-NNNN that was not a valid checkpoint
		       * when its step was written again, kept aside (never deleted by the store) */
};

struct ckpt_entry {
	enum ckpt_kind kind;
	uint64_t step;
	long pid;                  /* writer's pid for PARTIAL/TRASH/KEPT, 0 for STEP */
	char name[256];            /* entry name inside root */
	char path[FSX_PATH_MAX];   /* root/name */
};

struct ckpt_listing {
	struct ckpt_entry *v;
	size_t n;
};

/* Lists the checkpoint-related entries of root sorted by step, then kind (STEP first),
 * then name. Other entries are ignored; a missing root gives an empty listing. Names
 * must be canonical (exactly what ckpt_step_name produces for their step). */
int ckpt_list(const char *root, struct ckpt_listing *out, struct err *e);
void ckpt_listing_free(struct ckpt_listing *l);

/* The newest step-NNNN under root that passes ckpt_verify: its path (cap bytes) and step
 * (may be NULL). *skipped (may be NULL) counts newer step directories that failed. None
 * valid: ERR_DATA naming root (and the newest failure's reason, if any). */
int ckpt_latest_valid(const char *root, char *path_out, size_t cap, uint64_t *step_out,
		      int *skipped, struct err *e);

/* "step-NNNN" for a step (out needs at least 32 bytes). */
void ckpt_step_name(uint64_t step, char *out, size_t cap);
/* Parses a canonical "step-NNNN"; returns 1 and sets *step, or 0. */
int ckpt_parse_step_name(const char *name, uint64_t *step);

#endif
