// SPDX-License-Identifier: MIT
/*
 * Completion events against the order of arms, completions and polls
 * (docs/events.md): an armed CQ raises one event for its next completion
 * and is disarmed; a completion that came before the arm raises none, and
 * the poll that follows the arm finds it (an event loop that arms, then
 * polls, loses nothing); a completion pushed while the application arms
 * (a receive burst of another thread between two of its completions)
 * either sees the arm or is there for that poll.  The channel's fd is
 * readable exactly while an event is queued.  Each is a named test
 * (`test_events NAME`), run by ctest as engine.NAME.
 *
 * A sends to B; both CQs are on one channel.  No progress thread runs:
 * every completion comes from eng_run's receive bursts.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "engine/spin.h"
#include "harness.h"

static struct eng_opts chan_opts(void)
{
	struct eng_opts o;

	memset(&o, 0, sizeof(o));
	o.channel = true;
	return o;
}

static bool fd_readable(void)
{
	struct pollfd p = { .fd = E->ch->fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* the next event's CQ, NULL if none is queued (the fd is non-blocking) */
static struct ibv_cq *take_event(void)
{
	struct ibv_cq *cq;
	void *ctx;

	if (ibv_get_cq_event(E->ch, &cq, &ctx)) {
		ENG_CHECK(errno == EAGAIN, "ibv_get_cq_event: errno %d", errno);
		return NULL;
	}
	ibv_ack_cq_events(cq, 1);
	return cq;
}

static void expect_no_event(const char *when)
{
	ENG_CHECK(!fd_readable(), "the channel is readable %s", when);
	ENG_CHECK(!take_event(), "an event %s", when);
}

/* B's receive completions polled so far (into E->wc_b) */
static unsigned int poll_b(void)
{
	while (eng_poll(E->cq_b, &E->wc_b[E->got_b]))
		E->got_b++;
	return E->got_b;
}

/* ---- armed before the completion: one event, then disarmed ---- */

static void t_arm_then_completion(void)
{
	struct eng_opts o = chan_opts();

	eng_setup(&o);
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_recv(E->b, 11, 64, 64);
	ENG_CHECK(!ibv_req_notify_cq(E->cq_b, 0), "arm");
	expect_no_event("after the arm alone");
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 8, 0, 0);
	eng_settle(10 * MS);
	/* the completion raised one event, its CQ's */
	ENG_CHECK(fd_readable(), "no event for the armed CQ's completion");
	ENG_CHECK(take_event() == E->cq_b, "the event is not B's CQ's");
	expect_no_event("after the one event was taken");
	/* disarmed: the next completion raises none */
	eng_post_send(E->a, IBV_WR_SEND, 2, 0, 8, 0, 0);
	eng_settle(10 * MS);
	expect_no_event("for a completion after the CQ fired");
	ENG_CHECK(poll_b() == 2, "B polled %u completions, not 2", E->got_b);
	eng_expect_ok(&E->wc_b[0], 10);
	eng_expect_ok(&E->wc_b[1], 11);
}

/* ---- the completion before the arm: no event; the poll finds it ---- */

static void t_completion_then_arm(void)
{
	struct eng_opts o = chan_opts();

	eng_setup(&o);
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_recv(E->b, 11, 64, 64);
	/* an event loop polled the CQ empty, and the completion comes
	 * before it arms */
	ENG_CHECK(poll_b() == 0, "a completion before anything was sent");
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 8, 0, 0);
	eng_settle(10 * MS);
	expect_no_event("for a CQ that was not armed");
	ENG_CHECK(!ibv_req_notify_cq(E->cq_b, 0), "arm");
	/* a completion already there raises the event at the arm (as a
	 * ConnectX does: UCX's wake-up polls empty, arms and sleeps) */
	ENG_CHECK(take_event() == E->cq_b,
		  "no event at the arm for a completion already there");
	expect_no_event("after it");
	ENG_CHECK(poll_b() == 1, "the poll after the arm found %u completions",
		  E->got_b);
	eng_expect_ok(&E->wc_b[0], 10);
	/* that event took the arm: the loop re-arms, polled empty */
	ENG_CHECK(!ibv_req_notify_cq(E->cq_b, 0), "re-arm");
	expect_no_event("for an arm on a CQ polled empty");
	eng_post_send(E->a, IBV_WR_SEND, 2, 0, 8, 0, 0);
	eng_settle(10 * MS);
	ENG_CHECK(take_event() == E->cq_b, "no event for the next completion");
	expect_no_event("after it");
}

