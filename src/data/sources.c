/*
 * sources: the names of settings.h's DATA_SOURCES, each file source's reader, and the
 * dispatch through them. This is the only file that knows every reader; the readers know only
 * data.h, the rules they share.
 */
#include "sources.h"

#include "data_jsonl.h"
#include "data_llmc.h"
#include "data_megatron.h"
#include "data_npy.h"
#include "data_text.h"

#define DATA_SOURCE_NAME(id, name) [id] = name,
static const char *const source_names[DATA_SOURCE_COUNT] = { DATA_SOURCES(DATA_SOURCE_NAME) };

/* The reader of each file source, by its enum value (the synthetic one has none). */
static const data_reader_fn source_readers[DATA_SOURCE_COUNT] = {
	[DATA_NPY] = data_read_npy,
	[DATA_JSONL] = data_read_jsonl,
	[DATA_MEGATRON] = data_read_megatron,
	[DATA_LLMC] = data_read_llmc,
	[DATA_TEXT] = data_read_text,
};

const char *data_source_name(int source)
{
	return source >= 0 && source < DATA_SOURCE_COUNT ? source_names[source] : "invalid";
}

int data_source_has_reader(int source)
{
	return source >= 0 && source < DATA_SOURCE_COUNT && source_readers[source] != NULL;
}

int data_read(struct data_set *d, int source, const char *path, struct err *e)
{
	data_reader_fn read = data_source_has_reader(source) ? source_readers[source] : NULL;
	if (!read)
		return ERR(e, ERR_CONFIG, "data: source %s has no files to read",
			   data_source_name(source));
	int rc = read(d, path, e);
	return rc ? rc : data_finish(d, path, e);
}
