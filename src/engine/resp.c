// SPDX-License-Identifier: MIT
/*
 * The responder: checks each request's PSN against the expected one,
 * executes SEND/WRITE/READ/atomic requests into local memory after the
 * MR checks, and answers with ACKs, NAKs, READ responses and atomic ACKs
 * (IBA 9.7.5).  Duplicates are re-ACKed, READs replayed, atomics answered
 * from the saved result, never executed twice.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "dev.h"

/*
 * Where one RC request is on its way through the responder (IBA 9.7.5),
 * as rxe's RESPST_*: check_psn picks one of the first three; execute
 * (check_sequence, then do_send, do_write, do_read, ...) ends in
 * EXECUTED or an error state; each error state is one row of resp_errs.
 * UC (do_uc) and UD (do_ud) use execute and nothing else: no answers.
 */
enum resp_state {
	RESPST_DUPLICATE,   /* PSN before the expected one: answer again,
				 * never execute again (9.7.5.1.1) */
	RESPST_OUT_OF_SEQ,  /* PSN after it: one sequence NAK per gap
				 * (9.7.5.2.1) */
	RESPST_EXECUTE,	    /* the expected PSN (9.7.5.1) */
	RESPST_EXECUTED,    /* done: epsn moves on, an ACK if asked (READ
				 * and atomic answered already) (9.7.5.1.1) */
	RESPST_ERR_RNR,	    /* no receive WQE: RNR NAK (9.7.5.2.8) */
	RESPST_ERR_INVALID, /* invalid request NAK (9.7.5.2.2) */
	RESPST_ERR_ACCESS,  /* remote access error NAK (9.7.5.2.3) */
	RESPST_ERR_OP,	    /* remote operational error (9.7.5.2.4) */
	RESPST_NSTATES
};

/*
 * The NAK each error state answers with, its counters, and the affiliated
 * event that tells the consumer (11.6.3.1).  All but RNR (class B: the
 * requester retries) are class C: the QP moves to the error state.
 */
static const struct resp_err {
	uint8_t code;		      /* AETH NAK code */
	enum uroce_counter cnt, cnt2; /* cnt2: UROCE_CNT_NUM = none */
	enum ibv_event_type event;
	bool fatal;
} resp_errs[RESPST_NSTATES] = {
	[RESPST_ERR_RNR] = {
		.cnt = UROCE_CNT_TX_RNR_NAK, .cnt2 = UROCE_CNT_NUM,
	},
	[RESPST_ERR_INVALID] = {
		UROCE_NAK_INVALID_REQ, UROCE_CNT_TX_NAK_INV, UROCE_CNT_NUM,
		IBV_EVENT_QP_REQ_ERR, true,
	},
	[RESPST_ERR_ACCESS] = {
		UROCE_NAK_REM_ACCESS, UROCE_CNT_TX_NAK_ACCESS,
		UROCE_CNT_REM_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR, true,
	},
	[RESPST_ERR_OP] = {
		UROCE_NAK_REM_OP_ERR, UROCE_CNT_TX_NAK_OP, UROCE_CNT_NUM,
		IBV_EVENT_QP_FATAL, true,
	},
};

static uint8_t *hdr_of(struct uroce_pkt *pkt, enum uroce_hdr_type t)
{
	return pkt->bth + pkt->info->offset[t];
}

/* Fault injection (UROCE_FAULT rnr=K, access=K): take one of K. */
static bool take_one(_Atomic int *left_p)
{
	int left = atomic_load(left_p);

	while (left > 0) {
		if (atomic_compare_exchange_weak(left_p, &left, left - 1))
			return true;
	}
	return false;
}

/* An rkey check for this QP: a type 2 window answers only the QP it is
 * bound to (IBA 10.6.7.3). */
static struct uroce_mr *rkey_check(struct uroce_qp *qp, uint32_t rkey,
				   uint64_t va, uint64_t len,
				   unsigned int access)
{
	struct uroce_mr *mr = uroce_mr_check(qp->dev, qp->pd, rkey, va, len,
					     access);

	if (mr && take_one(&qp->dev->net.fault.access_left))
		return NULL; /* injected remote access error */
	if (mr && mr->mw_type == 2 && mr->mw_qpn != uqp_ibqp(qp)->qp_num)
		return NULL;
	return mr;
}

/*
 * The syndrome of an ACK from qp: its credit count (IBA 9.7.7.2), the
 * receive WQEs posted and not yet taken, as a code that never says more
 * than there are.  A QP on an SRQ (XRC's too) counts none: its receives
 * are shared, so it says "unlimited" (the code 31), as rxe does for
 * every QP.  Remembers whether it told the requester of an empty queue.
 */
static uint8_t ack_syn(struct uroce_qp *qp)
{
	uint32_t n;

	if (qp->srq || uroce_qp_is_xrc(qp))
		return UROCE_AETH_ACK_UNLIMITED;
	n = qp->rq.head - qp->rq.tail;
	qp->resp.rq_told_empty = !n;
	return UROCE_AETH_ACK | uroce_aeth_credit_code(n);
}

static void ack_out(struct uroce_qp *qp, uint8_t syn, uint32_t psn, uint32_t msn)
{
	uint8_t hdr[UROCE_BTH_LEN + UROCE_AETH_LEN];

	if (syn == UROCE_AETH_ACK_UNLIMITED)
		syn = ack_syn(qp);
	bth_init(hdr, UROCE_OP_RC_ACK, false, 0, UROCE_DEFAULT_PKEY,
		 qp->attr.dest_qp_num, false, psn);
	aeth_init(hdr + UROCE_BTH_LEN, syn, msn);
	uroce_xmit(qp, hdr, sizeof(hdr), NULL, 0, 0);
	uroce_count(qp->dev, UROCE_CNT_TX_ACKS, 1);
	if ((syn & UROCE_AETH_TYPE_MASK) == UROCE_AETH_ACK &&
	    psn == uroce_psn_add(qp->resp.epsn, UROCE_PSN_MASK))
		qp->resp.unasked = false;
	if ((syn & UROCE_AETH_TYPE_MASK) != UROCE_AETH_ACK)
		uroce_log_qp(UROCE_LOG_INFO, qp, psn,
			     "NAK sent, AETH syndrome 0x%02x", syn);
}

