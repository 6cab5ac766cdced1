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

int uroce_dealloc_mw(struct ibv_mw *ibmw)
{
	struct uroce_mw *mw = to_umw(ibmw);
	struct uroce_dev *dev = ctx_dev(ibmw->context);

	pthread_mutex_lock(&dev->lock);
	uroce_mw_unbind(&mw->win);
	dev->obj.mr_tbl[uroce_key_index(mw->win.key)] = NULL;
	dev->obj.nmrs--;
	uroce_dev_unlock(dev);
	atomic_fetch_sub(&mw->win.pd->refs, 1);
	free(mw);
	return 0;
}

/* ibv_bind_mw(3): type 1, through the send queue, with the next key. */
int uroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
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
