// SPDX-License-Identifier: MIT
/*
 * Send errors (issue 12): a UC/UD datagram the packet IO cannot send for
 * good (no route, a refused destination) fails its WQE with LOC_QP_OP_ERR
 * and moves the QP to the error state, as rxe does for a packet it cannot
 * route; a drop after routing (ENOBUFS, a firewall's EPERM) is loss, and
 * on RC every send error is: its retries decide.  With batching (eng_opts.gso) the
 * packets leave after the engine lock is dropped, so a UC/UD completion
 * waits for them (docs/transport.md, "Send errors").
 *
 * The wire has no route to ENG_UNREACH (192.0.2.1): a send there returns
 * eng_opts.unreach_err, -ENETUNREACH unless a test says otherwise.
 */
#include <errno.h>
#include <string.h>

#include "../lib/qp_setup.h"
#include "harness.h"

#define QKEY 0x11111111u

static struct ibv_cq *cq_new(void)
{
	struct ibv_cq *cq = ibv_create_cq(E->ctx, 256, NULL, NULL, 0);

	ENG_CHECK(cq, "ibv_create_cq");
	return cq;
}

static struct ibv_qp *qp_new(enum ibv_qp_type type, struct ibv_cq *cq)
{
	struct ibv_qp *qp = uroce_test_qp(E->pd, cq, type, 64);

	ENG_CHECK(qp, "ibv_create_qp");
	return qp;
}

static void ud_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	ENG_CHECK(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_QKEY),
		  "UD INIT");
	a.qp_state = IBV_QPS_RTR;
	ENG_CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "UD RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = PSN0;
	ENG_CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN),
		  "UD RTS");
}

/* a connected QP (UC, or RC with a 67 ms timeout and 7 retries) to a
 * QP numbered dqpn at gid */
static void conn_rts(struct ibv_qp *qp, const union ibv_gid *gid, uint32_t dqpn)
{
	bool rc = qp->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ENG_CHECK(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		  "INIT");
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = PSN0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid = *gid;
	ENG_CHECK(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					 (rc ? IBV_QP_MAX_DEST_RD_ATOMIC |
							  IBV_QP_MIN_RNR_TIMER :
					       0)),
		  "RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = PSN0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	ENG_CHECK(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_SQ_PSN |
					 (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
							  IBV_QP_RNR_RETRY |
							  IBV_QP_MAX_QP_RD_ATOMIC :
					       0)),
		  "RTS");
}

static struct ibv_ah *ahs[16];
static int nahs;

/* the AHs a test made (they are not the context's to free) */
static void ahs_free(void)
{
	while (nahs)
		ENG_CHECK(!ibv_destroy_ah(ahs[--nahs]), "ibv_destroy_ah");
}

static struct ibv_ah *ah_to(const union ibv_gid *gid)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.port_num = 1;
	a.grh.hop_limit = 64;
	a.grh.dgid = *gid;
	ah = ibv_create_ah(E->pd, &a);
	ENG_CHECK(ah && nahs < 16, "ibv_create_ah");
	ahs[nahs++] = ah;
	return ah;
}

/* n UD SENDs of 64 bytes in one ibv_post_send: WR i (wr_id i + 1) to
 * ah[i], QP dqpn[i] */
static void post_ud(struct ibv_qp *qp, int n, struct ibv_ah **ah,
		    const uint32_t *dqpn)
{
	struct ibv_sge sge[8];
	struct ibv_send_wr wr[8], *bad;
	int i;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)E->buf_a + 64 * i;
		sge[i].length = 64;
		sge[i].lkey = E->mr_a->lkey;
		wr[i].wr_id = (uint64_t)i + 1;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.ud.ah = ah[i];
		wr[i].wr.ud.remote_qpn = dqpn[i];
		wr[i].wr.ud.remote_qkey = QKEY;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	ENG_CHECK(!ibv_post_send(qp, wr, &bad), "ibv_post_send");
}

static void post_send_len(struct ibv_qp *qp, enum ibv_wr_opcode op,
			  uint64_t wr_id, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)E->buf_a,
			       .length = len,
			       .lkey = E->mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = 0x1000;
	wr.wr.rdma.rkey = 1;
	ENG_CHECK(!ibv_post_send(qp, &wr, &bad), "ibv_post_send");
}

