// SPDX-License-Identifier: MIT
/*
 * The same-host path (local.h, docs/local.md): discovery by abstract
 * AF_UNIX names, the handshake that hands a receiver's ring to its
 * sender, and the listeners' setup and teardown.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "local.h"

static socklen_t lr_name(char *out, size_t outlen,
			 const struct sockaddr_storage *ss, uint32_t slot,
			 struct sockaddr_un *un)
{
	char ip[INET6_ADDRSTRLEN];
	int n;

	uroce_addr_ntop(ss, ip, sizeof(ip));
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1,
		     "uroce/local/%u/%s/%u", (unsigned)getuid(), ip, slot);
	if (out)
		snprintf(out, outlen, "%s", un->sun_path + 1);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static bool same_uid(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) &&
	       cr.uid == getuid();
}

/* a connection, watched for its end closing */
static void epoll_add(struct uroce_dev *dev, struct uroce_watcher *w, int fd)
{
	uroce_watcher_add(dev->prog.epfd, w, fd, EPOLLIN | EPOLLRDHUP);
}

/* ---- a sender connects: its ring ---- */

/*
 * A ring for the sender at the other end of fd (from src; room_bell: its
 * eventfd, taken over, or -1): made, mapped and published; returns its
 * memfd for the sender (-errno: none, fd and room_bell left to the
 * caller).  acc_lock held.
 */
static int in_make(struct uroce_dev *dev, struct uroce_local *L, int fd,
		   const struct sockaddr_storage *src, int room_bell)
{
	struct lin *in;
	int mfd, i;

	uroce_assert_held(&L->acc_lock);
	for (i = 0; i < LR_MAX_IN; i++)
		if (!atomic_load(&L->in[i]) && L->in_fd[i] < 0)
			break;
	if (i == LR_MAX_IN)
		return -ENOSPC;
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	mfd = memfd_create("uroce-local", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, sizeof(struct lr_shared)) ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL))
		goto fail;
	in->ring = mmap(NULL, sizeof(struct lr_shared), PROT_READ | PROT_WRITE,
			MAP_SHARED, mfd, 0);
	if (in->ring == MAP_FAILED)
		goto fail;
	in->fd = fd;
	in->src = *src;
	in->room_bell = room_bell;
	/* the sender rings until the progress thread has looked at the
	 * ring: it may sleep since before the ring was made (a ring of our
	 * own, self_ring, is made without waking it), and would never set
	 * sleeping on it, so a packet that no poll of ours took would wait
	 * for ever (the last message of a ping-pong between two QPs of
	 * this process, UD or UC, which do not retransmit) */
	atomic_store_explicit(&in->ring->sleeping, 1, memory_order_relaxed);
	L->in_fd[i] = fd;
	atomic_store_explicit(&L->in[i], in, memory_order_release);
	epoll_add(dev, &L->in_w[i], fd);
	uroce_count(dev, UROCE_CNT_LOCAL_ACCEPTS, 1);
	return mfd;
fail:
	if (mfd >= 0)
		close(mfd);
	free(in);
	return -ENOMEM;
}

/* Close the descriptors a message brought that we will not keep (a
 * count we did not ask for); at most max fit in the caller's buffer,
 * the kernel closed the rest (MSG_CTRUNC). */
static void cmsg_close_fds(const struct cmsghdr *c, size_t max)
{
	size_t k, nfd;
	int f;

	if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len < CMSG_LEN(0))
		return;
	nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	for (k = 0; k < nfd && k < max; k++) {
		memcpy(&f, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
		close(f);
	}
}

/*
 * The sender's hello, and the eventfd it may give (*room, else -1) to
 * be rung when it waits for room.  Any other descriptor count is not a
 * hello of ours.  0, or -EPROTO.
 */
static int hello_take(const struct uroce_dev *dev, int fd,
		      struct lr_hello *hello, int *room)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = hello, .iov_len = sizeof(*hello) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *c;
	ssize_t n;

	*room = -1;
	n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int))) {
		memcpy(room, CMSG_DATA(c), sizeof(int));
	} else if (c) {
		cmsg_close_fds(c, 2); /* (two fit in the buffer) */
		return -EPROTO;
	}
	/* (it must never block us: a sender's eventfd already is so) */
	if (n != (ssize_t)sizeof(*hello) || (msg.msg_flags & MSG_CTRUNC) ||
	    hello->magic != LR_MAGIC ||
	    hello->addr.ss_family != dev->net.family ||
	    (*room >= 0 && fcntl(*room, F_SETFL, O_NONBLOCK))) {
		if (*room >= 0)
			close(*room);
		*room = -1;
		return -EPROTO;
	}
	return 0;
}

