// SPDX-License-Identifier: MIT
/*
 * ACKs held for the application's reply (docs/datapath.md, "ACKs"): a
 * receive burst that an application thread took in its own poll leaves
 * its ACKs for that application's next post, which sends them first and
 * its own packets behind them, in one batch; nothing the QP sends (a
 * request that answers the acknowledged message, a READ response) passes
 * its ACK, not even while another thread is still in the burst; the next
 * poll sends what no post took, and the engine's timer sends it
 * UROCE_ACK_HOLD_NS after the burst at the latest, with the application
 * gone.  Each is a named test (`test_ackhold NAME`), run by ctest as
 * engine.NAME.
 *
 * A sends to B; B answers.  PSNs start at 0x100 in both directions.
 */
#include <string.h>

#include "harness.h"

static struct eng_opts hold_opts(void)
{
	struct eng_opts o;

	memset(&o, 0, sizeof(o));
	o.gso = true; /* batches, as over UDP */
	o.acks_for_post = true;
	return o;
}

/* sent by B (to A's QP) */
static bool from_b(const struct eng_pkt *p)
{
	return p->dqpn == E->a->qp_num;
}

static bool b_ack(const struct eng_pkt *p)
{
	return from_b(p) && p->opcode == UROCE_OP_RC_ACK;
}

/* the index in the trace of B's first packet matching m at or after i,
 * or E->ntrace */
static unsigned int next_of_b(unsigned int i, bool (*m)(const struct eng_pkt *))
{
	for (; i < E->ntrace; i++)
		if (m(&E->trace[i]))
			return i;
	return E->ntrace;
}

static bool b_has_recv(struct eng *e)
{
	return e->got_b || (eng_poll(e->cq_b, &e->wc_b[0]) && ++e->got_b);
}

/* the progress thread's look (engine/progress.c) after the scenario's
 * checks: from here on bursts end as the thread's do */
static void thread_looks(void)
{
	E->o.acks_for_post = false;
	uroce_ack_release_unlocked(E->dev);
}

/* ---- a ping-pong: the ACK of the ping, then B's reply, one batch ---- */

static bool b_req(const struct eng_pkt *p)
{
	return from_b(p) && p->is_req;
}

static void t_ack_before_reply(void)
{
	struct eng_opts o = hold_opts();
	unsigned int reply, ack;

	eng_setup(&o);
	eng_pattern();
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_recv(E->a, 20, 4096, 64);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_wait(0, 1);
	ENG_CHECK(eng_run(b_has_recv, 10 * MS), "B never received the ping");
	eng_expect_ok(&E->wc_b[0], 10);
	/* the ping's ACK waits for B's next call */
	ENG_CHECK(eng_count_sent(b_ack) == 0, "B acknowledged at once");
	eng_post_send(E->b, IBV_WR_SEND, 2, 4096, 2, 0, 0);
	reply = next_of_b(0, b_req);
	ack = next_of_b(0, b_ack);
	ENG_CHECK(reply < E->ntrace && ack < E->ntrace,
		  "the post sent reply %u, ACK %u of %u packets", reply, ack,
		  E->ntrace);
	/* the ACK first (the reply may answer what it acknowledges), both
	 * in the one system call of the post */
	ENG_CHECK(ack < reply, "the reply %u before the ACK %u", reply, ack);
	ENG_CHECK(E->trace[ack].io_call == E->trace[reply].io_call,
		  "ACK and reply in two sends (%u, %u)", E->trace[ack].io_call,
		  E->trace[reply].io_call);
	ENG_CHECK(E->trace[ack].psn == PSN0, "ACK of PSN 0x%x",
		  E->trace[ack].psn);
	thread_looks();
	eng_wait(2, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the ping-pong never ended");
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMEOUTS) == 0 &&
			  eng_cnt(UROCE_CNT_TLP_PROBES) == 0,
		  "a timer had to recover: %llu timeouts, %llu probes",
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMEOUTS),
		  (unsigned long long)eng_cnt(UROCE_CNT_TLP_PROBES));
	ENG_CHECK(!memcmp(E->buf_a + 4096, E->buf_b + 4096, 2), "reply differs");
}

