/* SPDX-License-Identifier: MIT */
/*
 * The RC (or XRC TGT) connection setup the C test programs share: the
 * three steps INIT, RTR and RTS with the parameters of struct
 * uroce_test_rc (uroce_traffic, fault_peer), and the fixed setup of the
 * small programs: INIT with the given access, then RTR towards QP dqpn
 * at GID dgid, with receive PSN 0x100, MTU 1024 and 4 responder
 * resources; then RTS with 7 retries and 7 RNR retries.
 */
#ifndef UROCE_TEST_QP_SETUP_H
#define UROCE_TEST_QP_SETUP_H

#include <string.h>

#include <infiniband/verbs.h>

/* Where an RC (or UC, XRC) connection goes and how: the peer's QP,
 * PSNs and GID, the path MTU, the READ/atomic depth both ways, the
 * timers and retry counts (IBA 11.2.4.2, ibv_modify_qp(3)). */
struct uroce_test_rc {
	uint32_t dqpn;
	uint32_t rq_psn; /* the first PSN the peer sends */
	uint32_t sq_psn; /* ours */
	union ibv_gid dgid;
	enum ibv_mtu mtu;
	uint8_t max_dest_rd_atomic, max_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t timeout; /* 0: no retransmission timer */
	uint8_t retry_cnt, rnr_retry;
};

/* A QP of type on pd, cq for both its queues, depth WRs of one SGE each
 * on each; NULL with errno set */
static inline struct ibv_qp *uroce_test_qp(struct ibv_pd *pd, struct ibv_cq *cq,
					   enum ibv_qp_type type, uint32_t depth)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = type;
	a.cap.max_send_wr = depth;
	a.cap.max_recv_wr = depth;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &a);
}

/* RESET -> INIT on port 1 with the given remote access; ibv_modify_qp's
 * result */
static inline int uroce_test_rc_init(struct ibv_qp *qp, unsigned int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = access;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS);
}

/* INIT -> RTR towards r (GID index 0, hop limit 64) */
static inline int uroce_test_rc_rtr(struct ibv_qp *qp,
				    const struct uroce_test_rc *r)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = r->mtu;
	a.dest_qp_num = r->dqpn;
	a.rq_psn = r->rq_psn;
	a.max_dest_rd_atomic = r->max_dest_rd_atomic;
	a.min_rnr_timer = r->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.dgid = r->dgid;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

/* RTR -> RTS with r's send PSN, timer and retry counts */
static inline int uroce_test_rc_rts(struct ibv_qp *qp,
				    const struct uroce_test_rc *r)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = r->timeout;
	a.retry_cnt = r->retry_cnt;
	a.rnr_retry = r->rnr_retry;
	a.sq_psn = r->sq_psn;
	a.max_rd_atomic = r->max_rd_atomic;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* NULL, or the state ("INIT", "RTR") the QP could not be moved to */
static inline const char *uroce_test_to_rtr(struct ibv_qp *qp,
					    unsigned int access, uint32_t dqpn,
					    const union ibv_gid *dgid)
{
	struct uroce_test_rc r = {
		.dqpn = dqpn,
		.rq_psn = 0x100,
		.dgid = *dgid,
		.mtu = IBV_MTU_1024,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 1,
	};

	if (uroce_test_rc_init(qp, access))
		return "INIT";
	if (uroce_test_rc_rtr(qp, &r))
		return "RTR";
	return NULL;
}

/* RTR -> RTS: ack timeout exponent timeout (0: no retransmission
 * timer), send PSN sq_psn, max_rd_atomic READs/atomics in flight;
 * ibv_modify_qp's result */
static inline int uroce_test_to_rts(struct ibv_qp *qp, uint8_t timeout,
				    uint32_t sq_psn, uint8_t max_rd_atomic)
{
	struct uroce_test_rc r = {
		.sq_psn = sq_psn,
		.timeout = timeout,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = max_rd_atomic,
	};

	return uroce_test_rc_rts(qp, &r);
}

#endif
