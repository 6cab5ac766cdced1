// SPDX-License-Identifier: MIT
/*
 * Logging: UROCE_LOG=error|warn|info|debug turns it on (off by default).
 * One line per event on stderr, written with one write(2) so lines from
 * several threads or processes do not interleave:
 *
 *	uroce[1234] 12:00:01.123456 warn qp 0x000011 psn 0x00002a: message
 *
 * Datapath lines (uroce_log_qp) share a token bucket of LIMIT_RATE lines a
 * second; what it suppresses is counted and reported on the next line
 * that gets through.  With logging off, a log call costs one load and one
 * compare (the macros in core/core.h test uroce_log_level first).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "dev.h"

#define LIMIT_RATE 100 /* datapath lines per second, and the burst */

int uroce_log_level = UROCE_LOG_OFF;

static const char *const level_name[] = {
	[UROCE_LOG_OFF] = "off",     [UROCE_LOG_ERROR] = "error",
	[UROCE_LOG_WARN] = "warn",   [UROCE_LOG_INFO] = "info",
	[UROCE_LOG_DEBUG] = "debug",
};

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t limit_tokens = LIMIT_RATE;
static uint64_t limit_last_ns;
static uint64_t limit_suppressed;

__attribute__((constructor)) static void log_init(void)
{
	const char *env = uroce_config()->log;
	size_t i;

	if (!env || !*env)
		return;
	for (i = 0; i < UROCE_ARRAY_SIZE(level_name); i++) {
		if (!strcasecmp(env, level_name[i])) {
			uroce_log_level = (int)i;
			return;
		}
	}
	fprintf(stderr,
		"uroce: UROCE_LOG=%s: want error, warn, info or "
		"debug; logging stays off\n",
		env);
}

/* May a datapath line go out now?  *missed: how many were suppressed. */
static bool limit_pass(uint64_t *missed)
{
	uint64_t now = uroce_now_ns();
	bool ok = false;

	pthread_mutex_lock(&limit_lock);
	if (now - limit_last_ns >= 1000000000ull / LIMIT_RATE) {
		uint64_t add = (now - limit_last_ns) * LIMIT_RATE /
			       1000000000ull;

		limit_tokens = limit_tokens + add > LIMIT_RATE ?
				       LIMIT_RATE :
				       limit_tokens + add;
		limit_last_ns = now;
	}
	if (limit_tokens) {
		limit_tokens--;
		*missed = limit_suppressed;
		limit_suppressed = 0;
		ok = true;
	} else {
		limit_suppressed++;
	}
	pthread_mutex_unlock(&limit_lock);
	return ok;
}

void uroce_log_emit(int level, bool limited, int64_t qpn, int64_t psn,
		    const char *fmt, ...)
{
	uint64_t missed = 0;
	struct timespec ts;
	struct tm tm;
	char line[512];
	size_t n;
	va_list ap;

	if (level < UROCE_LOG_ERROR || level > UROCE_LOG_DEBUG)
		return;
	if (limited && !limit_pass(&missed))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = (size_t)snprintf(line, sizeof(line),
			     "uroce[%d] %02d:%02d:%02d.%06ld %s ",
			     (int)getpid(), tm.tm_hour, tm.tm_min, tm.tm_sec,
			     ts.tv_nsec / 1000, level_name[level]);
	if (qpn >= 0 && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      "qp 0x%06llx ", (unsigned long long)qpn);
	if (psn >= 0 && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      "psn 0x%06llx ", (unsigned long long)psn);
	if (n < sizeof(line)) {
		va_start(ap, fmt);
		n += (size_t)vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
	}
	if (missed && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      " (%llu lines suppressed before this)",
				      (unsigned long long)missed);
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