/* ---- B's application answers while the burst is still going on ---- */

/* after the first packet of the burst: B's application (another thread)
 * sees the receive and posts its answer at once */
static void b_answers_mid_burst(struct eng *e)
{
	if (e->got_b || !eng_poll(e->cq_b, &e->wc_b[0]))
		return;
	e->got_b++;
	eng_post_send(e->b, IBV_WR_SEND, 3, 4096, 2, 0, 0);
}

static bool b_ack_of_first(const struct eng_pkt *p)
{
	return b_ack(p) && p->psn == PSN0;
}

static void t_ack_before_reply_mid_burst(void)
{
	struct eng_opts o;
	unsigned int reply, ack;

	memset(&o, 0, sizeof(o));
	o.gso = true; /* the progress thread's burst: ACKs at its end */
	eng_setup(&o);
	eng_pattern();
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_recv(E->b, 11, 64, 64);
	eng_post_recv(E->a, 20, 4096, 64);
	/* two messages that arrive together: one burst */
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_post_send(E->a, IBV_WR_SEND, 2, 64, 2, 0, 0);
	E->mid_burst = b_answers_mid_burst;
	eng_wait(0, 0);
	ENG_CHECK(eng_run(b_has_recv, 10 * MS), "B never received");
	E->mid_burst = NULL;
	eng_expect_ok(&E->wc_b[0], 10);
	reply = next_of_b(0, b_req);
	ack = next_of_b(0, b_ack_of_first);
	ENG_CHECK(reply < E->ntrace, "B's answer was not sent");
	/* the ACK of the message B's application answered goes first */
	ENG_CHECK(ack < reply,
		  "the answer %u before the ACK %u of what it "
		  "answers",
		  reply, ack);
	eng_wait(3, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "never ended");
	/* A: the first SEND acknowledged, B's answer, the second SEND */
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_a[1], 20);
	eng_expect_ok(&E->wc_a[2], 2);
	eng_expect_ok(&E->wc_b[0], 11);
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 0, "a probe was needed");
}

/* ---- a READ response does not pass the ACK of the SEND before it ---- */

static bool b_read_resp(const struct eng_pkt *p)
{
	return from_b(p) && !p->is_req && p->opcode != UROCE_OP_RC_ACK;
}

static bool a_read_req(struct eng *e)
{
	(void)e;
	return next_of_b(0, b_read_resp) < E->ntrace;
}

static void t_ack_before_response(void)
{
	struct eng_opts o = hold_opts();
	unsigned int resp, ack;

	eng_setup(&o);
	eng_pattern();
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_wait(0, 1);
	ENG_CHECK(eng_run(b_has_recv, 10 * MS), "B never received the SEND");
	ENG_CHECK(eng_count_sent(b_ack) == 0, "B acknowledged at once");
	/* the READ after it: B's response must come after that ACK (one
	 * stream of responses, in PSN order) */
	eng_post_send(E->a, IBV_WR_RDMA_READ, 2, 8192, 64, rva(8192),
		      E->mr_b->rkey);
	ENG_CHECK(eng_run(a_read_req, 10 * MS), "B never answered the READ");
	resp = next_of_b(0, b_read_resp);
	ack = next_of_b(0, b_ack);
	ENG_CHECK(ack < resp, "READ response %u before the ACK %u", resp, ack);
	ENG_CHECK(E->trace[ack].psn == PSN0, "ACK of PSN 0x%x",
		  E->trace[ack].psn);
	thread_looks();
	eng_wait(2, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "A never completed");
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_a[1], 2);
	ENG_CHECK(!memcmp(E->buf_a + 8192, E->buf_b + 8192, 64), "READ data");
}

/* ---- no post: the next poll sends the held ACK ---- */

/* A pings; B's application takes it in a poll of its own and holds the
 * ACK for its reply */
static void ping_held(void)
{
	struct eng_opts o = hold_opts();

	eng_setup(&o);
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_wait(0, 1);
	ENG_CHECK(eng_run(b_has_recv, 10 * MS), "B never received the SEND");
	ENG_CHECK(eng_count_sent(b_ack) == 0, "B acknowledged at once");
}

