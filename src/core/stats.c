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

__attribute__((destructor)) static void print_stats(void)
{
	struct uroce_dev *dev;
	int i;

	if (!uroce_config()->stats)
		return;
	dev = uroce_dev_get();
	if (!dev || !dev->been_up)
		return;
	fprintf(stderr, "uroce-stats:");
	for (i = 0; i < UROCE_CNT_NUM; i++)
		fprintf(stderr, " %s=%" PRIu64, uroce_counter_name[i],
			atomic_load(&dev->stats.cnt[i]));
	fprintf(stderr, "\n");
}
