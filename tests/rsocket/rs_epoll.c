// SPDX-License-Identifier: MIT
/*
 * repoll_create / repoll_ctl / repoll_wait (rdma-core's RDMACM_1.5, which
 * a librspreload of 2026 or later calls for every epoll_*; Debian 12's
 * rsocket.h does not declare them): epoll over rsockets and ordinary
 * descriptors, one process.
 *
 *   kernel    ordinary descriptors keep the kernel's epoll: EPOLLET (one
 *             event per write), EPOLLONESHOT (none until EPOLL_CTL_MOD);
 *             the errors (EEXIST, ENOENT, EINVAL, EBADF), timeouts
 *   rsocket   a listener reports a connection, a nonblocking connect its
 *             completion once (EPOLLONESHOT), data EPOLLIN with the
 *             caller's data, level-triggered until read; EPOLLOUT under
 *             EPOLLET once, and again only after a send; EPOLL_CTL_DEL
 *             and rclose take an rsocket out; the peer's close EPOLLIN
 *             with the end of the stream
 *   wake      a thread waiting with no timeout wakes for an rsocket added
 *             by another thread that is ready, and for a pipe
 *   mixed     with one event a wait, a ready pipe and a ready rsocket are
 *             both reported in turn
 *   signal    a signal handler ends rpoll's and repoll_wait's wait with
 *             EINTR, SA_RESTART or not (as poll's and epoll_wait's), on a
 *             listener and on a connected rsocket
 *
 *   rs_epoll ADDR PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>
#include <rdma/rsocket.h>

#define RS_PROG "rs_epoll"
#include "rs_check.h"

int repoll_create(int flags);
int repoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int repoll_wait(int epfd, struct epoll_event *events, int maxevents,
		int timeout);

static struct sockaddr_in srv = { .sin_family = AF_INET };

static void add(int ep, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event e = { .events = events, .data.u64 = tag };
	int r;

	errno = 0;
	r = repoll_ctl(ep, op, fd, &e);
	EXPECT(!r, "repoll_ctl(%d, %d): %d, %s", op, fd, r, strerror(errno));
}

/* one wait; the event of tag in *out (0 if none), the count returned */
static int wait1(int ep, int ms, uint64_t tag, uint32_t *out)
{
	struct epoll_event e[8];
	int n = repoll_wait(ep, e, 8, ms);

	EXPECT(n >= 0, "repoll_wait: %s", strerror(errno));
	*out = 0;
	for (int i = 0; i < n; i++)
		if (e[i].data.u64 == tag)
			*out = e[i].events;
	return n;
}

/* waits up to 10 s for events of tag */
static uint32_t until(int ep, uint64_t tag, uint32_t want)
{
	uint32_t got = 0;

	for (int i = 0; i < 100 && !(got & want); i++)
		wait1(ep, 100, tag, &got);
	EXPECT(got & want, "tag %llu: no event 0x%x in 10 s",
	       (unsigned long long)tag, want);
	return got;
}

