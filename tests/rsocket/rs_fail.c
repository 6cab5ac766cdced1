// SPDX-License-Identifier: MIT
/*
 * The failure cases a socket user expects, on stream rsockets (the r*
 * API of our librdmacm, one process, a child process for the peer that
 * is killed):
 *
 *   refused    rconnect to a port nobody listens on: ECONNREFUSED
 *   nonblock   a nonblocking rconnect completes through rpoll (called
 *              again: EINPROGRESS while it connects, 0 once connected,
 *              as rdma-core's, for librspreload's sake); a full
 *              send ring gives EAGAIN, rpoll then says POLLOUT once the
 *              peer reads; every byte arrives
 *   halfclose  after the client's SHUT_WR the server reads the rest and
 *              then the end of the stream, and still sends; after the
 *              server's close the client reads the end, rsend gives EPIPE
 *   killed     a peer SIGKILLed mid-stream: the reader (waiting in rpoll,
 *              or spinning on a nonblocking rrecv) gets ECONNRESET (or
 *              the end of the stream), the sender
 *              (blocked in rsend) EPIPE or ECONNRESET, within a bound,
 *              never a hang
 *   threads    both ends send and receive at once, a thread each way on
 *              each socket (blocking calls sharing one rsocket)
 *
 *   rs_fail ADDR PORT CASE      (CASE: one of the above, or all)
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rsocket.h>

#define RS_PROG "rs_fail"
#include "rs_check.h"

extern char **environ;

static struct sockaddr_in srv = { .sin_family = AF_INET };
static int port;

static uint8_t pat(uint64_t i)
{
	return (uint8_t)(((i + 5) * 0x9e3779b97f4a7c15ull) >> 56);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct sockaddr_in at(int p)
{
	struct sockaddr_in a = srv;

	a.sin_port = htons((uint16_t)p);
	return a;
}

static int listener(int p)
{
	struct sockaddr_in a = at(p);
	int l = rsocket(AF_INET, SOCK_STREAM, 0);

	EXPECT(l >= 0, "rsocket: %s", strerror(errno));
	EXPECT(!rbind(l, (struct sockaddr *)&a, sizeof(a)), "rbind %d: %s", p,
	       strerror(errno));
	EXPECT(!rlisten(l, 4), "rlisten: %s", strerror(errno));
	return l;
}

/* a connected pair through listener l: nonblocking connect and rpoll */
static void pair(int l, int *c, int *a)
{
	struct sockaddr_in sa = at(port);
	struct pollfd p[2];
	int err = -1;
	socklen_t len = sizeof(err);

	*c = rsocket(AF_INET, SOCK_STREAM, 0);
	EXPECT(*c >= 0, "rsocket: %s", strerror(errno));
	EXPECT(!rfcntl(*c, F_SETFL, rfcntl(*c, F_GETFL) | O_NONBLOCK),
	       "rfcntl: %s", strerror(errno));
	EXPECT(rconnect(*c, (struct sockaddr *)&sa, sizeof(sa)) == -1 &&
		       errno == EINPROGRESS,
	       "nonblocking rconnect: %s", strerror(errno));
	/* again, in progress: EINPROGRESS (rdma-core's; librspreload
	 * takes any other error for no RDMA and moves to TCP) */
	EXPECT(rconnect(*c, (struct sockaddr *)&sa, sizeof(sa)) == -1 &&
		       errno == EINPROGRESS,
	       "rconnect again, in progress: %s", strerror(errno));
	*a = -1;
	while (*a < 0 || err) {
		p[0] = (struct pollfd){ .fd = l, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = *c, .events = POLLOUT };
		EXPECT(rpoll(p, 2, 10000) > 0, "rpoll: nothing in 10 s");
		if (p[0].revents & POLLIN) {
			*a = raccept(l, NULL, NULL);
			EXPECT(*a >= 0, "raccept: %s", strerror(errno));
		}
		if (p[1].revents & POLLOUT) {
			EXPECT(!rgetsockopt(*c, SOL_SOCKET, SO_ERROR, &err, &len),
			       "SO_ERROR: %s", strerror(errno));
			EXPECT(!err, "the connect failed: %s", strerror(err));
		}
	}
	/* and connected: 0 (not EISCONN, for the same reason) */
	EXPECT(!rconnect(*c, (struct sockaddr *)&sa, sizeof(sa)),
	       "rconnect again, connected: %s", strerror(errno));
	EXPECT(!rfcntl(*c, F_SETFL, rfcntl(*c, F_GETFL) & ~O_NONBLOCK),
	       "rfcntl: %s", strerror(errno));
}