/* ---- the arm between two completions of one receive burst ---- */

struct mid {
	unsigned int pkts; /* B's receives seen in the burst */
	bool armed;
};

static void arm_after_first(struct eng *e)
{
	struct mid *m = e->priv;
	struct ibv_wc wc;

	/* another thread than the one in the burst: it polls B's CQ,
	 * finds the first completion, arms, and would poll again */
	if (m->armed || !eng_poll(e->cq_b, &wc))
		return;
	e->wc_b[e->got_b++] = wc;
	ENG_CHECK(!ibv_req_notify_cq(e->cq_b, 0), "arm");
	m->armed = true;
}

static void t_arm_mid_burst(void)
{
	struct eng_opts o = chan_opts();
	struct mid m = { 0, false };

	o.latency_ns = 10000;
	eng_setup(&o);
	E->priv = &m;
	eng_post_recv(E->b, 10, 0, 64);
	eng_post_recv(E->b, 11, 64, 64);
	eng_post_recv(E->b, 12, 128, 64);
	/* two SENDs in one post: one burst at B */
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 8, 0, 0);
	eng_post_send(E->a, IBV_WR_SEND, 2, 0, 8, 0, 0);
	E->mid_burst = arm_after_first;
	eng_settle(10 * MS);
	E->mid_burst = NULL;
	ENG_CHECK(m.armed, "the first completion was not there mid-burst");
	/* the second completion saw the arm: one event, and the poll the
	 * event loop makes after its arm finds it */
	ENG_CHECK(take_event() == E->cq_b,
		  "no event for the completion pushed after the arm");
	expect_no_event("after the one event");
	ENG_CHECK(poll_b() == 2, "B has %u completions, not 2", E->got_b);
	eng_expect_ok(&E->wc_b[0], 10);
	eng_expect_ok(&E->wc_b[1], 11);
}

/* ---- two CQs on one channel: each event once, in completion order,
 * the fd readable until the last is taken ---- */

static void t_two_cqs_one_channel(void)
{
	struct eng_opts o = chan_opts();

	eng_setup(&o);
	eng_post_recv(E->b, 10, 0, 64);
	ENG_CHECK(!ibv_req_notify_cq(E->cq_a, 0) &&
			  !ibv_req_notify_cq(E->cq_b, 0),
		  "arm");
	eng_post_send(E->a, IBV_WR_SEND, 1, 0, 8, 0, 0);
	eng_settle(10 * MS);
	/* B's receive completes first, then the ACK completes A's SEND */
	ENG_CHECK(fd_readable(), "no event");
	ENG_CHECK(take_event() == E->cq_b, "the first event is not B's");
	ENG_CHECK(fd_readable(), "the fd went quiet with A's event queued");
	ENG_CHECK(take_event() == E->cq_a, "the second event is not A's");
	expect_no_event("after both");
	ENG_CHECK(eng_poll(E->cq_a, &E->wc_a[0]), "A's SEND did not complete");
	eng_expect_ok(&E->wc_a[0], 1);
	ENG_CHECK(poll_b() == 1, "B has no completion");
	eng_expect_ok(&E->wc_b[0], 10);
}

/* ---- when a thread may spin instead of sleeping (engine/spin.h,
 * docs/progress.md): on the fake clock's times ---- */

/* a spin whose looks come a system call apart goes on, and a spin may
 * start again at once */
static void t_spin_own_core(void)
{
	struct uroce_spin_gov g = { 0 };
	uint64_t t = 5 * MS;

	eng_setup(NULL); /* (the harness reports on its device) */
	ENG_CHECK(uroce_spin_may(&g, t), "a first spin refused");
	uroce_spin_begin(&g, t);
	for (int i = 0; i < 50; i++) {
		t += 1000;
		ENG_CHECK(uroce_spin_look(&g, t), "look %d stopped", i);
	}
	/* work of its own (a receive that took 100 us) is no preemption */
	t += 100000;
	uroce_spin_begin(&g, t);
	ENG_CHECK(uroce_spin_look(&g, t + 1000), "work taken for preemption");
	ENG_CHECK(uroce_spin_may(&g, t + 2000), "the next spin refused");
}

/* the look of a spin at t, on a crowded machine, after another task
 * took the core (the thread's involuntary switches went up): false if
 * the spin stopped */
