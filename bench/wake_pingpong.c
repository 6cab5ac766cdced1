// SPDX-License-Identifier: MIT
/*
 * wake_pingpong: the floor under ib_write_lat on the same-host path.
 *
 *   wake_pingpong MODE ITERS
 *
 * Two processes, each with an application thread that spins on a word of
 * memory (as ib_write_lat spins on the last byte of its buffer) and, but
 * for MODE direct, a receiving thread (uroce's progress thread).  A ping
 * is a counter in shared memory (the ring) that the peer's receiving
 * thread sees and copies to its application's word; the application then
 * answers the same way.  MODE says how the receiving thread waits:
 *
 *   epoll   sleeps in epoll_wait on an eventfd the sender writes (uroce's
 *           doorbell to a sleeping progress thread)
 *   futex   sleeps in FUTEX_WAIT on the ring word, FUTEX_WAKE by the sender
 *   spin    spins on the ring (four spinning threads, whatever the cores)
 *   direct  no receiving thread: the application spins on the ring itself
 *           (what ib_send_lat gets: its application polls the CQ)
 *
 * The receiving threads ask for a short time slice, as uroce's do.  Prints
 *   mode=M iters=N oneway_median_us=.. oneway_p10_us=.. oneway_p90_us=..
 * (half of each round trip).  Nothing here is uroce; it measures the
 * machine.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum mode {
	M_EPOLL,
	M_FUTEX,
	M_SPIN,
	M_DIRECT
};

static const char *const mode_names[] = {
	[M_EPOLL] = "epoll",
	[M_FUTEX] = "futex",
	[M_SPIN] = "spin",
	[M_DIRECT] = "direct",
};

struct side {
	_Atomic uint32_t ring; /* pings sent to this side */
	_Atomic uint32_t app;  /* what its receiver delivered */
	_Atomic uint32_t stop;
	char pad[64 - 12];
};

struct shared {
	struct side side[2];
	int bell[2]; /* eventfds (inherited by fork) */
};

static struct shared *sh;
static enum mode mode;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long futex(_Atomic uint32_t *w, int op, uint32_t v)
{
	return syscall(SYS_futex, (uint32_t *)w, op, v, NULL, NULL, 0);
}

struct sched_attr_v1 {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

static void short_slice(void)
{
	struct sched_attr_v1 a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.policy = SCHED_OTHER;
	a.runtime = 100000;
	syscall(SYS_sched_setattr, 0, &a, 0);
}

/* send ping v to side `to` */
static void ping(int to, uint32_t v)
{
	uint64_t one = 1;

	atomic_store_explicit(&sh->side[to].ring, v, memory_order_release);
	if (mode == M_EPOLL) {
		if (write(sh->bell[to], &one, sizeof(one)) < 0)
			perror("write");
	} else if (mode == M_FUTEX) {
		futex(&sh->side[to].ring, FUTEX_WAKE, 1);
	}
}

static void *receiver(void *arg)
{
	int me = (int)(intptr_t)arg, ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN };
	struct side *s = &sh->side[me];
	uint32_t seen = 0;
	uint64_t v;

	short_slice();
	epoll_ctl(ep, EPOLL_CTL_ADD, sh->bell[me], &ev);
	while (!atomic_load(&s->stop)) {
		uint32_t r = atomic_load_explicit(&s->ring,
						  memory_order_acquire);

		if (r != seen) {
			seen = r;
			atomic_store_explicit(&s->app, r, memory_order_release);
			continue;
		}
		if (mode == M_EPOLL) {
			if (epoll_wait(ep, &ev, 1, 100) > 0 &&
			    read(sh->bell[me], &v, sizeof(v)) < 0)
				perror("read");
		} else if (mode == M_FUTEX) {
			struct timespec t = { 0, 100000000 };

			syscall(SYS_futex, (uint32_t *)&s->ring, FUTEX_WAIT,
				seen, &t, NULL, 0);
		}
	}
	close(ep);
	return NULL;
}

/* the application: side 0 pings and times, side 1 answers */
static void app(int me, int iters, uint64_t *rtt)
{
	_Atomic uint32_t *w = mode == M_DIRECT ? &sh->side[me].ring :
						 &sh->side[me].app;
	uint32_t i;

	for (i = 1; i <= (uint32_t)iters; i++) {
		uint64_t t0 = now_ns();

		if (me == 0)
			ping(1, i);
		while (atomic_load_explicit(w, memory_order_acquire) != i)
			;
		if (me == 1)
			ping(0, i);
		else
			rtt[i - 1] = now_ns() - t0;
	}
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void run_side(int me, int iters, uint64_t *rtt)
{
	pthread_t t;

	if (mode != M_DIRECT)
		pthread_create(&t, NULL, receiver, (void *)(intptr_t)me);
	app(me, iters, rtt);
	atomic_store(&sh->side[me].stop, 1);
	if (mode == M_EPOLL)
		ping(me, atomic_load(&sh->side[me].ring));
	if (mode == M_FUTEX)
		futex(&sh->side[me].ring, FUTEX_WAKE, 1);
	if (mode != M_DIRECT)
		pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	int iters, warm, m;
	uint64_t *rtt;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr,
			"usage: wake_pingpong epoll|futex|spin|direct ITERS\n");
		return 2;
	}
	for (m = 0; m <= M_DIRECT; m++)
		if (!strcmp(argv[1], mode_names[m]))
			break;
	if (m > M_DIRECT)
		return 2;
	mode = (enum mode)m;
	iters = atoi(argv[2]);
	if (iters < 10)
		return 2;
	warm = iters / 10;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	rtt = calloc((size_t)(iters + warm), sizeof(*rtt));
	if (sh == MAP_FAILED || !rtt)
		return 1;
	memset(sh, 0, sizeof(*sh));
	sh->bell[0] = eventfd(0, EFD_NONBLOCK);
	sh->bell[1] = eventfd(0, EFD_NONBLOCK);
	pid = fork();
	if (pid < 0)
		return 1;
	run_side(pid == 0, iters + warm, rtt);
	if (pid == 0)
		return 0;
	waitpid(pid, NULL, 0);
	qsort(rtt + warm, (size_t)iters, sizeof(*rtt), cmp);
	printf("mode=%s iters=%d oneway_median_us=%.2f oneway_p10_us=%.2f "
	       "oneway_p90_us=%.2f\n",
	       mode_names[mode], iters, rtt[warm + iters / 2] / 2000.0,
	       rtt[warm + iters / 10] / 2000.0,
	       rtt[warm + iters * 9 / 10] / 2000.0);
	return 0;
}
