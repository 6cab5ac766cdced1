// SPDX-License-Identifier: MIT
/*
 * When a thread may spin instead of sleeping (docs/progress.md, "Spinning
 * only on a core nobody else wants").  A spin saves the wake-up of the
 * next packet only on a core that would otherwise idle: on a loaded
 * machine the spinner is one more runnable task, it takes the core from
 * the very peer it waits for, the next packet waits for the spinner's
 * turn instead of preempting on its wake-up, and a spinner loses the
 * scheduler's favour that a sleeper keeps (it waits for a core after
 * the spin).  A spin sees that it shares its core in two ways: two of
 * its looks, which are a system call apart at most, lie more than
 * UROCE_SPIN_PREEMPT_NS apart only when something else ran in between,
 * and that was another task only if the thread's involuntary context
 * switches went up since the spin began (not an interrupt or the
 * hypervisor, which in a VM take 20-50 us several hundred times a
 * second, and which sleeping would not avoid); on a machine with a core
 * to spare only a task's slice counts (UROCE_SPIN_SLICE_NS), not a
 * thread that woke for a moment (a progress thread's look); and,
 * sampled at most every UROCE_SPIN_SAMPLE_NS, the time the thread
 * spent runnable but waiting for a core (its schedstat run delay) was
 * more than an eighth of the time since the last sample, and either the
 * machine is crowded or the waits were longer than UROCE_SPIN_PREEMPT_NS
 * on average (behind another task's slice, not an idle core waking: a
 * thread that sleeps and wakes every few microseconds waits that long
 * for its core each time, which is no one else's use of it).  Crowded:
 * over the last UROCE_SPIN_IDLE_NS or more, the CPUs' idle time and the
 * thread's own time on a core came to less than half a core: what
 * the others left it, its own use counted as free, as a spinner's core
 * is its own (read when a sample is due and the window has passed; not
 * crowded before the first window).  Then the spin
 * stops or does not start, and none of this governor starts for a
 * back-off that doubles at each such sign (UROCE_SPIN_BACKOFF_MIN_NS to
 * _MAX_NS), is halved by each spin that caught what it waited for, and
 * is none again after UROCE_SPIN_CALM_NS without a sign: on a machine
 * that stays loaded a spin is tried about ten times a second; on an idle
 * one a rare preemption costs a millisecond without spins.  Times are
 * the caller's, so that the engine tests drive it with a fake clock.
 */
#ifndef UROCE_ENGINE_SPIN_H
#define UROCE_ENGINE_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#define UROCE_SPIN_PREEMPT_NS	  20000ull
#define UROCE_SPIN_SLICE_NS	  200000ull
#define UROCE_SPIN_BACKOFF_MIN_NS 1000000ull
#define UROCE_SPIN_BACKOFF_MAX_NS 100000000ull
#define UROCE_SPIN_CALM_NS	  1000000000ull
#define UROCE_SPIN_SAMPLE_NS	  1000000ull
#define UROCE_SPIN_IDLE_NS	  250000000ull

struct uroce_spin_gov {
	uint64_t off_until; /* no spin starts before */
	uint64_t backoff;   /* the next back-off; 0: the least */
	uint64_t last;	    /* the spin's last look */
	uint64_t gap;	    /* ... and the time before it, if a gap */
	uint64_t switches;  /* involuntary context switches, at its start or
			     * last gap */
	uint64_t preempted; /* when a preemption was last seen */
	uint64_t sampled;   /* when the run delay was last sampled */
	uint64_t delay;	    /* ... and what it was */
	uint64_t slices;    /* ... and the times on a core then */
	uint64_t idled;	    /* when the CPUs' idle time was last read */
	uint64_t idle;	    /* ... what it was */
	uint64_t ran;	    /* ... and the thread's time on a core */
	bool crowded;	    /* no core free for it in the last window */
};