static void case_refused(int l)
{
	struct sockaddr_in a = at(port + 1);
	int c = rsocket(AF_INET, SOCK_STREAM, 0);
	double t0 = now();

	(void)l;
	EXPECT(rconnect(c, (struct sockaddr *)&a, sizeof(a)) == -1 &&
		       errno == ECONNREFUSED,
	       "rconnect to a closed port: %s", strerror(errno));
	rclose(c);
	printf("refused: ECONNREFUSED in %.3f s\n", now() - t0);
}

static void case_nonblock(int l)
{
	static uint8_t buf[65536];
	uint64_t sent = 0, got = 0;
	struct pollfd p;
	int c, a, n;

	pair(l, &c, &a);
	rfcntl(c, F_SETFL, rfcntl(c, F_GETFL) | O_NONBLOCK);
	/* nobody reads: the ring fills, then EAGAIN */
	for (;;) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = pat(sent + i);
		ssize_t r = rsend(c, buf, sizeof(buf), 0);

		if (r < 0) {
			EXPECT(errno == EAGAIN, "rsend: %s", strerror(errno));
			break;
		}
		sent += (uint64_t)r;
		EXPECT(sent < (1u << 30), "1 GiB sent and no EAGAIN");
	}
	p = (struct pollfd){ .fd = c, .events = POLLOUT };
	EXPECT(rpoll(&p, 1, 0) == 0, "POLLOUT with a full ring");
	/* the reader takes a ring's half, the sender may go on */
	while (got < sent / 2 + 1) {
		ssize_t r = rrecv(a, buf, sizeof(buf), 0);

		EXPECT(r > 0, "rrecv: %s", strerror(errno));
		for (ssize_t i = 0; i < r; i++)
			EXPECT(buf[i] == pat(got + (uint64_t)i),
			       "byte %llu wrong", (unsigned long long)got);
		got += (uint64_t)r;
	}
	p.revents = 0;
	n = rpoll(&p, 1, 5000);
	EXPECT(n == 1 && (p.revents & POLLOUT),
	       "no POLLOUT after the "
	       "peer read (%d, %#x)",
	       n, p.revents);
	for (size_t i = 0; i < 1000; i++)
		buf[i] = pat(sent + i);
	EXPECT(rsend(c, buf, 1000, 0) > 0, "rsend after POLLOUT: %s",
	       strerror(errno));
	sent += 1000;
	rclose(c);
	/* all of it, then the end of the stream */
	for (;;) {
		ssize_t r = rrecv(a, buf, sizeof(buf), 0);

		EXPECT(r >= 0, "rrecv: %s", strerror(errno));
		if (!r)
			break;
		for (ssize_t i = 0; i < r; i++)
			EXPECT(buf[i] == pat(got + (uint64_t)i),
			       "byte %llu wrong", (unsigned long long)got);
		got += (uint64_t)r;
	}
	EXPECT(got == sent, "received %llu of %llu", (unsigned long long)got,
	       (unsigned long long)sent);
	rclose(a);
	printf("nonblock: EAGAIN after %llu bytes, POLLOUT after the read, "
	       "all %llu checked\n",
	       (unsigned long long)(sent - 1000), (unsigned long long)got);
}