void uroce_ack_flush(struct uroce_qp *qp)
{
	if (!qp->resp.ack_pending)
		return;
	qp->resp.ack_pending = false;
	ack_out(qp, UROCE_AETH_ACK_UNLIMITED, qp->resp.ack_psn,
		qp->resp.ack_msn);
}

/*
 * The QP stops answering (the error state): what it executed and was
 * not asked to acknowledge (docs/transport.md, "Asking for ACKs") is
 * acknowledged now, so that the requester's error lands on the first
 * request this QP did not execute, as it does when every message asks
 * (rxe's requester; a CQ overrun's class G error, engine/cq_err.c).
 */
void uroce_resp_ack_unasked(struct uroce_qp *qp)
{
	enum ibv_qp_state st = qp->attr.qp_state;

	uroce_assert_held(&qp->dev->lock);
	if (!qp->resp.unasked || !uroce_qp_reliable(qp) ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD &&
	     st != IBV_QPS_SQE))
		return;
	ack_out(qp, UROCE_AETH_ACK_UNLIMITED,
		uroce_psn_add(qp->resp.epsn, UROCE_PSN_MASK), qp->resp.msn);
}

/* qp's ACK of psn, held on the device's list (which has room, or qp on
 * it already) until uroce_ack_flush */
static void ack_hold(struct uroce_qp *qp, uint32_t psn)
{
	struct uroce_dev *dev = qp->dev;

	if (!qp->resp.ack_pending)
		dev->ack.ack_pending[dev->ack.nack_pending++] =
			uqp_ibqp(qp)->qp_num;
	qp->resp.ack_pending = true;
	qp->resp.ack_psn = psn;
	qp->resp.ack_msn = qp->resp.msn;
}

/*
 * ACKs are cumulative (IBA 9.7.5.1.1), so of the AckReq packets of one
 * QP in one receive burst only the last needs its ACK: at 256 QPs sharing
 * the device's budget, most packets ask for one.  A held ACK goes out at
 * the end of the burst, or before anything else the QP sends (a NAK, a
 * READ response), so the order on the wire is kept.
 */
void uroce_send_ack(struct uroce_qp *qp, uint8_t syn, uint32_t psn)
{
	struct uroce_dev *dev = qp->dev;

	if (syn == UROCE_AETH_ACK_UNLIMITED && dev->ack.ack_defer &&
	    (qp->resp.ack_pending ||
	     dev->ack.nack_pending < UROCE_ACK_PENDING_MAX)) {
		/* (more after a whole message of this QP in the burst: a
		 * stream) */
		if (qp->resp.ack_pending && qp->resp.ack_end)
			dev->ack.stream = true;
		ack_hold(qp, psn);
		qp->resp.ack_end = false;
		return;
	}
	uroce_ack_flush(qp);
	ack_out(qp, syn, psn, qp->resp.msn);
}

/*
 * The QP is being destroyed: once it is gone nothing answers the peer's
 * retransmission, so if the ACK of the last request was lost the peer
 * retries into nothing and fails with RETRY_EXC_ERR (at 10 % loss, one
 * pingpong in ten).  Its last cumulative ACK goes out a few more times,
 * as separate datagrams; a peer that had it sees duplicates, which IBA
 * tells it to ignore (9.7.5.1.1 on the requester side).
 */
#define FAREWELL_ACKS 3

void uroce_resp_farewell(struct uroce_qp *qp)
{
	enum ibv_qp_state st = qp->attr.qp_state;
	int i;

	uroce_ack_flush(qp);
	/* only a QP whose responder took a request (a QP that was only a
	 * requester has nothing to acknowledge: no message, MSN still 0) */
	if (!uroce_qp_reliable(qp) || !qp->resp.msn ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return;
	uroce_count(qp->dev, UROCE_CNT_TX_FAREWELL_ACKS, FAREWELL_ACKS);
	for (i = 0; i < FAREWELL_ACKS; i++)
		ack_out(qp, UROCE_AETH_ACK_UNLIMITED,
			uroce_psn_add(qp->resp.epsn, UROCE_PSN_MASK),
			qp->resp.msn);
}

void uroce_ack_burst_begin(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->lock);
	dev->ack.ack_defer = true;
	dev->ack.stream = false;
}

static void flush_held_acks(struct uroce_dev *dev)
{
	uint32_t i;

	atomic_store_explicit(&dev->ack.held, false, memory_order_relaxed);
	/* (the timer the hold needed: nothing is held now) */
	if (dev->ack.by_ns) {
		uroce_timer_withdraw(dev, dev->ack.by_ns);
		dev->ack.by_ns = 0;
	}
	uroce_xmit_begin(dev);
	for (i = 0; i < dev->ack.nack_pending; i++) {
		/* (a QP destroyed meanwhile sent its ACK then: qp.c) */
		struct uroce_qp *qp = uroce_qp_lookup(dev,
						      dev->ack.ack_pending[i]);

		if (qp)
			uroce_ack_flush(qp);
	}
	dev->ack.nack_pending = 0;
	uroce_xmit_end(dev);
}

void uroce_ack_burst_end(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->lock);
	dev->ack.ack_defer = false;
	flush_held_acks(dev);
}

/* the ACKs on the list wait for the next post, UROCE_ACK_HOLD_NS at the
 * latest */
