// SPDX-License-Identifier: MIT
/*
 * udp_pingpong: the UDP round trip that uroce's latency is compared with.
 *
 *   udp_pingpong server [--spin] ADDR PORT
 *   udp_pingpong client [--spin] ADDR PORT SIZE ITERS
 *
 * The client sends SIZE bytes, the server echoes them, ITERS times (after
 * ITERS/10 warm-up rounds), and the client prints one line:
 *
 *   size=S iters=N rtt_min_us=.. rtt_median_us=.. rtt_avg_us=.. rtt_p99_us=..
 *
 * --spin polls the socket with MSG_DONTWAIT (both sides burn a core, as
 * perftest's latency tests do); without it both sides block in recv.
 * A zero-length datagram ends the server.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int spin;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static ssize_t rx(int fd, void *buf, size_t len, struct sockaddr_in *from)
{
	socklen_t fl = sizeof(*from);
	for (;;) {
		ssize_t n = recvfrom(fd, buf, len, spin ? MSG_DONTWAIT : 0,
				     (struct sockaddr *)from, from ? &fl : NULL);
		if (n >= 0)
			return n;
		if (errno == EAGAIN && !spin)
			exit(0); /* SO_RCVTIMEO: nobody is talking */
		if (errno == EAGAIN || errno == EINTR)
			continue;
		die("recvfrom");
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int make_socket(const char *addr, int port, struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		die("socket");
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", addr);
		exit(2);
	}
	return fd;
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[2], "--spin") == 0) {
		spin = 1;
		memmove(&argv[2], &argv[3], (argc - 3) * sizeof(char *));
		argc--;
	}
	if (argc == 4 && strcmp(argv[1], "server") == 0) {
		struct sockaddr_in sa, from;
		int fd = make_socket(argv[2], atoi(argv[3]), &sa);
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			die("bind");
		/* A server nobody talks to goes away after a minute. */
		struct timeval tv = { .tv_sec = 60 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		static char buf[65536];
		printf("ready\n");
		fflush(stdout);
		for (;;) {
			ssize_t n = rx(fd, buf, sizeof(buf), &from);
			if (n == 0)
				return 0;
			if (sendto(fd, buf, n, 0, (struct sockaddr *)&from,
				   sizeof(from)) != n)
				die("sendto");
		}
	}
	if (argc == 6 && strcmp(argv[1], "client") == 0) {
		struct sockaddr_in sa;
		int fd = make_socket(argv[2], atoi(argv[3]), &sa);
		size_t size = strtoul(argv[4], NULL, 0);
		long iters = atol(argv[5]), warm = iters / 10 + 1;
		if (size < 1 || size > 65000 || iters < 1) {
			fprintf(stderr, "size 1..65000, iters >= 1\n");
			return 2;
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			die("connect");
		/* A lost datagram would hang a blocking client: time out. */
		struct timeval tv = { .tv_sec = 2 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		char *buf = calloc(1, size), *rbuf = calloc(1, 65536);
		double *rtt = calloc(iters, sizeof(double));
		for (long i = -warm; i < iters; i++) {
			double t0 = now_us();
			if (send(fd, buf, size, 0) != (ssize_t)size)
				die("send");
			ssize_t n;
			do {
				n = recv(fd, rbuf, 65536,
					 spin ? MSG_DONTWAIT : 0);
			} while (n < 0 && (errno == EAGAIN || errno == EINTR) &&
				 spin);
			if (n < 0)
				die("recv (lost datagram?)");
			if (i >= 0)
				rtt[i] = now_us() - t0;
		}
		send(fd, buf, 0, 0);
		double sum = 0;
		for (long i = 0; i < iters; i++)
			sum += rtt[i];
		qsort(rtt, iters, sizeof(double), cmp_double);
		printf("size=%zu iters=%ld rtt_min_us=%.3f rtt_median_us=%.3f "
		       "rtt_avg_us=%.3f rtt_p99_us=%.3f\n",
		       size, iters, rtt[0], rtt[iters / 2], sum / iters,
		       rtt[(long)(iters * 0.99)]);
		return 0;
	}
	fprintf(stderr,
		"usage: %s server [--spin] ADDR PORT\n"
		"       %s client [--spin] ADDR PORT SIZE ITERS\n",
		argv[0], argv[0]);
	return 2;
}
