// SPDX-License-Identifier: MIT
/*
 * The device, its one port and GID, and contexts: ibv_get_device_list
 * through ibv_query_gid_type.
 *
 * There is one device per process.  Listing it costs nothing; opening a
 * context brings up the network side (socket, progress thread) once, and
 * closing the last one, or the process's exit, takes it down again.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"

/* rdma-core's driver.h type, which no public header carries */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

/* struct ibv_port_attr as it was before port_cap_flags2 (verbs.h only
 * declares it); the exported ibv_query_port fills this much. */
struct _compat_ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
};

#define UROCE_PORT		1
#define UROCE_GID_TBL_LEN	1
#define UROCE_PKEY_DEFAULT	0xffff
#define UROCE_PHYS_STATE_LINKUP 5  /* IBA 14.2.5.6 PortPhysicalState */
#define UROCE_SPEED_EDR		32 /* 25.78 Gb/s per lane, as IBTA encodes it */
#define UROCE_WIDTH_4X		2
#define UROCE_HCA_CLOCK_KHZ	1000000 /* completion timestamps are in ns */
#define UROCE_LOCAL_ACK_DELAY	15
#define UROCE_MAX_AH		(1 << 16)

/* how long exit waits for a thread that holds the device (then leaves it) */
#define EXIT_WAIT_NS (100 * 1000 * 1000ull)

static pthread_mutex_t dev_up_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int nctx; /* open contexts (dev_up_lock) */
static pid_t up_pid;	  /* the process that brought it up */

/* Bind the socket and start progress, once; a failure may be retried.
 * dev_up_lock held. */
static int dev_up(struct uroce_dev *dev)
{
	int ret = 0;

	uroce_assert_held(&dev_up_lock);
	if (dev->net_up)
		goto out;
	uroce_cc_init(dev);
	uroce_rx_register(dev);
	uroce_pace_init(dev);
	ret = uroce_net_open(dev);
	if (ret)
		goto out;
	/* without a LID only GRH-less addresses fail, as on any RoCE port */
	ret = uroce_lid_claim(dev);
	if (ret)
		uroce_log(UROCE_LOG_WARN, "no port LID: %s", strerror(-ret));
	uroce_shm_open(dev);
	ret = uroce_progress_start(dev);
	if (ret) {
		uroce_net_close(dev);
		goto out;
	}
	up_pid = getpid();
	dev->been_up = true;
	dev->net_up = true;
out:
	return ret;
}

int uroce_dev_up(struct uroce_dev *dev)
{
	int ret;

	pthread_mutex_lock(&dev_up_lock);
	ret = dev_up(dev);
	pthread_mutex_unlock(&dev_up_lock);
	return ret;
}

int uroce_dev_up_offline(struct uroce_dev *dev, const struct uroce_pkt_io *io,
			 const struct sockaddr_storage *addr, uint32_t rcvbuf)
{
	int ret = 0;

	pthread_mutex_lock(&dev_up_lock);
	if (dev->net_up) {
		ret = -EBUSY;
		goto out;
	}
	uroce_cc_init(dev);
	uroce_rx_register(dev);
	uroce_net_open_offline(dev, io, addr, rcvbuf);
	/* up, with no socket (net.sock < 0) and no progress thread */
	up_pid = getpid();
	dev->been_up = true;
	dev->net_up = true;
out:
	pthread_mutex_unlock(&dev_up_lock);
	return ret;
}

/*
 * Take the device off the network, in the order that loses nothing: no
 * more receiving (net_up), the progress thread stopped, the ACKs it held
 * and the queued packets sent, then the segment, the sockets and the
 * LID.  until bounds the waits for threads that hold the device (exit
 * must not hang on one that holds it for good): if one times out, the
 * rest stays as it is.  At exit the segment is only unlinked (shm.c's
 * destructor): threads still running may count into its mapping.
 * dev_up_lock held.
 */
static void dev_down(struct uroce_dev *dev, const struct timespec *until)
{
	uroce_assert_held(&dev_up_lock);
	if (!dev->net_up || up_pid != getpid())
		return; /* (a forked child has no progress thread) */
	dev->net_up = false;
	if (uroce_progress_stop(dev, until))
		return;
	if (uroce_ack_flush_held(dev, until))
		return;
	uroce_tx_flush(dev);
	if (!until)
		uroce_shm_close(dev);
	/* an application thread that was already receiving is done */
	uroce_rx_pause(dev);
	uroce_net_close(dev);
	uroce_lid_release(dev);
	uroce_rx_resume(dev);
}

