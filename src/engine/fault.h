/*
 * fault: the failures a test may ask the engine to cause, so that the code which must
 * catch them is shown to catch them: a rank that fails in a window, a rank that adds two
 * of its shards in each other's place in exact mode's tree, and a rank that hangs inside
 * a microbatch. They travel as one value from the command line through the env to the
 * engine; nothing is injected unless a test asks.
 */
#ifndef DDPTOK_FAULT_H
#define DDPTOK_FAULT_H

#include <stdint.h>

struct fault_injection {
	/* rank `inject_rank` fails at window index `inject_window` (-1: off) */
	int inject_rank;
	int64_t inject_window;
	/* exact mode: rank `inject_swap_rank` adds its second and third shard in each
	 * other's place in the tree (-1: off), so that the bitwise check has something to
	 * catch */
	int inject_swap_rank;
	/* rank `hang_rank` stops inside the first microbatch of window index `hang_window`
	 * for `hang_seconds` (< 0: for good), as in a call that never returns; -1: off */
	int hang_rank;
	int64_t hang_window;
	double hang_seconds;
};

/* Nothing injected. */
void fault_injection_off(struct fault_injection *f);

/* The hang itself: the calling thread sleeps `seconds` (< 0: for good) through any
 * signal or abort, as inside a call that never returns (or returns late), which only the
 * pool's watchdog can deal with. */
void fault_hang(double seconds);

#endif
