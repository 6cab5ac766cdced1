// SPDX-License-Identifier: MIT
/*
 * Loss recovery at RTT scale (issue 17): each way a loss can stall
 * go-back-N (a lost tail, a lost NAK, a lost retransmission, a lost READ
 * response or request, a loss around an atomic) must recover without an
 * ACK timeout: the timeout counter stays 0 and retry_cnt untouched while
 * the fake clock moves far less than the QP's timeout (14: 67 ms).  And a
 * dead peer must still be declared lost within the bound the timeout and
 * retry count give, probes or not.
 *
 * The wire's one-way latency is 10 us (RTT 20 us); every test first does
 * a small exchange so that the requester has an RTT sample.
 */
#include <string.h>

#include "harness.h"

/* the IBA timeout the QPs run with (eng_setup's default, 14) */
#define IBA_TIMEOUT_NS (4096ull << 14)

/* a 1 KiB WRITE that is acknowledged: the first RTT sample */
static void warm_up(void)
{
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 999, 0, 1024,
		      rva(ENG_BUF_SIZE - 4096), E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "warm-up");
	eng_expect_ok(&E->wc_a[0], 999);
	ENG_CHECK(eng_uqp(E->a)->req.srtt_ns, "no RTT sample");
}

static uint64_t t0;

static void start(const struct eng_opts *o, eng_filter_fn filter)
{
	eng_setup(o);
	eng_pattern();
	warm_up();
	E->filter = filter;
	t0 = E->now;
}

/* recovered without a timeout, and in a small part of the timeout */
static void expect_rtt_scale(void)
{
	double ms = (double)(E->now - t0) / 1e6;

	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "an ACK timeout fired");
	ENG_CHECK(eng_uqp(E->a)->req.retry_left == 7, "retry_cnt consumed");
	ENG_CHECK(E->now - t0 < IBA_TIMEOUT_NS / 20,
		  "took %.3f ms: not at RTT scale", ms);
}

/* WR 1 completes, ok, without a timeout and at RTT scale */
static void complete_at_rtt_scale(void)
{
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 1000 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	/* first of all: no ACK timeout, and quickly */
	expect_rtt_scale();
}

/* a WRITE of len bytes from A's buffer to B's, through filter */
static void write_case(eng_filter_fn filter, uint32_t len)
{
	start(NULL, filter);
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, len, rva(0), E->mr_b->rkey);
	complete_at_rtt_scale();
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, len), "data");
}

/* a 16 KiB READ of B's buffer at 64 KiB, through filter */
static void read_case(eng_filter_fn filter)
{
	start(NULL, filter);
	eng_post_send(E->a, IBV_WR_RDMA_READ, 1, 0, 16384, rva(65536),
		      E->mr_b->rkey);
	complete_at_rtt_scale();
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b + 65536, 16384), "data");
}

static bool req_psn(const struct eng_pkt *p, uint32_t off, unsigned int times)
{
	return p->is_req && p->psn == PSN0 + off && eng_times_sent(p) < times;
}

/* ---- the RTT estimate ---- */

static void t_rtt_estimate(void)
{
	struct uroce_qp *qp;
	unsigned int i;

	eng_setup(NULL);
	for (i = 0; i < 16; i++) {
		eng_post_send(E->a, IBV_WR_RDMA_WRITE, i, 0, 1024, rva(0),
			      E->mr_b->rkey);
		eng_wait(1, 0);
		ENG_CHECK(eng_run(eng_all_done, 10 * MS), "WRITE %u", i);
	}
	/* 10 us each way, nothing else: SRTT converges on 20 us and the
	 * variation decays */
	qp = eng_uqp(E->a);
	ENG_CHECK(qp->req.srtt_ns >= 19000 && qp->req.srtt_ns <= 21000,
		  "srtt %llu ns", (unsigned long long)qp->req.srtt_ns);
	ENG_CHECK(qp->req.rttvar_ns < 5000, "rttvar %llu ns",
		  (unsigned long long)qp->req.rttvar_ns);
	/* on a clean path nothing is probed or resent */
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 0, "a probe");
	ENG_CHECK(eng_cnt(UROCE_CNT_RETRANSMITS) == 0, "a retransmission");
}

/* Karn: a sample is never taken from a PSN that was sent twice */
static bool drop_first_write(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && !eng_times_sent(p) && p->psn == PSN0 + 1;
}

