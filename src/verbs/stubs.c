// SPDX-License-Identifier: MIT
/*
 * Every default-version symbol of Debian's libibverbs that uroce does not
 * (yet) back with an object: it must exist, because Debian's binaries and
 * libraries are linked with BIND_NOW, and it must fail the way libibverbs
 * fails.  int verbs return a positive errno (EOPNOTSUPP), pointer verbs
 * return NULL with errno set, void ones do nothing; where a verb's man page
 * says "-1 on error" it returns -1 with errno set.
 *
 * A few entries do real work because they are pure: fork handling (uroce
 * pins nothing, so there is nothing to protect across fork()), the sysfs
 * readers and the kernel-struct converters.
 *
 * The IBVERBS_PRIVATE_34 entries are the provider interface of rdma-core 44
 * (driver.h, which Debian does not install).  uroce loads no providers, but
 * Debian's librdmacm, libmlx5 and libefa import these names, so they must
 * resolve.  Their prototypes are declared here; kernel command and response
 * buffers are passed as void *, since uroce has no kernel to send them to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* Provider-side types of driver.h; only ever handled by pointer here. */
struct ibv_command_buffer;
struct verbs_counters;
struct verbs_cq;
struct verbs_device;
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_dm;
struct verbs_flow_action;
struct verbs_mr;
struct verbs_qp;
struct verbs_srq;
struct verbs_sysfs_dev;
struct verbs_xrcd;
struct ibv_query_device_ex_input;

/*
 * Declare, then define, a symbol no installed header declares, so that
 * -Wmissing-prototypes still guards the rest of the file.
 */
#define EXPORT_FN(ret, name, params) \
	ret name params; \
	ret name params

