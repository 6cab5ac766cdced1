// SPDX-License-Identifier: MIT
/*
 * The process's one device: made at the first uroce_dev_get, with its
 * identity (node GUID, names) and empty object tables.  Bringing it up on
 * the network is the verbs front's (uroce_dev_up, verbs/device.c).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev.h"

static struct uroce_dev the_dev;
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;
static int dev_init_err;

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * A node GUID that stays the same for the life of the process and differs
 * between processes: the host's identity and our pid, hashed, marked as a
 * locally administered EUI-64 so it never collides with a vendor OUI.
 */
static uint64_t make_guid(void)
{
	uint64_t h = 0xcbf29ce484222325ull;
	char host[256] = "";
	char id[64];
	pid_t pid = getpid();
	ssize_t n = -1;
	int fd;

	fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, id, sizeof(id));
		close(fd);
	}
	if (n > 0)
		h = fnv1a(h, id, (size_t)n);
	gethostname(host, sizeof(host) - 1);
	h = fnv1a(h, host, strlen(host));
	h = fnv1a(h, &pid, sizeof(pid));

	h &= ~(0xffull << 56);
	h |= 0x02ull << 56;
	return h;
}

static void dev_init(void)
{
	struct uroce_dev *dev = &the_dev;
	struct ibv_device *ibdev = &dev->ibdev;

	pthread_mutex_init(&dev->lock, NULL);
	pthread_mutex_init(&dev->tx.tx_lock, NULL);
	pthread_mutex_init(&dev->tx.txq_lock, NULL);
	pthread_mutex_init(&dev->prog.rx_lock, NULL);
	dev->net.sock = -1;
	dev->prog.epfd = -1;
	dev->prog.sock_epfd = -1;
	dev->prog.app_epfd = -1;
	dev->prog.timerfd = -1;
	dev->prog.wakefd = -1;
	dev->prog.lookfd = -1;
	dev->port.lid_fd = -1;
	dev->net.active_mtu = IBV_MTU_1024;
	/* a device alone on its address; net/udp.c narrows it when shared */
	dev->obj.qpn_mask = UROCE_QPN_MASK;
	dev->obj.qpn_range[0].next = UROCE_QPN_FIRST;
	dev->obj.nranges = 1;
	dev->stats.cnt = dev->stats.cnt_private;
	dev->guid = htobe64(make_guid());

	dev->obj.qp_tbl = calloc(UROCE_MAX_QP, sizeof(*dev->obj.qp_tbl));
	dev->obj.live = calloc(UROCE_MAX_QP, sizeof(*dev->obj.live));
	dev->obj.timed = calloc(UROCE_MAX_QP, sizeof(*dev->obj.timed));
	dev->obj.qp_freed = calloc(UROCE_MAX_QP, sizeof(*dev->obj.qp_freed));
	dev->obj.mr_tbl = calloc(UROCE_MAX_MR, sizeof(*dev->obj.mr_tbl));
	dev->obj.mr_last_key = calloc(UROCE_MAX_MR,
				      sizeof(*dev->obj.mr_last_key));
	if (!dev->obj.qp_tbl || !dev->obj.live || !dev->obj.timed ||
	    !dev->obj.mr_tbl || !dev->obj.mr_last_key || !dev->obj.qp_freed) {
		free(dev->obj.live);
		dev->obj.live = NULL;
		free(dev->obj.timed);
		dev->obj.timed = NULL;
		free(dev->obj.qp_freed);
		dev->obj.qp_freed = NULL;
		free(dev->obj.mr_last_key);
		dev->obj.mr_last_key = NULL;
		free(dev->obj.qp_tbl);
		free(dev->obj.mr_tbl);
		dev->obj.qp_tbl = NULL;
		dev->obj.mr_tbl = NULL;
		dev_init_err = ENOMEM;
		return;
	}

	ibdev->node_type = IBV_NODE_CA;
	ibdev->transport_type = IBV_TRANSPORT_IB;
	snprintf(ibdev->name, sizeof(ibdev->name), "%s", UROCE_DEV_NAME);
	snprintf(ibdev->dev_name, sizeof(ibdev->dev_name), "uverbs0");
	snprintf(ibdev->dev_path, sizeof(ibdev->dev_path),
		 "/sys/class/infiniband_verbs/uverbs0");
	snprintf(ibdev->ibdev_path, sizeof(ibdev->ibdev_path),
		 "/sys/class/infiniband/%s", UROCE_DEV_NAME);
}

/* The process's device, or NULL with errno set if it could not be made. */
struct uroce_dev *uroce_dev_get(void)
{
	pthread_once(&dev_once, dev_init);
	if (dev_init_err) {
		errno = dev_init_err;
		return NULL;
	}
	return &the_dev;
}
