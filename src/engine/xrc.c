// SPDX-License-Identifier: MIT
/*
 * XRC transport (IBA 9.2, 9.3.7, 11.2.x): RC's rules between an initiator
 * (INI, XRC_SEND) QP and a target (TGT, XRC_RECV) QP, with the receive
 * queue chosen per request by the SRQ number in the XRCETH.  The
 * requester, responder and completer build and read RC packets; this file
 * turns an XRC QP's outgoing headers into XRC ones and, for a TGT QP,
 * binds the named SRQ (its PD, CQ and receive queue) for the duration of
 * one request.
 */
#include <errno.h>
#include <string.h>

#include "dev.h"

int uroce_xrc_xmit(struct uroce_qp *qp, uint8_t *hdr, uint32_t hdrlen,
		   const struct iovec *payload, int npayload, uint32_t paylen)
{
	uint8_t buf[UROCE_MAX_HDR_LEN + UROCE_XRCETH_LEN];
	uint8_t op = UROCE_OP_XRC_BASE | uroce_op_rc(bth_opcode(hdr));
	const struct uroce_opcode_info *info = &uroce_opcode[op];
	uint32_t n = UROCE_BTH_LEN;

	uroce_assert_held(&qp->dev->lock);
	if (!info->name || hdrlen < UROCE_BTH_LEN || hdrlen > UROCE_MAX_HDR_LEN)
		return -EINVAL;
	memcpy(buf, hdr, UROCE_BTH_LEN);
	buf[0] = op;
	if (info->mask & UROCE_M_XRCETH) {
		/* requests leave an INI QP only from the requester, while
		 * sq.next is the WQE being sent (it advances after) */
		const struct uroce_sq *sq = &qp->sq;

		if (qp->type != IBV_QPT_XRC_SEND || sq->next == sq->head)
			return -EINVAL;
		xrceth_init(buf + n,
			    sq->wqe[sq->next & (sq->size - 1)].xrc_srqn);
		n += UROCE_XRCETH_LEN;
	}
	memcpy(buf + n, hdr + UROCE_BTH_LEN, hdrlen - UROCE_BTH_LEN);
	n += hdrlen - UROCE_BTH_LEN;
	return uroce_xmit_to(qp, &qp->peer, qp->ip, buf, n, payload, npayload,
			     paylen);
}

/*
 * The SRQ a request to a TGT QP names, if it is an XRC SRQ of the TGT
 * QP's domain; the packets of one message must all name the same one.
 */
static struct uroce_srq *named_srq(struct uroce_qp *qp, struct uroce_pkt *pkt,
				   uint32_t srqn)
{
	struct uroce_srq *srq = uroce_srq_lookup(qp->dev, srqn);
	const struct uroce_resp_state *r = &qp->resp;

	if (!srq || !uroce_xrcd_same(srq->xrcd, qp->xrcd))
		return NULL;
	if ((r->in_send || r->in_write) && !(pkt->mask & UROCE_M_FIRST) &&
	    srqn != r->xrc_srqn)
		return NULL;
	return srq;
}

static void tgt_rx(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	uint32_t srqn = xrceth_srqn(pkt->bth +
				    pkt->info->offset[UROCE_HDR_XRCETH]);
	struct uroce_srq *srq = named_srq(qp, pkt, srqn);

	if (!srq) {
		uroce_count(qp->dev, UROCE_CNT_XRC_BAD_SRQN, 1);
		uroce_log_qp(UROCE_LOG_INFO, qp, pkt->psn,
			     "XRC request names SRQ 0x%x, not one of ours",
			     srqn);
		/* the next request in order is NAKed; a duplicate or a
		 * packet past a gap is dropped (the requester's timer
		 * brings it again in order) */
		if (pkt->psn == qp->resp.epsn && qp->attr.qp_state != IBV_QPS_ERR)
			uroce_resp_nak_invalid(qp, pkt->psn);
		return;
	}
	if (pkt->mask & UROCE_M_FIRST)
		qp->resp.xrc_srqn = srqn;
	/* for this request the TGT QP is a QP on that SRQ, in its PD,
	 * completing on its CQ (IBA 11.2.x: the XRC SRQ's PD checks keys) */
	qp->srq = srq;
	qp->pd = srq->pd;
	qp->rcq = srq->cq;
	uroce_resp_rx(qp, pkt);
	qp->srq = NULL;
	qp->pd = NULL;
	qp->rcq = NULL;
}

void uroce_xrc_rx(struct uroce_qp *qp, struct uroce_pkt *pkt)
{
	bool req = pkt->mask & UROCE_M_REQ;

	uroce_assert_held(&qp->dev->lock);
	/* INI QPs only take responses, TGT QPs only requests */
	if (req != (qp->type == IBV_QPT_XRC_RECV)) {
		uroce_count(qp->dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return;
	}
	if (req)
		tgt_rx(qp, pkt);
	else
		uroce_comp_rx(qp, pkt);
}
