// SPDX-License-Identifier: MIT
/*
 * Port LIDs on one host (docs/transport.md, "LIDs").
 *
 * A RoCE port has no LID of its own: its addresses are GIDs.  Programs
 * that exchange only LIDs (qperf without -cm1, ibv_*_pingpong without
 * -g) then build addresses without a GRH, which a RoCE device refuses.
 * Between the uroce devices of one host we can do better: each port gets
 * a LID no other uroce device on the host has, published in its stats
 * segment next to its GID, and a GRH-less address whose DLID is such a
 * LID goes to that device's IP address.  The wire stays RoCE v2.
 *
 * Claiming: the LID's preferred value comes from the bound address (its
 * last 16 bits when they are a unicast LID: 127.0.0.1 is LID 1), and a
 * LID is held by binding an abstract unix socket named after it.  bind()
 * is atomic and the kernel drops the name when the process dies, however
 * it dies, so two processes cannot hold one LID and a dead one holds
 * none.  Abstract names belong to a network namespace while /dev/shm may
 * be shared between namespaces, so a LID that a live segment already
 * names is skipped too, and a lookup that finds two holders fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dev.h"

#define LID_UNICAST_MAX 0xbfff /* IBA 4.1.3: 0xC000 and up are multicast */

static uint16_t preferred_lid(const struct sockaddr_storage *ss)
{
	const uint8_t *a;
	uint32_t h = 2166136261u;
	size_t len, i;
	unsigned int low;

	if (ss->ss_family == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
		len = 4;
	} else {
		a = (const uint8_t *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
		len = 16;
	}
	low = (unsigned int)a[len - 2] << 8 | a[len - 1];
	if (low >= 1 && low <= LID_UNICAST_MAX)
		return (uint16_t)low;
	for (i = 0; i < len; i++) { /* FNV-1a */
		h ^= a[i];
		h *= 16777619u;
	}
	return (uint16_t)(1 + h % LID_UNICAST_MAX);
}

/* A socket holding the name of lid, or a negative errno (-EADDRINUSE:
 * another process of this network namespace holds it). */
static int hold_lid(uint16_t lid)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, n, err;

	/* sun_path[0] = '\0': the abstract namespace, no file */
	n = snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "uroce/lid/%u",
		     (unsigned int)lid);
	fd = uroce_socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			     (size_t)n))) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/*
 * The segments are read once, before the search: many processes sharing
 * an address start their searches at one LID, and a pass over /dev/shm
 * for every LID tried cost each of 128 members of a shared address in
 * one namespace 128 passes over 256 segments when 128 more in another
 * namespace held the LIDs after it.  A segment published after the pass
 * is the race a pass per LID has too (a lookup finds two holders).
 */
int uroce_lid_claim(struct uroce_dev *dev)
{
	uint16_t want = preferred_lid(&dev->net.local), lid;
	uint8_t named[(LID_UNICAST_MAX + 1 + 7) / 8];
	unsigned int i;
	int fd;

	uroce_shm_lids(named, LID_UNICAST_MAX + 1);
	for (i = 0; i < LID_UNICAST_MAX; i++) {
		lid = (uint16_t)(1 + (want - 1 + i) % LID_UNICAST_MAX);
		if (lid == dev->port.lid)
			return 0; /* the one we hold is as good */
		if (named[lid / 8] & (1u << (lid % 8)))
			continue;
		fd = hold_lid(lid);
		if (fd == -EADDRINUSE)
			continue;
		if (fd < 0)
			return fd;
		pthread_mutex_lock(&dev->lock);
		if (dev->port.lid_fd >= 0)
			close(dev->port.lid_fd);
		dev->port.lid_fd = fd;
		__atomic_store_n(&dev->port.lid, lid, __ATOMIC_RELAXED);
		uroce_dev_unlock(dev);
		uroce_log(UROCE_LOG_INFO, "port LID %u (0x%04x)",
			  (unsigned int)lid, (unsigned int)lid);
		return 0;
	}
	return -EADDRNOTAVAIL;
}

int uroce_lid_resolve(struct uroce_dev *dev, uint16_t dlid, union ibv_gid *gid)
{
	bool self;
	int ret;

	if (!dlid || dlid > LID_UNICAST_MAX)
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	self = dlid == dev->port.lid;
	if (self)
		*gid = dev->net.gid;
	uroce_dev_unlock(dev);
	if (self)
		return 0;
	ret = uroce_shm_find_lid(dlid, gid);
	if (ret == -ENOTUNIQ)
		uroce_log(UROCE_LOG_WARN,
			  "LID %u is held by two devices "
			  "(network namespaces sharing /dev/shm?)",
			  (unsigned int)dlid);
	return ret ? -EINVAL : 0;
}

void uroce_lid_release(struct uroce_dev *dev)
{
	if (dev->port.lid_fd >= 0)
		close(dev->port.lid_fd);
	dev->port.lid_fd = -1;
	__atomic_store_n(&dev->port.lid, 0, __ATOMIC_RELAXED);
}