static void hold_for_post(struct uroce_dev *dev)
{
	uint64_t now, by;

	if (!dev->ack.nack_pending ||
	    atomic_load_explicit(&dev->ack.held, memory_order_relaxed))
		return;
	/* (seq_cst, the mark then the thread's wake_by; it stores wake_by,
	 * then reads the mark: one of the two sees the other) */
	atomic_store(&dev->ack.held, true);
	now = uroce_now_ns();
	/* the progress thread's next look sends it in time */
	if (uroce_ack_hold_covered(atomic_load(&dev->prog.wake_by_ns), now))
		return;
	/* (no system call unless nothing earlier is armed; a reply that
	 * takes the ACKs withdraws it, flush_held_acks) */
	by = now + UROCE_ACK_HOLD_NS;
	dev->ack.by_ns = by;
	uroce_timer_arm(dev, by);
}

/*
 * The end of a burst that an application thread took from the socket
 * in its own poll: its ACKs wait for that application's next call, so
 * that a ping-pong's reply and the ACK of the ping leave in one system
 * call (docs/datapath.md, "ACKs").  The ACK still goes first: a QP's
 * held ACK leaves before anything else it sends (uroce_xmit).  And it
 * waits at most UROCE_ACK_HOLD_NS: the engine's timer sends it then,
 * or the progress thread's next look if that comes sooner, whatever the
 * application does (a NIC does not wait for the application to be
 * scheduled; gloo destroys a buffer whose last send has not completed
 * yet).
 */
void uroce_ack_burst_end_for_post(struct uroce_dev *dev)
{
	/* a peer that waits for a reply sends one message and waits: two
	 * of one QP in a burst are a stream's, whose sender waits for this
	 * ACK to open its window, and no reply takes it (docs/datapath.md,
	 * "ACKs") */
	if (dev->ack.stream) {
		uroce_ack_burst_end(dev);
		return;
	}
	dev->ack.ack_defer = false;
	hold_for_post(dev);
}

/*
 * Receives were posted to qp (verbs/qp.c).  If its last ACK told the
 * requester of an empty receive queue, a requester that honours credits
 * may be holding its next SEND with nothing in flight, waiting for word
 * that no ACK of its own will bring: the ACK of the last PSN goes again
 * with the new count (IBA lets a responder repeat it; the requester
 * takes a duplicate ACK's count, engine/comp.c).  It is held as a
 * burst's ACKs are for the application's next post, so that a ping-pong
 * that reposts its receive and then replies sends it with the reply, in
 * one system call; UROCE_ACK_HOLD_NS at the latest.  An ACK held already
 * will carry the count.
 */
void uroce_resp_rq_posted(struct uroce_qp *qp)
{
	struct uroce_dev *dev = qp->dev;
	enum ibv_qp_state st = qp->attr.qp_state;
	uint32_t last = uroce_psn_add(qp->resp.epsn, UROCE_PSN_MASK);

	uroce_assert_held(&dev->lock);
	if (!qp->resp.rq_told_empty || qp->resp.ack_pending ||
	    qp->rq.head == qp->rq.tail ||
	    (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD))
		return;
	uroce_count(dev, UROCE_CNT_TX_CREDIT_ACKS, 1);
	qp->resp.rq_told_empty = false;
	if (dev->ack.nack_pending >= UROCE_ACK_PENDING_MAX) {
		uroce_xmit_begin(dev);
		ack_out(qp, UROCE_AETH_ACK_UNLIMITED, last, qp->resp.msn);
		uroce_xmit_end(dev);
		return;
	}
	ack_hold(qp, last);
	qp->resp.ack_end = true;
	if (!dev->ack.ack_defer)
		hold_for_post(dev);
}

/* (lock held) the ACKs a burst left for the next post go now */
void uroce_ack_release(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->lock);
	if (atomic_load_explicit(&dev->ack.held, memory_order_relaxed))
		flush_held_acks(dev);
}

/* the same, for a caller without the lock: a hint read first, as most
 * calls find nothing held */
void uroce_ack_release_unlocked(struct uroce_dev *dev)
{
	if (!atomic_load_explicit(&dev->ack.held, memory_order_relaxed))
		return;
	pthread_mutex_lock(&dev->lock);
	uroce_ack_release(dev);
	uroce_dev_unlock(dev);
}

/* a post: the held ACKs of its QP first (uroce_xmit), its packets, then
 * the other QPs' held ACKs, one batch */
void uroce_post_run(struct uroce_qp *qp)
{
	uroce_assert_held(&qp->dev->lock);
	uroce_xmit_begin(qp->dev);
	uroce_req_run(qp);
	uroce_ack_release(qp->dev);
	uroce_xmit_end(qp->dev);
}

/*
 * The device goes down (the last close, or exit right after the last
 * receive completed, the progress thread still in the burst that brought
 * it): the held ACKs leave now, or the peer retries into a process that
 * is gone.  (A NIC ACKs before it completes.)
 */
int uroce_ack_flush_held(struct uroce_dev *dev, const struct timespec *until)
{
	int err;

	err = until ? pthread_mutex_timedlock(&dev->lock, until) :
		      pthread_mutex_lock(&dev->lock);
	if (err)
		return -err;
	dev->ack.ack_defer = false;
	flush_held_acks(dev);
	uroce_dev_unlock(dev);
	return 0;
}

static struct uroce_recv_wqe *rq_head(struct uroce_qp *qp)
{
	struct uroce_rq *rq = uroce_qp_rq(qp);

	if (rq->tail == rq->head)
		return NULL;
	return &rq->wqe[rq->tail & (rq->size - 1)];
}

