// SPDX-License-Identifier: MIT
/*
 * The looker (docs/progress.md, "The looker"): while an application
 * spins on an empty CQ, its device's progress thread sleeps, and a
 * thread at SCHED_IDLE looks every APP_WAIT_NS whether the application
 * still receives.  Checked by what the kernel counts for each thread:
 *
 *   - after ibv_open_device exactly one thread of the process is at
 *     SCHED_IDLE (the looker);
 *   - 300 ms of polls of an empty CQ: the looker looked (it switched),
 *     the other threads of the device slept: at most 100 switches, and 4
 *     more for each poll that came over 100 us after the one before (a
 *     poll that late makes the application look stopped: the looker
 *     wakes the thread, which takes the socket, and the next polls give
 *     it back, two switches).  The progress thread that looked itself made
 *     about 1 500.  (Not under TSan, scripts/test: its own thread and
 *     its slower polls wake more.)
 *   - the CQ armed (the socket handed back): the looker sleeps (at most
 *     3 switches in the next 300 ms; it looked about 1 500 times).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 16

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL: looker: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

struct thr {
	pid_t tid;
	int policy;
	unsigned long vcsw;
};

static unsigned long vcsw_of(pid_t tid)
{
	char path[64], line[128];
	unsigned long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	if (!f)
		die("%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %lu", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* the process's threads but this one */
static int threads(struct thr *t)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		die("/proc/self/task: %s", strerror(errno));
	while ((e = readdir(d)) && n < MAX_THREADS) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid <= 0 || tid == gettid())
			continue;
		t[n].tid = tid;
		t[n].policy = sched_getscheduler(tid);
		t[n].vcsw = vcsw_of(tid);
		n++;
	}
	closedir(d);
	return n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct thr t0[MAX_THREADS], t1[MAX_THREADS];
	struct ibv_comp_channel *ch;
	struct ibv_context *ctx;
	unsigned long others = 0, late = 0;
	int n, i, looker = -1;
	struct ibv_wc wc;
	struct ibv_cq *cq;
	double end, last;

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		die("no device");
	ibv_free_device_list(list);
	ch = ibv_create_comp_channel(ctx);
	cq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL;
	if (!cq)
		die("create_cq: %s", strerror(errno));

	n = threads(t0);
	for (i = 0; i < n; i++) {
		if (t0[i].policy != SCHED_IDLE)
			continue;
		if (looker >= 0)
			die("two threads at SCHED_IDLE");
		looker = i;
	}
	if (looker < 0)
		die("no thread at SCHED_IDLE among %d", n);

	for (last = now_s(), end = last + 0.3; last < end;) {
		double t;

		if (ibv_poll_cq(cq, 1, &wc) != 0)
			die("a completion on an idle CQ");
		t = now_s();
		late += t - last > 100e-6;
		last = t;
	}
	if (threads(t1) != n || t1[looker].tid != t0[looker].tid)
		die("threads came or went while polling");
	for (i = 0; i < n; i++)
		if (i != looker)
			others += t1[i].vcsw - t0[i].vcsw;
	printf("300 ms of polls (%lu over 100 us late): looker %lu switches, "
	       "the others %lu\n",
	       late, t1[looker].vcsw - t0[looker].vcsw, others);
	if (t1[looker].vcsw == t0[looker].vcsw)
		die("the looker did not look");
	if (others > 100 + 4 * late)
		die("the device's other threads woke %lu times", others);

	/* armed: the thread watches the socket, the looker sleeps (it ends
	 * its nap and sees the watch: two switches) */
	threads(t0);
	if (ibv_req_notify_cq(cq, 0))
		die("req_notify_cq");
	usleep(300000);
	if (threads(t1) != n || t1[looker].tid != t0[looker].tid)
		die("threads came or went while armed");
	printf("armed, 300 ms: looker %lu switches\n",
	       t1[looker].vcsw - t0[looker].vcsw);
	if (t1[looker].vcsw - t0[looker].vcsw > 3)
		die("the looker looks with nobody polling");

	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_close_device(ctx);
	printf("PASS: looker\n");
	return 0;
}
