// SPDX-License-Identifier: MIT
/*
 * Transport scenarios (issue 12): go-back-N, duplicate and implied NAKs,
 * RNR, READ resume at fixed segment boundaries, atomics replay, ACK
 * coalescing, QP destruction mid-burst, and a seeded soak.  Each is a
 * named test (`test_transport NAME`), run by ctest as engine.NAME.
 *
 * A is the requester, B the responder, unless a test says otherwise.
 * PSNs start at 0x100 in both directions (tests/lib/qp_setup.h).
 */
#include <string.h>

#include "harness.h"

/* ---- go-back-N after a gap ---- */

static bool drop_first_psn10(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && p->psn == PSN0 + 10 && !eng_times_sent(p);
}

static bool is_nak_seq(const struct eng_pkt *p)
{
	return p->has_aeth && p->syn == (UROCE_AETH_NAK | UROCE_NAK_PSN_SEQ_ERR);
}

static bool is_psn10_req(const struct eng_pkt *p)
{
	return p->is_req && p->psn == PSN0 + 10;
}

static void t_gbn_gap(void)
{
	eng_setup(NULL);
	eng_pattern();
	E->filter = drop_first_psn10;
	/* a 64 KiB WRITE: 64 packets, the 11th lost on its first trip */
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 65536, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the WRITE never completed");
	eng_expect_ok(&E->wc_a[0], 1);
	/* B saw PSN 11 where it expected 10: one sequence NAK for the gap,
	 * not one per packet after it (IBA 9.7.5.2.1) */
	ENG_CHECK(eng_count_sent(is_nak_seq) == 1, "%u sequence NAKs",
		  eng_count_sent(is_nak_seq));
	ENG_CHECK(eng_cnt(UROCE_CNT_RX_NAK_SEQ) == 1, "NAK not received");
	/* A went back to exactly the lost PSN (go-back-N from the NAK's
	 * PSN) and sent it once more */
	ENG_CHECK(eng_count_sent(is_psn10_req) == 2, "PSN 10 sent %u times",
		  eng_count_sent(is_psn10_req));
	/* the NAK, not the 67 ms ACK timeout, drove the recovery */
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "a timeout fired");
	ENG_CHECK(eng_ms() < 1.0, "took %.3f ms", eng_ms());
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 65536), "data differs");
}

/* ---- a full send buffer holds packets back and loses none ---- */

/* err: what the full buffer's sends fail with (0: EAGAIN); sndbuf: the
 * socket's buffer, 0 for none */
static void sndbuf_full(int err, uint32_t sndbuf)
{
	struct eng_opts o = { .gso = true, .sndbuf = sndbuf };

	eng_setup(&o);
	eng_pattern();
	/* a 64 KiB WRITE, built whole, finds the buffer full three times;
	 * then a SEND behind it while the first is held */
	E->sndbuf_full = 3;
	E->sndbuf_err = err;
	eng_post_recv(E->b, 10, 0, 4096);
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 65536, rva(65536),
		      E->mr_b->rkey);
	ENG_CHECK(uroce_tx_full(E->dev), "nothing held back");
	eng_post_send(E->a, IBV_WR_SEND, 2, 65536, 4096, 0, 0);
	eng_wait(2, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_a[1], 2);
	eng_expect_ok(&E->wc_b[0], 10);
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_SNDBUF_FULL) == 3, "held back %llu",
		  (unsigned long long)eng_cnt(UROCE_CNT_TX_SNDBUF_FULL));
	/* nothing was lost: no resend, no NAK, no timeout, no probe; the
	 * device timer tried again within its backoff (25+50+100 us) */
	ENG_CHECK(!eng_cnt(UROCE_CNT_RETRANSMITS) &&
			  !eng_cnt(UROCE_CNT_TIMEOUTS) &&
			  !eng_cnt(UROCE_CNT_TLP_PROBES),
		  "resent: %llu retransmits, %llu timeouts, %llu probes",
		  (unsigned long long)eng_cnt(UROCE_CNT_RETRANSMITS),
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMEOUTS),
		  (unsigned long long)eng_cnt(UROCE_CNT_TLP_PROBES));
	ENG_CHECK(eng_count_sent(is_nak_seq) == 0, "a sequence NAK");
	ENG_CHECK(eng_ms() < 1.0, "took %.3f ms", eng_ms());
	ENG_CHECK(!uroce_tx_full(E->dev), "still held back");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b + 65536, 65536),
		  "WRITE data differs");
	ENG_CHECK(!memcmp(E->buf_a + 65536, E->buf_b, 4096),
		  "SEND data differs");
	/* no run larger than the buffer: the kernel would refuse it for
	 * good (ENOBUFS past twice the buffer) */
	ENG_CHECK(E->run_bytes_max <= (sndbuf ? sndbuf : 65000u),
		  "a run of %zu bytes", E->run_bytes_max);
}

static void t_sndbuf_full(void)
{
	sndbuf_full(0, 0);
}

/* ENOBUFS: the kernel's refusal of a GSO send that would take the
 * socket past twice its buffer is a full buffer too, not loss; and with
 * a 16 KiB buffer the runs are 16 KiB at most */
static void t_sndbuf_nobufs(void)
{
	sndbuf_full(ENOBUFS, 16384);
}

/* ---- duplicates: every packet twice ---- */

static void t_duplicates(void)
{
	struct eng_opts o = { .dup_ppm = 1000000 };

	eng_setup(&o);
	eng_pattern();
	eng_post_recv(E->b, 10, 0, 8192);
	/* a 16 KiB WRITE then a 4 KiB SEND; the wire doubles each packet */
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 16384, rva(65536),
		      E->mr_b->rkey);
	eng_post_send(E->a, IBV_WR_SEND, 2, 16384, 4096, 0, 0);
	eng_wait(2, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_a[1], 2);
	/* the SEND completed once at B, with its length */
	eng_expect_ok(&E->wc_b[0], 10);
	ENG_CHECK(E->wc_b[0].byte_len == 4096, "byte_len %u",
		  E->wc_b[0].byte_len);
	eng_settle(10 * MS);
	ENG_CHECK(!eng_poll(E->cq_b, &E->wc_b[1]),
		  "a duplicate SEND completed again");
	/* duplicates are counted, never NAKed: a duplicate is not a gap */
	ENG_CHECK(eng_cnt(UROCE_CNT_DUPLICATES) > 0, "no duplicate seen");
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_NAK_SEQ) == 0, "a duplicate was NAKed");
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "a timeout fired");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b + 65536, 16384), "WRITE data");
	ENG_CHECK(!memcmp(E->buf_a + 16384, E->buf_b, 4096), "SEND data");
}

