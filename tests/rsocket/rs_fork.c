// SPDX-License-Identifier: MIT
/*
 * A server that forks a process per connection, as inetd-style servers
 * do, written with ordinary socket calls: under librspreload with
 * RDMAV_FORK_SAFE=1 each connection becomes an rsocket in the child that
 * serves it (docs/rsocket.md, "Fork").  Every byte is checked.
 *
 *   rs_fork server ADDR PORT CONNS BYTES
 *   rs_fork client ADDR PORT CONNS BYTES
 *
 * The client makes CONNS connections one after the other: on each it
 * sends BYTES (a pattern of the connection's number, which its first 4
 * bytes carry), shuts its sending side and reads them back; it reads
 * each connection's end of stream only once every connection has had its
 * bytes back.  (One after the other: librspreload's children take turns
 * listening for the rsocket that replaces their connection, in the order
 * they get to it, and a client that waits on another connection than the
 * one whose child listens waits forever.)
 * The server accepts CONNS connections, forking a child for each that
 * checks what it reads and sends it back.  The children overlap: each
 * keeps its connection open until the server has accepted the last one,
 * so every child after the first rlistens on the port while earlier
 * children live, each with its connection up (docs/rsocket.md, "Fork").
 * The server waits for every child and fails if one did.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RS_PROG "rs_fork"
#include "rs_check.h"

#define CHUNK	65536
#define MAXCONN 16

static uint8_t pat(uint64_t i, uint32_t conn)
{
	uint64_t z = (i + (uint64_t)conn * 1000003) * 0x9e3779b97f4a7c15ull;

	return (uint8_t)(z >> 56);
}

static void fill(uint8_t *b, uint64_t off, size_t n, uint32_t conn)
{
	for (size_t i = 0; i < n; i++)
		b[i] = off + i < 4 ? ((uint8_t *)&conn)[off + i] :
				     pat(off + i, conn);
}

static void check(const uint8_t *b, uint64_t off, size_t n, uint32_t conn)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t want = off + i < 4 ? ((uint8_t *)&conn)[off + i] :
					     pat(off + i, conn);

		if (b[i] != want)
			DIE("connection %u: byte %llu is %u, expected %u", conn,
			    (unsigned long long)(off + i), b[i], want);
	}
}

static void write_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t r = write(fd, b, n);

		if (r <= 0)
			DIE("write: %s", r ? strerror(errno) : "0");
		b += r;
		n -= (size_t)r;
	}
}

/* the child: check and echo until the end of the stream, then close
 * once the server has accepted every connection (it closes `done`) */
static int serve(int fd, int done, uint64_t bytes)
{
	static uint8_t buf[CHUNK];
	uint32_t conn = 0;
	uint64_t off = 0;
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n && off + (uint64_t)i < 4; i++)
			((uint8_t *)&conn)[off + (uint64_t)i] = buf[i];
		check(buf, off, (size_t)n, conn);
		write_all(fd, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (n < 0)
		DIE("read: %s", strerror(errno));
	if (off != bytes)
		DIE("connection %u: %llu bytes, expected %llu", conn,
		    (unsigned long long)off, (unsigned long long)bytes);
	while ((n = read(done, buf, 1)) < 0 && errno == EINTR)
		;
	close(fd);
	return 0;
}

static int server(const struct sockaddr_in *a, int conns, uint64_t bytes)
{
	int one = 1, bad = 0, st, done[2], lfd = socket(AF_INET, SOCK_STREAM, 0);
	pid_t kids[MAXCONN];

	if (lfd < 0 || pipe(done))
		DIE("socket/pipe: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (const struct sockaddr *)a, sizeof(*a)) ||
	    listen(lfd, MAXCONN))
		DIE("bind/listen: %s", strerror(errno));
	for (int i = 0; i < conns; i++) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0)
			DIE("accept: %s", strerror(errno));
		kids[i] = fork();
		if (kids[i] < 0)
			DIE("fork: %s", strerror(errno));
		if (!kids[i]) {
			close(lfd);
			close(done[1]);
			exit(serve(fd, done[0], bytes));
		}
		close(fd);
	}
	close(lfd);
	close(done[1]);
	for (int i = 0; i < conns; i++)
		if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			bad++;
	if (bad)
		DIE("%d of %d children failed", bad, conns);
	printf("served %d connections in %d processes, all checked\n", conns,
	       conns);
	return 0;
}

static int client(const struct sockaddr_in *a, int conns, uint64_t bytes)
{
	static uint8_t buf[CHUNK];
	int fds[MAXCONN];
	ssize_t n;

	for (int i = 0; i < conns; i++) {
		uint64_t off = 0, back = 0;

		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 ||
		    connect(fds[i], (const struct sockaddr *)a, sizeof(*a)))
			DIE("connect %d: %s", i, strerror(errno));
		while (off < bytes) {
			size_t k = bytes - off < CHUNK ? (size_t)(bytes - off) :
							 CHUNK;

			fill(buf, off, k, (uint32_t)i);
			write_all(fds[i], buf, k);
			off += k;
		}
		if (shutdown(fds[i], SHUT_WR))
			DIE("shutdown: %s", strerror(errno));
		while (back < bytes &&
		       (n = read(fds[i], buf,
				 bytes - back < CHUNK ? (size_t)(bytes - back) :
							CHUNK)) > 0) {
			check(buf, back, (size_t)n, (uint32_t)i);
			back += (uint64_t)n;
		}
		if (back != bytes)
			DIE("connection %d: %llu bytes back (%s)", i,
			    (unsigned long long)back,
			    n < 0 ? strerror(errno) : "end of stream");
	}
	for (int i = 0; i < conns; i++) {
		n = read(fds[i], buf, sizeof(buf));
		if (n)
			DIE("connection %d: %s after the echo, not the end of "
			    "the stream",
			    i, n < 0 ? strerror(errno) : "more bytes");
		close(fds[i]);
	}
	printf("%d connections, %llu bytes each way, all checked\n", conns,
	       (unsigned long long)bytes);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int conns;
	uint64_t bytes;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 6 || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) {
		fprintf(stderr,
			"usage: rs_fork server|client ADDR PORT CONNS BYTES\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[3]));
	conns = atoi(argv[4]);
	bytes = strtoull(argv[5], NULL, 0);
	if (conns < 1 || conns > MAXCONN || bytes < 4)
		DIE("1 to %d connections of at least 4 bytes", MAXCONN);
	if (!strcmp(argv[1], "server"))
		return server(&a, conns, bytes);
	return client(&a, conns, bytes);
}
