// SPDX-License-Identifier: MIT
/*
 * Put one packet of a QP on the wire: pad, ICRC, hand to packet IO.
 * The ICRC is packet IO's where it says so (uroce_pkt_io fills_icrc: the
 * UDP IO, which computes it only for what leaves by the socket or is
 * captured, not for the same-host rings).
 *
 * Between uroce_xmit_begin and uroce_xmit_end (the requester's run, the
 * processing of one received packet) packets are held and leave together:
 * a run of equal-sized datagrams to one destination (the middle packets
 * of a message, the READ responses of a request), optionally ended by a
 * shorter one, is one UDP GSO send, one system call instead of one per
 * packet.  The kernel splits it into datagrams with IPv4 identification
 * 0, 1, 2, ... (an unconnected socket with DF starts each send at 0), and
 * the ICRC covers the identification, so packet k of a batch is computed
 * for ID k.  Outside a batch, or without GSO, every packet goes at once
 * with ID 0 as before.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"

#define XMIT_MAX_IOV (UROCE_MAX_SGE + 4)
/* a GSO send carries at most 64 KiB of UDP payload, and the kernel takes
 * at most UDP_MAX_SEGMENTS (64 on older kernels) datagrams */
#define RUN_MAX_BYTES 65000u
#define RUN_MAX_PKTS  64

static const uint8_t zeros[4];

/* A signal, an ICMP error of an earlier datagram, a full socket buffer
 * outside a batch: loss, which the transport mends (or, on UC/UD,
 * accepts).  In a batch a full send buffer holds the rest back instead
 * (txb_send). */
static bool tx_transient(int err)
{
	return err == -EAGAIN || err == -ENOBUFS || err == -ECONNREFUSED ||
	       err == -EINTR;
}

/* the longest uroce_tx_flush waits for a full send buffer */
#define UROCE_TX_FLUSH_MS 200

/*
 * The destination cannot be reached from here at all: no route, an
 * address the socket cannot send to (a broadcast without SO_BROADCAST,
 * another family), a datagram larger than the route takes.  What rxe
 * fails before its packet reaches IP (rxe_prepare: no route).  Drops
 * after routing (a firewall's EPERM, a full queue) are loss, as rxe's
 * rxe_send has them (-EAGAIN).
 */
bool uroce_tx_fatal(int err)
{
	switch (-err) {
	case ENETUNREACH:
	case EHOSTUNREACH:
	case EACCES:
	case EINVAL:
	case EAFNOSUPPORT:
	case EADDRNOTAVAIL:
	case EDESTADDRREQ:
	case EMSGSIZE:
		return true;
	default:
		return false;
	}
}

/* A UC/UD packet could not be sent: uroce_comp_settle fails its WQE. */
static void note_failed(struct uroce_tx *tx, const struct uroce_txtag *t)
{
	uint32_t qpn = t->qpn & ~UROCE_TXTAG_REQ;
	struct uroce_txtag *last;

	pthread_mutex_lock(&tx->txq_lock);
	last = tx->nfail ? &tx->fail[tx->nfail - 1] : NULL;
	/* the packets of one WQE need one record */
	if ((!last || last->qpn != qpn || last->wqe != t->wqe) &&
	    tx->nfail < UROCE_TXFAIL_MAX) {
		tx->fail[tx->nfail].qpn = qpn;
		tx->fail[tx->nfail++].wqe = t->wqe;
	}
	pthread_mutex_unlock(&tx->txq_lock);
	atomic_store_explicit(&tx->settle, true, memory_order_relaxed);
}

/*
 * A run failed with an error that may be its destination's (no route)
 * or GSO's (EINVAL, EMSGSIZE: a segment the route cannot take): send its
 * packets one by one.  If they go, it was GSO (off from now on); UC/UD
 * packets that fail again are noted for uroce_comp_settle, which fails
 * their WQEs.  Error path only.
 */
static void txb_run_failed(struct uroce_dev *dev, struct uroce_txbatch *b,
			   const struct uroce_txrun *run)
{
	bool gso_off = false;
	int k;

	for (k = 0; k < run->npkts; k++) {
		int p = run->pkt0 + k;
		const struct iovec *iov = &b->iov[b->pkt_iov[p]];
		int n = b->pkt_iov[p + 1] - b->pkt_iov[p];
		int err = dev->net.io->send(dev, &run->dst, run->ip, iov, n);
		const struct uroce_txtag *t = &b->tag[p];

		if (!uroce_tx_fatal(err)) {
			gso_off |= run->npkts > 1 && !err;
			continue;
		}
		if (t->qpn & UROCE_TXTAG_REQ)
			note_failed(&dev->tx, t); /* (RC: loss) */
	}
	if (gso_off && uroce_net_gso_off(dev))
		uroce_count(dev, UROCE_CNT_TX_GSO_OFF, 1);
}

