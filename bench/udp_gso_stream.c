// SPDX-License-Identifier: MIT
/*
 * udp_gso_stream: how fast the kernel moves UDP on this path, the ceiling
 * for anything that speaks UDP sockets (uroce included).
 *
 *   udp_gso_stream recv ADDR PORT
 *   udp_gso_stream send ADDR PORT SIZE SEG SECONDS
 *
 * The sender writes SIZE-byte messages for SECONDS.  A message larger than
 * SEG goes out as one UDP_SEGMENT (GSO) send of SEG-byte datagrams (SIZE is
 * capped at 64 segments and 64 KiB, the kernel's limit for one GSO send);
 * smaller ones as plain datagrams, 32 per sendmmsg.  The receiver turns on
 * UDP_GRO, reads with recvmmsg, and prints what arrived, timed from the
 * first to the last datagram (it stops 300 ms after the stream goes
 * quiet):
 *
 *   bytes=B datagrams=D secs=T gbps=G
 *
 * UDP has no flow control: what the receiver could not take is dropped,
 * so the receiver's figure is the one that counts.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

#define BATCH 32
#define RXBUF 65536

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void bufsize(int fd, int opt_force, int opt, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
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

static int do_recv(const char *addr, int port)
{
	struct sockaddr_in sa;
	int fd = make_socket(addr, port, &sa), one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	bufsize(fd, SO_RCVBUFFORCE, SO_RCVBUF, 8 << 20);
	if (setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) < 0)
		perror("UDP_GRO (continuing without)");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	struct timeval tv = { .tv_sec = 30 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	printf("ready\n");
	fflush(stdout);

	static char bufs[8][RXBUF];
	static char ctl[8][CMSG_SPACE(sizeof(int))];
	struct mmsghdr msgs[8];
	struct iovec iov[8];
	unsigned long long bytes = 0, dgrams = 0;
	double first = 0, last = 0;
	for (;;) {
		for (int i = 0; i < 8; i++) {
			iov[i] = (struct iovec){ bufs[i], RXBUF };
			msgs[i].msg_hdr = (struct msghdr){
				.msg_iov = &iov[i],
				.msg_iovlen = 1,
				.msg_control = ctl[i],
				.msg_controllen = sizeof(ctl[i])
			};
		}
		int n = recvmmsg(fd, msgs, 8, 0, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break; /* quiet: the stream is over */
			die("recvmmsg");
		}
		double t = now_s();
		if (!bytes) {
			first = t;
			tv = (struct timeval){ .tv_usec = 300000 };
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		}
		last = t;
		for (int i = 0; i < n; i++) {
			unsigned len = msgs[i].msg_len, seg = len;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr);
			     c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
				if (c->cmsg_level == SOL_UDP &&
				    c->cmsg_type == UDP_GRO)
					memcpy(&seg, CMSG_DATA(c), sizeof(int));
			bytes += len;
			dgrams += seg ? (len + seg - 1) / seg : 1;
		}
	}
	double secs = last - first;
	printf("bytes=%llu datagrams=%llu secs=%.6f gbps=%.4f\n", bytes, dgrams,
	       secs, secs > 0 ? bytes * 8 / secs / 1e9 : 0.0);
	return bytes ? 0 : 1;
}

static int do_send(const char *addr, int port, size_t size, int seg,
		   double seconds)
{
	struct sockaddr_in sa;
	int fd = make_socket(addr, port, &sa);
	bufsize(fd, SO_SNDBUFFORCE, SO_SNDBUF, 8 << 20);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	int gso = size > (size_t)seg;
	if (gso) {
		size_t max = 65507 - 8; /* one IP datagram's worth */
		if (size > (size_t)seg * 64)
			size = (size_t)seg * 64;
		if (size > max)
			size = max / seg * seg;
		if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg)) < 0)
			die("UDP_SEGMENT");
	}
	char *buf = calloc(1, size);
	struct mmsghdr msgs[BATCH];
	struct iovec iov = { buf, size };
	for (int i = 0; i < BATCH; i++)
		msgs[i].msg_hdr = (struct msghdr){ .msg_iov = &iov,
						   .msg_iovlen = 1 };
	unsigned long long bytes = 0, calls = 0;
	double t0 = now_s(), end = t0 + seconds, t;
	for (;;) {
		int n = sendmmsg(fd, msgs, gso ? 1 : BATCH, 0);
		if (n < 0 && errno != ECONNREFUSED && errno != ENOBUFS &&
		    errno != EAGAIN && errno != EINTR)
			die("sendmmsg"); /* else: receiver full or not there yet */
		if (n > 0)
			bytes += (unsigned long long)n * size;
		if ((++calls & 15) == 0 && now_s() >= end)
			break;
	}
	t = now_s() - t0;
	printf("sent_bytes=%llu size=%zu seg=%d gso=%d secs=%.6f gbps=%.4f\n",
	       bytes, size, seg, gso, t, bytes * 8 / t / 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "recv") == 0)
		return do_recv(argv[2], atoi(argv[3]));
	if (argc == 7 && strcmp(argv[1], "send") == 0)
		return do_send(argv[2], atoi(argv[3]), strtoul(argv[4], NULL, 0),
			       atoi(argv[5]), atof(argv[6]));
	fprintf(stderr,
		"usage: %s recv ADDR PORT\n"
		"       %s send ADDR PORT SIZE SEG SECONDS\n",
		argv[0], argv[0]);
	return 2;
}
