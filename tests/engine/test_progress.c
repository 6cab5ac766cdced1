// SPDX-License-Identifier: MIT
/*
 * The progress thread's state (engine/progress.c, docs/progress.md): the
 * watch, who receives the packets, and the moves the application's
 * threads make on it, on the fake clock.  The device is offline (no
 * thread): each scenario sets the watch, makes one move and checks the
 * state and the marks the thread reads.
 */
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dev.h"
#include "harness.h"

static struct uroce_dev *dev(void)
{
	return E->dev;
}

static enum uroce_watch watch(void)
{
	return (enum uroce_watch)atomic_load(&dev()->prog.watch);
}

static void set_watch(enum uroce_watch w)
{
	atomic_store(&dev()->prog.watch, (int)w);
}

/* ---- the table: IDLE only after a wait for a waiter ---- */

static void t_watch_table(void)
{
	enum uroce_watch f, t;

	eng_setup(NULL);
	for (f = 0; f < UROCE_WATCH_NSTATES; f++)
		for (t = 0; t < UROCE_WATCH_NSTATES; t++) {
			bool want = !(t == UROCE_WATCH_IDLE &&
				      (f == UROCE_WATCH_SOCK ||
				       f == UROCE_WATCH_APP));

			ENG_CHECK(uroce_progress_watch_may(f, t) == want,
				  "%d -> %d: %s, not %s", f, t,
				  want ? "refused" : "allowed",
				  want ? "allowed" : "refused");
		}
	ENG_CHECK(!uroce_progress_watch_may(UROCE_WATCH_NSTATES,
					    UROCE_WATCH_SOCK),
		  "a state out of range allowed");
}

/* ---- APP -> SOCK: an application hands the socket back ---- */

static void t_handback_app_to_sock(void)
{
	eng_setup(NULL);
	E->now += 3 * MS;
	uroce_clock_set(E->now);
	atomic_store(&dev()->prog.app_rx_ns, E->now - 1000);
	set_watch(UROCE_WATCH_APP);
	uroce_progress_sock_handback(dev());
	ENG_CHECK(watch() == UROCE_WATCH_SOCK, "watch %d, not SOCK", watch());
	ENG_CHECK(atomic_load(&dev()->prog.handback_ns) == E->now,
		  "handback_ns not the clock's");
	ENG_CHECK(!atomic_load(&dev()->prog.app_rx_ns),
		  "the application still marked as receiving");
}

/* ---- a waiter's watch is the waiter's to end: no hand-back ---- */

static void t_handback_leaves_waiter(void)
{
	enum uroce_watch w[] = { UROCE_WATCH_WAITER, UROCE_WATCH_IDLE,
				 UROCE_WATCH_SOCK };
	size_t i;

	eng_setup(NULL);
	for (i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		E->now += MS;
		uroce_clock_set(E->now);
		set_watch(w[i]);
		uroce_progress_sock_handback(dev());
		ENG_CHECK(watch() == w[i], "watch %d moved to %d", w[i],
			  watch());
		ENG_CHECK(atomic_load(&dev()->prog.handback_ns) == E->now,
			  "handback_ns not marked");
	}
}

/* ---- arming a CQ: marked on the clock, and the socket handed back ---- */

static void t_arm_hands_back(void)
{
	eng_setup(NULL);
	E->now += 5 * MS;
	uroce_clock_set(E->now);
	set_watch(UROCE_WATCH_APP);
	uroce_progress_arm(dev());
	ENG_CHECK(atomic_load(&dev()->prog.arm_ns) == E->now,
		  "arm_ns not the clock's");
	ENG_CHECK(watch() == UROCE_WATCH_SOCK, "watch %d, not SOCK", watch());
}

/* ---- a poll that found a completion: the thread must not wait for
 * the application any more ---- */

static void t_poll_done_clears_polling(void)
{
	eng_setup(NULL);
	atomic_store(&dev()->prog.app_poll_ns, E->now);
	E->now += 2 * MS;
	uroce_clock_set(E->now);
	uroce_progress_poll_done(dev());
	ENG_CHECK(!atomic_load(&dev()->prog.app_poll_ns),
		  "app_poll_ns still set");
	ENG_CHECK(atomic_load(&dev()->prog.app_done_ns) == E->now,
		  "app_done_ns not the clock's");
	/* this thread receives in no poll and no wait */
	set_watch(UROCE_WATCH_APP);
	ENG_CHECK(!uroce_progress_app_rx(dev()),
		  "a thread outside any poll counted as the receiver");
}

