// SPDX-License-Identifier: MIT
/*
 * The completer: takes ACKs, NAKs, READ responses and atomic ACKs, marks
 * WQEs done, reports them in order, and tells the requester to go back
 * when the responder says (or the PSNs show) that packets were lost.
 * It owns the send WQEs' states (obj/qp.h enum uroce_wqe_state: every
 * change is uroce_wqe_to), and settles UC/UD WQEs whose packets waited
 * in a send batch (uroce_comp_settle, after engine/xmit.c sent it).
 */
#include <errno.h>
#include <string.h>

#include "dev.h"

static struct uroce_send_wqe *sq_at(struct uroce_qp *qp, uint32_t i)
{
	return &qp->sq.wqe[i & (qp->sq.size - 1)];
}

#define S(x) (1u << UROCE_WQE_##x)
/* the states each may move to (obj/qp.h draws them) */
static const unsigned int wqe_may[UROCE_WQE_NSTATES] = {
	[UROCE_WQE_POSTED] = S(PENDING) | S(DONE) | S(ERROR),
	[UROCE_WQE_PENDING] = S(PENDING) | S(READING) | S(QUEUED) | S(DONE) |
			      S(ERROR),
	[UROCE_WQE_READING] = S(READING) | S(DONE) | S(ERROR),
	[UROCE_WQE_QUEUED] = S(DONE) | S(ERROR),
	[UROCE_WQE_DONE] = 0,
	[UROCE_WQE_ERROR] = 0,
};
#undef S

static const char *const wqe_state_name[UROCE_WQE_NSTATES] = {
	[UROCE_WQE_POSTED] = "posted",	 [UROCE_WQE_PENDING] = "pending",
	[UROCE_WQE_READING] = "reading", [UROCE_WQE_QUEUED] = "queued",
	[UROCE_WQE_DONE] = "done",	 [UROCE_WQE_ERROR] = "error",
};

void uroce_wqe_to(struct uroce_qp *qp, struct uroce_send_wqe *wqe,
		  enum uroce_wqe_state state, enum ibv_wc_status status)
{
	if (!(wqe_may[wqe->state] & (1u << state))) {
		/* a bug, not input: say so, and leave the WQE as it is */
		uroce_log_qp(UROCE_LOG_WARN, qp, wqe->first_psn,
			     "WQE state %s -> %s refused",
			     wqe_state_name[wqe->state], wqe_state_name[state]);
		return;
	}
	if (wqe->state == UROCE_WQE_QUEUED && --qp->comp.nqueued == 0)
		uroce_comp_release(qp);
	wqe->state = state;
	wqe->status = state == UROCE_WQE_ERROR ? status : IBV_WC_SUCCESS;
}