/*
 * Send a sealed batch from its first run not yet gone; tx_lock held,
 * dev->lock not needed.  false: the socket's send buffer is full (the
 * local link's queue holds what it may of ours) and the rest of the
 * batch waits, in order, for the next sender (docs/transport.md, "A full
 * send buffer").
 */
static bool txb_send(struct uroce_dev *dev, struct uroce_txbatch *b)
{
	int sent = b->sent, r, k;

	uroce_assert_held(&dev->tx.tx_lock);
	while (sent < b->nruns) {
		int n = dev->net.io->send_runs(dev, &b->run[sent],
					       b->nruns - sent, b->iov);

		if (n <= 0 && uroce_tx_fatal(n)) {
			txb_run_failed(dev, b, &b->run[sent++]);
			continue;
		}
		if (n == -EPERM) {
			/* a firewall dropped the run (netfilter sees a GSO
			 * run as one packet, as it sees a TSO segment): that
			 * run is lost, the rest of the batch goes, and GSO
			 * stays on: EPERM says nothing about the kernel's
			 * GSO */
			uroce_count(dev, UROCE_CNT_TX_FILTERED, 1);
			sent++;
			continue;
		}
		if (n == -EAGAIN || n == -ENOBUFS) {
			uroce_count(dev, UROCE_CNT_TX_SNDBUF_FULL, 1);
			b->sent = sent;
			return false;
		}
		if (n <= 0) {
			/* a full socket buffer is loss, which the transport
			 * mends; anything else means no GSO here: lost
			 * packets are resent one by one from now on */
			if (!tx_transient(n)) {
				uroce_count(dev, UROCE_CNT_TX_GSO_OFF, 1);
				uroce_net_gso_off(dev);
			}
			break;
		}
		for (r = sent; r < sent + n; r++) {
			const struct uroce_txrun *run = &b->run[r];

			if (run->npkts > 1)
				uroce_count(dev, UROCE_CNT_TX_GSO_SENDS, 1);
			for (k = 0; k < run->npkts; k++) {
				int p = run->pkt0 + k;

				uroce_tap_tx(dev, &run->dst, run->ip,
					     &b->iov[b->pkt_iov[p]],
					     b->pkt_iov[p + 1] - b->pkt_iov[p],
					     (uint16_t)k);
			}
		}
		sent += n;
	}
	b->npkts = 0;
	b->nruns = 0;
	b->niov = 0;
	b->sent = 0;
	return true;
}

/*
 * Send every sealed batch, oldest first; tx_lock held.  A batch a full
 * send buffer held back stays at the head (only the tx_lock holder takes
 * batches off it), and full says so.
 */
static void txq_send_all(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->tx.tx_lock);
	for (;;) {
		struct uroce_txbatch *b;

		pthread_mutex_lock(&dev->tx.txq_lock);
		b = dev->tx.txq_head;
		pthread_mutex_unlock(&dev->tx.txq_lock);
		if (!b) {
			/* (out of a full buffer: the progress thread runs the
			 * requesters that wait, at once, as the socket has
			 * room) */
			if (atomic_exchange_explicit(&dev->tx.full, false,
						     memory_order_relaxed) &&
			    atomic_load_explicit(&dev->tx.room_watched,
						 memory_order_relaxed))
				uroce_net_want_room(dev);
			return;
		}
		if (!txb_send(dev, b)) {
			atomic_store_explicit(&dev->tx.full, true,
					      memory_order_relaxed);
			/* (after the store: room that comes at once is an
			 * event too, and its callback sees full) */
			atomic_store_explicit(&dev->tx.room_watched,
					      uroce_net_want_room(dev),
					      memory_order_relaxed);
			return;
		}
		pthread_mutex_lock(&dev->tx.txq_lock);
		dev->tx.txq_head = b->next;
		if (!b->next)
			dev->tx.txq_tail = NULL;
		pthread_mutex_unlock(&dev->tx.txq_lock);
		atomic_store_explicit(&dev->tx.sent_seq, b->seq,
				      memory_order_release);
		pthread_mutex_lock(&dev->tx.txq_lock);
		b->next = dev->tx.txb_free;
		dev->tx.txb_free = b;
		atomic_fetch_sub(&dev->tx.txq_len, 1);
		pthread_mutex_unlock(&dev->tx.txq_lock);
	}
}