/* ---- implied NAK: an ACK beyond a READ whose responses were lost ---- */

static bool drop_read_resp_once(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return (uroce_opcode[p->opcode].mask & UROCE_M_READ) && !p->is_req &&
	       !eng_times_sent(p);
}

static void t_implied_nak(void)
{
	eng_setup(NULL);
	eng_pattern();
	E->filter = drop_read_resp_once;
	eng_post_recv(E->b, 10, 0, 4096);
	/* a 4 KiB READ (PSNs 0..3), then a SEND (PSN 4) */
	eng_post_send(E->a, IBV_WR_RDMA_READ, 1, 0, 4096, rva(8192),
		      E->mr_b->rkey);
	eng_post_send(E->a, IBV_WR_SEND, 2, 4096, 1024, 0, 0);
	eng_wait(2, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	/* every READ response of the first round was lost; the ACK of the
	 * SEND (PSN 4) says the responder is past the READ, so its
	 * responses were lost: the completer goes back to the READ
	 * (IBA 9.7.5.1.2, "implied NAK") without waiting for the timer */
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_a[1], 2);
	ENG_CHECK(eng_cnt(UROCE_CNT_RETRANSMITS) >= 1, "no go-back");
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "a timeout fired");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b + 8192, 4096), "READ data");
}

/* ---- RNR NAK and retry ---- */

static bool rnr_seen(struct eng *e)
{
	(void)e;
	return eng_cnt(UROCE_CNT_RX_RNR_NAK) >= 2;
}

static bool is_rnr(const struct eng_pkt *p)
{
	return p->has_aeth &&
	       (p->syn & UROCE_AETH_TYPE_MASK) == UROCE_AETH_RNR_NAK;
}

static void t_rnr_retry(void)
{
	unsigned int i;
	uint64_t nak_ns = 0;

	eng_setup(NULL);
	eng_pattern();
	/* a SEND to B, which has no receive posted: RNR NAK (9.7.5.2.8) */
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2048, 0, 0);
	ENG_CHECK(eng_run(rnr_seen, 10 * MS), "no RNR NAK");
	/* A waited the RNR timer the NAK encoded (min_rnr_timer 1: 10 us)
	 * between the NAK and its retry, and rnr_retry 7 retries forever */
	for (i = 0; i < E->ntrace; i++) {
		const struct eng_pkt *p = &E->trace[i];

		if (is_rnr(p) && !nak_ns)
			nak_ns = p->sent_ns;
		else if (nak_ns && p->is_req) {
			ENG_CHECK(p->sent_ns - nak_ns >= 10000 + 10000,
				  "retried %llu ns after the NAK was sent",
				  (unsigned long long)(p->sent_ns - nak_ns));
			break;
		}
	}
	ENG_CHECK(nak_ns && i < E->ntrace, "no retry after the RNR NAK");
	/* a receive now: the next retry lands */
	eng_post_recv(E->b, 10, 4096, 4096);
	eng_wait(1, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_b[0], 10);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b + 4096, 2048), "data");
	/* RNR waits never count as transport retries */
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "a timeout fired");
	ENG_CHECK(eng_uqp(E->a)->req.retry_left == 7, "retry_cnt consumed");
}

static void t_rnr_exhausted(void)
{
	struct eng_opts o = { .rnr_retry = 2 };

	eng_setup(&o);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 64, 0, 0);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "no completion");
	/* the first try and two retries met RNR NAKs: the WQE fails with
	 * RNR_RETRY_EXC_ERR (IBA 9.7.5.2.8) and the QP goes to error */
	ENG_CHECK(E->wc_a[0].status == IBV_WC_RNR_RETRY_EXC_ERR, "status %s",
		  ibv_wc_status_str(E->wc_a[0].status));
	ENG_CHECK(eng_cnt(UROCE_CNT_RX_RNR_NAK) == 3, "%llu RNR NAKs",
		  (unsigned long long)eng_cnt(UROCE_CNT_RX_RNR_NAK));
	ENG_CHECK(eng_uqp(E->a)->attr.qp_state == IBV_QPS_ERR,
		  "QP not in error");
}

/* ---- READ resume at fixed segment boundaries ---- */

/* a QP asks for 256 READ responses at once (UROCE_READ_WINDOW), so a
 * READ goes out in segments of 128 */
#define SEG 128u

static bool drop_resp_178(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return !p->is_req && p->psn == PSN0 + SEG + 50 && !eng_times_sent(p);
}

static void t_read_resume(void)
{
	unsigned int i, resent = 0;

	eng_setup(NULL);
	eng_pattern();
	E->filter = drop_resp_178;
	/* a 512 KiB READ: PSNs 0..511, requested in four segments */
	eng_post_send(E->a, IBV_WR_RDMA_READ, 1, 0, 512 * 1024, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 512 * 1024), "data");
	/* the response at PSN 178 was lost; the next one showed the gap.
	 * The resent request starts at 178 and ends where the segment it
	 * belongs to ended (PSN 255), so the responder, which expects 256
	 * after the original segment, sees it as a duplicate to serve
	 * again, never as a request that skips PSNs it still expects.
	 * Every request, first or resent, ends at a segment boundary; only
	 * the resumed one starts inside a segment. */
	for (i = 0; i < E->ntrace; i++) {
		const struct eng_pkt *p = &E->trace[i];
		uint32_t first = (p->psn - PSN0) & UROCE_PSN_MASK;

		if (!p->is_req || !p->has_reth)
			continue;
		ENG_CHECK((first + p->reth_len / 1024) % SEG == 0 &&
				  p->reth_va == rva(first * 1024),
			  "request psn %#x len %u ends inside a segment",
			  p->psn, p->reth_len);
		if (first % SEG) {
			ENG_CHECK(first == SEG + 50,
				  "request at %#x starts inside a segment",
				  p->psn);
			resent++;
		}
	}
	ENG_CHECK(resent == 1, "%u resumed requests", resent);
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "a timeout fired");
}

