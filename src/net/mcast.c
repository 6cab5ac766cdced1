// SPDX-License-Identifier: MIT
/*
 * Multicast packet IO.  RoCE v2 carries a multicast GID as an IP
 * multicast address (an IPv4 group 239.x.y.z is the GID ::ffff:239.x.y.z),
 * so a group is an IP multicast group on UDP port 4791.
 *
 * Receive: the device's own socket is bound to its unicast address and
 * never sees multicast, so each joined group gets a socket bound to
 * (group, 4791) with SO_REUSEADDR, a member of the group on the interface
 * that holds the device's address.  The kernel hands every such socket on
 * the host its own copy, so any number of processes can receive a group.
 * Loopback has no MULTICAST flag by default and needs none: joining on
 * lo and sending out of lo work unprivileged (docs/transport.md, "Multicast").
 *
 * Transmit: the device's socket sends to the group address; the interface
 * is the one holding our address (IP_MULTICAST_IF) and the kernel loops a
 * copy back to this host's members (IP_MULTICAST_LOOP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dev.h"

#define MC_BATCH    8
#define MC_BUF_SIZE (UROCE_MAX_HDR_LEN + 4096 + 8 + UROCE_ICRC_LEN)
#define MC_TTL	    64 /* the hop limit rdma_cm gives RoCE v2 groups */
#define MC_SOCK_BUF (8 << 20)

/* The index of the interface that holds addr, 0 if none does. */
static unsigned int ifindex_of(const struct sockaddr_storage *addr)
{
	struct ifaddrs *ifa, *it;
	unsigned int idx = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (it = ifa; it && !idx; it = it->ifa_next) {
		if (!it->ifa_addr || it->ifa_addr->sa_family != addr->ss_family)
			continue;
		if (addr->ss_family == AF_INET ?
			    ((struct sockaddr_in *)it->ifa_addr)->sin_addr.s_addr ==
				    ((const struct sockaddr_in *)addr)
					    ->sin_addr.s_addr :
			    !memcmp(&((struct sockaddr_in6 *)it->ifa_addr)->sin6_addr,
				    &((const struct sockaddr_in6 *)addr)->sin6_addr,
				    16))
			idx = if_nametoindex(it->ifa_name);
	}
	freeifaddrs(ifa);
	return idx;
}

void uroce_mcast_tx_setup(int fd, const struct sockaddr_storage *addr)
{
	int ttl = MC_TTL, one = 1;

	if (addr->ss_family == AF_INET) {
		struct ip_mreqn mr;

		/* by address: 127.0.0.N is on lo without being configured */
		memset(&mr, 0, sizeof(mr));
		mr.imr_address = ((const struct sockaddr_in *)addr)->sin_addr;
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr));
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl));
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one));
	} else {
		unsigned int idx = ifindex_of(addr);

		if (idx)
			setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &idx,
				   sizeof(idx));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &ttl,
			   sizeof(ttl));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &one,
			   sizeof(one));
	}
}

static int join(int fd, const struct uroce_dev *dev,
		const struct uroce_mcast_grp *grp)
{
	if (grp->addr.ss_family == AF_INET) {
		struct ip_mreqn mr;

		memset(&mr, 0, sizeof(mr));
		mr.imr_multiaddr =
			((const struct sockaddr_in *)&grp->addr)->sin_addr;
		mr.imr_address =
			((const struct sockaddr_in *)&dev->net.local)->sin_addr;
		return setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
				  sizeof(mr));
	} else {
		struct ipv6_mreq mr;

		memset(&mr, 0, sizeof(mr));
		mr.ipv6mr_multiaddr =
			((const struct sockaddr_in6 *)&grp->addr)->sin6_addr;
		mr.ipv6mr_interface = ifindex_of(&dev->net.local);
		return setsockopt(fd, IPPROTO_IPV6, IPV6_ADD_MEMBERSHIP, &mr,
				  sizeof(mr));
	}
}

static int grp_ready(struct uroce_dev *dev, struct uroce_watcher *w);