static void t_rtt_karn(void)
{
	uint64_t srtt;

	start(NULL, drop_first_write);
	srtt = eng_uqp(E->a)->req.srtt_ns;
	/* the second WRITE's only packet is lost; the probe resends it
	 * after at least 100 us.  Timing it from its first trip would add
	 * that wait to the estimate */
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 1024, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	ENG_CHECK(eng_uqp(E->a)->req.srtt_ns == srtt,
		  "srtt moved from %llu to %llu ns: a resent PSN was timed",
		  (unsigned long long)srtt,
		  (unsigned long long)eng_uqp(E->a)->req.srtt_ns);
	expect_rtt_scale();
}

/* ---- a lost tail ---- */

static bool drop_tail(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	/* the last 3 of the 16 packets of the WRITE, on their first trip
	 * (PSN 0 was the warm-up) */
	return p->is_req && !eng_times_sent(p) &&
	       uroce_psn_cmp(p->psn, PSN0 + 14) >= 0;
}

static void t_lost_tail(void)
{
	/* nothing after the loss reaches B, so B cannot NAK: only the
	 * requester can notice, from the missing ACK */
	write_case(drop_tail, 16384);
	/* a probe of the last packet (PSN 16) drew a NAK for PSN 14, and
	 * A went back there */
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) >= 1, "no probe");
	ENG_CHECK(eng_cnt(UROCE_CNT_RX_NAK_SEQ) == 1, "no NAK");
}

/* ---- a lost NAK ---- */

static bool drop_psn10_and_nak(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	if (p->has_aeth && p->syn == (UROCE_AETH_NAK | UROCE_NAK_PSN_SEQ_ERR))
		return !eng_times_sent(p);
	return req_psn(p, 10, 1);
}

static void t_lost_nak(void)
{
	/* 64 packets; PSN 10 is lost, and so is B's NAK for it.  B stays
	 * quiet for the rest of the flight (one NAK per gap) */
	write_case(drop_psn10_and_nak, 65536);
	/* A's probe of its last packet came at or below the highest PSN B
	 * had seen since its NAK: a new pass without PSN 10, so B sent the
	 * NAK again */
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) >= 1, "no probe");
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_NAK_SEQ_RESENT) >= 1, "NAK not repeated");
}

/* ---- a lost retransmission ---- */

static bool drop_psn10_twice(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return req_psn(p, 10, 2);
}

static void t_lost_retransmission(void)
{
	/* PSN 10 is lost, NAKed, resent by go-back-N, and lost again */
	write_case(drop_psn10_twice, 65536);
	/* the resent PSNs 11.. showed B a second pass without 10: B NAKed
	 * again and A, half an RTT after its first go-back, went back
	 * again (a third trip for PSN 10) */
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_NAK_SEQ_RESENT) >= 1, "NAK not repeated");
	ENG_CHECK(eng_cnt(UROCE_CNT_EARLY_RETRANSMITS) == 2, "%llu go-backs",
		  (unsigned long long)eng_cnt(UROCE_CNT_EARLY_RETRANSMITS));
}

/* ---- READ: a lost response, a lost request, a lost resent response ---- */

static bool drop_last_read_resp(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->opcode == UROCE_OP_RC_READ_RESPONSE_LAST && !eng_times_sent(p);
}

static void t_lost_read_response(void)
{
	/* a 16 KiB READ whose last response is lost: nothing after it
	 * shows the gap */
	read_case(drop_last_read_resp);
	/* the probe asked for the last PSN again: a duplicate READ, which
	 * B served again */
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) >= 1, "no probe");
}

static bool drop_read_request(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->opcode == UROCE_OP_RC_READ_REQUEST && !eng_times_sent(p) &&
	       p->psn == PSN0 + 1;
}

static void t_lost_read_request(void)
{
	read_case(drop_read_request);
	/* the probe (a request for the last PSN) was a gap to B: its NAK
	 * sent A back to the start of the READ */
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) >= 1, "no probe");
	ENG_CHECK(eng_cnt(UROCE_CNT_RX_NAK_SEQ) >= 1, "no NAK");
}

static bool drop_resp5_twice(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return !p->is_req && p->psn == PSN0 + 6 && eng_times_sent(p) < 2;
}

