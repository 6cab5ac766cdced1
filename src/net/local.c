// SPDX-License-Identifier: MIT
/*
 * The same-host path: packets to a uroce device of this host and network
 * namespace go through shared memory instead of UDP
 * (docs/local.md).  Only the packet IO differs: the same RoCE
 * packets, built and checked by the same engine.
 *
 * Discovery: every device listens on the abstract AF_UNIX SOCK_SEQPACKET
 * name "uroce/local/<uid>/<address>/<slot>" (its shared-device slot, 0
 * when alone), and the first member of an address also on ".../0" (QP1,
 * and QPNs of a device bound alone).  Abstract names belong to the
 * network namespace, so finding one means "same host, same netns".  Both
 * ends check with SO_PEERCRED that the other is of our uid.
 *
 * A sender connects, says its address; the receiver answers with a memfd
 * (sealed against shrinking: no SIGBUS) holding a single-producer,
 * single-consumer ring of fixed-size slots made for that sender, and its
 * doorbell eventfd.  The sender writes a packet into the next slot,
 * publishes head (release), and writes the doorbell only if the receiver
 * said it sleeps in epoll (Dekker: both sides store, full fence, load).
 * A full ring does not make a sender wait: the packet goes into the
 * sender's overflow queue for that ring (bounded like a socket's send
 * buffer: past it the sender waits while the receiver takes packets, as
 * on a blocking socket, and loses the packet when it takes none), and
 * every later packet goes behind it, so order is kept.  The queue
 * is drained by whoever sends next, by a poll, and by the progress
 * thread when the receiver, which saw want_room, rings the eventfd the
 * sender gave in its hello (the doorbell scheme the other way round).
 *
 * Trust: nothing read from the ring is believed.  head is bounded by the
 * ring size, each slot's length by the slot, and each packet is copied
 * into private memory before uroce_recv_local parses it as a datagram
 * from the network, so a peer that scribbles the ring can only make us
 * drop (drop_local_bad).  The ICRC is computed on send (pcap sees valid
 * frames) but not checked here: memory is not a wire.
 *
 * Locks: the outbound table (struct lout) is used under dev->tx.tx_lock
 * (every packet IO send holds it); the inbound rings are read by whoever
 * holds dev->prog.rx_lock and only that thread frees them; L->acc_lock
 * guards the inbound table's insertions (accept), the progress thread's
 * scans and the unpublishing of a ring, and is held around nothing that
 * waits, so a sender waiting for a peer's answer may take it to answer
 * that peer's own connection (two processes meeting at once).
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

#include "dev.h"
#include "uroce_local.h"

#define LR_MAX_IN   64
#define LR_MAX_OUT  64
#define LR_BATCH    32		  /* packets per ring per poll */
#define LR_HELLO_MS 100		  /* the answer to a connect */
#define LR_RETRY_NS 1000000000ull /* not local: ask again after 1 s */
#define LR_QUEUE_BYTES \
	(4u << 20) /* a full ring's overflow queue: a
					 * socket send buffer's worth */
#define LR_STALL_NS \
	20000000ull /* past the queue, a receiver that
					 * took nothing for this long: drop */
#define LR_SOCK_NS \
	20000ull /* the socket, read at least this often
					 * while rings are in use */

/* a ring we receive on */
struct lin {
	int fd;
	struct lr_shared *ring;
	_Atomic uint32_t tail; /* ours (the poller's; the progress
					 * thread reads it before sleeping);
					 * the shared one is a copy */
	struct sockaddr_storage src;
	_Atomic bool dead;   /* the connection closed */
	_Atomic bool broken; /* the ring lied: dropped */
	int room_bell;	     /* the sender's eventfd, or -1 */
};

/* a packet waiting behind a full ring */
struct lq_pkt {
	struct lq_pkt *next;
	uint32_t len;
	uint16_t ip_id;
	uint8_t data[];
};

/* a peer we send to: connected (ring), or known not local until retry */
struct lout {
	bool used, up, alone;
	bool self; /* our own ring: never wait on it */
	struct sockaddr_storage addr;
	uint8_t sbyte; /* top byte of the QPNs it is for */
	uint64_t retry_ns, last_ns;
	_Atomic int fd;
	_Atomic bool dead;
	struct lr_shared *ring;
	int bell;
	uint32_t head;			 /* ours; the shared one is a copy */
	struct lq_pkt *q_first, *q_last; /* the overflow queue */
	uint32_t q_bytes;
	bool stalled; /* past the queue, dropped at stall_tail */
	uint32_t stall_tail;
};

struct uroce_local {
	int lfd[2]; /* listening: our slot's name, ".../0" */
	int nl;
	int bell; /* our doorbell, given to every sender */
	char names[2][108];
	pthread_mutex_t acc_lock;
	_Atomic(struct lin *) in[LR_MAX_IN];
	int in_fd[LR_MAX_IN];	     /* acc_lock */
	struct lout out[LR_MAX_OUT]; /* tx_lock */
	struct lout *last;
	_Atomic int queues;	 /* outbound peers with a queue (a hint,
					 * read without tx_lock) */
	bool recent;		 /* rx_lock: the last poll had packets */
	int rings;		 /* rx_lock: inbound rings, last poll */
	bool sock_busy;		 /* rx_lock: the last read had packets */
	uint64_t sock_ns;	 /* rx_lock: the socket's last read */
	_Atomic bool sock_ready; /* epoll saw the socket readable */
	uint8_t rxbuf[LR_DATA] __attribute__((aligned(64)));
};

