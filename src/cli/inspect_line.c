/*
 * inspect_line: how the inspect prompt reads its lines. On a terminal a line is edited
 * with history and completion (libedit, where the build has it); otherwise it is read
 * plainly, byte by byte, so that a session can be scripted. Either way the wait for input
 * also ends on a signal held by cli_signals (its wake pipe), whichever thread took it: a
 * prompt that waits cannot poll a flag.
 */
#include "inspect_line.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddptok_config.h"
#include "signals.h"

#if DDPTOK_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#if DDPTOK_HAVE_LIBEDIT
static const char *(*complete_word)(int i); /* the words a line may start with */

static char *complete_gen(const char *text, int state)
{
	static int idx;
	size_t len = strlen(text);
	if (!state)
		idx = 0;
	for (const char *n; (n = complete_word(idx)) != NULL;) {
		idx++;
		if (strncmp(n, text, len) == 0)
			return strdup(n);
	}
	return NULL;
}

static char **complete(const char *text, int start, int end)
{
	(void)end;
	if (start != 0)
		return NULL;
	return rl_completion_matches(text, complete_gen);
}
#endif

/* Waits until standard input has something (or its end) or a signal arrives, whichever
 * thread took it: READ_LINE (input ready), READ_END (a terminal hung up), READ_SIGNAL, or
 * READ_ERROR (errno kept). */
static int wait_input(int edit)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
				      {.fd = cli_signal_wake_fd(), .events = POLLIN}};
		if (cli_signal_received())
			return READ_SIGNAL;
		int n = poll(p, 2, -1);
		if (n < 0 && errno != EINTR)
			return READ_ERROR;
		if (cli_signal_received())
			return READ_SIGNAL;
		if (n <= 0 || (p[1].revents && !p[0].revents))
			continue; /* interrupted by another signal, or a byte of an earlier one */
		/* a hung-up terminal stays readable for ever: libedit would read nothing */
		if (edit && (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)))
			return READ_END;
		return READ_LINE;
	}
}

/* Scripted: the next byte of standard input into *ch; READ_LINE, READ_END, READ_SIGNAL
 * (before the byte) or READ_ERROR. */
static int next_byte(struct inspect_reader *rd, int *ch)
{
	if (rd->in_pos == rd->in_len) {
		int w = wait_input(0);
		if (w != READ_LINE)
			return w;
		ssize_t n = read(STDIN_FILENO, rd->in, sizeof rd->in);
		if (n < 0)
			return READ_ERROR;
		if (n == 0)
			return READ_END;
		rd->in_pos = 0;
		rd->in_len = (size_t)n;
	}
	*ch = (unsigned char)rd->in[rd->in_pos++];
	return READ_LINE;
}

#if DDPTOK_HAVE_LIBEDIT
static char *edited_line; /* what libedit's callback handed over */
static int edited;        /* a line (or the end of input: edited_line NULL) came */

static void on_edited_line(char *line)
{
	edited_line = line;
	edited = 1;
}

/* On a terminal: one line through libedit's callback interface, so that the wait for
 * a key can end on a signal too; installing the handler starts an empty line and shows
 * the prompt, removing it gives the terminal back. */
static int read_edited(struct inspect_reader *rd, char **line, int *too_long)
{
	int got = READ_LINE;
	edited = 0;
	edited_line = NULL;
	rl_callback_handler_install(INSPECT_PROMPT, on_edited_line);
	while (!edited && (got = wait_input(1)) == READ_LINE)
		rl_callback_read_char();
	rl_callback_handler_remove();
	if (!edited)
		return got;
	if (!edited_line)
		return READ_END;
	if (*edited_line)
		add_history(edited_line);
	rd->owned = edited_line;
	*line = edited_line;
	if (strlen(edited_line) > INSPECT_LINE_MAX) /* the same limit as a scripted line */
		*too_long = 1;
	return READ_LINE;
}
#endif

int inspect_read_line(struct inspect_reader *rd, char **line, int *too_long)
{
	*too_long = 0;
	free(rd->owned);
	rd->owned = NULL;
#if DDPTOK_HAVE_LIBEDIT
	if (rd->edit)
		return read_edited(rd, line, too_long);
#endif
	fputs(INSPECT_PROMPT, stdout);
	fflush(stdout);
	/* one line, byte by byte: a NUL inside it or a line past the buffer is reported as
	 * such, and the reading always ends at the newline (the next line stays whole) */
	size_t len = 0;
	int ch = 0, any = 0, got;
	while ((got = next_byte(rd, &ch)) == READ_LINE && ch != '\n') {
		any = 1;
		if (ch == '\0')
			*too_long = *too_long ? *too_long : 2;
		else if (len + 1 < sizeof rd->buf)
			rd->buf[len++] = (char)ch;
		else
			*too_long = 1;
	}
	if (got == READ_ERROR || got == READ_SIGNAL || (got == READ_END && !any))
		return got;
	rd->buf[len] = '\0';
	*line = rd->buf;
	return READ_LINE;
}

int inspect_split_args(char *line, char **argv, int max)
{
	int argc = 0;
	char *save = NULL;
	for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
		if (argc == max)
			return -1;
		argv[argc++] = t;
	}
	return argc;
}

void inspect_reader_open(struct inspect_reader *rd, int terminal, const char *(*word)(int i))
{
	memset(rd, 0, sizeof *rd);
#if DDPTOK_HAVE_LIBEDIT
	rd->edit = terminal;
	if (rd->edit) {
		rl_readline_name = "ddptok";
		/* the session's own handlers (cli_signals) stay in place while a line is
		 * edited: libedit would re-raise SIGINT to the whole process group */
		rl_catch_signals = 0;
		complete_word = word;
		rl_attempted_completion_function = complete;
		using_history();
	}
#else
	(void)terminal;
	(void)word;
#endif
}

void inspect_reader_close(struct inspect_reader *rd)
{
	free(rd->owned);
	rd->owned = NULL;
}
