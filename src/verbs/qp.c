// SPDX-License-Identifier: MIT
/*
 * QP verbs: create, modify (the IBA state machine), query, destroy, and the
 * classic post_send/post_recv paths.  The transport itself lives in engine/.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"

/* ---- the modify_qp state table (IBA 10.3.1, table 91, RC/UC/UD) ---- */

struct qp_transition {
	bool valid;
	int req; /* required attribute mask */
	int opt; /* optional attribute mask */
};

#define QPS_NUM (IBV_QPS_ERR + 1)

#define RC_RTR_REQ \
	(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RC_RTS_REQ \
	(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | \
	 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)
#define RC_RTS_OPT \
	(IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | \
	 IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE)

static const struct qp_transition rc_table[QPS_NUM][QPS_NUM] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { true, 0, 0 },
		[IBV_QPS_INIT] = { true, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS, 0 },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS },
		[IBV_QPS_RTR] = { true, RC_RTR_REQ, IBV_QP_ALT_PATH |
				  IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = { true, RC_RTS_REQ, RC_RTS_OPT },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = { true, 0, RC_RTS_OPT & ~IBV_QP_CUR_STATE },
		[IBV_QPS_SQD] = { true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RTS] = { true, 0, RC_RTS_OPT },
		[IBV_QPS_SQD] = { true, 0, IBV_QP_AV | IBV_QP_ALT_PATH |
				  IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
				  IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE |
				  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
				  IBV_QP_MAX_DEST_RD_ATOMIC },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = { true, 0, IBV_QP_CUR_STATE |
				  IBV_QP_ACCESS_FLAGS },
	},
	[IBV_QPS_ERR] = {},
};

#define UC_RTS_OPT \
	(IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | \
	 IBV_QP_PATH_MIG_STATE)

static const struct qp_transition uc_table[QPS_NUM][QPS_NUM] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { true, 0, 0 },
		[IBV_QPS_INIT] = { true, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS, 0 },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS },
		[IBV_QPS_RTR] = { true, IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
				  IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				  IBV_QP_PKEY_INDEX },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = { true, IBV_QP_SQ_PSN, UC_RTS_OPT },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = { true, 0, UC_RTS_OPT & ~IBV_QP_CUR_STATE },
		[IBV_QPS_SQD] = { true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RTS] = { true, 0, UC_RTS_OPT },
		[IBV_QPS_SQD] = { true, 0, IBV_QP_AV | IBV_QP_ALT_PATH |
				  IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
				  IBV_QP_PATH_MIG_STATE },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = { true, 0, IBV_QP_CUR_STATE |
				  IBV_QP_ACCESS_FLAGS },
	},
};

static const struct qp_transition ud_table[QPS_NUM][QPS_NUM] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { true, 0, 0 },
		[IBV_QPS_INIT] = { true, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_QKEY, 0 },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_QKEY },
		[IBV_QPS_RTR] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = { true, IBV_QP_SQ_PSN,
				  IBV_QP_CUR_STATE | IBV_QP_QKEY },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = { true, 0, IBV_QP_QKEY },
		[IBV_QPS_SQD] = { true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RTS] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },
		[IBV_QPS_SQD] = { true, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = { true, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY },
	},
};

static bool transition_ok(enum ibv_qp_type type, enum ibv_qp_state cur,
			  enum ibv_qp_state next, int mask)
{
	const struct qp_transition *t;
	int attrs = mask & ~IBV_QP_STATE;
	int req, opt;

	if (cur >= QPS_NUM || next >= QPS_NUM)
		return false;
	/* Any state may go to RESET or ERR with nothing else (IBA 10.3.1). */
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return (attrs & ~IBV_QP_CUR_STATE) == 0;
	if (type == IBV_QPT_UD)
		t = &ud_table[cur][next];
	else if (type == IBV_QPT_UC)
		t = &uc_table[cur][next];
	else
		t = &rc_table[cur][next];
	if (!t->valid)
		return false;
	req = t->req;
	opt = t->opt;
	/* XRC (the kernel's qp_state_table): an INI QP has no responder,
	 * a TGT QP no requester to retry with */
	if (type == IBV_QPT_XRC_SEND && cur == IBV_QPS_INIT &&
	    next == IBV_QPS_RTR)
		req &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (type == IBV_QPT_XRC_RECV && cur == IBV_QPS_RTR && next == IBV_QPS_RTS)
		req = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
	if ((attrs & req) != req)
		return false;
	return (attrs & ~(req | opt)) == 0;
}

static uint32_t roundup_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static void free_queues(struct uroce_qp *qp)
{
	free(qp->sq.wqe);
	free(qp->sq.sge);
	free(qp->sq.inline_buf);
	free(qp->rq.wqe);
	free(qp->rq.sge);
	uroce_qp_transport_free(qp);
	uroce_qp_ex_free(qp);
}