__attribute__((destructor)) static void dev_down_at_exit(void)
{
	struct uroce_dev *dev = uroce_dev_get();
	struct timespec until;

	if (!dev || !dev->net_up)
		return;
	uroce_deadline_after(&until, EXIT_WAIT_NS);
	if (pthread_mutex_timedlock(&dev_up_lock, &until))
		return;
	dev_down(dev, &until);
	pthread_mutex_unlock(&dev_up_lock);
}

static struct uroce_dev *ibdev_dev(struct ibv_device *device)
{
	struct uroce_dev *dev = uroce_dev_get();

	if (!dev || device != &dev->ibdev)
		return NULL;
	return dev;
}

/* ---- device list ---- */

UROCE_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct uroce_dev *dev = uroce_dev_get();
	struct ibv_device **list;

	if (num_devices)
		*num_devices = 0;
	if (!dev)
		return NULL;
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = &dev->ibdev;
	if (num_devices)
		*num_devices = 1;
	return list;
}

UROCE_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

UROCE_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

UROCE_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct uroce_dev *dev = ibdev_dev(device);

	return dev ? dev->guid : 0;
}

UROCE_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return ibdev_dev(device) ? 0 : -1;
}

/* ---- context ---- */

static int query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values)
{
	if (values->comp_mask & ~IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK)
		clock_gettime(CLOCK_MONOTONIC, &values->raw_clock);
	return 0;
}

/* free a context; the last one takes the device down */
static void close_ctx(struct uroce_context *uctx)
{
	struct uroce_dev *dev = uctx->dev;

	free(uctx);
	pthread_mutex_lock(&dev_up_lock);
	if (!--nctx)
		dev_down(dev, NULL);
	pthread_mutex_unlock(&dev_up_lock);
}

UROCE_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct uroce_dev *dev = ibdev_dev(device);
	struct uroce_context *uctx;
	struct verbs_context *vctx;
	struct ibv_context *ctx;
	int ret;

	if (!dev) {
		errno = ENODEV;
		return NULL;
	}
	uctx = calloc(1, sizeof(*uctx));
	if (!uctx) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&dev_up_lock);
	ret = dev_up(dev);
	if (!ret)
		nctx++;
	pthread_mutex_unlock(&dev_up_lock);
	if (ret) {
		free(uctx);
		errno = -ret;
		return NULL;
	}
	uctx->dev = dev;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, uctx->async_pipe))
		goto err_free;
	pthread_mutex_init(&uctx->async_lock, NULL);

	vctx = &uctx->vctx;
	ctx = &vctx->context;
	ctx->device = device;
	ctx->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	ctx->async_fd = uctx->async_pipe[0];
	ctx->num_comp_vectors = 1;
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	pthread_mutex_init(&ctx->mutex, NULL);

	ctx->ops.poll_cq = uroce_poll_cq;
	ctx->ops.req_notify_cq = uroce_req_notify_cq;
	ctx->ops.post_send = uroce_post_send;
	ctx->ops.post_recv = uroce_post_recv;
	ctx->ops.post_srq_recv = uroce_post_srq_recv;
	ctx->ops.alloc_mw = uroce_alloc_mw;
	ctx->ops.dealloc_mw = uroce_dealloc_mw;
	ctx->ops.bind_mw = uroce_bind_mw;

	vctx->sz = sizeof(*vctx);
	vctx->query_port = uroce_query_port;
	vctx->query_device_ex = uroce_query_device_ex;
	vctx->query_rt_values = query_rt_values;
	vctx->create_qp_ex = uroce_create_qp_ex;
	vctx->create_cq_ex = uroce_create_cq_ex;
	vctx->create_srq_ex = uroce_create_srq_ex;
	vctx->open_xrcd = uroce_open_xrcd;
	vctx->close_xrcd = uroce_close_xrcd;
	vctx->get_srq_num = uroce_get_srq_num;
	vctx->advise_mr = uroce_advise_mr;
	return ctx;

err_free:
	close_ctx(uctx);
	return NULL;
}

UROCE_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct uroce_context *uctx = to_uctx(ctx);

	uroce_async_purge(uctx, NULL); /* events nobody read */
	close(uctx->async_pipe[0]);
	close(uctx->async_pipe[1]);
	if (ctx->cmd_fd >= 0)
		close(ctx->cmd_fd);
	pthread_mutex_destroy(&uctx->async_lock);
	pthread_mutex_destroy(&ctx->mutex);
	close_ctx(uctx);
	return 0;
}

/* ---- device attributes ---- */

