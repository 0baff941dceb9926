/*
 * fault: the failures tests inject into the engine (see fault.h).
 */
#include "fault.h"

#include <time.h>
#include <unistd.h>

void fault_injection_off(struct fault_injection *f)
{
	f->inject_rank = -1;
	f->inject_window = -1;
	f->inject_swap_rank = -1;
	f->hang_rank = -1;
	f->hang_window = -1;
	f->hang_seconds = -1.0;
}

void fault_hang(double seconds)
{
	struct timespec left = {0, 0};
	if (seconds >= 0) {
		left.tv_sec = (time_t)seconds;
		left.tv_nsec = (long)((seconds - (double)left.tv_sec) * 1e9);
	}
	for (;;) {
		if (seconds < 0) {
			sleep(3600);
			continue;
		}
		if (nanosleep(&left, &left) == 0)
			return;
	}
}
