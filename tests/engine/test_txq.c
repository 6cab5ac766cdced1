// SPDX-License-Identifier: MIT
/*
 * One sender at a time (engine/xmit.c send_queued; docs/datapath.md, "One
 * sender at a time"): a thread that may defer (the progress thread, an
 * application thread receiving in its poll) and finds another thread
 * draining the send queue leaves its batch to that thread and returns; the
 * draining thread sends it after its own, nothing is left behind, and the
 * order on the wire is the order of sealing.  A verb's thread waits, and
 * is not left others' batches: a receiving thread waits for it; and on a
 * device whose same-host rings came up everybody waits.
 *
 * The wire's sendmmsg is gated: the first thread to send (H) stops inside
 * it, holding tx_lock, until the test opens the gate.  These are the only
 * engine scenarios with threads; the clock stays the harness's.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "dev.h"
#include "harness.h"

#define LEN 4096u

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static bool g_in, g_open;
static unsigned int g_calls_by_others;
static const struct uroce_pkt_io *g_wire;
static struct uroce_pkt_io g_gated;
static __thread bool is_holder;

static int gate_send_runs(struct uroce_dev *dev, const struct uroce_txrun *run,
			  int nruns, const struct iovec *iov)
{
	pthread_mutex_lock(&g_mu);
	if (!is_holder)
		g_calls_by_others++;
	g_in = true;
	pthread_cond_broadcast(&g_cv);
	while (!g_open)
		pthread_cond_wait(&g_cv, &g_mu);
	pthread_mutex_unlock(&g_mu);
	return g_wire->send_runs(dev, run, nruns, iov);
}

static void gate_open(void)
{
	pthread_mutex_lock(&g_mu);
	g_open = true;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
}

static bool h_defers, t_defers;

/* H: its post sends at once and stops in the gate */
static void *holder(void *arg)
{
	(void)arg;
	is_holder = true;
	uroce_tx_defer = h_defers;
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 1, 0, LEN, rva(0), E->mr_b->rkey);
	return NULL;
}

/* T: seals a batch of its own while H sends */
static void *other(void *arg)
{
	(void)arg;
	uroce_tx_defer = t_defers;
	eng_post_send(E->a, IBV_WR_RDMA_WRITE, 2, LEN, LEN, rva(LEN),
		      E->mr_b->rkey);
	return NULL;
}

static uint64_t want_va;

static bool is_write_to(const struct eng_pkt *p)
{
	return p->has_reth && p->reth_va == want_va;
}

static unsigned int writes_to(uint32_t off)
{
	want_va = rva(off);
	return eng_count_sent(is_write_to);
}

/* whether t ended within ms (real time: threads, not the fake clock) */
static bool joined_within(pthread_t t, long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return pthread_timedjoin_np(t, NULL, &ts) == 0;
}

/* H and T each a receiving thread (that may defer) or a verb's; rings:
 * a same-host ring of the device came up (then nobody defers) */
static void run(bool h_may, bool t_may, bool rings)
{
	bool may_defer = h_may && t_may && !rings;
	struct eng_opts o;
	pthread_t h, t;
	bool t_done;

	memset(&o, 0, sizeof(o));
	o.gso = true; /* batches, sent after the engine lock */
	eng_setup(&o);
	g_wire = E->dev->net.io;
	g_gated = *g_wire;
	g_gated.send_runs = gate_send_runs;
	E->dev->net.io = &g_gated;
	if (rings)
		atomic_store(&E->dev->net.path_gen, 1);

	h_defers = h_may;
	t_defers = t_may;
	ENG_CHECK(!pthread_create(&h, NULL, holder, NULL), "thread H");
	pthread_mutex_lock(&g_mu);
	while (!g_in)
		pthread_cond_wait(&g_cv, &g_mu);
	pthread_mutex_unlock(&g_mu);
	/* H holds tx_lock, inside sendmmsg */
	ENG_CHECK(!pthread_create(&t, NULL, other, NULL), "thread T");
	/* a deferring T returns at once (the bound is only for a failure);
	 * a verb's T waits for the gate, so its bound is short */
	t_done = joined_within(t, may_defer ? 10000 : 200);
	gate_open(); /* (before a failure: the exit sends what is queued) */
	ENG_CHECK(t_done == may_defer, "T %s while H was sending",
		  t_done ? "returned" : "waited");
	ENG_CHECK(!pthread_join(h, NULL), "join H");
	if (!t_done)
		ENG_CHECK(!pthread_join(t, NULL), "join T");
	/* T's batch left, after H's, and by H if T deferred */
	ENG_CHECK(!atomic_load(&E->dev->tx.txq_len), "%d batches left behind",
		  atomic_load(&E->dev->tx.txq_len));
	ENG_CHECK(writes_to(0) == 1 && writes_to(LEN) == 1,
		  "WRITEs on the wire: %u to 0, %u to %u", writes_to(0),
		  writes_to(LEN), LEN);
	ENG_CHECK(!may_defer || !g_calls_by_others, "T sent %u times itself",
		  g_calls_by_others);
	eng_wait(2, 0);
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "no completions");
	eng_expect_ok(&E->wc_a[0], 1);
	eng_expect_ok(&E->wc_a[1], 2);
}

static void t_tx_defer(void)
{
	run(true, true, false);
}

static void t_tx_verb_waits(void)
{
	run(true, false, false);
}

static void t_tx_verb_not_left(void)
{
	run(false, true, false);
}

static void t_tx_rings_wait(void)
{
	run(true, true, true);
}

static const struct eng_test tests[] = {
	{ "tx_defer", t_tx_defer },
	{ "tx_verb_waits", t_tx_verb_waits },
	{ "tx_verb_not_left", t_tx_verb_not_left },
	{ "tx_rings_wait", t_tx_rings_wait },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, UROCE_ARRAY_SIZE(tests));
}