/* ---- the window: 1 MiB in flight, READ responses 256 packets ---- */

static bool drop_responder(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return !p->is_req;
}

static bool never(struct eng *e)
{
	(void)e;
	return false;
}

/* a data packet sent for the first time */
static bool is_new_data(const struct eng_pkt *p)
{
	return p->is_req && p->paylen && !eng_times_sent(p);
}

/*
 * Packets of 1 KiB (the harness's path MTU, as over Ethernet MTU 1500)
 * and nothing back from B: A sends 1 MiB of WRITEs, 1 024 packets, and
 * waits (a window of 256 packets kept a quarter of that in flight).
 * Let B's ACKs through and every WRITE completes.
 */
static void t_window_bytes(void)
{
	/* a socket buffer whose device budget (rcvbuf / 4.6 KiB) is not
	 * the limit, as the default 32 MiB one's is not */
	struct eng_opts o = { .rcvbuf = 8u << 20 };
	unsigned int i;

	eng_setup(&o);
	eng_pattern();
	E->filter = drop_responder;
	for (i = 0; i < 32; i++)
		eng_post_send(E->a, IBV_WR_RDMA_WRITE, i, (i % 16) * 65536,
			      65536, rva((i % 16) * 65536), E->mr_b->rkey);
	eng_wait(32, 0);
	/* (a tail-loss probe may resend the last one: first sends only) */
	eng_run(never, 500000);
	ENG_CHECK(eng_count_sent(is_new_data) == 1024, "%u packets in flight",
		  eng_count_sent(is_new_data));
	E->filter = NULL;
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "not completed");
	for (i = 0; i < 32; i++)
		eng_expect_ok(&E->wc_a[i], i);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 1 << 20), "data");
}

/*
 * 60-packet WRITEs, unsignalled but the last, as perftest posts them,
 * over a GSO wire through a window of 256 packets and a 10 Gbit/s link:
 * once the window is full, the room comes back as trains of 64 KiB
 * (docs/transport.md, "Refilled by trains"), not in the few packets each
 * ACK frees.  Counted: new data packets per GSO run after the window
 * first filled.
 */
static void t_window_trains(void)
{
	struct eng_opts o = { .rcvbuf = ENG_RCVBUF_W256,
			      .gso = true,
			      .link_bps = 1250000000 };
	unsigned int i, n = 48, pkts = 0, runs = 0, last = ~0u, seen = 0;

	eng_setup(&o);
	eng_pattern();
	for (i = 0; i < n; i++)
		eng_post_send_flags(E->a, IBV_WR_RDMA_WRITE, i, (i % 16) * 61440,
				    61440, rva((i % 16) * 61440), E->mr_b->rkey,
				    i == n - 1 ? IBV_SEND_SIGNALED : 0);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], n - 1);
	for (i = 0; i < E->ntrace; i++) {
		const struct eng_pkt *p = &E->trace[i];

		if (!is_new_data(p) || ++seen <= 256)
			continue;
		pkts++;
		if (p->run != last)
			runs++;
		last = p->run;
	}
	ENG_CHECK(pkts == n * 60 - 256, "%u new packets after the first 256",
		  pkts);
	/* (22 a run here; 5.7 when each ACK's room went at once) */
	ENG_CHECK(pkts >= 16 * runs, "%u packets in %u runs", pkts, runs);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 16 * 61440), "data");
}

/* A 1 MiB READ with nothing back from B: A asks for 256 responses (two
 * requests of 128 KiB) and waits, though its window is 1 024 packets;
 * then the READ completes */
static void t_read_window(void)
{
	unsigned int i, end = 0;

	eng_setup(NULL);
	eng_pattern();
	E->filter = drop_responder;
	eng_post_send(E->a, IBV_WR_RDMA_READ, 1, 0, 1 << 20, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	eng_run(never, 500000);
	/* (a probe asks again for a response already asked for) */
	for (i = 0; i < E->ntrace; i++) {
		const struct eng_pkt *p = &E->trace[i];
		uint32_t last = ((p->psn - PSN0) & UROCE_PSN_MASK) +
				p->reth_len / 1024;

		if (p->is_req && p->has_reth && last > end)
			end = last;
	}
	ENG_CHECK(end == 256, "asked for %u responses", end);
	E->filter = NULL;
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 1 << 20), "data");
}

/* ---- atomics replay from the responder's saved result ---- */

static bool drop_atomic_ack_once(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->opcode == UROCE_OP_RC_ATOMIC_ACK && !eng_times_sent(p);
}

static void t_atomic_replay(void)
{
	uint64_t v = 100, got;

	eng_setup(NULL);
	memcpy(E->buf_b + 64, &v, 8);
	E->filter = drop_atomic_ack_once;
	/* FETCH_ADD 5 at B; its ATOMIC ACKNOWLEDGE is lost */
	eng_post_atomic(E->a, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0, rva(64),
			E->mr_b->rkey, 5, 0);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 1000 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	/* A sent the request again (same PSN); B found it a duplicate and
	 * answered from the result it saved (IBA 9.7.5.1.1): the add ran
	 * once, and A got the value from before it */
	memcpy(&v, E->buf_b + 64, 8);
	memcpy(&got, E->buf_a, 8);
	ENG_CHECK(v == 105, "target is %llu: the add ran %s",
		  (unsigned long long)v, v == 110 ? "twice" : "wrongly");
	ENG_CHECK(got == 100, "A got %llu", (unsigned long long)got);
	ENG_CHECK(eng_cnt(UROCE_CNT_DUPLICATES) >= 1, "no duplicate at B");
	ENG_CHECK(eng_cnt(UROCE_CNT_DUP_ATOMIC_LOST) == 0, "result not saved");
}

/* ---- ACK coalescing ---- */

static bool is_ack(const struct eng_pkt *p)
{
	return p->opcode == UROCE_OP_RC_ACK;
}

