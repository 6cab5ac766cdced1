/* SPDX-License-Identifier: MIT */
/*
 * verbs: the libibverbs ABI front (libibverbs.so.1).
 *
 * Owns: the ABI entry points (ibv_*), the ops tables reached through
 * struct verbs_context, AHs, the completion channels and the async event
 * queue behind uroce_cq_push/uroce_async_event (verbs/cq.c), object
 * creation and destruction (the tables' inserts and removals), the
 * modify_qp state table, posting.  Uses every layer below; nothing below
 * includes this header.  Returns positive errno, as libibverbs does.
 */
#ifndef UROCE_VERBS_H
#define UROCE_VERBS_H

#include "dev.h"

/* ---- AH ---- */
struct uroce_ah {
	struct ibv_ah ibah;
	struct ibv_ah_attr attr;
	struct sockaddr_storage dst; /* from attr.grh.dgid */
	struct uroce_ipopt ip;	     /* from attr.grh: TOS, TTL */
};

static inline struct uroce_ah *to_uah(struct ibv_ah *ah)
{
	return container_of(ah, struct uroce_ah, ibah);
}

/* verbs/device.c */
int uroce_dev_up(struct uroce_dev *dev); /* bring up net + progress, once */
/* Engine tests: bring the device up on their own packet IO, at addr, with
 * no socket and no progress thread; the caller delivers packets
 * (uroce_recv), runs the timers (uroce_timers_run) and may drive the clock
 * (uroce_clock_set).  Before the first ibv_open_device; -EBUSY after. */
int uroce_dev_up_offline(struct uroce_dev *dev, const struct uroce_pkt_io *io,
			 const struct sockaddr_storage *addr, uint32_t rcvbuf);

/* verbs/device.c: ops that verbs.h reaches through struct verbs_context */
int uroce_query_port(struct ibv_context *ctx, uint8_t port,
		     struct ibv_port_attr *attr, size_t attr_len);
int uroce_query_device_ex(struct ibv_context *ctx,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size);

/* verbs/cq.c: ops reached through ibv_context.ops / verbs_context */
int uroce_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int uroce_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_cq_ex *uroce_create_cq_ex(struct ibv_context *ctx,
				     struct ibv_cq_init_attr_ex *attr);

/* verbs/qp.c */
struct ibv_qp *uroce_create_qp_ex(struct ibv_context *ctx,
				  struct ibv_qp_init_attr_ex *attr);
int uroce_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr);
int uroce_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr);
/* append receive WRs to a receive queue (a QP's or an SRQ's); dev->lock
 * held; returns 0 or a positive errno with *bad_wr set */
int uroce_rq_post(struct uroce_rq *rq, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);
/* check a filled WQE and compute its length; dev->lock held.  Returns 0
 * or a positive errno. */
int uroce_sq_check(struct uroce_qp *qp, struct uroce_send_wqe *wqe);
/* a WQE slot at sq.head, or NULL if the SQ is full; dev->lock held */
struct uroce_send_wqe *uroce_sq_slot(struct uroce_qp *qp);

/* verbs/srq.c */
int uroce_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);
struct ibv_srq *uroce_create_srq_ex(struct ibv_context *ctx,
				    struct ibv_srq_init_attr_ex *attr);
/* verbs/xrc.c: XRC domains, reached through struct verbs_context */
struct ibv_xrcd *uroce_open_xrcd(struct ibv_context *ctx,
				 struct ibv_xrcd_init_attr *attr);
int uroce_close_xrcd(struct ibv_xrcd *xrcd);
int uroce_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
int uroce_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		    uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);

/* verbs/mw.c */
struct ibv_mw *uroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int uroce_dealloc_mw(struct ibv_mw *mw);
int uroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		  struct ibv_mw_bind *bind);

/* verbs/wr_ex.c */
/* the ibv_wr_* ops and their staging area (after the send queue is
 * sized); 0 or ENOMEM.  uroce_qp_ex_free undoes it. */
int uroce_qp_ex_init(struct uroce_qp *qp);
void uroce_qp_ex_free(struct uroce_qp *qp);

/* whether gid is a multicast GID (an IPv4-mapped 224/4 address or ff00::/8) */
bool uroce_gid_is_mcast(const union ibv_gid *gid);

#endif /* UROCE_VERBS_H */
