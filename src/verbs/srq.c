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

struct ibv_srq *uroce_create_srq_ex(struct ibv_context *ctx,
				    struct ibv_srq_init_attr_ex *attr)
{
	struct uroce_srq *srq;
	struct uroce_rq *rq;
	uint32_t i;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE))) {
		errno = EINVAL;
		return NULL;
	}
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    attr->srq_type != IBV_SRQT_BASIC) {
		errno = EOPNOTSUPP;
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
	srq->dev = ctx_dev(ctx);
	srq->pd = to_upd(attr->pd);
	srq->limit = attr->attr.srq_limit;
	srq->ibsrq.context = ctx;
	srq->ibsrq.srq_context = attr->srq_context;
	srq->ibsrq.pd = attr->pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	attr->attr.max_wr = rq->max_wr;
	attr->attr.max_sge = rq->max_sge;
	atomic_fetch_add(&srq->pd->refs, 1);
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

UROCE_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
				int mask)
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
	uroce_async_purge(to_uctx(ibsrq->context), ibsrq);
	pthread_mutex_lock(&ibsrq->mutex);
	while (ibsrq->events_completed != srq->async_events_reported)
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);
	atomic_fetch_sub(&srq->pd->refs, 1);
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

void uroce_srq_consumed(struct uroce_srq *srq)
{
	struct ibv_async_event ev;

	/* IBA 10.2.9.4: the limit fires once, when fewer WQEs remain */
	if (!srq->limit || srq->rq.head - srq->rq.tail >= srq->limit)
		return;
	srq->limit = 0;
	memset(&ev, 0, sizeof(ev));
	ev.element.srq = &srq->ibsrq;
	ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
	uroce_async_event(to_uctx(srq->ibsrq.context), &ev);
}
