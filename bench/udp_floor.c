// SPDX-License-Identifier: MIT
/*
 * udp_floor: what the system calls under a one-way trip over UDP cost on
 * this machine, each on its own (docs/rsocket.md, "The floor over UDP").
 *
 *   udp_floor [ITERS]
 *
 * One process, two sockets on 127.0.0.1 (ports the kernel picks).  A
 * loopback send delivers the datagram to the receiving socket before it
 * returns, so its cost is the sender's half of a one-way trip.  Measured,
 * each as the median over batches of 1000 calls (the receiving socket is
 * emptied between batches, outside the timing):
 *
 *   send_unconnected_ns   sendmsg of 100 bytes to an address, as uroce's
 *                         socket sends (it talks to every peer)
 *   send_ttl_ns           the same with an IP_TTL control message (a QP
 *                         whose address has a hop limit)
 *   send_connected_ns     send on a socket connect()ed to the receiver
 *   recv_one_ns           recvmmsg (16 entries of 64 KiB, MSG_DONTWAIT)
 *                         that brings one datagram, as uroce receives
 *   recv_empty_ns         the same call on an empty socket: one look of
 *                         an application that spins on its CQ
 *   poll_empty_ns         poll() of the socket, timeout 0
 *   clock_ns              clock_gettime(CLOCK_MONOTONIC)
 *
 * Prints them on one line (key=value).  Nothing here is uroce; it
 * measures the machine, as wake_pingpong does for a thread hand-off.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH	 1000
#define RX_SLOTS 16
#define RX_BYTES 65536
#define PAYLOAD	 100

static char rx_buf[RX_SLOTS][RX_BYTES];
static struct mmsghdr rx_msgs[RX_SLOTS];
static struct iovec rx_iov[RX_SLOTS];
static char tx_buf[PAYLOAD];

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int udp_socket(struct sockaddr_in *bound)
{
	socklen_t len = sizeof(*bound);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int big = 64 << 20;

	if (fd < 0)
		die("socket");
	memset(bound, 0, sizeof(*bound));
	bound->sin_family = AF_INET;
	bound->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (bind(fd, (struct sockaddr *)bound, sizeof(*bound)) ||
	    getsockname(fd, (struct sockaddr *)bound, &len))
		die("bind");
	return fd;
}

static int recv_batch(int fd)
{
	return recvmmsg(fd, rx_msgs, RX_SLOTS, MSG_DONTWAIT, NULL);
}

static void drain(int fd)
{
	while (recv_batch(fd) > 0)
		;
}

enum op {
	SEND_UNCONN,
	SEND_TTL,
	SEND_CONN,
	RECV_ONE,
	RECV_EMPTY,
	POLL,
	CLOCK
};

struct ctx {
	int tx, tx_conn, rx;
	struct sockaddr_in to;
};

static void send_to(const struct ctx *c, bool ttl)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { tx_buf, sizeof(tx_buf) };
	struct msghdr m = {
		.msg_name = (void *)&c->to,
		.msg_namelen = sizeof(c->to),
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};

	if (ttl) {
		struct cmsghdr *h;
		int hops = 64;

		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = IPPROTO_IP;
		h->cmsg_type = IP_TTL;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &hops, sizeof(hops));
	}
	if (sendmsg(c->tx, &m, 0) != (ssize_t)sizeof(tx_buf))
		die("sendmsg");
}

/* one batch of BATCH calls of op, in ns a call */
static double batch(const struct ctx *c, enum op op)
{
	struct pollfd p = { .fd = c->rx, .events = POLLIN };
	struct timespec ts;
	double t0, t;
	int i;

	drain(c->rx);
	if (op == RECV_ONE)
		for (i = 0; i < BATCH; i++)
			send_to(c, false);
	t0 = now_ns();
	for (i = 0; i < BATCH; i++) {
		switch (op) {
		case SEND_UNCONN:
		case SEND_TTL:
			send_to(c, op == SEND_TTL);
			break;
		case SEND_CONN:
			if (send(c->tx_conn, tx_buf, sizeof(tx_buf), 0) < 0)
				die("send");
			break;
		case RECV_ONE:
			/* (one entry: each call brings one datagram) */
			if (recvmmsg(c->rx, rx_msgs, 1, MSG_DONTWAIT, NULL) != 1)
				die("recvmmsg");
			break;
		case RECV_EMPTY:
			recv_batch(c->rx);
			break;
		case POLL:
			poll(&p, 1, 0);
			break;
		case CLOCK:
			clock_gettime(CLOCK_MONOTONIC, &ts);
			break;
		}
	}
	t = (now_ns() - t0) / BATCH;
	drain(c->rx);
	return t;
}

static double median_of(const struct ctx *c, enum op op, int batches)
{
	double *v = calloc((size_t)batches, sizeof(*v)), m;
	int i;

	if (!v)
		die("calloc");
	for (i = 0; i < batches; i++)
		v[i] = batch(c, op);
	qsort(v, (size_t)batches, sizeof(*v), cmp_double);
	m = v[batches / 2];
	free(v);
	return m;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {
		[SEND_UNCONN] = "send_unconnected_ns",
		[SEND_TTL] = "send_ttl_ns",
		[SEND_CONN] = "send_connected_ns",
		[RECV_ONE] = "recv_one_ns",
		[RECV_EMPTY] = "recv_empty_ns",
		[POLL] = "poll_empty_ns",
		[CLOCK] = "clock_ns",
	};
	int iters = argc > 1 ? atoi(argv[1]) : 100000, batches, i;
	struct sockaddr_in from, to2;
	struct ctx c;

	if (iters < BATCH) {
		fprintf(stderr, "usage: udp_floor [ITERS >= %d]\n", BATCH);
		return 2;
	}
	batches = iters / BATCH;
	for (i = 0; i < RX_SLOTS; i++) {
		rx_iov[i].iov_base = rx_buf[i];
		rx_iov[i].iov_len = RX_BYTES;
		rx_msgs[i].msg_hdr.msg_iov = &rx_iov[i];
		rx_msgs[i].msg_hdr.msg_iovlen = 1;
	}
	c.rx = udp_socket(&c.to);
	c.tx = udp_socket(&from);
	c.tx_conn = udp_socket(&to2);
	if (connect(c.tx_conn, (struct sockaddr *)&c.to, sizeof(c.to)))
		die("connect");
	for (i = 0; i <= CLOCK; i++)
		printf("%s%s=%.0f", i ? " " : "", names[i],
		       median_of(&c, (enum op)i, batches));
	printf("\n");
	return 0;
}