static void t_lost_read_retransmission(void)
{
	/* the response at PSN 6 is lost, the READ resumed from it, and its
	 * response lost again */
	read_case(drop_resp5_twice);
	ENG_CHECK(eng_cnt(UROCE_CNT_EARLY_RETRANSMITS) >= 2, "one go-back");
}

/* ---- atomics: a lost request, a lost result ---- */

static bool drop_atomic_req(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->opcode == UROCE_OP_RC_FETCH_ADD && !eng_times_sent(p);
}

static bool drop_atomic_ack(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->opcode == UROCE_OP_RC_ATOMIC_ACK && !eng_times_sent(p);
}

static void atomic_case(eng_filter_fn filter)
{
	uint64_t v = 100, got;

	start(NULL, filter);
	memcpy(E->buf_b + 64, &v, 8);
	eng_post_atomic(E->a, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, rva(64),
			E->mr_b->rkey, 5, 0);
	complete_at_rtt_scale();
	/* the add ran exactly once, whichever packet was lost: a resent
	 * request B had executed is answered from the saved result */
	memcpy(&v, E->buf_b + 64, 8);
	memcpy(&got, E->buf_a, 8);
	ENG_CHECK(v == 105, "target %llu", (unsigned long long)v);
	ENG_CHECK(got == 100, "A got %llu", (unsigned long long)got);
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) >= 1, "no probe");
}

static void t_lost_atomic_request(void)
{
	atomic_case(drop_atomic_req);
}

static void t_lost_atomic_result(void)
{
	atomic_case(drop_atomic_ack);
	ENG_CHECK(eng_cnt(UROCE_CNT_DUPLICATES) >= 1, "not a replay");
}

/* ---- a dead peer is still declared lost in time ---- */

static bool drop_all_to_b(struct eng *e, const struct eng_pkt *p)
{
	return p->dqpn == e->b->qp_num;
}

static void t_dead_peer(void)
{
	/* timeout 10 (4.19 ms), retry_cnt 3: the first expiry, then three
	 * retries waiting 2x, 4x and 8x as long (docs/transport.md
	 * "Retransmission"): RETRY_EXC_ERR 15 timeouts after the send */
	struct eng_opts o = { .timeout = 10, .retry_cnt = 3 };
	const uint64_t t = 4096ull << 10, bound = 15 * t;
	uint64_t took;

	start(&o, drop_all_to_b);
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 4096, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * bound), "never declared lost");
	took = E->now - t0;
	ENG_CHECK(E->wc_a[0].status == IBV_WC_RETRY_EXC_ERR, "status %s",
		  ibv_wc_status_str(E->wc_a[0].status));
	/* probes went out meanwhile, but neither stretched the bound nor
	 * counted as retries; and they stopped once a quarter of the
	 * timeout apart (1 ms here: five at the 1 ms floor), not one a
	 * millisecond for the whole 63 ms */
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) >= 3 &&
			  eng_cnt(UROCE_CNT_TLP_PROBES) <= 6,
		  "%llu probes",
		  (unsigned long long)eng_cnt(UROCE_CNT_TLP_PROBES));
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUT_RETRIES) == 3, "%llu retries",
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMEOUT_RETRIES));
	ENG_CHECK(took >= bound && took <= bound + t / 8,
		  "declared lost after %.3f ms, bound %.3f ms",
		  (double)took / 1e6, (double)bound / 1e6);
}

/* ---- the last ACK lost, and its sender gone ---- */

static bool drop_first_ack_of_send(struct eng *e, const struct eng_pkt *p)
{
	return p->opcode == UROCE_OP_RC_ACK && p->dqpn == e->a->qp_num &&
	       p->psn == PSN0 + 1 && !eng_times_sent(p);
}

static void t_farewell_ack(void)
{
	start(NULL, drop_first_ack_of_send);
	/* a SEND that B receives and completes; B's ACK for it is lost,
	 * and B's program, done, destroys its QP at once (every pingpong's
	 * last step): nobody is left to answer A's probes */
	eng_post_recv(E->b, 10, 0, 4096);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 1024, 0, 0);
	eng_wait(0, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "B never received");
	eng_expect_ok(&E->wc_b[0], 10);
	ENG_CHECK(ibv_destroy_qp(E->b) == 0, "destroy B");
	/* B's QP sent its last cumulative ACK again as it went: A is done */
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10000 * MS), "A never completed");
	ENG_CHECK(E->wc_a[0].status == IBV_WC_SUCCESS, "A: %s",
		  ibv_wc_status_str(E->wc_a[0].status));
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "an ACK timeout fired");
}