/* ---- a poll that found only a WRITE's completion hands the socket
 * back (the peer answers in memory), a WRITE with immediate's does not:
 * the peer takes it as a receive and answers to this CQ (rsockets) ---- */

static bool write_handed_back(enum ibv_wr_opcode op, uint64_t wr_id)
{
	struct ibv_wc wc;

	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		eng_post_recv(E->b, wr_id, 0, 64);
	eng_post_send(E->a, op, wr_id, 0, 64, rva(0), E->mr_b->rkey);
	E->now += MS;
	uroce_clock_set(E->now);
	set_watch(UROCE_WATCH_APP);
	eng_wait(1, op == IBV_WR_RDMA_WRITE_WITH_IMM);
	ENG_CHECK(eng_run(eng_all_done, 100 * MS), "no completion");
	eng_expect_ok(&E->wc_a[0], wr_id);
	ENG_CHECK(E->wc_a[0].opcode == IBV_WC_RDMA_WRITE, "opcode %d",
		  E->wc_a[0].opcode);
	ENG_CHECK(!eng_poll(E->cq_a, &wc), "a completion too many");
	return watch() == UROCE_WATCH_SOCK;
}

static void t_write_imm_keeps_socket(void)
{
	eng_setup(NULL);
	ENG_CHECK(!write_handed_back(IBV_WR_RDMA_WRITE_WITH_IMM, 1),
		  "a WRITE with immediate's completion handed the socket back");
	ENG_CHECK(write_handed_back(IBV_WR_RDMA_WRITE, 2),
		  "a WRITE's completion kept the socket");
}

/* through a same-host ring both hand it back (engine/comp.c cqe_flags) */
static void t_write_imm_on_ring_hands_back(void)
{
	struct eng_opts o;

	memset(&o, 0, sizeof(o));
	o.ring = 128;
	eng_setup(&o);
	ENG_CHECK(write_handed_back(IBV_WR_RDMA_WRITE_WITH_IMM, 1),
		  "on a ring, a WRITE with immediate's completion kept it");
}

/* ---- SOCK -> APP: an application that spins on an empty CQ takes the
 * socket from a thread asleep on it, which every datagram the
 * application takes first would wake, and wakes it once to plan again;
 * not at a single poll, not within HANDBACK_NS of a hand-back, never a
 * waiter's watch (docs/progress.md, "Who receives when") ---- */

static uint64_t woken(int efd)
{
	uint64_t v = 0;

	return read(efd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

static void polled(uint64_t after)
{
	E->now += after;
	uroce_clock_set(E->now);
	uroce_progress_app_polled(dev(), E->now);
}

static void t_spin_takes_socket(void)
{
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), i;

	eng_setup(NULL);
	ENG_CHECK(efd >= 0, "eventfd");
	dev()->prog.wakefd = efd;
	set_watch(UROCE_WATCH_SOCK);
	polled(5 * MS);
	ENG_CHECK(watch() == UROCE_WATCH_SOCK && !woken(efd),
		  "one poll took the socket");
	polled(100 * 1000);
	ENG_CHECK(watch() == UROCE_WATCH_APP, "watch %d, not APP", watch());
	ENG_CHECK(woken(efd) == 1, "the thread not woken once");
	ENG_CHECK(eng_cnt(UROCE_CNT_APP_TAKEOVERS) == 1, "%llu takeovers",
		  (unsigned long long)eng_cnt(UROCE_CNT_APP_TAKEOVERS));
	polled(1000);
	ENG_CHECK(watch() == UROCE_WATCH_APP && !woken(efd),
		  "a poll woke the thread that left the socket already");
	/* a hand-back (an arm's too) keeps the socket the thread's for
	 * HANDBACK_NS, however fast the polls come */
	uroce_progress_sock_handback(dev());
	(void)woken(efd);
	for (i = 0; i < 20; i++)
		polled(50 * 1000);
	ENG_CHECK(watch() == UROCE_WATCH_SOCK && !woken(efd),
		  "taken within HANDBACK_NS of a hand-back");
	polled(1000);
	ENG_CHECK(watch() == UROCE_WATCH_APP && woken(efd) == 1,
		  "not taken HANDBACK_NS after the hand-back");
	/* polls too far apart: no spin */
	set_watch(UROCE_WATCH_SOCK);
	polled(100 * 1000 + 1);
	ENG_CHECK(watch() == UROCE_WATCH_SOCK, "taken by polls 100 us apart");
	/* a waiter's watch is the waiter's */
	set_watch(UROCE_WATCH_WAITER);
	polled(1000);
	ENG_CHECK(watch() == UROCE_WATCH_WAITER && !woken(efd),
		  "a poll moved a waiter's watch");
	ENG_CHECK(eng_cnt(UROCE_CNT_APP_TAKEOVERS) == 2, "%llu takeovers",
		  (unsigned long long)eng_cnt(UROCE_CNT_APP_TAKEOVERS));
	dev()->prog.wakefd = -1;
	close(efd);
}

/* ---- the thread's wait: uroce_progress_plan on the fake clock ----
 * (docs/progress.md's constants: WAITER_NS and APP_WAIT_NS 200 us,
 * APP_POLL_NS 100 us, HANDBACK_NS 1 ms) */

#define US	    1000ull
#define WAITER_NS   (200 * US)
#define APP_WAIT_NS (200 * US)
#define APP_POLL_NS (100 * US)

static struct uroce_wait_marks marks(bool sleep)
{
	struct uroce_wait_marks m;

	memset(&m, 0, sizeof(m));
	m.now = E->now;
	m.sleep = sleep;
	return m;
}

static void tick(uint64_t ns)
{
	E->now += ns;
	uroce_clock_set(E->now);
}

/* a scenario starts on a device 5 ms old, the thread having seen nothing */
static struct uroce_wait_marks plan_setup(struct uroce_wait_look *look)
{
	eng_setup(NULL);
	memset(look, 0, sizeof(*look));
	tick(5 * MS);
	return marks(true);
}

#define PLAN_CHECK(p, w, t) \
	ENG_CHECK((p).watch == (w) && (p).timeout_ns == (t), \
		  "plan %d for %llu ns, not %d for %llu", (int)(p).watch, \
		  (unsigned long long)(p).timeout_ns, (int)(w), \
		  (unsigned long long)(t))

/* nobody else receives: the socket, until woken; only a look if a ring
 * has packets */
static void t_plan_sock(void)
{
	struct uroce_wait_look look;
	struct uroce_wait_marks m = plan_setup(&look);
	struct uroce_wait_plan p;

	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_SOCK, UROCE_WAIT_FOREVER);
	m = marks(false);
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_SOCK, 0);
}