static void expect_wc(struct ibv_cq *cq, uint64_t wr_id,
		      enum ibv_wc_status status)
{
	struct ibv_wc wc;

	ENG_CHECK(eng_poll(cq, &wc), "no completion for wr_id %llu",
		  (unsigned long long)wr_id);
	ENG_CHECK(wc.wr_id == wr_id && wc.status == status,
		  "wr_id %llu %s, wanted wr_id %llu %s",
		  (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
		  (unsigned long long)wr_id, ibv_wc_status_str(status));
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	ENG_CHECK(!ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), "ibv_query_qp");
	return a.qp_state;
}

static struct ibv_cq *wait_cq;

static bool cq_ready(struct eng *e)
{
	struct ibv_wc wc;

	(void)e;
	/* peek: the test polls it afterwards */
	if (ibv_poll_cq(wait_cq, 0, &wc) < 0)
		return false;
	return to_ucq(wait_cq)->head != to_ucq(wait_cq)->tail;
}

/* ---- UD, each packet sent at once (no batching) ---- */

static void t_ud_no_route(void)
{
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah[2];
	uint32_t dqpn[2] = { 0x123, 0x123 };
	union ibv_gid gid;

	eng_setup(NULL);
	cq = cq_new();
	qp = qp_new(IBV_QPT_UD, cq);
	ud_rts(qp);
	eng_gid_unreach(&gid);
	ah[0] = ah[1] = ah_to(&gid);
	post_ud(qp, 2, ah, dqpn);
	/* the first fails as rxe fails it (rxe_req.c: a send error other
	 * than EAGAIN is IB_WC_LOC_QP_OP_ERR), and the QP with it: the
	 * second is flushed */
	expect_wc(cq, 1, IBV_WC_LOC_QP_OP_ERR);
	expect_wc(cq, 2, IBV_WC_WR_FLUSH_ERR);
	ENG_CHECK(qp_state(qp) == IBV_QPS_ERR, "QP state %d", qp_state(qp));
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_SEND_FAILED) == 1, "tx_send_failed %llu",
		  (unsigned long long)eng_cnt(UROCE_CNT_TX_SEND_FAILED));
	ahs_free();
}

/* a full queue, a firewall's drop: loss, not a failure; UD reports
 * success (rxe_send: -EAGAIN) */
static void ud_loss(int err)
{
	struct eng_opts o = { .unreach_err = err };
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah[2];
	uint32_t dqpn[2] = { 0x123, 0x123 };
	union ibv_gid gid;

	eng_setup(&o);
	cq = cq_new();
	qp = qp_new(IBV_QPT_UD, cq);
	ud_rts(qp);
	eng_gid_unreach(&gid);
	ah[0] = ah[1] = ah_to(&gid);
	post_ud(qp, 2, ah, dqpn);
	expect_wc(cq, 1, IBV_WC_SUCCESS);
	expect_wc(cq, 2, IBV_WC_SUCCESS);
	ENG_CHECK(qp_state(qp) == IBV_QPS_RTS, "QP state %d", qp_state(qp));
	ENG_CHECK(!eng_cnt(UROCE_CNT_TX_SEND_FAILED), "a WQE failed");
	ahs_free();
}

static void t_ud_enobufs(void)
{
	ud_loss(-ENOBUFS);
}

static void t_ud_eperm(void)
{
	ud_loss(-EPERM);
}

/* ---- UD through send batches: the completions wait for the packets ---- */