static void q_free(struct uroce_local *L, struct lout *o);
static bool queues_drain(struct uroce_dev *dev, struct uroce_local *L,
			 bool wait, bool ask);

static struct uroce_local *loc(const struct uroce_dev *dev)
{
	return dev->net.local_path;
}

static socklen_t lr_name(char *out, size_t outlen,
			 const struct sockaddr_storage *ss, uint32_t slot,
			 struct sockaddr_un *un)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int n;

	inet_ntop(ss->ss_family,
		  ss->ss_family == AF_INET ?
			  (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
			  (const void *)&((const struct sockaddr_in6 *)ss)
				  ->sin6_addr,
		  ip, sizeof(ip));
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

static void epoll_add(struct uroce_dev *dev, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP,
				  .data.fd = fd };

	if (dev->prog.epfd >= 0)
		epoll_ctl(dev->prog.epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* ---- receiving side ---- */

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
	epoll_add(dev, fd);
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
static void accept_one(struct uroce_dev *dev, struct uroce_local *L, int lfd)
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

/* Take a ring out (the poller: rx_lock held). */
static void reap(struct uroce_local *L, int i)
{
	struct lin *in;

	pthread_mutex_lock(&L->acc_lock);
	in = atomic_load(&L->in[i]);
	atomic_store(&L->in[i], NULL);
	L->in_fd[i] = -1;
	pthread_mutex_unlock(&L->acc_lock);
	if (!in)
		return;
	close(in->fd);
	if (in->room_bell >= 0)
		close(in->room_bell);
	munmap(in->ring, sizeof(struct lr_shared));
	free(in);
}

/* A ring whose contents cannot be true: drop it; the sender sees the
 * connection close and goes back to UDP. */
static void ring_bad(struct uroce_dev *dev, struct lin *in)
{
	uroce_count(dev, UROCE_CNT_DROP_LOCAL_BAD, 1);
	in->broken = true;
	shutdown(in->fd, SHUT_RDWR);
}

/*
 * Whether a packet may be taken with only its headers copied (hdr: the
 * first LR_HEAD bytes, private): its payload then goes from the ring
 * straight to the SGEs, one copy less.  Not what anyone reads whole: a
 * capture, QP1 (the shared device reads the MAD to steer it), another
 * member's packet (forwarded), a probe.
 */
#define LR_HEAD	     UROCE_MAX_HDR_LEN
#define LR_SPLIT_MIN 512 /* smaller: one copy is as cheap */

static bool split_ok(const struct uroce_dev *dev, const uint8_t *hdr,
		     uint32_t len)
{
	uint32_t qpn = bth_qpn(hdr);

	return len >= LR_SPLIT_MIN && !uroce_pcap_path()[0] && qpn != 1 &&
	       qpn != UROCE_MCAST_QPN &&
	       (!dev->net.share || (qpn >> 16) == uroce_share_slot(dev));
}

/*
 * A ring packet read whole is seen by something that checks or records
 * its ICRC, which the sender left out: a capture, or another member of
 * the address (share.c forwards it; the member's receive checks it).
 * Computed into our copy then; the engine itself checks none.
 */
static void ring_icrc(struct uroce_dev *dev, uint8_t *pkt, uint32_t len,
		      const struct sockaddr_storage *src, uint16_t ip_id)
{
	struct iovec iov = { .iov_base = pkt, .iov_len = len };
	uint32_t qpn;

	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return;
	qpn = bth_qpn(pkt);
	if (uroce_pcap_path()[0] ||
	    (dev->net.share &&
	     (qpn == 1 || (qpn >> 16) != uroce_share_slot(dev))))
		uroce_net_icrc(dev, src, &dev->net.local, &iov, 1, ip_id);
}

static void deliver(struct uroce_dev *dev, struct uroce_local *L, struct lin *in,
		    uint32_t len, uint16_t ip_id, const uint8_t *ring_pkt)
{
	uroce_count(dev, UROCE_CNT_RX_LOCAL_PKTS, 1);
	if (ring_pkt) {
		/* (counts by the opcode in the header copy; split_ok
		 * made sure nothing captures) */
		uroce_tap_rx(dev, L->rxbuf, len, &in->src, &dev->net.local,
			     ip_id);
		uroce_recv_local(dev, L->rxbuf, len, &in->src, &dev->net.local,
				 ip_id, ring_pkt);
		return;
	}
	ring_icrc(dev, L->rxbuf, len, &in->src, ip_id);
	/* QP1 and other members' QPNs reach the address's first member */
	if (uroce_share_steer(dev, L->rxbuf, len, &in->src, &dev->net.local,
			      ip_id))
		return;
	uroce_tap_rx(dev, L->rxbuf, len, &in->src, &dev->net.local, ip_id);
	uroce_recv_local(dev, L->rxbuf, len, &in->src, &dev->net.local, ip_id,
			 NULL);
}

/*
 * We took packets from a ring: if its sender waits for room (its packets
 * are queued), wake it.  Dekker with room_ask: the tail is stored, full
 * fence, then want_room is read; one bell per request.  A sender that
 * sets want_room for ever costs us one write per poll that moved its
 * tail, no more than its packets cost.
 */
static void room_tell(struct uroce_dev *dev, struct lin *in)
{
	uint64_t one = 1;

	atomic_thread_fence(memory_order_seq_cst);
	if (in->room_bell < 0 ||
	    !atomic_load_explicit(&in->ring->want_room, memory_order_relaxed) ||
	    !atomic_exchange(&in->ring->want_room, 0))
		return;
	if (write(in->room_bell, &one, sizeof(one)) < 0)
		uroce_log(UROCE_LOG_DEBUG, "local: room bell: %s",
			  strerror(errno));
	uroce_count(dev, UROCE_CNT_LOCAL_ROOM_BELLS, 1);
}

/*
 * Receive what waits in the rings; rx_lock held.  Returns the number of
 * packets.  head is read with acquire (the slot's bytes are the
 * sender's before it), tail stored with release after each copy (the
 * slot is the sender's again).
 */
int uroce_local_poll(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);
	bool burst = false;
	int i, total = 0, rings = 0;

	uroce_assert_held(&dev->prog.rx_lock);
	if (!L)
		return 0;
	/* our own queues, when nobody sends (never waiting for the lock:
	 * this thread may be the one sending) */
	queues_drain(dev, L, false, false);
	for (i = 0; i < LR_MAX_IN; i++) {
		struct lin *in = atomic_load_explicit(&L->in[i],
						      memory_order_acquire);
		uint32_t head, avail, tail, k;
		bool dead;

		if (!in)
			continue;
		rings++;
		dead = atomic_load(&in->dead);
		if (in->broken) {
			if (dead)
				reap(L, i);
			continue;
		}
		head = atomic_load_explicit(&in->ring->head,
					    memory_order_acquire);
		tail = atomic_load_explicit(&in->tail, memory_order_relaxed);
		avail = head - tail;
		/* a sender that closed (exited) may have left its last
		 * packets in the ring, a REJ or a DREQ say: they are read
		 * before the ring goes */
		if (!avail) {
			if (dead)
				reap(L, i);
			continue;
		}
		if (avail > LR_SLOTS) {
			ring_bad(dev, in);
			continue;
		}
		if (avail > LR_BATCH)
			avail = LR_BATCH;
		if (!burst) {
			uroce_rx_burst_begin(dev);
			burst = true;
		}
		for (k = 0; k < avail; k++) {
			struct lr_slot *s =
				&in->ring->slot[tail & (LR_SLOTS - 1)];
			uint32_t len = __atomic_load_n(&s->len,
						       __ATOMIC_RELAXED);
			uint16_t ip_id = __atomic_load_n(&s->ip_id,
							 __ATOMIC_RELAXED);
			bool split = false;

			if (len <= LR_DATA) {
				/* the headers first, then all of it unless
				 * the payload may stay where it is */
				memcpy(L->rxbuf, s->data,
				       len < LR_HEAD ? len : LR_HEAD);
				split = split_ok(dev, L->rxbuf, len);
				if (!split && len > LR_HEAD)
					memcpy(L->rxbuf + LR_HEAD,
					       s->data + LR_HEAD, len - LR_HEAD);
			}
			tail++;
			atomic_store_explicit(&in->tail, tail,
					      memory_order_relaxed);
			if (len > LR_DATA) {
				atomic_store_explicit(&in->ring->tail, tail,
						      memory_order_release);
				uroce_count(dev, UROCE_CNT_DROP_LOCAL_BAD, 1);
				continue;
			}
			/* (the slot is the sender's again once its payload
			 * is out: after delivery when it was read in place) */
			if (!split)
				atomic_store_explicit(&in->ring->tail, tail,
						      memory_order_release);
			deliver(dev, L, in, len, ip_id, split ? s->data : NULL);
			if (split)
				atomic_store_explicit(&in->ring->tail, tail,
						      memory_order_release);
			total++;
		}
		room_tell(dev, in);
	}
	/* (a thread asleep in ibv_get_cq_event: its ACKs go with its reply) */
	if (burst && uroce_progress_waiter_rx())
		uroce_rx_burst_end_for_post(dev);
	else if (burst)
		uroce_rx_burst_end(dev);
	L->recent = total > 0;
	L->rings = rings;
	return total;
}

/*
 * Whether this poll reads the UDP socket too (rx_lock held).  A thread
 * spinning on the rings (an application polling its CQ, the progress
 * thread's receive_spin) would otherwise make a recvmmsg system call per
 * look at an empty socket: half the receiver's time in ib_write_bw over
 * the rings.  While rings are in use the socket is read when epoll saw
 * it readable, when its last read brought packets, and at least every
 * LR_SOCK_NS; with no ring, always.
 */
bool uroce_local_sock_due(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);
	uint64_t now;

	uroce_assert_held(&dev->prog.rx_lock);
	if (!L || !L->rings || L->sock_busy ||
	    atomic_exchange_explicit(&L->sock_ready, false, memory_order_relaxed))
		return true;
	now = uroce_now_ns();
	if (now - L->sock_ns < LR_SOCK_NS)
		return false;
	L->sock_ns = now;
	return true;
}

