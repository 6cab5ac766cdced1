// SPDX-License-Identifier: MIT
/* The QP table: lookups by QP number (inserts are the verbs front's). */
#include "dev.h"

struct uroce_qp *uroce_qp_lookup(struct uroce_dev *dev, uint32_t qpn)
{
	struct uroce_qp *qp = dev->obj.qp_tbl[qpn % UROCE_MAX_QP];

	return qp && uqp_ibqp(qp)->qp_num == qpn ? qp : NULL;
}