static int alloc_queues(struct uroce_qp *qp, struct ibv_qp_cap *cap)
{
	struct uroce_sq *sq = &qp->sq;
	struct uroce_rq *rq = &qp->rq;
	uint32_t i;

	sq->max_wr = cap->max_send_wr ? cap->max_send_wr : 1;
	sq->max_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	/* as rxe: a WQE's SGE space holds inline data too, so a QP takes
	 * at least max_send_sge * 16 bytes inline (rdma_xclient sends 16
	 * inline bytes on a QP that asked for none) */
	sq->max_inline = cap->max_inline_data;
	if (sq->max_inline < sq->max_sge * sizeof(struct ibv_sge))
		sq->max_inline = sq->max_sge * (uint32_t)sizeof(struct ibv_sge);
	/* one spare slot so head == tail means empty */
	sq->size = roundup_pow2(sq->max_wr + 1);
	rq->max_wr = cap->max_recv_wr ? cap->max_recv_wr : 1;
	rq->max_sge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	rq->size = roundup_pow2(rq->max_wr + 1);

	sq->wqe = calloc(sq->size, sizeof(*sq->wqe));
	sq->sge = calloc((size_t)sq->size * sq->max_sge, sizeof(*sq->sge));
	if (sq->max_inline)
		sq->inline_buf = calloc(sq->size, sq->max_inline);
	rq->wqe = calloc(rq->size, sizeof(*rq->wqe));
	rq->sge = calloc((size_t)rq->size * rq->max_sge, sizeof(*rq->sge));
	if (!sq->wqe || !sq->sge || (sq->max_inline && !sq->inline_buf) ||
	    !rq->wqe || !rq->sge)
		return ENOMEM;
	for (i = 0; i < sq->size; i++) {
		sq->wqe[i].sge = sq->sge + (size_t)i * sq->max_sge;
		if (sq->inline_buf)
			sq->wqe[i].inline_data = sq->inline_buf +
						 (size_t)i * sq->max_inline;
	}
	for (i = 0; i < rq->size; i++)
		rq->wqe[i].sge = rq->sge + (size_t)i * rq->max_sge;

	cap->max_send_wr = sq->max_wr;
	cap->max_send_sge = sq->max_sge;
	cap->max_recv_wr = rq->max_wr;
	cap->max_recv_sge = rq->max_sge;
	cap->max_inline_data = sq->max_inline;
	return 0;
}

/* Whether a QP numbered qpn (at slot of the table) was destroyed so
 * recently that packets for it may still be on their way (docs/scale.md,
 * "QPN quarantine"). */
static bool quarantined(struct uroce_dev *dev, uint32_t slot, uint32_t qpn,
			uint32_t now_ms)
{
	const struct uroce_qp_freed *f = &dev->obj.qp_freed[slot];

	/* (f->ms may be now_ms + 1: the stamp is made odd, never 0) */
	return f->ms && f->qpn == qpn &&
	       (int32_t)(now_ms - f->ms) < UROCE_QPN_QUARANTINE_MS;
}

/* QPNs one range holds: 2^16 or the table's size, less QP0..0x10 */
static uint32_t range_room(const struct uroce_dev *dev)
{
	uint32_t space = dev->obj.qpn_mask + 1 < UROCE_MAX_QP ?
				 dev->obj.qpn_mask + 1 :
				 UROCE_MAX_QP;

	return space - UROCE_QPN_FIRST;
}

/*
 * A QPN of range r from its counter, which moves on through the range
 * and skips numbers in use or in quarantine: a destroyed QPN comes back
 * only after the counter has gone round and its quarantine is over.
 * ENOSPC when none is free, or after QUARANTINE_SKIP numbers in
 * quarantine (a process that destroys QPs faster than the quarantine
 * lets numbers come back), so that no create walks the whole range.
 */
#define QUARANTINE_SKIP 4096

static int alloc_in(struct uroce_dev *dev, struct uroce_qp *qp, uint32_t r,
		    uint32_t now_ms)
{
	struct uroce_qpn_range *q = &dev->obj.qpn_range[r];
	uint32_t mask = dev->obj.qpn_mask, i, qpn, idx, skipped = 0;

	for (i = 0; i < range_room(dev) + UROCE_QPN_FIRST; i++) {
		qpn = q->base | q->next;
		idx = uroce_qp_index(dev, qpn);
		q->next = (q->next + 1) & mask;
		if (q->next < UROCE_QPN_FIRST)
			q->next = UROCE_QPN_FIRST;
		if ((qpn & mask) < UROCE_QPN_FIRST || idx >= UROCE_MAX_QP ||
		    dev->obj.qp_tbl[idx])
			continue;
		if (quarantined(dev, idx, qpn, now_ms)) {
			if (++skipped > QUARANTINE_SKIP)
				break;
			continue;
		}
		uroce_qp_table_add(dev, qp, qpn);
		uroce_share_note_qpn(dev, r);
		return 0;
	}
	return ENOSPC;
}

/*
 * A QPN for qp: from the ranges the device has (docs/scale.md), on a
 * shared address one more range (a registry slot) when they are full.
 * ENOSPC past the limit, with one line on stderr saying which.
 */