void uroce_local_sock_read(struct uroce_dev *dev, int n)
{
	struct uroce_local *L = loc(dev);

	uroce_assert_held(&dev->prog.rx_lock);
	if (L)
		L->sock_busy = n > 0;
}

void uroce_local_sock_ready(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);

	if (L)
		atomic_store_explicit(&L->sock_ready, true,
				      memory_order_relaxed);
}

bool uroce_local_recent(const struct uroce_dev *dev)
{
	const struct uroce_local *L = loc(dev);

	uroce_assert_held(&dev->prog.rx_lock);
	return L && L->recent;
}

bool uroce_local_rings(const struct uroce_dev *dev)
{
	const struct uroce_local *L = loc(dev);

	uroce_assert_held(&dev->prog.rx_lock);
	return L && L->rings;
}

/*
 * The progress thread is about to sleep in epoll: ask senders to ring.
 * false if a ring has packets already (then it must not sleep).
 */
bool uroce_local_sleep(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);
	bool idle = true;
	int i;

	if (!L)
		return true;
	/* packets queued behind a full ring: ask its receiver for a room
	 * bell now, not per packet (a stream's sender drains its queue as
	 * it sends and polls; each bell costs the receiver a write and us
	 * a wake-up).  tx_lock busy: a sender is at work, it drains; look
	 * again instead of sleeping. */
	if (!queues_drain(dev, L, false, true))
		return false;
	pthread_mutex_lock(&L->acc_lock);
	for (i = 0; i < LR_MAX_IN; i++) {
		struct lin *in = atomic_load(&L->in[i]);

		if (in)
			atomic_store(&in->ring->sleeping, 1);
	}
	atomic_thread_fence(memory_order_seq_cst);
	for (i = 0; i < LR_MAX_IN && idle; i++) {
		struct lin *in = atomic_load(&L->in[i]);

		if (in && !in->broken &&
		    atomic_load(&in->ring->head) !=
			    atomic_load_explicit(&in->tail, memory_order_relaxed))
			idle = false;
	}
	pthread_mutex_unlock(&L->acc_lock);
	if (!idle)
		uroce_local_awake(dev);
	return idle;
}