static void t_ack_coalescing(void)
{
	unsigned int i;

	eng_setup(NULL);
	for (i = 0; i < 32; i++)
		eng_post_recv(E->b, 100 + i, i * 64, 64);
	/* 32 SEND ONLY packets, each asking for an ACK, all in one burst */
	for (i = 0; i < 32; i++)
		eng_post_send(E->a, IBV_WR_SEND, i, i * 64, 64, 0, 0);
	eng_wait(32, 32);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	for (i = 0; i < 32; i++) {
		eng_expect_ok(&E->wc_a[i], i);
		eng_expect_ok(&E->wc_b[i], 100 + i);
	}
	/* ACKs are cumulative (IBA 9.7.5.1.1): one for the burst, for its
	 * last PSN, instead of 32 */
	ENG_CHECK(eng_count_sent(is_ack) == 1, "%u ACKs",
		  eng_count_sent(is_ack));
	for (i = 0; i < E->ntrace; i++)
		if (is_ack(&E->trace[i]))
			ENG_CHECK(E->trace[i].psn == PSN0 + 31, "ACK psn %#x",
				  E->trace[i].psn);
}

/* ---- QP destruction mid-burst ---- */

static bool half_there(struct eng *e)
{
	return uroce_psn_cmp(eng_uqp(e->b)->resp.epsn, PSN0 + 100) >= 0;
}

static void t_destroy_mid_burst(void)
{
	struct ibv_wc wc;

	eng_setup(NULL);
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 256 * 1024, rva(0),
		      E->mr_b->rkey);
	eng_post_send(E->a, IBV_WR_RDMA_READ, 2, 0, 256 * 1024, rva(0),
		      E->mr_b->rkey);
	/* run until B has taken 100 packets: the rest are on the wire */
	ENG_CHECK(eng_run(half_there, 10 * MS), "B never got 100 packets");
	ENG_CHECK(E->dev->flow.inflight > 0, "nothing in flight");
	/* destroying a QP with WQEs outstanding is allowed (IBA 11.2.4.4);
	 * it gives back the device budget its packets held */
	ENG_CHECK(ibv_destroy_qp(E->a) == 0, "destroy");
	ENG_CHECK(E->dev->flow.inflight == 0, "budget leaked: %u packets",
		  E->dev->flow.inflight);
	/* what is still on the wire reaches B, whose ACKs and READ
	 * responses now find no QP and are dropped and counted; nothing is
	 * sent on behalf of the dead QP, no timer fires for it */
	eng_settle(200 * MS);
	ENG_CHECK(eng_cnt(UROCE_CNT_DROP_UNKNOWN_QP) > 0, "nothing dropped");
	ENG_CHECK(!eng_poll(E->cq_a, &wc), "a completion after destroy");
	ENG_CHECK(E->dev->prog.armed_deadline_ns == 0, "a timer left armed");
	/* and B, destroyed too, leaves nothing behind */
	ENG_CHECK(ibv_destroy_qp(E->b) == 0, "destroy B");
	eng_settle(200 * MS);
	ENG_CHECK(E->dev->obj.nqps == 0, "%u QPs left", E->dev->obj.nqps);
	ENG_CHECK(E->dev->obj.ntimed == 0, "%u QPs on the timer's list",
		  E->dev->obj.ntimed);
}

/* ---- seeded soak: loss, duplication and reordering together ---- */

static void soak(const struct eng_opts *o)
{
	uint64_t v = 7, got;
	unsigned int i;

	eng_setup(o);
	eng_pattern();
	memcpy(E->buf_b + 900 * 1024, &v, 8);
	for (i = 0; i < 8; i++)
		eng_post_recv(E->b, 100 + i, 512 * 1024 + i * 16384, 16384);
	for (i = 0; i < 8; i++) {
		/* a WRITE, a SEND, a READ and an atomic per round */
		eng_post_send(E->a, IBV_WR_RDMA_WRITE, 4 * i, i * 16384, 16384,
			      rva(i * 16384), E->mr_b->rkey);
		eng_post_send(E->a, IBV_WR_SEND, 4 * i + 1,
			      128 * 1024 + i * 16384, 16384, 0, 0);
		eng_post_send(E->a, IBV_WR_RDMA_READ, 4 * i + 2,
			      256 * 1024 + i * 16384, 16384,
			      rva(256 * 1024 + i * 16384), E->mr_b->rkey);
		eng_post_atomic(E->a, IBV_WR_ATOMIC_FETCH_AND_ADD, 4 * i + 3,
				400 * 1024 + i * 8, rva(900 * 1024),
				E->mr_b->rkey, 1, 0);
	}
	eng_wait(32, 8);
	ENG_CHECK(eng_run(eng_all_done, 60000 * MS), "not completed");
	for (i = 0; i < 32; i++)
		eng_expect_ok(&E->wc_a[i], i);
	for (i = 0; i < 8; i++)
		eng_expect_ok(&E->wc_b[i], 100 + i);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 128 * 1024), "WRITE data");
	ENG_CHECK(!memcmp(E->buf_a + 128 * 1024, E->buf_b + 512 * 1024,
			  128 * 1024),
		  "SEND data");
	ENG_CHECK(!memcmp(E->buf_a + 256 * 1024, E->buf_b + 256 * 1024,
			  128 * 1024),
		  "READ data");
	memcpy(&v, E->buf_b + 900 * 1024, 8);
	ENG_CHECK(v == 15, "8 adds of 1 to 7 gave %llu", (unsigned long long)v);
	for (i = 0; i < 8; i++) {
		memcpy(&got, E->buf_a + 400 * 1024 + i * 8, 8);
		ENG_CHECK(got == 7 + i, "add %u returned %llu", i,
			  (unsigned long long)got);
	}
}

static void t_soak(void)
{
	struct eng_opts o = { .drop_ppm = 20000,
			      .dup_ppm = 10000,
			      .reorder_ppm = 20000,
			      .seed = 1 };

	soak(&o);
}

/* ---- packets of the ring's size on the same-host path ---- */

#define RING_SLOTS 112 /* what net/local_tx.c says of a ring */

static bool drop_first_psn3(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && p->psn == PSN0 + 3 && !eng_times_sent(p);
}

static bool is_first_data_req(const struct eng_pkt *p)
{
	return p->is_req && p->paylen && !eng_times_sent(p) &&
	       (uroce_opcode[p->opcode].mask & (UROCE_M_WRITE | UROCE_M_SEND));
}

static bool is_psn3_again(const struct eng_pkt *p)
{
	return p->is_req && p->psn == PSN0 + 3 && eng_times_sent(p) == 1;
}

