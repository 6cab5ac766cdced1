// SPDX-License-Identifier: MIT
/*
 * The private interface our librdmacm uses (include/uroce_private.h):
 * the GSI QP that carries IB CM MADs, moving the device's address, and
 * rsockets' wait on their descriptors and the device's packets at once.
 */
#include <errno.h>
#include <string.h>

#include "uroce.h"
#include "uroce_private.h"

UROCE_EXPORT struct ibv_qp *uroce_gsi_create(struct ibv_pd *pd,
					     struct ibv_cq *send_cq,
					     struct ibv_cq *recv_cq,
					     struct ibv_qp_cap *cap)
{
	struct uroce_dev *dev = ctx_dev(pd->context);
	struct ibv_qp_init_attr_ex init;
	struct ibv_qp_attr attr;
	struct ibv_qp *ibqp;
	uint32_t old;
	int err;

	memset(&init, 0, sizeof(init));
	init.send_cq = send_cq;
	init.recv_cq = recv_cq;
	init.cap = *cap;
	init.qp_type = IBV_QPT_UD;
	init.comp_mask = IBV_QP_INIT_ATTR_PD;
	init.pd = pd;
	ibqp = uroce_create_qp_ex(pd->context, &init);
	if (!ibqp)
		return NULL;
	*cap = init.cap;

	/* renumber it QP1: the number CM MADs are addressed to */
	pthread_mutex_lock(&dev->lock);
	old = ibqp->qp_num;
	if (dev->obj.qp_tbl[UROCE_QP_GSI_SLOT]) {
		uroce_dev_unlock(dev);
		ibv_destroy_qp(ibqp);
		errno = EBUSY;
		return NULL;
	}
	/* stored atomically: uroce_qp_has_gsi reads without the lock */
	__atomic_store_n(&dev->obj.qp_tbl[uroce_qp_index(dev, old)], NULL,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&dev->obj.qp_tbl[UROCE_QP_GSI_SLOT], to_uqp(ibqp),
			 __ATOMIC_RELAXED);
	ibqp->qp_num = UROCE_GSI_QPN;
	ibqp->handle = UROCE_GSI_QPN;
	uroce_dev_unlock(dev);

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qkey = UROCE_GSI_QKEY;
	err = ibv_modify_qp(ibqp, &attr,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_QKEY);
	if (!err) {
		attr.qp_state = IBV_QPS_RTR;
		err = ibv_modify_qp(ibqp, &attr, IBV_QP_STATE);
	}
	if (!err) {
		attr.qp_state = IBV_QPS_RTS;
		attr.sq_psn = 0;
		err = ibv_modify_qp(ibqp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	if (err) {
		ibv_destroy_qp(ibqp);
		errno = err;
		return NULL;
	}
	return ibqp;
}

UROCE_EXPORT int uroce_dev_set_addr(struct ibv_context *ctx,
				    const struct sockaddr *addr)
{
	struct uroce_dev *dev = ctx_dev(ctx);
	int err;

	if (!addr)
		return EINVAL;
	if (dev->obj.nqps)
		return EBUSY;
	err = uroce_net_rebind(dev, addr);
	if (err)
		return -err;
	/* the LID follows the address, as the GID does */
	err = uroce_lid_claim(dev);
	if (err)
		uroce_log(UROCE_LOG_WARN,
			  "no port LID for the new address: "
			  "%s",
			  strerror(-err));
	uroce_shm_set_addr(dev);
	return 0;
}

UROCE_EXPORT int uroce_dev_get_addr(struct ibv_context *ctx,
				    struct sockaddr_storage *addr)
{
	struct uroce_dev *dev = ctx_dev(ctx);

	pthread_mutex_lock(&dev->lock);
	*addr = dev->net.local;
	uroce_dev_unlock(dev);
	return 0;
}

UROCE_EXPORT uint32_t uroce_dev_id_prefix(struct ibv_context *ctx)
{
	return uroce_share_slot(ctx_dev(ctx)) << 24;
}

UROCE_EXPORT void uroce_dev_rx_drain(struct ibv_context *ctx)
{
	uroce_progress_drain(ctx_dev(ctx));
}

UROCE_EXPORT int uroce_dev_qp_unpolled(struct ibv_context *ctx, uint32_t qpn)
{
	struct uroce_dev *dev = ctx_dev(ctx);
	struct uroce_qp *qp;
	bool found = false;

	pthread_mutex_lock(&dev->lock);
	qp = uroce_qp_lookup(dev, qpn);
	if (qp && qp->scq)
		found = uroce_cq_holds(qp->scq, qpn);
	if (qp && !found && qp->rcq && qp->rcq != qp->scq)
		found = uroce_cq_holds(qp->rcq, qpn);
	uroce_dev_unlock(dev);
	return found;
}

UROCE_EXPORT void uroce_dev_send_acks(struct ibv_context *ctx)
{
	uroce_ack_release_unlocked(ctx_dev(ctx));
}

UROCE_EXPORT int uroce_dev_listen(struct ibv_context *ctx, uint64_t sid, int on)
{
	return -uroce_share_listen(ctx_dev(ctx), sid, on != 0);
}

UROCE_EXPORT int uroce_dev_poll(struct ibv_context *ctx, struct pollfd *fds,
				nfds_t nfds, int timeout_ms)
{
	return uroce_progress_poll_fds(ctx_dev(ctx), fds, nfds, timeout_ms);
}
