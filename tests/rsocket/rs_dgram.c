// SPDX-License-Identifier: MIT
/*
 * Datagram sockets, every byte checked.  Written with ordinary socket
 * calls, so that it runs over kernel UDP and, under librspreload, over
 * datagram rsockets; built with RS_DIRECT it makes the rsocket calls
 * itself (rsocket, rsendto, rpoll, ...).
 *
 *   rs_dgram server ADDR PORT
 *   rs_dgram client ADDR PORT COUNT
 *
 * The client (connected: send and recv) sends COUNT datagrams of
 * changing sizes (4 to 1000 bytes), each a sequence number and a pattern
 * of it, and waits for each to come back, sending it again after 200 ms
 * without an answer (datagrams may be lost; each loss is counted).  The
 * server (unconnected: recvfrom/recvmsg and sendto/sendmsg, waiting in
 * poll) checks each and sends it back to where it came from.  One
 * datagram is read with MSG_PEEK first, one into a short buffer
 * (MSG_TRUNC).  A "quit" datagram ends the server.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RS_PROG "rs_dgram"
#include "rs_check.h"

#ifdef RS_DIRECT
#include <rdma/rsocket.h>
#define socket	    rsocket
#define bind	    rbind
#define connect	    rconnect
#define send	    rsend
#define recv	    rrecv
#define sendto	    rsendto
#define recvfrom    rrecvfrom
#define sendmsg	    rsendmsg
#define recvmsg	    rrecvmsg
#define poll	    rpoll
#define close	    rclose
#define getsockname rgetsockname
#endif

/* with rsockets' 8-byte header, one 1024-byte packet (MTU 1500) */
#define MAXSZ 1000

static uint8_t pat(uint32_t seq, size_t i)
{
	uint64_t z = ((uint64_t)seq * 131 + i) * 0x9e3779b97f4a7c15ull;

	return (uint8_t)(z >> 56);
}

static size_t size_of(uint32_t seq)
{
	return 4 + (seq * 97u) % (MAXSZ - 3);
}

static void fill(uint8_t *b, uint32_t seq)
{
	memcpy(b, &seq, 4);
	for (size_t i = 4; i < size_of(seq); i++)
		b[i] = pat(seq, i);
}

/* the sequence number of a well-formed datagram, or DIE */
static uint32_t check(const uint8_t *b, ssize_t n)
{
	uint32_t seq;

	if (n < 4)
		DIE("a datagram of %zd bytes", n);
	memcpy(&seq, b, 4);
	if ((size_t)n != size_of(seq))
		DIE("datagram %u: %zd bytes, expected %zu", seq, n,
		    size_of(seq));
	for (size_t i = 4; i < (size_t)n; i++)
		if (b[i] != pat(seq, i))
			DIE("datagram %u: byte %zu is %u, expected %u", seq, i,
			    b[i], pat(seq, i));
	return seq;
}

static void addr_of(const char *ip, const char *port, struct sockaddr_in *a)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(port));
	if (inet_pton(AF_INET, ip, &a->sin_addr) != 1)
		DIE("bad address %s", ip);
}

static int wait_in(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, ms);

	if (n < 0)
		DIE("poll: %s", strerror(errno));
	return n;
}

