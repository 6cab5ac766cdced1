// SPDX-License-Identifier: MIT
/*
 * Delay-based congestion control (docs/congestion.md, "Delay") on the
 * simulated wire and the fake clock: a link of its own bandwidth with a
 * queue in front of it (eng_opts.link_bps) or a standing delay that no
 * sender drains (E->extra_ns), and the requester's rate and queue.
 */
#include <string.h>

#include "harness.h"

#define NWR	 64 /* a batch: 4 MiB, long enough to control */
#define NAREA	 16 /* 64 KiB areas in the 1 MiB buffers */
#define WR_LEN	 65536u
#define TICK_NS	 100000ull /* the samplers look every 100 us */
#define AI_BYTES (10ull * 1000000 / 8)

struct sampled {
	uint64_t rate_min, rate_max; /* of the paced rate (0: unpaced) */
	uint64_t q_sum, q_n;	     /* the link's queueing delay */
};

static struct sampled S;
static uint64_t tick_at;

static bool done_or_tick(struct eng *e)
{
	return eng_all_done(e) || e->now >= tick_at;
}

static void sample(void)
{
	uint64_t r = eng_uqp(E->a)->cc.rate;

	if (r && (!S.rate_min || r < S.rate_min))
		S.rate_min = r;
	if (r > S.rate_max)
		S.rate_max = r;
	S.q_sum += E->qdelay_ns;
	S.q_n++;
}

/* NWR WRITEs of 64 KiB from A, completed, sampling every TICK_NS;
 * returns the fake ns taken */
static uint64_t batch(uint64_t wr0)
{
	uint64_t t = E->now;
	unsigned int i;

	for (i = 0; i < NWR; i++)
		eng_post_send(E->a, IBV_WR_RDMA_WRITE, wr0 + i,
			      (i % NAREA) * WR_LEN, WR_LEN,
			      rva((i % NAREA) * WR_LEN), E->mr_b->rkey);
	eng_wait(NWR, 0);
	for (;;) {
		tick_at = E->now + TICK_NS;
		if (!eng_run(done_or_tick, 60000 * MS))
			ENG_CHECK(0, "not completed");
		sample();
		if (eng_all_done(E))
			break;
	}
	for (i = 0; i < NWR; i++)
		eng_expect_ok(&E->wc_a[i], wr0 + i);
	return E->now - t;
}

static double mbps(uint64_t bytes_per_s)
{
	return bytes_per_s * 8 / 1e6;
}

/* the mean queueing delay and the throughput of nb batches, from wr0 */
static void stream(unsigned int nb, uint64_t wr0, double *q_us, double *gbps)
{
	uint64_t t = 0;
	unsigned int i;

	memset(&S, 0, sizeof(S));
	for (i = 0; i < nb; i++)
		t += batch(wr0 + i * NWR);
	*q_us = S.q_n ? S.q_sum / (double)S.q_n / 1e3 : 0;
	*gbps = (double)nb * NWR * WR_LEN * 8 / (double)t;
}

/*
 * A 1 Gbit/s link behind a queue of no limit.  Loss-based alone, the
 * requester keeps its whole window in the queue (milliseconds of it);
 * with the delay control the queue stays near the target (200 us) and
 * the link stays busy.
 */
static void t_delay_queue(void)
{
	struct eng_opts o = { .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256,
			      .cc_delay_us = 200,
			      .link_bps = 125000000 };
	double q_off, q_on, g_off, g_on, q_warm, g_warm;

	eng_setup(&o);
	eng_pattern();
	E->dev->cc.delay = false;
	stream(1, 0, &q_off, &g_off);
	E->dev->cc.delay = true;
	stream(1, 1000, &q_warm, &g_warm); /* finds the rate */
	stream(3, 2000, &q_on, &g_on);
	fprintf(stderr,
		"off: queue %.0f us, %.3f Gbit/s; delay: queue %.0f us, "
		"%.3f Gbit/s (%llu cuts, rate %.0f Mbit/s, RTT %.0f/%.0f "
		"us)\n",
		q_off, g_off, q_on, g_on,
		(unsigned long long)eng_cnt(UROCE_CNT_CC_DELAY_CUTS),
		mbps(eng_uqp(E->a)->cc.rate), eng_uqp(E->a)->cc.rtt_ns / 1e3,
		eng_uqp(E->a)->cc.base_ns / 1e3);
	ENG_CHECK(q_off > 1000, "off: queue only %.0f us", q_off);
	ENG_CHECK(eng_cnt(UROCE_CNT_CC_DELAY_CUTS) > 0, "no cut");
	ENG_CHECK(q_on < 300, "delay: queue %.0f us, target 200", q_on);
	ENG_CHECK(g_on > 0.8, "delay: %.3f Gbit/s of 1", g_on);
	/* the rate moved both ways: cuts above target, steps below */
	ENG_CHECK(S.rate_min && S.rate_max >= S.rate_min + 10 * AI_BYTES,
		  "rate %.0f..%.0f Mbit/s", mbps(S.rate_min), mbps(S.rate_max));
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, NAREA * WR_LEN), "data");
}

