// SPDX-License-Identifier: MIT
/* The clock every layer reads: CLOCK_MONOTONIC in nanoseconds. */
#include <stdatomic.h>
#include <time.h>

#include "core/core.h"

/* what uroce_clock_set gave: engine tests drive time themselves */
static _Atomic uint64_t fake_now_ns;

void uroce_clock_set(uint64_t ns)
{
	atomic_store_explicit(&fake_now_ns, ns, memory_order_relaxed);
}

uint64_t uroce_timespec_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* the clock id's time in ns, or the fake clock when it is set */
static uint64_t clock_ns(clockid_t id)
{
	uint64_t fake = atomic_load_explicit(&fake_now_ns, memory_order_relaxed);
	struct timespec ts;

	if (fake)
		return fake;
	clock_gettime(id, &ts);
	return uroce_timespec_ns(&ts);
}

uint64_t uroce_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* CLOCK_REALTIME: what the kernel's socket timestamps are on */
uint64_t uroce_real_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

/* CLOCK_MONOTONIC_COARSE: a few ms coarse, and a plain read of the
 * vDSO's page, where CLOCK_MONOTONIC reads the TSC and scales it (under
 * a hypervisor some tens of ns: ib_write_bw at IB MTU 1024 on the
 * same-host path spent 6 % of its sender asking for the time once per
 * packet for a check made once a ms) */
uint64_t uroce_coarse_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC_COARSE);
}

void uroce_deadline_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec += (long)(ns % 1000000000ull);
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}
