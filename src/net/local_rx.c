// SPDX-License-Identifier: MIT
/*
 * The same-host path (local.h, docs/local.md), receiving: the rings
 * read by whoever holds rx_lock, the doorbell and the progress thread's
 * sleep, and the events on the path's descriptors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "local.h"

/* Take a ring out (the poller, or the device going down). */
void lr_reap(struct uroce_local *L, int i)
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
		dev->net.rx->recv_ring(dev, L->rxbuf, len, &in->src,
				       &dev->net.local, ip_id, ring_pkt);
		return;
	}
	ring_icrc(dev, L->rxbuf, len, &in->src, ip_id);
	/* QP1 and other members' QPNs reach the address's first member */
	if (uroce_share_steer(dev, L->rxbuf, len, &in->src, &dev->net.local,
			      ip_id))
		return;
	uroce_tap_rx(dev, L->rxbuf, len, &in->src, &dev->net.local, ip_id);
	dev->net.rx->recv_ring(dev, L->rxbuf, len, &in->src, &dev->net.local,
			       ip_id, NULL);
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
	lr_queues_drain(dev, L, false, false);
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
				lr_reap(L, i);
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
				lr_reap(L, i);
			continue;
		}
		if (avail > LR_SLOTS) {
			ring_bad(dev, in);
			continue;
		}
		if (avail > LR_BATCH)
			avail = LR_BATCH;
		if (!burst) {
			dev->net.rx->begin(dev);
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
	L->recent = total > 0;
	L->rings = rings;
	/* (a thread asleep in ibv_get_cq_event: its ACKs go with its reply.
	 * Last: a channel's direct taker may receive again from it) */
	if (burst)
		dev->net.rx->end(dev, true);
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
	if (!lr_queues_drain(dev, L, false, true))
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

/*
 * Whether a connection epoll said was ready still is: an event names a
 * slot, and the slot may hold another connection by now (the last one
 * closed, a new one made).  Nothing is read from these connections once
 * set up, so anything ready is the other end closing.
 */
static bool conn_ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	return fd >= 0 && poll(&p, 1, 0) > 0;
}

/* an outbound peer's connection: it is gone */
int lr_out_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct lout *o = container_of(w, struct lout, w);
	struct uroce_local *L = loc(dev);

	/*
	 * The senders close and open these descriptors under tx_lock
	 * (lr_out_down, lr_out_connect): under the same lock the slot holds
	 * one connection for the whole check.
	 */
	pthread_mutex_lock(&dev->tx.tx_lock);
	if (L && !atomic_load(&o->dead) && conn_ready(atomic_load(&o->fd))) {
		atomic_store(&o->dead, true);
		uroce_watcher_del(dev->prog.epfd, &o->w);
		/* (its queue is freed now, not at the next packet: the
		 * peer may never be sent to again) */
		lr_q_free(L, o);
	}
	pthread_mutex_unlock(&dev->tx.tx_lock);
	return 0;
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

	uroce_assert_held(&dev->prog.rx_lock);
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

int lr_bell_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct uroce_local *L = container_of(w, struct uroce_local, bell_w);
	uint64_t v;

	if (read(L->bell, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return 0;
	uroce_count(dev, UROCE_CNT_LOCAL_WAKEUPS, 1);
	/* (the bell is also a receiver's "room in my ring") */
	lr_queues_drain(dev, L, true, false);
	return 1;
}

int lr_lfd_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct uroce_local *L = loc(dev);
	int i;

	if (!L)
		return 0;
	i = (int)(w - L->lfd_w);
	/* (the listeners change under acc_lock: a rebind) */
	pthread_mutex_lock(&L->acc_lock);
	if (i < L->nl)
		lr_accept_one(dev, L, L->lfd[i]);
	pthread_mutex_unlock(&L->acc_lock);
	return 0;
}

/* anything from a sender is its end closing: the poller reaps the ring */
int lr_in_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct uroce_local *L = loc(dev);
	struct lin *in;
	int i, rx = 0;

	if (!L)
		return 0;
	i = (int)(w - L->in_w);
	pthread_mutex_lock(&L->acc_lock);
	in = atomic_load(&L->in[i]);
	if (in && conn_ready(L->in_fd[i])) {
		atomic_store(&in->dead, true);
		uroce_watcher_del(dev->prog.epfd, w);
		rx = 1;
	}
	pthread_mutex_unlock(&L->acc_lock);
	return rx;
}
