// SPDX-License-Identifier: MIT
/* The test programs' out-of-band channel (oob.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "oob.h"

static void (*oob_say)(const char *line);

void uroce_oob_init(void (*say)(const char *line))
{
	oob_say = say;
}

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (oob_say)
		oob_say(line);
	else
		fprintf(stderr, "%s\n", line);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* 0 when fd is ready for events, -1 on error or after timeout_s */
static int fd_wait(int fd, short events, unsigned int timeout_s)
{
	struct pollfd p = { .fd = fd, .events = events };
	int ret;

	do {
		ret = poll(&p, 1, timeout_s ? (int)timeout_s * 1000 : -1);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0) {
		say("poll: %s", strerror(errno));
		return -1;
	}
	if (!ret) {
		say("timed out after %u s waiting for the peer", timeout_s);
		return -1;
	}
	return 0;
}

int uroce_oob_write_file(const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		say("cannot write %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (rename(tmp, path)) {
		say("rename %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* a socket bound to port on every address, IPv6 and IPv4 if it can */
static int bind_any(unsigned long port)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	int one = 1, zero = 0, lfd, ret;

	a6.sin6_addr = in6addr_any;
	a6.sin6_port = htons((uint16_t)port);
	a4.sin_addr.s_addr = htonl(INADDR_ANY);
	a4.sin_port = htons((uint16_t)port);

	lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd >= 0) {
		setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		ret = bind(lfd, (struct sockaddr *)&a6, sizeof(a6));
	} else {
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0) {
			say("socket: %s", strerror(errno));
			return -1;
		}
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		ret = bind(lfd, (struct sockaddr *)&a4, sizeof(a4));
	}
	if (ret || listen(lfd, 1)) {
		say("cannot listen on port %lu: %s", port, strerror(errno));
		close(lfd);
		return -1;
	}
	return lfd;
}

int uroce_oob_listen(const char *name, const char *port_str,
		     const char *port_file, unsigned int timeout_s)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char *end, text[32];
	unsigned long port = strtoul(port_str, &end, 10);
	int one = 1, lfd, fd;

	if (*end || port > 65535) {
		say("bad port %s", port_str);
		return -1;
	}
	lfd = bind_any(port);
	if (lfd < 0)
		return -1;
	if (getsockname(lfd, (struct sockaddr *)&ss, &sl)) {
		say("getsockname: %s", strerror(errno));
		close(lfd);
		return -1;
	}
	port = ntohs(ss.ss_family == AF_INET6 ?
			     ((struct sockaddr_in6 *)&ss)->sin6_port :
			     ((struct sockaddr_in *)&ss)->sin_port);
	printf("%s: listening on port %lu\n", name, port);
	fflush(stdout);
	snprintf(text, sizeof(text), "%lu\n", port);
	if ((port_file && uroce_oob_write_file(port_file, text)) ||
	    fd_wait(lfd, POLLIN, timeout_s)) {
		close(lfd);
		return -1;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	if (fd < 0) {
		say("accept: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int uroce_oob_connect(const char *host, const char *port)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
	}, *res, *ai;
	uint64_t deadline = now_ns() + 10 * 1000000000ull;
	struct timespec pause = { .tv_nsec = 20 * 1000000L };
	int one = 1, ret, e = 0, fd = -1;

	ret = getaddrinfo(host, port, &hints, &res);
	if (ret) {
		say("%s:%s: %s", host, port, gai_strerror(ret));
		return -1;
	}
	/* the server may still be starting: retry refused connects, bounded */
	for (;;) {
		for (ai = res; ai; ai = ai->ai_next) {
			fd = socket(ai->ai_family,
				    ai->ai_socktype | SOCK_CLOEXEC,
				    ai->ai_protocol);
			if (fd < 0) {
				e = errno;
				continue;
			}
			if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
				break;
			e = errno;
			close(fd);
			fd = -1;
		}
		if (fd >= 0 || e != ECONNREFUSED || now_ns() > deadline)
			break;
		nanosleep(&pause, NULL);
	}
	freeaddrinfo(res);
	if (fd < 0) {
		say("cannot connect to %s:%s: %s", host, port, strerror(e));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int uroce_oob_send(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			say("out-of-band send: %s", strerror(errno));
			return UROCE_OOB_ERR;
		}
		p += n;
		len -= (size_t)n;
	}
	return UROCE_OOB_OK;
}

int uroce_oob_recv(int fd, void *buf, size_t len, unsigned int timeout_s)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		if (fd_wait(fd, POLLIN, timeout_s))
			return UROCE_OOB_ERR;
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			say("out-of-band recv: %s", strerror(errno));
			return UROCE_OOB_ERR;
		}
		if (!n)
			return UROCE_OOB_CLOSED;
		p += n;
		len -= (size_t)n;
	}
	return UROCE_OOB_OK;
}