/*
 * The rate falls when the RTT rises above the target (a delay the cuts
 * do not drain: after two cuts the QP falls back to its loss-based
 * window), and once the RTT is back below target the QP is back at full
 * speed, unpaced until the delay rises again.
 */
static void t_delay_step(void)
{
	struct eng_opts o = { .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256,
			      .cc_delay_us = 50 };
	struct uroce_qp *a;
	uint64_t cuts, low, free_rate;
	double q, g, g_clean;

	eng_setup(&o);
	eng_pattern();
	a = eng_uqp(E->a);
	stream(1, 0, &q, &g_clean);
	ENG_CHECK(a->cc.base_ns > 0, "no RTT sample");
	ENG_CHECK(a->cc.rate == 0 && a->cc.cuts == 0,
		  "cut on a clean path (RTT %.1f us, base %.1f)",
		  a->cc.rtt_ns / 1e3, a->cc.base_ns / 1e3);

	/* 300 us more on every packet: above base + 50 us */
	E->extra_ns = 300000;
	stream(1, 100, &q, &g);
	cuts = a->cc.cuts;
	low = S.rate_min;
	free_rate = a->cc.free_rate;
	fprintf(stderr, "high: %llu cuts, rate %.0f..%.0f Mbit/s of %.0f\n",
		(unsigned long long)cuts, mbps(S.rate_min), mbps(S.rate_max),
		mbps(free_rate));
	ENG_CHECK(cuts > 0 && eng_cnt(UROCE_CNT_CC_DELAY_CUTS) == cuts,
		  "no cut with the RTT above target");
	ENG_CHECK(low && low <= free_rate / 2, "rate %.0f of %.0f Mbit/s",
		  mbps(low), mbps(free_rate));

	/* back below the target */
	E->extra_ns = 0;
	stream(1, 200, &q, &g);
	fprintf(stderr, "low again: %.3f Gbit/s, clean %.3f, rate now %.0f\n",
		g, g_clean, mbps(a->cc.rate));
	ENG_CHECK(a->cc.cuts == cuts, "cut below the target");
	ENG_CHECK(!a->cc.loss_mode, "still in loss mode");
	ENG_CHECK(g >= 0.8 * g_clean, "%.3f Gbit/s, clean %.3f", g, g_clean);
}

/*
 * A standing delay that the QP's cuts do not drain (a TCP flow's full
 * queue): once its cuts took the rate to a quarter and the RTT is still
 * up, the QP is left to its loss-based window, unpaced, so it is not
 * starved: the rate never fell below 1/4 of where it began nor below the
 * floor, and the transfer takes no more than 1.25 times as long as with
 * the control off.  When the standing queue is gone, the control is back.
 */
static void t_delay_cap(void)
{
	struct eng_opts o = { .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256,
			      .cc_delay_us = 50 };
	struct uroce_qp *a;
	double q, g_on, g_off;

	eng_setup(&o);
	eng_pattern();
	a = eng_uqp(E->a);
	stream(1, 0, &q, &g_on);
	E->extra_ns = 2 * MS;
	E->dev->cc.delay = false;
	stream(1, 100, &q, &g_off);
	E->dev->cc.delay = true;
	stream(4, 200, &q, &g_on);
	fprintf(stderr,
		"standing 2 ms: off %.3f Gbit/s, delay %.3f Gbit/s; %llu "
		"cuts, %llu fallbacks, rate %.0f..%.0f Mbit/s, now %.0f\n",
		g_off, g_on, (unsigned long long)a->cc.cuts,
		(unsigned long long)a->cc.fallbacks, mbps(S.rate_min),
		mbps(S.rate_max), mbps(a->cc.rate));
	ENG_CHECK(a->cc.fallbacks >= 1 && a->cc.loss_mode, "never fell back");
	ENG_CHECK(eng_cnt(UROCE_CNT_CC_DELAY_FALLBACKS) == a->cc.fallbacks,
		  "counter");
	ENG_CHECK(a->cc.rate == 0, "still paced in loss mode");
	ENG_CHECK(S.rate_min >= S.rate_max / 4 &&
			  S.rate_min >= 10ull * 1000000 / 8,
		  "rate fell to %.1f of %.1f Mbit/s", mbps(S.rate_min),
		  mbps(S.rate_max));
	ENG_CHECK(g_on * 1.25 >= g_off, "starved: %.3f against %.3f Gbit/s",
		  g_on, g_off);
	/* the standing queue drains: below target, the control is back */
	E->extra_ns = 0;
	stream(1, 300, &q, &g_on);
	ENG_CHECK(!a->cc.loss_mode, "still in loss mode");
}