static int alloc_qpn(struct uroce_dev *dev, struct uroce_qp *qp)
{
	uint32_t now_ms = (uint32_t)(uroce_now_ns() / 1000000), r;
	bool quarantine = false;

	for (r = 0; r < dev->obj.nranges; r++) {
		if (dev->obj.qpn_range[r].n >= range_room(dev))
			continue;
		if (!alloc_in(dev, qp, r, now_ms))
			return 0;
		quarantine = true;
	}
	while (dev->net.share && dev->obj.nranges < UROCE_QPN_RANGES &&
	       !uroce_share_add_range(dev))
		if (!alloc_in(dev, qp, dev->obj.nranges - 1, now_ms))
			return 0;
	if (quarantine)
		uroce_log_emit(UROCE_LOG_ERROR, true, -1, -1,
			       "ibv_create_qp: ENOSPC, every free QP number "
			       "was destroyed less than %u ms ago "
			       "(docs/scale.md)",
			       UROCE_QPN_QUARANTINE_MS);
	else
		uroce_log_emit(UROCE_LOG_ERROR, true, -1, -1,
			       "ibv_create_qp: ENOSPC, %u QPs in use: the "
			       "limit of a process%s (docs/scale.md)",
			       dev->obj.nqps,
			       dev->net.share ?
				       " on a shared address, or no free slot left "
				       "on it" :
				       "");
	return ENOSPC;
}

#define SUPPORTED_SEND_OPS \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW | \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV | \
	 IBV_QP_EX_WITH_ATOMIC_WRITE | UROCE_QP_EX_WITH_FLUSH | \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

/*
 * What each QP type needs at creation: a PD and both CQs, except an XRC
 * INI QP (no receive side: a PD and a send CQ) and an XRC TGT QP (only an
 * XRC domain; the SRQ each request names gives PD and CQ).
 */
static int check_init(struct ibv_qp_init_attr_ex *attr)
{
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	bool has_pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) && attr->pd;

	if (attr->comp_mask & ~known)
		return EINVAL;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    (attr->create_flags & ~IBV_QP_CREATE_BLOCK_SELF_MCAST_LB))
		return EOPNOTSUPP;
	switch (attr->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		if (!has_pd || !attr->send_cq || !attr->recv_cq)
			return EINVAL;
		return 0;
	case IBV_QPT_XRC_SEND:
		if (!has_pd || !attr->send_cq)
			return EINVAL;
		return 0;
	case IBV_QPT_XRC_RECV:
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)
			return EINVAL;
		return 0;
	default:
		return EOPNOTSUPP;
	}
}

/* An XRC TGT QP has neither send nor receive queue of its own, an INI QP
 * no receive queue, a QP on an SRQ takes its receives from there. */
static void strip_caps(enum ibv_qp_type type, bool srq, struct ibv_qp_cap *cap)
{
	if (type == IBV_QPT_XRC_RECV) {
		memset(cap, 0, sizeof(*cap));
	} else if (type == IBV_QPT_XRC_SEND || srq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
}

static int check_create(struct ibv_qp_init_attr_ex *attr)
{
	int err = check_init(attr);

	if (err)
		return err;
	strip_caps(attr->qp_type, false, &attr->cap);
	if (attr->cap.max_send_wr > UROCE_MAX_QP_WR ||
	    attr->cap.max_recv_wr > UROCE_MAX_QP_WR ||
	    attr->cap.max_send_sge > UROCE_MAX_SGE ||
	    attr->cap.max_recv_sge > UROCE_MAX_SGE ||
	    attr->cap.max_inline_data > UROCE_MAX_INLINE)
		return EINVAL;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->send_ops_flags & ~SUPPORTED_SEND_OPS))
		return EOPNOTSUPP;
	return 0;
}