void uroce_local_awake(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);
	int i;

	if (!L)
		return;
	pthread_mutex_lock(&L->acc_lock);
	for (i = 0; i < LR_MAX_IN; i++) {
		struct lin *in = atomic_load(&L->in[i]);

		if (in)
			atomic_store_explicit(&in->ring->sleeping, 0,
					      memory_order_relaxed);
	}
	pthread_mutex_unlock(&L->acc_lock);
}

/* the outbound peer whose connection is fd: it is gone */
static bool out_closed(struct uroce_dev *dev, struct uroce_local *L, int fd)
{
	bool found = false;
	int i;

	/*
	 * The senders close and open these descriptors under tx_lock
	 * (out_down, out_connect): an fd number from epoll_wait may have
	 * been closed and given to a new connection since.  Under the same
	 * lock the number names one file for the whole check.  (A first
	 * look without it keeps the lock off the path of every other fd.)
	 */
	for (i = 0; i < LR_MAX_OUT; i++)
		if (atomic_load(&L->out[i].fd) == fd)
			break;
	if (i == LR_MAX_OUT)
		return false;
	pthread_mutex_lock(&dev->tx.tx_lock);
	for (i = 0; i < LR_MAX_OUT; i++) {
		if (atomic_load(&L->out[i].fd) != fd)
			continue;
		atomic_store(&L->out[i].dead, true);
		epoll_ctl(dev->prog.epfd, EPOLL_CTL_DEL, fd, NULL);
		/* (its queue is freed now, not at the next packet: the
		 * peer may never be sent to again) */
		q_free(L, &L->out[i]);
		found = true;
		break;
	}
	pthread_mutex_unlock(&dev->tx.tx_lock);
	return found;
}

int uroce_local_bell(const struct uroce_dev *dev)
{
	const struct uroce_local *L = loc(dev);

	return L ? L->bell : -1;
}

/*
 * Another thread than the progress thread reads our doorbell (an
 * application sleeping in ibv_get_cq_event, rx_lock held): the progress
 * thread, woken by the same write, may then find nothing ready and go
 * back to sleep inside epoll_wait without passing uroce_local_sleep
 * again, with sleeping cleared by the sender that rang: no sender would
 * ring again.  So the reader sets sleeping again on every ring; a
 * progress thread that is in fact awake clears it (a bell too many at
 * worst).  Then the caller polls the rings.
 */
void uroce_local_bell_take(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);
	uint64_t v;
	int i;

	if (!L)
		return;
	if (read(L->bell, &v, sizeof(v)) < 0)
		return; /* (EAGAIN: not rung) */
	pthread_mutex_lock(&L->acc_lock);
	for (i = 0; i < LR_MAX_IN; i++) {
		struct lin *in = atomic_load(&L->in[i]);

		if (in)
			atomic_store(&in->ring->sleeping, 1);
	}
	pthread_mutex_unlock(&L->acc_lock);
	atomic_thread_fence(memory_order_seq_cst);
}