static bool is_first_wide_req(const struct eng_pkt *p)
{
	return is_first_data_req(p) && p->paylen == UROCE_RING_MTU;
}

/* longer than the path MTU (1024): a packet of the ring's size, or the
 * last of a message that ends within one */
static bool is_first_long_req(const struct eng_pkt *p)
{
	return is_first_data_req(p) && p->paylen > 1024;
}

static bool is_read_resp_1k(const struct eng_pkt *p)
{
	return !p->is_req && (uroce_opcode[p->opcode].mask & UROCE_M_READ) &&
	       p->paylen == 1024;
}

/*
 * A requester whose peer is behind a ring sends its WRITEs and SENDs in
 * packets of UROCE_RING_MTU whatever the path MTU (1024 here), and the
 * responder, which gets them from a ring, takes them: a 64 KiB WRITE is
 * 65536 / UROCE_RING_MTU packets.  A loss mid-message goes back to the PSN at the same
 * offset; READ responses keep the path MTU (the responder sizes them).
 */
static void t_ring_packets(void)
{
	struct eng_opts o = { .ring = RING_SLOTS };

	eng_setup(&o);
	eng_pattern();
	E->filter = drop_first_psn3;
	eng_post_recv(E->b, 10, 128 * 1024, 16384);
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 65536, rva(0),
		      E->mr_b->rkey);
	eng_post_send(E->a, IBV_WR_SEND, 2, 65536, 10000, 0, 0);
	eng_post_send(E->a, IBV_WR_RDMA_READ, 3, 96 * 1024, 16384,
		      rva(192 * 1024), E->mr_b->rkey);
	eng_wait(3, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_a[1], 2);
	eng_expect_ok(&E->wc_a[2], 3);
	eng_expect_ok(&E->wc_b[0], 10);
	ENG_CHECK(E->wc_b[0].byte_len == 10000, "byte_len %u",
		  E->wc_b[0].byte_len);
	/* the WRITE in whole ring packets, the SEND's 10000 bytes in whole
	 * ones and the rest, on their first trips; go-back-N from the lost
	 * one sent the same again */
	ENG_CHECK(eng_count_sent(is_first_data_req) ==
			  65536 / UROCE_RING_MTU +
				  (10000 + UROCE_RING_MTU - 1) / UROCE_RING_MTU,
		  "%u data packets", eng_count_sent(is_first_data_req));
	ENG_CHECK(eng_count_sent(is_first_wide_req) ==
			  65536 / UROCE_RING_MTU + 10000 / UROCE_RING_MTU,
		  "%u packets of the ring's size",
		  eng_count_sent(is_first_wide_req));
	ENG_CHECK(eng_count_sent(is_psn3_again) == 1, "PSN 3 resent %u times",
		  eng_count_sent(is_psn3_again));
	ENG_CHECK(eng_count_sent(is_read_resp_1k) == 16,
		  "%u READ responses of 1 KiB", eng_count_sent(is_read_resp_1k));
	ENG_CHECK(eng_cnt(UROCE_CNT_RX_NAK_SEQ) == 1, "no sequence NAK");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 65536), "WRITE data");
	ENG_CHECK(!memcmp(E->buf_a + 65536, E->buf_b + 128 * 1024, 10000),
		  "SEND data");
	ENG_CHECK(!memcmp(E->buf_a + 96 * 1024, E->buf_b + 192 * 1024, 16384),
		  "READ data");
}

/*
 * The first packet to a same-host peer connects its ring (net/local.c):
 * the requester asks for the path again at once (dev->net.path_gen), not
 * after its millisecond, so the next WRITE already goes in packets of
 * the ring's size and under the ring's window; with the old answer it
 * went on in packets of the path MTU, a UDP window of them, and filled
 * the ring (integration.local_bidir).
 */
static void t_ring_comes_up(void)
{
	struct eng_opts o = { 0 };

	eng_setup(&o);
	eng_pattern();
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 65536, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "first WRITE");
	ENG_CHECK(eng_count_sent(is_first_data_req) == 65536 / 1024,
		  "%u packets before the ring",
		  eng_count_sent(is_first_data_req));
	E->o.ring = RING_SLOTS;
	atomic_fetch_add(&E->dev->net.path_gen, 1);
	ENG_CHECK(eng_ms() < 1.0, "at %.3f ms: past the path's check", eng_ms());
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 2, 65536, 65536, rva(65536),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "second WRITE");
	eng_expect_ok(&E->wc_a[0], 2);
	ENG_CHECK(eng_count_sent(is_first_wide_req) == 65536 / UROCE_RING_MTU,
		  "%u packets of the ring's size after it came up",
		  eng_count_sent(is_first_wide_req));
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 2 * 65536), "WRITE data");
}

/* The same loss, duplication and reordering as the soak, through a ring
 * (where none of it happens, but for RC's go-back-N it is all one). */
static void t_ring_soak(void)
{
	struct eng_opts o = { .drop_ppm = 20000,
			      .dup_ppm = 10000,
			      .reorder_ppm = 20000,
			      .seed = 1,
			      .ring = RING_SLOTS };

	soak(&o);
	ENG_CHECK(eng_count_sent(is_first_long_req) > 0,
		  "no packet longer than the path MTU");
}

/* A packet longer than the path MTU from a peer never seen on a ring is
 * malformed, as from any other RoCE device: an invalid request NAK. */
static void t_ring_wide_by_udp(void)
{
	struct eng_opts o = { .ring = RING_SLOTS, .ring_by_udp = true };

	eng_setup(&o);
	eng_pattern();
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 65536, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	ENG_CHECK(E->wc_a[0].status == IBV_WC_REM_INV_REQ_ERR, "status %s",
		  ibv_wc_status_str(E->wc_a[0].status));
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_NAK_INV) == 1, "%llu invalid NAKs",
		  (unsigned long long)eng_cnt(UROCE_CNT_TX_NAK_INV));
}

/* ---- the timer walks the QPs that have a deadline, not all ---- */

#define IDLE_PAIRS 256

static bool drop_tail_once(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && p->psn == PSN0 + 15 && !eng_times_sent(p);
}