/* The objects the QP works with, and how it was asked to behave. */
static void init_objects(struct uroce_qp *qp, struct uroce_dev *dev,
			 const struct ibv_qp_init_attr_ex *attr)
{
	qp->dev = dev;
	qp->type = attr->qp_type;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->block_self_mcast =
		(attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
		(attr->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
	if (qp->type == IBV_QPT_XRC_RECV) {
		qp->xrcd = to_uxrcd(attr->xrcd);
	} else {
		qp->pd = to_upd(attr->pd);
		qp->scq = to_ucq(attr->send_cq);
	}
	if (qp->type != IBV_QPT_XRC_RECV && qp->type != IBV_QPT_XRC_SEND) {
		qp->rcq = to_ucq(attr->recv_cq);
		qp->srq = attr->srq ? to_usrq(attr->srq) : NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->is_ex = true;
		qp->send_ops_flags = attr->send_ops_flags;
	}
}

/* The ABI struct and the attributes a RESET QP reports. */
static void init_reset_state(struct uroce_qp *qp, struct ibv_context *ctx,
			     const struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *ibqp = uqp_ibqp(qp);

	ibqp->context = ctx;
	ibqp->qp_context = attr->qp_context;
	ibqp->pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : NULL;
	ibqp->send_cq = attr->send_cq;
	ibqp->recv_cq = attr->recv_cq;
	ibqp->srq = attr->srq;
	ibqp->state = IBV_QPS_RESET;
	ibqp->qp_type = attr->qp_type;
	pthread_mutex_init(&ibqp->mutex, NULL);
	pthread_cond_init(&ibqp->cond, NULL);
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cap = attr->cap;
	qp->attr.port_num = 1;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->mtu = 1024;
	if (qp->type == IBV_QPT_UD) {
		/* UD messages are bounded by the port MTU (IBA 9.8.4) */
		qp->attr.path_mtu = qp->dev->net.active_mtu;
		qp->mtu = uroce_mtu_bytes(qp->dev->net.active_mtu);
	}
}

static void hold_objects(struct uroce_qp *qp)
{
	if (qp->pd)
		atomic_fetch_add(&qp->pd->refs, 1);
	if (qp->scq)
		atomic_fetch_add(&qp->scq->refs, 1);
	if (qp->rcq)
		atomic_fetch_add(&qp->rcq->refs, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->refs, 1);
	if (qp->xrcd)
		atomic_fetch_add(&qp->xrcd->refs, 1);
}

struct ibv_qp *uroce_create_qp_ex(struct ibv_context *ctx,
				  struct ibv_qp_init_attr_ex *attr)
{
	struct uroce_dev *dev = ctx_dev(ctx);
	struct uroce_qp *qp;
	int err;

	err = check_create(attr);
	if (err) {
		errno = err;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	init_objects(qp, dev, attr);
	strip_caps(qp->type, qp->srq, &attr->cap);
	err = alloc_queues(qp, &attr->cap);
	if (!err && qp->is_ex)
		err = uroce_qp_ex_init(qp); /* (sized by the SQ) */
	if (err)
		goto err_free;
	/* alloc_queues reports at least one of each; these have none */
	strip_caps(qp->type, false, &attr->cap);
	init_reset_state(qp, ctx, attr);

	pthread_mutex_lock(&dev->lock);
	err = alloc_qpn(dev, qp);
	uroce_dev_unlock(dev);
	if (err)
		goto err_free;
	uqp_ibqp(qp)->handle = uqp_ibqp(qp)->qp_num;
	hold_objects(qp);
	return uqp_ibqp(qp);

err_free:
	free_queues(qp);
	free(qp);
	errno = err;
	return NULL;
}

UROCE_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
					  struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, attr, sizeof(*attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = uroce_create_qp_ex(pd->context, &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

UROCE_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct uroce_qp *qp = to_uqp(ibqp);

	return qp->is_ex ? &qp->ex : NULL;
}

/*
 * RoCE needs a GRH: the GID is the IP address (IBA A17.4).  Without one,
 * dgid is what the DLID resolved to (the LID of a uroce device on this
 * host, see engine/lid.c), looked up before the engine lock was taken.
 */
static int check_av(struct uroce_qp *qp, const struct ibv_ah_attr *ah,
		    const union ibv_gid *dgid, struct sockaddr_storage *peer)
{
	if (ah->port_num > 1 || (ah->is_global && ah->grh.sgid_index != 0))
		return EINVAL;
	if (!dgid || uroce_addr_from_gid(dgid, peer))
		return EINVAL;
	if (peer->ss_family != qp->dev->net.family)
		return EINVAL;
	return 0;
}

/*
 * qp_access_flags: the bits a QP acts on, and the MR-only bits of
 * enum ibv_access_flags that programs pass in the same mask (one mask for
 * ibv_reg_mr and ibv_modify_qp, e.g. with IBV_ACCESS_ON_DEMAND).  Kernel
 * drivers accept and ignore those; so do we, and say so once at debug.
 * A bit that no ibv_access_flags names is still refused (EINVAL).
 */
#define QP_ACCESS_BITS \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE | \
	 UROCE_ACCESS_FLUSH_GLOBAL | UROCE_ACCESS_FLUSH_PERSISTENT)
#define QP_ACCESS_IGNORED \
	(IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND | \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING | \
	 IBV_ACCESS_OPTIONAL_RANGE)

static int check_access(struct uroce_qp *qp, unsigned int access)
{
	static atomic_bool said;
	unsigned int ignored = access & QP_ACCESS_IGNORED;

	if (access & ~(unsigned int)(QP_ACCESS_BITS | QP_ACCESS_IGNORED))
		return EINVAL;
	if (ignored && !atomic_exchange(&said, true))
		uroce_log_qp(UROCE_LOG_DEBUG, qp, -1,
			     "qp_access_flags %#x: MR access bits %#x ignored",
			     access, ignored);
	return 0;
}

/*
 * The payload of a full packet for a path MTU: the path MTU, but no more
 * than the port's active MTU, which is what the link carries.  qperf asks
 * for 2048 whatever the port says, and on a 1500-byte Ethernet (active
 * 1024) a RoCE NIC sends packets of the smaller, as does this; the peer,
 * on the same link, reads them as its own QP's (ibv_query_qp still
 * reports the path MTU as set).
 */
static uint32_t path_packet_mtu(const struct uroce_dev *dev, enum ibv_mtu mtu)
{
	return uroce_mtu_bytes(mtu < dev->net.active_mtu ? mtu :
							   dev->net.active_mtu);
}

/* The range checks of each attribute the mask names (none need a lock). */
static int check_values(struct uroce_qp *qp, const struct ibv_qp_attr *attr,
			int mask)
{
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    check_access(qp, attr->qp_access_flags))
		return EINVAL;
	/* up to the port's max_mtu, as rxe: a larger path MTU than the
	 * link carries is packetized at the link's (path_packet_mtu) */
	if ((mask & IBV_QP_PATH_MTU) &&
	    (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > UROCE_QPN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_RQ_PSN) && attr->rq_psn > UROCE_PSN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_SQ_PSN) && attr->sq_psn > UROCE_PSN_MASK)
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    attr->max_rd_atomic > UROCE_MAX_RD_ATOMIC)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > UROCE_MAX_RD_ATOMIC)
		return EINVAL;
	if ((mask & IBV_QP_CAP) && (attr->cap.max_send_wr > qp->sq.max_wr ||
				    attr->cap.max_recv_wr > qp->rq.max_wr))
		return EINVAL;
	return 0;
}