int uroce_local_event(struct uroce_dev *dev, int fd)
{
	struct uroce_local *L = loc(dev);
	uint64_t v;
	int i;

	if (!L)
		return 0;
	if (fd == L->bell) {
		if (read(L->bell, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return 1;
		uroce_count(dev, UROCE_CNT_LOCAL_WAKEUPS, 1);
		/* (the bell is also a receiver's "room in my ring") */
		queues_drain(dev, L, true, false);
		return 2;
	}
	pthread_mutex_lock(&L->acc_lock);
	for (i = 0; i < L->nl; i++) {
		if (fd == L->lfd[i]) {
			accept_one(dev, L, fd);
			pthread_mutex_unlock(&L->acc_lock);
			return 1;
		}
	}
	for (i = 0; i < LR_MAX_IN; i++) {
		struct lin *in = atomic_load(&L->in[i]);

		if (L->in_fd[i] == fd && in) {
			/* anything from a sender is its end closing */
			atomic_store(&in->dead, true);
			epoll_ctl(dev->prog.epfd, EPOLL_CTL_DEL, fd, NULL);
			pthread_mutex_unlock(&L->acc_lock);
			return 2; /* the poller reaps it */
		}
	}
	pthread_mutex_unlock(&L->acc_lock);
	return out_closed(dev, L, fd) ? 1 : 0;
}

/* ---- sending side (tx_lock held) ---- */

/* what waits behind the ring goes with it (as datagrams in flight to a
 * process that died) */
static void q_free(struct uroce_local *L, struct lout *o)
{
	struct lq_pkt *p = o->q_first, *next;

	if (!p)
		return;
	for (; p; p = next) {
		next = p->next;
		free(p);
	}
	o->q_first = o->q_last = NULL;
	o->q_bytes = 0;
	atomic_fetch_sub_explicit(&L->queues, 1, memory_order_relaxed);
}

static void out_down(struct uroce_local *L, struct lout *o)
{
	int fd = atomic_exchange(&o->fd, -1);

	q_free(L, o);

	if (fd >= 0)
		close(fd);
	if (o->ring)
		munmap(o->ring, sizeof(struct lr_shared));
	if (o->bell >= 0)
		close(o->bell);
	o->ring = NULL;
	o->bell = -1;
	o->up = false;
	o->self = false;
	atomic_store(&o->dead, false);
}

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
		accept_one(dev, L, p[i].fd);
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
	atomic_store(&o->fd, sv[1]);
	o->up = true;
	epoll_add(dev, sv[1]);
	uroce_count(dev, UROCE_CNT_LOCAL_CONNECTS, 1);
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
	} ctl;
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

static int out_connect(struct uroce_dev *dev, struct uroce_local *L,
		       struct lout *o)
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
	atomic_store(&o->fd, fd);
	o->up = true;
	epoll_add(dev, fd);
	uroce_count(dev, UROCE_CNT_LOCAL_CONNECTS, 1);
	return 0;
fail:
	close(fd);
	return -ECONNREFUSED;
}

static struct lout *out_find(struct uroce_local *L,
			     const struct sockaddr_storage *dst, uint8_t sb)
{
	int i;

	for (i = 0; i < LR_MAX_OUT; i++) {
		struct lout *o = &L->out[i];

		if (o->used && o->sbyte == sb && uroce_same_ip(&o->addr, dst))
			return o;
	}
	return NULL;
}

/* a free entry, or the one used least recently */
static struct lout *out_new(struct uroce_local *L,
			    const struct sockaddr_storage *dst, uint8_t sb)
{
	struct lout *o = &L->out[0];
	int i;

	for (i = 0; i < LR_MAX_OUT; i++) {
		if (!L->out[i].used) {
			o = &L->out[i];
			break;
		}
		if (L->out[i].last_ns < o->last_ns)
			o = &L->out[i];
	}
	if (o->used)
		out_down(L, o);
	memset(&o->addr, 0, sizeof(o->addr));
	memcpy(&o->addr, dst, uroce_sa_len(dst));
	o->sbyte = sb;
	o->used = true;
	o->up = false;
	o->retry_ns = 0;
	o->bell = -1;
	atomic_store(&o->fd, -1);
	return o;
}

/* the ring for (dst, QPN top byte), connecting if need be; NULL: UDP */
static struct lout *peer_get(struct uroce_dev *dev, struct uroce_local *L,
			     const struct sockaddr_storage *dst, uint8_t sb,
			     uint64_t now)
{
	struct lout *o = out_find(L, dst, sb);

	if (o && o->up && atomic_load_explicit(&o->dead, memory_order_relaxed)) {
		out_down(L, o); /* the peer died: see if it is back */
		o->retry_ns = 0;
	}
	if (o && o->up)
		return o;
	if (!o)
		o = out_new(L, dst, sb);
	o->last_ns = now;
	if (now >= o->retry_ns) {
		if (!out_connect(dev, L, o))
			return o;
		o->retry_ns = now + LR_RETRY_NS;
	}
	if (sb) {
		/* a device bound alone takes all its QPNs at ".../0" */
		struct lout *z = peer_get(dev, L, dst, 0, now);

		if (z && z->alone)
			return z;
	}
	return NULL;
}

static struct lout *peer_for(struct uroce_dev *dev,
			     const struct sockaddr_storage *dst,
			     const struct iovec *iov)
{
	struct uroce_local *L = loc(dev);
	struct lout *o;
	uint8_t sb;

	if (!L || dst->ss_family != dev->net.family ||
	    uroce_addr_is_mcast(dst) || iov[0].iov_len < UROCE_BTH_LEN)
		return NULL;
	sb = ((const uint8_t *)iov[0].iov_base)[5]; /* dest QP 23..16 */
	o = L->last;
	if (o && o->up && o->sbyte == sb && uroce_same_ip(&o->addr, dst) &&
	    !atomic_load_explicit(&o->dead, memory_order_relaxed))
		return o;
	o = peer_get(dev, L, dst, sb, uroce_now_ns());
	if (o)
		L->last = o;
	return o;
}

static void ring_bell(struct uroce_dev *dev, struct lout *o)
{
	uint64_t one = 1;

	/* (a run's earlier packets may have gone to a ring that a later
	 * lookup found dead and took down: nobody to ring) */
	if (!o->up || !o->ring)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&o->ring->sleeping, memory_order_relaxed) &&
	    atomic_exchange(&o->ring->sleeping, 0)) {
		/* (fails only when the counter would overflow: the
		 * receiver is awake then anyway) */
		if (write(o->bell, &one, sizeof(one)) < 0)
			uroce_log(UROCE_LOG_DEBUG, "local: doorbell: %s",
				  strerror(errno));
		uroce_count(dev, UROCE_CNT_LOCAL_DOORBELLS, 1);
	}
}

