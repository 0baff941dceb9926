/*
 * procs: agreement across processes between windows (see procs.h).
 */
#include "procs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddptok_config.h"
#include "fsx.h"
#include "world.h"

/* "1, 2 or 4": the process counts that share world ranks evenly, into buf. */
static void divisors(int world, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = '\0';
	for (int d = 1; d <= world && len < cap; d++)
		if (world % d == 0) /* the last divisor is world itself */
			len += (size_t)snprintf(buf + len, cap - len, "%s%d",
						!len ? "" : d == world ? " or " : ", ", d);
}

int procs_share(int world, int local_key, int procs, int *local, struct err *e)
{
	char counts[128];
	if (local_key > 0 && local_key * procs == world) {
		*local = local_key;
		return ERR_OK;
	}
	if (local_key > 0 && world % local_key == 0)
		return ERR(e, ERR_CONFIG, "%d processes x devices.local = %d ranks each make %d "
			   "ranks, and devices.world = %d: start %d processes, or set "
			   "devices.world = %d", procs, local_key, procs * local_key, world,
			   world / local_key, procs * local_key);
	if (local_key > 0)
		return ERR(e, ERR_CONFIG, "%d processes x devices.local = %d ranks each make %d "
			   "ranks, and devices.world = %d (not a multiple of devices.local): set "
			   "devices.world = %d", procs, local_key, procs * local_key, world,
			   procs * local_key);
	if (world % procs == 0) {
		*local = world / procs;
		return ERR_OK;
	}
	/* devices.local = 0 shares the ranks evenly: the mismatch is the process count */
	divisors(world, counts, sizeof counts);
	return ERR(e, ERR_CONFIG, "devices.world = %d ranks cannot be shared evenly by %d "
		   "processes%s: start %s process%s, or set devices.world to a multiple of %d",
		   world, procs, world < procs ? " (fewer ranks than processes)" : "", counts,
		   world == 1 ? "" : "es", procs);
}

int procs_local_ranks(const struct settings *s, int *local, int *first, struct err *e)
{
	const struct world *wd = world_get();
	ERR_TRY(procs_share(s->world, s->local, wd->procs, local, e));
	*first = wd->proc * *local;
	return ERR_OK;
}

int procs_check_data_lock(const char *lock, double timeout_s, struct err *e)
{
	const struct world *wd = world_get();
	char locks[WORLD_MAX_PROCS][65], mine[65];
	snprintf(mine, sizeof mine, "%s", lock);
	ERR_TRY(world_allgather(mine, sizeof mine, locks, timeout_s,
				"the comparison of data locks", e));
	for (int p = 1; p < wd->procs; p++)
		if (memcmp(locks[p], locks[0], sizeof mine) != 0) {
			world_failed_together(); /* every process compared the same locks */
			return ERR(e, ERR_DATA, "the data differ between processes: %s has data "
				   "lock %.12s..., %s has %.12s... (every host must hold the same "
				   "data and [data] settings)", world_proc_name(p), locks[p],
				   world_proc_name(0), locks[0]);
		}
	return ERR_OK;
}

int procs_agree_stop(int *reason, double timeout_s, struct err *e)
{
	return world_max_int(reason, timeout_s, "the agreement on stopping", e);
}

/* what process 0 tells the others of something it did alone */
struct proc0_result {
	int rc, code;
	char msg[sizeof(((struct err *)0)->msg)];
};

/* Process 0's result `rc` (e's message when it failed) on every process, exchanged as
 * `what`: ERR_OK, or the failure on every process (process 0 keeps its own error, the
 * others get "<process 0> <doing>: <message>"), which they all met together. */
static int result_of_process0(int rc, const char *what, const char *doing, double timeout_s,
			      struct err *e)
{
	const struct world *wd = world_get();
	static struct proc0_result r; /* one thread (the main one) at a time; large */
	memset(&r, 0, sizeof r);
	if (wd->proc == 0) {
		r.rc = rc;
		r.code = rc ? e->code : 0;
		snprintf(r.msg, sizeof r.msg, "%s", rc ? e->msg : "");
	}
	ERR_TRY(world_bcast(&r, sizeof r, 0, timeout_s, what, e));
	if (!r.rc)
		return ERR_OK;
	world_failed_together(); /* every process got process 0's result */
	if (wd->proc == 0)
		return rc;
	return ERR(e, r.code ? r.code : r.rc, "%s %s: %s", world_proc_name(0), doing, r.msg);
}

/* Process 0's result (as result_of_process0), then, when it succeeded, its
 * buf[0..bytes) on every process; rc itself in a world of one. */
static int send_from_process0(int rc, void *buf, size_t bytes, const char *what,
			      const char *doing, double timeout_s, struct err *e)
{
	if (world_get()->procs == 1)
		return rc;
	ERR_TRY(result_of_process0(rc, what, doing, timeout_s, e));
	return world_bcast(buf, bytes, 0, timeout_s, what, e);
}

int procs_checkpoint_result(int rc, char *path, size_t cap, double timeout_s, struct err *e)
{
	static char sent[FSX_PATH_MAX]; /* the main thread's; large */
	snprintf(sent, sizeof sent, "%s", path);
	ERR_TRY(send_from_process0(rc, sent, sizeof sent, "the checkpoint's commit result",
				   "could not write the checkpoint", timeout_s, e));
	snprintf(path, cap, "%s", sent);
	return ERR_OK;
}

int procs_from_process0(int rc, void *buf, size_t bytes, const char *what, double timeout_s,
			struct err *e)
{
	char doing[160];
	snprintf(doing, sizeof doing, "failed on %s", what);
	return send_from_process0(rc, buf, bytes, what, doing, timeout_s, e);
}