static void t_timer_walk(void)
{
	static struct ibv_qp *idle[2 * IDLE_PAIRS];
	unsigned int i, joined = 0;
	uint64_t timed;

	eng_setup(NULL);
	eng_pattern();
	for (i = 0; i < IDLE_PAIRS; i++)
		eng_pair(&idle[2 * i], &idle[2 * i + 1]);
	/* the last packet of a 16 KiB WRITE lost: no later packet makes a
	 * NAK, so only A's timer (the tail-loss probe, else the ACK
	 * timeout) can recover it */
	E->filter = drop_tail_once;
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, 16384, rva(0),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 1000 * MS), "the WRITE never completed");
	eng_expect_ok(&E->wc_a[0], 1);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 16384), "data differs");
	timed = eng_cnt(UROCE_CNT_TLP_PROBES) + eng_cnt(UROCE_CNT_TIMEOUTS);
	ENG_CHECK(timed >= 1, "no timer recovered the tail");
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMER_PASSES) >= 1, "no timer pass");
	/* the idle QPs never set a deadline, so no pass walked them */
	for (i = 0; i < 2 * IDLE_PAIRS; i++)
		joined += eng_uqp(idle[i])->timed_idx != UINT32_MAX;
	ENG_CHECK(joined == 0, "%u idle QPs on the timer's list", joined);
	ENG_CHECK(E->dev->obj.ntimed <= 2, "%u QPs on the timer's list of %u",
		  E->dev->obj.ntimed, E->dev->obj.nqps);
	/* a destroyed QP leaves the list (the timer would walk freed
	 * memory: ASan) */
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 2, 0, 16384, rva(0),
		      E->mr_b->rkey);
	ENG_CHECK(eng_uqp(E->a)->timed_idx != UINT32_MAX,
		  "a QP with packets out has no timer");
	ENG_CHECK(ibv_destroy_qp(E->a) == 0, "destroy");
	for (i = 0; i < E->dev->obj.ntimed; i++)
		ENG_CHECK(E->dev->obj.timed[i]->timed_idx == i,
			  "list index %u broken", i);
	eng_settle(200 * MS);
	ENG_CHECK(E->dev->prog.armed_deadline_ns == 0, "a timer left armed");
}

/* ---- end-to-end credits (IBA 9.7.7.2) ---- */

static uint64_t until_ns;

static bool reached(struct eng *e)
{
	return e->now >= until_ns;
}

/* run the wire and the timers for ns of the fake clock */
static void run_for(uint64_t ns)
{
	until_ns = E->now + ns;
	eng_thread_sleeps(until_ns);
	eng_run(reached, ns + MS);
}

static bool is_send_req(const struct eng_pkt *p)
{
	return p->is_req && (uroce_opcode[p->opcode].mask & UROCE_M_SEND);
}

/* 4 SENDs into B's 4 receives: B's last ACK counts none left */
static void credits_exhaust(void)
{
	unsigned int i;

	eng_pattern();
	for (i = 0; i < 4; i++)
		eng_post_recv(E->b, 10 + i, i * 4096, 4096);
	for (i = 0; i < 4; i++)
		eng_post_send(E->a, IBV_WR_SEND, 1 + i, i * 1024, 1024, 0, 0);
	eng_wait(4, 4);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the first SENDs");
	ENG_CHECK(eng_uqp(E->a)->req.e2e, "A never saw a credit count");
	ENG_CHECK(eng_uqp(E->a)->req.rq_limit == 4, "A's limit is message %u",
		  eng_uqp(E->a)->req.rq_limit);
}

static void t_credits_hold(void)
{
	unsigned int i, sends;
	uint64_t posted;

	eng_setup(NULL);
	credits_exhaust();
	/* a WRITE takes no receive: it goes */
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 9, 0, 1024, rva(65536),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the WRITE was held");
	eng_expect_ok(&E->wc_a[0], 9);
	/* 4 more SENDs: held at A, not sent into an RNR NAK */
	for (i = 0; i < 4; i++)
		eng_post_send(E->a, IBV_WR_SEND, 5 + i, 4096 + i * 1024, 1024,
			      0, 0);
	run_for(300000);
	sends = eng_count_sent(is_send_req);
	ENG_CHECK(sends == 4, "%u SEND packets without room", sends);
	ENG_CHECK(eng_cnt(UROCE_CNT_CREDIT_WAITS) == 1, "%llu credit waits",
		  (unsigned long long)eng_cnt(UROCE_CNT_CREDIT_WAITS));
	/* B posts: its ACK of the last PSN again, with the count, held
	 * for B's next post at most UROCE_ACK_HOLD_NS; A sends then, not
	 * at its fallback's 1 ms */
	for (i = 0; i < 4; i++)
		eng_post_recv(E->b, 20 + i, 16384 + i * 4096, 4096);
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_CREDIT_ACKS) == 1, "%llu credit ACKs",
		  (unsigned long long)eng_cnt(UROCE_CNT_TX_CREDIT_ACKS));
	posted = E->now;
	eng_wait(4, 4);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the held SENDs");
	ENG_CHECK(E->now - posted < 500000, "done %llu ns after the post",
		  (unsigned long long)(E->now - posted));
	for (i = 0; i < 4; i++) {
		eng_expect_ok(&E->wc_a[i], 5 + i);
		eng_expect_ok(&E->wc_b[i], 20 + i);
	}
	ENG_CHECK(!memcmp(E->buf_a + 4096, E->buf_b + 16384, 1024), "SEND data");
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_RNR_NAK) == 0, "an RNR NAK");
	ENG_CHECK(eng_cnt(UROCE_CNT_CREDIT_PROBES) == 0, "a probe");
	ENG_CHECK(eng_cnt(UROCE_CNT_DUPLICATES) == 0,
		  "the credit ACK counted as a duplicate");
}

/* ---- AckReq only where somebody waits (docs/transport.md) ---- */

/* the requests of A in the trace, in order, first trips only */
static unsigned int a_requests(const struct eng_pkt **out, unsigned int max)
{
	unsigned int i, n = 0;

	for (i = 0; i < E->ntrace && n < max; i++)
		if (E->trace[i].is_req && !eng_times_sent(&E->trace[i]))
			out[n++] = &E->trace[i];
	return n;
}

/*
 * Three unsignalled one-packet WRITEs and a signalled one, as a program
 * that signals every Nth (rsockets, UCX) posts them: only the last asks
 * for an ACK, and B's one cumulative ACK completes all four.
 */
