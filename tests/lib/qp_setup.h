/* SPDX-License-Identifier: MIT */
/*
 * The one RC (or XRC TGT) connection setup the C test programs share:
 * INIT with the given access, then RTR towards QP dqpn at GID dgid, with
 * receive PSN 0x100, MTU 1024 and 4 responder resources; then RTS with
 * 7 retries and 7 RNR retries.
 */
#ifndef UROCE_TEST_QP_SETUP_H
#define UROCE_TEST_QP_SETUP_H

#include <string.h>

#include <infiniband/verbs.h>

/* NULL, or the state ("INIT", "RTR") the QP could not be moved to */
static inline const char *uroce_test_to_rtr(struct ibv_qp *qp,
					    unsigned int access,
					    uint32_t dqpn,
					    const union ibv_gid *dgid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = access;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return "INIT";
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid = *dgid;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
			  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		return "RTR";
	return NULL;
}

/* RTR -> RTS: ack timeout exponent timeout (0: no retransmission
 * timer), send PSN sq_psn, max_rd_atomic READs/atomics in flight;
 * ibv_modify_qp's result */
static inline int uroce_test_to_rts(struct ibv_qp *qp, uint8_t timeout,
				    uint32_t sq_psn, uint8_t max_rd_atomic)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = max_rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

#endif