/* Responses to READ of [va, va+len) starting at psn. */
static void send_read_resp(struct uroce_qp *qp, struct uroce_mr *mr,
			   uint64_t va, uint32_t len, uint32_t psn)
{
	uint8_t hdr[UROCE_BTH_LEN + UROCE_AETH_LEN];
	uint32_t mtu = qp->mtu, off = 0;
	bool first = true;

	do {
		uint32_t chunk = len - off < mtu ? len - off : mtu;
		bool last = off + chunk >= len;
		struct iovec iov;
		uint8_t op;
		uint32_t hlen = UROCE_BTH_LEN;

		if (first && last)
			op = UROCE_OP_RC_READ_RESPONSE_ONLY;
		else if (first)
			op = UROCE_OP_RC_READ_RESPONSE_FIRST;
		else if (last)
			op = UROCE_OP_RC_READ_RESPONSE_LAST;
		else
			op = UROCE_OP_RC_READ_RESPONSE_MIDDLE;
		bth_init(hdr, op, false, 0, UROCE_DEFAULT_PKEY,
			 qp->attr.dest_qp_num, false, psn);
		if (uroce_opcode[op].mask & UROCE_M_AETH) {
			aeth_init(hdr + UROCE_BTH_LEN, ack_syn(qp),
				  qp->resp.msn);
			hlen += UROCE_AETH_LEN;
		}
		iov.iov_base = chunk ? uroce_mr_ptr(mr, va + off) : NULL;
		iov.iov_len = chunk;
		uroce_xmit(qp, hdr, hlen, &iov, chunk ? 1 : 0, chunk);
		off += chunk;
		psn = uroce_psn_add(psn, 1);
		first = false;
	} while (off < len);
}

static void send_atomic_ack(struct uroce_qp *qp, uint32_t psn, uint64_t orig)
{
	uint8_t hdr[UROCE_BTH_LEN + UROCE_AETH_LEN + UROCE_ATMACK_LEN];

	bth_init(hdr, UROCE_OP_RC_ATOMIC_ACK, false, 0, UROCE_DEFAULT_PKEY,
		 qp->attr.dest_qp_num, false, psn);
	aeth_init(hdr + UROCE_BTH_LEN, ack_syn(qp), qp->resp.msn);
	atmack_init(hdr + UROCE_BTH_LEN + UROCE_AETH_LEN, orig);
	uroce_xmit(qp, hdr, sizeof(hdr), NULL, 0, 0);
}

static uint32_t read_npkts(const struct uroce_qp *qp, uint32_t len)
{
	return len ? (len + qp->mtu - 1) / qp->mtu : 1;
}

/* Packet ordering inside a message: FIRST, MIDDLE*, LAST (IBA 9.8.3). */
static enum resp_state check_sequence(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_resp_state *r = &qp->resp;
	bool cont = pkt->mask & (UROCE_M_MIDDLE | UROCE_M_LAST) &&
		    !(pkt->mask & UROCE_M_FIRST);
	uint32_t seg;

	if (pkt->mask & UROCE_M_SEND) {
		if (r->in_write || cont != r->in_send)
			return RESPST_ERR_INVALID;
	} else if (pkt->mask & UROCE_M_WRITE) {
		/*
		 * A requester that resumes a partly acknowledged WRITE may
		 * start it afresh (FIRST/ONLY, with a RETH for the rest), as
		 * rxe's retry does: the old message simply ends there.  The
		 * new RETH is checked like any other.
		 */
		if (!cont && r->in_write)
			r->in_write = false;
		if (r->in_send || cont != r->in_write)
			return RESPST_ERR_INVALID;
	} else if (r->in_send || r->in_write) {
		return RESPST_ERR_INVALID;
	}
	/* every packet but the last of a message carries exactly one MTU:
	 * the path's, or a uroce requester's on this host UROCE_RING_MTU
	 * (engine/req.c seg_of) */
	seg = qp->mtu;
	if (pkt->ring)
		r->ring_peer = true;
	if (r->ring_peer && pkt->paylen > seg && seg < UROCE_RING_MTU)
		seg = UROCE_RING_MTU;
	if ((pkt->mask & UROCE_M_PAYLOAD) && !(pkt->mask & UROCE_M_LAST) &&
	    pkt->paylen != seg)
		return RESPST_ERR_INVALID;
	if (pkt->paylen > seg)
		return RESPST_ERR_INVALID;
	return RESPST_EXECUTED;
}

/*
 * A UD completion's SL says what the GRH area holds, as ConnectX does it
 * for RoCE (bit 3: the frame had a UDP header, bits 2:0: 1 IPv6, 2 IPv4).
 * RoCE has no service level on the wire, and UCX's ud_verbs reads the
 * field this way to find the destination GID in the GRH area: with SL 0
 * it compared 16 bytes of an IPv4 header with its GID and dropped every
 * packet.
 */
#define UROCE_WC_SL_ROCE_V2_IPV6 0x9
#define UROCE_WC_SL_ROCE_V2_IPV4 0xa

static void complete_recv_from(struct uroce_qp *qp, struct uroce_recv_wqe *wqe,
			       struct uroce_pkt *pkt, enum ibv_wc_opcode opcode,
			       uint32_t byte_len, uint32_t src_qp,
			       unsigned int flags)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wqe->wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = opcode;
	wc.byte_len = byte_len;
	wc.qp_num = uqp_ibqp(qp)->qp_num;
	wc.src_qp = src_qp;
	wc.wc_flags = flags;
	if (flags & IBV_WC_GRH)
		wc.sl = pkt->src.ss_family == AF_INET ?
				UROCE_WC_SL_ROCE_V2_IPV4 :
				UROCE_WC_SL_ROCE_V2_IPV6;
	if (pkt->mask & UROCE_M_IMMDT) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = immdt_raw(hdr_of(pkt, UROCE_HDR_IMMDT));
	}
	if (pkt->mask & UROCE_M_INV) {
		wc.wc_flags |= IBV_WC_WITH_INV;
		wc.invalidated_rkey = ieth_rkey(hdr_of(pkt, UROCE_HDR_IETH));
	}
	uroce_cq_push(qp->rcq, &wc, bth_se(pkt->bth) ? UROCE_CQE_SOLICITED : 0);
}