static bool look_taken(struct uroce_spin_gov *g, uint64_t t)
{
	g->crowded = true;
	return uroce_spin_look(g, t) || uroce_spin_gap(g, t, g->switches + 1);
}

/* a spin preempted (a look more than UROCE_SPIN_PREEMPT_NS after the
 * last, another task's) stops; none starts for a back-off that doubles
 * at each preemption up to its bound, and is the least again only
 * after UROCE_SPIN_CALM_NS without one */
static void t_spin_backoff(void)
{
	struct uroce_spin_gov g = { 0 };
	uint64_t t = 5 * MS, want = UROCE_SPIN_BACKOFF_MIN_NS;
	int i;

	eng_setup(NULL);
	for (i = 0; i < 12; i++) {
		ENG_CHECK(uroce_spin_may(&g, t), "round %d: no spin", i);
		uroce_spin_begin(&g, t);
		ENG_CHECK(look_taken(&g, t + UROCE_SPIN_PREEMPT_NS),
			  "round %d: a look at the bound stopped", i);
		t += UROCE_SPIN_PREEMPT_NS;
		ENG_CHECK(!look_taken(&g, t + UROCE_SPIN_PREEMPT_NS + 1),
			  "round %d: preempted, the spin went on", i);
		t += UROCE_SPIN_PREEMPT_NS + 1;
		ENG_CHECK(!uroce_spin_may(&g, t + want - 1),
			  "round %d: a spin before the back-off of %llu ns", i,
			  (unsigned long long)want);
		t += want;
		want = want * 2 > UROCE_SPIN_BACKOFF_MAX_NS ?
			       UROCE_SPIN_BACKOFF_MAX_NS :
			       want * 2;
	}
	ENG_CHECK(want == UROCE_SPIN_BACKOFF_MAX_NS, "the back-off not bounded");
	/* calm for less than UROCE_SPIN_CALM_NS: the back-off stays long */
	t += UROCE_SPIN_CALM_NS / 2;
	ENG_CHECK(uroce_spin_may(&g, t), "no spin after the back-off");
	uroce_spin_begin(&g, t);
	t += UROCE_SPIN_PREEMPT_NS + 1;
	ENG_CHECK(!look_taken(&g, t), "preempted, the spin went on");
	ENG_CHECK(!uroce_spin_may(&g, t + UROCE_SPIN_BACKOFF_MAX_NS - 1),
		  "the back-off shrank without calm");
	/* calm for UROCE_SPIN_CALM_NS: the least back-off again */
	t += UROCE_SPIN_CALM_NS + 1;
	ENG_CHECK(uroce_spin_may(&g, t), "no spin after the calm");
	uroce_spin_begin(&g, t);
	t += UROCE_SPIN_PREEMPT_NS + 1;
	ENG_CHECK(!look_taken(&g, t), "preempted, the spin went on");
	ENG_CHECK(uroce_spin_may(&g, t + UROCE_SPIN_BACKOFF_MIN_NS),
		  "the back-off after the calm is not the least");
}

/* one preemption of a spin at t; returns when the back-off ends, having
 * checked that it lasts want ns */
static uint64_t spin_preempt(struct uroce_spin_gov *g, uint64_t t, uint64_t want)
{
	ENG_CHECK(uroce_spin_may(g, t), "no spin at %llu",
		  (unsigned long long)t);
	uroce_spin_begin(g, t);
	t += UROCE_SPIN_PREEMPT_NS + 1;
	ENG_CHECK(!look_taken(g, t), "preempted, the spin went on");
	ENG_CHECK(!uroce_spin_may(g, t + want - 1),
		  "a spin before the back-off of %llu ns",
		  (unsigned long long)want);
	ENG_CHECK(uroce_spin_may(g, t + want), "the back-off is not %llu ns",
		  (unsigned long long)want);
	return t + want;
}

/* a gap between two looks stops a spin only if another task took the
 * core: not an interrupt's or the hypervisor's (no involuntary switch,
 * however long: in a VM interrupts take 20-50 us several hundred times
 * a second), nor, on a machine with a core to spare, a thread that woke
 * for a moment (a progress thread's look); a whole slice of another
 * task does, and on a crowded machine any task's turn does */