__thread bool uroce_tx_defer, uroce_tx_settles;

/*
 * Send the sealed batches.  A thread that finds another sending waits for
 * it (a verb must not return before its packets are with the kernel: a
 * program may exit right after rdma_disconnect, as rping does, and a DREQ
 * left in our queue would die with it), unless both may defer
 * (uroce_tx_defer: receiving threads) and the other is here, draining:
 * that one looks at the queue again after it lets tx_lock go, so a batch
 * sealed before our trylock is sent by it.  Waiting there cost the
 * progress thread a futex sleep and the sender a wake-up per GSO train it
 * sent.  A verb's thread is not left others' batches: it is on the
 * application's path.  Nor does a device defer once a same-host ring came
 * up: a ring's send is a copy, no system call, and nothing measured
 * better there (docs/datapath.md, "One sender at a time").
 */
static void send_queued(struct uroce_dev *dev)
{
	/* (a device whose same-host rings came up: above) */
	bool may = uroce_tx_defer && !atomic_load_explicit(&dev->net.path_gen,
							   memory_order_relaxed);

	/* (a full send buffer: the queue waits for room, EPOLLOUT, or a
	 * requester's or the timer's try; a send now would fail again) */
	if (!atomic_load(&dev->tx.txq_len) || uroce_tx_full(dev)) {
		uroce_tx_settles = false;
		return;
	}
	if (pthread_mutex_trylock(&dev->tx.tx_lock)) {
		if (may && !uroce_tx_settles && atomic_load(&dev->tx.draining))
			return;
		uroce_lock_spin(&dev->tx.tx_lock);
	}
	do {
		atomic_store(&dev->tx.draining, may);
		txq_send_all(dev);
		atomic_store(&dev->tx.draining, false);
		pthread_mutex_unlock(&dev->tx.tx_lock);
		/* (seq_cst: a batch sealed before a deferring thread's
		 * trylock is counted here; a thread that may not defer was
		 * left nothing) */
	} while (may && atomic_load(&dev->tx.txq_len) && !uroce_tx_full(dev) &&
		 !pthread_mutex_trylock(&dev->tx.tx_lock));
	uroce_tx_settles = false;
}

bool uroce_tx_full(struct uroce_dev *dev)
{
	return atomic_load_explicit(&dev->tx.full, memory_order_relaxed);
}

/* (the first wait of a requester that found the buffer full, and the
 * longest: it doubles while the buffer stays full; with the progress
 * thread woken by room, EPOLLOUT, the longest at once: the timer is only
 * a fallback then) */
#define TX_FULL_WAIT_MIN_NS 25000
#define TX_FULL_WAIT_MAX_NS 1000000

uint64_t uroce_tx_room(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->lock);
	if (!uroce_tx_full(dev))
		return 0;
	/* (a sender that holds tx_lock tries the queue itself) */
	if (!pthread_mutex_trylock(&dev->tx.tx_lock)) {
		txq_send_all(dev);
		pthread_mutex_unlock(&dev->tx.tx_lock);
	}
	if (!uroce_tx_full(dev)) {
		dev->tx.full_wait_ns = 0;
		dev->tx.retry_at_ns = 0;
		return 0;
	}
	dev->tx.full_wait_ns = dev->tx.full_wait_ns ? dev->tx.full_wait_ns * 2 :
						      TX_FULL_WAIT_MIN_NS;
	if (dev->tx.full_wait_ns > TX_FULL_WAIT_MAX_NS ||
	    atomic_load_explicit(&dev->tx.room_watched, memory_order_relaxed))
		dev->tx.full_wait_ns = TX_FULL_WAIT_MAX_NS;
	return dev->tx.full_wait_ns;
}

void uroce_tx_flush(struct uroce_dev *dev)
{
	int ms;

	for (ms = 0; ms < UROCE_TX_FLUSH_MS; ms++) {
		struct pollfd p = { .fd = dev->net.sock, .events = POLLOUT };

		pthread_mutex_lock(&dev->tx.tx_lock);
		txq_send_all(dev);
		pthread_mutex_unlock(&dev->tx.tx_lock);
		uroce_tx_drain(dev);
		if (!uroce_tx_full(dev) || p.fd < 0)
			return;
		poll(&p, 1, 1);
	}
}