/* ---- seeded loss: heavy, and it still never times out ---- */

static void t_random_loss(void)
{
	struct eng_opts o = { .drop_ppm = 50000, .seed = 7 };
	unsigned int i;

	start(&o, NULL);
	/* 5 % of packets lost both ways, 16 WRITEs of 64 KiB */
	for (i = 0; i < 16; i++)
		eng_post_send(E->a, IBV_WR_RDMA_WRITE, i, i * 65536, 65536,
			      rva(i * 65536), E->mr_b->rkey);
	eng_wait(16, 0);
	ENG_CHECK(eng_run(eng_all_done, 10000 * MS), "not completed");
	for (i = 0; i < 16; i++)
		eng_expect_ok(&E->wc_a[i], i);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 16 * 65536), "data");
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "%llu ACK timeouts",
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMEOUTS));
}

/* ---- the timer set afresh by a send near it (engine/progress.c,
 * uroce_timer_arm) ---- */

/* one 2-byte SEND each way, A first, each answered before the next; the
 * receives are posted first (a receive posted to an empty queue sends a
 * credit ACK, whose hold sets the timer afresh anyway) */
static void ping_pong(unsigned int n)
{
	unsigned int i;

	for (i = 0; i <= n; i++) {
		eng_post_recv(E->b, 10, 0, 64);
		eng_post_recv(E->a, 20, 4096, 64);
	}
	for (i = 0; i < n; i++) {
		eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
		eng_wait(1, 1);
		ENG_CHECK(eng_run(eng_all_done, 10 * MS), "ping %u", i);
		eng_post_send(E->b, IBV_WR_SEND, 2, 4096, 2, 0, 0);
		eng_wait(1, 1);
		ENG_CHECK(eng_run(eng_all_done, 10 * MS), "pong %u", i);
	}
}

/* each send sets a tail-loss probe (1 ms at least) and its ACK clears
 * it, so the timer waits for a probe answered long ago: a send within
 * TIMER_EARLY_NS of it sets it for what is left instead, and a ping-pong
 * of several milliseconds has no timer pass at all */
static void t_timer_early(void)
{
	start(NULL, NULL);
	ping_pong(100);
	ENG_CHECK(E->now - t0 > 3 * MS, "the ping-pong took %.3f ms only",
		  (double)(E->now - t0) / 1e6);
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMER_PASSES) == 0,
		  "%llu timer passes (%llu for nothing)",
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMER_PASSES),
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMER_IDLE_PASSES));
}

/* the tail of a ping-pong whose timer was set afresh is still probed in
 * time: A's last SEND is lost */
static bool drop_last_ping(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && p->dqpn == E->b->qp_num && !eng_times_sent(p);
}

static void t_timer_early_probe(void)
{
	start(NULL, NULL);
	ping_pong(60);
	t0 = E->now;
	E->filter = drop_last_ping;
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_wait(1, 1);
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "the lost ping never came");
	eng_expect_ok(&E->wc_a[0], 1);
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 1, "%llu probes",
		  (unsigned long long)eng_cnt(UROCE_CNT_TLP_PROBES));
	/* the probe's floor and a round trip, not a late timer */
	ENG_CHECK(E->now - t0 < 2 * MS, "recovered in %.3f ms",
		  (double)(E->now - t0) / 1e6);
	expect_rtt_scale();
}

static const struct eng_test tests[] = {
	{ "rtt_estimate", t_rtt_estimate },
	{ "rtt_karn", t_rtt_karn },
	{ "lost_tail", t_lost_tail },
	{ "lost_nak", t_lost_nak },
	{ "lost_retransmission", t_lost_retransmission },
	{ "lost_read_response", t_lost_read_response },
	{ "lost_read_request", t_lost_read_request },
	{ "lost_read_retransmission", t_lost_read_retransmission },
	{ "lost_atomic_request", t_lost_atomic_request },
	{ "lost_atomic_result", t_lost_atomic_result },
	{ "dead_peer", t_dead_peer },
	{ "farewell_ack", t_farewell_ack },
	{ "random_loss", t_random_loss },
	{ "timer_early", t_timer_early },
	{ "timer_early_probe", t_timer_early_probe },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, UROCE_ARRAY_SIZE(tests));
}
