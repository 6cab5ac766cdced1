// SPDX-License-Identifier: MIT
/* The SRQ table and the SRQ limit event the responder raises. */
#include <string.h>

#include "dev.h"

struct uroce_srq *uroce_srq_lookup(struct uroce_dev *dev, uint32_t srqn)
{
	struct uroce_srq *srq;

	uroce_assert_held(&dev->lock);
	if (!dev->obj.srq_tbl)
		return NULL;
	srq = dev->obj.srq_tbl[srqn % UROCE_MAX_SRQ];
	return srq && srq->srqn == srqn ? srq : NULL;
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
