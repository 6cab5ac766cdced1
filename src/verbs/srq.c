// SPDX-License-Identifier: MIT
/* Shared receive queues: one receive ring that several QPs consume. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"

#define UROCE_MAX_SRQ_WR UROCE_MAX_QP_WR

static uint32_t pow2_above(uint32_t v)
{
	uint32_t p = 1;

	while (p <= v)
		p <<= 1;
	return p;
}

/* Give srq a number and a table slot; dev->lock held.  Numbers run from
 * 1 through 24 bits, so a stale one is not reused soon. */
static int insert_srq(struct uroce_dev *dev, struct uroce_srq *srq)
{
	uint32_t i, n;

	uroce_assert_held(&dev->lock);
	if (!dev->obj.srq_tbl) {
		dev->obj.srq_tbl = calloc(UROCE_MAX_SRQ,
					  sizeof(*dev->obj.srq_tbl));
		if (!dev->obj.srq_tbl)
			return ENOMEM;
	}
	for (i = 0; i < UROCE_MAX_SRQ; i++) {
		n = dev->obj.next_srqn;
		dev->obj.next_srqn = (n + 1) & UROCE_QPN_MASK;
		if (!n || dev->obj.srq_tbl[n % UROCE_MAX_SRQ])
			continue;
		dev->obj.srq_tbl[n % UROCE_MAX_SRQ] = srq;
		srq->srqn = n;
		return 0;
	}
	return ENOMEM;
}

/* ibv_srq_init_attr_ex: a basic SRQ needs a PD; an XRC SRQ (IBA 11.2.x)
 * also an XRC domain and the CQ its receives complete on */
static int check_init(struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t known = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
			       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	bool xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
		   attr->srq_type == IBV_SRQT_XRC;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    (attr->comp_mask & ~known))
		return EINVAL;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    attr->srq_type != IBV_SRQT_BASIC && !xrc)
		return EOPNOTSUPP;
	if (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
		    !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq))
		return EINVAL;
	return 0;
}

struct ibv_srq *uroce_create_srq_ex(struct ibv_context *ctx,
				    struct ibv_srq_init_attr_ex *attr)
{
	struct uroce_dev *dev = ctx_dev(ctx);
	struct uroce_srq *srq;
	struct uroce_rq *rq;
	uint32_t i;
	int err;

	err = check_init(attr);
	if (err) {
		errno = err;
		return NULL;
	}
	if (!attr->attr.max_wr || attr->attr.max_wr > UROCE_MAX_SRQ_WR ||
	    attr->attr.max_sge > UROCE_MAX_SGE ||
	    attr->attr.srq_limit > attr->attr.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	rq = &srq->rq;
	rq->max_wr = attr->attr.max_wr;
	rq->max_sge = attr->attr.max_sge ? attr->attr.max_sge : 1;
	rq->size = pow2_above(rq->max_wr);
	rq->wqe = calloc(rq->size, sizeof(*rq->wqe));
	rq->sge = calloc((size_t)rq->size * rq->max_sge, sizeof(*rq->sge));
	if (!rq->wqe || !rq->sge) {
		free(rq->wqe);
		free(rq->sge);
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0; i < rq->size; i++)
		rq->wqe[i].sge = rq->sge + (size_t)i * rq->max_sge;
	srq->dev = dev;
	srq->pd = to_upd(attr->pd);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    attr->srq_type == IBV_SRQT_XRC) {
		srq->xrcd = to_uxrcd(attr->xrcd);
		srq->cq = to_ucq(attr->cq);
	}
	pthread_mutex_lock(&dev->lock);
	err = insert_srq(dev, srq);
	uroce_dev_unlock(dev);
	if (err) {
		free(rq->wqe);
		free(rq->sge);
		free(srq);
		errno = err;
		return NULL;
	}
	srq->limit = attr->attr.srq_limit;
	srq->ibsrq.context = ctx;
	srq->ibsrq.srq_context = attr->srq_context;
	srq->ibsrq.pd = attr->pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	attr->attr.max_wr = rq->max_wr;
	attr->attr.max_sge = rq->max_sge;
	atomic_fetch_add(&srq->pd->refs, 1);
	if (srq->xrcd) {
		atomic_fetch_add(&srq->xrcd->refs, 1);
		atomic_fetch_add(&srq->cq->refs, 1);
	}
	return &srq->ibsrq;
}

UROCE_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					    struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	struct ibv_srq *srq;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ex, 0, sizeof(ex));
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	ex.pd = pd;
	srq = uroce_create_srq_ex(pd->context, &ex);
	if (srq)
		attr->attr = ex.attr;
	return srq;
}

UROCE_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq,
				struct ibv_srq_attr *attr, int mask)
{
	struct uroce_srq *srq = to_usrq(ibsrq);
	int err = 0;

	if (!attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	/* resizing an SRQ is not offered (IBV_DEVICE_SRQ_RESIZE unset) */
	if (mask & IBV_SRQ_MAX_WR)
		return EINVAL;
	pthread_mutex_lock(&srq->dev->lock);
	if (attr->srq_limit > srq->rq.max_wr)
		err = EINVAL;
	else
		srq->limit = attr->srq_limit;
	uroce_dev_unlock(srq->dev);
	return err;
}

UROCE_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	if (!attr)
		return EINVAL;
	pthread_mutex_lock(&srq->dev->lock);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	uroce_dev_unlock(srq->dev);
	return 0;
}

UROCE_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct uroce_srq *srq = to_usrq(ibsrq);

	if (atomic_load(&srq->refs))
		return EBUSY;
	/* out of the table first: no XRC request can reach it after this */
	pthread_mutex_lock(&srq->dev->lock);
	srq->dev->obj.srq_tbl[srq->srqn % UROCE_MAX_SRQ] = NULL;
	uroce_dev_unlock(srq->dev);
	uroce_async_purge(to_uctx(ibsrq->context), ibsrq);
	pthread_mutex_lock(&ibsrq->mutex);
	while (ibsrq->events_completed != srq->async_events_reported)
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);
	atomic_fetch_sub(&srq->pd->refs, 1);
	if (srq->xrcd) {
		atomic_fetch_sub(&srq->xrcd->refs, 1);
		atomic_fetch_sub(&srq->cq->refs, 1);
	}
	free(srq->rq.wqe);
	free(srq->rq.sge);
	free(srq);
	return 0;
}

int uroce_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	struct uroce_srq *srq = to_usrq(ibsrq);
	struct uroce_rq *rq = &srq->rq;
	int err;

	pthread_mutex_lock(&srq->dev->lock);
	err = uroce_rq_post(rq, wr, bad_wr);
	uroce_dev_unlock(srq->dev);
	return err;
}