/* A connection on a listener: answer it with a ring; acc_lock held. */
void lr_accept_one(struct uroce_dev *dev, struct uroce_local *L, int lfd)
{
	struct lr_answer ans = {
		.magic = LR_MAGIC,
		.slot = uroce_share_slot(dev),
		.alone = !dev->net.share,
		.size = sizeof(struct lr_shared),
	};
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = &ans, .iov_len = sizeof(ans) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct pollfd p = { .events = POLLIN };
	struct lr_hello hello;
	struct cmsghdr *c;
	int fd, mfd, fds[2], room = -1;

	uroce_assert_held(&L->acc_lock);
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (!same_uid(fd))
		goto fail;
	p.fd = fd;
	if (poll(&p, 1, LR_HELLO_MS) != 1 || hello_take(dev, fd, &hello, &room))
		goto fail;
	mfd = in_make(dev, L, fd, &hello.addr, room);
	if (mfd < 0)
		goto fail;
	fds[0] = mfd;
	fds[1] = L->bell;
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	/* (if this fails the sender sees the close; the poller reaps) */
	if (sendmsg(fd, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(ans))
		shutdown(fd, SHUT_RDWR);
	close(mfd);
	return;
fail:
	if (room >= 0)
		close(room);
	close(fd);
}

/* ---- connecting to a peer (tx_lock held) ---- */

/* Serve our own listeners while we wait for a peer's answer: it may be
 * waiting for ours. */
static void serve_own(struct uroce_dev *dev, struct uroce_local *L,
		      struct pollfd *p, int np)
{
	int i;

	for (i = 1; i < np; i++) {
		if (!(p[i].revents & POLLIN))
			continue;
		pthread_mutex_lock(&L->acc_lock);
		lr_accept_one(dev, L, p[i].fd);
		pthread_mutex_unlock(&L->acc_lock);
	}
}

/* The answer: two descriptors, a memfd of the ring's size sealed against
 * shrinking and the doorbell.  0, or -errno: not a ring we can use. */
static int take_answer(struct uroce_local *L, struct lout *o, int fd,
		       uint8_t want)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct lr_answer ans;
	struct iovec iov = { .iov_base = &ans, .iov_len = sizeof(ans) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *c;
	struct stat st;
	int fds[2] = { -1, -1 }, err = -EPROTO, seals;
	ssize_t n;

	(void)L;
	n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(fds)))
		memcpy(fds, CMSG_DATA(c), sizeof(fds));
	else if (c) {
		cmsg_close_fds(c, 2); /* (a count we did not ask for) */
		goto out;
	}
	if (n != (ssize_t)sizeof(ans) || (msg.msg_flags & MSG_CTRUNC) ||
	    fds[0] < 0 || fds[1] < 0 || ans.magic != LR_MAGIC ||
	    ans.size != sizeof(struct lr_shared))
		goto out;
	/* ".../0" is for QP1 (the member there steers it) and for every
	 * QPN of a device alone; another slot's name must be that slot */
	if (want && ans.slot != want && !ans.alone)
		goto out;
	seals = fcntl(fds[0], F_GET_SEALS);
	if (fstat(fds[0], &st) || st.st_size != (off_t)sizeof(struct lr_shared) ||
	    seals < 0 || !(seals & F_SEAL_SHRINK) || !(seals & F_SEAL_SEAL))
		goto out;
	/* a doorbell that is not an eventfd must not block us */
	if (fcntl(fds[1], F_SETFL, O_NONBLOCK))
		goto out;
	o->ring = mmap(NULL, sizeof(struct lr_shared), PROT_READ | PROT_WRITE,
		       MAP_SHARED, fds[0], 0);
	if (o->ring == MAP_FAILED) {
		o->ring = NULL;
		goto out;
	}
	o->bell = fds[1];
	fds[1] = -1;
	o->alone = ans.alone;
	o->head = atomic_load(&o->ring->head);
	err = 0;
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return err;
}