static int server(const struct sockaddr_in *me)
{
	static uint8_t buf[MAXSZ + 64];
	unsigned long n_ok = 0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || bind(fd, (const struct sockaddr *)me, sizeof(*me)))
		DIE("socket/bind: %s", strerror(errno));
	for (unsigned long k = 0;; k++) {
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct iovec v = { buf, sizeof(buf) };
		struct msghdr m = { .msg_name = &from,
				    .msg_namelen = flen,
				    .msg_iov = &v,
				    .msg_iovlen = 1 };
		ssize_t n;

		wait_in(fd, -1);
		if (k % 2) {
			n = recvfrom(fd, buf, sizeof(buf), 0,
				     (struct sockaddr *)&from, &flen);
		} else {
			n = recvmsg(fd, &m, 0);
			flen = m.msg_namelen;
		}
		if (n < 0)
			DIE("recv: %s", strerror(errno));
		if (flen != sizeof(from) || from.sin_family != AF_INET)
			DIE("a datagram from an address of %u bytes", flen);
		if (n == 4 && !memcmp(buf, "quit", 4)) {
			sendto(fd, buf, 4, 0, (struct sockaddr *)&from, flen);
			break;
		}
		check(buf, n);
		n_ok++;
		if (k % 2) {
			n = sendto(fd, buf, (size_t)n, 0,
				   (struct sockaddr *)&from, flen);
		} else {
			v.iov_len = (size_t)n;
			m.msg_namelen = flen;
			n = sendmsg(fd, &m, 0);
		}
		if (n < 0)
			DIE("send: %s", strerror(errno));
	}
	printf("echoed %lu datagrams, all checked\n", n_ok);
	close(fd);
	return 0;
}

/* one datagram out and its echo back, resent after 200 ms of silence */
static unsigned int exchange(int fd, const uint8_t *out, size_t len,
			     uint32_t seq, bool quit)
{
	static uint8_t in[MAXSZ + 64];
	unsigned int resent = 0;

	for (;;) {
		if (send(fd, out, len, 0) != (ssize_t)len)
			DIE("send %u: %s", seq, strerror(errno));
		while (wait_in(fd, 200) > 0) {
			ssize_t n = recv(fd, in, sizeof(in), 0);

			if (n < 0)
				DIE("recv: %s", strerror(errno));
			if (quit) {
				if (n == 4 && !memcmp(in, "quit", 4))
					return resent;
				continue;
			}
			/* an older one, answered again after a resend */
			if (check(in, n) == seq)
				return resent;
		}
		if (++resent > 50)
			DIE("datagram %u: no answer after 50 tries", seq);
	}
}

/* MSG_PEEK then the same datagram; a short buffer: MSG_TRUNC */
static void peek_trunc(int fd, uint32_t seq)
{
	uint8_t out[MAXSZ], a[MAXSZ], b[MAXSZ];
	size_t len = size_of(seq);
	struct iovec v = { b, 10 };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	ssize_t n;

	fill(out, seq);
	for (int i = 0; i < 2; i++)
		if (send(fd, out, len, 0) != (ssize_t)len)
			DIE("send: %s", strerror(errno));
	if (!wait_in(fd, 2000))
		DIE("no answer to the peek datagram");
	n = recv(fd, a, sizeof(a), MSG_PEEK);
	if (n != (ssize_t)len || recv(fd, b, sizeof(b), 0) != n ||
	    memcmp(a, b, len))
		DIE("MSG_PEEK did not leave the datagram (%zd)", n);
	check(b, n);
	if (!wait_in(fd, 2000))
		DIE("no second answer to the peek datagram");
	n = recvmsg(fd, &m, 0);
	if (n != 10 || !(m.msg_flags & MSG_TRUNC) || memcmp(b, out, 10))
		DIE("short read: %zd bytes, flags %#x", n, m.msg_flags);
}

static int client(const struct sockaddr_in *peer, unsigned long count)
{
	static uint8_t out[MAXSZ];
	unsigned long resent = 0;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)peer, sizeof(*peer)))
		DIE("socket/connect: %s", strerror(errno));
	for (uint32_t seq = 0; seq < count; seq++) {
		fill(out, seq);
		resent += exchange(fd, out, size_of(seq), seq, false);
	}
	peek_trunc(fd, (uint32_t)count);
	exchange(fd, (const uint8_t *)"quit", 4, 0, true);
	printf("%lu datagrams echoed, all checked (%lu resent)\n", count,
	       resent);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server")) {
		addr_of(argv[2], argv[3], &a);
		return server(&a);
	}
	if (argc == 5 && !strcmp(argv[1], "client")) {
		addr_of(argv[2], argv[3], &a);
		return client(&a, strtoul(argv[4], NULL, 0));
	}
	fprintf(stderr, "usage: rs_dgram server|client ADDR PORT [COUNT]\n");
	return 2;
}
