// SPDX-License-Identifier: MIT
/*
 * The extended send API (ibv_wr_start ... ibv_wr_complete).  Between start
 * and complete the caller holds only its QP's staging lock, as a hardware
 * provider holds its SQ lock: WQEs are built in the QP's private staging
 * area, so any other verb (ibv_post_recv, ibv_bind_mw, ibv_poll_cq, on
 * this QP or another) may run meanwhile, and every other QP goes on.
 * ibv_wr_complete takes the engine lock once, checks the staged WQEs and
 * enters them all into the send queue, or none; ibv_wr_abort drops them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"

static struct uroce_qp *ex_qp(struct ibv_qp_ex *ibqpx)
{
	return container_of(ibqpx, struct uroce_qp, ex);
}

/* The WQE being built, or NULL once something went wrong. */
static struct uroce_send_wqe *cur_wqe(struct uroce_qp *qp)
{
	struct uroce_wr_stage *st = qp->stage;

	if (st->err || !st->n)
		return NULL;
	return &st->wqe[st->n - 1];
}

static struct uroce_send_wqe *new_wqe(struct ibv_qp_ex *ibqpx,
				      enum ibv_wr_opcode op)
{
	struct uroce_qp *qp = ex_qp(ibqpx);
	struct uroce_wr_stage *st = qp->stage;
	struct uroce_send_wqe *wqe;

	if (st->err)
		return NULL;
	/* more than the send queue could ever hold: ENOMEM, as a full SQ */
	if (st->n >= qp->sq.max_wr) {
		st->err = ENOMEM;
		return NULL;
	}
	wqe = &st->wqe[st->n++];
	memset(&wqe->opcode, 0,
	       sizeof(*wqe) - offsetof(struct uroce_send_wqe, opcode));
	wqe->sge = st->sge + (size_t)(st->n - 1) * qp->sq.max_sge;
	if (st->inline_buf)
		wqe->inline_data = st->inline_buf +
				   (size_t)(st->n - 1) * qp->sq.max_inline;
	wqe->wr_id = ibqpx->wr_id;
	wqe->send_flags = ibqpx->wr_flags;
	wqe->opcode = op;
	return wqe;
}

static void wr_start(struct ibv_qp_ex *ibqpx)
{
	struct uroce_wr_stage *st = ex_qp(ibqpx)->stage;

	pthread_mutex_lock(&st->lock);
	st->n = 0;
	st->err = 0;
}

/*
 * Move a staged WQE into its send queue slot, which has SGE and inline
 * space of its own: data that travels inline (from the staging inline
 * buffer, or an ATOMIC_WRITE's 8 bytes in the WQE itself) is moved with
 * it.  A Q_Key with the high bit set means the QP's, read now (IBA 10.2.5).
 */
static void enter_wqe(struct uroce_qp *qp, struct uroce_send_wqe *slot,
		      const struct uroce_send_wqe *w)
{
	struct ibv_sge *sge = slot->sge;
	uint8_t *inl = slot->inline_data;
	uintptr_t a = w->num_sge ? (uintptr_t)w->sge[0].addr : 0;

	*slot = *w;
	slot->sge = sge;
	slot->inline_data = inl;
	memcpy(sge, w->sge, w->num_sge * sizeof(*sge));
	if (a == (uintptr_t)&w->compare_add) {
		sge[0].addr = (uintptr_t)&slot->compare_add;
	} else if (w->inline_data && (w->send_flags & IBV_SEND_INLINE) &&
		   a == (uintptr_t)w->inline_data) {
		memcpy(inl, w->inline_data, w->sge[0].length);
		sge[0].addr = (uintptr_t)inl;
	}
	if (qp->type == IBV_QPT_UD && (slot->ud_qkey & 0x80000000u))
		slot->ud_qkey = qp->attr.qkey;
}

/* All staged WQEs into the send queue, checked, or none. dev->lock held. */
static int enter_all(struct uroce_qp *qp)
{
	struct uroce_wr_stage *st = qp->stage;
	struct uroce_sq *sq = &qp->sq;
	uint32_t i;
	int err;

	uroce_assert_held(&qp->dev->lock);
	if (sq->head - sq->tail + st->n > sq->max_wr)
		return ENOMEM;
	for (i = 0; i < st->n; i++) {
		struct uroce_send_wqe *slot =
			&sq->wqe[(sq->head + i) & (sq->size - 1)];

		enter_wqe(qp, slot, &st->wqe[i]);
		err = uroce_sq_check(qp, slot);
		if (err)
			return err;
	}
	sq->head += st->n;
	return 0;
}