/*
 * At its most back-off (a quarter of the rate it had when the RTT rose)
 * the QP holds for a few RTTs before it takes the queue for someone
 * else's: other flows through it may have begun to cut later.  A 2 ms
 * delay that lasts 3 RTTs beyond the QP's last cut is drained in time:
 * no fallback, and the control goes on.
 */
static void t_delay_hold(void)
{
	struct eng_opts o = { .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256,
			      .cc_delay_us = 50 };
	uint64_t held_at = 0;
	struct uroce_qp *a;
	unsigned int i;

	eng_setup(&o);
	eng_pattern();
	a = eng_uqp(E->a);
	stream(1, 0, &(double){ 0 }, &(double){ 0 });
	E->extra_ns = 2 * MS;
	for (i = 0; i < NWR; i++)
		eng_post_send(E->a, IBV_WR_RDMA_WRITE, 100 + i,
			      (i % NAREA) * WR_LEN, WR_LEN,
			      rva((i % NAREA) * WR_LEN), E->mr_b->rkey);
	eng_wait(NWR, 0);
	while (!eng_all_done(E)) {
		tick_at = E->now + TICK_NS;
		if (!eng_run(done_or_tick, 60000 * MS))
			ENG_CHECK(0, "not completed");
		if (!held_at && a->cc.held_ns)
			held_at = E->now;
		if (held_at && E->now - held_at > 3 * (2 * MS))
			E->extra_ns = 0;
	}
	fprintf(stderr, "held at %.1f ms; %llu cuts, %llu fallbacks\n",
		held_at ? (held_at - E->start) / 1e6 : 0,
		(unsigned long long)a->cc.cuts,
		(unsigned long long)a->cc.fallbacks);
	ENG_CHECK(held_at, "never at the most back-off");
	ENG_CHECK(a->cc.fallbacks == 0 && !a->cc.loss_mode,
		  "fell back while the queue drained");
	ENG_CHECK(a->cc.rate && !a->cc.held_ns, "rate %llu, held %llu",
		  (unsigned long long)a->cc.rate,
		  (unsigned long long)a->cc.held_ns);
}

#define NFLOW	  4
#define FLOW_WR	  64	    /* WRITEs of 64 KiB per flow: 4 MiB */
#define SETTLE_NS (50 * MS) /* the first windows drain, rates settle */

/*
 * Flows through one queue (an incast): NFLOW QPs start at once, each
 * with its whole window in the queue before the first RTT sample
 * (NFLOW MiB: 33 ms at 1 Gbit/s).  Their cuts together drain it, so none
 * takes the queue for someone else's and falls back to its loss-based
 * window; from then on, while all of them send, the queue stays near the
 * target, the link busy and the shares equal.
 */