/* bursts end as the thread's do from here; A's ping completes */
static void ping_completes(void)
{
	E->o.acks_for_post = false;
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "A never completed");
	eng_expect_ok(&E->wc_a[0], 1);
}

static void t_ack_released_by_poll(void)
{
	ping_held();
	/* what uroce_progress_poll does first */
	uroce_ack_release_unlocked(E->dev);
	ENG_CHECK(eng_count_sent(b_ack) == 1, "%u ACKs", eng_count_sent(b_ack));
	/* and only once */
	uroce_ack_release_unlocked(E->dev);
	ENG_CHECK(eng_count_sent(b_ack) == 1, "%u ACKs", eng_count_sent(b_ack));
	ping_completes();
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 0, "a probe was needed");
}

/* ---- a program that reads its CQ until it is empty: the empty poll
 * that ends the read keeps the hold for the reply; the next sends it
 * (rsockets, libfabric's verbs provider; fi_pingpong sent every ACK
 * alone, a second datagram per message) ---- */

static void t_ack_held_past_drain_end(void)
{
	struct ibv_wc wc;

	/* (its last poll found the receive) */
	ping_held();
	ENG_CHECK(!eng_poll(E->cq_b, &wc), "a completion too many");
	/* what uroce_progress_poll does first, at the poll that found the
	 * CQ empty: the drain ends, the ACK stays for the reply */
	uroce_progress_empty_poll(E->dev);
	ENG_CHECK(eng_count_sent(b_ack) == 0, "the drain's end sent the ACK");
	/* polling on: the reply is not coming */
	uroce_progress_empty_poll(E->dev);
	ENG_CHECK(eng_count_sent(b_ack) == 1, "%u ACKs", eng_count_sent(b_ack));
	ping_completes();
}

/* ---- no post, no poll: the ACK leaves within UROCE_ACK_HOLD_NS ---- */

static bool a_req(const struct eng_pkt *p)
{
	return !from_b(p) && p->is_req;
}

/* B's ACK of the ping: when it left, after the ping arrived */
static uint64_t ack_waited(void)
{
	unsigned int ping = next_of_b(0, a_req), ack = next_of_b(0, b_ack);

	ENG_CHECK(ping < E->ntrace && ack < E->ntrace, "ping %u, ACK %u", ping,
		  ack);
	return E->trace[ack].sent_ns -
	       (E->trace[ping].sent_ns + E->o.latency_ns);
}

/* A pings, B's application receives it and is gone (as in
 * ack_hold_bound), the progress thread asleep until look_ns after the
 * ping arrives (0: until woken) */
static void ping_thread_asleep(uint64_t look_ns)
{
	struct eng_opts o = hold_opts();

	eng_setup(&o);
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_thread_sleeps(look_ns ? E->now + E->o.latency_ns + look_ns : 0);
	eng_wait(1, 0);
	ENG_CHECK(eng_run(b_has_recv, 10 * MS), "B never received the SEND");
	ENG_CHECK(eng_count_sent(b_ack) == 0, "B acknowledged at once");
}

/* the held ACK left within the bound, and A needed no probe, no
 * timeout */
static void check_bound(void)
{
	ENG_CHECK(ack_waited() <= UROCE_ACK_HOLD_NS,
		  "the ACK left %llu ns after its request arrived (bound %llu)",
		  (unsigned long long)ack_waited(),
		  (unsigned long long)UROCE_ACK_HOLD_NS);
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 0 &&
			  eng_cnt(UROCE_CNT_TIMEOUTS) == 0,
		  "A had to probe (%llu) or time out (%llu)",
		  (unsigned long long)eng_cnt(UROCE_CNT_TLP_PROBES),
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMEOUTS));
}

static void t_ack_hold_bound(void)
{
	/* B's application is gone (descheduled, or computing): nothing of
	 * it runs from here on; only the engine's timers and the wire */
	ping_thread_asleep(0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "A never completed");
	eng_expect_ok(&E->wc_a[0], 1);
	ENG_CHECK(E->trace[next_of_b(0, b_ack)].psn == PSN0, "ACK of PSN 0x%x",
		  E->trace[next_of_b(0, b_ack)].psn);
	check_bound();
}