/* a preemption seen at now: no spin for the back-off, which doubles */
static inline void uroce_spin_backoff(struct uroce_spin_gov *g, uint64_t now)
{
	if (g->backoff < UROCE_SPIN_BACKOFF_MIN_NS)
		g->backoff = UROCE_SPIN_BACKOFF_MIN_NS;
	g->off_until = now + g->backoff;
	g->preempted = now;
	g->backoff = g->backoff * 2 > UROCE_SPIN_BACKOFF_MAX_NS ?
			     UROCE_SPIN_BACKOFF_MAX_NS :
			     g->backoff * 2;
}

/* is a sample of the thread's run delay due? */
static inline bool uroce_spin_sample_due(const struct uroce_spin_gov *g,
					 uint64_t now)
{
	return !g->sampled || now - g->sampled >= UROCE_SPIN_SAMPLE_NS;
}

/* the thread's run delay so far (ns runnable but not running) and the
 * times it was put on a core, at now; crowded: the machine has had more
 * to run than CPUs lately */
static inline void uroce_spin_sample(struct uroce_spin_gov *g, uint64_t now,
				     uint64_t delay, uint64_t slices,
				     bool crowded)
{
	uint64_t waited = delay - g->delay;

	if (g->sampled && waited > (now - g->sampled) / 8 &&
	    (crowded || waited > (slices - g->slices) * UROCE_SPIN_PREEMPT_NS))
		uroce_spin_backoff(g, now);
	g->sampled = now;
	g->delay = delay;
	g->slices = slices;
}

/* is a reading of the CPUs' idle time due? */
static inline bool uroce_spin_idle_due(const struct uroce_spin_gov *g,
				       uint64_t now)
{
	return !g->idled || now - g->idled >= UROCE_SPIN_IDLE_NS;
}

/* the CPUs' idle time (known: it could be read; crowded if not) and the
 * thread's time on a core so far, both ns, at now: is the machine
 * crowded for the thread since the last reading? */
static inline void uroce_spin_idle(struct uroce_spin_gov *g, uint64_t now,
				   bool known, uint64_t idle, uint64_t ran)
{
	if (!known)
		g->crowded = true;
	else if (g->idled)
		g->crowded = (idle - g->idle) + (ran - g->ran) <
			     (now - g->idled) / 2;
	g->idled = known ? now : 0;
	g->idle = idle;
	g->ran = ran;
}

/* may a spin start now? */
static inline bool uroce_spin_may(struct uroce_spin_gov *g, uint64_t now)
{
	if (now < g->off_until)
		return false;
	if (now - g->preempted > UROCE_SPIN_CALM_NS)
		g->backoff = 0;
	return true;
}

/* a spin starts, or goes on after work of its own (which is no sign of
 * preemption) */
static inline void uroce_spin_begin(struct uroce_spin_gov *g, uint64_t now)
{
	g->last = now;
}

/* the thread's involuntary context switches as its spin starts */
static inline void uroce_spin_switches(struct uroce_spin_gov *g,
				       uint64_t switches)
{
	g->switches = switches;
}

/* a look of the spin, at now: false if it lies more than
 * UROCE_SPIN_PREEMPT_NS after the last one, a gap for uroce_spin_gap */
static inline bool uroce_spin_look(struct uroce_spin_gov *g, uint64_t now)
{
	uint64_t prev = g->last;

	g->last = now;
	g->gap = now - prev;
	return g->gap <= UROCE_SPIN_PREEMPT_NS;
}

/* the gap before the last look, the thread's involuntary context
 * switches being switches then: false if another task took the core
 * (the count went up since the spin began or its last gap, and the
 * machine is crowded or the gap was a slice): the spin stops, and the
 * back-off starts */
static inline bool uroce_spin_gap(struct uroce_spin_gov *g, uint64_t now,
				  uint64_t switches)
{
	if (switches == g->switches ||
	    (!g->crowded && g->gap <= UROCE_SPIN_SLICE_NS)) {
		g->switches = switches;
		return true;
	}
	uroce_spin_backoff(g, now);
	return false;
}

/* the spin caught what it waited for, unpreempted */
static inline void uroce_spin_caught(struct uroce_spin_gov *g)
{
	g->backoff = g->backoff / 2 < UROCE_SPIN_BACKOFF_MIN_NS ? 0 :
								  g->backoff / 2;
}

#endif