/*
 * Everything one ibv_modify_qp needs that can fail, gathered before the
 * QP is touched: the address resolved, the responder resources
 * allocated, the transition checked.  commit() then cannot fail, so an
 * error leaves the QP exactly as it was.
 */
struct qp_change {
	const union ibv_gid *dgid; /* IBV_QP_AV: where it points */
	union ibv_gid lid_gid;	   /* a LID-only AV, resolved */
	struct sockaddr_storage peer;
	struct uroce_resp_res *res; /* IBV_QP_MAX_DEST_RD_ATOMIC */
	uint32_t nres;
	enum ibv_qp_state next;
};

/* Before the engine lock: a LID lookup reads other processes' segments. */
static int prepare(struct uroce_qp *qp, const struct ibv_qp_attr *attr,
		   int mask, struct qp_change *chg)
{
	int err = check_values(qp, attr, mask);

	if (err)
		return err;
	if (mask & IBV_QP_AV) {
		if (attr->ah_attr.is_global)
			chg->dgid = &attr->ah_attr.grh.dgid;
		else if (!uroce_lid_resolve(qp->dev, attr->ah_attr.dlid,
					    &chg->lid_gid))
			chg->dgid = &chg->lid_gid;
		err = check_av(qp, &attr->ah_attr, chg->dgid, &chg->peer);
		if (err)
			return err;
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
		chg->nres = attr->max_dest_rd_atomic ? attr->max_dest_rd_atomic :
						       1;
		chg->res = uroce_fault_nomem(qp->dev) ?
				   NULL :
				   calloc(chg->nres, sizeof(*chg->res));
		if (!chg->res)
			return ENOMEM;
	}
	return 0;
}

/* Under the engine lock: the state rules (IBA 10.3.1). */
static int check_transition(struct uroce_qp *qp, const struct ibv_qp_attr *attr,
			    int mask, struct qp_change *chg)
{
	enum ibv_qp_state cur = qp->attr.qp_state;

	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return EINVAL;
	chg->next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (!transition_ok(qp->type, cur, chg->next, mask))
		return EINVAL;
	return 0;
}

static void commit_path(struct uroce_qp *qp, const struct ibv_qp_attr *attr,
			int mask, struct qp_change *chg)
{
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_AV) {
		qp->attr.ah_attr = attr->ah_attr;
		qp->peer = chg->peer;
		qp->ip = uroce_ipopt_of(&attr->ah_attr, qp->dev->cc.on);
	}
	if (mask & IBV_QP_PATH_MTU) {
		qp->attr.path_mtu = attr->path_mtu;
		qp->mtu = path_packet_mtu(qp->dev, attr->path_mtu);
	}
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = attr->qkey;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->attr.en_sqd_async_notify = attr->en_sqd_async_notify;
}

static void commit_responder(struct uroce_qp *qp, const struct ibv_qp_attr *attr,
			     int mask, struct qp_change *chg)
{
	if (mask & IBV_QP_RQ_PSN) {
		qp->attr.rq_psn = attr->rq_psn;
		uroce_qp_set_rq_psn(qp, attr->rq_psn);
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
		uroce_qp_set_resp_res(qp, chg->res, chg->nres);
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
		chg->res = NULL;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
}

static void commit_requester(struct uroce_qp *qp,
			     const struct ibv_qp_attr *attr, int mask)
{
	if (mask & IBV_QP_SQ_PSN) {
		qp->attr.sq_psn = attr->sq_psn;
		uroce_qp_set_sq_psn(qp, attr->sq_psn);
	}
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT) {
		qp->attr.retry_cnt = attr->retry_cnt;
		uroce_qp_set_retry(qp, attr->retry_cnt);
	}
	if (mask & IBV_QP_RNR_RETRY) {
		qp->attr.rnr_retry = attr->rnr_retry;
		uroce_qp_set_rnr_retry(qp, attr->rnr_retry);
	}
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
}

/* RESET and destroy take the QP's completions out of its CQs (verbs/cq.c
 * uroce_cq_clean); on an SRQ's CQ only its own.  dev->lock held. */
static void clean_cqs(struct uroce_qp *qp)
{
	uint32_t qpn = uqp_ibqp(qp)->qp_num;

	uroce_assert_held(&qp->dev->lock);
	if (qp->scq)
		uroce_cq_clean(qp->scq, qpn);
	if (qp->rcq && qp->rcq != qp->scq)
		uroce_cq_clean(qp->rcq, qpn);
}

