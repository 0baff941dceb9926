/*
 * inspect_line: the inspect prompt's line reader: edited on a terminal (libedit), plain
 * when scripted, and a wait for input that a signal ends.
 */
#ifndef DDPTOK_INSPECT_LINE_H
#define DDPTOK_INSPECT_LINE_H

#include <stddef.h>

#define INSPECT_PROMPT "ddptok> "
#define INSPECT_LINE_MAX 4095 /* characters in a line, its newline not counted */

struct inspect_reader {
	int edit; /* libedit on a terminal */
	char buf[INSPECT_LINE_MAX + 1];
	char *owned;
	char in[4096]; /* scripted: what was read from stdin and not yet taken */
	size_t in_pos, in_len;
};

enum { READ_ERROR = -1, READ_END = 0, READ_LINE = 1, READ_SIGNAL = 2 };

/* Reads from standard input, edited when `terminal` (and the build has libedit): then
 * word(0), word(1), ... up to a NULL are the completions of a line's first word. */
void inspect_reader_open(struct inspect_reader *rd, int terminal, const char *(*word)(int i));
/* Frees the last line read. */
void inspect_reader_close(struct inspect_reader *rd);
/* One line into *line (valid until the next call): READ_LINE, READ_END, READ_SIGNAL (what
 * was typed of the line is dropped) or READ_ERROR (errno kept). *too_long: 1 when the line
 * was longer than INSPECT_LINE_MAX, 2 when it held a NUL byte (it is to be ignored). */
int inspect_read_line(struct inspect_reader *rd, char **line, int *too_long);
/* Splits line in place into at most max words (argv); -1 when it holds more. */
int inspect_split_args(char *line, char **argv, int max);

#endif