static void test_kernel(void)
{
	int ep = repoll_create(EPOLL_CLOEXEC), p[2], efd;
	struct epoll_event e = { .events = EPOLLIN };
	uint32_t got;
	uint64_t v = 1;

	EXPECT(ep >= 0, "repoll_create: %s", strerror(errno));
	EXPECT(repoll_create(12345) < 0 && errno == EINVAL,
	       "repoll_create with a bad flag did not fail with EINVAL");
	EXPECT(!pipe(p), "pipe");
	efd = eventfd(0, EFD_NONBLOCK);
	add(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLET, 7);
	add(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 8);
	EXPECT(repoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e) < 0 && errno == EEXIST,
	       "a second ADD: not EEXIST");
	EXPECT(repoll_ctl(ep, EPOLL_CTL_MOD, p[1], &e) < 0 && errno == ENOENT,
	       "MOD of a descriptor not added: not ENOENT");
	EXPECT(repoll_ctl(ep, EPOLL_CTL_ADD, ep, &e) < 0 && errno == EINVAL,
	       "the instance into itself: not EINVAL");
	EXPECT(repoll_wait(p[0], &e, 1, 0) < 0 && errno == EINVAL,
	       "a wait on a pipe: not EINVAL");
	EXPECT(repoll_wait(ep, &e, 0, 0) < 0 && errno == EINVAL,
	       "maxevents 0: not EINVAL");
	EXPECT(wait1(ep, 0, 7, &got) == 0, "an event with nothing ready");
	EXPECT(wait1(ep, 20, 7, &got) == 0, "an event with nothing ready");

	EXPECT(write(p[1], "ab", 2) == 2, "write");
	EXPECT(wait1(ep, 1000, 7, &got) == 1 && got == EPOLLIN,
	       "the pipe's EPOLLIN (0x%x)", got);
	EXPECT(wait1(ep, 0, 7, &got) == 0, "EPOLLET reported twice");
	EXPECT(write(p[1], "c", 1) == 1, "write");
	EXPECT(wait1(ep, 1000, 7, &got) == 1 && got == EPOLLIN,
	       "EPOLLET: no event for the second write");

	EXPECT(write(efd, &v, sizeof(v)) == sizeof(v), "eventfd write");
	EXPECT(wait1(ep, 1000, 8, &got) == 1 && got == EPOLLIN,
	       "the eventfd's EPOLLIN");
	EXPECT(wait1(ep, 0, 8, &got) == 0, "EPOLLONESHOT reported twice");
	add(ep, EPOLL_CTL_MOD, efd, EPOLLIN, 9);
	EXPECT(wait1(ep, 1000, 9, &got) == 1 && got == EPOLLIN,
	       "no event after EPOLL_CTL_MOD");
	add(ep, EPOLL_CTL_DEL, efd, 0, 0);
	EXPECT(wait1(ep, 0, 9, &got) == 0, "an event after EPOLL_CTL_DEL");

	EXPECT(!rclose(ep), "rclose of the instance: %s", strerror(errno));
	EXPECT(repoll_wait(ep, &e, 1, 0) < 0 && errno == EBADF,
	       "a wait after rclose: not EBADF");
	close(p[0]);
	close(p[1]);
	close(efd);
	printf("kernel: passed\n");
}

static int listener(int port)
{
	struct sockaddr_in a = srv;
	int l = rsocket(AF_INET, SOCK_STREAM, 0);

	a.sin_port = htons((uint16_t)port);
	EXPECT(l >= 0, "rsocket: %s", strerror(errno));
	EXPECT(!rbind(l, (struct sockaddr *)&a, sizeof(a)), "rbind %d: %s",
	       port, strerror(errno));
	EXPECT(!rlisten(l, 4), "rlisten: %s", strerror(errno));
	return l;
}

/* a nonblocking rconnect to port, and its completion through ep */
static int connecting(int port)
{
	struct sockaddr_in a = srv;
	int c = rsocket(AF_INET, SOCK_STREAM, 0);

	a.sin_port = htons((uint16_t)port);
	EXPECT(c >= 0, "rsocket: %s", strerror(errno));
	EXPECT(!rfcntl(c, F_SETFL, rfcntl(c, F_GETFL) | O_NONBLOCK),
	       "rfcntl: %s", strerror(errno));
	EXPECT(rconnect(c, (struct sockaddr *)&a, sizeof(a)) == -1 &&
		       errno == EINPROGRESS,
	       "nonblocking rconnect: %s", strerror(errno));
	return c;
}

/* listener l (tag 1) and a client connecting to it (tag 3): the accepted
 * rsocket */
static int accept_one(int ep, int l, int c)
{
	int a, err = -1;
	socklen_t len = sizeof(err);
	uint32_t got;

	add(ep, EPOLL_CTL_ADD, c, EPOLLOUT | EPOLLONESHOT, 3);
	got = until(ep, 1, EPOLLIN);
	EXPECT(got == EPOLLIN, "the listener reported 0x%x", got);
	a = raccept(l, NULL, NULL);
	EXPECT(a >= 0, "raccept: %s", strerror(errno));
	got = until(ep, 3, EPOLLOUT);
	EXPECT(!rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) && !err,
	       "the connect failed: %s", strerror(err));
	return a;
}

