// SPDX-License-Identifier: MIT
/*
 * The calling thread's run delay (core.h): the second field of its
 * /proc/thread-self/schedstat, read through a descriptor each thread
 * opens once, a pread a sample instead of open, read and close.  It is
 * closed when the thread exits (a key's destructor) and in a forked
 * child, whose one thread would otherwise read its parent's thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "core/core.h"
#include "uroce_shm.h"

#define STAT_NONE (-2) /* the kernel keeps no schedstat */

static __thread int stat_fd = -1;
static pthread_key_t stat_key;
static pthread_once_t stat_once = PTHREAD_ONCE_INIT;
static bool stat_keyed;

static void stat_close(void *unused)
{
	(void)unused;
	if (stat_fd >= 0)
		close(stat_fd);
	stat_fd = -1;
}

static void stat_forked(void)
{
	stat_close(NULL);
}

static void stat_init(void)
{
	stat_keyed = !pthread_key_create(&stat_key, stat_close);
	pthread_atfork(NULL, NULL, stat_forked);
}

uint64_t uroce_run_delay(void)
{
	unsigned long long run, delay;
	char buf[96];

	if (stat_fd == STAT_NONE)
		return 0;
	if (stat_fd < 0) {
		pthread_once(&stat_once, stat_init);
		stat_fd = open("/proc/thread-self/schedstat",
			       O_RDONLY | O_CLOEXEC);
		if (stat_fd < 0) {
			stat_fd = STAT_NONE;
			return 0;
		}
		/* (the destructor runs for a key whose value is not NULL) */
		if (!stat_keyed || pthread_setspecific(stat_key, &stat_fd)) {
			close(stat_fd);
			stat_fd = -1;
			return 0;
		}
	}
	if (uroce_proc_read_fd(stat_fd, buf, sizeof(buf)) <= 0 ||
	    sscanf(buf, "%llu %llu", &run, &delay) != 2)
		return 0;
	return delay;
}
