/* SPDX-License-Identifier: MIT */
/*
 * The one RC (or XRC TGT) connection setup the C test programs share:
 * INIT with the given access, then RTR towards QP dqpn at GID dgid, with
 * receive PSN 0x100, MTU 1024 and 4 responder resources.
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

#endif
