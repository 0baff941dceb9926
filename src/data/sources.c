/*
 * sources: the table of sources.h expanded into names and readers, and the dispatch
 * through it. This is the only file that knows every reader; the readers know only
 * data.h, the rules they share.
 */
#include "sources.h"

#include "data_jsonl.h"
#include "data_llmc.h"
#include "data_megatron.h"
#include "data_npy.h"

struct data_source_row {
	const char *name;
	data_reader_fn read;
};

#define DATA_SOURCE_ROW(id, name, read) [id] = { name, read },
static const struct data_source_row source_table[DATA_SOURCE_COUNT] = {
	DATA_SOURCES(DATA_SOURCE_ROW)
};

const char *data_source_name(int source)
{
	return source >= 0 && source < DATA_SOURCE_COUNT ? source_table[source].name : "invalid";
}

int data_read(struct data_set *d, int source, const char *path, struct err *e)
{
	data_reader_fn read = source >= 0 && source < DATA_SOURCE_COUNT ? source_table[source].read
									 : NULL;
	if (!read)
		return ERR(e, ERR_CONFIG, "data: source %s has no files to read",
			   data_source_name(source));
	int rc = read(d, path, e);
	return rc ? rc : data_finish(d, path, e);
}