static void case_halfclose(int l)
{
	char buf[64];
	int c, a;

	pair(l, &c, &a);
	EXPECT(rsend(c, "last words", 10, 0) == 10, "rsend: %s",
	       strerror(errno));
	EXPECT(!rshutdown(c, SHUT_WR), "rshutdown: %s", strerror(errno));
	EXPECT(rrecv(a, buf, sizeof(buf), MSG_WAITALL) == 10 &&
		       !memcmp(buf, "last words", 10),
	       "data before the shutdown");
	EXPECT(rrecv(a, buf, sizeof(buf), 0) == 0, "no end of stream after "
						   "SHUT_WR");
	EXPECT(rsend(c, "x", 1, 0) == -1 && errno == EPIPE,
	       "rsend after "
	       "SHUT_WR: %s",
	       strerror(errno));
	/* the other direction still flows */
	EXPECT(rsend(a, "reply", 5, 0) == 5,
	       "rsend after the peer's "
	       "SHUT_WR: %s",
	       strerror(errno));
	EXPECT(rrecv(c, buf, 5, MSG_WAITALL) == 5 && !memcmp(buf, "reply", 5),
	       "reply after SHUT_WR");
	EXPECT(rsend(a, "bye", 3, 0) == 3, "rsend: %s", strerror(errno));
	rclose(a);
	EXPECT(rrecv(c, buf, 3, MSG_WAITALL) == 3 && !memcmp(buf, "bye", 3),
	       "data sent before the close");
	EXPECT(rrecv(c, buf, sizeof(buf), 0) == 0, "no end of stream after "
						   "the peer's close");
	rclose(c);
	printf("halfclose: end of stream after SHUT_WR and after close, "
	       "EPIPE after SHUT_WR\n");
}

/* the child: connects and sends (mode s) or reads slowly (mode r) */
static int peer(const char *mode)
{
	static uint8_t buf[65536];
	struct sockaddr_in a = at(port);
	int c = rsocket(AF_INET, SOCK_STREAM, 0);

	if (rconnect(c, (struct sockaddr *)&a, sizeof(a)))
		return 2;
	if (*mode == 'q') {
		/* one byte, then nothing until killed */
		if (rsend(c, buf, 1, 0) != 1)
			return 3;
		for (;;)
			pause();
	}
	for (;;) {
		if (*mode == 's') {
			if (rsend(c, buf, sizeof(buf), 0) < 0)
				return 3;
		} else {
			if (rrecv(c, buf, 1, 0) <= 0)
				return 3;
			usleep(100000);
		}
	}
}

static pid_t spawn_peer(const char *self, const char *addr, const char *mode)
{
	char p[16];
	char *argv[] = { (char *)self, (char *)addr, p,
			 "peer",       (char *)mode, NULL };
	pid_t pid;

	snprintf(p, sizeof(p), "%d", port);
	EXPECT(!posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ),
	       "posix_spawn failed");
	return pid;
}

/*
 * A reader whose sender dies: it waits in rpoll, as a select-based
 * server would, for a sender killed mid-stream; or (spin) it calls a
 * nonblocking rrecv in a loop and never sleeps, as rstream does by
 * default, for a sender that went quiet after one byte (so the reader
 * has no ring space to give back either: only a keepalive finds out).
 * Its error (0: the end of the stream); *secs: how long it took after
 * the kill.
 */