enum ibv_wc_opcode uroce_wc_opcode(enum ibv_wr_opcode op)
{
	if ((int)op == UROCE_WR_FLUSH)
		return (enum ibv_wc_opcode)UROCE_WC_FLUSH;
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

/*
 * A WRITE with immediate completes with a WRITE's opcode; its peer takes
 * it as a receive and answers to the CQ, so a poll that finds it keeps
 * the socket (verbs/cq.c answer_unseen) and the ACK of the answer rides
 * the next post.  Only off the same-host path: through a ring nothing is
 * held for a post, so keeping the socket gains nothing there, and it
 * measured no better (rstream 64 B over the rings, runs of 5-13 us
 * either way); the QP's path as the requester last asked it.
 */
static unsigned int cqe_flags(const struct uroce_qp *qp,
			      const struct uroce_send_wqe *wqe)
{
	return wqe->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && !qp->req.ring_slots ?
		       UROCE_CQE_WRITE_IMM :
		       0;
}

void uroce_comp_retire(struct uroce_qp *qp)
{
	struct uroce_sq *sq = &qp->sq;
	struct ibv_wc wc;

	while (sq->tail != sq->head) {
		struct uroce_send_wqe *wqe = sq_at(qp, sq->tail);
		bool ok = wqe->state == UROCE_WQE_DONE;

		if (!uroce_wqe_complete(wqe))
			break;
		/* errors are reported even for unsignaled WRs (IBA 10.7.3.1) */
		if (!ok || qp->sq_sig_all ||
		    (wqe->send_flags & IBV_SEND_SIGNALED)) {
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = wqe->wr_id;
			wc.status = wqe->status;
			wc.opcode = uroce_wc_opcode(wqe->opcode);
			wc.byte_len = (uint32_t)wqe->length;
			wc.qp_num = uqp_ibqp(qp)->qp_num;
			uroce_cq_push(qp->scq, &wc, cqe_flags(qp, wqe));
		}
		if (ok && uroce_qp_reliable(qp))
			uroce_count(qp->dev, UROCE_CNT_TX_DELIVERED_BYTES,
				    wqe->length);
		sq->tail++;
		if (!ok) {
			uroce_qp_to_error(qp);
			return;
		}
	}
	/* IBA 11.6.3: RTS -> SQD with notify: tell when nothing is left */
	if (qp->sqd_notify && qp->attr.qp_state == IBV_QPS_SQD &&
	    sq->tail == sq->next && qp->comp.psn == qp->req.psn_max &&
	    qp->req.cur_off == 0) {
		struct ibv_async_event ev = {
			.element.qp = uqp_ibqp(qp),
			.event_type = IBV_EVENT_SQ_DRAINED,
		};

		qp->sqd_notify = false;
		uroce_async_event(to_uctx(uqp_ibqp(qp)->context), &ev);
	}
}

/* The first started WQE still waiting for the wire, or NULL. */
static struct uroce_send_wqe *pending_wqe(struct uroce_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.tail; i != qp->sq.head; i++) {
		struct uroce_send_wqe *wqe = sq_at(qp, i);

		if (!uroce_wqe_started(wqe))
			return NULL;
		if (!uroce_wqe_complete(wqe))
			return wqe;
	}
	return NULL;
}

static void progress(struct uroce_qp *qp, uint32_t new_psn)
{
	int32_t acked = uroce_psn_cmp(new_psn, qp->comp.psn);

	if (acked <= 0)
		return;
	qp->comp.psn = new_psn;
	qp->comp.rewound = false;
	uroce_req_credit(qp, (uint32_t)acked);
	/* acks of packets sent before a rewind: skip what is done */
	if (uroce_psn_cmp(new_psn, qp->req.psn) > 0)
		uroce_req_rewind(qp);
	qp->req.retry_left = qp->attr.retry_cnt;
	qp->req.rnr_retry_left = qp->attr.rnr_retry;
	uroce_req_progress(qp, (uint32_t)acked);
	uroce_req_arm(qp);
}

/*
 * The responder has everything up to and including psn.  Mark SEND/WRITE
 * WQEs it covers as done.  Returns false if a READ or atomic before psn
 * still lacks its response: those responses were lost (IBA 9.7.5.1.2
 * "implied NAK").
 */
static bool ack_upto(struct uroce_qp *qp, uint32_t psn)
{
	uint32_t i;

	for (i = qp->sq.tail; i != qp->sq.head; i++) {
		struct uroce_send_wqe *wqe = sq_at(qp, i);

		if (!uroce_wqe_started(wqe))
			break;
		if (uroce_wqe_complete(wqe))
			continue;
		if (uroce_wqe_rd_atomic(wqe)) {
			uint32_t needed = uroce_psn_add(wqe->first_psn,
							(uint32_t)(wqe->read_done /
								   qp->mtu));

			if (uroce_psn_cmp(psn, needed) >= 0)
				return false;
			break;
		}
		if (uroce_psn_cmp(wqe->last_psn, psn) > 0)
			break;
		uroce_wqe_to(qp, wqe, UROCE_WQE_DONE, IBV_WC_SUCCESS);
	}
	progress(qp, uroce_psn_add(psn, 1));
	return true;
}