/* What entering the new state does, once its attributes are in place. */
static void enter_state(struct uroce_qp *qp, const struct ibv_qp_attr *attr,
			int mask, enum ibv_qp_state next)
{
	switch (next) {
	case IBV_QPS_RESET:
		uroce_qp_reset(qp);
		uroce_qp_set_state(qp, next);
		clean_cqs(qp);
		break;
	case IBV_QPS_ERR:
		uroce_qp_to_error(qp);
		break;
	case IBV_QPS_RTS:
		uroce_qp_set_state(qp, next);
		qp->sqd_notify = false;
		uroce_req_run(qp);
		break;
	case IBV_QPS_SQD:
		uroce_qp_set_state(qp, next);
		qp->sqd_notify = (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) &&
				 attr->en_sqd_async_notify;
		uroce_comp_retire(qp);
		break;
	default:
		uroce_qp_set_state(qp, next);
		break;
	}
}

/*
 * An RC or UC QP whose peer is on this device's own address but can never
 * answer it: itself with a send PSN that is not the PSN it expects (every
 * packet arrives out of sequence), or a QP number nobody on the address
 * holds (not one of ours, nor in a slot another member of the address
 * holds).  Legal, as on any NIC, so not refused; but two network
 * namespaces or containers whose devices both took the default 127.0.0.1
 * end here: the programs exchange that address and their QP numbers,
 * equal on fresh devices, and each QP sends to its own device (ib_write_bw
 * then reports 0.00 MB/s and nothing else).  Looked at on entering RTS,
 * where both PSNs are known (dev->lock held); said once a process, after
 * the lock.
 */
static const char *dead_end(struct uroce_qp *qp)
{
	struct uroce_dev *dev = qp->dev;
	uint32_t dqpn = qp->attr.dest_qp_num, slot = (dqpn >> 16) & 0xff;

	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC) ||
	    !uroce_addr_same((const struct sockaddr *)&qp->peer, &dev->net.local))
		return NULL;
	if (dqpn == uqp_ibqp(qp)->qp_num)
		return ((qp->attr.sq_psn ^ qp->attr.rq_psn) & UROCE_PSN_MASK) ?
			       "is connected to itself with a send PSN it "
			       "does not expect" :
			       NULL;
	if (uroce_qp_lookup(dev, dqpn))
		return NULL;
	/* (alone, every QP number of the address is ours; shared, bits
	 * 23..16 are the slot of the member that gave it out) */
	if (dev->net.share && dev->obj.range_of_slot[slot] == 0xff &&
	    uroce_share_slot_held(dev, slot))
		return NULL;
	return "is connected to a QP number that no QP at its own address "
	       "has";
}

static void warn_dead_end(struct uroce_qp *qp, const char *why)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	struct uroce_dev *dev = qp->dev;
	char ip[INET6_ADDRSTRLEN];

	if (atomic_flag_test_and_set(&said))
		return;
	fprintf(stderr,
		"uroce: QP %#x %s (%s, QP %#x), so it can complete "
		"nothing%s\n",
		uqp_ibqp(qp)->qp_num, why,
		uroce_addr_ntop(&dev->net.local, ip, sizeof(ip)),
		qp->attr.dest_qp_num,
		uroce_addr_loopback(&dev->net.local) ?
			".  A peer in another network namespace or "
			"container took the same host-local default "
			"address: give each side its own with UROCE_ADDR "
			"or UROCE_IFNAME (README, \"Across hosts\")" :
			"");
}

UROCE_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			       int mask)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	struct uroce_dev *dev = qp->dev;
	struct qp_change chg = { 0 };
	const char *dead = NULL;
	int err;

	if (!attr || !mask)
		return EINVAL;
	err = prepare(qp, attr, mask, &chg);
	if (!err) {
		pthread_mutex_lock(&dev->lock);
		err = check_transition(qp, attr, mask, &chg);
		if (!err) {
			commit_path(qp, attr, mask, &chg);
			commit_responder(qp, attr, mask, &chg);
			commit_requester(qp, attr, mask);
			if (mask & IBV_QP_STATE)
				enter_state(qp, attr, mask, chg.next);
			if ((mask & IBV_QP_STATE) && chg.next == IBV_QPS_RTS)
				dead = dead_end(qp);
		}
		uroce_dev_unlock(dev);
	}
	free(chg.res); /* not taken: an error */
	if (dead)
		warn_dead_end(qp, dead);
	/* rdma-core's fails in the kernel's write(), which leaves errno set
	 * too; programs print strerror(errno) */
	if (err)
		errno = err;
	return err;
}

UROCE_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			      int mask, struct ibv_qp_init_attr *init)
{
	struct uroce_qp *qp = to_uqp(ibqp);

	if (!attr || !init)
		return EINVAL;
	pthread_mutex_lock(&qp->dev->lock);
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	attr->sq_draining = 0;
	attr->cap.max_send_wr = qp->sq.max_wr;
	attr->cap.max_recv_wr = qp->rq.max_wr;
	attr->cap.max_send_sge = qp->sq.max_sge;
	attr->cap.max_recv_sge = qp->rq.max_sge;
	attr->cap.max_inline_data = qp->sq.max_inline;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->qp_type = qp->type;
	init->sq_sig_all = qp->sq_sig_all;
	uroce_dev_unlock(qp->dev);
	return 0;
}