/* an application polls: the thread looks every APP_WAIT_NS, until the
 * poll is APP_POLL_NS old; a hand-back gives the thread the socket */
static void t_plan_app(void)
{
	struct uroce_wait_look look;
	struct uroce_wait_marks m = plan_setup(&look);
	struct uroce_wait_plan p;

	m.app_rx_ns = E->now;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_APP, APP_WAIT_NS);
	tick(APP_POLL_NS);
	m.now = E->now;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_APP, APP_WAIT_NS);
	tick(1);
	m.now = E->now;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_SOCK, UROCE_WAIT_FOREVER);
	/* polling again, but it handed the socket back within 1 ms */
	m.app_rx_ns = E->now;
	m.handback_ns = E->now - 10 * US;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_SOCK, UROCE_WAIT_FOREVER);
	m.handback_ns = E->now - 2 * MS;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_APP, APP_WAIT_NS);
	/* with the looker running the thread sleeps until woken (the
	 * looker looks); a ring with packets is still a look now */
	m.looker = true;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_APP, UROCE_WAIT_FOREVER);
	m.sleep = false;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_APP, 0);
}

/* a waiter sleeps: the thread leaves it the packets, and takes them
 * back WAITER_NS after it last saw one; a waiter outranks a poller */
static void t_plan_waiter(void)
{
	struct uroce_wait_look look;
	struct uroce_wait_marks m = plan_setup(&look);
	struct uroce_wait_plan p;

	m.waiters = 1;
	m.wait_gen = 1;
	m.app_rx_ns = E->now;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_WAITER, WAITER_NS);
	ENG_CHECK(look.seen_ns == E->now && look.gen == 1,
		  "the waiter not seen now");
	/* it went back to its application: the rest of WAITER_NS */
	tick(150 * US);
	m = marks(true);
	m.wait_gen = 1;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_WAITER, 50 * US);
	tick(50 * US);
	m.now = E->now;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_SOCK, UROCE_WAIT_FOREVER);
	/* a waiter that spun (wait_gen moved, none asleep) is seen too */
	tick(MS);
	m = marks(true);
	m.wait_gen = 2;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_WAITER, WAITER_NS);
}

/* a waiter asleep through a whole WAITER_NS: the thread sleeps until
 * woken (IDLE), never when a ring has packets; a wake-up ends it */