void uroce_tx_room_ready(struct uroce_dev *dev)
{
	uint32_t i;

	pthread_mutex_lock(&dev->lock);
	/* (it waits for a sender that holds tx_lock: the oneshot event is
	 * spent, and a try that found tx_lock taken would leave the queue
	 * to the fallback timer; still full, the send that failed watches
	 * for room again) */
	pthread_mutex_lock(&dev->tx.tx_lock);
	txq_send_all(dev);
	pthread_mutex_unlock(&dev->tx.tx_lock);
	if (!uroce_tx_room(dev)) {
		/* the requesters that wait for room (the list may grow
		 * as they run; timers_run takes QPs off it) */
		for (i = 0; i < dev->obj.ntimed; i++) {
			struct uroce_qp *qp = dev->obj.timed[i];

			if (!qp->req.tx_wait)
				continue;
			qp->req.tx_wait = false;
			qp->req.pace_deadline_ns = 0;
			uroce_req_run(qp);
		}
	}
	uroce_dev_unlock(dev);
}

/*
 * A full send buffer held the queue back and no requester may be left to
 * try it again (ACKs, responses, or a whole window already built): the
 * device timer does, with the requesters' backoff.  Only when that is
 * due: every unlock drains and comes here, and a try before it, while
 * the buffer is still full, is a failed sendmmsg for nothing.  A
 * dev->lock that is taken is left to its holder, whose unlock drains and
 * comes back here.
 */
static void tx_retry_later(struct uroce_dev *dev)
{
	uint64_t now, wait;

	if (pthread_mutex_trylock(&dev->lock))
		return;
	now = uroce_now_ns();
	if (now >= dev->tx.retry_at_ns) {
		wait = uroce_tx_room(dev);
		dev->tx.retry_at_ns = wait ? now + wait : 0;
	}
	/* (armed already, unless it fired a little early) */
	if (dev->tx.retry_at_ns)
		uroce_timer_arm(dev, dev->tx.retry_at_ns);
	pthread_mutex_unlock(&dev->lock);
}

void uroce_tx_drain(struct uroce_dev *dev)
{
	/* A batch counts in txq_len until it has gone, so 0 means
	 * everything queued before has. */
	send_queued(dev);
	/* completions that waited for these packets (engine/comp.c) */
	if (atomic_load_explicit(&dev->tx.settle, memory_order_relaxed)) {
		uroce_comp_settle(dev);
		send_queued(dev);
	}
	if (uroce_tx_full(dev))
		tx_retry_later(dev);
}

/* A batch to fill, NULL if all are out (the caller then sends at once). */
#define TXB_MAX_COUNT 4

static struct uroce_txbatch *txb_get(struct uroce_dev *dev)
{
	struct uroce_txbatch *b;

	pthread_mutex_lock(&dev->tx.txq_lock);
	b = dev->tx.txb_free;
	if (b) {
		dev->tx.txb_free = b->next;
	} else if (dev->tx.txb_count < TXB_MAX_COUNT) {
		b = calloc(1, sizeof(*b));
		if (b)
			dev->tx.txb_count++;
	}
	pthread_mutex_unlock(&dev->tx.txq_lock);
	return b;
}

/* Queue the open batch to be sent once dev->lock is released. */
static void txb_seal(struct uroce_dev *dev)
{
	struct uroce_txbatch *b = dev->tx.txb;

	dev->tx.txb = NULL;
	if (!b)
		return;
	pthread_mutex_lock(&dev->tx.txq_lock);
	if (!b->npkts) {
		b->next = dev->tx.txb_free;
		dev->tx.txb_free = b;
	} else {
		b->next = NULL;
		if (dev->tx.txq_tail)
			dev->tx.txq_tail->next = b;
		else
			dev->tx.txq_head = b;
		dev->tx.txq_tail = b;
		atomic_fetch_add(&dev->tx.txq_len, 1);
	}
	pthread_mutex_unlock(&dev->tx.txq_lock);
}

void uroce_xmit_begin(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->lock);
	dev->tx.tx_depth++;
}

void uroce_xmit_end(struct uroce_dev *dev)
{
	if (!--dev->tx.tx_depth)
		txb_seal(dev);
}