static void t_spin_gap(void)
{
	struct uroce_spin_gov g = { 0 };
	uint64_t t = 5 * MS, m = UROCE_SPIN_BACKOFF_MIN_NS, sw = 40;

	eng_setup(NULL);
	ENG_CHECK(uroce_spin_may(&g, t), "a first spin refused");
	uroce_spin_begin(&g, t);
	uroce_spin_switches(&g, sw);
	/* an interrupt: 50 us, then 1 ms, no switch */
	t += 50000;
	ENG_CHECK(!uroce_spin_look(&g, t), "a 50 us gap not seen");
	ENG_CHECK(uroce_spin_gap(&g, t, sw), "an interrupt stopped the spin");
	t += MS;
	ENG_CHECK(!uroce_spin_look(&g, t) && uroce_spin_gap(&g, t, sw),
		  "the hypervisor's 1 ms stopped the spin");
	/* another thread's moment on the core, a core to spare */
	t += 50000;
	ENG_CHECK(!uroce_spin_look(&g, t) && uroce_spin_gap(&g, t, sw + 1),
		  "a moment's switch stopped the spin on an idle machine");
	ENG_CHECK(uroce_spin_may(&g, t + 1), "a back-off after a moment");
	/* switches count from the last gap: a slice with none since is the
	 * hypervisor's; then a slice of another task's stops the spin, for
	 * the least back-off */
	t += UROCE_SPIN_SLICE_NS + 1;
	ENG_CHECK(!uroce_spin_look(&g, t) && uroce_spin_gap(&g, t, sw + 1),
		  "a switch before the last gap counted again");
	t += UROCE_SPIN_SLICE_NS + 1;
	ENG_CHECK(!uroce_spin_look(&g, t), "a slice not seen");
	ENG_CHECK(!uroce_spin_gap(&g, t, sw + 2), "a slice, the spin went on");
	ENG_CHECK(!uroce_spin_may(&g, t + m - 1), "no back-off after a slice");
	t += m;
	/* crowded: a moment's switch stops it too */
	ENG_CHECK(uroce_spin_may(&g, t), "no spin after the back-off");
	uroce_spin_begin(&g, t);
	uroce_spin_switches(&g, sw + 2);
	g.crowded = true;
	t += 50000;
	ENG_CHECK(!uroce_spin_look(&g, t) && !uroce_spin_gap(&g, t, sw + 3),
		  "crowded, a switch and the spin went on");
	ENG_CHECK(!uroce_spin_may(&g, t + 2 * m - 1),
		  "crowded: no back-off, or not the second");
}

/* a spin that caught its packet unpreempted halves the back-off, down to
 * none (a rare preemption on an idle machine costs little) */
static void t_spin_caught(void)
{
	struct uroce_spin_gov g = { 0 };
	uint64_t t = 5 * MS, m = UROCE_SPIN_BACKOFF_MIN_NS;

	eng_setup(NULL);
	t = spin_preempt(&g, t, m);
	t = spin_preempt(&g, t, 2 * m);
	t = spin_preempt(&g, t, 4 * m); /* the next would be 8 */
	uroce_spin_caught(&g);
	t = spin_preempt(&g, t, 4 * m); /* the next would be 8 */
	uroce_spin_caught(&g);
	uroce_spin_caught(&g);
	uroce_spin_caught(&g);
	uroce_spin_caught(&g);
	spin_preempt(&g, t, m);
}

/* a thread that waited for a core more than an eighth of the time
 * between two samples of its run delay does not spin (it backs off as
 * if a spin had been preempted) when the machine has had more to run
 * than CPUs, or when it waited more than UROCE_SPIN_PREEMPT_NS a time on
 * a core (behind another task's slice); waits of a few microseconds a
 * time on a machine with CPUs to spare are an idle core waking, and it
 * spins on; so does one that waited less */