static void test_rsocket(int port)
{
	int ep = repoll_create(0), l = listener(port), c, a;
	struct pollfd pc = { .events = POLLIN };
	char buf[16];
	uint32_t got;

	EXPECT(ep >= 0, "repoll_create: %s", strerror(errno));
	add(ep, EPOLL_CTL_ADD, l, EPOLLIN, 1);
	EXPECT(wait1(ep, 0, 1, &got) == 0, "an event with no connection");
	c = connecting(port);
	a = accept_one(ep, l, c);
	EXPECT(wait1(ep, 50, 3, &got) >= 0 && !got,
	       "EPOLLONESHOT: the connect reported twice");

	/* data: EPOLLIN with our tag, again and again until it is read */
	add(ep, EPOLL_CTL_ADD, a, EPOLLIN, 2);
	EXPECT(wait1(ep, 0, 2, &got) >= 0 && !got, "EPOLLIN with no data");
	EXPECT(rsend(c, "hello", 5, 0) == 5, "rsend: %s", strerror(errno));
	EXPECT(until(ep, 2, EPOLLIN) == EPOLLIN, "not EPOLLIN alone");
	wait1(ep, 0, 2, &got);
	EXPECT(got == EPOLLIN, "level-triggered: EPOLLIN not again (0x%x)", got);
	EXPECT(rrecv(a, buf, sizeof(buf), 0) == 5 && !memcmp(buf, "hello", 5),
	       "rrecv");
	EXPECT(wait1(ep, 0, 2, &got) >= 0 && !got, "EPOLLIN after the read");

	/* EPOLLOUT under EPOLLET: once, then again after a send */
	add(ep, EPOLL_CTL_MOD, a, EPOLLIN | EPOLLOUT | EPOLLET, 4);
	EXPECT(until(ep, 4, EPOLLOUT) == EPOLLOUT, "not EPOLLOUT alone");
	EXPECT(wait1(ep, 20, 4, &got) >= 0 && !got,
	       "EPOLLET: EPOLLOUT again with no send (0x%x)", got);
	EXPECT(rsend(a, "x", 1, 0) == 1, "rsend: %s", strerror(errno));
	EXPECT(until(ep, 4, EPOLLOUT) & EPOLLOUT, "no EPOLLOUT after a send");
	/* (c is non-blocking, and EPOLLOUT on a says nothing of the byte's
	 * arrival at c: wait for it) */
	pc.fd = c;
	EXPECT(rpoll(&pc, 1, 5000) == 1 && rrecv(c, buf, 1, 0) == 1,
	       "rrecv: %s", strerror(errno));

	/* out of the set: EPOLL_CTL_DEL, and rclose */
	add(ep, EPOLL_CTL_DEL, a, 0, 0);
	EXPECT(rsend(c, "y", 1, 0) == 1, "rsend: %s", strerror(errno));
	EXPECT(wait1(ep, 50, 4, &got) >= 0 && !got,
	       "an event after EPOLL_CTL_DEL");
	add(ep, EPOLL_CTL_ADD, a, EPOLLIN, 5);
	EXPECT(until(ep, 5, EPOLLIN), "no EPOLLIN added back");
	EXPECT(rrecv(a, buf, 1, 0) == 1, "rrecv");

	/* the peer's close: EPOLLIN, and the end of the stream */
	add(ep, EPOLL_CTL_MOD, c, EPOLLIN, 6); /* (still in, one-shot) */
	EXPECT(!rclose(c), "rclose: %s", strerror(errno));
	got = until(ep, 5, EPOLLIN);
	EXPECT(rrecv(a, buf, 1, 0) == 0, "not the end of the stream");
	EXPECT(wait1(ep, 0, 6, &got) >= 0 && !got,
	       "an event for the closed rsocket");
	EXPECT(!rclose(a) && !rclose(l) && !rclose(ep), "rclose");
	printf("rsocket: passed\n");
}

struct waiter {
	int ep;
	uint64_t tag;
	_Atomic pid_t tid;
	int n;
	uint64_t got;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	struct epoll_event e;

	w->tid = gettid();
	w->n = repoll_wait(w->ep, &e, 1, -1);
	w->got = w->n == 1 ? e.data.u64 : 0;
	return NULL;
}

