// SPDX-License-Identifier: MIT
/*
 * The same-host path (local.h, docs/local.md), sending: a packet into
 * the next slot of the peer's ring, or into the overflow queue behind
 * it, and the doorbell (tx_lock held).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "local.h"

_Static_assert(UROCE_RING_MTU == LR_PAYLOAD,
	       "a ring packet's payload is what its slot holds");

/* ---- sending side (tx_lock held) ---- */

/* what waits behind the ring goes with it (as datagrams in flight to a
 * process that died) */
void lr_q_free(struct uroce_local *L, struct lout *o)
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

void lr_out_down(struct uroce_local *L, struct lout *o)
{
	int fd = atomic_exchange(&o->fd, -1);

	lr_q_free(L, o);

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
		lr_out_down(L, o);
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

/* the entry for dst in the far list, or the one to reuse for it */
static struct lfar *far_find(struct uroce_local *L,
			     const struct sockaddr_storage *dst)
{
	struct lfar *f = &L->far[0];
	int i;

	for (i = 0; i < LR_MAX_FAR; i++) {
		if (L->far[i].until_ns && uroce_same_ip(&L->far[i].addr, dst))
			return &L->far[i];
		if (L->far[i].until_ns < f->until_ns)
			f = &L->far[i];
	}
	return f;
}

/*
 * The ring for (dst, QPN top byte), connecting if need be; NULL: UDP.
 * An address without even the name ".../0" (its first member's) has no
 * device in this namespace: it goes on the far list for LR_RETRY_NS,
 * not into out[], so that a process with more remote peers than out[]
 * holds neither connects once per packet (an entry that said "not
 * local" was evicted by the next peer's: 128 + 128 mesh members spent a
 * tenth of two cores in socket, connect and close) nor evicts the rings
 * it has.  A slot's missing name with ".../0" there (a member gone from
 * a local shared address) stays an entry of out[] until its retry.
 */
static struct lout *peer_get(struct uroce_dev *dev, struct uroce_local *L,
			     const struct sockaddr_storage *dst, uint8_t sb,
			     uint64_t now)
{
	struct lout *o = out_find(L, dst, sb);
	struct lfar *f;

	if (o && o->up && atomic_load_explicit(&o->dead, memory_order_relaxed)) {
		lr_out_down(L, o); /* the peer died: see if it is back */
		o->retry_ns = 0;
	}
	if (o && o->up)
		return o;
	if (!o) {
		f = far_find(L, dst);
		if (f->until_ns > now && uroce_same_ip(&f->addr, dst))
			return NULL;
		o = out_new(L, dst, sb);
	}
	o->last_ns = now;
	if (now >= o->retry_ns) {
		if (!lr_out_connect(dev, L, o))
			return o;
		uroce_count(dev, UROCE_CNT_LOCAL_MISSES, 1);
		o->retry_ns = now + LR_RETRY_NS;
	}
	if (sb) {
		/* a device bound alone takes all its QPNs at ".../0" */
		struct lout *z = peer_get(dev, L, dst, 0, now);

		if (z)
			return z->alone ? z : NULL;
	}
	f = far_find(L, dst);
	memset(&f->addr, 0, sizeof(f->addr));
	memcpy(&f->addr, dst, uroce_sa_len(dst));
	f->until_ns = now + LR_RETRY_NS;
	o->used = false;
	return NULL;
}

static bool usable(const struct lout *o)
{
	return o && o->up &&
	       !atomic_load_explicit(&o->dead, memory_order_relaxed);
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
 * A MAD to our own shared address goes to the member it is for, as the
 * group's steering finds it (share_rx.c gsi_slot): through that member's
 * ring when it is up (the one the data path to that member takes), by
 * UDP otherwise, where the group's program steers it to that member's
 * socket.  Through ".../0" it cost the first member's thread a wake-up
 * and a forward for every MAD between two other members, and a
 * connection's first MAD a handshake with a member it may never send
 * data to.  NULL: by UDP.
 */
static struct lout *gsi_peer(struct uroce_dev *dev, struct uroce_local *L,
			     const struct sockaddr_storage *dst,
			     const struct iovec *iov, int n)
{
	uint8_t pkt[UROCE_GSI_PEEK];
	const struct iovec *it = iov;
	size_t off = 0;
	uint32_t len, s;
	struct lout *o;

	len = iov_take(pkt, &it, &off, iov + n, sizeof(pkt));
	s = uroce_share_gsi_dest(dev, pkt, len);
	o = s && s <= 0xff ? out_find(L, dst, (uint8_t)s) : NULL;
	return usable(o) ? o : NULL;
}

static struct lout *peer_for(struct uroce_dev *dev,
			     const struct sockaddr_storage *dst,
			     const struct iovec *iov, int n)
{
	struct uroce_local *L = loc(dev);
	struct lout *o;
	uint8_t sb;

	if (!L || dst->ss_family != dev->net.family ||
	    uroce_addr_is_mcast(dst) || iov[0].iov_len < UROCE_BTH_LEN)
		return NULL;
	if (bth_qpn(iov[0].iov_base) == 1 /* QP1 */ && dev->net.share &&
	    uroce_same_ip(dst, &dev->net.local))
		return gsi_peer(dev, L, dst, iov, n);
	sb = ((const uint8_t *)iov[0].iov_base)[5]; /* dest QP 23..16 */
	o = L->last;
	if (usable(o) && o->sbyte == sb && uroce_same_ip(&o->addr, dst))
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
			lr_q_free(L, o);
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
bool lr_queues_drain(struct uroce_dev *dev, struct uroce_local *L, bool wait,
		     bool ask)
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

/*
 * At close: the packets that wait behind a ring go into it before the
 * ring goes.  UD and UC completions were given when the packets were
 * queued, as a NIC gives them when its packets have left, and a NIC's
 * packets reach their peer after the process exited (udaddy's server
 * exits after its last sends; their datagrams were lost, and the client
 * waited for them for ever).  Bounded: a receiver that takes nothing
 * for SETTLE_STALL_NS loses what is left.  Longer than a sender's
 * LR_STALL_NS: an exit is once, and a receiver starved of CPU by a
 * loaded host took nothing for tens of milliseconds at a time (with
 * 20 ms the datagrams were still lost there).  tx_lock held.
 */
#define SETTLE_STALL_NS 500000000ull

void lr_queues_settle(struct uroce_dev *dev, struct uroce_local *L)
{
	uint64_t until = uroce_now_ns() + SETTLE_STALL_NS;

	uroce_assert_held(&dev->tx.tx_lock);
	while (atomic_load_explicit(&L->queues, memory_order_relaxed)) {
		uint32_t moved = 0;
		int i;

		for (i = 0; i < LR_MAX_OUT; i++)
			moved -= L->out[i].head;
		queues_flush(dev, L, false);
		for (i = 0; i < LR_MAX_OUT; i++)
			moved += L->out[i].head;
		if (moved)
			until = uroce_now_ns() + SETTLE_STALL_NS;
		else if (uroce_now_ns() > until)
			break;
		else
			sched_yield();
	}
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
	if (len > LR_DATA || !(o = peer_for(dev, dst, iov, iovcnt)))
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

		o = peer_for(dev, &run->dst, it, n);
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
		if (!peer_for(dev, &run[r].dst, &iov[run[r].iov0], run[r].niov))
			break;
		send_run(dev, &run[r], iov);
	}
	if (r)
		return r;
	for (r = 1; r < nruns; r++)
		if (peer_for(dev, &run[r].dst, &iov[run[r].iov0], run[r].niov))
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
	/* (as peer_get: ".../0" takes another slot's QPNs only when its
	 * device is alone at the address) */
	if (!(o && o->up) && (qpn >> 16)) {
		o = out_find(L, dst, 0);
		if (o && !o->alone)
			o = NULL;
	}
	up = o && o->up && !atomic_load(&o->dead);
	pthread_mutex_unlock(&dev->tx.tx_lock);
	return up;
}

/* the slots of the ring an RC window may fill with packets to dst (QPN
 * qpn), or 0 when they go by UDP: the receive buffer a same-host peer
 * has for us, less LR_SPARE for what is not windowed (the ACKs of the
 * other direction, UD, UC), which otherwise found a full ring and went
 * through the queue and a room bell (docs/local.md) */
uint32_t uroce_local_window(struct uroce_dev *dev,
			    const struct sockaddr_storage *dst, uint32_t qpn)
{
	return uroce_local_peer(dev, dst, qpn) ? LR_SLOTS - LR_SPARE : 0;
}
