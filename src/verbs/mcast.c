// SPDX-License-Identifier: MIT
/*
 * UD multicast: ibv_attach_mcast / ibv_detach_mcast and delivery of a
 * multicast packet to every QP attached to its group (IBA 10.5.2.3).
 *
 * The device keeps one group entry per multicast GID with at least one
 * QP attached, each with its own receive socket (net/mcast.c).  Errors
 * follow the kernel's uverbs: attaching a QP twice to a group succeeds,
 * detaching one that is not attached is EINVAL, and a QP that is still
 * attached cannot be destroyed (EBUSY).  Only UD QPs and multicast GIDs
 * may attach (EINVAL), as ib_attach_mcast requires.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uroce.h"

bool uroce_gid_is_mcast(const union ibv_gid *gid)
{
	struct sockaddr_storage ss;

	return !uroce_addr_from_gid(gid, &ss) && uroce_addr_is_mcast(&ss);
}

static int grp_index(const struct uroce_mcast_grp *grp,
		     const struct uroce_qp *qp)
{
	uint32_t i;

	for (i = 0; i < grp->nqps; i++)
		if (grp->qps[i] == qp)
			return (int)i;
	return -1;
}

static uint32_t total_attached(struct uroce_dev *dev)
{
	struct uroce_mcast_grp *grp;
	uint32_t n = 0;

	for (grp = dev->obj.mcast; grp; grp = grp->next)
		n += grp->nqps;
	return n;
}

static int check(struct ibv_qp *ibqp, const union ibv_gid *gid)
{
	if (!ibqp || !gid)
		return EINVAL;
	if (ibqp->qp_type != IBV_QPT_UD || !uroce_gid_is_mcast(gid))
		return EINVAL;
	return 0;
}

/* A new group: its socket is opened without the engine lock (it may
 * take a while); rx_lock keeps out anyone else changing the list. */
static int grp_add(struct uroce_dev *dev, const union ibv_gid *gid,
		   struct uroce_mcast_grp **out)
{
	struct uroce_mcast_grp *grp;
	int err;

	if (dev->obj.nmcast >= UROCE_MAX_MCAST_GRP)
		return ENOMEM;
	grp = calloc(1, sizeof(*grp));
	if (!grp)
		return ENOMEM;
	grp->gid = *gid;
	grp->fd = -1;
	if (uroce_addr_from_gid(gid, &grp->addr)) {
		free(grp);
		return EINVAL;
	}
	err = uroce_mcast_open(dev, grp);
	if (err) {
		free(grp);
		return -err;
	}
	pthread_mutex_lock(&dev->lock);
	grp->next = dev->obj.mcast;
	dev->obj.mcast = grp;
	dev->obj.nmcast++;
	uroce_dev_unlock(dev);
	*out = grp;
	return 0;
}

UROCE_EXPORT int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
				  uint16_t lid)
{
	struct uroce_qp *qp;
	struct uroce_dev *dev;
	struct uroce_mcast_grp *grp;
	int err = check(ibqp, gid);

	(void)lid; /* RoCE: no LIDs, the GID is the address */
	if (err)
		return err;
	qp = to_uqp(ibqp);
	dev = qp->dev;
	pthread_mutex_lock(&dev->prog.rx_lock);
	grp = uroce_mcast_grp_find(dev, gid);
	if (grp && grp_index(grp, qp) >= 0)
		goto out;
	if (grp && grp->nqps >= UROCE_MAX_MCAST_QP_ATTACH) {
		err = ENOMEM;
		goto out;
	}
	if (total_attached(dev) >= UROCE_MAX_TOTAL_MCAST_QP_ATTACH) {
		err = ENOMEM;
		goto out;
	}
	if (!grp) {
		err = grp_add(dev, gid, &grp);
		if (err)
			goto out;
	}
	pthread_mutex_lock(&dev->lock);
	grp->qps[grp->nqps++] = qp;
	qp->nmcast++;
	uroce_dev_unlock(dev);
out:
	pthread_mutex_unlock(&dev->prog.rx_lock);
	return err;
}

UROCE_EXPORT int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
				  uint16_t lid)
{
	struct uroce_mcast_grp *grp, **pp;
	struct uroce_qp *qp;
	struct uroce_dev *dev;
	int err = check(ibqp, gid), i;

	(void)lid;
	if (err)
		return err;
	qp = to_uqp(ibqp);
	dev = qp->dev;
	pthread_mutex_lock(&dev->prog.rx_lock);
	pthread_mutex_lock(&dev->lock);
	grp = uroce_mcast_grp_find(dev, gid);
	i = grp ? grp_index(grp, qp) : -1;
	if (i < 0) {
		err = EINVAL;
		grp = NULL;
		goto out;
	}
	grp->qps[i] = grp->qps[--grp->nqps];
	qp->nmcast--;
	if (grp->nqps) {
		grp = NULL;
		goto out;
	}
	for (pp = &dev->obj.mcast; *pp != grp; pp = &(*pp)->next)
		;
	*pp = grp->next;
	dev->obj.nmcast--;
out:
	uroce_dev_unlock(dev);
	if (grp) {
		uroce_mcast_close(dev, grp);
		free(grp);
	}
	pthread_mutex_unlock(&dev->prog.rx_lock);
	return err;
}