static void t_ud_batched(void)
{
	struct eng_opts o = { .gso = true };
	struct ibv_cq *cq, *rcq;
	struct ibv_qp *qp, *rx;
	struct ibv_ah *ah[3];
	uint32_t dqpn[3];
	union ibv_gid local, unreach;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	struct ibv_wc wc;
	int i;

	eng_setup(&o);
	sge.addr = (uintptr_t)E->buf_b;
	sge.length = 4096;
	sge.lkey = E->mr_b->lkey;
	cq = cq_new();
	rcq = cq_new();
	qp = qp_new(IBV_QPT_UD, cq);
	rx = qp_new(IBV_QPT_UD, rcq);
	ud_rts(qp);
	ud_rts(rx);
	ENG_CHECK(!ibv_post_recv(rx, &rwr, &bad), "ibv_post_recv");
	eng_gid_local(&local);
	eng_gid_unreach(&unreach);
	/* WR 1 to rx, WR 2 nowhere, WR 3 to rx: one batch, three runs */
	ah[0] = ah[2] = ah_to(&local);
	ah[1] = ah_to(&unreach);
	for (i = 0; i < 3; i++)
		dqpn[i] = rx->qp_num;
	post_ud(qp, 3, ah, dqpn);
	/* the batch left when ibv_post_send let go of the engine lock, and
	 * the completions were settled before it returned, in SQ order */
	expect_wc(cq, 1, IBV_WC_SUCCESS);
	expect_wc(cq, 2, IBV_WC_LOC_QP_OP_ERR);
	expect_wc(cq, 3, IBV_WC_WR_FLUSH_ERR);
	ENG_CHECK(!eng_poll(cq, &wc), "a fourth completion");
	ENG_CHECK(qp_state(qp) == IBV_QPS_ERR, "QP state %d", qp_state(qp));
	/* a destination the kernel refuses says nothing about GSO */
	ENG_CHECK(!eng_cnt(UROCE_CNT_TX_GSO_OFF), "GSO turned off");
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_SEND_FAILED) == 1, "tx_send_failed %llu",
		  (unsigned long long)eng_cnt(UROCE_CNT_TX_SEND_FAILED));
	/* WR 1 reached rx */
	wait_cq = rcq;
	ENG_CHECK(eng_run(cq_ready, 1 * MS), "WR 1 never arrived");
	expect_wc(rcq, 7, IBV_WC_SUCCESS);
	ahs_free();
}

/* a firewall's EPERM in a batch: that run is lost, the runs after it go
 * and GSO stays on (netfilter drops a GSO run whole, as iptables'
 * statistic match does in fault.loss-*) */
static void t_ud_batched_filtered(void)
{
	struct eng_opts o = { .gso = true, .unreach_err = -EPERM };
	struct ibv_cq *cq, *rcq;
	struct ibv_qp *qp, *rx;
	struct ibv_ah *ah[3];
	uint32_t dqpn[3];
	union ibv_gid local, filtered;
	struct ibv_sge sge[2];
	struct ibv_recv_wr rwr[2], *bad;
	struct ibv_wc wc;
	int i;

	eng_setup(&o);
	cq = cq_new();
	rcq = cq_new();
	qp = qp_new(IBV_QPT_UD, cq);
	rx = qp_new(IBV_QPT_UD, rcq);
	ud_rts(qp);
	ud_rts(rx);
	for (i = 0; i < 2; i++) {
		sge[i].addr = (uintptr_t)E->buf_b + (uint64_t)i * 4096;
		sge[i].length = 4096;
		sge[i].lkey = E->mr_b->lkey;
		rwr[i] = (struct ibv_recv_wr){ .wr_id = 7 + (uint64_t)i,
					       .sg_list = &sge[i],
					       .num_sge = 1 };
		ENG_CHECK(!ibv_post_recv(rx, &rwr[i], &bad), "ibv_post_recv");
	}
	eng_gid_local(&local);
	eng_gid_unreach(&filtered);
	/* WR 1 to rx, WR 2 into the firewall, WR 3 to rx: three runs */
	ah[0] = ah[2] = ah_to(&local);
	ah[1] = ah_to(&filtered);
	for (i = 0; i < 3; i++)
		dqpn[i] = rx->qp_num;
	post_ud(qp, 3, ah, dqpn);
	/* UD: a dropped datagram is a sent one (rxe_send: -EAGAIN) */
	for (i = 0; i < 3; i++)
		expect_wc(cq, (uint64_t)i + 1, IBV_WC_SUCCESS);
	ENG_CHECK(qp_state(qp) == IBV_QPS_RTS, "QP state %d", qp_state(qp));
	ENG_CHECK(!eng_cnt(UROCE_CNT_TX_GSO_OFF), "GSO turned off");
	ENG_CHECK(atomic_load(&E->dev->net.gso), "GSO off");
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_FILTERED) == 1, "tx_filtered %llu",
		  (unsigned long long)eng_cnt(UROCE_CNT_TX_FILTERED));
	/* WR 1 and WR 3 reached rx */
	wait_cq = rcq;
	ENG_CHECK(eng_run(cq_ready, 1 * MS), "nothing arrived");
	expect_wc(rcq, 7, IBV_WC_SUCCESS);
	ENG_CHECK(eng_run(cq_ready, 1 * MS), "WR 3 never arrived");
	expect_wc(rcq, 8, IBV_WC_SUCCESS);
	ENG_CHECK(!eng_poll(rcq, &wc), "a third receive");
	ahs_free();
}

