// SPDX-License-Identifier: MIT
/*
 * QP state changes the transport makes, and flushing: the error state
 * (IBA 10.3.1, 11.6.3.1) with every outstanding WQE completed in error.
 */
#include <stdlib.h>
#include <string.h>

#include "dev.h"

void uroce_qp_set_state(struct uroce_qp *qp, enum ibv_qp_state state)
{
	uroce_assert_held(&qp->dev->lock);
	qp->attr.qp_state = state;
	uqp_ibqp(qp)->state = state;
}

void uroce_qp_flush_sq(struct uroce_qp *qp)
{
	struct uroce_sq *sq = &qp->sq;
	struct ibv_wc wc;

	uroce_assert_held(&qp->dev->lock);
	while (sq->tail != sq->head) {
		struct uroce_send_wqe *wqe = &sq->wqe[sq->tail & (sq->size - 1)];

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = wqe->wr_id;
		/* one that failed (a send that could not go) says why */
		wc.status = wqe->state == UROCE_WQE_ERROR ? wqe->status :
							    IBV_WC_WR_FLUSH_ERR;
		wc.opcode = uroce_wc_opcode(wqe->opcode);
		wc.qp_num = uqp_ibqp(qp)->qp_num;
		uroce_cq_push(qp->scq, &wc, 0);
		sq->tail++;
	}
	sq->next = sq->tail;
	qp->req.cur_off = 0;
}

void uroce_qp_flush_rq(struct uroce_qp *qp)
{
	struct uroce_rq *rq = &qp->rq;
	struct ibv_wc wc;

	uroce_assert_held(&qp->dev->lock);
	while (rq->tail != rq->head) {
		struct uroce_recv_wqe *wqe = &rq->wqe[rq->tail & (rq->size - 1)];

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = wqe->wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = uqp_ibqp(qp)->qp_num;
		uroce_cq_push(qp->rcq, &wc, 0);
		rq->tail++;
	}
}

/* the receive WQE a message in progress took (engine/resp.c): the QP
 * owns it, so it completes in error with the QP's others, first (it is
 * the oldest), whether it came from the RQ or an SRQ */
static void flush_taken_recv(struct uroce_qp *qp)
{
	struct uroce_resp_state *r = &qp->resp;
	struct ibv_wc wc;

	if (!r->recv_taken)
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->recv.wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = uqp_ibqp(qp)->qp_num;
	uroce_cq_push(r->recv_cq, &wc, 0);
	r->recv_taken = false;
	r->in_send = false;
}

void uroce_qp_to_error(struct uroce_qp *qp)
{
	bool was_err = qp->attr.qp_state == IBV_QPS_ERR;

	uroce_assert_held(&qp->dev->lock);
	if (!was_err)
		uroce_log_qp(UROCE_LOG_WARN, qp, -1, "moved to the error state");
	uroce_ack_flush(qp); /* (see ibv_destroy_qp) */
	uroce_resp_ack_unasked(qp);
	uroce_qp_set_state(qp, IBV_QPS_ERR);
	uroce_req_release(qp);
	qp->req.deadline_ns = 0;
	qp->req.rnr_deadline_ns = 0;
	uroce_qp_flush_sq(qp);
	flush_taken_recv(qp);
	if (!qp->srq) {
		uroce_qp_flush_rq(qp);
	} else if (!was_err) {
		struct ibv_async_event ev = {
			.element.qp = uqp_ibqp(qp),
			.event_type = IBV_EVENT_QP_LAST_WQE_REACHED,
		};

		/* IBA 11.6.3.1: no more WQEs will be taken from the SRQ */
		uroce_async_event(to_uctx(uqp_ibqp(qp)->context), &ev);
	}
}

void uroce_sq_flush_if_error(struct uroce_qp *qp)
{
	uroce_assert_held(&qp->dev->lock);
	/* WRs posted to a QP in the error state complete at once, flushed */
	if (qp->attr.qp_state == IBV_QPS_ERR)
		uroce_qp_flush_sq(qp);
}

/*
 * The transport state ibv_modify_qp sets (IBA 11.2.4.2): the verbs front
 * checks and records the attributes, the engine owns what they start.
 */

/* RTR: the PSN the responder expects next */
void uroce_qp_set_rq_psn(struct uroce_qp *qp, uint32_t psn)
{
	uroce_assert_held(&qp->dev->lock);
	qp->resp.epsn = psn;
}

/* IBV_QP_MAX_DEST_RD_ATOMIC: the responder's READ/atomic resources,
 * allocated by the caller before the lock (so a commit cannot fail);
 * the old ones are freed */
void uroce_qp_set_resp_res(struct uroce_qp *qp, struct uroce_resp_res *res,
			   uint32_t nres)
{
	uroce_assert_held(&qp->dev->lock);
	free(qp->resp.res);
	qp->resp.res = res;
	qp->resp.nres = nres;
	qp->resp.res_next = 0;
}

/* RTS: the first PSN the requester sends, the completer's start */
void uroce_qp_set_sq_psn(struct uroce_qp *qp, uint32_t psn)
{
	uroce_assert_held(&qp->dev->lock);
	qp->req.psn = psn;
	qp->req.psn_max = psn;
	qp->comp.psn = psn;
}

void uroce_qp_set_retry(struct uroce_qp *qp, uint8_t retry_cnt)
{
	uroce_assert_held(&qp->dev->lock);
	qp->req.retry_left = retry_cnt;
}

void uroce_qp_set_rnr_retry(struct uroce_qp *qp, uint8_t rnr_retry)
{
	uroce_assert_held(&qp->dev->lock);
	qp->req.rnr_retry_left = rnr_retry;
}

/* RESET: forget all transport state, back to what create_qp made */
void uroce_qp_reset(struct uroce_qp *qp)
{
	uroce_assert_held(&qp->dev->lock);
	uroce_ack_flush(qp); /* (see ibv_destroy_qp) */
	uroce_req_release(qp);
	memset(&qp->req, 0, sizeof(qp->req));
	memset(&qp->comp, 0, sizeof(qp->comp));
	uroce_qp_transport_free(qp);
	memset(&qp->resp, 0, sizeof(qp->resp));
	memset(&qp->cc, 0, sizeof(qp->cc));
	qp->sq.head = qp->sq.next = qp->sq.tail = 0;
	qp->rq.head = qp->rq.tail = 0;
}

/* what the transport allocated for the QP, at destroy (or a failed
 * create); no lock: the QP is out of the table, nothing reaches it */
void uroce_qp_transport_free(struct uroce_qp *qp)
{
	free(qp->resp.res);
	qp->resp.res = NULL;
}