/*
 * Go back to comp.psn, once per gap: the packets after a gap all show it.
 * The same gap is acted on again only after about an RTT (a sequence NAK)
 * or a few (a response after the gap): the responder repeats its NAK when
 * the resent packet or the NAK itself was lost, and a resent READ's
 * responses show a gap again if one of them was lost.
 */
static void go_back(struct uroce_qp *qp, bool nak)
{
	uint64_t now = uroce_now_ns();

	if (qp->comp.rewound && qp->comp.rewind_psn == qp->comp.psn &&
	    now - qp->comp.rewind_ns < uroce_req_regap_ns(qp, nak))
		return;
	qp->comp.rewound = true;
	qp->comp.rewind_psn = qp->comp.psn;
	qp->comp.rewind_ns = now;
	uroce_count(qp->dev, UROCE_CNT_EARLY_RETRANSMITS, 1);
	uroce_req_loss(qp);
	uroce_count(qp->dev, UROCE_CNT_RETRANSMITS, 1);
	qp->cnt_retrans++;
	uroce_req_rewind(qp);
}

/* Implicit ACK of everything before a response at psn; false on a gap. */
static bool ack_before(struct uroce_qp *qp, uint32_t psn)
{
	if (psn == qp->comp.psn)
		return true;
	if (!ack_upto(qp, uroce_psn_add(psn, UROCE_PSN_MASK)))
		return false;
	return psn == qp->comp.psn;
}

static void fail_pending(struct uroce_qp *qp, enum ibv_wc_status status)
{
	struct uroce_send_wqe *wqe = pending_wqe(qp);

	if (!wqe)
		return;
	uroce_wqe_to(qp, wqe, UROCE_WQE_ERROR, status);
}