static void fill_device_attr(struct uroce_dev *dev, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", UROCE_FW_VER);
	a->node_guid = dev->guid;
	a->sys_image_guid = dev->guid;
	a->max_mr_size = UROCE_MAX_MR_SIZE;
	a->page_size_cap = 0xfffff000; /* 4 KiB and every larger power */
	a->vendor_id = UROCE_VENDOR_ID;
	a->vendor_part_id = UROCE_VENDOR_PART_ID;
	a->hw_ver = UROCE_HW_VER;
	a->max_qp = UROCE_MAX_QP - UROCE_QPN_FIRST;
	a->max_qp_wr = UROCE_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			      IBV_DEVICE_SHUTDOWN_PORT | IBV_DEVICE_XRC |
			      IBV_DEVICE_SYS_IMAGE_GUID;
	a->max_sge = UROCE_MAX_SGE;
	a->max_sge_rd = UROCE_MAX_SGE;
	a->max_cq = UROCE_MAX_CQ;
	a->max_cqe = UROCE_MAX_CQE;
	a->max_mr = UROCE_MAX_MR;
	a->max_pd = UROCE_MAX_PD;
	a->max_qp_rd_atom = UROCE_MAX_RD_ATOMIC;
	a->max_qp_init_rd_atom = UROCE_MAX_RD_ATOMIC;
	a->max_res_rd_atom = (int)(UROCE_MAX_QP * UROCE_MAX_RD_ATOMIC);
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = UROCE_MAX_AH;
	a->max_mcast_grp = UROCE_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = UROCE_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = UROCE_MAX_TOTAL_MCAST_QP_ATTACH;
	a->max_srq = 1 << 16;
	a->max_mw = UROCE_MAX_MR;
	a->max_srq_wr = UROCE_MAX_QP_WR;
	a->max_srq_sge = UROCE_MAX_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = UROCE_LOCAL_ACK_DELAY;
	a->phys_port_cnt = 1;
}

int uroce_query_device_ex(struct ibv_context *ctx,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex full;

	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;

	memset(&full, 0, sizeof(full));
	fill_device_attr(ctx_dev(ctx), &full.orig_attr);
	full.completion_timestamp_mask = UINT64_MAX;
	full.hca_core_clock = UROCE_HCA_CLOCK_KHZ;
	/* the kernel's IB_UVERBS_DEVICE_FLUSH_GLOBAL/_PERSISTENT and
	 * _ATOMIC_WRITE bits (1 << 38..40); rdma-core 44 has no names yet */
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags |
				   1ull << 38 | 1ull << 39 | 1ull << 40;
	full.phys_port_cnt_ex = 1;
	/* explicit ODP for every transport and op (verbs/mr.c) */
	full.odp_caps.general_caps = IBV_ODP_SUPPORT;
	full.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND |
						       IBV_ODP_SUPPORT_RECV |
						       IBV_ODP_SUPPORT_WRITE |
						       IBV_ODP_SUPPORT_READ |
						       IBV_ODP_SUPPORT_ATOMIC |
						       IBV_ODP_SUPPORT_SRQ_RECV;
	full.odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND |
						       IBV_ODP_SUPPORT_RECV |
						       IBV_ODP_SUPPORT_WRITE |
						       IBV_ODP_SUPPORT_SRQ_RECV;
	full.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND |
						       IBV_ODP_SUPPORT_RECV |
						       IBV_ODP_SUPPORT_SRQ_RECV;
	full.xrc_odp_caps = full.odp_caps.per_transport_caps.rc_odp_caps;

	if (attr_size > sizeof(full)) {
		memset((char *)attr + sizeof(full), 0, attr_size - sizeof(full));
		attr_size = sizeof(full);
	}
	memcpy(attr, &full, attr_size);
	return 0;
}

UROCE_EXPORT int ibv_query_device(struct ibv_context *ctx,
				  struct ibv_device_attr *attr)
{
	fill_device_attr(ctx_dev(ctx), attr);
	return 0;
}

/* ---- port ---- */

int uroce_query_port(struct ibv_context *ctx, uint8_t port,
		     struct ibv_port_attr *attr, size_t attr_len)
{
	struct uroce_dev *dev = ctx_dev(ctx);
	struct ibv_port_attr pa;

	if (port != UROCE_PORT)
		return EINVAL;

	memset(&pa, 0, sizeof(pa));
	pa.state = IBV_PORT_ACTIVE;
	pa.max_mtu = IBV_MTU_4096;
	pa.active_mtu = dev->net.active_mtu;
	pa.gid_tbl_len = UROCE_GID_TBL_LEN;
	pa.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	pa.max_msg_sz = UROCE_MAX_MSG_SIZE;
	pa.pkey_tbl_len = 1;
	pa.max_vl_num = 1;
	pa.active_width = UROCE_WIDTH_4X;
	pa.active_speed = UROCE_SPEED_EDR;
	pa.phys_state = UROCE_PHYS_STATE_LINKUP;
	pa.link_layer = IBV_LINK_LAYER_ETHERNET;
	/* unique on this host (engine/lid.c); a RoCE port's would be 0 */
	pa.lid = __atomic_load_n(&dev->port.lid, __ATOMIC_RELAXED);

