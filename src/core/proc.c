// SPDX-License-Identifier: MIT
/*
 * The calling thread's run delay and the times it was put on a core
 * (core.h): the second and third fields of its
 * /proc/thread-self/schedstat, read through a descriptor each thread
 * opens once, a pread a sample instead of open, read and close.  It is
 * closed when the thread exits (a key's destructor) and in a forked
 * child, whose one thread would otherwise read its parent's thread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
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

uint64_t uroce_run_delay(uint64_t *slices)
{
	unsigned long long run, delay, n;
	char buf[96];

	*slices = 0;
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
	    sscanf(buf, "%llu %llu %llu", &run, &delay, &n) != 3)
		return 0;
	*slices = n;
	return delay;
}

/*
 * Whether the machine has had more to run than CPUs for this process:
 * the load average of the last minute (the first field of /proc/loadavg)
 * against the CPUs it may run on.  One descriptor for the process (the
 * file is the machine's: a forked child reads the same).  True where
 * either cannot be read.
 */
static int load_fd = -1;
static int load_cpus;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load_init(void)
{
	cpu_set_t set;

	load_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	load_cpus = sched_getaffinity(0, sizeof(set), &set) ? 0 :
							      CPU_COUNT(&set);
}

bool uroce_cpus_crowded(void)
{
	unsigned int whole, hundredths;
	char buf[128];

	pthread_once(&load_once, load_init);
	if (load_fd < 0 || load_cpus <= 0 ||
	    uroce_proc_read_fd(load_fd, buf, sizeof(buf)) <= 0 ||
	    sscanf(buf, "%u.%u", &whole, &hundredths) != 2)
		return true;
	return whole * 100 + hundredths > (unsigned int)load_cpus * 100;
}