UROCE_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	struct uroce_dev *dev = qp->dev;

	pthread_mutex_lock(&dev->lock);
	if (qp->nmcast) {
		/* uverbs refuses too: detach from every group first */
		uroce_dev_unlock(dev);
		return EBUSY;
	}
	/*
	 * An ACK held for the end of a receive burst (engine/resp.c)
	 * answers what the application may already have seen completed:
	 * it leaves before the QP stops sending (here, at RESET and at
	 * ERR), or the peer retries into a QP that is gone (a pingpong
	 * whose last receive ends the program).
	 */
	uroce_resp_farewell(qp);
	uroce_req_release(qp);
	uroce_qp_table_del(dev, qp);
	/*
	 * Its completions go with it, as on mlx4 and mlx5: their wr_ids
	 * point at what the program frees with the QP, and a program that
	 * drains a shared CQ after the destroy would act on them
	 * (libfabric's rxm reposted such a receive on the endpoint it had
	 * just closed, and crashed).
	 */
	clean_cqs(qp);
	uroce_dev_unlock(dev);
	/* unread async events go; read ones must be acked first (as
	 * libibverbs documents for ibv_destroy_qp) */
	uroce_async_purge(to_uctx(ibqp->context), ibqp);
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != qp->async_events_reported)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);
	if (qp->pd)
		atomic_fetch_sub(&qp->pd->refs, 1);
	if (qp->scq)
		atomic_fetch_sub(&qp->scq->refs, 1);
	if (qp->rcq)
		atomic_fetch_sub(&qp->rcq->refs, 1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->refs, 1);
	if (qp->xrcd)
		atomic_fetch_sub(&qp->xrcd->refs, 1);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	/* its packets that a full send buffer holds back point into its
	 * queues (inline data) and the program's memory */
	uroce_tx_flush(dev);
	free_queues(qp);
	free(qp);
	return 0;
}

/* ---- posting ---- */

struct uroce_send_wqe *uroce_sq_slot(struct uroce_qp *qp)
{
	struct uroce_sq *sq = &qp->sq;

	uroce_assert_held(&qp->dev->lock);
	if (sq->head - sq->tail >= sq->max_wr)
		return NULL;
	return &sq->wqe[sq->head & (sq->size - 1)];
}

static bool opcode_ok(enum ibv_qp_type type, enum ibv_wr_opcode op)
{
	if ((int)op == UROCE_WR_FLUSH)
		return type == IBV_QPT_RC;
	if (type == IBV_QPT_XRC_RECV)
		return false; /* a TGT QP sends nothing of its own */
	if (type == IBV_QPT_UD)
		return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
	if (type == IBV_QPT_UC)
		return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
		       op == IBV_WR_RDMA_WRITE ||
		       op == IBV_WR_RDMA_WRITE_WITH_IMM ||
		       op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
	switch (op) {
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_ATOMIC_WRITE:
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return true;
	default:
		return false;
	}
}

int uroce_sq_check(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	enum ibv_qp_state st = qp->attr.qp_state;
	uint64_t len = 0;
	uint32_t i;

	uroce_assert_held(&qp->dev->lock);
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR)
		return EINVAL;
	if (!opcode_ok(qp->type, wqe->opcode))
		return EINVAL;
	if (wqe->opcode == IBV_WR_BIND_MW || wqe->opcode == IBV_WR_LOCAL_INV ||
	    wqe->opcode == (enum ibv_wr_opcode)UROCE_WR_FLUSH) {
		if (wqe->opcode == IBV_WR_BIND_MW && !wqe->bind_mw)
			return EINVAL;
		wqe->num_sge = 0; /* local operations move no data */
	}
	if (wqe->num_sge > qp->sq.max_sge)
		return EINVAL;
	for (i = 0; i < wqe->num_sge; i++)
		len += wqe->sge[i].length;
	/* IBA 9.4.7: an atomic write carries exactly 8 bytes */
	if (wqe->opcode == IBV_WR_ATOMIC_WRITE && len != 8)
		return EINVAL;
	if (len > UROCE_MAX_MSG_SIZE)
		return EINVAL;
	if (wqe->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    wqe->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		if (wqe->num_sge != 1 || len < 8 ||
		    (wqe->send_flags & IBV_SEND_INLINE))
			return EINVAL;
		len = 8;
	}
	if ((wqe->send_flags & IBV_SEND_INLINE) &&
	    wqe->opcode == IBV_WR_RDMA_READ)
		return EINVAL;
	wqe->length = len;
	wqe->state = UROCE_WQE_POSTED;
	wqe->read_done = 0;
	wqe->status = IBV_WC_SUCCESS;
	return 0;
}

/*
 * SGE i of an application's list, which may sit unaligned (libiscsi's
 * iSER keeps its SGEs in packed descriptors): copied out, never loaded
 * as an aligned struct.
 */
static struct ibv_sge sge_at(const struct ibv_sge *sg, int i)
{
	struct ibv_sge s;

	memcpy(&s, (const char *)sg + (size_t)i * sizeof(s), sizeof(s));
	return s;
}

/* Copy inline data in: it then travels as one SGE over the WQE's buffer. */
static int copy_inline(struct uroce_qp *qp, struct uroce_send_wqe *wqe,
		       const struct ibv_sge *sg, int n)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += sge_at(sg, i).length;
	if (len > qp->sq.max_inline)
		return EINVAL;
	len = 0;
	for (i = 0; i < n; i++) {
		struct ibv_sge s = sge_at(sg, i);

		memcpy(wqe->inline_data + len, (void *)(uintptr_t)s.addr,
		       s.length);
		len += s.length;
	}
	wqe->sge[0].addr = (uintptr_t)wqe->inline_data;
	wqe->sge[0].length = (uint32_t)len;
	wqe->sge[0].lkey = 0;
	wqe->num_sge = 1;
	return 0;
}