static void t_plan_idle(void)
{
	struct uroce_wait_look look;
	struct uroce_wait_marks m = plan_setup(&look);
	struct uroce_wait_plan p;

	m.waiters = 1;
	m.wait_gen = 7;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_WAITER, WAITER_NS);
	/* the wait brought an event: not idle */
	tick(WAITER_NS);
	m.now = E->now;
	uroce_progress_waited(&look, 1, &m);
	ENG_CHECK(!look.idle, "idle after a wait that brought an event");
	/* a short wait (woken early): not idle */
	uroce_progress_plan(&look, &m);
	tick(WAITER_NS - 1);
	m.now = E->now;
	uroce_progress_waited(&look, 0, &m);
	ENG_CHECK(!look.idle, "idle before WAITER_NS");
	/* another waiter came meanwhile: not idle */
	tick(1);
	m.now = E->now;
	m.wait_gen = 8;
	uroce_progress_waited(&look, 0, &m);
	ENG_CHECK(!look.idle, "idle though another waiter came");
	/* the same waiter, asleep all along */
	m.wait_gen = 7;
	uroce_progress_waited(&look, 0, &m);
	ENG_CHECK(look.idle, "not idle after a whole WAITER_NS");
	m = marks(false);
	m.waiters = 1;
	m.wait_gen = 7;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_WAITER, 0);
	m.sleep = true;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_IDLE, UROCE_WAIT_FOREVER);
	/* the last waiter gave the packets back: the thread takes them */
	m.waiters = 0;
	m.take_back = true;
	p = uroce_progress_plan(&look, &m);
	PLAN_CHECK(p, UROCE_WATCH_SOCK, UROCE_WAIT_FOREVER);
	ENG_CHECK(!look.idle, "still idle after a take-back");
}

/* ---- the descriptors: a watcher is found from its event, and a
 * removed one brings none ---- */

static int w_calls;

static int w_count(struct uroce_dev *d, struct uroce_watcher *w)
{
	uint64_t v;

	(void)d;
	w_calls++;
	return read(w->fd, &v, sizeof(v)) == sizeof(v);
}

static void t_watcher_dispatch(void)
{
	struct uroce_watcher w[2] = { { w_count, -1, false },
				      { w_count, -1, true } };
	struct epoll_event ev[4];
	uint64_t one = 1;
	int ep, fd[2], n, i;

	eng_setup(NULL);
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (i = 0; i < 2; i++) {
		fd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		ENG_CHECK(!uroce_watcher_add(ep, &w[i], fd[i], EPOLLIN),
			  "watcher %d not added", i);
	}
	ENG_CHECK(uroce_watcher_add(-1, &w[0], fd[0], EPOLLIN) == -EBADF,
		  "no epoll set: not -EBADF");
	/* the second is ready: its event names it, and its callback runs */
	ENG_CHECK(write(fd[1], &one, sizeof(one)) == sizeof(one), "write");
	n = epoll_wait(ep, ev, 4, 0);
	ENG_CHECK(n == 1 && ev[0].data.ptr == &w[1], "%d events, not w[1]'s", n);
	w_calls = 0;
	for (i = 0; i < n; i++) {
		struct uroce_watcher *x = ev[i].data.ptr;

		ENG_CHECK(x->fn(dev(), x) == 1, "the callback read nothing");
	}
	ENG_CHECK(w_calls == 1, "%d callbacks, not 1", w_calls);
	/* removed: ready, but no event */
	uroce_watcher_del(ep, &w[0]);
	ENG_CHECK(write(fd[0], &one, sizeof(one)) == sizeof(one), "write");
	n = epoll_wait(ep, ev, 4, 0);
	ENG_CHECK(n == 0, "%d events from a removed watcher", n);
	close(fd[0]);
	close(fd[1]);
	close(ep);
}

static const struct eng_test tests[] = {
	{ "watch_table", t_watch_table },
	{ "handback_app_to_sock", t_handback_app_to_sock },
	{ "handback_leaves_waiter", t_handback_leaves_waiter },
	{ "arm_hands_back", t_arm_hands_back },
	{ "poll_done_clears_polling", t_poll_done_clears_polling },
	{ "write_imm_keeps_socket", t_write_imm_keeps_socket },
	{ "write_imm_on_ring_hands_back", t_write_imm_on_ring_hands_back },
	{ "spin_takes_socket", t_spin_takes_socket },
	{ "plan_sock", t_plan_sock },
	{ "plan_app", t_plan_app },
	{ "plan_waiter", t_plan_waiter },
	{ "plan_idle", t_plan_idle },
	{ "watcher_dispatch", t_watcher_dispatch },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