static void t_delay_share(void)
{
	struct eng_opts o = { .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256,
			      .cc_delay_us = 200,
			      .link_bps = 125000000 };
	uint64_t acked[NFLOW], acked0[NFLOW], q_sum = 0, q_n = 0, t0 = 0;
	uint64_t start, need, mtu, train = 0, train_max = 0;
	unsigned int n0 = 0, n1;
	struct ibv_qp *qa[NFLOW], *qb;
	double sum = 0, sq = 0, jain, util, q_us;
	bool all_busy = true;
	unsigned int i, j;

	eng_setup(&o);
	eng_pattern();
	qa[0] = E->a;
	for (i = 1; i < NFLOW; i++)
		eng_pair(&qa[i], &qb);
	mtu = eng_uqp(E->a)->mtu;
	need = FLOW_WR * (WR_LEN / mtu);
	for (i = 0; i < NFLOW; i++)
		for (j = 0; j < FLOW_WR; j++)
			eng_post_send(qa[i], IBV_WR_RDMA_WRITE, i * FLOW_WR + j,
				      (j % NAREA) * WR_LEN, WR_LEN,
				      rva((j % NAREA) * WR_LEN), E->mr_b->rkey);
	eng_wait(NFLOW * FLOW_WR, 0);
	start = E->now;
	/* until the first flow is done: what each had acknowledged */
	while (all_busy) {
		tick_at = E->now + TICK_NS;
		if (!eng_run(done_or_tick, 60000 * MS))
			ENG_CHECK(0, "not completed");
		for (i = 0; i < NFLOW; i++) {
			struct uroce_qp *u = eng_uqp(qa[i]);

			acked[i] = (u->comp.psn - PSN0) & UROCE_PSN_MASK;
			if (acked[i] >= need)
				all_busy = false;
		}
		if (E->now - start < SETTLE_NS)
			continue;
		if (!t0) {
			t0 = E->now;
			n0 = E->ntrace;
			memcpy(acked0, acked, sizeof(acked));
		}
		q_sum += E->qdelay_ns;
		q_n++;
	}
	ENG_CHECK(t0 && E->now > t0 + 10 * MS, "a flow done in %.1f ms",
		  (E->now - start) / 1e6);
	for (i = 0; i < NFLOW; i++) {
		double x = (double)(acked[i] - acked0[i]);

		sum += x;
		sq += x * x;
	}
	/* the longest train of a QP's requests in one send, all paced: a
	 * queue that marks ECN above 64 KiB would mark a 64 KiB train by
	 * itself (the CE marker of the incast benchmark) */
	n1 = E->ntrace;
	for (i = n0; i < n1; i++) {
		const struct eng_pkt *p = &E->trace[i], *q = &E->trace[i - 1];

		if (!p->is_req)
			continue;
		if (q->is_req && q->io_call == p->io_call && q->dqpn == p->dqpn)
			train += p->paylen;
		else
			train = p->paylen;
		if (train > train_max)
			train_max = train;
	}
	jain = sum * sum / (NFLOW * sq);
	util = sum * (double)mtu * 1e9 / (double)(E->now - t0) /
	       (double)o.link_bps;
	q_us = q_sum / (double)q_n / 1e3;
	fprintf(stderr,
		"%u flows: queue %.0f us, utilisation %.3f, Jain %.3f; %llu "
		"cuts, %llu fallbacks; trains of up to %llu bytes\n",
		NFLOW, q_us, util, jain,
		(unsigned long long)eng_cnt(UROCE_CNT_CC_DELAY_CUTS),
		(unsigned long long)eng_cnt(UROCE_CNT_CC_DELAY_FALLBACKS),
		(unsigned long long)train_max);
	ENG_CHECK(eng_cnt(UROCE_CNT_CC_DELAY_FALLBACKS) == 0,
		  "fell back in a queue of its own flows");
	ENG_CHECK(q_us < 400, "queue %.0f us, target 200", q_us);
	ENG_CHECK(util > 0.85, "utilisation %.3f", util);
	ENG_CHECK(jain > 0.95, "Jain's index %.3f", jain);
	ENG_CHECK(train_max <= 32 * 1024 + mtu, "a paced train of %llu bytes",
		  (unsigned long long)train_max);
	if (!eng_run(eng_all_done, 60000 * MS))
		ENG_CHECK(0, "not completed");
	for (i = 0; i < NFLOW * FLOW_WR; i++)
		ENG_CHECK(E->wc_a[i].status == IBV_WC_SUCCESS, "%s",
			  ibv_wc_status_str(E->wc_a[i].status));
}

/*
 * The pacer (DCQCN's and the delay control's): a paced QP that wakes
 * late, as a descheduled progress thread does, sends a short train, not
 * all the tokens of the time it slept: a 64 KiB train would reach the
 * bottleneck at once, and a queue that marks ECN above 64 KiB (the CE
 * marker of the incast benchmark) would mark it by itself.
 */
