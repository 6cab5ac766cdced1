// SPDX-License-Identifier: MIT
/* Counter names, and the UROCE_STATS=1 summary printed at exit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

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
	char line[8192];
	size_t n;
	int i;

	if (!uroce_config()->stats)
		return;
	dev = uroce_dev_get();
	if (!dev || !dev->been_up)
		return;
	n = (size_t)snprintf(line, sizeof(line), "uroce-stats:");
	for (i = 0; i < UROCE_CNT_NUM && n < sizeof(line); i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%" PRIu64,
				      uroce_counter_name[i],
				      atomic_load(&dev->stats.cnt[i]));
	if (n < sizeof(line) - 1)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "\n");
	fwrite(line, 1, n < sizeof(line) ? n : sizeof(line) - 1, stderr);
}
