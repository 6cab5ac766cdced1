// SPDX-License-Identifier: MIT
/* Counter names, and the UROCE_STATS=1 summary printed at exit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dev.h"

const char *const uroce_counter_name[UROCE_CNT_NUM] = {
#define UROCE_CNT_NAME(id, name) [UROCE_CNT_##id] = name,
	UROCE_COUNTERS(UROCE_CNT_NAME)
#undef UROCE_CNT_NAME
};

/*
 * One line, written at once: stderr is unbuffered, and a write per
 * counter let the lines of two processes sharing a pipe (mpirun's ranks)
 * interleave mid-line.  A pipe keeps one write of up to PIPE_BUF whole.
 */
__attribute__((destructor)) static void print_stats(void)
{
	struct uroce_dev *dev;
	char line[4096];
	size_t len;
	int i;

	if (!uroce_config()->stats)
		return;
	dev = uroce_dev_get();
	if (!dev || !dev->been_up)
		return;
	/* one write (within PIPE_BUF): processes that exit together, as MPI
	 * ranks do, share one stderr pipe and must not interleave */
	len = (size_t)snprintf(line, sizeof(line), "uroce-stats:");
	for (i = 0; i < UROCE_CNT_NUM && len < sizeof(line); i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					" %s=%" PRIu64, uroce_counter_name[i],
					atomic_load(&dev->stats.cnt[i]));
	if (len >= sizeof(line) - 1)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	if (write(STDERR_FILENO, line, len) < 0)
		return;
}