static void t_ackreq_signalled(void)
{
	const struct eng_pkt *req[8];
	unsigned int i, n;

	eng_setup(NULL);
	eng_pattern();
	for (i = 0; i < 3; i++)
		eng_post_send_flags(E->a, IBV_WR_RDMA_WRITE, i, i * 1024, 1024,
				    rva(i * 1024), E->mr_b->rkey, 0);
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 3, 3 * 1024, 1024, rva(3 * 1024),
		      E->mr_b->rkey);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "not completed");
	eng_expect_ok(&E->wc_a[0], 3);
	n = a_requests(req, 8);
	ENG_CHECK(n == 4, "%u requests", n);
	for (i = 0; i < 3; i++)
		ENG_CHECK(!req[i]->ackreq, "unsignalled WRITE %u asked", i);
	ENG_CHECK(req[3]->ackreq, "the signalled WRITE did not ask");
	ENG_CHECK(eng_count_sent(is_ack) == 1, "%u ACKs",
		  eng_count_sent(is_ack));
	/* the SQ is empty: the ACK covered the unsignalled ones */
	ENG_CHECK(eng_uqp(E->a)->comp.psn == eng_uqp(E->a)->req.psn,
		  "unacknowledged PSNs left");
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 0, "a probe");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 4096), "data");
}

/*
 * An unsignalled WRITE and nothing after it: it asks for no ACK, B sends
 * none, and the tail-loss probe after the 1 ms floor asks for it, with
 * no timeout and no retry used.  With sq_sig_all every WR asks.
 */
static void t_ackreq_tail(void)
{
	const struct eng_pkt *req[4];
	struct uroce_qp *a;
	unsigned int n;

	eng_setup(NULL);
	eng_pattern();
	a = eng_uqp(E->a);
	eng_post_send_flags(E->a, IBV_WR_RDMA_WRITE, 1, 0, 1024, rva(0),
			    E->mr_b->rkey, 0);
	run_for(900000);
	n = a_requests(req, 4);
	ENG_CHECK(n == 1 && !req[0]->ackreq, "%u requests, asked %d", n,
		  n ? req[0]->ackreq : -1);
	ENG_CHECK(eng_count_sent(is_ack) == 0, "B acknowledged unasked");
	ENG_CHECK(a->comp.psn != a->req.psn, "acknowledged already");
	run_for(2 * MS);
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 1, "%llu probes",
		  (unsigned long long)eng_cnt(UROCE_CNT_TLP_PROBES));
	ENG_CHECK(eng_count_sent(is_ack) == 1, "%u ACKs",
		  eng_count_sent(is_ack));
	ENG_CHECK(a->comp.psn == a->req.psn, "never acknowledged");
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0, "a timeout");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 1024), "data");

	/* the same QP with sq_sig_all, as ibv_create_qp would set it */
	a->sq_sig_all = true;
	eng_post_send_flags(E->a, IBV_WR_RDMA_WRITE, 2, 1024, 1024, rva(1024),
			    E->mr_b->rkey, 0);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, MS), "sq_sig_all: not completed");
	eng_expect_ok(&E->wc_a[0], 2);
	n = a_requests(req, 4);
	ENG_CHECK(n == 2 && req[1]->ackreq, "sq_sig_all: did not ask");
}

/*
 * The RTT is not timed on a packet whose ACK may wait for a later
 * message: an unsignalled one-packet WRITE is not timed; the first
 * packet of an unsignalled 16-packet WRITE, whose last packet asks
 * (every 16th does), is, as any first packet was.
 */
static void t_ackreq_rtt(void)
{
	struct uroce_qp *a;

	eng_setup(NULL);
	eng_pattern();
	a = eng_uqp(E->a);
	E->filter = drop_responder;
	eng_post_send_flags(E->a, IBV_WR_RDMA_WRITE, 1, 0, 1024, rva(0),
			    E->mr_b->rkey, 0);
	run_for(10000);
	ENG_CHECK(!a->req.rtt_sent_ns, "the unsignalled WRITE is timed");
	eng_post_send_flags(E->a, IBV_WR_RDMA_WRITE, 2, 0, 16384, rva(0),
			    E->mr_b->rkey, 0);
	run_for(10000);
	ENG_CHECK(a->req.rtt_sent_ns && a->req.rtt_psn == PSN0 + 1,
		  "timed PSN %#x, want %#x", a->req.rtt_psn, PSN0 + 1);
	E->filter = NULL;
}

/*
 * B stops answering (its QP to the error state) after two unsignalled
 * WRITEs that asked for no ACK: it acknowledges them first, so that A's
 * error, if any, would land on the first request B did not execute.
 */
static void t_ackreq_error(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct uroce_qp *a;
	unsigned int i;

	eng_setup(NULL);
	eng_pattern();
	a = eng_uqp(E->a);
	for (i = 0; i < 2; i++)
		eng_post_send_flags(E->a, IBV_WR_RDMA_WRITE, i, i * 1024, 1024,
				    rva(i * 1024), E->mr_b->rkey, 0);
	run_for(100000);
	ENG_CHECK(eng_count_sent(is_ack) == 0, "B acknowledged unasked");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, 2048), "data");
	if (ibv_modify_qp(E->b, &attr, IBV_QP_STATE))
		ENG_CHECK(0, "B to ERR");
	run_for(100000);
	ENG_CHECK(eng_count_sent(is_ack) == 1, "%u ACKs",
		  eng_count_sent(is_ack));
	ENG_CHECK(a->comp.psn == a->req.psn, "A still waits for an ACK");
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 0, "a probe");
}

/*
 * Unsignalled SENDs against B's receive credits: once fewer than
 * UROCE_ACK_CREDITS_LOW are left by the count A knows, each asks, so the
 * count comes back before A must wait for it.
 */