static void *fail_ptr(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---------------------------------------------------------------------
 * Public verbs uroce does not implement (yet)
 */

int ibv_resolve_eth_l2_from_gid(struct ibv_context *context,
				struct ibv_ah_attr *attr,
				uint8_t eth_mac[ETHERNET_LL_SIZE], uint16_t *vid)
{
	return EOPNOTSUPP;
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	return fail_ptr();
}

/*
 * 0: no in-order guarantee beyond what the IBA gives, which is what
 * libibverbs answers when the provider has no opinion.
 */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t flags)
{
	return 0;
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

/* Importing objects needs a kernel uverbs fd to share them through. */
struct ibv_context *ibv_import_device(int cmd_fd)
{
	return fail_ptr();
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	return fail_ptr();
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	return fail_ptr();
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	return fail_ptr();
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
}

/* ---------------------------------------------------------------------
 * fork(): uroce's memory is ordinary process memory, never pinned for DMA,
 * so a child gets a correct copy-on-write view without any help.
 */

int ibv_fork_init(void)
{
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

EXPORT_FN(int, ibv_dontfork_range, (void *base, size_t size))
{
	return 0;
}

EXPORT_FN(int, ibv_dofork_range, (void *base, size_t size))
{
	return 0;
}

/* ---------------------------------------------------------------------
 * sysfs helpers (rdma-core's other libraries still call these)
 */

#define SYSFS_PATH_MAX 256

static char sysfs_path[SYSFS_PATH_MAX + 1];
static pthread_once_t sysfs_path_once = PTHREAD_ONCE_INIT;

/*
 * SYSFS_PATH is honoured only when not running set-id.  Like libibverbs,
 * strip every trailing '/' (so "/" becomes "", and "" stays ""): callers
 * append "/class/...".
 */
static void init_sysfs_path(void)
{
	const char *env = secure_getenv("SYSFS_PATH");
	size_t len;

	snprintf(sysfs_path, sizeof(sysfs_path), "%s", env ? env : "/sys");
	len = strlen(sysfs_path);
	while (len > 0 && sysfs_path[len - 1] == '/')
		sysfs_path[--len] = '\0';
}

EXPORT_FN(const char *, ibv_get_sysfs_path, (void))
{
	pthread_once(&sysfs_path_once, init_sysfs_path);
	return sysfs_path;
}

/*
 * Read one sysfs attribute into buf as a C string without its trailing
 * newline.  Returns its length, or -1 with errno set; content that would
 * not fit with its terminator is an error, not a silent truncation.
 */
EXPORT_FN(int, ibv_read_sysfs_file,
	  (const char *dir, const char *file, char *buf, size_t size))
{
	char path[4096];
	ssize_t len;
	int fd;

	if (!buf || !size || size > INT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do {
		len = read(fd, buf, size);
	} while (len < 0 && errno == EINTR);
	close(fd);
	if (len < 0)
		return -1;

	if (len > 0 && buf[len - 1] == '\n') {
		buf[--len] = '\0';
	} else if ((size_t)len < size) {
		buf[len] = '\0';
	} else {
		errno = EOVERFLOW;
		return -1;
	}
	return (int)len;
}

/* uroce has no sysfs device behind a context. */
EXPORT_FN(int, ibv_read_ibdev_sysfs_file,
	  (char *buf, size_t size, struct verbs_sysfs_dev *sysfs_dev,
	   const char *fnfmt, ...))
{
	errno = sysfs_dev ? EOPNOTSUPP : EINVAL;
	return -1;
}

/* ---------------------------------------------------------------------
 * Kernel uverbs / SA struct conversions: plain field-by-field copies.
 */

EXPORT_FN(void, ibv_copy_ah_attr_from_kern,
	  (struct ibv_ah_attr * dst, struct ib_uverbs_ah_attr *src))
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;

	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

EXPORT_FN(void, ibv_copy_qp_attr_from_kern,
	  (struct ibv_qp_attr * dst, struct ib_uverbs_qp_attr *src))
{
	/* qp_state is left alone, as libibverbs does: callers rely on it. */
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;

	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;

	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

EXPORT_FN(void, ibv_copy_path_rec_from_kern,
	  (struct ibv_sa_path_rec * dst, struct ib_user_path_rec *src))
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

EXPORT_FN(void, ibv_copy_path_rec_to_kern,
	  (struct ib_user_path_rec * dst, struct ibv_sa_path_rec *src))
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

/* ---------------------------------------------------------------------
 * IBVERBS_PRIVATE_34: the provider interface.  No provider ever gets a
 * uroce context, so every command fails and every hook is a no-op.
 */

extern bool verbs_allow_disassociate_destroy;
bool verbs_allow_disassociate_destroy;

EXPORT_FN(void, verbs_register_driver_34, (const struct verbs_device_ops *ops))
{
}

EXPORT_FN(void *, _verbs_init_and_alloc_context,
	  (struct ibv_device * device, int cmd_fd, size_t alloc_size,
	   struct verbs_context *context_offset, uint32_t driver_id))
{
	return fail_ptr();
}

EXPORT_FN(void, verbs_uninit_context, (struct verbs_context * context))
{
}

EXPORT_FN(void, verbs_set_ops,
	  (struct verbs_context * vctx, const struct verbs_context_ops *ops))
{
}

EXPORT_FN(struct ibv_context *, verbs_open_device,
	  (struct ibv_device * device, void *private_data))
{
	return fail_ptr();
}

EXPORT_FN(void, verbs_init_cq,
	  (struct ibv_cq * cq, struct ibv_context *context,
	   struct ibv_comp_channel *channel, void *cq_context))
{
}

EXPORT_FN(void, __verbs_log,
	  (struct verbs_context * ctx, uint32_t level, const char *fmt, ...))
{
}

EXPORT_FN(int, execute_ioctl,
	  (struct ibv_context * context, struct ibv_command_buffer *cmd))
{
	return EOPNOTSUPP;
}

/*
 * Pure arithmetic in libibverbs (attributes in this buffer plus the chain);
 * without the buffer layout the own count is the honest answer.
 */
EXPORT_FN(unsigned int, __ioctl_final_num_attrs,
	  (unsigned int num_attrs, struct ibv_command_buffer *link))
{
	return num_attrs;
}

/* Device and context */

EXPORT_FN(int, ibv_cmd_get_context,
	  (struct verbs_context * context, void *cmd, size_t cmd_size,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_query_context,
	  (struct ibv_context * ctx, struct ibv_command_buffer *driver))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_query_device_any,
	  (struct ibv_context * context,
	   const struct ibv_query_device_ex_input *input,
	   struct ibv_device_attr_ex *attr, size_t attr_size, void *resp,
	   size_t *resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_query_port,
	  (struct ibv_context * context, uint8_t port_num,
	   struct ibv_port_attr *port_attr, void *cmd, size_t cmd_size))
{
	return EOPNOTSUPP;
}

/* PD, MR, MW, DM, XRCD */

EXPORT_FN(int, ibv_cmd_alloc_pd,
	  (struct ibv_context * context, struct ibv_pd *pd, void *cmd,
	   size_t cmd_size, void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_dealloc_pd, (struct ibv_pd * pd))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_reg_mr,
	  (struct ibv_pd * pd, void *addr, size_t length, uint64_t hca_va,
	   int access, struct verbs_mr *vmr, void *cmd, size_t cmd_size,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_rereg_mr,
	  (struct verbs_mr * vmr, uint32_t flags, void *addr, size_t length,
	   uint64_t hca_va, int access, struct ibv_pd *pd, void *cmd,
	   size_t cmd_sz, void *resp, size_t resp_sz))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_reg_dmabuf_mr,
	  (struct ibv_pd * pd, uint64_t offset, size_t length, uint64_t iova,
	   int fd, int access, struct verbs_mr *vmr))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_reg_dm_mr,
	  (struct ibv_pd * pd, struct verbs_dm *dm, uint64_t offset,
	   size_t length, unsigned int access, struct verbs_mr *vmr,
	   struct ibv_command_buffer *link))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_query_mr,
	  (struct ibv_pd * pd, struct verbs_mr *vmr, uint32_t mr_handle))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_dereg_mr, (struct verbs_mr * vmr))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_advise_mr,
	  (struct ibv_pd * pd, enum ibv_advise_mr_advice advice, uint32_t flags,
	   struct ibv_sge *sg_list, uint32_t num_sge))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_alloc_mw,
	  (struct ibv_pd * pd, enum ibv_mw_type type, struct ibv_mw *mw,
	   void *cmd, size_t cmd_size, void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_dealloc_mw, (struct ibv_mw * mw))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_alloc_dm,
	  (struct ibv_context * ctx, const struct ibv_alloc_dm_attr *dm_attr,
	   struct verbs_dm *dm, struct ibv_command_buffer *link))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_free_dm, (struct verbs_dm * dm))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_open_xrcd,
	  (struct ibv_context * context, struct verbs_xrcd *xrcd,
	   int vxrcd_size, struct ibv_xrcd_init_attr *attr, void *cmd,
	   size_t cmd_size, void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_close_xrcd, (struct verbs_xrcd * xrcd))
{
	return EOPNOTSUPP;
}

