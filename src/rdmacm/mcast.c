// SPDX-License-Identifier: MIT
/*
 * Multicast on RDMA_PS_UDP ids, as the kernel's rdma_cm does it for RoCE:
 * no SA, the MGID is the IP multicast address (an IPv4 group as its
 * IPv4-mapped GID, RoCE v2), and the join completes at once with
 * RDMA_CM_EVENT_MULTICAST_JOIN carrying an AH to the group, QPN 0xFFFFFF
 * and RDMA_UDP_QKEY.  As rdma-core's librdmacm does, the id's QP is
 * attached to the group (ibv_attach_mcast) unless the join is send-only,
 * and detached when the id leaves.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

#define MC_QPN	     0xffffff
#define MC_HOP_LIMIT 64 /* what the kernel gives a RoCE v2 group */

struct cm_mc {
	struct cm_mc *next;
	union ibv_gid mgid;
	void *context;
	bool attached; /* id->qp is attached to mgid */
};

/* The MGID of a multicast address; false if addr is none. */
static bool mgid_of(const struct sockaddr *addr, union ibv_gid *mgid)
{
	const uint8_t *b;

	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return false;
	cm_gid_from_sa(addr, mgid);
	b = mgid->raw;
	if (b[0] == 0xff)
		return true;
	/* IPv4-mapped 224.0.0.0/4 */
	return !memcmp(b, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) &&
	       (b[12] & 0xf0) == 0xe0;
}

static struct cm_mc **find(struct cm_id *ci, const union ibv_gid *mgid)
{
	struct cm_mc **pp;

	for (pp = &ci->mcs; *pp; pp = &(*pp)->next)
		if (!memcmp((*pp)->mgid.raw, mgid->raw, 16))
			return pp;
	return NULL;
}

static void fill_event(struct cm_id *ci, struct cm_event *e,
		       const struct cm_mc *mc)
{
	struct rdma_ud_param *ud = &e->ev.param.ud;

	ud->private_data = mc->context; /* rdma-core hands the join's back */
	ud->ah_attr.is_global = 1;
	ud->ah_attr.port_num = 1;
	ud->ah_attr.grh.dgid = mc->mgid;
	ud->ah_attr.grh.sgid_index = 0;
	ud->ah_attr.grh.hop_limit = MC_HOP_LIMIT;
	ud->ah_attr.grh.traffic_class = ci->tos;
	ud->qp_num = MC_QPN;
	ud->qkey = RDMA_UDP_QKEY;
}

CM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				     struct rdma_cm_join_mc_attr_ex *attr,
				     void *context)
{
	bool is_sync;
	struct cm_id *ci = to_cid(id);
	struct cm_event *e;
	struct cm_mc *mc;
	union ibv_gid mgid;
	int err = 0;

	if (!id || !attr)
		return cm_set_errno(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cm_set_errno(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !attr->addr ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return cm_set_errno(EINVAL);
	/* the kernel: UD ids only, and none that is not a group (a zero
	 * address included) */
	if (id->qp_type != IBV_QPT_UD || !mgid_of(attr->addr, &mgid))
		return cm_set_errno(EINVAL);

	pthread_mutex_lock(&cm.lock);
	/* the kernel's rdma_join_multicast: after bind or resolve_addr */
	if (ci->state != CM_BOUND && ci->state != CM_ADDR_RESOLVED) {
		err = EINVAL;
		goto out;
	}
	if (find(ci, &mgid)) {
		err = EADDRINUSE;
		goto out;
	}
	mc = calloc(1, sizeof(*mc));
	if (!mc) {
		err = ENOMEM;
		goto out;
	}
	mc->mgid = mgid;
	mc->context = context;
	if (id->qp && attr->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
		err = ibv_attach_mcast(id->qp, &mgid, 0);
		if (err) {
			free(mc);
			goto out;
		}
		mc->attached = true;
	}
	e = cm_event_new(ci, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	if (!e) {
		if (mc->attached)
			ibv_detach_mcast(id->qp, &mgid, 0);
		free(mc);
		err = ENOMEM;
		goto out;
	}
	mc->next = ci->mcs;
	ci->mcs = mc;
	fill_event(ci, e, mc);
	cm_event_queue(e);
out:
	is_sync = ci->sync;
	pthread_mutex_unlock(&cm.lock);
	if (err)
		return cm_set_errno(err);
	return cm_sync_wait(ci, is_sync);
}

CM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				  void *context)
{
	struct rdma_cm_join_mc_attr_ex attr = {
		.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
			     RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
		.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER,
		.addr = addr,
	};

	return rdma_join_multicast_ex(id, &attr, context);
}

/* cm.lock held */
static void mc_free(struct cm_id *ci, struct cm_mc **pp)
{
	struct cm_mc *mc = *pp;

	uroce_assert_held(&cm.lock);
	if (mc->attached && ci->id.qp)
		ibv_detach_mcast(ci->id.qp, &mc->mgid, 0);
	*pp = mc->next;
	free(mc);
}

CM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *ci = to_cid(id);
	union ibv_gid mgid;
	struct cm_mc **pp;

	if (!id || !addr)
		return cm_set_errno(EINVAL);
	if (!mgid_of(addr, &mgid))
		return cm_set_errno(EADDRNOTAVAIL);
	pthread_mutex_lock(&cm.lock);
	pp = find(ci, &mgid);
	if (pp)
		mc_free(ci, pp);
	pthread_mutex_unlock(&cm.lock);
	return pp ? 0 : cm_set_errno(EADDRNOTAVAIL);
}

void cm_mc_leave_all(struct cm_id *ci)
{
	uroce_assert_held(&cm.lock);
	while (ci->mcs)
		mc_free(ci, &ci->mcs);
}

void cm_mc_detach_qp(struct cm_id *ci)
{
	struct cm_mc *mc;

	uroce_assert_held(&cm.lock);
	for (mc = ci->mcs; mc; mc = mc->next) {
		if (mc->attached && ci->id.qp)
			ibv_detach_mcast(ci->id.qp, &mc->mgid, 0);
		mc->attached = false;
	}
}