static int wr_complete(struct ibv_qp_ex *ibqpx)
{
	struct uroce_qp *qp = ex_qp(ibqpx);
	struct uroce_wr_stage *st = qp->stage;
	int err = st->err;

	if (!err && st->n) {
		pthread_mutex_lock(&qp->dev->lock);
		err = enter_all(qp);
		if (!err) {
			uroce_sq_flush_if_error(qp);
			uroce_post_run(qp);
		}
		uroce_dev_unlock(qp->dev);
	}
	st->n = 0;
	pthread_mutex_unlock(&st->lock);
	return err;
}

static void wr_abort(struct ibv_qp_ex *ibqpx)
{
	struct uroce_wr_stage *st = ex_qp(ibqpx)->stage;

	st->n = 0;
	pthread_mutex_unlock(&st->lock);
}

static void wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_RDMA_WRITE);

	if (wqe) {
		wqe->rkey = rkey;
		wqe->remote_addr = addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			      __be32 imm)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (wqe) {
		wqe->rkey = rkey;
		wqe->remote_addr = addr;
		wqe->imm = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_RDMA_READ);

	if (wqe) {
		wqe->rkey = rkey;
		wqe->remote_addr = addr;
	}
}

static void wr_send(struct ibv_qp_ex *q)
{
	new_wqe(q, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_SEND_WITH_IMM);

	if (wqe)
		wqe->imm = imm;
}

static void wr_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
		       uint64_t compare, uint64_t swap)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (wqe) {
		wqe->rkey = rkey;
		wqe->remote_addr = addr;
		wqe->compare_add = compare;
		wqe->swap = swap;
	}
}

static void wr_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			 uint64_t add)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (wqe) {
		wqe->rkey = rkey;
		wqe->remote_addr = addr;
		wqe->compare_add = add;
	}
}

static void wr_flush(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
		     size_t len, uint8_t type, uint8_t level)
{
	struct uroce_send_wqe *wqe;

	if (len > UINT32_MAX || !type || (type & ~3u) || level > UROCE_FLUSH_MR) {
		ex_qp(q)->stage->err = EINVAL;
		return;
	}
	wqe = new_wqe(q, (enum ibv_wr_opcode)UROCE_WR_FLUSH);
	if (!wqe)
		return;
	wqe->rkey = rkey;
	wqe->remote_addr = addr;
	wqe->compare_add = len;
	wqe->swap = (uint64_t)level << 8 | type;
}

static void wr_unsupported(struct ibv_qp_ex *q)
{
	ex_qp(q)->stage->err = EOPNOTSUPP;
}

static void wr_send_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_SEND_WITH_INV);

	if (wqe)
		wqe->imm = rkey;
}

static void wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_LOCAL_INV);

	if (wqe)
		wqe->imm = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct uroce_send_wqe *wqe;

	/* ibv_wr_bind_mw binds type 2 windows (type 1: ibv_bind_mw) */
	if (!mw || mw->type != IBV_MW_TYPE_2 || !info) {
		ex_qp(q)->stage->err = EINVAL;
		return;
	}
	wqe = new_wqe(q, IBV_WR_BIND_MW);
	if (wqe) {
		wqe->bind_mw = mw;
		wqe->rkey = rkey;
		wqe->bind_info = *info;
	}
}

static void wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t hdr_sz,
			uint16_t mss)
{
	wr_unsupported(q);
}

