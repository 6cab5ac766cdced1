// SPDX-License-Identifier: MIT
/*
 * Memory window binds and invalidations, run in order on the send queue
 * (engine/req.c) or by the responder (SEND with invalidate, engine/resp.c).
 */
#include "dev.h"

void uroce_mw_unbind(struct uroce_mr *win)
{
	uroce_assert_held(&uroce_dev_get()->lock);
	if (win->mw_bound && win->parent)
		atomic_fetch_sub(&win->parent->mw_refs, 1);
	win->mw_bound = false;
	win->parent = NULL;
}

/*
 * The bind checks of IBA 10.6.7 as rxe makes them (docs/verbs.md,
 * "Memory window binds"): the window's access is its
 * remote bits, the rest of a mask the program also gave its MR ignored;
 * only a type 2 window must share the binding QP's PD (C10-72), and the
 * MR must share the window's; the consumer's part of the new key is its
 * low 8 bits, the rest stays the window's.
 */
static bool bind_allowed(const struct uroce_mr *win, const struct uroce_mr *mr,
			 unsigned int access)
{
	if (mr->mw_type || mr->pd != win->pd)
		return false;
	if (!(mr->access & IBV_ACCESS_MW_BIND)) /* C10-73 */
		return false;
	/* zero-based windows are not offered (o10-36.2.2 for type 1) */
	if (access & IBV_ACCESS_ZERO_BASED)
		return false;
	/* C10-74: a writable window over an MR we may not write */
	return !((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		 !(mr->access & IBV_ACCESS_LOCAL_WRITE));
}

enum ibv_wc_status uroce_mw_bind(struct uroce_qp *qp, struct ibv_mw *ibmw,
				 uint32_t new_key,
				 const struct ibv_mw_bind_info *info)
{
	struct uroce_mw *mw = to_umw(ibmw);
	struct uroce_mr *win = &mw->win, *mr;
	const unsigned int remote = IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ |
				    IBV_ACCESS_REMOTE_ATOMIC;
	unsigned int access = info->mw_access_flags &
			      (remote | IBV_ACCESS_ZERO_BASED);

	uroce_assert_held(&qp->dev->lock);
	new_key = (win->key & ~0xffu) | (new_key & 0xffu);
	if (win->mw_type == 2 && win->pd != qp->pd)
		return IBV_WC_MW_BIND_ERR;
	/* IBA 10.6.7.3: a type 2 window is bound once, then invalidated */
	if (win->mw_type == 2 && win->mw_bound)
		return IBV_WC_MW_BIND_ERR;
	if (!info->mr || !info->length) {
		if (win->mw_type == 2) /* o10-37.2.40 */
			return IBV_WC_MW_BIND_ERR;
		uroce_mw_unbind(win);
		win->key = new_key;
		ibmw->rkey = new_key;
		return IBV_WC_SUCCESS;
	}
	mr = to_umr(info->mr);
	if (!bind_allowed(win, mr, access))
		return IBV_WC_MW_BIND_ERR;
	if (info->addr < mr->iova || info->length > mr->length ||
	    info->addr - mr->iova > mr->length - info->length)
		return IBV_WC_MW_BIND_ERR; /* C10-75 */
	uroce_mw_unbind(win);
	win->parent = mr;
	win->iova = info->addr;
	win->addr = mr->addr + (info->addr - mr->iova);
	win->length = info->length;
	win->access = access;
	win->key = new_key;
	win->mw_qpn = uqp_ibqp(qp)->qp_num;
	win->mw_bound = true;
	atomic_fetch_add(&mr->mw_refs, 1);
	ibmw->rkey = new_key;
	return IBV_WC_SUCCESS;
}

/*
 * Local and remote invalidation of a type 2 window of the QP's PD.  As in
 * rxe, one that is not bound (rxe's FREE state) invalidates without
 * error: programs invalidate before every rebind.
 */
enum ibv_wc_status uroce_invalidate(struct uroce_qp *qp, uint32_t key)
{
	struct uroce_mr *win = qp->dev->obj.mr_tbl[uroce_key_index(key)];

	uroce_assert_held(&qp->dev->lock);
	if (!win || win->key != key || win->mw_type != 2 || win->pd != qp->pd)
		return IBV_WC_MW_BIND_ERR;
	uroce_mw_unbind(win);
	return IBV_WC_SUCCESS;
}
