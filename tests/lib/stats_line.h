/* SPDX-License-Identifier: MIT */
/*
 * A counter from the `uroce-stats:` line that UROCE_STATS=1 makes a
 * process print at exit (docs/observability.md), for the C test programs
 * that check a child's counters from its stderr saved in a file.
 */
#ifndef UROCE_TEST_STATS_LINE_H
#define UROCE_TEST_STATS_LINE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* counter name of the uroce-stats line in file f; -1 if none */
static inline long long uroce_test_stat(const char *f, const char *name)
{
	char line[8192], key[64];
	FILE *fp = fopen(f, "r");
	long long v = -1;

	snprintf(key, sizeof(key), " %s=", name);
	while (fp && fgets(line, sizeof(line), fp)) {
		char *p = strstr(line, key);

		if (!strncmp(line, "uroce-stats:", 12) && p)
			v = atoll(p + strlen(key));
	}
	if (fp)
		fclose(fp);
	return v;
}

#endif