/* what process 0 sends first when sharing a checkpoint */
struct share_header {
	int rc, code;
	char msg[sizeof(((struct err *)0)->msg)];
	uint64_t bytes; /* of the packed files that follow */
};

/* dir's files packed as (name length u32, name, size u64, content) each, malloc'd */
static int pack_files(const char *dir, char **out, size_t *len, struct err *e)
{
	char **names = NULL, path[FSX_PATH_MAX];
	size_t count = 0, used = 0;
	char *buf = NULL;
	int rc = fsx_list_dir(dir, &names, &count, e);
	for (size_t i = 0; i < count && rc == ERR_OK; i++) {
		char *data = NULL;
		size_t size = 0;
		if ((rc = fsx_join(path, sizeof path, dir, names[i], e)) ||
		    (rc = fsx_read_all(path, &data, &size, e)))
			break;
		uint32_t nlen = (uint32_t)strlen(names[i]);
		uint64_t size64 = size;
		char *grown = realloc(buf, used + 4 + nlen + 8 + size);
		if (!grown) {
			free(data);
			rc = ERR(e, ERR_NOMEM, "out of memory packing %s", path);
			break;
		}
		buf = grown;
		memcpy(buf + used, &nlen, 4);
		memcpy(buf + used + 4, names[i], nlen);
		memcpy(buf + used + 4 + nlen, &size64, 8);
		memcpy(buf + used + 12 + nlen, data, size);
		used += 12 + nlen + size;
		free(data);
	}
	fsx_free_names(names, count);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = used;
	return ERR_OK;
}

/* Writes the packed files into dir (created anew). */
static int unpack_files(const char *dir, const char *buf, size_t len, struct err *e)
{
	char name[256], path[FSX_PATH_MAX];
	ERR_TRY(fsx_remove_tree(dir, e));
	ERR_TRY(fsx_mkdirs(dir, e));
	for (size_t at = 0; at < len;) {
		uint32_t nlen;
		uint64_t size;
		memcpy(&nlen, buf + at, 4);
		if (nlen >= sizeof name || at + 12 + nlen > len)
			return ERR(e, ERR_DATA, "%s: a damaged file list was received", dir);
		memcpy(name, buf + at + 4, nlen);
		name[nlen] = '\0';
		memcpy(&size, buf + at + 4 + nlen, 8);
		if (size > len - at - 12 - nlen || strchr(name, '/'))
			return ERR(e, ERR_DATA, "%s: a damaged file list was received", dir);
		ERR_TRY(fsx_join(path, sizeof path, dir, name, e));
		ERR_TRY(fsx_write_durable(path, buf + at + 12 + nlen, (size_t)size, e));
		at += 12 + nlen + (size_t)size;
	}
	return ERR_OK;
}

int procs_share_checkpoint(const char *dir, const char *own_root, const char *purpose,
			   char *local, size_t cap, double timeout_s, struct err *e)
{
	const struct world *wd = world_get();
	static struct share_header h; /* large; the main thread only */
	char *buf = NULL, into[FSX_PATH_MAX], what[64];
	size_t len = 0;
	snprintf(local, cap, "%s", dir);
	if (wd->procs == 1)
		return ERR_OK;
	memset(&h, 0, sizeof h);
	if (wd->proc == 0 && (h.rc = pack_files(dir, &buf, &len, e)) != ERR_OK) {
		h.code = e->code;
		snprintf(h.msg, sizeof h.msg, "%s", e->msg);
	}
	h.bytes = len;
	snprintf(what, sizeof what, "the checkpoint to %s", purpose);
	int rc = world_bcast(&h, sizeof h, 0, timeout_s, what, e);
	if (rc == ERR_OK && h.rc)
		rc = wd->proc == 0 ? h.rc : ERR(e, h.code, "%s cannot read %s: %s",
						world_proc_name(0), what, h.msg);
	if (rc == ERR_OK && wd->proc > 0 && !(buf = malloc(h.bytes ? h.bytes : 1)))
		rc = ERR(e, ERR_NOMEM, "out of memory for %s", what);
	if (rc == ERR_OK)
		rc = world_bcast(buf, h.bytes, 0, timeout_s, what, e);
	if (rc == ERR_OK && wd->proc > 0) {
		char name[256];
		snprintf(name, sizeof name, "%s", dir);
		for (size_t n = strlen(name); n > 1 && name[n - 1] == '/'; n--)
			name[n - 1] = '\0';
		const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
		if ((rc = fsx_join(into, sizeof into, own_root, purpose, e)) == ERR_OK &&
		    (rc = fsx_join(local, cap, into, base, e)) == ERR_OK)
			rc = unpack_files(local, buf, h.bytes, e);
	}
	free(buf);
	return rc;
}

void procs_report(FILE *out, const struct settings *s)
{
	const struct world *wd = world_get();
	int local, first;
	struct err e;
	err_clear(&e);
	fprintf(out, "mpi: %s\n", DDPTOK_HAVE_MPI ? (wd->mpi ? wd->library :
		"built; not started by mpirun or srun") : "not built");
	if (procs_local_ranks(s, &local, &first, &e) != ERR_OK) {
		fprintf(out, "processes: P = %d: %s\n", wd->procs, e.msg);
		return;
	}
	fprintf(out, "processes: P = %d x L = %d = W = %d ranks; this is process %d, ranks "
		"%d..%d; hosts:", wd->procs, local, s->world, wd->proc, first, first + local - 1);
	for (int p = 0; p < wd->procs; p++)
		fprintf(out, "%s %s", p ? "," : "", wd->hosts[p]);
	fprintf(out, "\n");
}
