// SPDX-License-Identifier: MIT
/*
 * The calling thread's time on a core, its run delay and the times it
 * was put on a core (core.h): the three fields of its
 * /proc/thread-self/schedstat, read through a descriptor each thread
 * opens once, a pread a sample instead of open, read and close.  It is
 * closed when the thread exits (a key's destructor) and in a forked
 * child, whose one thread would otherwise read its parent's thread.
 * Also its involuntary context switches (getrusage), and the idle time
 * of the CPUs it may use (/proc/stat).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

uint64_t uroce_run_delay(uint64_t *slices, uint64_t *ran)
{
	unsigned long long run, delay, n;
	char buf[96];

	*slices = 0;
	*ran = 0;
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
	*ran = run;
	return delay;
}

uint64_t uroce_involuntary_switches(void)
{
	static __thread uint64_t unknown;
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return ++unknown;
	return (uint64_t)ru.ru_nivcsw;
}

/*
 * The idle time of the CPUs this process may run on, summed (ns): the
 * idle and iowait fields of their cpuN lines in /proc/stat, which the
 * kernel keeps in clock ticks (USER_HZ).  One descriptor for the process
 * (the file is the machine's: a forked child reads the same).  False
 * where it cannot be read.
 */
static int idle_fd = -1;
static cpu_set_t idle_set;
static size_t idle_size;
static long idle_hz;
static pthread_once_t idle_once = PTHREAD_ONCE_INIT;

static void idle_init(void)
{
	long conf = sysconf(_SC_NPROCESSORS_CONF);

	idle_hz = sysconf(_SC_CLK_TCK);
	if (idle_hz <= 0 || sched_getaffinity(0, sizeof(idle_set), &idle_set))
		return;
	/* the summary line and the cpuN lines come first, under 256 bytes
	 * each (ten counters of at most 20 digits and a space) */
	idle_size = (size_t)(conf > 0 ? conf + 1 : CPU_SETSIZE + 1) * 256;
	idle_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
}

bool uroce_cpus_idle_ns(uint64_t *idle)
{
	unsigned long long ticks = 0, f[5];
	char *buf, *line;
	bool any = false;
	unsigned int cpu;

	pthread_once(&idle_once, idle_init);
	if (idle_fd < 0 || !(buf = malloc(idle_size)))
		return false;
	if (uroce_proc_read_fd(idle_fd, buf, idle_size) > 0) {
		for (line = buf; line; line = strchr(line, '\n')) {
			line += *line == '\n';
			if (strncmp(line, "cpu", 3))
				break; /* (past the cpu lines) */
			if (!isdigit((unsigned char)line[3]))
				continue; /* (the summary line) */
			if (sscanf(line, "cpu%u %llu %llu %llu %llu %llu", &cpu,
				   &f[0], &f[1], &f[2], &f[3], &f[4]) != 6 ||
			    cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &idle_set))
				continue;
			ticks += f[3] + f[4];
			any = true;
		}
	}
	free(buf);
	*idle = ticks * (1000000000ull / (unsigned long long)idle_hz);
	return any;
}