/* the head receive WQE is used up (or taken by the QP) */
static void rq_consume(struct uroce_qp *qp)
{
	uroce_qp_rq(qp)->tail++;
	if (qp->srq)
		uroce_srq_consumed(qp->srq);
}

/*
 * The receive WQE for a SEND that starts: the one the QP kept from an
 * abandoned message, else the head of its RQ or SRQ, copied and taken off
 * the queue, so that no other QP on the SRQ gets it; NULL if none.
 */
static struct uroce_recv_wqe *recv_take(struct uroce_qp *qp)
{
	struct uroce_resp_state *r = &qp->resp;
	struct uroce_recv_wqe *wqe;

	if (r->recv_taken)
		return &r->recv;
	wqe = rq_head(qp);
	if (!wqe)
		return NULL;
	r->recv = *wqe;
	memcpy(r->recv_sge, wqe->sge, wqe->num_sge * sizeof(*wqe->sge));
	r->recv.sge = r->recv_sge;
	r->recv_cq = qp->rcq;
	r->recv_taken = true;
	rq_consume(qp);
	return &r->recv;
}

/* the taken WQE, once its message completed it (or an error did) */
static void recv_release(struct uroce_qp *qp)
{
	qp->resp.recv_taken = false;
}

static void complete_recv(struct uroce_qp *qp, struct uroce_recv_wqe *wqe,
			  struct uroce_pkt *pkt, enum ibv_wc_opcode opcode,
			  uint32_t byte_len)
{
	complete_recv_from(qp, wqe, pkt, opcode, byte_len, qp->attr.dest_qp_num,
			   0);
}

/*
 * The 40 bytes RoCE v2 puts at the head of a UD receive buffer: the IPv6
 * header, or for IPv4 20 zero bytes then the IPv4 header (as rxe does).
 */
static void build_grh(struct uroce_qp *qp, struct uroce_pkt *pkt, uint8_t *grh)
{
	uint16_t udp_len = (uint16_t)(8 + pkt->len + UROCE_ICRC_LEN);

	memset(grh, 0, 40);
	uroce_ip_hdr(pkt->src.ss_family == AF_INET ? grh + 20 : grh, &pkt->src,
		     pkt->dst, udp_len, pkt->ip);
}

/* UD receive (IBA 9.8.5): Q_Key check, GRH area, no ACK, no RNR. */
static void do_ud(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uint8_t *deth = hdr_of(pkt, UROCE_HDR_DETH);
	struct uroce_dev *dev = qp->dev;
	struct uroce_recv_wqe *wqe;
	uint8_t grh[40];

	if (deth_qkey(deth) != qp->attr.qkey) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_QKEY, 1);
		return;
	}
	wqe = rq_head(qp);
	if (!wqe) {
		uroce_count(dev, UROCE_CNT_DROP_NO_RECV, 1);
		return;
	}
	if ((uint64_t)pkt->paylen + sizeof(grh) > wqe->length) {
		uroce_count(dev, UROCE_CNT_DROP_TOO_LONG, 1);
		return;
	}
	if (uroce_sge_check(dev, qp->srq ? qp->srq->pd : qp->pd, wqe->sge,
			    wqe->num_sge, IBV_ACCESS_LOCAL_WRITE)) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_STATE, 1);
		return;
	}
	build_grh(qp, pkt, grh);
	uroce_sge_scatter(wqe->sge, wqe->num_sge, 0, grh, sizeof(grh));
	uroce_sge_scatter(wqe->sge, wqe->num_sge, sizeof(grh), pkt->payload,
			  pkt->paylen);
	rq_consume(qp);
	complete_recv_from(qp, wqe, pkt, IBV_WC_RECV,
			   pkt->paylen + (uint32_t)sizeof(grh), deth_sqp(deth),
			   IBV_WC_GRH);
}

/* answer this SEND as if no receive were posted */
static bool forced_rnr(struct uroce_dev *dev)
{
	return take_one(&dev->net.fault.rnr_left);
}

static enum resp_state do_send(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_resp_state *r = &qp->resp;
	struct uroce_recv_wqe *wqe = r->recv_taken ? &r->recv : NULL;

	if (pkt->mask & UROCE_M_FIRST) {
		/* the checks first: an RNR retry must find the queue as it
		 * was, and a WQE whose SGEs fail is not taken */
		wqe = r->recv_taken ? &r->recv : rq_head(qp);
		if (!wqe || forced_rnr(qp->dev))
			return RESPST_ERR_RNR;
		if (uroce_sge_check(qp->dev, qp->srq ? qp->srq->pd : qp->pd,
				    wqe->sge, wqe->num_sge,
				    IBV_ACCESS_LOCAL_WRITE))
			return RESPST_ERR_OP;
		wqe = recv_take(qp);
		r->in_send = true;
		r->send_off = 0;
	}
	if (!wqe)
		return RESPST_ERR_INVALID;
	if (r->send_off + pkt->paylen > wqe->length) {
		struct ibv_wc wc = {
			.wr_id = wqe->wr_id,
			.status = IBV_WC_LOC_LEN_ERR,
			.opcode = IBV_WC_RECV,
			.qp_num = uqp_ibqp(qp)->qp_num,
		};

		/* IBA 9.7.5.2.2: a message longer than the receive buffer */
		recv_release(qp);
		r->in_send = false;
		uroce_cq_push(r->recv_cq, &wc, 0);
		return RESPST_ERR_INVALID;
	}
	uroce_sge_scatter(wqe->sge, wqe->num_sge, r->send_off, pkt->payload,
			  pkt->paylen);
	r->send_off += pkt->paylen;
	if (pkt->mask & UROCE_M_LAST) {
		/* IBA 9.4.1.1: invalidate the named window before completing */
		if ((pkt->mask & UROCE_M_INV) &&
		    uroce_invalidate(qp, ieth_rkey(hdr_of(pkt, UROCE_HDR_IETH))) !=
			    IBV_WC_SUCCESS)
			return RESPST_ERR_INVALID;
		complete_recv(qp, wqe, pkt, IBV_WC_RECV, (uint32_t)r->send_off);
		recv_release(qp);
		r->in_send = false;
		r->msn = (r->msn + 1) & UROCE_PSN_MASK;
	}
	return RESPST_EXECUTED;
}