/* CQ */

EXPORT_FN(int, ibv_cmd_create_cq,
	  (struct ibv_context * context, int cqe,
	   struct ibv_comp_channel *channel, int comp_vector, struct ibv_cq *cq,
	   void *cmd, size_t cmd_size, void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_cq_ex,
	  (struct ibv_context * context,
	   const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq,
	   void *cmd, size_t cmd_size, void *resp, size_t resp_size,
	   uint32_t cmd_flags))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_modify_cq,
	  (struct ibv_cq * cq, struct ibv_modify_cq_attr *attr, void *cmd,
	   size_t cmd_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_resize_cq,
	  (struct ibv_cq * cq, int cqe, void *cmd, size_t cmd_size, void *resp,
	   size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_cq, (struct ibv_cq * cq))
{
	return EOPNOTSUPP;
}

/* Like ibv_poll_cq(): a count of completions, or negative on error. */
EXPORT_FN(int, ibv_cmd_poll_cq, (struct ibv_cq * cq, int ne, struct ibv_wc *wc))
{
	return -1;
}

EXPORT_FN(int, ibv_cmd_req_notify_cq, (struct ibv_cq * cq, int solicited_only))
{
	return EOPNOTSUPP;
}

/* SRQ */

EXPORT_FN(int, ibv_cmd_create_srq,
	  (struct ibv_pd * pd, struct ibv_srq *srq,
	   struct ibv_srq_init_attr *attr, void *cmd, size_t cmd_size,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_srq_ex,
	  (struct ibv_context * context, struct verbs_srq *srq,
	   struct ibv_srq_init_attr_ex *attr_ex, void *cmd, size_t cmd_size,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_modify_srq,
	  (struct ibv_srq * srq, struct ibv_srq_attr *srq_attr,
	   int srq_attr_mask, void *cmd, size_t cmd_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_query_srq,
	  (struct ibv_srq * srq, struct ibv_srq_attr *srq_attr, void *cmd,
	   size_t cmd_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_srq, (struct ibv_srq * srq))
{
	return EOPNOTSUPP;
}

/* QP */

EXPORT_FN(int, ibv_cmd_create_qp,
	  (struct ibv_pd * pd, struct ibv_qp *qp, struct ibv_qp_init_attr *attr,
	   void *cmd, size_t cmd_size, void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_qp_ex,
	  (struct ibv_context * context, struct verbs_qp *qp,
	   struct ibv_qp_init_attr_ex *attr_ex, void *cmd, size_t cmd_size,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_qp_ex2,
	  (struct ibv_context * context, struct verbs_qp *qp,
	   struct ibv_qp_init_attr_ex *qp_attr, void *cmd, size_t cmd_size,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_open_qp,
	  (struct ibv_context * context, struct verbs_qp *qp, int vqp_sz,
	   struct ibv_qp_open_attr *attr, void *cmd, size_t cmd_size,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_query_qp,
	  (struct ibv_qp * qp, struct ibv_qp_attr *qp_attr, int attr_mask,
	   struct ibv_qp_init_attr *qp_init_attr, void *cmd, size_t cmd_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_modify_qp,
	  (struct ibv_qp * qp, struct ibv_qp_attr *attr, int attr_mask,
	   void *cmd, size_t cmd_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_modify_qp_ex,
	  (struct ibv_qp * qp, struct ibv_qp_attr *attr, int attr_mask,
	   void *cmd, size_t cmd_size, void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_qp, (struct ibv_qp * qp))
{
	return EOPNOTSUPP;
}

/* The post verbs point *bad_wr at the first request not posted. */
EXPORT_FN(int, ibv_cmd_post_send,
	  (struct ibv_qp * ibqp, struct ibv_send_wr *wr,
	   struct ibv_send_wr **bad_wr))
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_post_recv,
	  (struct ibv_qp * ibqp, struct ibv_recv_wr *wr,
	   struct ibv_recv_wr **bad_wr))
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_post_srq_recv,
	  (struct ibv_srq * srq, struct ibv_recv_wr *wr,
	   struct ibv_recv_wr **bad_wr))
{
	if (bad_wr)
		*bad_wr = wr;
	return EOPNOTSUPP;
}

/* AH and multicast */

EXPORT_FN(int, ibv_cmd_create_ah,
	  (struct ibv_pd * pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
	   void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_ah, (struct ibv_ah * ah))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_attach_mcast,
	  (struct ibv_qp * qp, const union ibv_gid *gid, uint16_t lid))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_detach_mcast,
	  (struct ibv_qp * qp, const union ibv_gid *gid, uint16_t lid))
{
	return EOPNOTSUPP;
}

/* WQ, RSS indirection, flow steering, flow actions, counters */

EXPORT_FN(int, ibv_cmd_create_wq,
	  (struct ibv_context * context, struct ibv_wq_init_attr *wq_init_attr,
	   struct ibv_wq *wq, void *cmd, size_t cmd_size, void *resp,
	   size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_modify_wq,
	  (struct ibv_wq * wq, struct ibv_wq_attr *attr, void *cmd,
	   size_t cmd_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_wq, (struct ibv_wq * wq))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_rwq_ind_table,
	  (struct ibv_context * context,
	   struct ibv_rwq_ind_table_init_attr *init_attr,
	   struct ibv_rwq_ind_table *rwq_ind_table, void *resp, size_t resp_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_rwq_ind_table,
	  (struct ibv_rwq_ind_table * rwq_ind_table))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_flow,
	  (struct ibv_qp * qp, struct ibv_flow *flow_id,
	   struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_flow, (struct ibv_flow * flow_id))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_flow_action_esp,
	  (struct ibv_context * ctx, struct ibv_flow_action_esp_attr *attr,
	   struct verbs_flow_action *flow_action,
	   struct ibv_command_buffer *driver))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_modify_flow_action_esp,
	  (struct verbs_flow_action * flow_action,
	   struct ibv_flow_action_esp_attr *attr,
	   struct ibv_command_buffer *driver))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_flow_action, (struct verbs_flow_action * action))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_create_counters,
	  (struct ibv_context * context, struct ibv_counters_init_attr *init_attr,
	   struct verbs_counters *vcounters, struct ibv_command_buffer *link))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_read_counters,
	  (struct verbs_counters * vcounters, uint64_t *counters_value,
	   uint32_t ncounters, uint32_t flags, struct ibv_command_buffer *link))
{
	return EOPNOTSUPP;
}

EXPORT_FN(int, ibv_cmd_destroy_counters, (struct verbs_counters * vcounters))
{
	return EOPNOTSUPP;
}