/* free slots in the peer's ring (its tail is bounded: a ring that lies
 * is dropped), or -EPIPE */
static int ring_free(struct uroce_dev *dev, struct lout *o)
{
	uint32_t tail = atomic_load_explicit(&o->ring->tail,
					     memory_order_acquire);
	uint32_t used = o->head - tail;

	if (used > LR_SLOTS) {
		uroce_count(dev, UROCE_CNT_DROP_LOCAL_BAD, 1);
		atomic_store(&o->dead, true);
		return -EPIPE;
	}
	return (int)(LR_SLOTS - used);
}

/* the next slot holds len bytes (already copied): the receiver's now */
static void ring_publish(struct uroce_dev *dev, struct lout *o, uint32_t len,
			 uint16_t ip_id)
{
	struct lr_slot *s = &o->ring->slot[o->head & (LR_SLOTS - 1)];

	s->len = len;
	s->ip_id = ip_id;
	o->head++;
	atomic_store_explicit(&o->ring->head, o->head, memory_order_release);
	uroce_count(dev, UROCE_CNT_TX_LOCAL_PKTS, 1);
}

/* copy len bytes from iov (off on) to dst; iov and off move past them */
static uint32_t iov_take(uint8_t *dst, const struct iovec **iov, size_t *off,
			 const struct iovec *end, uint32_t len)
{
	uint32_t done = 0;

	while (done < len && *iov < end) {
		size_t take = (*iov)->iov_len - *off;

		if (take > len - done)
			take = len - done;
		memcpy(dst + done, (const uint8_t *)(*iov)->iov_base + *off,
		       take);
		done += (uint32_t)take;
		*off += take;
		if (*off == (*iov)->iov_len) {
			(*iov)++;
			*off = 0;
		}
	}
	return done;
}

/*
 * Move queued packets into the ring while it has room.  When some stay
 * queued and ask is set, ask the receiver to ring us when it takes
 * packets (want_room, unless it is still set), then look again: Dekker
 * with room_tell (we store, full fence, read the tail), so either we see
 * the room or it sees the request.  (A sender that watches the tail
 * itself, q_wait, does not ask: each bell would cost the receiver a
 * system call.)  Returns whether the queue is empty now (false too for
 * a ring that lied).
 */
static bool q_flush(struct uroce_dev *dev, struct uroce_local *L,
		    struct lout *o, bool ask)
{
	bool asked = !ask;

	if (!o->q_first)
		return true;
	while (o->q_first) {
		int room = ring_free(dev, o);

		if (room < 0) {
			q_free(L, o);
			return false;
		}
		if (!room) {
			if (asked)
				return false;
			if (!atomic_load_explicit(&o->ring->want_room,
						  memory_order_relaxed)) {
				atomic_store(&o->ring->want_room, 1);
				atomic_thread_fence(memory_order_seq_cst);
			}
			asked = true;
			continue;
		}
		for (; room && o->q_first; room--) {
			struct lq_pkt *p = o->q_first;

			memcpy(o->ring->slot[o->head & (LR_SLOTS - 1)].data,
			       p->data, p->len);
			ring_publish(dev, o, p->len, p->ip_id);
			o->q_first = p->next;
			o->q_bytes -= p->len;
			free(p);
		}
	}
	o->q_last = NULL;
	atomic_fetch_sub_explicit(&L->queues, 1, memory_order_relaxed);
	return true;
}

/*
 * The queue is at its bound: wait for room as the sender on a blocking
 * socket waits for its send buffer, as long as the receiver takes
 * packets (UC and UD streams lose nothing then: ib_send_bw -c UC -a
 * sends 100 messages of up to 8 MiB at once, and the thread that sends
 * them may be our progress thread); a receiver that took nothing for
 * LR_STALL_NS costs one wait, then every packet past the bound is lost
 * at once until it moves.  So two processes whose threads each wait for
 * the other's rings (a receiving thread waits too: it holds rx_lock,
 * our rings wait for it) lose LR_STALL_NS once, then packets, never
 * liveness; and that only after LR_QUEUE_BYTES queued.  Our own ring is
 * never waited on (our poller may wait for the lock we hold): the
 * packet is lost, RC resends it.  0: room now, or -ENOBUFS.
 */
static int q_wait(struct uroce_dev *dev, struct uroce_local *L, struct lout *o,
		  uint32_t len)
{
	uint64_t until = 0;
	uint32_t seen = 0;

	if (o->self)
		return -ENOBUFS;
	for (;;) {
		uint32_t tail;
		uint64_t now;

		q_flush(dev, L, o, false);
		if (atomic_load(&o->dead) || !o->ring)
			return -ENOBUFS;
		if (o->q_bytes + len <= LR_QUEUE_BYTES) {
			o->stalled = false;
			return 0;
		}
		tail = atomic_load_explicit(&o->ring->tail,
					    memory_order_acquire);
		if (o->stalled && tail == o->stall_tail)
			return -ENOBUFS;
		now = uroce_now_ns();
		if (!until || tail != seen) {
			seen = tail;
			until = now + LR_STALL_NS;
		} else if (now > until) {
			o->stalled = true;
			o->stall_tail = tail;
			return -ENOBUFS;
		}
		/* (what we published may not be announced yet) */
		ring_bell(dev, o);
		sched_yield();
	}
}