/* the thread is asleep in the kernel (its state in /proc) */
static bool asleep(pid_t tid)
{
	char path[64], st[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(st, 1, sizeof(st) - 1, f);
	fclose(f);
	st[n] = 0;
	p = strrchr(st, ')'); /* the state follows the command's name */
	return p && p[1] == ' ' && p[2] == 'S';
}

/* a thread waits with no timeout; once it sleeps, this one adds fd
 * (ready) as tag */
static void woken_by(int ep, int fd, uint64_t tag)
{
	struct waiter w = { .ep = ep, .tag = tag };
	pthread_t t;
	int i;

	EXPECT(!pthread_create(&t, NULL, wait_thread, &w), "pthread_create");
	for (i = 0; i < 100000 && !(w.tid && asleep(w.tid)); i++)
		sched_yield();
	EXPECT(i < 100000, "the waiting thread never slept");
	add(ep, EPOLL_CTL_ADD, fd, EPOLLIN, tag);
	pthread_join(t, NULL);
	EXPECT(w.n == 1 && w.got == tag, "the waiter got %d events, tag %llu",
	       w.n, (unsigned long long)w.got);
	add(ep, EPOLL_CTL_DEL, fd, 0, 0);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* a wait with no timeout on nothing ready, ended by SIGALRM: EINTR */
static void interrupted(int ep, int l, int a)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { .it_value = { .tv_usec = 100000 } };
	struct pollfd p[2] = { { .fd = l, .events = POLLIN },
			       { .fd = a, .events = POLLIN } };
	struct epoll_event e;

	/* (nothing ready: ep holds a, read to the end, and c, told) */
	EXPECT(!sigaction(SIGALRM, &sa, NULL), "sigaction");
	for (int i = 0; i < 2; i++) {
		EXPECT(!setitimer(ITIMER_REAL, &it, NULL), "setitimer");
		EXPECT(rpoll(&p[i], 1, -1) < 0 && errno == EINTR,
		       "rpoll on the %s: not EINTR after a signal",
		       i ? "connected rsocket" : "listener");
	}
	EXPECT(!setitimer(ITIMER_REAL, &it, NULL), "setitimer");
	EXPECT(repoll_wait(ep, &e, 1, -1) < 0 && errno == EINTR,
	       "repoll_wait: not EINTR after a signal");
}

static void test_wake(int port)
{
	int ep = repoll_create(0), l = listener(port), c, a, p[2];
	char b;

	add(ep, EPOLL_CTL_ADD, l, EPOLLIN, 1);
	c = connecting(port);
	a = accept_one(ep, l, c);
	add(ep, EPOLL_CTL_DEL, l, 0, 0);
	EXPECT(rsend(c, "z", 1, 0) == 1, "rsend: %s", strerror(errno));
	woken_by(ep, a, 11);
	EXPECT(rrecv(a, &b, 1, 0) == 1, "rrecv");
	EXPECT(!pipe(p) && write(p[1], "p", 1) == 1, "pipe");
	woken_by(ep, p[0], 12);

	/* mixed: one event a wait, both kinds ready, both reported */
	EXPECT(rsend(c, "z", 1, 0) == 1, "rsend: %s", strerror(errno));
	add(ep, EPOLL_CTL_ADD, a, EPOLLIN, 21);
	until(ep, 21, EPOLLIN); /* (arrived: stays readable) */
	add(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 22);
	{
		bool seen[2] = { false, false };

		for (int i = 0; i < 4; i++) {
			struct epoll_event e;

			EXPECT(repoll_wait(ep, &e, 1, 1000) == 1,
			       "mixed: no event");
			if (e.data.u64 == 21 || e.data.u64 == 22)
				seen[e.data.u64 - 21] = true;
		}
		EXPECT(seen[0] && seen[1], "mixed: 4 waits reported only the %s",
		       seen[0] ? "rsocket" : "pipe");
	}
	close(p[0]);
	close(p[1]);
	EXPECT(rrecv(a, &b, 1, 0) == 1, "rrecv");
	interrupted(ep, l, a);
	EXPECT(!rclose(a) && !rclose(c) && !rclose(l) && !rclose(ep), "rclose");
	printf("wake, mixed, signal: passed\n");
}

int main(int argc, char **argv)
{
	int port;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &srv.sin_addr) != 1)
		DIE("usage: rs_epoll ADDR PORT");
	port = atoi(argv[2]);
	test_kernel();
	test_rsocket(port);
	test_wake(port + 1);
	printf("repoll: all checked\n");
	return 0;
}
