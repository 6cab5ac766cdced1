// SPDX-License-Identifier: MIT
/*
 * Every r* call of rdma/rsocket.h on descriptors that are not rsockets
 * (a pipe, a UNIX socket pair, a TCP connection on loopback) must behave
 * as the kernel call it stands for: librspreload hands every select and
 * poll to rpoll, ordinary descriptors included.  Each check says what the
 * kernel would answer; exit 0 when all hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <rdma/rsocket.h>

static int failures;

#define CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "FAIL line %d: %s (errno %d %s)\n", \
				__LINE__, #cond, errno, strerror(errno)); \
			failures++; \
		} \
	} while (0)

static void check_pipe(void)
{
	struct pollfd pfd[2];
	char buf[16];
	int p[2];

	CHECK(pipe(p) == 0);
	pfd[0] = (struct pollfd){ .fd = p[0], .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = p[1], .events = POLLOUT };
	/* nothing to read yet, the write end is writable */
	CHECK(rpoll(pfd, 2, 0) == 1);
	CHECK(pfd[0].revents == 0 && pfd[1].revents == POLLOUT);
	CHECK(rwrite(p[1], "abc", 3) == 3);
	CHECK(rpoll(pfd, 1, 1000) == 1 && pfd[0].revents == POLLIN);
	CHECK(rread(p[0], buf, sizeof(buf)) == 3 && !memcmp(buf, "abc", 3));

	/* O_NONBLOCK through rfcntl: an empty pipe gives EAGAIN */
	CHECK(rfcntl(p[0], F_SETFL, rfcntl(p[0], F_GETFL) | O_NONBLOCK) == 0);
	CHECK(fcntl(p[0], F_GETFL) & O_NONBLOCK);
	errno = 0;
	CHECK(rread(p[0], buf, 1) == -1 && errno == EAGAIN);

	/* select: writable, not readable; then readable, with a timeout */
	fd_set r, w;
	struct timeval tv = { 0, 0 };
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(p[0], &r);
	FD_SET(p[1], &w);
	CHECK(rselect(p[1] + 1, &r, &w, NULL, &tv) == 1);
	CHECK(!FD_ISSET(p[0], &r) && FD_ISSET(p[1], &w));
	struct iovec iov[2] = { { "de", 2 }, { "f", 1 } };
	CHECK(rwritev(p[1], iov, 2) == 3);
	FD_ZERO(&r);
	FD_SET(p[0], &r);
	tv = (struct timeval){ 1, 0 };
	CHECK(rselect(p[0] + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(p[0], &r));
	char a[2], b[4];
	struct iovec riov[2] = { { a, 2 }, { b, 4 } };
	CHECK(rreadv(p[0], riov, 2) == 3 && !memcmp(a, "de", 2) && b[0] == 'f');

	/* the write end's close is a hang-up on the read end */
	CHECK(rclose(p[1]) == 0);
	pfd[0].revents = 0;
	CHECK(rpoll(pfd, 1, 1000) == 1 && (pfd[0].revents & POLLHUP));
	CHECK(rread(p[0], buf, 1) == 0);
	CHECK(rclose(p[0]) == 0);
	errno = 0;
	CHECK(rclose(p[0]) == -1 && errno == EBADF);

	/* a closed descriptor in rpoll is POLLNVAL, as poll says */
	pfd[0] = (struct pollfd){ .fd = p[0], .events = POLLIN };
	CHECK(rpoll(pfd, 1, 0) == 1 && pfd[0].revents == POLLNVAL);
	/* negative descriptors are ignored */
	pfd[0] = (struct pollfd){ .fd = -1, .events = POLLIN };
	CHECK(rpoll(pfd, 1, 0) == 0 && pfd[0].revents == 0);
}

static void check_unix(void)
{
	struct msghdr mh = { 0 };
	struct iovec iov;
	char buf[16];
	int s[2];

	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, s) == 0);
	CHECK(rsend(s[0], "one", 3, 0) == 3);
	CHECK(rrecv(s[1], buf, sizeof(buf), MSG_PEEK) == 3);
	CHECK(rrecv(s[1], buf, sizeof(buf), 0) == 3 && !memcmp(buf, "one", 3));
	iov = (struct iovec){ "two", 3 };
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	CHECK(rsendmsg(s[0], &mh, 0) == 3);
	iov = (struct iovec){ buf, sizeof(buf) };
	CHECK(rrecvmsg(s[1], &mh, 0) == 3 && !memcmp(buf, "two", 3));
	CHECK(rsendto(s[0], "3", 1, 0, NULL, 0) == 1);
	CHECK(rrecvfrom(s[1], buf, sizeof(buf), 0, NULL, NULL) == 1);
	errno = 0;
	CHECK(rrecv(s[1], buf, sizeof(buf), MSG_DONTWAIT) == -1 &&
	      errno == EAGAIN);
	/* options go to the kernel */
	int v = 65536, got = 0;
	socklen_t len = sizeof(got);
	CHECK(rsetsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) == 0);
	CHECK(rgetsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &got, &len) == 0);
	CHECK(got >= v);
	close(s[0]);
	close(s[1]);
}

static void check_tcp(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET }, name, peer;
	socklen_t len = sizeof(sin);
	int l, c, a, one = 1, got = 0;
	char buf[16];

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK((l = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	CHECK(rbind(l, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	CHECK(rlisten(l, 4) == 0);
	CHECK(rgetsockname(l, (struct sockaddr *)&sin, &len) == 0);
	CHECK(sin.sin_port != 0);
	CHECK((c = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	CHECK(rconnect(c, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	len = sizeof(peer);
	CHECK((a = raccept(l, (struct sockaddr *)&peer, &len)) >= 0);
	len = sizeof(name);
	CHECK(rgetsockname(c, (struct sockaddr *)&name, &len) == 0);
	CHECK(name.sin_port == peer.sin_port);
	len = sizeof(peer);
	CHECK(rgetpeername(c, (struct sockaddr *)&peer, &len) == 0);
	CHECK(peer.sin_port == sin.sin_port);
	CHECK(rsetsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0);
	len = sizeof(got);
	CHECK(rgetsockopt(c, IPPROTO_TCP, TCP_NODELAY, &got, &len) == 0 && got);

	/* a half-close: the peer reads its data, then end of file */
	CHECK(rwrite(c, "xyz", 3) == 3);
	CHECK(rshutdown(c, SHUT_WR) == 0);
	struct pollfd pfd = { .fd = a, .events = POLLIN };
	CHECK(rpoll(&pfd, 1, 1000) == 1 && (pfd.revents & POLLIN));
	CHECK(rrecv(a, buf, sizeof(buf), MSG_WAITALL) == 3);
	CHECK(rrecv(a, buf, sizeof(buf), 0) == 0);
	/* the other direction still works */
	CHECK(rsend(a, "back", 4, 0) == 4);
	CHECK(rread(c, buf, sizeof(buf)) == 4 && !memcmp(buf, "back", 4));
	CHECK(rclose(a) == 0 && rclose(c) == 0 && rclose(l) == 0);
}

int main(void)
{
	check_pipe();
	check_unix();
	check_tcp();
	if (failures) {
		fprintf(stderr, "rs_passthrough: %d checks failed\n", failures);
		return 1;
	}
	printf("rs_passthrough: all checks passed\n");
	return 0;
}
