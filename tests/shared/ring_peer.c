// SPDX-License-Identifier: MIT
/*
 * ring_peer - a same-host sender (docs/local.md) that takes a ring from a
 * uroce process and checks that the process reads it.
 *
 *   ring_peer NAME MY_IPV4 TARGET_PID DEST_QPN
 *
 * Connects to the abstract name NAME (uroce/local/<uid>/<address>/<slot>)
 * and sends its hello, then prints "hello" (the target may be stopped: the
 * connection waits in its listener's backlog).  It waits up to 30 s for the
 * answer, then until every thread of TARGET_PID sleeps (the target has
 * done what woke it), then publishes one packet (a UC SEND to DEST_QPN,
 * which need not exist: the ring's reader takes it either way) and rings
 * the doorbell.  The target must take it: exit 0 once the ring's tail
 * moves ("read"); 1 if the target closed the ring while we, its sender,
 * still hold it ("closed": what we published would be lost); 2 on
 * anything else.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "uroce_local.h"

#define UC_SEND_ONLY 0x24 /* IBA 9.2: UC, SEND Only */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* whether the peer has closed the connection (the ring is dropped) */
static bool closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	char b;

	if (poll(&p, 1, 0) != 1)
		return false;
	return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) ||
	       recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
}

/* every thread of pid is asleep (state S): it is not processing events */
static bool all_asleep(const char *pid)
{
	char path[300], buf[512], *p;
	struct dirent *e;
	bool asleep = true;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%s/task", pid);
	d = opendir(path);
	if (!d)
		return false;
	while (asleep && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/task/%s/stat", pid,
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		p = strrchr(buf, ')');
		asleep = p && p[1] == ' ' && p[2] == 'S';
	}
	closedir(d);
	return asleep;
}

static int take_answer(int fd, int *mfd, int *bell)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct lr_answer ans;
	struct iovec iov = { &ans, sizeof(ans) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct cmsghdr *c;
	int fds[2];

	if (poll(&p, 1, 30000) != 1 ||
	    recvmsg(fd, &msg, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(ans))
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(fds)) || ans.magic != LR_MAGIC)
		return -1;
	memcpy(fds, CMSG_DATA(c), sizeof(fds));
	*mfd = fds[0];
	*bell = fds[1];
	return 0;
}

int main(int argc, char **argv)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct lr_hello hello = { .magic = LR_MAGIC };
	struct iovec iov = { &hello, sizeof(hello) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	struct sockaddr_in *me = (struct sockaddr_in *)&hello.addr;
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct lr_shared *ring;
	struct lr_slot *s;
	struct cmsghdr *c;
	uint64_t one = 1;
	uint32_t qpn;
	int fd, room, mfd, bell;
	socklen_t len;
	double until;

	if (argc != 5) {
		fprintf(stderr,
			"usage: ring_peer NAME MY_IPV4 TARGET_PID DEST_QPN\n");
		return 2;
	}
	qpn = (uint32_t)strtoul(argv[4], NULL, 0);
	me->sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[2], &me->sin_addr) != 1)
		return 2;
	snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1, "%s", argv[1]);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			  strlen(argv[1]));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	room = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0 || room < 0 || connect(fd, (struct sockaddr *)&un, len)) {
		perror("ring_peer: connect");
		return 2;
	}
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &room, sizeof(int));
	if (sendmsg(fd, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(hello)) {
		perror("ring_peer: hello");
		return 2;
	}
	printf("hello\n");
	fflush(stdout);
	if (take_answer(fd, &mfd, &bell)) {
		printf("no answer\n");
		return 2;
	}
	ring = mmap(NULL, sizeof(*ring), PROT_READ | PROT_WRITE, MAP_SHARED,
		    mfd, 0);
	if (ring == MAP_FAILED)
		return 2;
	/* the target finishes what woke it (the connection among it) */
	until = now_s() + 20;
	while (!all_asleep(argv[3]) && now_s() < until)
		usleep(1000);
	if (closed(fd)) {
		printf("closed: the target dropped the ring of a live "
		       "sender\n");
		return 1;
	}
	/* one packet in slot 0: BTH (opcode, flags, P_Key, dest QPN, PSN),
	 * a 4-byte payload, room for the ICRC */
	s = &ring->slot[0];
	memset(s->data, 0, 24);
	s->data[0] = UC_SEND_ONLY;
	s->data[2] = s->data[3] = 0xff;
	s->data[5] = (uint8_t)(qpn >> 16);
	s->data[6] = (uint8_t)(qpn >> 8);
	s->data[7] = (uint8_t)qpn;
	s->len = 12 + 4 + 4;
	s->ip_id = 0;
	atomic_store_explicit(&ring->head, 1, memory_order_release);
	if (write(bell, &one, sizeof(one)) != sizeof(one))
		return 2;
	until = now_s() + 20;
	while (now_s() < until) {
		if (atomic_load_explicit(&ring->tail, memory_order_acquire)) {
			printf("read\n");
			return 0;
		}
		if (closed(fd)) {
			printf("closed: the target dropped the ring of a live "
			       "sender\n");
			return 1;
		}
		usleep(1000);
	}
	printf("not read in 20 s\n");
	return 2;
}