static void t_ackreq_credits(void)
{
	const struct eng_pkt *req[16];
	unsigned int i, n;

	eng_setup(NULL);
	eng_pattern();
	for (i = 0; i < 8; i++)
		eng_post_recv(E->b, 10 + i, i * 4096, 4096);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 1024, 0, 0);
	eng_wait(1, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the first SEND");
	ENG_CHECK(eng_uqp(E->a)->req.e2e, "A never saw a credit count");
	ENG_CHECK(eng_uqp(E->a)->req.rq_limit - eng_uqp(E->a)->req.rq_msgs >=
			  UROCE_ACK_CREDITS_LOW + 1,
		  "A's limit %u", eng_uqp(E->a)->req.rq_limit);
	for (i = 0; i < 6; i++)
		eng_post_send_flags(E->a, IBV_WR_SEND, 2 + i, 1024 + i * 1024,
				    1024, 0, 0, 0);
	eng_wait(0, 6);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the unsignalled SENDs");
	n = a_requests(req, 16);
	ENG_CHECK(n == 7, "%u requests", n);
	ENG_CHECK(!req[1]->ackreq, "a SEND with credits to spare asked");
	ENG_CHECK(req[6]->ackreq, "the SEND that took the last credit did "
				  "not ask");
	ENG_CHECK(eng_cnt(UROCE_CNT_CREDIT_PROBES) == 0, "a credit probe");
}

/*
 * Past 2^32 receive-taking messages the count wraps: none is numbered 0
 * (that means "takes no receive", and the credit count would skip it),
 * and the SENDs across the wrap go within the count, no RNR NAK.
 */
static void t_credits_wrap(void)
{
	struct uroce_qp *a;
	unsigned int i, mask;

	eng_setup(NULL);
	eng_pattern();
	a = eng_uqp(E->a);
	a->req.rq_msgs = 0xfffffffeu;
	for (i = 0; i < 4; i++)
		eng_post_recv(E->b, 10 + i, i * 4096, 4096);
	for (i = 0; i < 3; i++)
		eng_post_send(E->a, IBV_WR_SEND, 1 + i, i * 1024, 1024, 0, 0);
	mask = a->sq.size - 1;
	for (i = 0; i < 3; i++) {
		const struct uroce_send_wqe *w = &a->sq.wqe[i & mask];

		ENG_CHECK(uroce_wqe_started(w), "SEND %u not started", i);
		ENG_CHECK(w->rq_msg != 0, "SEND %u numbered 0", i);
	}
	eng_wait(3, 3);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the SENDs");
	for (i = 0; i < 3; i++) {
		eng_expect_ok(&E->wc_a[i], 1 + i);
		eng_expect_ok(&E->wc_b[i], 10 + i);
		ENG_CHECK(!memcmp(E->buf_a + i * 1024, E->buf_b + i * 4096, 1024),
			  "SEND %u's data", i);
	}
	/* one receive left: one more SEND goes, the next waits for room */
	for (i = 0; i < 2; i++)
		eng_post_send(E->a, IBV_WR_SEND, 4 + i, 4096 + i * 1024, 1024,
			      0, 0);
	run_for(300000);
	ENG_CHECK(eng_count_sent(is_send_req) == 4, "%u SEND packets",
		  eng_count_sent(is_send_req));
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_RNR_NAK) == 0, "an RNR NAK");
}

/* a peer that never says it posted: the credit ACK is lost */
static uint64_t credit_acks_seen;

static bool drop_credit_ack(struct eng *e, const struct eng_pkt *p)
{
	uint64_t n = eng_cnt(UROCE_CNT_TX_CREDIT_ACKS);

	(void)e;
	(void)p;
	if (n == credit_acks_seen)
		return false;
	credit_acks_seen = n; /* the packet it counted */
	return true;
}

static void t_credits_probe(void)
{
	unsigned int i, sends;

	eng_setup(NULL);
	credits_exhaust();
	E->filter = drop_credit_ack;
	for (i = 0; i < 2; i++)
		eng_post_send(E->a, IBV_WR_SEND, 5 + i, 4096 + i * 1024, 1024,
			      0, 0);
	run_for(300000);
	for (i = 0; i < 4; i++)
		eng_post_recv(E->b, 20 + i, 16384 + i * 4096, 4096);
	run_for(300000);
	sends = eng_count_sent(is_send_req);
	ENG_CHECK(sends == 4, "%u SEND packets before the fallback", sends);
	/* 1 ms after A began to wait, with nothing in flight, one SEND goes
	 * anyway (IBA's one beyond the count); its ACK brings the count */
	eng_wait(2, 2);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the held SENDs");
	ENG_CHECK(eng_ms() >= 1.0, "done at %.3f ms", eng_ms());
	eng_expect_ok(&E->wc_a[0], 5);
	eng_expect_ok(&E->wc_a[1], 6);
	ENG_CHECK(eng_cnt(UROCE_CNT_CREDIT_PROBES) == 1, "%llu probes",
		  (unsigned long long)eng_cnt(UROCE_CNT_CREDIT_PROBES));
	ENG_CHECK(eng_cnt(UROCE_CNT_TX_RNR_NAK) == 0, "an RNR NAK");
}

static const struct eng_test tests[] = {
	{ "gbn_gap", t_gbn_gap },
	{ "sndbuf_full", t_sndbuf_full },
	{ "sndbuf_nobufs", t_sndbuf_nobufs },
	{ "duplicates", t_duplicates },
	{ "implied_nak", t_implied_nak },
	{ "rnr_retry", t_rnr_retry },
	{ "rnr_exhausted", t_rnr_exhausted },
	{ "credits_hold", t_credits_hold },
	{ "credits_probe", t_credits_probe },
	{ "credits_wrap", t_credits_wrap },
	{ "ackreq_signalled", t_ackreq_signalled },
	{ "ackreq_tail", t_ackreq_tail },
	{ "ackreq_credits", t_ackreq_credits },
	{ "ackreq_error", t_ackreq_error },
	{ "ackreq_rtt", t_ackreq_rtt },
	{ "read_resume", t_read_resume },
	{ "window_bytes", t_window_bytes },
	{ "window_trains", t_window_trains },
	{ "read_window", t_read_window },
	{ "atomic_replay", t_atomic_replay },
	{ "ack_coalescing", t_ack_coalescing },
	{ "destroy_mid_burst", t_destroy_mid_burst },
	{ "soak", t_soak },
	{ "ring_packets", t_ring_packets },
	{ "ring_comes_up", t_ring_comes_up },
	{ "ring_soak", t_ring_soak },
	{ "ring_wide_by_udp", t_ring_wide_by_udp },
	{ "timer_walk", t_timer_walk },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, UROCE_ARRAY_SIZE(tests));
}