static void t_pace_burst(void)
{
	struct eng_opts o = { .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256,
			      .cc_delay_us = 200 };
	const uint32_t pkt = 4096 + UROCE_MAX_HDR_LEN;
	struct uroce_qp *a;
	uint64_t sent = 0;
	bool ok;

	eng_setup(&o);
	a = eng_uqp(E->a);
	pthread_mutex_lock(&E->dev->lock);
	a->cc.rate = 250 * 1000000 / 8; /* 250 Mbit/s */
	a->cc.tokens = 0;
	a->cc.tok_ns = E->now;
	/* 10 ms late: 312 KB of tokens at the rate */
	E->now += 10 * MS;
	uroce_clock_set(E->now);
	while ((ok = uroce_cc_pace_ok(a, pkt)) && sent < (1u << 20))
		sent += pkt;
	pthread_mutex_unlock(&E->dev->lock);
	fprintf(stderr, "10 ms late at 250 Mbit/s: a train of %llu bytes\n",
		(unsigned long long)sent);
	ENG_CHECK(!ok && a->req.pace_deadline_ns > E->now, "never held back");
	ENG_CHECK(sent >= 16 * 1024, "a train of %llu bytes",
		  (unsigned long long)sent);
	ENG_CHECK(sent <= 32 * 1024 + pkt, "a train of %llu bytes",
		  (unsigned long long)sent);
}

/*
 * A requester whose thread reads its ACKs late (a process waiting for a
 * core) has not seen a queue: the RTT ends at the ACK's arrival in the
 * kernel, which the socket's timestamp says.  300 us late on every ACK,
 * with a 50 us target: stamped, no cut and the QP stays unpaced; the same
 * without the stamps is cut (what the stamps are for).
 */
static void t_delay_read_late(void)
{
	struct eng_opts o = { .gso = true,
			      .rcvbuf = ENG_RCVBUF_W256,
			      .cc_delay_us = 50 };
	struct uroce_qp *a;
	double q, g;

	eng_setup(&o);
	eng_pattern();
	a = eng_uqp(E->a);
	E->rx_stamps = true;
	stream(1, 0, &q, &g);
	ENG_CHECK(a->cc.base_ns > 0 && a->cc.cuts == 0,
		  "clean path: %llu cuts, base %.1f us",
		  (unsigned long long)a->cc.cuts, a->cc.base_ns / 1e3);

	E->read_late_ns = 300000;
	stream(1, 100, &q, &g);
	fprintf(stderr,
		"late reader, stamped: %llu cuts, RTT %.1f us, base "
		"%.1f\n",
		(unsigned long long)a->cc.cuts, a->cc.rtt_ns / 1e3,
		a->cc.base_ns / 1e3);
	ENG_CHECK(a->cc.cuts == 0 && S.rate_max == 0,
		  "cut for a late reader (%llu cuts, RTT %.1f us)",
		  (unsigned long long)a->cc.cuts, a->cc.rtt_ns / 1e3);
	ENG_CHECK(a->cc.rtt_ns < a->cc.base_ns + 50000, "RTT %.1f us",
		  a->cc.rtt_ns / 1e3);

	E->rx_stamps = false;
	stream(1, 200, &q, &g);
	fprintf(stderr, "late reader, no stamps: %llu cuts, RTT %.1f us\n",
		(unsigned long long)a->cc.cuts, a->cc.rtt_ns / 1e3);
	ENG_CHECK(a->cc.cuts > 0, "no cut without the stamps either");
	ENG_CHECK(!memcmp(E->buf_a, E->buf_b, NAREA * WR_LEN), "data");
}

/* Off (the default): no sample taken, never paced, whatever the RTT. */
static void t_delay_off(void)
{
	double q, g;

	eng_setup(NULL);
	eng_pattern();
	E->extra_ns = 300000;
	stream(2, 0, &q, &g);
	ENG_CHECK(eng_uqp(E->a)->cc.rtt_ns == 0, "sampled with CC off");
	ENG_CHECK(S.rate_max == 0, "paced with CC off");
	ENG_CHECK(eng_cnt(UROCE_CNT_CC_DELAY_CUTS) == 0, "cuts");
}

static const struct eng_test tests[] = {
	{ "delay_queue", t_delay_queue },
	{ "delay_step", t_delay_step },
	{ "delay_cap", t_delay_cap },
	{ "delay_hold", t_delay_hold },
	{ "delay_share", t_delay_share },
	{ "pace_burst", t_pace_burst },
	{ "delay_read_late", t_delay_read_late },
	{ "delay_off", t_delay_off },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, UROCE_ARRAY_SIZE(tests));
}