/* a packet behind the full ring; beyond the queue's bound (and the wait
 * q_wait allows) it is lost (RC resends; UC and UD lose it as a
 * datagram to a full socket) */
static int q_add(struct uroce_dev *dev, struct uroce_local *L, struct lout *o,
		 const struct iovec **iov, size_t *off, const struct iovec *end,
		 uint32_t len, uint16_t ip_id)
{
	struct lq_pkt *p;

	if ((o->q_bytes + len > LR_QUEUE_BYTES && q_wait(dev, L, o, len)) ||
	    !(p = malloc(sizeof(*p) + len))) {
		uroce_count(dev, UROCE_CNT_LOCAL_FULL_DROPS, 1);
		return -ENOBUFS;
	}
	p->next = NULL;
	p->len = iov_take(p->data, iov, off, end, len);
	p->ip_id = ip_id;
	if (o->q_last)
		o->q_last->next = p;
	else
		atomic_fetch_add_explicit(&L->queues, 1, memory_order_relaxed);
	if (!o->q_first)
		o->q_first = p;
	o->q_last = p;
	o->q_bytes += p->len;
	uroce_count(dev, UROCE_CNT_LOCAL_QUEUED, 1);
	return 0;
}

/* Every queue into its ring as far as they go, and the bell of each
 * ring that got packets (the progress thread woken by a receiver, a
 * poll); ask: those that stay ask for a room bell.  tx_lock held. */
static void queues_flush(struct uroce_dev *dev, struct uroce_local *L, bool ask)
{
	int i;

	uroce_assert_held(&dev->tx.tx_lock);
	for (i = 0; i < LR_MAX_OUT; i++) {
		struct lout *o = &L->out[i];
		uint32_t head = o->head;

		if (!o->q_first || !o->ring)
			continue;
		q_flush(dev, L, o, ask);
		if (o->head != head)
			ring_bell(dev, o);
	}
}

/* queues_flush from outside the sending path, when any queue waits:
 * taking tx_lock (wait) or only if it is free; false if it was busy */
static bool queues_drain(struct uroce_dev *dev, struct uroce_local *L,
			 bool wait, bool ask)
{
	if (!atomic_load_explicit(&L->queues, memory_order_relaxed))
		return true;
	if (wait)
		pthread_mutex_lock(&dev->tx.tx_lock);
	else if (pthread_mutex_trylock(&dev->tx.tx_lock))
		return false;
	queues_flush(dev, L, ask);
	pthread_mutex_unlock(&dev->tx.tx_lock);
	return true;
}

/* Send one packet (up to len bytes from iov, off on) to o: into the next
 * slot, or behind the packets already queued for the ring, or into the
 * queue when the ring is full; a wait only past the queue's bound
 * (q_wait).  Doorbell left to the caller.  0, or -errno (lost). */
static int ring_put(struct uroce_dev *dev, struct lout *o,
		    const struct iovec **iov, size_t *off,
		    const struct iovec *end, uint32_t len, uint16_t ip_id)
{
	struct uroce_local *L = loc(dev);
	int room = 0;

	if (o->q_first && !q_flush(dev, L, o, false) && atomic_load(&o->dead))
		return -EPIPE;
	if (!o->q_first) {
		room = ring_free(dev, o);
		if (room < 0)
			return room;
	}
	if (!room) {
		room = q_add(dev, L, o, iov, off, end, len, ip_id);
		/* (move what fits, e.g. after q_wait.  A room bell is asked
		 * for when the queue starts, since our progress thread may
		 * be asleep already, and again whenever it goes to sleep;
		 * not per packet) */
		if (!room)
			q_flush(dev, L, o, o->q_first == o->q_last);
		return room;
	}
	len = iov_take(o->ring->slot[o->head & (LR_SLOTS - 1)].data, iov, off,
		       end, len);
	ring_publish(dev, o, len, ip_id);
	return 0;
}

/*
 * A ring packet carries no ICRC (the engine leaves it to packet IO, and
 * the ring's receiver checks none), but a captured one must have the
 * ICRC the socket would have sent: computed here, while capturing only,
 * before the packet goes into the ring (the tap records it after).
 */
static void capture_icrc(struct uroce_dev *dev,
			 const struct sockaddr_storage *dst,
			 const struct iovec *iov, int n, uint16_t ip_id)
{
	if (uroce_pcap_path()[0])
		uroce_net_icrc(dev, &dev->net.local, dst, iov, n, ip_id);
}

static size_t iov_bytes(const struct iovec *iov, int n)
{
	size_t len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += iov[i].iov_len;
	return len;
}

int uroce_local_send(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		     const struct iovec *iov, int iovcnt)
{
	size_t len = iov_bytes(iov, iovcnt), off = 0;
	const struct iovec *it = iov;
	struct lout *o;
	int err;

	uroce_assert_held(&dev->tx.tx_lock);
	if (len > LR_DATA || !(o = peer_for(dev, dst, iov)))
		return 0;
	capture_icrc(dev, dst, iov, iovcnt, 0);
	err = ring_put(dev, o, &it, &off, iov + iovcnt, (uint32_t)len, 0);
	ring_bell(dev, o);
	return err ? err : 1;
}

/* The one packet of a local run that has no ring (a member of the
 * address that turned the path off): by UDP, as it would have gone. */