/* the watcher slot of grp, or a free one for grp == NULL (rx_lock) */
static struct uroce_mcast_watch *grp_slot(struct uroce_dev *dev,
					  const struct uroce_mcast_grp *grp)
{
	size_t i;

	uroce_assert_held(&dev->prog.rx_lock);
	for (i = 0; i < UROCE_ARRAY_SIZE(dev->net.mcast_w); i++)
		if (dev->net.mcast_w[i].grp == grp)
			return &dev->net.mcast_w[i];
	return NULL;
}

/* (rx_lock held: the attach that makes the group) */
int uroce_mcast_open(struct uroce_dev *dev, struct uroce_mcast_grp *grp)
{
	struct uroce_mcast_watch *slot = grp_slot(dev, NULL);
	int fam = grp->addr.ss_family, one = 1, buf = MC_SOCK_BUF, fd, err;
	socklen_t len = uroce_sa_len(&grp->addr);

	uroce_assert_held(&dev->prog.rx_lock);
	if (fam != dev->net.family)
		return -EINVAL;
	fd = uroce_socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* every process of the host that joins binds the same address */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		goto fail;
	if (fam == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)))
		goto fail;
	if (bind(fd, (const struct sockaddr *)&grp->addr, len) ||
	    join(fd, dev, grp))
		goto fail;
	/* a burst to the group waits here until the progress thread runs */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (!slot) {
		close(fd);
		return -ENOSPC;
	}
	slot->w.fn = grp_ready;
	err = uroce_watcher_add(dev->prog.epfd, &slot->w, fd, EPOLLIN);
	if (err) {
		close(fd);
		return err;
	}
	slot->grp = grp;
	grp->fd = fd;
	return 0;
fail:
	err = -errno;
	close(fd);
	return err;
}

/* (rx_lock held: the detach that frees the group) */
void uroce_mcast_close(struct uroce_dev *dev, struct uroce_mcast_grp *grp)
{
	struct uroce_mcast_watch *slot;

	uroce_assert_held(&dev->prog.rx_lock);
	if (grp->fd < 0)
		return;
	slot = grp_slot(dev, grp);
	if (slot) {
		uroce_watcher_del(dev->prog.epfd, &slot->w);
		slot->grp = NULL;
	}
	close(grp->fd); /* leaves the group */
	grp->fd = -1;
}

/* Receive buffers: used under rx_lock only. */
static uint8_t mc_buf[MC_BATCH][MC_BUF_SIZE];

static int poll_grp(struct uroce_dev *dev, struct uroce_mcast_grp *grp)
{
	struct sockaddr_storage src[MC_BATCH];
	struct mmsghdr msgs[MC_BATCH];
	struct iovec iov[MC_BATCH];
	int i, n;

	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < MC_BATCH; i++) {
		iov[i].iov_base = mc_buf[i];
		iov[i].iov_len = MC_BUF_SIZE;
		msgs[i].msg_hdr.msg_name = &src[i];
		msgs[i].msg_hdr.msg_namelen = sizeof(src[i]);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	n = recvmmsg(grp->fd, msgs, MC_BATCH, MSG_DONTWAIT, NULL);
	for (i = 0; i < n; i++) {
		struct uroce_rx_seg seg = { mc_buf[i], msgs[i].msg_len, 0 };

		if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
			uroce_count(dev, UROCE_CNT_DROP_TRUNCATED, 1);
			continue;
		}
		/* the socket is bound to the group: that is where it went */
		uroce_tap_rx(dev, mc_buf[i], msgs[i].msg_len, &src[i],
			     &grp->addr, 0);
		dev->net.rx->recv_train(dev, &seg, 1, &src[i], &grp->addr);
	}
	return n;
}

/* a group's socket is readable: receive and dispatch what waits there
 * (the group may have been closed since epoll said so: slot->grp) */
static int grp_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct uroce_mcast_watch *slot = (struct uroce_mcast_watch *)w;

	pthread_mutex_lock(&dev->prog.rx_lock);
	if (slot->grp)
		while (poll_grp(dev, slot->grp) == MC_BATCH)
			;
	pthread_mutex_unlock(&dev->prog.rx_lock);
	return 0;
}
