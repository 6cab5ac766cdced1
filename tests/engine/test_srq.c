// SPDX-License-Identifier: MIT
/*
 * A shared receive queue under interleaved messages: several RC QPs on one
 * SRQ, whose multi-packet SENDs arrive interleaved (IBA 10.2.9: a QP takes
 * a WQE from the SRQ when a message starts and owns it until the message
 * ends).  UCX's rc_verbs puts every peer's QP on one SRQ; with three or
 * more MPI ranks two peers' 8 KiB sends interleaved after a retransmission
 * and the second QP's packets landed in the first one's WQE ("got active
 * message id 0" and a zeroed header in the other).
 *
 * Two senders A1, A2 on the device, their receivers B1, B2 on one SRQ.
 * A1's 8 KiB SEND loses its second packet on the first trip, so A2's whole
 * SEND arrives between A1's FIRST and the rest of it.  Every receive
 * completion must hold exactly the bytes of the QP it names.
 */
#include <string.h>

#include "harness.h"
#include "../lib/qp_setup.h"

#define MSG   8192u /* 8 packets at the harness's 1024 MTU */
#define NRECV 4u

static struct ibv_srq *srq;
static struct ibv_qp *a1, *a2, *b1, *b2;

static struct ibv_qp *rc_qp(struct ibv_cq *cq, struct ibv_srq *s)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = s,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64,
			 .max_recv_wr = s ? 0 : 64,
			 .max_send_sge = 1,
			 .max_recv_sge = s ? 0 : 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(E->pd, &ia);

	ENG_CHECK(qp, "ibv_create_qp");
	return qp;
}

static void rc_connect(struct ibv_qp *qp, uint32_t dqpn)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ;
	struct uroce_test_rc rts = {
		.timeout = E->o.timeout,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.sq_psn = PSN0,
		.max_rd_atomic = 4,
	};
	union ibv_gid gid;
	const char *failed;

	ENG_CHECK(!ibv_query_gid(E->ctx, 1, 0, &gid), "ibv_query_gid");
	failed = uroce_test_to_rtr(qp, access, dqpn, &gid);
	ENG_CHECK(!failed, "%s", failed ? failed : "");
	ENG_CHECK(!uroce_test_rc_rts(qp, &rts), "RTS");
}

/* A1's second packet, on its first trip only */
static bool drop_a1_second(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && p->dqpn == b1->qp_num && p->psn == PSN0 + 1 &&
	       !eng_times_sent(p);
}

static void post_srq_recv(uint64_t wr_id, uint32_t off)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(E->buf_b + off),
			       .length = MSG,
			       .lkey = E->mr_b->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	ENG_CHECK(!ibv_post_srq_recv(srq, &wr, &bad), "ibv_post_srq_recv");
}

static void post_send(struct ibv_qp *qp, uint64_t wr_id, uint32_t off)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(E->buf_a + off),
			       .length = MSG,
			       .lkey = E->mr_a->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	ENG_CHECK(!ibv_post_send(qp, &wr, &bad), "ibv_post_send");
}

static void t_interleaved_sends(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	unsigned int i;

	eng_setup(NULL);
	eng_pattern();
	srq = ibv_create_srq(E->pd, &sa);
	ENG_CHECK(srq, "ibv_create_srq");
	a1 = rc_qp(E->cq_a, NULL);
	a2 = rc_qp(E->cq_a, NULL);
	b1 = rc_qp(E->cq_b, srq);
	b2 = rc_qp(E->cq_b, srq);
	rc_connect(a1, b1->qp_num);
	rc_connect(b1, a1->qp_num);
	rc_connect(a2, b2->qp_num);
	rc_connect(b2, a2->qp_num);
	for (i = 0; i < NRECV; i++)
		post_srq_recv(100 + i, 65536 + i * MSG);
	/* B's receive buffers start as zeros, as UCX's did */
	memset(E->buf_b + 65536, 0, NRECV * MSG);
	E->filter = drop_a1_second;
	post_send(a1, 1, 0);   /* A1 sends bytes [0, 8K) of buf_a */
	post_send(a2, 2, MSG); /* A2 sends [8K, 16K) */
	eng_wait(2, 2);
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "got %u sends, %u receives",
		  E->got_a, E->got_b);
	for (i = 0; i < 2; i++) {
		const struct ibv_wc *wc = &E->wc_b[i];
		uint32_t slot = (uint32_t)(wc->wr_id - 100);
		uint32_t from = wc->qp_num == b1->qp_num ? 0 : MSG;

		ENG_CHECK(wc->status == IBV_WC_SUCCESS &&
				  wc->opcode == IBV_WC_RECV &&
				  wc->byte_len == MSG && slot < NRECV,
			  "receive %u: status %s, %u bytes, wr_id %llu", i,
			  ibv_wc_status_str(wc->status), wc->byte_len,
			  (unsigned long long)wc->wr_id);
		ENG_CHECK(wc->qp_num == b1->qp_num || wc->qp_num == b2->qp_num,
			  "receive on QP %#x", wc->qp_num);
		ENG_CHECK(!memcmp(E->buf_b + 65536 + slot * MSG,
				  E->buf_a + from, MSG),
			  "receive %u (WQE %u, QP %s) does not hold its QP's message",
			  i, slot, from ? "B2" : "B1");
	}
	ENG_CHECK(E->wc_b[0].wr_id != E->wc_b[1].wr_id,
		  "one WQE completed twice");
	/* the interleaving happened: A1's second packet went twice */
	ENG_CHECK(eng_cnt(UROCE_CNT_RETRANSMITS) > 0, "nothing was resent");
}

/* A QP that moves to the error state mid-message gives its SRQ WQE back
 * as a flushed completion, not silently (IBA 10.3.1: every WQE the QP
 * owns completes in error) */
static bool drop_a1_rest(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && p->dqpn == b1->qp_num && p->psn != PSN0;
}

static void t_error_mid_message(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc;
	unsigned int n = 0;

	eng_setup(NULL);
	srq = ibv_create_srq(E->pd, &sa);
	ENG_CHECK(srq, "ibv_create_srq");
	a1 = rc_qp(E->cq_a, NULL);
	b1 = rc_qp(E->cq_b, srq);
	rc_connect(a1, b1->qp_num);
	rc_connect(b1, a1->qp_num);
	post_srq_recv(100, 65536);
	post_srq_recv(101, 65536 + MSG);
	E->filter = drop_a1_rest;
	post_send(a1, 1, 0);
	eng_run(NULL, 1 * MS); /* B1 has taken WQE 100 */
	ENG_CHECK(!ibv_modify_qp(b1, &attr, IBV_QP_STATE), "to ERR");
	while (eng_poll(E->cq_b, &wc)) {
		ENG_CHECK(wc.wr_id == 100 && wc.status == IBV_WC_WR_FLUSH_ERR,
			  "wr_id %llu status %s", (unsigned long long)wc.wr_id,
			  ibv_wc_status_str(wc.status));
		n++;
	}
	ENG_CHECK(n == 1, "%u flushed receives, want WQE 100 once", n);
}

static const struct eng_test tests[] = {
	{ "srq_interleaved_sends", t_interleaved_sends },
	{ "srq_error_mid_message", t_error_mid_message },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