/* ---- the progress thread's next look sends it: no timer ---- */

static void t_ack_hold_rides_look(void)
{
	uint64_t look = UROCE_ACK_HOLD_NS * 3 / 4, armed;

	ping_thread_asleep(look);
	/* the hold armed no timer of its own (a system call, and a pass
	 * for nothing once a reply takes the ACK): the look comes first */
	armed = E->dev->prog.armed_deadline_ns;
	ENG_CHECK(!armed || armed > E->now + UROCE_ACK_HOLD_NS,
		  "the hold armed the timer %llu ns ahead",
		  (unsigned long long)(armed - E->now));
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "A never completed");
	eng_expect_ok(&E->wc_a[0], 1);
	/* the look sent it */
	ENG_CHECK(ack_waited() == look,
		  "the ACK left %llu ns after its request "
		  "arrived, the look was at %llu",
		  (unsigned long long)ack_waited(), (unsigned long long)look);
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMER_PASSES) == 0 &&
			  eng_cnt(UROCE_CNT_TLP_PROBES) == 0,
		  "%llu timer passes, %llu probes",
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMER_PASSES),
		  (unsigned long long)eng_cnt(UROCE_CNT_TLP_PROBES));
}

/* a look later than the bound does not do: the timer sends it in time */
static void t_ack_hold_look_too_late(void)
{
	ping_thread_asleep(UROCE_ACK_HOLD_NS + UROCE_ACK_HOLD_NS / 2);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "A never completed");
	eng_expect_ok(&E->wc_a[0], 1);
	check_bound();
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMER_PASSES) >= 1, "no timer pass");
}

/* the thread counted on by the hold sleeps again, until woken: it sends
 * the ACK first (the hold saw its look, or it sees the hold) */
static void t_ack_hold_thread_sleeps_on(void)
{
	ping_thread_asleep(UROCE_ACK_HOLD_NS / 2);
	eng_thread_sleeps(0);
	ENG_CHECK(eng_count_sent(b_ack) == 1,
		  "the thread went to sleep past the held ACK");
	ENG_CHECK(ack_waited() == 0, "ACK %llu ns late",
		  (unsigned long long)ack_waited());
}

/* the hold set the timer, then B's reply took the ACK: the timer is set
 * back to what is left (the reply's own probe), not kept for the hold,
 * which would have woken the thread for nothing (engine/progress.c,
 * uroce_timer_withdraw) */
static void t_ack_hold_timer_withdrawn(void)
{
	uint64_t hold, armed;

	ping_thread_asleep(0);
	hold = E->dev->prog.armed_deadline_ns;
	ENG_CHECK(hold > E->now && hold <= E->now + UROCE_ACK_HOLD_NS,
		  "the hold set no timer of its own (%llu ns ahead)",
		  (unsigned long long)(hold - E->now));
	eng_post_recv(E->a, 20, 4096, 64);
	eng_post_send(E->b, IBV_WR_SEND, 2, 4096, 2, 0, 0);
	ENG_CHECK(eng_count_sent(b_ack) == 1, "%u ACKs with the reply",
		  eng_count_sent(b_ack));
	armed = E->dev->prog.armed_deadline_ns;
	ENG_CHECK(armed != hold, "the timer still waits for the hold");
	ENG_CHECK(armed > hold, "the reply's probe is not armed (%llu)",
		  (unsigned long long)armed);
	thread_looks();
	eng_wait(1, 1);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "the ping-pong never ended");
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMER_PASSES) == 0,
		  "%llu timer passes for nothing",
		  (unsigned long long)eng_cnt(UROCE_CNT_TIMER_PASSES));
}

