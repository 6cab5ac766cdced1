// SPDX-License-Identifier: MIT
/*
 * Memory window binds and invalidations, run in order on the send queue
 * (engine/req.c) or by the responder (SEND with invalidate, engine/resp.c).
 */
#include "dev.h"

void uroce_mw_unbind(struct uroce_mr *win)
{
	if (win->mw_bound && win->parent)
		atomic_fetch_sub(&win->parent->mw_refs, 1);
	win->mw_bound = false;
	win->parent = NULL;
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
		uroce_mw_unbind(win);
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
	uroce_mw_unbind(win);
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
	uroce_mw_unbind(win);
	return IBV_WC_SUCCESS;
}
