// SPDX-License-Identifier: MIT
/* The clock every layer reads: CLOCK_MONOTONIC in nanoseconds. */
#include <time.h>

#include "core/core.h"

uint64_t uroce_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