static enum resp_state do_write(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_resp_state *r = &qp->resp;
	struct uroce_recv_wqe *wqe = NULL;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		return RESPST_ERR_INVALID;
	if (pkt->mask & UROCE_M_FIRST) {
		uint8_t *reth = hdr_of(pkt, UROCE_HDR_RETH);

		r->write_va = reth_va(reth);
		r->write_len = reth_len(reth);
		r->write_rkey = reth_rkey(reth);
		r->write_mr = NULL;
		if (r->write_len) {
			r->write_mr = rkey_check(qp, r->write_rkey, r->write_va,
						 r->write_len,
						 IBV_ACCESS_REMOTE_WRITE);
			if (!r->write_mr)
				return RESPST_ERR_ACCESS;
		}
		r->write_remaining = r->write_len;
	}
	if (pkt->paylen > r->write_remaining)
		return RESPST_ERR_INVALID;
	if ((pkt->mask & UROCE_M_LAST) && pkt->paylen != r->write_remaining)
		return RESPST_ERR_INVALID;
	/* the receive WQE an immediate needs is checked before any byte
	 * lands, so an RNR retry of this packet finds the state unchanged */
	if (pkt->mask & UROCE_M_IMMDT) {
		wqe = rq_head(qp);
		if (!wqe || forced_rnr(qp->dev))
			return RESPST_ERR_RNR;
	}
	if (pkt->paylen) {
		/* look the key up again: the MR may be gone since FIRST */
		r->write_mr = rkey_check(qp, r->write_rkey, r->write_va,
					 pkt->paylen, IBV_ACCESS_REMOTE_WRITE);
		if (!r->write_mr)
			return RESPST_ERR_ACCESS;
		memcpy(uroce_mr_ptr(r->write_mr, r->write_va), pkt->payload,
		       pkt->paylen);
	}
	r->write_va += pkt->paylen;
	r->write_remaining -= pkt->paylen;
	r->in_write = !(pkt->mask & UROCE_M_LAST);
	if (pkt->mask & UROCE_M_LAST) {
		if (wqe) {
			rq_consume(qp);
			complete_recv(qp, wqe, pkt, IBV_WC_RECV_RDMA_WITH_IMM,
				      (uint32_t)r->write_len);
		}
		r->msn = (r->msn + 1) & UROCE_PSN_MASK;
	}
	return RESPST_EXECUTED;
}

static enum resp_state do_read(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uint8_t *reth = hdr_of(pkt, UROCE_HDR_RETH);
	uint64_t va = reth_va(reth);
	uint32_t len = reth_len(reth);
	struct uroce_mr *mr = NULL;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return RESPST_ERR_INVALID;
	if (len) {
		mr = rkey_check(qp, reth_rkey(reth), va, len,
				IBV_ACCESS_REMOTE_READ);
		if (!mr)
			return RESPST_ERR_ACCESS;
	}
	qp->resp.msn = (qp->resp.msn + 1) & UROCE_PSN_MASK;
	send_read_resp(qp, mr, va, len, pkt->psn);
	qp->resp.epsn = uroce_psn_add(pkt->psn, read_npkts(qp, len) - 1);
	return RESPST_EXECUTED;
}

/* ATOMIC WRITE (opcode 0x1D): 8 bytes stored at once, ACKed like a write */
static enum resp_state do_atomic_write(struct uroce_qp *qp,
				       struct uroce_pkt *pkt)
{
	uint8_t *reth = hdr_of(pkt, UROCE_HDR_RETH);
	uint64_t va = reth_va(reth), val;
	struct uroce_mr *mr;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		return RESPST_ERR_INVALID;
	if ((va & 7) || pkt->paylen != 8 || reth_len(reth) != 8)
		return RESPST_ERR_INVALID;
	mr = rkey_check(qp, reth_rkey(reth), va, 8, IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		return RESPST_ERR_ACCESS;
	memcpy(&val, pkt->payload, 8);
	__atomic_store_n((uint64_t *)uroce_mr_ptr(mr, va), val,
			 __ATOMIC_SEQ_CST);
	qp->resp.msn = (qp->resp.msn + 1) & UROCE_PSN_MASK;
	return RESPST_EXECUTED;
}

/*
 * FLUSH (IBA 1.5 9.4.8): make earlier writes to the range visible (our
 * memory is ordinary RAM: a full fence does it; there is no persistent
 * memory to write back), then answer with an empty READ response.
 */
static enum resp_state do_flush(struct uroce_qp *qp, struct uroce_pkt *pkt,
				bool dup)
{
	uint8_t *feth = hdr_of(pkt, UROCE_HDR_FETH);
	uint8_t *reth = hdr_of(pkt, UROCE_HDR_RETH);
	uint8_t plt = feth_plt(feth);
	unsigned int access = 0;
	uint64_t va = reth_va(reth), len = reth_len(reth);
	struct uroce_mr *mr;

	if (plt & UROCE_FLUSH_GLOBAL)
		access |= UROCE_ACCESS_FLUSH_GLOBAL;
	if (plt & UROCE_FLUSH_PERSISTENT)
		access |= UROCE_ACCESS_FLUSH_PERSISTENT;
	if (!access || (plt & ~3u) || feth_sel(feth) > UROCE_FLUSH_MR)
		return RESPST_ERR_INVALID;
	if ((qp->attr.qp_access_flags & access) != access)
		return RESPST_ERR_INVALID;
	/* level MR flushes the whole region: only the key matters */
	if (feth_sel(feth) == UROCE_FLUSH_MR)
		len = 0;
	mr = rkey_check(qp, reth_rkey(reth), va, len, access);
	if (!mr)
		return RESPST_ERR_ACCESS;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!dup)
		qp->resp.msn = (qp->resp.msn + 1) & UROCE_PSN_MASK;
	send_read_resp(qp, NULL, 0, 0, pkt->psn);
	return RESPST_EXECUTED;
}