/* Send one packet now, after everything queued before it; dev->lock held
 * (lock order: core/lock.h). */
static int send_now(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		    struct uroce_ipopt ip, const struct iovec *iov, int n)
{
	int err;

	uroce_assert_held(&dev->lock);
	pthread_mutex_lock(&dev->tx.tx_lock);
	txq_send_all(dev);
	/* (behind batches a full send buffer holds back: lost, not ahead
	 * of them) */
	err = uroce_tx_full(dev) ? -EAGAIN :
				   dev->net.io->send(dev, dst, ip, iov, n);
	pthread_mutex_unlock(&dev->tx.tx_lock);
	return err;
}

/*
 * The run a packet of len bytes (npayload payload pieces) to dst goes
 * into, a new one if it cannot join the last; NULL if the batch is full.
 */
/*
 * What the peer's address steers a datagram by when several processes
 * share it (docs/shared.md): the destination QPN's top byte, or for QP1
 * the MAD inside, which a run's later datagrams do not share.  A GSO run
 * reaches one socket whole (the kernel picks it by the run's first
 * datagram), so it keeps to datagrams that one process takes: one run
 * with pings to 128 processes behind one address went to one of them,
 * which forwarded 127 over a queue of 10 and dropped most (docs/scale.md
 * "Many processes").  Between two processes it changes nothing.
 */
#define RUN_SOLO 0x100

static uint16_t steer_of(const uint8_t *bth)
{
	uint32_t qpn = bth_qpn(bth);

	return qpn == 1 ? RUN_SOLO : (uint16_t)(qpn >> 16);
}

/*
 * A run fits the send buffer: the kernel refuses a GSO send that would
 * take the socket past twice its buffer (ENOBUFS, held back as a full
 * buffer is), so a larger run would wait for room that never comes.  A
 * run of at most the buffer goes once the socket is empty
 * (UROCE_SNDBUF_KB=16: runs of 16 KiB).
 */
static uint32_t run_max_bytes(const struct uroce_dev *dev)
{
	uint32_t b = dev->net.sndbuf;

	return b && b < RUN_MAX_BYTES ? b : RUN_MAX_BYTES;
}

static struct uroce_txrun *txb_run_for(const struct uroce_dev *dev,
				       struct uroce_txbatch *b,
				       const struct sockaddr_storage *dst,
				       struct uroce_ipopt ip, uint32_t len,
				       int npayload, uint16_t steer)
{
	struct uroce_txrun *run = b->nruns ? &b->run[b->nruns - 1] : NULL;

	if (b->npkts == UROCE_TXB_MAX_PKTS ||
	    b->niov + npayload + 3 > UROCE_TXB_MAX_IOV)
		return NULL;
	if (run && !run->closed && len <= run->seg &&
	    run->npkts < RUN_MAX_PKTS && run->bytes + len <= run_max_bytes(dev) &&
	    uroce_ipopt_eq(run->ip, ip) && run->steer == steer &&
	    steer != RUN_SOLO && !memcmp(&run->dst, dst, uroce_sa_len(dst)))
		return run;
	if (b->nruns == UROCE_TXB_MAX_RUNS)
		return NULL;
	run = &b->run[b->nruns++];
	memcpy(&run->dst, dst, uroce_sa_len(dst));
	run->ip = ip;
	run->steer = steer;
	run->seg = (uint16_t)len;
	run->npkts = 0;
	run->pkt0 = (uint16_t)b->npkts;
	run->closed = false;
	run->bytes = 0;
	run->iov0 = b->niov;
	run->niov = 0;
	return run;
}

int uroce_xmit(struct uroce_qp *qp, uint8_t *hdr, uint32_t hdrlen,
	       const struct iovec *payload, int npayload, uint32_t paylen)
{
	/* an ACK held back goes before anything else the QP sends: its
	 * responses (a NAK, a READ response) are one stream with it, and a
	 * request may answer the message it acknowledges (tgt completes a
	 * login only on the ACK of its response; the initiator's first
	 * command must not come before it).  In the same batch it costs
	 * no system call of its own (docs/datapath.md, "ACKs") */
	if (qp->resp.ack_pending &&
	    !(uroce_opcode[bth_opcode(hdr)].mask & UROCE_M_ACK))
		uroce_ack_flush(qp);
	if (uroce_qp_is_xrc(qp))
		return uroce_xrc_xmit(qp, hdr, hdrlen, payload, npayload,
				      paylen);
	return uroce_xmit_to(qp, &qp->peer, qp->ip, hdr, hdrlen, payload,
			     npayload, paylen);
}

