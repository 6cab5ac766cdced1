// SPDX-License-Identifier: MIT
/* The QP table: by QP number, and every live QP packed for walks. */
#include "dev.h"

struct uroce_qp *uroce_qp_lookup(struct uroce_dev *dev, uint32_t qpn)
{
	struct uroce_qp *qp = dev->obj.qp_tbl[qpn % UROCE_MAX_QP];

	return qp && uqp_ibqp(qp)->qp_num == qpn ? qp : NULL;
}

void uroce_qp_table_add(struct uroce_dev *dev, struct uroce_qp *qp,
			uint32_t qpn)
{
	dev->obj.qp_tbl[qpn % UROCE_MAX_QP] = qp;
	qp->live_idx = dev->obj.nqps;
	dev->obj.live[dev->obj.nqps++] = qp;
	uqp_ibqp(qp)->qp_num = qpn;
}

void uroce_qp_table_del(struct uroce_dev *dev, struct uroce_qp *qp)
{
	struct uroce_qp *last = dev->obj.live[--dev->obj.nqps];

	dev->obj.qp_tbl[uqp_ibqp(qp)->qp_num % UROCE_MAX_QP] = NULL;
	last->live_idx = qp->live_idx;
	dev->obj.live[qp->live_idx] = last;
}