/* a ring to o is up on its connection fd: the poller watches fd, and
 * requesters ask for their peers' paths again (engine/req.c ring_slots) */
static void out_up(struct uroce_dev *dev, struct lout *o, int fd)
{
	atomic_store(&o->fd, fd);
	o->up = true;
	atomic_fetch_add_explicit(&dev->net.path_gen, 1, memory_order_relaxed);
	epoll_add(dev, &o->w, fd);
	uroce_count(dev, UROCE_CNT_LOCAL_CONNECTS, 1);
}

/*
 * Packets to ourselves (two QPs of this process): a ring of our own,
 * made without a handshake (we would wait for our own progress thread);
 * a socketpair stands for the connection, so that it goes down the
 * same way.
 */
static int self_ring(struct uroce_dev *dev, struct uroce_local *L,
		     struct lout *o)
{
	int sv[2], mfd, room;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       0, sv))
		return -errno;
	room = dup(L->bell);
	pthread_mutex_lock(&L->acc_lock);
	mfd = room < 0 ? -errno : in_make(dev, L, sv[0], &dev->net.local, room);
	pthread_mutex_unlock(&L->acc_lock);
	if (mfd < 0) {
		if (room >= 0)
			close(room);
		close(sv[0]);
		close(sv[1]);
		return mfd;
	}
	o->ring = mmap(NULL, sizeof(struct lr_shared), PROT_READ | PROT_WRITE,
		       MAP_SHARED, mfd, 0);
	close(mfd);
	o->bell = dup(L->bell);
	if (o->ring == MAP_FAILED || o->bell < 0) {
		o->ring = o->ring == MAP_FAILED ? NULL : o->ring;
		shutdown(sv[1], SHUT_RDWR); /* the poller reaps ours */
		close(sv[1]);
		return -ENOMEM;
	}
	o->self = true;
	o->alone = !dev->net.share;
	o->head = 0;
	out_up(dev, o, sv[1]);
	return 0;
}

/* the hello, with our doorbell: the receiver rings it when it made room
 * in a ring we wait on */
static int hello_send(struct uroce_local *L, int fd,
		      const struct lr_hello *hello)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl = { .buf = { 0 } }; /* its padding too (valgrind) */
	struct iovec iov = { .iov_base = (void *)hello,
			     .iov_len = sizeof(*hello) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &L->bell, sizeof(int));
	return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(*hello) ?
		       0 :
		       -EPIPE;
}

int lr_out_connect(struct uroce_dev *dev, struct uroce_local *L, struct lout *o)
{
	struct lr_hello hello = { .magic = LR_MAGIC };
	struct pollfd p[3];
	struct sockaddr_un un;
	socklen_t len;
	uint64_t until;
	int fd, i, np = 1;

	len = lr_name(NULL, 0, &o->addr, o->sbyte, &un);
	for (i = 0; i < L->nl; i++)
		if (!strcmp(un.sun_path + 1, L->names[i]))
			return self_ring(dev, L, o);
	fd = uroce_socket(AF_UNIX,
			  SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&un, len) || !same_uid(fd))
		goto fail;
	hello.slot = uroce_share_slot(dev);
	hello.addr = dev->net.local;
	if (hello_send(L, fd, &hello))
		goto fail;
	p[0].fd = fd;
	p[0].events = POLLIN;
	for (i = 0; i < L->nl; i++) {
		p[np].fd = L->lfd[i];
		p[np++].events = POLLIN;
	}
	until = uroce_now_ns() + LR_HELLO_MS * 1000000ull;
	for (;;) {
		uint64_t now = uroce_now_ns();

		if (now >= until)
			goto fail;
		if (poll(p, (nfds_t)np, (int)((until - now) / 1000000) + 1) < 0 &&
		    errno != EINTR)
			goto fail;
		serve_own(dev, L, p, np);
		if (p[0].revents)
			break;
	}
	if (take_answer(L, o, fd, o->sbyte))
		goto fail;
	out_up(dev, o, fd);
	return 0;
fail:
	close(fd);
	return -ECONNREFUSED;
}

/* ---- setup ---- */