static void t_spin_run_delay(void)
{
	struct uroce_spin_gov g = { 0 };
	uint64_t t = 5 * MS, m = UROCE_SPIN_BACKOFF_MIN_NS;
	uint64_t s = UROCE_SPIN_SAMPLE_NS, d = 1000000, n = 100;

	eng_setup(NULL);
	ENG_CHECK(uroce_spin_sample_due(&g, t), "no first sample");
	uroce_spin_sample(&g, t, d, n, true);
	ENG_CHECK(uroce_spin_may(&g, t), "the first sample stopped spins");
	ENG_CHECK(!uroce_spin_sample_due(&g, t + s - 1), "a sample too soon");
	ENG_CHECK(uroce_spin_sample_due(&g, t + s), "no sample due");
	/* an eighth of the interval waited, crowded: still ours */
	t += s;
	d += s / 8;
	n += 1;
	uroce_spin_sample(&g, t, d, n, true);
	ENG_CHECK(uroce_spin_may(&g, t), "an eighth waited stopped spins");
	/* a quarter, in 50 waits of 5 us, CPUs to spare: an idle core's
	 * wake-ups, still ours */
	t += s;
	d += s / 4;
	n += 50;
	uroce_spin_sample(&g, t, d, n, false);
	ENG_CHECK(uroce_spin_may(&g, t), "idle-core wake-ups stopped spins");
	/* the same waits on a crowded machine: a back-off of the least */
	t += s;
	d += s / 4;
	n += 50;
	uroce_spin_sample(&g, t, d, n, true);
	ENG_CHECK(!uroce_spin_may(&g, t + m - 1), "crowded: a spin");
	ENG_CHECK(uroce_spin_may(&g, t + m), "no spin after the back-off");
	/* a quarter in 2 waits, CPUs to spare: behind another task's slice,
	 * a back-off twice the first */
	t += s;
	d += s / 4;
	n += 2;
	uroce_spin_sample(&g, t, d, n, false);
	ENG_CHECK(!uroce_spin_may(&g, t + 2 * m - 1),
		  "long waits: a spin, or the back-off is not twice the first");
	ENG_CHECK(uroce_spin_may(&g, t + 2 * m), "no spin after the second");
}

/* the machine is crowded for a thread when, over a window of at least
 * UROCE_SPIN_IDLE_NS, the CPUs' idle time and the thread's own time on
 * a core came to less than half a core: two spinners on two cores are
 * not crowded (each has its own), the same thread beside busy loops
 * that leave it 0.4 of a core is, and so is a machine it could not
 * read; a machine that was busy and is idle now is not crowded from the
 * next window on, however long it was busy */
static void t_spin_idle(void)
{
	struct uroce_spin_gov g = { 0 };
	uint64_t t = 5 * MS, w = UROCE_SPIN_IDLE_NS, idle = 7 * w, ran = w;

	eng_setup(NULL);
	ENG_CHECK(uroce_spin_idle_due(&g, t), "no first reading");
	uroce_spin_idle(&g, t, true, idle, ran);
	ENG_CHECK(!g.crowded, "crowded before a window");
	ENG_CHECK(!uroce_spin_idle_due(&g, t + w - 1), "a reading too soon");
	ENG_CHECK(uroce_spin_idle_due(&g, t + w), "no reading due");
	/* two spinners, two cores: nothing idle, the thread ran 0.9 of it */
	t += w;
	ran += w / 10 * 9;
	uroce_spin_idle(&g, t, true, idle, ran);
	ENG_CHECK(!g.crowded, "its own core read as crowded");
	/* busy loops and a peer beside it: 0.4 of a core for the thread,
	 * for many windows */
	for (int i = 0; i < 240; i++) {
		t += w;
		ran += w / 5 * 2;
		uroce_spin_idle(&g, t, true, idle, ran);
		ENG_CHECK(g.crowded, "window %d: 0.4 of a core read as free", i);
	}
	/* the others left: a core and a half idle while it slept */
	t += w;
	idle += w / 2 * 3;
	uroce_spin_idle(&g, t, true, idle, ran);
	ENG_CHECK(!g.crowded, "an idle machine read as crowded");
	/* a quarter of a core idle, a quarter its own: half, not less */
	t += w;
	idle += w / 4;
	ran += w / 4;
	uroce_spin_idle(&g, t, true, idle, ran);
	ENG_CHECK(!g.crowded, "half a core read as crowded");
	/* a machine it cannot read is crowded, and read again at once */
	uroce_spin_idle(&g, t + 1, false, 0, ran);
	ENG_CHECK(g.crowded, "an unreadable machine read as free");
	ENG_CHECK(uroce_spin_idle_due(&g, t + 2),
		  "no reading after a failed one");
}

static const struct eng_test tests[] = {
	{ "arm_then_completion", t_arm_then_completion },
	{ "completion_then_arm", t_completion_then_arm },
	{ "arm_mid_burst", t_arm_mid_burst },
	{ "two_cqs_one_channel", t_two_cqs_one_channel },
	{ "spin_own_core", t_spin_own_core },
	{ "spin_backoff", t_spin_backoff },
	{ "spin_gap", t_spin_gap },
	{ "spin_caught", t_spin_caught },
	{ "spin_run_delay", t_spin_run_delay },
	{ "spin_idle", t_spin_idle },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
