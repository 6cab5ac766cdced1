// SPDX-License-Identifier: MIT
/*
 * Delivery of a multicast packet to every QP attached to its group
 * (IBA 10.5.2.3); attaching and detaching are the verbs front's
 * (verbs/mcast.c).
 */
#include <string.h>

#include "dev.h"

/* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB: a send of such a QP of ours
 * reaches none of our own QPs. */
static bool blocked_self(struct uroce_dev *dev, struct uroce_pkt *pkt)
{
	const struct sockaddr_storage *a = &pkt->src, *b = &dev->net.local;
	struct uroce_qp *sender;

	if (a->ss_family != b->ss_family ||
	    (a->ss_family == AF_INET ?
		     ((const struct sockaddr_in *)a)->sin_addr.s_addr !=
			     ((const struct sockaddr_in *)b)->sin_addr.s_addr :
		     memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			    &((const struct sockaddr_in6 *)b)->sin6_addr, 16)))
		return false;
	sender = uroce_qp_lookup(dev,
				 deth_sqp(pkt->bth +
					  pkt->info->offset[UROCE_HDR_DETH]));
	return sender && sender->block_self_mcast;
}

void uroce_mcast_rx(struct uroce_dev *dev, struct uroce_pkt *pkt)
{
	struct uroce_mcast_grp *grp;
	union ibv_gid gid;
	uint32_t i;

	/* only UD SENDs to the multicast QPN may use a group (IBA 10.5.2.3) */
	if (pkt->qpn != UROCE_MCAST_QPN || !(pkt->mask & UROCE_M_UD) ||
	    !uroce_addr_is_mcast(pkt->dst)) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return;
	}
	uroce_gid_from_addr(pkt->dst, &gid);
	pthread_mutex_lock(&dev->lock);
	grp = uroce_mcast_grp_find(dev, &gid);
	if (!grp || !grp->nqps) {
		uroce_count(dev, UROCE_CNT_DROP_MCAST_NO_GROUP, 1);
		goto out;
	}
	uroce_count(dev, UROCE_CNT_RX_MCAST_PKTS, 1);
	if (blocked_self(dev, pkt))
		goto out;
	/* each QP gets its own copy: its own receive WQE, Q_Key check and
	 * completion; one without a receive posted drops its copy */
	for (i = 0; i < grp->nqps; i++) {
		struct uroce_qp *qp = grp->qps[i];

		if (qp->attr.qp_state < IBV_QPS_RTR ||
		    qp->attr.qp_state == IBV_QPS_ERR) {
			uroce_count(dev, UROCE_CNT_DROP_BAD_STATE, 1);
			continue;
		}
		qp->cnt_rx_pkts++;
		uroce_resp_rx(qp, pkt);
	}
out:
	uroce_dev_unlock(dev);
}