static int listen_on(struct uroce_local *L, struct uroce_dev *dev, uint32_t slot)
{
	struct sockaddr_un un;
	socklen_t len = lr_name(L->names[L->nl], sizeof(L->names[0]),
				&dev->net.local, slot, &un);
	int fd = uroce_socket(AF_UNIX,
			      SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&un, len) || listen(fd, 64)) {
		int err = -errno;

		close(fd);
		return err;
	}
	L->lfd[L->nl++] = fd;
	return 0;
}

static void listeners_open(struct uroce_dev *dev, struct uroce_local *L)
{
	uint32_t slot = uroce_share_slot(dev);

	L->nl = 0;
	if (listen_on(L, dev, slot))
		uroce_log(UROCE_LOG_DEBUG, "local: no listener for slot %u",
			  slot);
	/* QP1 and the QPNs of a device alone: the address's first member
	 * (the name is taken: another member has it) */
	if (slot)
		listen_on(L, dev, 0);
}

/* (the listeners change under acc_lock: the progress thread matches
 * its descriptors against them) */
static void all_close(struct uroce_dev *dev, struct uroce_local *L)
{
	int i;

	pthread_mutex_lock(&L->acc_lock);
	for (i = 0; i < L->nl; i++)
		close(L->lfd[i]);
	L->nl = 0;
	pthread_mutex_unlock(&L->acc_lock);
	for (i = 0; i < LR_MAX_IN; i++)
		lr_reap(L, i);
	for (i = 0; i < LR_MAX_OUT; i++) {
		if (L->out[i].used)
			lr_out_down(L, &L->out[i]);
		L->out[i].used = false;
	}
	L->last = NULL;
	memset(L->far, 0, sizeof(L->far));
	(void)dev;
}

int uroce_local_open(struct uroce_dev *dev)
{
	struct uroce_local *L;
	int i;

	dev->net.local_path = NULL;
	if (!uroce_config()->local)
		return 0;
	L = calloc(1, sizeof(*L));
	if (!L)
		return -ENOMEM;
	pthread_mutex_init(&L->acc_lock, NULL);
	L->bell_w.fn = lr_bell_ready;
	L->bell_w.packets = true;
	for (i = 0; i < 2; i++)
		L->lfd_w[i].fn = lr_lfd_ready;
	for (i = 0; i < LR_MAX_IN; i++) {
		L->in_fd[i] = -1;
		L->in_w[i].fn = lr_in_ready;
	}
	for (i = 0; i < LR_MAX_OUT; i++) {
		atomic_store(&L->out[i].fd, -1);
		L->out[i].w.fn = lr_out_ready;
	}
	L->bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (L->bell < 0) {
		free(L);
		return -errno;
	}
	dev->net.local_path = L;
	listeners_open(dev, L);
	return 0;
}

static void watch_listeners(struct uroce_dev *dev, struct uroce_local *L)
{
	int i;

	for (i = 0; i < L->nl; i++)
		uroce_watcher_add(dev->prog.epfd, &L->lfd_w[i], L->lfd[i],
				  EPOLLIN);
}

void uroce_local_watch(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);

	if (!L || dev->prog.epfd < 0)
		return;
	uroce_progress_watch_bell(dev, &L->bell_w, L->bell);
	watch_listeners(dev, L);
}

/* the device moved to another address (rx_lock and dev->lock held) */
void uroce_local_rebind(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);

	uroce_assert_held(&dev->lock);
	uroce_assert_held(&dev->prog.rx_lock);
	if (!L)
		return;
	pthread_mutex_lock(&dev->tx.tx_lock);
	all_close(dev, L);
	pthread_mutex_lock(&L->acc_lock);
	listeners_open(dev, L);
	pthread_mutex_unlock(&L->acc_lock);
	pthread_mutex_unlock(&dev->tx.tx_lock);
	watch_listeners(dev, L);
}

void uroce_local_close(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);

	if (!L)
		return;
	/* (a thread still sending holds tx_lock: it finds no path after) */
	pthread_mutex_lock(&dev->tx.tx_lock);
	lr_queues_settle(dev, L);
	all_close(dev, L);
	dev->net.local_path = NULL;
	pthread_mutex_unlock(&dev->tx.tx_lock);
	close(L->bell);
	pthread_mutex_destroy(&L->acc_lock);
	free(L);
}