int uroce_xmit_to(struct uroce_qp *qp, const struct sockaddr_storage *dst,
		  struct uroce_ipopt ip, uint8_t *hdr, uint32_t hdrlen,
		  const struct iovec *payload, int npayload, uint32_t paylen)
{
	struct uroce_dev *dev = qp->dev;
	struct uroce_txbatch *b = dev->tx.txb;
	struct uroce_txrun *run = NULL;
	struct iovec one[XMIT_MAX_IOV], *iov = one;
	uint8_t one_hdr[UROCE_MAX_HDR_LEN], one_tail[UROCE_ICRC_LEN];
	uint8_t *h = one_hdr, *tail = one_tail;
	struct uroce_icrc_ip icrc_ip;
	uint32_t pad = (4 - (paylen & 3)) & 3;
	uint32_t len = hdrlen + paylen + pad + UROCE_ICRC_LEN;
	int n = 0, i, err = 0;

	if (npayload > UROCE_MAX_SGE || hdrlen > UROCE_MAX_HDR_LEN)
		return -EINVAL;
	if (dev->tx.tx_depth && !dev->net.fault.on && dev->net.io->send_runs &&
	    atomic_load_explicit(&dev->net.gso, memory_order_relaxed)) {
		uint16_t steer = steer_of(hdr);

		if (b &&
		    !(run = txb_run_for(dev, b, dst, ip, len, npayload, steer)))
			txb_seal(dev); /* full: queue it, start another */
		if (!dev->tx.txb && (dev->tx.txb = txb_get(dev)))
			dev->tx.txb->seq = ++dev->tx.open_seq;
		b = dev->tx.txb;
		if (b && !run)
			run = txb_run_for(dev, b, dst, ip, len, npayload, steer);
	}
	if (run) {
		iov = &b->iov[b->niov];
		h = b->hdr[b->npkts];
		tail = b->tail[b->npkts];
	}
	memcpy(h, hdr, hdrlen);
	h[1] = (uint8_t)((h[1] & ~0x30) | (pad << 4));
	iov[n].iov_base = h;
	iov[n++].iov_len = hdrlen;
	for (i = 0; i < npayload; i++)
		iov[n++] = payload[i];
	if (pad) {
		iov[n].iov_base = (void *)zeros;
		iov[n++].iov_len = pad;
	}
	if (!dev->net.io->fills_icrc) {
		uroce_icrc_ip_from(&dev->net.local, dst, &icrc_ip);
		/* an unconnected socket with IP_PMTUDISC_DO sends DF, and
		 * IPv4 ID 0 for a datagram of its own, k for the k-th of a
		 * GSO send */
		icrc_ip.ip_id = run ? run->npkts : 0;
		icrc_ip.df = dev->net.family == AF_INET;
		uroce_icrc_store(tail, uroce_icrc_compute(&icrc_ip, iov, n));
	}
	iov[n].iov_base = tail;
	iov[n++].iov_len = UROCE_ICRC_LEN;

	if (run) {
		if (len < run->seg)
			run->closed = true; /* a shorter datagram ends it */
		run->npkts++;
		run->bytes += len;
		run->niov += n;
		b->niov += n;
		/* UC/UD packets are requests, of the WQE at sq.next
		 * (engine/req.c); RC's failures are loss, untagged */
		b->tag[b->npkts].qpn = uroce_qp_reliable(qp) ?
					       0 :
					       uqp_ibqp(qp)->qp_num |
						       UROCE_TXTAG_REQ;
		b->tag[b->npkts].wqe = qp->sq.next;
		b->pkt_iov[++b->npkts] = (uint16_t)b->niov;
	} else {
		err = send_now(dev, dst, ip, iov, n);
	}
	uroce_count(dev, UROCE_CNT_TX_PKTS, 1);
	uroce_count(dev, UROCE_CNT_TX_BYTES, len);
	qp->cnt_tx_pkts++;
	if (qp->type != IBV_QPT_UD)
		uroce_count(dev, UROCE_CNT_TX_UNANSWERED, 1);
	else
		qp->tx_at_rx = qp->cnt_tx_pkts;
	return run ? 1 : err;
}
