// SPDX-License-Identifier: MIT
/*
 * CQ overrun (IBA 11.6.3.1, "CQ Error"): a completion that its CQ could
 * not take is lost, and the CQ stays in error (verbs/cq.c raised
 * IBV_EVENT_CQ_ERR on it).  Every QP that completes into such a CQ goes to
 * the error state, as rxe puts the responder that met the overflow there
 * (its class G error), with IBV_EVENT_QP_FATAL, which is how rdma-core
 * tells a consumer "a QP went to the error state" and what ConnectX
 * reports for a QP whose CQ overran.
 *
 * uroce_cq_push only flags the device: its callers are in the middle of
 * a queue (the completer between a WQE's completion and the tail's
 * advance), where flushing that queue would break it.  The timer pass
 * runs this with no QP mid-update.
 */
#include "dev.h"

static bool on_overrun_cq(const struct uroce_qp *qp)
{
	return (qp->scq && qp->scq->overrun) || (qp->rcq && qp->rcq->overrun);
}

void uroce_cq_overrun_soon(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->lock);
	dev->prog.cq_overrun_pending = true;
	uroce_timer_arm(dev, uroce_now_ns());
}

void uroce_cq_overrun_sweep(struct uroce_dev *dev)
{
	uint32_t i;

	uroce_assert_held(&dev->lock);
	dev->prog.cq_overrun_pending = false;
	for (i = 0; i < dev->obj.nqps; i++) {
		struct uroce_qp *qp = dev->obj.live[i];
		enum ibv_qp_state st;
		struct ibv_async_event ev;

		if (!on_overrun_cq(qp))
			continue;
		st = qp->attr.qp_state;
		if (st == IBV_QPS_RESET || st == IBV_QPS_ERR)
			continue;
		uroce_log_qp(UROCE_LOG_WARN, qp, -1, "its CQ overran");
		uroce_qp_to_error(qp);
		ev = (struct ibv_async_event){
			.element.qp = uqp_ibqp(qp),
			.event_type = IBV_EVENT_QP_FATAL,
		};
		uroce_async_event(to_uctx(uqp_ibqp(qp)->context), &ev);
	}
}
