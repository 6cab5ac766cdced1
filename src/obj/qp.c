// SPDX-License-Identifier: MIT
/* The QP table: by QP number, and every live QP packed for walks. */
#include "dev.h"

/* the QPN range idx (a table index) is in */
static struct uroce_qpn_range *range_of(struct uroce_dev *dev, uint32_t idx)
{
	return &dev->obj.qpn_range[dev->obj.qpn_mask == UROCE_QPN_MASK ? 0 :
									 idx >> 16];
}

uint32_t uroce_qp_index(const struct uroce_dev *dev, uint32_t qpn)
{
	uint8_t r;

	if (dev->obj.qpn_mask == UROCE_QPN_MASK)
		return qpn % UROCE_MAX_QP;
	r = dev->obj.range_of_slot[(qpn >> 16) & 0xff];
	return r == 0xff ? UINT32_MAX : (uint32_t)r << 16 | (qpn & 0xffff);
}

struct uroce_qp *uroce_qp_lookup(struct uroce_dev *dev, uint32_t qpn)
{
	uint32_t i = uroce_qp_index(dev, qpn);
	struct uroce_qp *qp = i < UROCE_MAX_QP ? dev->obj.qp_tbl[i] : NULL;

	uroce_assert_held(&dev->lock);
	return qp && uqp_ibqp(qp)->qp_num == qpn ? qp : NULL;
}

bool uroce_qp_has_gsi(struct uroce_dev *dev)
{
	return __atomic_load_n(&dev->obj.qp_tbl[UROCE_QP_GSI_SLOT],
			       __ATOMIC_RELAXED) != NULL;
}

void uroce_qp_table_add(struct uroce_dev *dev, struct uroce_qp *qp, uint32_t qpn)
{
	uint32_t idx = uroce_qp_index(dev, qpn);

	uroce_assert_held(&dev->lock);
	__atomic_store_n(&dev->obj.qp_tbl[idx], qp, __ATOMIC_RELAXED);
	range_of(dev, idx)->n++;
	qp->live_idx = dev->obj.nqps;
	dev->obj.live[dev->obj.nqps++] = qp;
	qp->timed_idx = UINT32_MAX;
	uqp_ibqp(qp)->qp_num = qpn;
}

void uroce_qp_table_del(struct uroce_dev *dev, struct uroce_qp *qp)
{
	struct uroce_qp *last = dev->obj.live[--dev->obj.nqps];
	uint32_t slot = uroce_qp_index(dev, uqp_ibqp(qp)->qp_num);

	uroce_assert_held(&dev->lock);
	__atomic_store_n(&dev->obj.qp_tbl[slot], NULL, __ATOMIC_RELAXED);
	range_of(dev, slot)->n--;
	/* 0 means never: a time that rounds to it is taken as 1 ms */
	dev->obj.qp_freed[slot].qpn = uqp_ibqp(qp)->qp_num;
	dev->obj.qp_freed[slot].ms = (uint32_t)(uroce_now_ns() / 1000000) | 1;
	last->live_idx = qp->live_idx;
	dev->obj.live[qp->live_idx] = last;
	uroce_qp_timed_del(dev, qp);
}

void uroce_qp_timed_add(struct uroce_dev *dev, struct uroce_qp *qp)
{
	uroce_assert_held(&dev->lock);
	if (qp->timed_idx != UINT32_MAX)
		return;
	qp->timed_idx = dev->obj.ntimed;
	dev->obj.timed[dev->obj.ntimed++] = qp;
}

void uroce_qp_timed_del(struct uroce_dev *dev, struct uroce_qp *qp)
{
	struct uroce_qp *last;

	uroce_assert_held(&dev->lock);
	if (qp->timed_idx == UINT32_MAX)
		return;
	last = dev->obj.timed[--dev->obj.ntimed];
	last->timed_idx = qp->timed_idx;
	dev->obj.timed[qp->timed_idx] = last;
	qp->timed_idx = UINT32_MAX;
}
