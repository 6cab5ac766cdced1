// SPDX-License-Identifier: MIT
/*
 * Memory windows (IBA 10.6.7): a window is an entry of the key table that
 * points into an MR with its own range and remote access.  Type 1 is bound
 * with ibv_bind_mw, type 2 with a BIND_MW work request; both binds run in
 * order on the send queue (engine/req.c calls uroce_mw_bind).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"

struct ibv_mw *uroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct uroce_dev *dev = ctx_dev(pd->context);
	struct uroce_mw *mw;
	int err;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	mw->win.pd = to_upd(pd);
	mw->win.mw_type = type == IBV_MW_TYPE_1 ? 1 : 2;
	pthread_mutex_lock(&dev->lock);
	err = uroce_mr_insert(dev, &mw->win);
	uroce_dev_unlock(dev);
	if (err) {
		free(mw);
		errno = err;
		return NULL;
	}
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.rkey = mw->win.key;
	mw->ibmw.handle = mw->win.key;
	mw->ibmw.type = type;
	atomic_fetch_add(&mw->win.pd->refs, 1);
	return &mw->ibmw;
}

static void unbind(struct uroce_mr *win)
{
	if (win->mw_bound && win->parent)
		atomic_fetch_sub(&win->parent->mw_refs, 1);
	win->mw_bound = false;
	win->parent = NULL;
}

int uroce_dealloc_mw(struct ibv_mw *ibmw)
{
	struct uroce_mw *mw = to_umw(ibmw);
	struct uroce_dev *dev = ctx_dev(ibmw->context);

	pthread_mutex_lock(&dev->lock);
	unbind(&mw->win);
	dev->obj.mr_tbl[uroce_key_index(mw->win.key)] = NULL;
	dev->obj.nmrs--;
	uroce_dev_unlock(dev);
	atomic_fetch_sub(&mw->win.pd->refs, 1);
	free(mw);
	return 0;
}

enum ibv_wc_status uroce_mw_bind(struct uroce_qp *qp, struct ibv_mw *ibmw,
				 uint32_t new_key,
				 const struct ibv_mw_bind_info *info)
{
	struct uroce_mw *mw = to_umw(ibmw);
	struct uroce_mr *win = &mw->win, *mr;
	const unsigned int remote = IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC |
				    IBV_ACCESS_ZERO_BASED;

	/* the consumer owns the low 8 bits of the key, not the rest */
	if ((new_key ^ win->key) & ~0xffu || win->pd != qp->pd)
		return IBV_WC_MW_BIND_ERR;
	/* IBA 10.6.7.3: a type 2 window is bound once, then invalidated */
	if (win->mw_type == 2 && win->mw_bound)
		return IBV_WC_MW_BIND_ERR;
	if (!info->mr || !info->length) {
		if (win->mw_type == 2)
			return IBV_WC_MW_BIND_ERR;
		unbind(win);
		win->key = new_key;
		ibmw->rkey = new_key;
		return IBV_WC_SUCCESS;
	}
	mr = to_umr(info->mr);
	if (mr->pd != qp->pd || !(mr->access & IBV_ACCESS_MW_BIND) ||
	    (info->mw_access_flags & ~remote) ||
	    (info->mw_access_flags & IBV_ACCESS_ZERO_BASED) ||
	    ((info->mw_access_flags & (IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
		return IBV_WC_MW_BIND_ERR;
	if (info->addr < mr->iova || info->length > mr->length ||
	    info->addr - mr->iova > mr->length - info->length)
		return IBV_WC_MW_BIND_ERR;
	unbind(win);
	win->parent = mr;
	win->iova = info->addr;
	win->addr = mr->addr + (info->addr - mr->iova);
	win->length = info->length;
	win->access = info->mw_access_flags;
	win->key = new_key;
	win->mw_qpn = uqp_ibqp(qp)->qp_num;
	win->mw_bound = true;
	atomic_fetch_add(&mr->mw_refs, 1);
	ibmw->rkey = new_key;
	return IBV_WC_SUCCESS;
}

enum ibv_wc_status uroce_invalidate(struct uroce_qp *qp, uint32_t key)
{
	struct uroce_mr *win = qp->dev->obj.mr_tbl[uroce_key_index(key)];

	/* only a bound type 2 window of the QP's PD may be invalidated */
	if (!win || win->key != key || win->mw_type != 2 || !win->mw_bound ||
	    win->pd != qp->pd)
		return IBV_WC_MW_BIND_ERR;
	unbind(win);
	return IBV_WC_SUCCESS;
}

/* ibv_bind_mw(3): type 1, through the send queue, with the next key. */
int uroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		  struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr, *bad;
	int err;

	if (!mw || !bind || mw->type != IBV_MW_TYPE_1)
		return EINVAL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = bind->bind_info;
	err = uroce_post_send(qp, &wr, &bad);
	return err;
}