static int commit_one(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	int err = uroce_sq_check(qp, wqe);

	if (err)
		return err;
	qp->sq.head++;
	uroce_sq_flush_if_error(qp);
	return 0;
}

static int post_one(struct uroce_qp *qp, const struct ibv_send_wr *wr)
{
	struct uroce_send_wqe *wqe = uroce_sq_slot(qp);
	int err;

	if (!wqe)
		return ENOMEM;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->sq.max_sge)
		return EINVAL;
	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	wqe->send_flags = wr->send_flags;
	wqe->imm = wr->opcode == IBV_WR_SEND_WITH_INV ? wr->invalidate_rkey :
							wr->imm_data;
	wqe->compare_add = 0;
	wqe->swap = 0;
	wqe->bind_mw = NULL;
	if (wr->opcode == IBV_WR_BIND_MW) {
		wqe->bind_mw = wr->bind_mw.mw;
		wqe->rkey = wr->bind_mw.rkey;
		wqe->bind_info = wr->bind_mw.bind_info;
		wqe->num_sge = 0;
		return commit_one(qp, wqe);
	}
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wqe->remote_addr = wr->wr.atomic.remote_addr;
		wqe->rkey = wr->wr.atomic.rkey;
		wqe->compare_add = wr->wr.atomic.compare_add;
		wqe->swap = wr->wr.atomic.swap;
	} else if (qp->type == IBV_QPT_UD) {
		if (!wr->wr.ud.ah)
			return EINVAL;
		wqe->ud_dst = to_uah(wr->wr.ud.ah)->dst;
		wqe->ud_ip = to_uah(wr->wr.ud.ah)->ip;
		wqe->ud_qpn = wr->wr.ud.remote_qpn & UROCE_QPN_MASK;
		/* IBA 10.2.5: a Q_Key with the high bit set means the QP's */
		wqe->ud_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ?
				       qp->attr.qkey :
				       wr->wr.ud.remote_qkey;
	} else {
		wqe->remote_addr = wr->wr.rdma.remote_addr;
		wqe->rkey = wr->wr.rdma.rkey;
	}
	if (qp->type == IBV_QPT_XRC_SEND)
		wqe->xrc_srqn = wr->qp_type.xrc.remote_srqn & UROCE_QPN_MASK;
	if ((wr->send_flags & IBV_SEND_INLINE) && wr->num_sge &&
	    wr->opcode != IBV_WR_RDMA_READ &&
	    wr->opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	    wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) {
		if (!wqe->inline_data)
			return EINVAL;
		err = copy_inline(qp, wqe, wr->sg_list, wr->num_sge);
		if (err)
			return err;
	} else {
		wqe->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(wqe->sge, wr->sg_list,
			       sizeof(*wqe->sge) * (size_t)wr->num_sge);
	}
	return commit_one(qp, wqe);
}

int uroce_rq_post(struct uroce_rq *rq, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	uroce_assert_held(&uroce_dev_get()->lock);
	for (; wr; wr = wr->next) {
		struct uroce_recv_wqe *wqe;
		uint64_t len = 0;
		int i, err = 0;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge)
			err = EINVAL;
		else if (rq->head - rq->tail >= rq->max_wr)
			err = ENOMEM;
		if (err) {
			if (bad_wr)
				*bad_wr = wr;
			return err;
		}
		wqe = &rq->wqe[rq->head & (rq->size - 1)];
		wqe->wr_id = wr->wr_id;
		wqe->num_sge = (uint32_t)wr->num_sge;
		for (i = 0; i < wr->num_sge; i++) {
			wqe->sge[i] = sge_at(wr->sg_list, i);
			len += wqe->sge[i].length;
		}
		wqe->length = len;
		rq->head++;
	}
	return 0;
}

int uroce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	int err = 0;

	uroce_lock_spin(&qp->dev->lock);
	for (; wr; wr = wr->next) {
		err = post_one(qp, wr);
		if (err) {
			if (bad_wr)
				*bad_wr = wr;
			break;
		}
	}
	uroce_post_run(qp);
	uroce_dev_unlock(qp->dev);
	return err;
}

int uroce_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr)
{
	struct uroce_qp *qp = to_uqp(ibqp);
	struct uroce_rq *rq = &qp->rq;
	int err = 0;

	uroce_lock_spin(&qp->dev->lock);
	if (qp->attr.qp_state == IBV_QPS_RESET || qp->srq ||
	    uroce_qp_is_xrc(qp)) {
		err = EINVAL;
		if (bad_wr)
			*bad_wr = wr;
	} else {
		err = uroce_rq_post(rq, wr, bad_wr);
		uroce_resp_rq_posted(qp);
	}
	if (qp->attr.qp_state == IBV_QPS_ERR && !qp->srq && !uroce_qp_is_xrc(qp))
		uroce_qp_flush_rq(qp);
	uroce_dev_unlock(qp->dev);
	return err;
}