static void on_read_resp(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_send_wqe *wqe;
	uint64_t off, expect;

	if (!ack_before(qp, pkt->psn)) {
		uroce_count(qp->dev, UROCE_CNT_OUT_OF_SEQ, 1);
		go_back(qp, false);
		return;
	}
	wqe = pending_wqe(qp);
	/* IBA 1.5: a FLUSH is answered with an empty READ response */
	if (wqe && wqe->opcode == (enum ibv_wr_opcode)UROCE_WR_FLUSH &&
	    wqe->first_psn == pkt->psn && !pkt->paylen) {
		uroce_wqe_to(qp, wqe, UROCE_WQE_DONE, IBV_WC_SUCCESS);
		progress(qp, uroce_psn_add(pkt->psn, 1));
		return;
	}
	if (!wqe || wqe->opcode != IBV_WR_RDMA_READ ||
	    uroce_psn_cmp(pkt->psn, wqe->first_psn) < 0 ||
	    uroce_psn_cmp(pkt->psn, wqe->last_psn) > 0) {
		uroce_count(qp->dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return;
	}
	off = (uint64_t)((pkt->psn - wqe->first_psn) & UROCE_PSN_MASK) * qp->mtu;
	expect = wqe->length - off < qp->mtu ? wqe->length - off : qp->mtu;
	if (pkt->paylen != expect) {
		uroce_count(qp->dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return;
	}
	uroce_sge_scatter(wqe->sge, wqe->num_sge, off, pkt->payload,
			  pkt->paylen);
	wqe->read_done = off + pkt->paylen;
	uroce_wqe_to(qp, wqe,
		     pkt->psn == wqe->last_psn ? UROCE_WQE_DONE :
						 UROCE_WQE_READING,
		     IBV_WC_SUCCESS);
	progress(qp, uroce_psn_add(pkt->psn, 1));
}

static void on_atomic_ack(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_send_wqe *wqe;
	uint64_t orig;

	if (!ack_before(qp, pkt->psn)) {
		uroce_count(qp->dev, UROCE_CNT_OUT_OF_SEQ, 1);
		go_back(qp, false);
		return;
	}
	wqe = pending_wqe(qp);
	if (!wqe || !uroce_wqe_rd_atomic(wqe) ||
	    wqe->opcode == IBV_WR_RDMA_READ || wqe->first_psn != pkt->psn) {
		uroce_count(qp->dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return;
	}
	orig = atmack_orig(pkt->bth + pkt->info->offset[UROCE_HDR_ATMACK]);
	wqe->atomic_orig = orig;
	uroce_sge_scatter(wqe->sge, wqe->num_sge, 0, (const uint8_t *)&orig, 8);
	uroce_wqe_to(qp, wqe, UROCE_WQE_DONE, IBV_WC_SUCCESS);
	progress(qp, uroce_psn_add(pkt->psn, 1));
}

/* IBA 9.7.5.2.8: RNR NAK timer field to nanoseconds (table 45) */
static uint64_t rnr_ns(uint8_t code)
{
	static const uint32_t us100[32] = {
		65536, 1,    2,	   3,	  4,	 6,	8,     12,
		16,    24,   32,   48,	  64,	 96,	128,   192,
		256,   384,  512,  768,	  1024,	 1536,	2048,  3072,
		4096,  6144, 8192, 12288, 16384, 24576, 32768, 49152,
	};

	return (uint64_t)us100[code & 31] * 10000;
}

/* IBA 9.7.5.2.8: the responder had no receive WQE; wait, then resend */
static void on_rnr_nak(struct uroce_qp *qp, uint8_t syn)
{
	uroce_count(qp->dev, UROCE_CNT_RX_RNR_NAK, 1);
	/* rnr_retry 7 means retry forever */
	if (qp->attr.rnr_retry != 7) {
		if (!qp->req.rnr_retry_left) {
			fail_pending(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		qp->req.rnr_retry_left--;
	}
	uroce_req_rewind(qp);
	qp->req.deadline_ns = 0;
	qp->req.probe_deadline_ns = 0;
	qp->req.rnr_deadline_ns = uroce_now_ns() + rnr_ns(syn & 0x1f);
	uroce_qp_timer_arm(qp, qp->req.rnr_deadline_ns);
}

/* IBA 9.7.5.2.2-4: the status an error NAK completes the WQE with; any
 * other code is taken as an invalid RD request (status 0 here) */
static const struct nak_error {
	enum uroce_counter cnt;
	enum ibv_wc_status status;
} nak_errors[32] = {
	[UROCE_NAK_INVALID_REQ] = {
		UROCE_CNT_RX_NAK_INV, IBV_WC_REM_INV_REQ_ERR,
	},
	[UROCE_NAK_REM_ACCESS] = {
		UROCE_CNT_RX_NAK_ACCESS, IBV_WC_REM_ACCESS_ERR,
	},
	[UROCE_NAK_REM_OP_ERR] = {
		UROCE_CNT_RX_NAK_OP, IBV_WC_REM_OP_ERR,
	},
};

static void on_nak(struct uroce_qp *qp, uint32_t psn, uint8_t syn)
{
	const struct nak_error *e = &nak_errors[syn & 0x1f];

	if (!ack_before(qp, psn)) {
		go_back(qp, false);
		return;
	}
	uroce_log_qp(UROCE_LOG_INFO, qp, psn,
		     "NAK received, AETH syndrome 0x%02x", syn);
	if ((syn & UROCE_AETH_TYPE_MASK) == UROCE_AETH_RNR_NAK) {
		on_rnr_nak(qp, syn);
	} else if ((syn & 0x1f) == UROCE_NAK_PSN_SEQ_ERR) {
		/* IBA 9.7.5.2.1: go back to the PSN it names */
		uroce_count(qp->dev, UROCE_CNT_RX_NAK_SEQ, 1);
		go_back(qp, true);
	} else if (e->status != IBV_WC_SUCCESS) {
		uroce_count(qp->dev, e->cnt, 1);
		fail_pending(qp, e->status);
	} else {
		uroce_count(qp->dev, UROCE_CNT_RX_NAK_OTHER, 1);
		fail_pending(qp, IBV_WC_REM_INV_RD_REQ_ERR);
	}
}

void uroce_comp_rx(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	struct uroce_dev *dev = qp->dev;
	bool credits = false;
	uint8_t syn = 0;

	if (qp->attr.qp_state != IBV_QPS_RTS &&
	    qp->attr.qp_state != IBV_QPS_SQD) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_STATE, 1);
		return;
	}
	/* a response to a PSN not yet sent, or already acknowledged */
	if (uroce_psn_cmp(pkt->psn, qp->req.psn_max) >= 0) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return;
	}
	if (pkt->mask & UROCE_M_AETH) {
		syn = aeth_syn(pkt->bth + pkt->info->offset[UROCE_HDR_AETH]);
		/* every ACK-type AETH carries the responder's credit count */
		credits = (syn & UROCE_AETH_TYPE_MASK) == UROCE_AETH_ACK;
	}
	if (uroce_psn_cmp(pkt->psn, qp->comp.psn) < 0) {
		/* the ACK of the last PSN again, with a new credit count:
		 * the responder posted receives (engine/resp.c
		 * uroce_resp_rq_posted) */
		if (credits && (pkt->mask & UROCE_M_ACK) && qp->req.e2e &&
		    pkt->psn == uroce_psn_add(qp->comp.psn, UROCE_PSN_MASK) &&
		    (syn & UROCE_AETH_CREDIT_MASK) != UROCE_AETH_ACK_UNLIMITED &&
		    uroce_req_rq_credits(qp, pkt->psn,
					 syn & UROCE_AETH_CREDIT_MASK)) {
			qp->req.credit_updates = true;
			if (qp->attr.qp_state == IBV_QPS_RTS)
				uroce_req_run(qp);
			return;
		}
		uroce_count(dev, UROCE_CNT_DUPLICATES, 1);
		return;
	}

	qp->cc.ack_ns = pkt->rx_ns;
	if (pkt->mask & UROCE_M_ACK) {
		uroce_count(dev, UROCE_CNT_RX_ACKS, 1);
		if ((syn & UROCE_AETH_TYPE_MASK) == UROCE_AETH_ACK) {
			if (!ack_upto(qp, pkt->psn))
				go_back(qp, false);
		} else {
			on_nak(qp, pkt->psn, syn);
		}
	} else if (pkt->mask & UROCE_M_READ) {
		on_read_resp(qp, pkt);
	} else if (pkt->mask & UROCE_M_ATOMIC) {
		on_atomic_ack(qp, pkt);
	}
	qp->cc.ack_ns = 0;
	if (credits && qp->attr.qp_state != IBV_QPS_ERR)
		uroce_req_rq_credits(qp, pkt->psn, syn & UROCE_AETH_CREDIT_MASK);
	uroce_comp_retire(qp);
	if (qp->attr.qp_state == IBV_QPS_RTS)
		uroce_req_run(qp);
}

/* ---- completions that wait for their packets (docs/transport.md,
 * "Send errors") ---- */

void uroce_wqe_queue(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	struct uroce_tx *tx = &qp->dev->tx;

	uroce_wqe_to(qp, wqe, UROCE_WQE_QUEUED, IBV_WC_SUCCESS);
	wqe->tx_seq = tx->open_seq;
	if (!qp->comp.nqueued++) {
		qp->comp.queued_next = tx->queued_head;
		tx->queued_head = qp;
	}
	atomic_store_explicit(&tx->settle, true, memory_order_relaxed);
	uroce_tx_settles = true; /* (this thread sends it: uroce_tx_drain) */
}

void uroce_comp_release(struct uroce_qp *qp)
{
	struct uroce_qp **pp = &qp->dev->tx.queued_head;

	for (; *pp; pp = &(*pp)->comp.queued_next) {
		if (*pp == qp) {
			*pp = qp->comp.queued_next;
			break;
		}
	}
	qp->comp.nqueued = 0;
	qp->comp.queued_next = NULL;
}

/* QUEUED WQEs of qp whose batch is with the kernel are done */
static void settle_queued(struct uroce_qp *qp, uint64_t sent)
{
	uint32_t i;

	for (i = qp->sq.tail; i != qp->sq.next && qp->comp.nqueued; i++) {
		struct uroce_send_wqe *wqe = sq_at(qp, i);

		if (wqe->state == UROCE_WQE_QUEUED && wqe->tx_seq <= sent)
			uroce_wqe_to(qp, wqe, UROCE_WQE_DONE, IBV_WC_SUCCESS);
	}
}

/*
 * A UC/UD WQE whose packet cannot reach its destination (uroce_tx_fatal:
 * rxe fails one it cannot route) completes with LOC_QP_OP_ERR and the QP
 * moves to the error state; RC never gets here (its send errors are loss,
 * its retries decide).  What came before it is reported first, in SQ
 * order: complete WQEs (and QUEUED ones whose batch went) with their own
 * status; what comes after, or waits in a batch not yet sent, is flushed.
 */
void uroce_comp_send_failed(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	if (qp->attr.qp_state == IBV_QPS_ERR || uroce_wqe_complete(wqe))
		return;
	uroce_count(qp->dev, UROCE_CNT_TX_SEND_FAILED, 1);
	uroce_log_qp(UROCE_LOG_WARN, qp, wqe->first_psn,
		     "a packet could not be sent: the WQE fails");
	uroce_wqe_to(qp, wqe, UROCE_WQE_ERROR, IBV_WC_LOC_QP_OP_ERR);
	settle_queued(qp, atomic_load_explicit(&qp->dev->tx.sent_seq,
					       memory_order_acquire));
	/* reports it, if nothing before it waits for an answer */
	uroce_comp_retire(qp);
	if (qp->attr.qp_state != IBV_QPS_ERR)
		uroce_qp_to_error(qp);
}

/* A failed request packet, from the list engine/xmit.c keeps. */
static void settle_failure(struct uroce_dev *dev, const struct uroce_txtag *t)
{
	struct uroce_qp *qp = uroce_qp_lookup(dev, t->qpn);
	struct uroce_sq *sq;

	if (!qp)
		return; /* destroyed since */
	sq = &qp->sq;
	if (t->wqe - sq->tail >= sq->head - sq->tail)
		return; /* reported already */
	uroce_comp_send_failed(qp, sq_at(qp, t->wqe));
}

void uroce_comp_settle(struct uroce_dev *dev)
{
	struct uroce_tx *tx = &dev->tx;
	struct uroce_txtag fail[UROCE_TXFAIL_MAX];
	struct uroce_qp *qp, *next;
	uint64_t sent;
	int nfail, i;

	pthread_mutex_lock(&dev->lock);
	atomic_store_explicit(&tx->settle, false, memory_order_relaxed);
	pthread_mutex_lock(&tx->txq_lock);
	nfail = tx->nfail;
	memcpy(fail, tx->fail, (size_t)nfail * sizeof(fail[0]));
	tx->nfail = 0;
	pthread_mutex_unlock(&tx->txq_lock);
	sent = atomic_load_explicit(&tx->sent_seq, memory_order_acquire);
	uroce_xmit_begin(dev);
	for (i = 0; i < nfail; i++)
		settle_failure(dev, &fail[i]);
	for (qp = tx->queued_head; qp; qp = next) {
		next = qp->comp.queued_next;
		settle_queued(qp, sent);
		uroce_comp_retire(qp);
	}
	/* WQEs in a batch another thread sealed after ours: it settles them
	 * once it has sent it */
	if (tx->queued_head)
		atomic_store_explicit(&tx->settle, true, memory_order_relaxed);
	uroce_xmit_end(dev);
	pthread_mutex_unlock(&dev->lock);
}
