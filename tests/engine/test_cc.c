// SPDX-License-Identifier: MIT
/*
 * ECN congestion control (docs/congestion.md, "ECN and CNPs") on the
 * simulated wire: a queue that marks CE, the CNPs it makes the receiver
 * send, and the sender's rate.  The wire has no bandwidth of its own, so
 * what limits a transfer is the window and the rate: a flow that is cut
 * takes longer on the fake clock for the same bytes.
 */
#include <string.h>

#include "harness.h"

#define NWR    16
#define WR_LEN 65536u

/* every data packet A sends goes through a congested queue */
static bool mark_data(struct eng *e, const struct eng_pkt *p)
{
	(void)e;
	return p->is_req && p->paylen;
}

static bool is_cnp(const struct eng_pkt *p)
{
	return p->opcode == UROCE_OP_CNP;
}

static bool not_ect(const struct eng_pkt *p)
{
	return p->opcode != UROCE_OP_CNP && (p->tos & UROCE_ECN_MASK) == 0;
}

/* NWR WRITEs of 64 KiB from A, completed; returns the fake ns taken */
static uint64_t transfer(uint64_t wr0)
{
	uint64_t t = E->now;
	unsigned int i;

	for (i = 0; i < NWR; i++)
		eng_post_send(E->a, IBV_WR_RDMA_WRITE, wr0 + i, i * WR_LEN,
			      WR_LEN, rva(i * WR_LEN), E->mr_b->rkey);
	eng_wait(NWR, 0);
	ENG_CHECK(eng_run(eng_all_done, 60000 * MS), "not completed");
	for (i = 0; i < NWR; i++)
		eng_expect_ok(&E->wc_a[i], wr0 + i);
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, NWR * WR_LEN), "data");
	return E->now - t;
}

/*
 * A clean path, then a marking queue, then a clean one again: the
 * packets are ECT(0); CE marks make B send CNPs to A, at most one per
 * 50 us; each CNP that arrives cuts A's rate, so the marked transfer is
 * much slower; with the marks gone and time passing, the rate recovers.
 */
static void t_ecn_cnp(void)
{
	struct eng_opts o = { .cc = true,
			      .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256 };
	struct uroce_qp *a;
	uint64_t clean, marked, again, cnps;

	eng_setup(&o);
	eng_pattern();
	a = eng_uqp(E->a);
	clean = transfer(0);
	ENG_CHECK(eng_count_sent(is_cnp) == 0, "CNPs on a clean path");
	ENG_CHECK(eng_count_sent(not_ect) == 0, "a packet not ECN-capable");
	ENG_CHECK(a->cc.rate == 0, "paced without a CNP");

	E->mark_ce = mark_data;
	marked = transfer(100);
	cnps = eng_count_sent(is_cnp);
	ENG_CHECK(cnps > 0, "no CNP sent");
	ENG_CHECK(eng_cnt(UROCE_CNT_RX_ECN_CE) > cnps, "every CE got a CNP");
	ENG_CHECK(eng_cnt(UROCE_CNT_CNP_LIMITED) > 0, "no CNP held back");
	/* at most one per 50 us (the first at once) */
	ENG_CHECK(cnps <= marked / 50000 + 1, "%llu CNPs in %.3f ms",
		  (unsigned long long)cnps, marked / 1e6);
	ENG_CHECK(a->cc.cnp_rx == cnps, "A got %llu of %llu CNPs",
		  (unsigned long long)a->cc.cnp_rx, (unsigned long long)cnps);
	ENG_CHECK(eng_cnt(UROCE_CNT_CC_RATE_CUTS) == cnps, "cuts");
	ENG_CHECK(eng_uqp(E->b)->cc.cnp_sent == cnps, "B's count");
	ENG_CHECK(marked > 4 * clean, "marked %.3f ms, clean %.3f ms",
		  marked / 1e6, clean / 1e6);
	/* the window too, once a round trip: from the whole window to
	 * near the least (then a packet a round trip) */
	ENG_CHECK(a->req.cwnd <= 2 * UROCE_TX_WINDOW_MIN,
		  "window %u after %llu CNPs", a->req.cwnd,
		  (unsigned long long)cnps);
	fprintf(stderr,
		"clean %.3f ms, marked %.3f ms, %llu CNPs, rate %.1f "
		"Mbit/s\n",
		clean / 1e6, marked / 1e6, (unsigned long long)cnps,
		a->cc.rate * 8 / 1e6);

	/* the queue drains: 100 ms without a CNP and the rate is back; the
	 * window, which the CNPs cut too (uroce_req_ecn), slow-starts back
	 * within the next transfer, and the one after runs as the first */
	E->mark_ce = NULL;
	E->now += 100 * MS;
	uroce_clock_set(E->now);
	again = transfer(200);
	ENG_CHECK(eng_count_sent(is_cnp) == cnps, "CNPs after the marks");
	ENG_CHECK(a->cc.rate == 0, "still paced at %.1f Mbit/s",
		  a->cc.rate * 8 / 1e6);
	ENG_CHECK(again < 4 * clean, "again %.3f ms, clean %.3f ms",
		  again / 1e6, clean / 1e6);
	again = transfer(300);
	ENG_CHECK(4 * again < 5 * clean, "then %.3f ms, clean %.3f ms",
		  again / 1e6, clean / 1e6);
}

/* Off (the default): no ECT, no CNP, no pacing, whatever the marks. */
static void t_ecn_off(void)
{
	eng_setup(NULL);
	eng_pattern();
	E->mark_ce = mark_data;
	transfer(0);
	ENG_CHECK(eng_count_sent(not_ect) == E->ntrace, "ECT sent with CC off");
	ENG_CHECK(eng_cnt(UROCE_CNT_RX_ECN_CE) == 0, "CE seen");
	ENG_CHECK(eng_count_sent(is_cnp) == 0, "CNP sent");
}

static const struct eng_test tests[] = {
	{ "ecn_cnp", t_ecn_cnp },
	{ "ecn_off", t_ecn_off },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, UROCE_ARRAY_SIZE(tests));
}