/* the rule itself, at its edges */
static void t_ack_hold_covered(void)
{
	const uint64_t now = 5 * MS, h = UROCE_ACK_HOLD_NS;

	eng_setup(NULL);
	ENG_CHECK(!uroce_ack_hold_covered(0, now), "a thread without a look");
	ENG_CHECK(uroce_ack_hold_covered(now, now), "a look now");
	ENG_CHECK(uroce_ack_hold_covered(now + h, now), "a look at the bound");
	ENG_CHECK(!uroce_ack_hold_covered(now + h + 1, now),
		  "a look past the bound");
	/* (due, and the thread not yet awake: waking, it sends the hold) */
	ENG_CHECK(uroce_ack_hold_covered(now - 1, now), "a look just due");
}

/* ---- a stream's ACKs are not held: no reply takes them ---- */

static bool a_ackreq(const struct eng_pkt *p)
{
	return a_req(p) && p->ackreq;
}

static bool b_has_two(struct eng *e)
{
	while (e->got_b < 2 && eng_poll(e->cq_b, &e->wc_b[e->got_b]))
		e->got_b++;
	return e->got_b == 2;
}

/* two messages of one QP in the burst that B's application takes: a
 * peer that waits for a reply sends one, so this is a stream, whose
 * sender waits for the ACK to open its window; it leaves at the burst's
 * end, without a post, a poll or a timer */
static void t_ack_not_held_in_stream(void)
{
	struct eng_opts o = hold_opts();
	unsigned int ack;

	eng_setup(&o);
	eng_pattern();
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_recv(E->b, 11, 64, 64);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_post_send(E->a, IBV_WR_SEND, 2, 64, 2, 0, 0);
	ENG_CHECK(eng_run(b_has_two, 10 * MS), "B never received both");
	eng_expect_ok(&E->wc_b[0], 10);
	eng_expect_ok(&E->wc_b[1], 11);
	ack = next_of_b(0, b_ack);
	ENG_CHECK(ack < E->ntrace, "B held the ACK of a stream");
	ENG_CHECK(eng_count_sent(b_ack) == 1, "%u ACKs for one burst",
		  eng_count_sent(b_ack));
	ENG_CHECK(E->trace[ack].psn == PSN0 + 1, "ACK of PSN 0x%x",
		  E->trace[ack].psn);
	ENG_CHECK(eng_cnt(UROCE_CNT_TIMER_PASSES) == 0, "a timer sent it");
}

/* one long message whose packets ask for ACKs on the way (every
 * UROCE_ACK_EVERY) is one message: its ACK still waits for the reply */
static void t_ack_held_for_one_long_message(void)
{
	struct eng_opts o = hold_opts();
	const uint32_t len = 128 * 1024;

	eng_setup(&o);
	eng_pattern();
	eng_post_recv(E->b, 10, 0, len);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, len, 0, 0);
	ENG_CHECK(eng_run(b_has_recv, 10 * MS), "B never received the SEND");
	eng_expect_ok(&E->wc_b[0], 10);
	ENG_CHECK(eng_count_sent(a_ackreq) >= 2,
		  "only %u packets asked for an ACK: not the case",
		  eng_count_sent(a_ackreq));
	ENG_CHECK(eng_count_sent(b_ack) == 0,
		  "B acknowledged one message at once (%u ACKs)",
		  eng_count_sent(b_ack));
}

static const struct eng_test tests[] = {
	{ "ack_before_reply", t_ack_before_reply },
	{ "ack_before_reply_mid_burst", t_ack_before_reply_mid_burst },
	{ "ack_hold_bound", t_ack_hold_bound },
	{ "ack_hold_rides_look", t_ack_hold_rides_look },
	{ "ack_hold_look_too_late", t_ack_hold_look_too_late },
	{ "ack_hold_thread_sleeps_on", t_ack_hold_thread_sleeps_on },
	{ "ack_hold_covered", t_ack_hold_covered },
	{ "ack_hold_timer_withdrawn", t_ack_hold_timer_withdrawn },
	{ "ack_before_response", t_ack_before_response },
	{ "ack_released_by_poll", t_ack_released_by_poll },
	{ "ack_held_past_drain_end", t_ack_held_past_drain_end },
	{ "ack_not_held_in_stream", t_ack_not_held_in_stream },
	{ "ack_held_for_one_long_message", t_ack_held_for_one_long_message },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
