// SPDX-License-Identifier: MIT
/*
 * A socket program of ours, written with ordinary socket calls only, so
 * that it runs the same over kernel TCP and, under librspreload, over
 * rsockets.  Every byte is checked.
 *
 *   rs_sock server ADDR PORT BYTES
 *   rs_sock client ADDR PORT BYTES
 *
 * The client sends BYTES in writes of changing sizes (write, send,
 * writev, sendmsg), then shuts its sending side (SHUT_WR); the server
 * reads in changing sizes (read, recv, readv, MSG_WAITALL), waiting in
 * select and poll, until the end of the stream, which must come after
 * exactly BYTES; then it sends BYTES / 2 back over the half-closed
 * connection and closes; the client reads them and then the end of the
 * stream.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RS_PROG "rs_sock"
#include "rs_check.h"

static uint8_t pat(uint64_t i, unsigned int seed)
{
	uint64_t z = (i + seed) * 0x9e3779b97f4a7c15ull;

	return (uint8_t)(z >> 56);
}

static const size_t sizes[] = { 1, 7, 100, 4096, 65537, 300000, 13, 2048 };

static void fill(uint8_t *b, uint64_t off, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(off + i, seed);
}

static void check(const uint8_t *b, uint64_t off, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(off + i, seed))
			DIE("byte %llu is %u, expected %u",
			    (unsigned long long)(off + i), b[i],
			    pat(off + i, seed));
}

static void send_all(int fd, uint64_t total, unsigned int seed)
{
	static uint8_t buf[300000];
	uint64_t off = 0;
	unsigned int k = 0;

	while (off < total) {
		size_t n = sizes[k % 8];
		ssize_t r;

		if (n > total - off)
			n = (size_t)(total - off);
		fill(buf, off, n, seed);
		switch (k++ % 4) {
		case 0:
			r = write(fd, buf, n);
			break;
		case 1:
			r = send(fd, buf, n, 0);
			break;
		case 2: {
			struct iovec v[2] = { { buf, n / 2 },
					      { buf + n / 2, n - n / 2 } };
			r = writev(fd, v, 2);
			break;
		}
		default: {
			struct iovec v = { buf, n };
			struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };

			r = sendmsg(fd, &m, 0);
			break;
		}
		}
		if (r <= 0)
			DIE("send at %llu: %s", (unsigned long long)off,
			    strerror(errno));
		off += (uint64_t)r;
	}
}

/* reads to the end of the stream; returns the byte count */
static uint64_t recv_all(int fd, unsigned int seed)
{
	static uint8_t buf[300000];
	uint64_t off = 0;
	unsigned int k = 0;

	for (;;) {
		size_t n = sizes[(k + 3) % 8];
		ssize_t r;

		switch (k++ % 4) {
		case 0: {
			fd_set rd;

			FD_ZERO(&rd);
			FD_SET(fd, &rd);
			if (select(fd + 1, &rd, NULL, NULL, NULL) != 1)
				DIE("select: %s", strerror(errno));
			r = read(fd, buf, n);
			break;
		}
		case 1: {
			struct pollfd p = { .fd = fd, .events = POLLIN };

			if (poll(&p, 1, -1) != 1)
				DIE("poll: %s", strerror(errno));
			r = recv(fd, buf, n, 0);
			break;
		}
		case 2: {
			struct iovec v[2] = { { buf, n / 2 },
					      { buf + n / 2, n - n / 2 } };
			r = readv(fd, v, 2);
			break;
		}
		default:
			r = recv(fd, buf, n, MSG_WAITALL);
			break;
		}
		if (r < 0)
			DIE("recv at %llu: %s", (unsigned long long)off,
			    strerror(errno));
		if (r == 0)
			return off;
		check(buf, off, (size_t)r, seed);
		off += (uint64_t)r;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	uint64_t bytes, got;
	int fd, one = 1;

	if (argc != 5 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		DIE("usage: rs_sock server|client ADDR PORT BYTES");
	if (inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1)
		DIE("bad address %s", argv[2]);
	sin.sin_port = htons((uint16_t)atoi(argv[3]));
	bytes = strtoull(argv[4], NULL, 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		DIE("socket: %s", strerror(errno));
	if (!strcmp(argv[1], "server")) {
		int c;

		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
		    listen(fd, 1))
			DIE("bind/listen: %s", strerror(errno));
		c = accept(fd, NULL, NULL);
		if (c < 0)
			DIE("accept: %s", strerror(errno));
		got = recv_all(c, 1);
		if (got != bytes)
			DIE("server: the stream ended after %llu bytes, not %llu",
			    (unsigned long long)got, (unsigned long long)bytes);
		/* the client shut only its sending side: we still send */
		send_all(c, bytes / 2, 2);
		close(c);
		close(fd);
		printf("server: received %llu bytes, all checked; sent %llu\n",
		       (unsigned long long)got, (unsigned long long)(bytes / 2));
		return 0;
	}
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		DIE("connect: %s", strerror(errno));
	setsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
	send_all(fd, bytes, 1);
	if (shutdown(fd, SHUT_WR))
		DIE("shutdown: %s", strerror(errno));
	got = recv_all(fd, 2);
	if (got != bytes / 2)
		DIE("client: the stream ended after %llu bytes, not %llu",
		    (unsigned long long)got, (unsigned long long)(bytes / 2));
	close(fd);
	printf("client: sent %llu bytes, received %llu, all checked\n",
	       (unsigned long long)bytes, (unsigned long long)got);
	return 0;
}
