/*
 * memstat: resident memory from /proc/self/status (see memstat.h).
 */
#include "memstat.h"

#include <stdio.h>
#include <string.h>

void mem_usage_read(struct mem_usage *m)
{
	static const struct {
		const char *key;
		size_t at;
	} fields[] = {
		{"VmRSS:", offsetof(struct mem_usage, resident)},
		{"RssAnon:", offsetof(struct mem_usage, anonymous)},
		{"RssFile:", offsetof(struct mem_usage, file)},
		{"RssShmem:", offsetof(struct mem_usage, file)},
		{"VmHWM:", offsetof(struct mem_usage, peak)},
	};
	char line[256];
	memset(m, 0, sizeof *m);
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		long long kb;
		for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
			size_t n = strlen(fields[i].key);
			if (strncmp(line, fields[i].key, n) || sscanf(line + n, "%lld", &kb) != 1)
				continue;
			*(int64_t *)((char *)m + fields[i].at) += (int64_t)kb * 1024;
			m->known = 1;
		}
	}
	fclose(f);
}

void mem_usage_format(const struct mem_usage *m, char *out, size_t cap)
{
	const double mib = 1024.0 * 1024.0;
	if (!m->known) {
		snprintf(out, cap, "resident memory unknown (no /proc/self/status)");
		return;
	}
	snprintf(out, cap, "resident %.1f MiB (anonymous %.1f MiB, file pages %.1f MiB; peak "
		 "%.1f MiB)", (double)m->resident / mib, (double)m->anonymous / mib,
		 (double)m->file / mib, (double)m->peak / mib);
}