static void wr_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			    const void *data)
{
	struct uroce_send_wqe *wqe = new_wqe(q, IBV_WR_ATOMIC_WRITE);

	if (!wqe)
		return;
	wqe->rkey = rkey;
	wqe->remote_addr = addr;
	/* the 8 bytes travel from the WQE itself, like inline data */
	memcpy(&wqe->compare_add, data, 8);
	wqe->sge[0].addr = (uintptr_t)&wqe->compare_add;
	wqe->sge[0].length = 8;
	wqe->sge[0].lkey = 0;
	wqe->num_sge = 1;
	wqe->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t qpn,
			   uint32_t qkey)
{
	struct uroce_qp *qp = ex_qp(q);
	struct uroce_send_wqe *wqe = cur_wqe(qp);

	if (!wqe)
		return;
	if (qp->type != IBV_QPT_UD || !ah) {
		qp->stage->err = EINVAL;
		return;
	}
	wqe->ud_dst = to_uah(ah)->dst;
	wqe->ud_ip = to_uah(ah)->ip;
	wqe->ud_qpn = qpn & UROCE_QPN_MASK;
	/* a high bit set means the QP's Q_Key: enter_wqe reads it */
	wqe->ud_qkey = qkey;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn)
{
	struct uroce_qp *qp = ex_qp(q);
	struct uroce_send_wqe *wqe = cur_wqe(qp);

	if (!wqe)
		return;
	if (qp->type != IBV_QPT_XRC_SEND) {
		qp->stage->err = EINVAL;
		return;
	}
	wqe->xrc_srqn = srqn & UROCE_QPN_MASK;
}

static void wr_set_sge_list(struct ibv_qp_ex *q, size_t n,
			    const struct ibv_sge *sg)
{
	struct uroce_qp *qp = ex_qp(q);
	struct uroce_send_wqe *wqe = cur_wqe(qp);

	if (!wqe)
		return;
	if (n > qp->sq.max_sge) {
		qp->stage->err = EINVAL;
		return;
	}
	memcpy(wqe->sge, sg, n * sizeof(*sg));
	wqe->num_sge = (uint32_t)n;
}

static void wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(q, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n,
				    const struct ibv_data_buf *buf)
{
	struct uroce_qp *qp = ex_qp(q);
	struct uroce_send_wqe *wqe = cur_wqe(qp);
	size_t i, len = 0;

	if (!wqe)
		return;
	for (i = 0; i < n; i++)
		len += buf[i].length;
	if (len > qp->sq.max_inline || !wqe->inline_data ||
	    uroce_wqe_rd_atomic(wqe)) {
		qp->stage->err = EINVAL;
		return;
	}
	len = 0;
	for (i = 0; i < n; i++) {
		memcpy(wqe->inline_data + len, buf[i].addr, buf[i].length);
		len += buf[i].length;
	}
	wqe->send_flags |= IBV_SEND_INLINE;
	wqe->sge[0].addr = (uintptr_t)wqe->inline_data;
	wqe->sge[0].length = (uint32_t)len;
	wqe->sge[0].lkey = 0;
	wqe->num_sge = 1;
}

static void wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(q, 1, &buf);
}

static int alloc_stage(struct uroce_qp *qp)
{
	struct uroce_wr_stage *st = calloc(1, sizeof(*st));
	const struct uroce_sq *sq = &qp->sq;

	if (!st)
		return ENOMEM;
	pthread_mutex_init(&st->lock, NULL);
	qp->stage = st;
	st->wqe = calloc(sq->max_wr, sizeof(*st->wqe));
	st->sge = calloc((size_t)sq->max_wr * sq->max_sge, sizeof(*st->sge));
	if (sq->max_inline)
		st->inline_buf = calloc(sq->max_wr, sq->max_inline);
	if (!st->wqe || !st->sge || (sq->max_inline && !st->inline_buf))
		return ENOMEM;
	return 0;
}

void uroce_qp_ex_free(struct uroce_qp *qp)
{
	struct uroce_wr_stage *st = qp->stage;

	if (!st)
		return;
	pthread_mutex_destroy(&st->lock);
	free(st->wqe);
	free(st->sge);
	free(st->inline_buf);
	free(st);
	qp->stage = NULL;
}

int uroce_qp_ex_init(struct uroce_qp *qp)
{
	struct ibv_qp_ex *x = &qp->ex;

	if (alloc_stage(qp))
		return ENOMEM;

	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_atomic_cmp_swp = wr_cmp_swp;
	x->wr_atomic_fetch_add = wr_fetch_add;
	x->wr_atomic_write = wr_atomic_write;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	qp->wr_flush = wr_flush;
	return 0;
}