/* batched UD that all goes: every completion there when post returns */
static void t_ud_batched_ok(void)
{
	struct eng_opts o = { .gso = true };
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah[8];
	uint32_t dqpn[8];
	union ibv_gid local;
	int i, round;

	eng_setup(&o);
	cq = cq_new();
	qp = qp_new(IBV_QPT_UD, cq);
	ud_rts(qp);
	eng_gid_local(&local);
	for (i = 0; i < 8; i++) {
		ah[i] = ah_to(&local);
		dqpn[i] = 0x321;
	}
	for (round = 0; round < 3; round++) {
		post_ud(qp, 8, ah, dqpn);
		for (i = 0; i < 8; i++)
			expect_wc(cq, (uint64_t)i + 1, IBV_WC_SUCCESS);
	}
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_GSO_SENDS) > 0, "nothing was batched");
	ENG_CHECK(!E->dev->tx.queued_head, "a QP still has WQEs queued");
	ahs_free();
}

/* ---- UC and RC ---- */

static void uc_no_route(bool gso)
{
	struct eng_opts o = { .gso = gso };
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;

	eng_setup(&o);
	cq = cq_new();
	qp = qp_new(IBV_QPT_UC, cq);
	eng_gid_unreach(&gid);
	conn_rts(qp, &gid, 0x123);
	/* three packets (MTU 1024) */
	post_send_len(qp, IBV_WR_SEND, 1, 3000);
	post_send_len(qp, IBV_WR_SEND, 2, 100);
	expect_wc(cq, 1, IBV_WC_LOC_QP_OP_ERR);
	expect_wc(cq, 2, IBV_WC_WR_FLUSH_ERR);
	ENG_CHECK(qp_state(qp) == IBV_QPS_ERR, "QP state %d", qp_state(qp));
}

static void t_uc_no_route(void)
{
	uc_no_route(false);
}

static void t_uc_no_route_batched(void)
{
	uc_no_route(true);
}

/*
 * RC: a send error is loss, whatever it is: the retries decide, and end
 * in RETRY_EXC_ERR if the route does not come back (a link that flaps
 * for half a second must not end the connection: fault.flap-short)
 */
static void rc_no_route(bool gso)
{
	struct eng_opts o = { .gso = gso };
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;

	eng_setup(&o);
	cq = cq_new();
	qp = qp_new(IBV_QPT_RC, cq);
	eng_gid_unreach(&gid);
	conn_rts(qp, &gid, 0x123);
	post_send_len(qp, IBV_WR_RDMA_WRITE, 1, 8192);
	post_send_len(qp, IBV_WR_RDMA_WRITE, 2, 100);
	wait_cq = cq;
	ENG_CHECK(eng_run(cq_ready, 10000 * MS), "no completion");
	expect_wc(cq, 1, IBV_WC_RETRY_EXC_ERR);
	expect_wc(cq, 2, IBV_WC_WR_FLUSH_ERR);
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 8, "%llu timeouts",
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMEOUTS));
	ENG_CHECK(!eng_cnt(UROCE_CNT_TX_SEND_FAILED), "a WQE failed");
	ENG_CHECK(qp_state(qp) == IBV_QPS_ERR, "QP state %d", qp_state(qp));
}

static void t_rc_no_route(void)
{
	rc_no_route(false);
}

static void t_rc_no_route_batched(void)
{
	rc_no_route(true);
}

static const struct eng_test tests[] = {
	{ "ud_no_route", t_ud_no_route },
	{ "ud_enobufs", t_ud_enobufs },
	{ "ud_eperm", t_ud_eperm },
	{ "ud_batched", t_ud_batched },
	{ "ud_batched_ok", t_ud_batched_ok },
	{ "ud_batched_filtered", t_ud_batched_filtered },
	{ "uc_no_route", t_uc_no_route },
	{ "uc_no_route_batched", t_uc_no_route_batched },
	{ "rc_no_route", t_rc_no_route },
	{ "rc_no_route_batched", t_rc_no_route_batched },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, UROCE_ARRAY_SIZE(tests));
}