static int reader_of_killed(int l, const char *self, const char *addr,
			    bool spin, double *secs)
{
	static uint8_t buf[65536];
	uint64_t got = 0;
	double t0;
	ssize_t r;
	pid_t pid;
	int a, err;

	pid = spawn_peer(self, addr, spin ? "q" : "s");
	a = raccept(l, NULL, NULL);
	EXPECT(a >= 0, "raccept: %s", strerror(errno));
	while (got < (spin ? 1u : 4u << 20)) {
		r = rrecv(a, buf, sizeof(buf), 0);
		EXPECT(r > 0, "rrecv before the kill: %s", strerror(errno));
		got += (uint64_t)r;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t0 = now();
	do {
		struct pollfd p = { .fd = a, .events = POLLIN };

		EXPECT(now() - t0 < 30,
		       "%s: nothing in 30 s after the peer "
		       "was killed",
		       spin ? "a spinning rrecv" : "rpoll");
		EXPECT(spin || rpoll(&p, 1, 30000) == 1,
		       "rpoll: nothing in 30 s after the peer was killed");
		r = rrecv(a, buf, sizeof(buf), MSG_DONTWAIT);
	} while (r > 0 || (r < 0 && errno == EAGAIN));
	*secs = now() - t0;
	err = r ? errno : 0;
	EXPECT(!err || err == ECONNRESET, "rrecv after the kill: %s",
	       strerror(err));
	rclose(a);
	return err;
}

static void case_killed(int l, const char *self, const char *addr)
{
	static uint8_t buf[65536];
	double t0, rd, sp, wr;
	int rerr, serr, werr;
	ssize_t r;
	pid_t pid;
	int a;

	rerr = reader_of_killed(l, self, addr, false, &rd);
	serr = reader_of_killed(l, self, addr, true, &sp);

	/* a sender whose reader dies */
	pid = spawn_peer(self, addr, "r");
	a = raccept(l, NULL, NULL);
	EXPECT(a >= 0, "raccept: %s", strerror(errno));
	EXPECT(rsend(a, buf, 1, 0) == 1, "rsend: %s", strerror(errno));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	t0 = now();
	do
		r = rsend(a, buf, sizeof(buf), 0);
	while (r > 0);
	wr = now() - t0;
	werr = errno;
	EXPECT(werr == EPIPE || werr == ECONNRESET, "rsend after the kill: %s",
	       strerror(werr));
	rclose(a);
	printf("killed: the reader in rpoll saw %s after %.2f s, the "
	       "spinning reader %s after %.2f s, the sender %s after "
	       "%.2f s\n",
	       rerr ? strerror(rerr) : "the end of the stream", rd,
	       serr ? strerror(serr) : "the end of the stream", sp,
	       strerror(werr), wr);
}

#define THREAD_BYTES (24u << 20)

struct flow {
	int fd;
	bool send;
	unsigned int seed;
	const char *err;
};

static void *flow_run(void *arg)
{
	static __thread uint8_t buf[70000];
	struct flow *f = arg;
	uint64_t off = 0;
	size_t n = 1;

	while (off < THREAD_BYTES) {
		ssize_t r;

		/* sizes that change, so that messages and reads do not line up */
		n = n * 7 % 69997 + 1;
		if (n > THREAD_BYTES - off)
			n = THREAD_BYTES - off;
		if (f->send) {
			for (size_t i = 0; i < n; i++)
				buf[i] = pat(off + i + f->seed);
			r = rsend(f->fd, buf, n, 0);
		} else {
			r = rrecv(f->fd, buf, n, 0);
			for (ssize_t i = 0; i < r; i++)
				if (buf[i] != pat(off + (uint64_t)i + f->seed)) {
					f->err = "a byte is wrong";
					return NULL;
				}
		}
		if (r <= 0) {
			f->err = f->send ? "rsend failed" : "rrecv failed";
			return NULL;
		}
		off += (uint64_t)r;
	}
	return NULL;
}

static void case_threads(int l)
{
	struct flow f[4];
	pthread_t t[4];
	int c, a;

	pair(l, &c, &a);
	f[0] = (struct flow){ .fd = c, .send = true, .seed = 1 };
	f[1] = (struct flow){ .fd = a, .send = false, .seed = 1 };
	f[2] = (struct flow){ .fd = a, .send = true, .seed = 2 };
	f[3] = (struct flow){ .fd = c, .send = false, .seed = 2 };
	for (int i = 0; i < 4; i++)
		EXPECT(!pthread_create(&t[i], NULL, flow_run, &f[i]),
		       "pthread_create");
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		EXPECT(!f[i].err, "flow %d: %s", i, f[i].err);
	}
	rclose(c);
	rclose(a);
	printf("threads: %u bytes each way, sent and received at once, "
	       "all checked\n",
	       THREAD_BYTES);
}

int main(int argc, char **argv)
{
	const char *c;
	int l;

	if (argc < 4)
		DIE("usage: rs_fail ADDR PORT refused|nonblock|halfclose|killed|threads|all");
	EXPECT(inet_pton(AF_INET, argv[1], &srv.sin_addr) == 1, "bad address");
	port = atoi(argv[2]);
	if (!strcmp(argv[3], "peer"))
		return peer(argc > 4 ? argv[4] : "s");
	signal(SIGPIPE, SIG_IGN);
	/* a bound on everything: a hang is a failure */
	alarm(60);
	c = argv[3];
	l = listener(port);
	if (!strcmp(c, "refused") || !strcmp(c, "all"))
		case_refused(l);
	if (!strcmp(c, "nonblock") || !strcmp(c, "all"))
		case_nonblock(l);
	if (!strcmp(c, "halfclose") || !strcmp(c, "all"))
		case_halfclose(l);
	if (!strcmp(c, "killed") || !strcmp(c, "all"))
		case_killed(l, argv[0], argv[1]);
	if (!strcmp(c, "threads") || !strcmp(c, "all"))
		case_threads(l);
	rclose(l);
	return 0;
}