static void udp_one(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		    const struct iovec *iov, int n, uint16_t k)
{
	struct msghdr msg = {
		.msg_name = (void *)dst,
		.msg_namelen = uroce_sa_len(dst),
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)n,
	};

	/* (a datagram of its own: IP ID 0) */
	uroce_net_icrc(dev, &dev->net.local, dst, iov, n, 0);
	if (sendmsg(dev->net.sock, &msg, 0) < 0)
		uroce_log(UROCE_LOG_DEBUG, "local: udp: %s", strerror(errno));
	/* the tap records it as datagram k of its run (xmit.c txb_send):
	 * a capture gets the ICRC that goes with that IP ID */
	capture_icrc(dev, dst, iov, n, k);
}

/* the iovecs of the next packet of a run: seg bytes, or what is left */
int uroce_run_pkt_iovs(const struct iovec *iov, int n, uint32_t seg)
{
	size_t sum = 0;
	int i;

	for (i = 0; i < n && sum < seg; i++)
		sum += iov[i].iov_len;
	return i;
}

/* Copy the packets of one run into the ring of each; one doorbell for
 * the run (its packets may be for several members of the address). */
static void send_run(struct uroce_dev *dev, const struct uroce_txrun *run,
		     const struct iovec *iov)
{
	const struct iovec *it = &iov[run->iov0], *end = it + run->niov;
	struct lout *o = NULL, *rung = NULL;
	int k;

	for (k = 0; k < run->npkts && it < end; k++) {
		int n = uroce_run_pkt_iovs(it, (int)(end - it), run->seg);
		size_t len = iov_bytes(it, n), off = 0;
		const struct iovec *p = it;

		o = peer_for(dev, &run->dst, it);
		if (o && rung && o != rung)
			ring_bell(dev, rung);
		if (!o || len > LR_DATA) {
			udp_one(dev, &run->dst, it, n, (uint16_t)k);
		} else {
			capture_icrc(dev, &run->dst, it, n, (uint16_t)k);
			/* (behind a full ring it waits in the queue; past
			 * the queue it is lost, as by a full socket) */
			ring_put(dev, o, &p, &off, it + n, (uint32_t)len,
				 (uint16_t)k);
		}
		if (o)
			rung = o;
		it += n;
	}
	if (rung)
		ring_bell(dev, rung);
}

/*
 * Runs of a GSO batch (net/udp.c udp_send_runs): the leading runs to
 * local peers go through their rings; returns how many, or 0 with
 * *udp_runs the number of leading runs that are not local (UDP sends
 * those).
 */
int uroce_local_send_runs(struct uroce_dev *dev, const struct uroce_txrun *run,
			  int nruns, const struct iovec *iov, int *udp_runs)
{
	int r;

	uroce_assert_held(&dev->tx.tx_lock);
	*udp_runs = nruns;
	if (!loc(dev))
		return 0;
	for (r = 0; r < nruns; r++) {
		if (!peer_for(dev, &run[r].dst, &iov[run[r].iov0]))
			break;
		send_run(dev, &run[r], iov);
	}
	if (r)
		return r;
	for (r = 1; r < nruns; r++)
		if (peer_for(dev, &run[r].dst, &iov[run[r].iov0]))
			break;
	*udp_runs = r;
	return 0;
}

/* whether packets to dst (QPN qpn) go through a ring now (uroce qps) */
bool uroce_local_peer(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		      uint32_t qpn)
{
	struct uroce_local *L;
	struct lout *o;
	bool up;

	pthread_mutex_lock(&dev->tx.tx_lock);
	L = loc(dev);
	if (!L) {
		pthread_mutex_unlock(&dev->tx.tx_lock);
		return false;
	}
	o = out_find(L, dst, (uint8_t)(qpn >> 16));
	if (!(o && o->up) && (qpn >> 16))
		o = out_find(L, dst, 0);
	up = o && o->up && !atomic_load(&o->dead);
	pthread_mutex_unlock(&dev->tx.tx_lock);
	return up;
}

/* the slots of the ring packets to dst (QPN qpn) go through now, or 0
 * when they go by UDP: the receive buffer a same-host peer has for us */
uint32_t uroce_local_window(struct uroce_dev *dev,
			    const struct sockaddr_storage *dst, uint32_t qpn)
{
	return uroce_local_peer(dev, dst, qpn) ? LR_SLOTS : 0;
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
		reap(L, i);
	for (i = 0; i < LR_MAX_OUT; i++) {
		if (L->out[i].used)
			out_down(L, &L->out[i]);
		L->out[i].used = false;
	}
	L->last = NULL;
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
	for (i = 0; i < LR_MAX_IN; i++)
		L->in_fd[i] = -1;
	for (i = 0; i < LR_MAX_OUT; i++)
		atomic_store(&L->out[i].fd, -1);
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
	struct epoll_event ev = { .events = EPOLLIN };
	int i;

	if (dev->prog.epfd < 0)
		return;
	for (i = 0; i < L->nl; i++) {
		ev.data.fd = L->lfd[i];
		epoll_ctl(dev->prog.epfd, EPOLL_CTL_ADD, L->lfd[i], &ev);
	}
}

void uroce_local_watch(struct uroce_dev *dev)
{
	struct uroce_local *L = loc(dev);

	if (!L || dev->prog.epfd < 0)
		return;
	uroce_progress_watch_bell(dev, L->bell);
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
	all_close(dev, L);
	dev->net.local_path = NULL;
	pthread_mutex_unlock(&dev->tx.tx_lock);
	close(L->bell);
	pthread_mutex_destroy(&L->acc_lock);
	free(L);
}