	if (attr_len > sizeof(pa)) {
		memset((char *)attr + sizeof(pa), 0, attr_len - sizeof(pa));
		attr_len = sizeof(pa);
	}
	memcpy(attr, &pa, attr_len);
	return 0;
}

#undef ibv_query_port
UROCE_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
				struct _compat_ibv_port_attr *attr)
{
	return uroce_query_port(ctx, port, (struct ibv_port_attr *)attr,
				sizeof(*attr));
}

/* ---- GID and P_Key tables: one entry each ---- */

/* The interface that holds the device's address, 0 if none is found. */
static uint32_t gid_ifindex(struct uroce_dev *dev)
{
	struct ifaddrs *ifa_list, *ifa;
	uint32_t idx = 0;

	if (uroce_addr_loopback(&dev->net.local))
		return if_nametoindex("lo");
	if (getifaddrs(&ifa_list))
		return 0;
	for (ifa = ifa_list; ifa; ifa = ifa->ifa_next) {
		if (ifa->ifa_addr &&
		    uroce_addr_same(ifa->ifa_addr, &dev->net.local)) {
			idx = if_nametoindex(ifa->ifa_name);
			break;
		}
	}
	freeifaddrs(ifa_list);
	return idx;
}

static bool gid_is_zero(const union ibv_gid *gid)
{
	return !gid->global.subnet_prefix && !gid->global.interface_id;
}

/* Fill entry for (port, index); positive errno like the kernel's answer. */
static int get_gid_entry(struct uroce_dev *dev, uint32_t port, uint32_t index,
			 struct ibv_gid_entry *entry)
{
	if (port != UROCE_PORT || index >= UROCE_GID_TBL_LEN)
		return EINVAL;
	if (gid_is_zero(&dev->net.gid))
		return ENODATA;
	memset(entry, 0, sizeof(*entry));
	entry->gid = dev->net.gid;
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = gid_ifindex(dev);
	return 0;
}

/* Copy an entry into a caller's array element of entry_size bytes. */
static void put_gid_entry(void *dst, const struct ibv_gid_entry *e,
			  size_t entry_size)
{
	size_t n = entry_size < sizeof(*e) ? entry_size : sizeof(*e);

	memset(dst, 0, entry_size);
	memcpy(dst, e, n);
}

UROCE_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port_num,
			       int index, union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int ret;

	if (index < 0) {
		errno = EINVAL;
		return -1;
	}
	ret = get_gid_entry(ctx_dev(ctx), port_num, (uint32_t)index, &e);
	if (ret == ENODATA) {
		/* an empty slot reads as the zero GID */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	*gid = e.gid;
	return 0;
}

UROCE_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port_num,
				   uint32_t gid_index,
				   struct ibv_gid_entry *entry, uint32_t flags,
				   size_t entry_size)
{
	struct ibv_gid_entry e;
	int ret;

	if (flags || !entry_size)
		return EINVAL;
	ret = get_gid_entry(ctx_dev(ctx), port_num, gid_index, &e);
	if (ret)
		return ret;
	put_gid_entry(entry, &e, entry_size);
	return 0;
}

UROCE_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx,
					  struct ibv_gid_entry *entries,
					  size_t max_entries, uint32_t flags,
					  size_t entry_size)
{
	struct ibv_gid_entry e;
	int ret;

	if (flags || !entry_size)
		return -EINVAL;
	ret = get_gid_entry(ctx_dev(ctx), UROCE_PORT, 0, &e);
	if (ret == ENODATA)
		return 0;
	if (ret)
		return -ret;
	if (max_entries < 1)
		return -EINVAL;
	put_gid_entry(entries, &e, entry_size);
	return 1;
}

int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type)
{
	struct ibv_gid_entry e;
	int ret;

	ret = get_gid_entry(ctx_dev(ctx), port_num, index, &e);
	if (ret == ENODATA) {
		*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	*type = IBV_GID_TYPE_SYSFS_ROCE_V2;
	return 0;
}

UROCE_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port_num,
				int index, __be16 *pkey)
{
	if (port_num != UROCE_PORT || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(UROCE_PKEY_DEFAULT);
	return 0;
}

UROCE_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port_num,
				    __be16 pkey)
{
	__be16 p;
	int i;

	for (i = 0;; i++) {
		if (ibv_query_pkey(ctx, port_num, i, &p))
			return -1;
		if (p == pkey)
			return i;
	}
}
