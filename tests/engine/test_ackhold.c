// SPDX-License-Identifier: MIT
/*
 * ACKs held for the application's reply (docs/transport.md "Held
 * ACKs"): a receive burst that an application thread took in its
 * own poll leaves its ACKs for that application's next post, which sends
 * its own packets first and the ACKs behind them; a response of the QP
 * (a READ response) still sends the held ACK first, and the next poll
 * (or the progress thread) sends what no post took.  Each is a named
 * test (`test_ackhold NAME`), run by ctest as engine.NAME.
 *
 * A sends to B; B answers.  PSNs start at 0x100 in both directions.
 */
#include <string.h>

#include "harness.h"

static struct eng_opts hold_opts(void)
{
	struct eng_opts o;

	memset(&o, 0, sizeof(o));
	o.gso = true;			/* batches, as over UDP */
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

/* ---- a ping-pong: B's reply, then its ACK of the ping ---- */

static bool b_req(const struct eng_pkt *p)
{
	return from_b(p) && p->is_req;
}

static void t_ack_behind_reply(void)
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
	/* the reply first, the ACK behind it, both from the one post */
	ENG_CHECK(reply < ack, "ACK %u before the reply %u", ack, reply);
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

static void t_ack_released_by_poll(void)
{
	struct eng_opts o = hold_opts();

	eng_setup(&o);
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 2, 0, 0);
	eng_wait(0, 1);
	ENG_CHECK(eng_run(b_has_recv, 10 * MS), "B never received the SEND");
	ENG_CHECK(eng_count_sent(b_ack) == 0, "B acknowledged at once");
	/* what uroce_progress_poll does first */
	uroce_ack_release_unlocked(E->dev);
	ENG_CHECK(eng_count_sent(b_ack) == 1, "%u ACKs", eng_count_sent(b_ack));
	/* and only once */
	uroce_ack_release_unlocked(E->dev);
	ENG_CHECK(eng_count_sent(b_ack) == 1, "%u ACKs", eng_count_sent(b_ack));
	E->o.acks_for_post = false;
	eng_wait(1, 0);
	ENG_CHECK(eng_run(eng_all_done, 10 * MS), "A never completed");
	eng_expect_ok(&E->wc_a[0], 1);
	ENG_CHECK(eng_cnt(UROCE_CNT_TLP_PROBES) == 0, "a probe was needed");
}

static const struct eng_test tests[] = {
	{ "ack_behind_reply", t_ack_behind_reply },
	{ "ack_before_response", t_ack_before_response },
	{ "ack_released_by_poll", t_ack_released_by_poll },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
