// SPDX-License-Identifier: MIT
/*
 * The progress thread's state (engine/progress.c, docs/progress.md): the
 * watch, who receives the packets, and the moves the application's
 * threads make on it, on the fake clock.  The device is offline (no
 * thread): each scenario sets the watch, makes one move and checks the
 * state and the marks the thread reads.
 */
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

static const struct eng_test tests[] = {
	{ "watch_table", t_watch_table },
	{ "handback_app_to_sock", t_handback_app_to_sock },
	{ "handback_leaves_waiter", t_handback_leaves_waiter },
	{ "arm_hands_back", t_arm_hands_back },
	{ "poll_done_clears_polling", t_poll_done_clears_polling },
};

int main(int argc, char **argv)
{
	return eng_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