static struct uroce_resp_res *find_res(struct uroce_qp *qp, uint32_t psn)
{
	uint32_t i;

	for (i = 0; i < qp->resp.nres; i++) {
		struct uroce_resp_res *res = &qp->resp.res[i];

		if (res->valid && res->psn == psn)
			return res;
	}
	return NULL;
}

static enum resp_state do_atomic(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uint8_t *ath = hdr_of(pkt, UROCE_HDR_ATMETH);
	uint64_t va = atmeth_va(ath), orig;
	struct uroce_resp_res *res;
	struct uroce_mr *mr;
	uint64_t *p;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC))
		return RESPST_ERR_INVALID;
	if (va & 7)
		return RESPST_ERR_INVALID; /* IBA 9.4.5: misaligned */
	mr = rkey_check(qp, atmeth_rkey(ath), va, 8, IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		return RESPST_ERR_ACCESS;
	p = (uint64_t *)uroce_mr_ptr(mr, va);
	if (uroce_op_rc(pkt->opcode) == UROCE_OP_RC_CMP_SWAP) {
		orig = atmeth_comp(ath);
		__atomic_compare_exchange_n(p, &orig, atmeth_swap_add(ath),
					    false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(p, atmeth_swap_add(ath),
					  __ATOMIC_SEQ_CST);
	}
	res = &qp->resp.res[qp->resp.res_next++ % qp->resp.nres];
	res->valid = true;
	res->psn = pkt->psn;
	res->orig = orig;
	qp->resp.msn = (qp->resp.msn + 1) & UROCE_PSN_MASK;
	send_atomic_ack(qp, pkt->psn, orig);
	return RESPST_EXECUTED;
}

/* IBA 9.7.5.1.1: a request whose PSN is before the expected one. */
static void duplicate(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uroce_count(qp->dev, UROCE_CNT_DUPLICATES, 1);
	if (pkt->mask & UROCE_M_FLUSH) {
		do_flush(qp, pkt, true); /* idempotent: answer again */
		return;
	}
	if (pkt->mask & UROCE_M_READ) {
		uint8_t *reth = hdr_of(pkt, UROCE_HDR_RETH);
		uint32_t len = reth_len(reth);
		struct uroce_mr *mr = NULL;

		/* READs have no side effects: serve the (re)request again */
		if (len) {
			mr = rkey_check(qp, reth_rkey(reth), reth_va(reth), len,
					IBV_ACCESS_REMOTE_READ);
			if (!mr)
				return;
		}
		send_read_resp(qp, mr, reth_va(reth), len, pkt->psn);
		return;
	}
	if (pkt->mask & UROCE_M_ATOMIC) {
		struct uroce_resp_res *res = find_res(qp, pkt->psn);

		if (res)
			send_atomic_ack(qp, pkt->psn, res->orig);
		else
			uroce_count(qp->dev, UROCE_CNT_DUP_ATOMIC_LOST, 1);
		return;
	}
	if (bth_ackreq(pkt->bth))
		uroce_send_ack(qp, UROCE_AETH_ACK_UNLIMITED,
			       uroce_psn_add(qp->resp.epsn, UROCE_PSN_MASK));
}

static enum resp_state execute(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	enum resp_state res = check_sequence(qp, pkt);

	if (res != RESPST_EXECUTED)
		return res;
	if (pkt->mask & UROCE_M_ATOMIC_WRITE)
		return do_atomic_write(qp, pkt);
	if (pkt->mask & UROCE_M_FLUSH)
		return do_flush(qp, pkt, false);
	if (pkt->mask & UROCE_M_SEND)
		return do_send(qp, pkt);
	if (pkt->mask & UROCE_M_WRITE)
		return do_write(qp, pkt);
	if (pkt->mask & UROCE_M_READ)
		return do_read(qp, pkt);
	if (pkt->mask & UROCE_M_ATOMIC)
		return do_atomic(qp, pkt);
	return RESPST_ERR_INVALID;
}

/*
 * UC (IBA 9.8.3): no ACKs, no NAKs, no RNR.  A PSN gap or any error drops
 * the message in progress; a FIRST or ONLY packet always starts afresh.
 */
/* UC: the open message (if any) is dropped; counted once */
static void uc_drop_open(struct uroce_qp *qp)
{
	struct uroce_resp_state *r = &qp->resp;

	if (r->in_send || r->in_write)
		uroce_count(qp->dev, UROCE_CNT_UC_MSG_DROPS, 1);
	r->in_send = false;
	r->in_write = false;
}

static void do_uc(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_resp_state *r = &qp->resp;

	if (pkt->psn != r->epsn) {
		uroce_count(qp->dev, UROCE_CNT_OUT_OF_SEQ, 1);
		uc_drop_open(qp);
		r->epsn = uroce_psn_add(pkt->psn, 1);
		if (!(pkt->mask & UROCE_M_FIRST))
			return;
	} else {
		r->epsn = uroce_psn_add(r->epsn, 1);
	}
	/* a new message while one is open: the old one lost its end */
	if (pkt->mask & UROCE_M_FIRST)
		uc_drop_open(qp);
	if (execute(qp, pkt) != RESPST_EXECUTED) {
		uroce_count(qp->dev, UROCE_CNT_UC_MSG_DROPS, 1);
		r->in_send = false;
		r->in_write = false;
	}
}

/* An error state's answer (resp_errs): the NAK, and for class C the
 * error state and its affiliated event (IBA 9.7.5.2, 11.6.3.1). */
static void respond_error(struct uroce_qp *qp, uint32_t psn, enum resp_state st)
{
	const struct resp_err *e = &resp_errs[st];
	struct ibv_async_event ev = {
		.element.qp = uqp_ibqp(qp),
		.event_type = e->event,
	};

	if (!e->fatal) {
		uroce_count(qp->dev, e->cnt, 1);
		uroce_send_ack(qp,
			       UROCE_AETH_RNR_NAK |
				       (qp->attr.min_rnr_timer & 0x1f),
			       psn);
		return;
	}
	if (e->cnt2 != UROCE_CNT_NUM)
		uroce_count(qp->dev, e->cnt2, 1);
	uroce_count(qp->dev, e->cnt, 1);
	uroce_send_ack(qp, UROCE_AETH_NAK | e->code, psn);
	uroce_qp_to_error(qp);
	uroce_async_event(to_uctx(uqp_ibqp(qp)->context), &ev);
}

/*
 * A request beyond the expected PSN: one sequence NAK per gap (IBA
 * 9.7.5.2.1); the requester resends from epsn.  If epsn still does not
 * come and a PSN at or below the highest seen since the NAK arrives
 * again, the requester has started another pass (it went back, or sent
 * a tail-loss probe) that did not bring epsn: the resent packet or the
 * NAK was lost.  Then the NAK goes again, at most once per pass and per
 * half RTT, instead of leaving the requester to its ACK timeout.
 */
static void seq_nak(struct uroce_qp *qp, uint32_t psn)
{
	struct uroce_resp_state *r = &qp->resp;
	uint64_t now = uroce_now_ns();

	if (r->nak_sent) {
		if (uroce_psn_cmp(psn, r->nak_max_psn) > 0) {
			r->nak_max_psn = psn;
			return;
		}
		if (now - r->nak_ns < uroce_req_regap_ns(qp, true))
			return;
		uroce_count(qp->dev, UROCE_CNT_TX_NAK_SEQ_RESENT, 1);
	}
	r->nak_sent = true;
	r->nak_ns = now;
	r->nak_max_psn = psn;
	uroce_count(qp->dev, UROCE_CNT_TX_NAK_SEQ, 1);
	uroce_send_ack(qp, UROCE_AETH_NAK | UROCE_NAK_PSN_SEQ_ERR, r->epsn);
}

void uroce_resp_nak_invalid(struct uroce_qp *qp, uint32_t psn)
{
	respond_error(qp, psn, RESPST_ERR_INVALID);
}

/* IBA 9.7.5.1: the request's PSN against the expected one */
static enum resp_state check_psn(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	int32_t diff = uroce_psn_cmp(pkt->psn, qp->resp.epsn);

	if (diff < 0)
		return RESPST_DUPLICATE;
	if (diff > 0)
		return RESPST_OUT_OF_SEQ;
	return RESPST_EXECUTE;
}

/* IBA 9.7.5.1.1: executed; the ACK, if the request asked for one */
static void acknowledge(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	/* its completion overran the receive CQ: no response (rxe's class
	 * G); the QP goes to the error state (engine/cq_err.c) */
	if (qp->rcq && qp->rcq->overrun)
		return;
	qp->resp.epsn = uroce_psn_add(qp->resp.epsn, 1);
	if (pkt->mask & (UROCE_M_READ | UROCE_M_ATOMIC | UROCE_M_FLUSH))
		return;
	if (bth_ackreq(pkt->bth)) {
		uroce_send_ack(qp, UROCE_AETH_ACK_UNLIMITED, pkt->psn);
		qp->resp.ack_end = (pkt->mask & UROCE_M_LAST) != 0;
	} else {
		qp->resp.unasked = true;
	}
}

void uroce_resp_rx(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_dev *dev = qp->dev;
	enum ibv_qp_state st = qp->attr.qp_state;
	enum resp_state res;

	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD &&
	    st != IBV_QPS_SQE) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_STATE, 1);
		return;
	}
	/* a receive CQ that overran: the QP is on its way to the error state
	 * (engine/cq_err.c), and takes nothing more meanwhile */
	if (qp->rcq && qp->rcq->overrun) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_STATE, 1);
		return;
	}
	if (qp->type == IBV_QPT_UD) {
		do_ud(qp, pkt);
		return;
	}
	if (qp->type == IBV_QPT_UC) {
		do_uc(qp, pkt);
		return;
	}
	switch (check_psn(qp, pkt)) {
	case RESPST_DUPLICATE:
		duplicate(qp, pkt);
		return;
	case RESPST_OUT_OF_SEQ:
		uroce_count(dev, UROCE_CNT_OUT_OF_SEQ, 1);
		seq_nak(qp, pkt->psn);
		return;
	default:
		break;
	}
	qp->resp.nak_sent = false;
	res = execute(qp, pkt);
	if (res == RESPST_EXECUTED)
		acknowledge(qp, pkt);
	else
		respond_error(qp, pkt->psn, res);
}
