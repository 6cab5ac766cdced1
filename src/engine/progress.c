// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* pthread_timedjoin_np */
/*
 * The progress thread: makes the device move while the application does
 * not call us (docs/progress.md).  It sleeps in epoll_wait on the
 * socket, a timerfd for the retransmit/RNR timers and an eventfd for
 * wake-ups, so an idle device costs no CPU.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "core/thread.h"
#include "dev.h"
#include "engine/spin.h"

static void armed_set(struct uroce_dev *dev, uint64_t deadline_ns)
{
	dev->prog.armed_deadline_ns = deadline_ns;
	atomic_store_explicit(&dev->prog.due_ns, deadline_ns,
			      memory_order_relaxed);
}

static void set_timer(struct uroce_dev *dev, uint64_t deadline_ns)
{
	struct itimerspec its;

	armed_set(dev, deadline_ns);
	if (dev->prog.timerfd < 0)
		return; /* an offline device: the caller runs timers */
	memset(&its, 0, sizeof(its));
	if (deadline_ns) {
		its.it_value.tv_sec = (time_t)(deadline_ns / 1000000000ull);
		its.it_value.tv_nsec = (long)(deadline_ns % 1000000000ull);
	}
	timerfd_settime(dev->prog.timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/*
 * A deadline that is set and then not wanted (an ACK held for a reply
 * that took it) would still wake the thread when it comes: a timer pass
 * for nothing, on a core that an application may be spinning on (qperf
 * rc_lat between namespaces: one a millisecond, both ends; docs/events.md,
 * "ACKs held by a waiter").
 * Withdrawn, the timer waits for the earliest deadline left, which takes
 * a walk of the QPs with one: done only while they are few (a system
 * call to save a wake-up), and never over a pending overrun sweep.
 */
#define WITHDRAW_MAX_TIMED 16

void uroce_timer_withdraw(struct uroce_dev *dev, uint64_t deadline_ns)
{
	uint64_t next = dev->tx.retry_at_ns;
	uint32_t i;

	uroce_assert_held(&dev->lock);
	if (dev->prog.armed_deadline_ns != deadline_ns ||
	    dev->prog.cq_overrun_pending || dev->obj.ntimed > WITHDRAW_MAX_TIMED)
		return;
	/* (ACKs still held keep their pass; flush_held_acks clears the
	 * mark before it withdraws the timer of theirs) */
	if (atomic_load_explicit(&dev->ack.held, memory_order_relaxed) &&
	    dev->ack.by_ns && (!next || dev->ack.by_ns < next))
		next = dev->ack.by_ns;
	for (i = 0; i < dev->obj.ntimed; i++) {
		uint64_t d = uroce_req_next_deadline(dev->obj.timed[i]);

		if (d && (!next || d < next))
			next = d;
	}
	if (next != deadline_ns)
		set_timer(dev, next);
}

/*
 * The timer waits for the earliest deadline set, and a deadline that
 * moves later does not move it (a system call a send): a tail-loss
 * probe's moves with every send and its ACK clears it without one.  So
 * in a ping-pong the timer, still set for a probe answered long ago,
 * woke the progress thread about once a millisecond for nothing
 * (docs/progress.md, "The timer's idle wake-ups").  A thread that arms a
 * deadline within TIMER_EARLY_NS of the armed one (a post: awake anyway)
 * sets the timer afresh for the earliest deadline left, once for each
 * armed deadline: one system call in place of another thread's wake-up.
 */
#define TIMER_EARLY_NS 200000

void uroce_timer_arm(struct uroce_dev *dev, uint64_t deadline_ns)
{
	uint64_t armed = dev->prog.armed_deadline_ns, now;

	uroce_assert_held(&dev->lock);
	if (!armed || deadline_ns < armed) {
		set_timer(dev, deadline_ns);
		return;
	}
	if (dev->prog.early_ns == armed)
		return;
	now = uroce_now_ns();
	if (armed > now && armed - now <= TIMER_EARLY_NS) {
		dev->prog.early_ns = armed;
		uroce_timer_withdraw(dev, armed);
	}
}

void uroce_qp_timer_arm(struct uroce_qp *qp, uint64_t deadline_ns)
{
	uroce_qp_timed_add(qp->dev, qp);
	uroce_timer_arm(qp->dev, deadline_ns);
}

/*
 * Fire what is due and re-arm for the earliest deadline left.  Only the
 * QPs that set a deadline since a walk last found them without one are
 * walked: with thousands of QPs and a few in use, a walk over all of
 * them per timer (the tail-loss probe's, once a millisecond while a QP
 * has traffic) cost O(QPs) for nothing (docs/scale.md, "Known limits
 * of the datapath at scale").
 */
void uroce_timers_run(struct uroce_dev *dev)
{
	uint64_t now = uroce_now_ns(), next = 0;
	bool idle;
	uint32_t i;

	pthread_mutex_lock(&dev->lock);
	/* (how many passes a held ACK or a deadline needed) */
	idle = !atomic_load_explicit(&dev->ack.held, memory_order_relaxed) &&
	       !dev->prog.cq_overrun_pending;
	for (i = 0; i < dev->obj.ntimed && idle; i++) {
		uint64_t d = uroce_req_next_deadline(dev->obj.timed[i]);

		idle = !d || d > now;
	}
	uroce_count(dev, UROCE_CNT_TIMER_PASSES, 1);
	uroce_count(dev, UROCE_CNT_TIMER_IDLE_PASSES, idle);
	armed_set(dev, 0);
	if (dev->prog.cq_overrun_pending)
		uroce_cq_overrun_sweep(dev);
	/* ACKs held for a post that did not come (UROCE_ACK_HOLD_NS) */
	uroce_ack_release(dev);
	for (i = 0; i < dev->obj.ntimed;) {
		struct uroce_qp *qp = dev->obj.timed[i];
		uint64_t d;

		uroce_req_timeout(qp, now);
		d = uroce_req_next_deadline(qp);
		if (!d) {
			/* (the last one moves here: i again) */
			uroce_qp_timed_del(dev, qp);
			continue;
		}
		if (!next || d < next)
			next = d;
		i++;
	}
	if (next && (!dev->prog.armed_deadline_ns ||
		     next < dev->prog.armed_deadline_ns))
		set_timer(dev, next);
	uroce_dev_unlock(dev);
}

/*
 * An application thread busy-polling an empty CQ receives for itself; the
 * thread then only gets in its way (a wake-up per packet, a core less).
 * While that goes on the thread naps and looks again, so that packets
 * still move when the application stops polling.  A poll that finds a
 * completion clears the mark: a program like ib_write_lat polls once,
 * then spins on memory, and needs the thread at once.
 */
#define APP_POLL_NS 100000

/*
 * An application that arms a CQ sleeps between its polls (the usual
 * event loop: get the event, arm, poll until empty, wait): its last,
 * empty poll does not mean that it goes on polling, and a nap then held
 * back the very packet that wakes it (ib_send_lat -e, qperf rc_lat: 100
 * us and more a message).  For EVENT_LOOP_NS after an arm the thread
 * takes packets as if nobody polled (docs/events.md).
 */
#define EVENT_LOOP_NS 1000000

static bool app_polls(struct uroce_dev *dev, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&dev->prog.app_poll_ns,
					     memory_order_relaxed);

	return last && now - last <= APP_POLL_NS &&
	       now - atomic_load_explicit(&dev->prog.arm_ns,
					  memory_order_relaxed) >
		       EVENT_LOOP_NS;
}

static bool app_is_polling(struct uroce_dev *dev)
{
	struct timespec nap = { 0, APP_POLL_NS };

	if (!app_polls(dev, uroce_now_ns()))
		return false;
	nanosleep(&nap, NULL);
	return true;
}

void uroce_progress_arm(struct uroce_dev *dev)
{
	atomic_store_explicit(&dev->prog.arm_ns, uroce_now_ns(),
			      memory_order_relaxed);
	uroce_progress_sock_handback(dev);
}

/*
 * Who watches the socket.  An application thread that polls its CQ
 * receives for itself, and every datagram that also woke the thread in
 * epoll (which then found the socket drained and slept again, all in
 * the kernel) cost a wake-up on a core the application spins on:
 * ib_send_lat 2 B over veth, one per two round trips.  So while an
 * application polls, the thread waits on the other descriptors only
 * (dev->prog.epfd) and looks again every APP_WAIT_NS; otherwise on those
 * and the socket (dev->prog.sock_epfd, which holds both).  An
 * application that may stop polling in a way we see hands the socket
 * back at once (uroce_progress_sock_handback): a poll that found only
 * send completions (ib_write_lat now spins on memory for the peer's
 * WRITE), and arming a CQ to sleep.  A poll that found a receive is
 * taken to come back (a receive loop); if it does not, the socket waits
 * at most APP_WAIT_NS for the thread.
 */
#define APP_WAIT_NS UROCE_APP_WAIT_NS

/*
 * An application that handed the socket back keeps it handed back for
 * HANDBACK_NS: one that does so on every poll (ib_write_bw's client
 * finds WRITE completions in most) would otherwise cost an eventfd write
 * and a wake-up of the thread per poll; for it the thread watches the
 * socket as before this scheme.
 */
#define HANDBACK_NS 1000000

/*
 * The watch (enum uroce_watch) is the thread's state: it sets it before
 * each wait (watch_to: SOCK, APP, WAITER, IDLE as wait_events and
 * uroce_progress_plan decides), and other threads move it by
 * compare-and-swap (watch_cas): an application that hands the socket
 * back (APP -> SOCK) or spins and takes it (SOCK -> APP,
 * uroce_progress_app_polled), and the last waiter to leave (IDLE ->
 * WAITER).
 * IDLE comes only after a wait for a waiter (look->idle).  Every change
 * goes through this table; one it refuses is a bug, logged and not made.
 */
#define W(x) (1u << UROCE_WATCH_##x)
static const unsigned int watch_may[UROCE_WATCH_NSTATES] = {
	[UROCE_WATCH_SOCK] = W(SOCK) | W(APP) | W(WAITER),
	[UROCE_WATCH_APP] = W(SOCK) | W(APP) | W(WAITER),
	[UROCE_WATCH_WAITER] = W(SOCK) | W(APP) | W(WAITER) | W(IDLE),
	[UROCE_WATCH_IDLE] = W(SOCK) | W(APP) | W(WAITER) | W(IDLE),
};
#undef W

bool uroce_progress_watch_may(enum uroce_watch from, enum uroce_watch to)
{
	return from < UROCE_WATCH_NSTATES && to < UROCE_WATCH_NSTATES &&
	       (watch_may[from] & (1u << to));
}

static bool watch_refused(int from, enum uroce_watch to)
{
	if (uroce_progress_watch_may((enum uroce_watch)from, to))
		return false;
	uroce_log(UROCE_LOG_WARN, "progress watch %d -> %d refused", from,
		  (int)to);
	return true;
}

/* the thread's own change */
static void watch_to(struct uroce_dev *dev, enum uroce_watch to)
{
	if (!watch_refused(atomic_load(&dev->prog.watch), to))
		atomic_store(&dev->prog.watch, to);
}

/* another thread's: from -> to if the watch is from */
static bool watch_cas(struct uroce_dev *dev, enum uroce_watch from,
		      enum uroce_watch to)
{
	int expect = from;

	return !watch_refused(from, to) &&
	       atomic_compare_exchange_strong(&dev->prog.watch, &expect, to);
}

/* an application polls the CQ and has not handed the socket back */
static bool app_receives(const struct uroce_wait_marks *m)
{
	return m->app_rx_ns && m->now - m->app_rx_ns <= APP_POLL_NS &&
	       m->now - m->handback_ns > HANDBACK_NS;
}

static void wake_thread(struct uroce_dev *dev)
{
	uint64_t one = 1;

	/* (an eventfd write fails only on overflow: it is then readable) */
	if (write(dev->prog.wakefd, &one, sizeof(one)) < 0)
		uroce_log(UROCE_LOG_DEBUG, "progress wake-up: %s",
			  strerror(errno));
}

void uroce_progress_sock_handback(struct uroce_dev *dev)
{
	/* (the mark first, then the watch; the thread stores its watch,
	 * then reads the mark: one of the two sees the other.  A watch for
	 * a waiter is the waiter's to end.) */
	atomic_store_explicit(&dev->prog.handback_ns, uroce_now_ns(),
			      memory_order_relaxed);
	atomic_store(&dev->prog.app_rx_ns, 0);
	if (watch_cas(dev, UROCE_WATCH_APP, UROCE_WATCH_SOCK))
		wake_thread(dev);
}

/*
 * A thread asleep in uroce_progress_wait watches the socket and the
 * rings' bell and receives itself when they wake it (docs/events.md).
 * The progress thread then sleeps on epfd alone: woken by the same
 * packet it only raced the waiter for it, a wake-up more a message on
 * a core the peer may need.  A waiter that returns to its application
 * does not tell the thread (that would be a wake-up a message again):
 * the thread looks again WAITER_NS after it last saw one and takes the
 * packets back if none came meanwhile, so a packet that came while none
 * sleeps waits at most WAITER_NS (the application's own calls take it
 * sooner: its next wait or an empty poll receives).  When one waiter
 * slept through the whole WAITER_NS, the thread sleeps until woken
 * (UROCE_WATCH_IDLE: an idle process costs nothing), and the last
 * waiter to leave wakes it (the waiter counts itself out, then reads
 * the watch; the thread stores the watch, then counts the waiters).
 */
#define WAITER_NS 200000

static bool waiter_sleeps(struct uroce_dev *dev)
{
	return atomic_load(&dev->prog.waiters) > 0;
}

struct uroce_wait_plan uroce_progress_plan(struct uroce_wait_look *look,
					   const struct uroce_wait_marks *m)
{
	struct uroce_wait_plan p = { UROCE_WATCH_SOCK, UROCE_WAIT_FOREVER };
	bool waiter = true;

	if (m->take_back) {
		look->gen = m->wait_gen;
		look->seen_ns = 0;
		look->idle = false;
	}
	if (m->waiters > 0 || m->wait_gen != look->gen) {
		look->gen = m->wait_gen;
		look->seen_ns = m->now;
	} else if (m->now - look->seen_ns >= WAITER_NS) {
		look->idle = false;
		waiter = false; /* none lately: the thread takes the packets */
	}
	if (waiter) {
		/* until WAITER_NS after the waiter was last seen; after a
		 * whole one with a waiter asleep, until woken */
		p.watch = m->sleep && look->idle && m->waiters > 0 ?
				  UROCE_WATCH_IDLE :
				  UROCE_WATCH_WAITER;
		p.timeout_ns = look->seen_ns + WAITER_NS - m->now;
	} else if (app_receives(m)) {
		p.watch = UROCE_WATCH_APP;
		p.timeout_ns = APP_WAIT_NS;
	}
	if (p.watch == UROCE_WATCH_IDLE || p.watch == UROCE_WATCH_SOCK ||
	    (p.watch == UROCE_WATCH_APP && m->looker))
		p.timeout_ns = UROCE_WAIT_FOREVER;
	if (!m->sleep)
		p.timeout_ns = 0;
	return p;
}

void uroce_progress_waited(struct uroce_wait_look *look, int n,
			   const struct uroce_wait_marks *m)
{
	look->idle = !n && m->waiters > 0 && m->wait_gen == look->gen &&
		     m->now - look->seen_ns >= WAITER_NS;
}

/* a waiter sleeps on the packets (uroce_progress_wait) */
static void waiter_in(struct uroce_dev *dev)
{
	atomic_fetch_add(&dev->prog.waiters, 1);
	atomic_fetch_add(&dev->prog.wait_gen, 1);
	uroce_count(dev, UROCE_CNT_WAIT_SLEEPS, 1);
}

/* ... and wakes: the last one wakes a thread asleep for good */
static void waiter_out(struct uroce_dev *dev)
{
	if (atomic_fetch_sub(&dev->prog.waiters, 1) == 1 &&
	    watch_cas(dev, UROCE_WATCH_IDLE, UROCE_WATCH_WAITER))
		wake_thread(dev);
}

/* what the plan reads, now */
static void marks_of(struct uroce_dev *dev, bool sleep, bool take_back,
		     struct uroce_wait_marks *m)
{
	m->now = uroce_now_ns();
	m->sleep = sleep;
	m->take_back = take_back;
	m->waiters = atomic_load(&dev->prog.waiters);
	m->wait_gen = atomic_load(&dev->prog.wait_gen);
	m->app_rx_ns = atomic_load(&dev->prog.app_rx_ns);
	m->handback_ns = atomic_load_explicit(&dev->prog.handback_ns,
					      memory_order_relaxed);
	m->looker = dev->prog.looking;
}

void uroce_progress_wake(struct uroce_dev *dev)
{
	wake_thread(dev);
}

bool uroce_progress_app_stopped(struct uroce_dev *dev)
{
	struct uroce_wait_marks m;

	marks_of(dev, true, false, &m);
	return !app_receives(&m);
}

/* (the time it wakes by, published first: a held ACK rides that look,
 * uroce_progress_sleep_by; 0: none it can promise) */
static int wait_on(struct uroce_dev *dev, int epfd, struct epoll_event *ev,
		   int max, uint64_t timeout_ns)
{
	struct timespec ts;
	int n;

	if (timeout_ns == UROCE_WAIT_FOREVER || !timeout_ns) {
		/* (the looker's look stands for ours: its promise stays) */
		if (epfd != dev->prog.app_epfd || !timeout_ns)
			uroce_progress_sleep_by(dev, 0);
		else if (atomic_load(&dev->ack.held))
			uroce_ack_release_unlocked(dev);
		return uroce_epoll_wait(epfd, ev, max, timeout_ns ? -1 : 0);
	}
	uroce_progress_sleep_by(dev, uroce_now_ns() + timeout_ns);
	ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
	ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
	n = epoll_pwait2(epfd, ev, max, &ts, NULL);
	if (n < 0 && errno == ENOSYS) { /* Linux < 5.11 */
		uroce_progress_sleep_by(dev, 0);
		n = uroce_epoll_wait(epfd, ev, max, 1);
	}
	return n;
}

/* epoll_wait on what to watch (uroce_progress_plan): a waiter's packets
 * left to it, the socket left out while the application receives.
 * *sleep: false if a ring had packets.  Same-host senders ring only
 * while someone said it sleeps; we say it before every sleep, a
 * waiter's packets included: the thread may have cleared the mark
 * (uroce_local_awake) after the waiter set it, and the waiter would
 * sleep past them. */
static int wait_events(struct uroce_dev *dev, struct epoll_event *ev, int max,
		       bool *sleep, struct uroce_wait_look *look)
{
	bool take_back = atomic_exchange(&dev->prog.take_back, false);
	struct uroce_wait_marks m;
	struct uroce_wait_plan p;
	bool inner = false;
	int n, k, i, epfd;

	*sleep = uroce_local_sleep(dev);
	marks_of(dev, *sleep, take_back, &m);
	p = uroce_progress_plan(look, &m);
	/* (the watch first, then the other side's mark: a waiter counts
	 * itself out, then reads the watch; an application clears its
	 * mark, then reads the watch: one of the two sees the other) */
	watch_to(dev, p.watch);
	if (p.watch == UROCE_WATCH_IDLE && !waiter_sleeps(dev)) {
		p.watch = UROCE_WATCH_WAITER;
		p.timeout_ns = look->seen_ns + WAITER_NS - m.now;
		watch_to(dev, p.watch);
	} else if (p.watch == UROCE_WATCH_APP) {
		marks_of(dev, *sleep, false, &m);
		if (!app_receives(&m)) {
			p.watch = UROCE_WATCH_SOCK;
			p.timeout_ns = *sleep ? UROCE_WAIT_FOREVER : 0;
			watch_to(dev, p.watch);
		}
	}
	if (p.watch == UROCE_WATCH_APP)
		uroce_looker_wake(dev);
	epfd = p.watch == UROCE_WATCH_SOCK ? dev->prog.sock_epfd :
	       p.watch == UROCE_WATCH_APP  ? dev->prog.app_epfd :
					     dev->prog.epfd;
	n = wait_on(dev, epfd, ev, max, p.timeout_ns);
	if (p.watch == UROCE_WATCH_WAITER) {
		marks_of(dev, *sleep, false, &m);
		uroce_progress_waited(look, n, &m);
	}
	if (epfd == dev->prog.epfd)
		return n;
	/* epfd is one entry of sock_epfd and app_epfd: its own events
	 * replace it */
	for (i = k = 0; i < n; i++) {
		if (ev[i].data.ptr == &dev->prog.epfd_w)
			inner = true;
		else
			ev[k++] = ev[i];
	}
	if (inner) {
		i = uroce_epoll_wait(dev->prog.epfd, ev + k, max - k, 0);
		k += i > 0 ? i : 0;
	}
	return n < 0 ? n : k;
}

/*
 * Ask for a short time slice (EEVDF custom slice, Linux 6.12+; older
 * kernels ignore it).  The thread runs for microseconds at a time; with a
 * short slice its wake-up may preempt an application spinning on memory
 * (ib_write_lat polls the last byte of its buffer) instead of waiting for
 * that task's slice to end.  Any user may shorten its own slice.
 */
struct sched_attr_v1 {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

static void short_slice(void)
{
	struct sched_attr_v1 a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.policy = SCHED_OTHER;
	a.runtime = 100000; /* ns */
	syscall(SYS_sched_setattr, 0, &a, 0);
}

/*
 * Take what is waiting, then keep looking for a little while before going
 * back to sleep: in a stream the next packet is microseconds away, and a
 * wake-up from epoll costs tens of microseconds on this kind of machine.
 * UROCE_SPIN_US (default 50) sets how long; 0 turns it off.  An idle
 * device still sleeps: the spin ends that long after the last packet,
 * and only a stream (several packets in one receive) starts it.
 */
static uint64_t spin_ns = 50000;

#define SPIN_MIN_PKTS 4

/* back to epoll_wait at least this often, so that the timers (and the
 * other descriptors) are served while a stream goes on */
#define RECEIVE_MAX_NS 1000000

/*
 * A ring is read without a system call (net/local.c): after a packet
 * from one the thread keeps watching, so that a passive peer (the server
 * of ib_read_lat) answers the next one without a wake-up.  Not while
 * the application finds completions (it runs a loop of its own, maybe
 * spinning on memory like ib_write_lat, and needs the core more).
 */
#define APP_ACTIVE_NS 1000000

static bool app_active(struct uroce_dev *dev, uint64_t now)
{
	return now - atomic_load_explicit(&dev->prog.app_done_ns,
					  memory_order_relaxed) <=
	       APP_ACTIVE_NS;
}

static bool ring_watch(struct uroce_dev *dev)
{
	return uroce_local_recent(dev) && !app_active(dev, uroce_now_ns());
}

/*
 * A request that this thread answers alone (an RDMA READ, an atomic) comes
 * from a peer that waits for the answer and then, often, sends the next
 * one: a passive responder (qperf's and ib_read_lat's servers).  A NIC
 * answers it without waking anybody; here the thread would sleep in
 * epoll and wake per request, a wake-up on top of the requester's own in
 * every round trip (qperf rc_rdma_read_lat over UDP: 2.5x its udp_lat).
 * So after answering one the thread keeps receiving for spin_ns, as it
 * does after a ring's packet, unless the application found completions
 * lately (it runs a loop of its own and needs the core; ring_watch).
 */
static uint64_t answered(struct uroce_dev *dev)
{
	return atomic_load_explicit(&dev->stats.cnt[UROCE_CNT_RX_READ_REQ_PKTS],
				    memory_order_relaxed) +
	       atomic_load_explicit(&dev->stats.cnt[UROCE_CNT_RX_ATOMIC_PKTS],
				    memory_order_relaxed);
}

static bool answer_watch(struct uroce_dev *dev, uint64_t *seen)
{
	uint64_t now = answered(dev);
	bool more = now != *seen;

	*seen = now;
	return more && !app_active(dev, uroce_now_ns());
}

/* may a spin of g start now (spin.h)?  Samples the run delay when due */
static bool spin_may(struct uroce_spin_gov *g, uint64_t now)
{
	if (uroce_spin_sample_due(g, now)) {
		uint64_t slices, ran, idle = 0;
		uint64_t delay = uroce_run_delay(&slices, &ran);

		if (uroce_spin_idle_due(g, now))
			uroce_spin_idle(g, now, uroce_cpus_idle_ns(&idle), idle,
					ran);
		uroce_spin_sample(g, now, delay, slices, g->crowded);
	}
	return uroce_spin_may(g, now);
}

/* a look of the spin g at now: false if another task took its core */
static bool spin_look(struct uroce_spin_gov *g, uint64_t now)
{
	return uroce_spin_look(g, now) ||
	       uroce_spin_gap(g, now, uroce_involuntary_switches());
}

static void receive_spin(struct uroce_dev *dev, struct uroce_spin_gov *gov)
{
	uint64_t start = uroce_now_ns(), last = 0, seen = answered(dev);
	bool stream = false, bulk = false, answer = false;
	int n;

	uroce_lock_spin(&dev->prog.rx_lock);
	for (;;) {
		uint64_t now;

		n = uroce_net_poll(dev);
		if (n > 0) {
			now = uroce_now_ns();
			bulk |= n >= SPIN_MIN_PKTS;
			stream |= bulk || ring_watch(dev);
			/* (an answer spin only on a core of our own: spin.h) */
			if (answer_watch(dev, &seen) && !stream &&
			    (answer || spin_may(gov, now))) {
				/* (a request that came during the spin) */
				if (answer)
					uroce_spin_caught(gov);
				else
					uroce_spin_switches(
						gov,
						uroce_involuntary_switches());
				answer = true;
			}
			uroce_spin_begin(gov, now);
			last = 0;
			if (now - start > RECEIVE_MAX_NS)
				break;
			/* a datagram or a few and no ring: another read would
			 * find the socket empty (a system call a ping-pong
			 * message); epoll says when the next one comes */
			if (!stream && !answer && !uroce_local_rings(dev))
				break;
			continue;
		}
		/* a packet now and then (a ping-pong, however fast) is not a
		 * stream: the application, spinning on its own, needs the
		 * core more */
		if (!spin_ns || !(stream || answer))
			break;
		now = uroce_now_ns();
		if (!stream && answer && !spin_look(gov, now))
			break;
		/* an application thread polling its CQ receives for itself:
		 * two threads spinning would need a core more */
		if (app_polls(dev, now) &&
		    now - atomic_load_explicit(&dev->prog.app_poll_ns,
					       memory_order_relaxed) <
			    spin_ns)
			break;
		if (!last)
			last = now;
		else if (now - last > spin_ns)
			break;
		/* the engine lock is free between polls: let the
		 * application post and the queued packets go */
		uroce_tx_drain(dev);
		/* in a bulk stream from a ring the sender is a thread of
		 * this host, maybe waiting for this core: give it up while
		 * the ring is empty (ib_write_bw 64K on two cores: 2.2 ->
		 * 7.7 GB/s).  Not for single packets (a ping-pong): the
		 * core would go to a task spinning on memory for a tick */
		if (bulk && uroce_local_rings(dev)) {
			/* ... but an application that finds completions runs
			 * a loop of its own (ib_write_lat 64K spins on
			 * memory): a yield gave it the core for its whole
			 * slice, 1.9 ms a round trip.  Sleep instead; the
			 * sender rings for the next packet */
			if (app_active(dev, now))
				break;
			sched_yield();
		}
	}
	pthread_mutex_unlock(&dev->prog.rx_lock);
}

void uroce_progress_sleep_by(struct uroce_dev *dev, uint64_t by)
{
	/* (seq_cst: uroce_ack_burst_end_for_post marks, then reads it) */
	atomic_store(&dev->prog.wake_by_ns, by);
	if (atomic_load(&dev->ack.held))
		uroce_ack_release_unlocked(dev);
}

void uroce_progress_woke(struct uroce_dev *dev)
{
	atomic_store(&dev->prog.wake_by_ns, 0);
	uroce_ack_release_unlocked(dev);
}

static void *progress_main(void *arg)
{
	struct uroce_dev *dev = arg;
	struct uroce_wait_look look = { 0, 0, false };
	struct uroce_spin_gov gov = { 0 };
	struct epoll_event ev[4];

	short_slice();
	uroce_tx_defer = true;
	/* its looks on time: a held ACK counts on the next one
	 * (uroce_ack_hold_covered), and the default slack is 50 us */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	spin_ns = uroce_config()->spin_ns;

	while (!dev->prog.stopping) {
		bool sleep, rx;
		int n = wait_events(dev, ev, 4, &sleep, &look);
		int i;

		/* ACKs an application's poll left for a post: whatever woke
		 * us, a look's timeout included, they have waited long
		 * enough */
		uroce_progress_woke(dev);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		/* a ring has packets */
		rx = !sleep && !n && !app_is_polling(dev);
		for (i = 0; i < n; i++) {
			struct uroce_watcher *w = ev[i].data.ptr;

			/* a waiter's: it takes them (the bell left unread,
			 * or the waiter might sleep past it) */
			if (w->packets && waiter_sleeps(dev))
				continue;
			if (w->fn(dev, w))
				rx |= !app_is_polling(dev);
		}
		if (rx) {
			/* (senders need not ring while we look) */
			uroce_local_awake(dev);
			uroce_count(dev, UROCE_CNT_PROG_WAKEUPS, 1);
			receive_spin(dev, &gov);
		}
		/* (every engine path sends what it queued; this is a net) */
		uroce_tx_drain(dev);
	}
	/* (holds from here on arm the timer) */
	atomic_store(&dev->prog.wake_by_ns, 0);
	return NULL;
}

/*
 * An application thread that spins in ibv_poll_cq receives for itself
 * (the progress thread naps meanwhile), and in a bulk stream from a ring
 * its sender is a thread of this host that may be waiting for this very
 * core (ib_send_bw's server spins on its CQ; ib_write_bw's sleeps, and
 * the progress thread that receives for it yields the same way in
 * receive_spin).  So a thread whose polls have found nothing for
 * APP_YIELD_NS, within spin_ns of a bulk, gives the core up.  Not at the
 * first empty poll: in a ping-pong of large messages (ib_send_lat 64K,
 * a bulk each) the reply is a few microseconds away, and a yield per
 * empty poll cost 7 % there.  Not for single packets at all: a
 * ping-pong of small ones (ib_send_lat 2 B) never yields.
 */
#define APP_YIELD_NS 5000

static __thread uint64_t app_bulk_ns, app_empty_ns;

static void app_poll_yield(int n, uint64_t now, bool rings)
{
	if (n) {
		if (n >= SPIN_MIN_PKTS)
			app_bulk_ns = now;
		app_empty_ns = 0;
		return;
	}
	if (!app_empty_ns)
		app_empty_ns = now;
	if (app_bulk_ns && now - app_bulk_ns < spin_ns &&
	    now - app_empty_ns > APP_YIELD_NS && rings)
		sched_yield();
}

/* this thread is an application's, receiving in its own poll, or
 * asleep in uroce_progress_wait (waiter_rx) */
static __thread bool app_rx, waiter_rx;

/*
 * Whose receive burst holds its ACKs for the application's next post
 * (docs/datapath.md, "ACKs"): a waiter's, and an application poll's
 * while the progress thread leaves the socket to it (it looks within
 * APP_WAIT_NS) or within EVENT_LOOP_NS of an arm.  The latter is the
 * poll of an event loop (get the event, arm, poll, post the reply),
 * which takes the packets that came after the waiter's receive: the
 * reply's request arrives there as often as in the wait, and its ACK,
 * sent alone at the burst's end, woke the peer's waiter for a send
 * completion, then the reply woke it again (qperf rc_lat: 1.10-1.18
 * ACKs a SEND, 1.02 since).  The bound is the hold's
 * either way (the timer or the thread's look, engine/resp.c).
 */
bool uroce_progress_app_rx(struct uroce_dev *dev)
{
	if (waiter_rx)
		return true;
	if (!app_rx)
		return false;
	return atomic_load(&dev->prog.watch) == UROCE_WATCH_APP ||
	       uroce_now_ns() - atomic_load_explicit(&dev->prog.arm_ns,
						     memory_order_relaxed) <=
		       EVENT_LOOP_NS;
}

bool uroce_progress_waiter_rx(void)
{
	return waiter_rx;
}

/*
 * This thread's last poll found completions: its next poll, if it finds
 * the CQ empty, is most likely the one that ends a loop reading the CQ
 * until it is empty (rsockets, libfabric's verbs provider), after which
 * the program answers what it read.  That poll leaves the ACKs held for
 * the answer (docs/datapath.md, "ACKs"); the next empty one sends them.
 */
static __thread bool drain_end;

void uroce_progress_poll_done(struct uroce_dev *dev)
{
	atomic_store_explicit(&dev->prog.app_poll_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&dev->prog.app_done_ns, uroce_now_ns(),
			      memory_order_relaxed);
	drain_end = true;
}

void uroce_progress_empty_poll(struct uroce_dev *dev)
{
	if (drain_end)
		drain_end = false;
	else
		uroce_ack_release_unlocked(dev);
}

/*
 * A deadline that came due while an application thread spins on its CQ
 * is run by that thread, in its poll: a paced QP's next train above all
 * (docs/congestion.md, "Pacing").  The progress thread would run it when
 * its timerfd wakes it, but on a core that spinning threads keep busy it
 * waits for a slice, milliseconds on 2 cores shared by 16 processes, and
 * a paced QP that waits past its burst sends less than its rate.  The
 * one thread that takes the deadline (due_ns to 0) runs the pass; the
 * pass re-arms the timerfd for the next, so the progress thread does not
 * wake for this one.  After the poll's receive: an ACK waiting in the
 * socket clears the deadline of the probe it makes needless.
 */
static void app_timers(struct uroce_dev *dev, uint64_t now)
{
	uint64_t due = atomic_load_explicit(&dev->prog.due_ns,
					    memory_order_relaxed);

	if (due && now >= due &&
	    atomic_compare_exchange_strong_explicit(&dev->prog.due_ns, &due, 0,
						    memory_order_relaxed,
						    memory_order_relaxed)) {
		uroce_count(dev, UROCE_CNT_TIMER_APP_PASSES, 1);
		uroce_timers_run(dev);
	}
}

/*
 * An application thread's empty poll, marked for the thread (marked even
 * when the thread has the socket: it then hands over).  The thread plans
 * its sleep as it goes to sleep (wait_events): one that planned to watch
 * the socket, nobody polling then, stays asleep on it when an application
 * begins to spin on its CQ.  Each datagram wakes it, the application takes
 * the datagram first, and the kernel puts the thread back to sleep inside
 * epoll_wait, so that it never plans again; meanwhile each wake-up takes
 * a core from a spinning thread (ib_send_lat between two namespaces:
 * docs/progress.md, "Who receives when").  So a poll that finds the
 * thread on the socket while this application spins (its previous empty
 * poll within APP_POLL_NS, and no hand-back, an arm's included, within
 * HANDBACK_NS: what app_receives asks) moves the watch to APP and wakes
 * the thread once, to plan again.  The mark first, then the watch: a
 * thread that stores its watch after this read is woken by the next poll.
 */
void uroce_progress_app_polled(struct uroce_dev *dev, uint64_t now)
{
	struct uroce_wait_marks m = { .now = now };

	atomic_store_explicit(&dev->prog.app_poll_ns, now, memory_order_relaxed);
	m.app_rx_ns = atomic_exchange(&dev->prog.app_rx_ns, now);
	m.handback_ns = atomic_load_explicit(&dev->prog.handback_ns,
					     memory_order_relaxed);
	if (atomic_load(&dev->prog.watch) != UROCE_WATCH_SOCK ||
	    !app_receives(&m))
		return;
	if (watch_cas(dev, UROCE_WATCH_SOCK, UROCE_WATCH_APP)) {
		uroce_count(dev, UROCE_CNT_APP_TAKEOVERS, 1);
		wake_thread(dev);
	}
}

void uroce_progress_poll(struct uroce_dev *dev)
{
	uint64_t now;
	bool rings;
	int n;

	if (!dev->net_up || uroce_net_sock(dev) < 0)
		return;
	now = uroce_now_ns();
	uroce_progress_app_polled(dev, now);
	uroce_progress_empty_poll(dev);
	if (pthread_mutex_trylock(&dev->prog.rx_lock)) {
		app_timers(dev, now);
		return;
	}
	app_rx = true;
	uroce_tx_defer = true;
	n = uroce_net_poll(dev);
	uroce_tx_defer = false;
	app_rx = false;
	rings = uroce_local_rings(dev); /* (the poll writes it: rx_lock) */
	pthread_mutex_unlock(&dev->prog.rx_lock);
	app_timers(dev, now);
	app_poll_yield(n, now, rings);
}

__thread bool uroce_rx_direct;

void uroce_progress_drain(struct uroce_dev *dev)
{
	if (!dev->net_up || uroce_net_sock(dev) < 0)
		return;
	/* a channel's direct taker (a DREQ's drain, rdmacm/proto.c): this
	 * thread holds rx_lock, at the end of a receive burst, whose
	 * buffers are free again (net/udp.c, net/local_rx.c) */
	if (uroce_rx_direct) {
		uroce_net_poll(dev);
		return;
	}
	pthread_mutex_lock(&dev->prog.rx_lock);
	uroce_net_poll(dev);
	pthread_mutex_unlock(&dev->prog.rx_lock);
}

/*
 * A thread that sleeps in ibv_get_cq_event sleeps on the device's
 * packets too (the socket, the rings' bell), and receives itself when
 * they wake it: the completion it waits for then costs one wake-up, its
 * own (docs/events.md, "Who does the receive work while the application
 * sleeps").  The progress thread leaves them to it meanwhile
 * (uroce_progress_plan) and does the rest (timers, wake-ups, connections).  The ACKs of what it takes wait for
 * its reply, as an application poll's do (docs/datapath.md, "ACKs"):
 * the peer then gets the ACK and the reply in one wake-up.  -EBUSY:
 * another thread receives (rx_lock).
 */
static int wait_rx(struct uroce_dev *dev, bool sock, bool bell)
{
	int n;

	if (pthread_mutex_trylock(&dev->prog.rx_lock))
		return -EBUSY;
	if (sock)
		uroce_local_sock_ready(dev);
	/* (read, or the bell stays readable and wakes us again; the poll
	 * below drains our queues behind full rings, as the progress
	 * thread does when the doorbell says "room") */
	if (bell)
		uroce_local_bell_take(dev);
	waiter_rx = true;
	uroce_tx_defer = true;
	n = uroce_net_poll(dev);
	uroce_tx_defer = false;
	waiter_rx = false;
	pthread_mutex_unlock(&dev->prog.rx_lock);
	return n;
}

/* a waiter that woke to nothing so many times in a row waits on its
 * channel alone (something it cannot take keeps a descriptor ready) */
#define WAIT_EMPTY_MAX 8

/*
 * poll(2) is never restarted after a signal handler, a read of the uverbs
 * fd is when the handler has SA_RESTART.  Programs depend on either: qperf
 * ends a test with SIGALRM (no SA_RESTART) and expects ibv_get_cq_event
 * to fail with EINTR; perftest's handlers come from signal(3), which sets
 * SA_RESTART.  Which signal interrupted us is not known, so: restart if
 * every signal the program catches has SA_RESTART.  (Only after EINTR.)
 */
static bool restart_after_signal(void)
{
	struct sigaction sa;
	int sig;

	for (sig = 1; sig < NSIG; sig++) {
		if (sigaction(sig, NULL, &sa))
			continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}

/*
 * A waiter whose last wait was short spins before it sleeps: in a
 * ping-pong the answer is a round trip away, and the wake-up it would
 * otherwise cost is most of the one-way time of an event-driven exchange
 * on a machine with idle cores (a blocking socket pays one too; a NIC
 * pays none on the side that answers).  For at most spin_ns it receives
 * (wait_rx) and looks at its channel (ready), only while its last wait,
 * spin or sleep, took at most WAIT_SHORT_NS (an idle program's next
 * wait sleeps at once), and only on a core of its own (spin.h: a spin
 * that finds itself preempted stops, and the next ones wait for a
 * back-off).  The progress thread leaves the packets to it as to a
 * sleeping waiter (wait_gen).  1: ready; 0: sleep now.
 */
#define WAIT_SHORT_NS 200000

static __thread uint64_t wait_took_ns = UINT64_MAX;
static __thread struct uroce_spin_gov wait_gov;

/*
 * One wait: the caller's descriptors (fds[0 .. nfds), with two more
 * slots behind them for the socket and the rings' bell), until one of
 * them is ready, ready(arg) says what it waits for came (its count) or
 * timeout_ms (-1: none) passed.  as_poll: a signal handler ends the wait
 * with EINTR, as poll(2) (else as a read: restart_after_signal).
 */
struct wait_req {
	struct pollfd *fds;
	nfds_t nfds;
	int timeout_ms;
	int (*ready)(void *arg);
	void *arg;
	bool as_poll;
};

/* what is left of the wait: -1 none, else ms (rounded up) */
static int wait_left_ms(const struct wait_req *w, uint64_t start)
{
	uint64_t now, end;

	if (w->timeout_ms < 0)
		return w->timeout_ms; /* (none) */
	now = uroce_now_ns();
	end = start + (uint64_t)w->timeout_ms * 1000000;
	return now >= end ? 0 : (int)((end - now + 999999) / 1000000);
}

/* after EINTR: a caller of poll(2) hears of every handler */
static bool wait_restarts(const struct wait_req *w)
{
	return !w->as_poll && restart_after_signal();
}

static int spin_loop(struct uroce_dev *dev, const struct wait_req *w,
		     uint64_t start, uint64_t len)
{
	uint64_t now = start;
	int r;

	atomic_fetch_add(&dev->prog.wait_gen, 1);
	uroce_spin_begin(&wait_gov, now);
	uroce_spin_switches(&wait_gov, uroce_involuntary_switches());
	for (;;) {
		int n = wait_rx(dev, false, false);

		r = w->ready(w->arg);
		if (r > 0) {
			uroce_spin_caught(&wait_gov);
			uroce_count(dev, UROCE_CNT_WAIT_SPIN_RX, 1);
			return r;
		}
		now = uroce_now_ns();
		if (now - start > len) {
			uroce_count(dev, UROCE_CNT_WAIT_SPIN_TIMEOUT, 1);
			return 0;
		}
		if (n > 0) {
			uroce_count(dev, UROCE_CNT_WAIT_SPIN_PKTS, 1);
			uroce_spin_begin(&wait_gov, now);
			continue;
		}
		if (!spin_look(&wait_gov, now)) {
			uroce_count(dev, UROCE_CNT_WAIT_SPIN_PREEMPT, 1);
			return 0;
		}
	}
}

/* sig has a handler (one that interrupts a poll) */
static bool caught(int sig)
{
	struct sigaction sa;

	return !sigaction(sig, NULL, &sa) && sa.sa_handler != SIG_DFL &&
	       sa.sa_handler != SIG_IGN;
}

/*
 * A signal must still interrupt the wait (qperf ends each test with a
 * SIGALRM and expects ibv_get_cq_event to fail with EINTR; a handler
 * that ran during the spin would leave the sleep after it waiting for
 * a peer that stopped too).  So the spin runs with signals blocked, and
 * one that came meanwhile is delivered when the spin ends and counts as
 * an interrupted wait.  > 0: ready; 0: sleep now; -1: EINTR.
 */
static int wait_spin(struct uroce_dev *dev, const struct wait_req *w,
		     uint64_t start)
{
	/* (the configuration, not spin_ns: the progress thread sets that) */
	uint64_t len = uroce_config()->spin_ns;
	sigset_t all, old, pend;
	bool intr = false;
	int r, sig;

	if (!len)
		return 0;
	if (wait_took_ns > WAIT_SHORT_NS) {
		uroce_count(dev, UROCE_CNT_WAIT_SPIN_SKIP_LONG, 1);
		return 0;
	}
	if (!spin_may(&wait_gov, start)) {
		uroce_count(dev, UROCE_CNT_WAIT_SPIN_SKIP_GOV, 1);
		return 0;
	}
	/* (a timeout shorter than the spin bounds it) */
	if (w->timeout_ms >= 0 && len > (uint64_t)w->timeout_ms * 1000000)
		len = (uint64_t)w->timeout_ms * 1000000;
	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, &old))
		return 0;
	r = spin_loop(dev, w, start, len);
	/* (a spin that caught its event returns it, signal or not) */
	if (r <= 0 && !sigpending(&pend))
		for (sig = 1; sig < NSIG && !intr; sig++)
			intr = sigismember(&pend, sig) == 1 &&
			       sigismember(&old, sig) == 0 && caught(sig);
	pthread_sigmask(SIG_SETMASK, &old, NULL); /* (delivered here) */
	if (r > 0 || !intr || wait_restarts(w))
		return r;
	errno = EINTR;
	return -1;
}

/* the caller's descriptors that poll reported */
static int caller_ready(const struct wait_req *w)
{
	int n = 0;

	for (nfds_t i = 0; i < w->nfds; i++)
		n += w->fds[i].revents != 0;
	return n;
}

/*
 * Sleep on the caller's descriptors, the socket and the rings' bell; a
 * packet that wakes us is received here (wait_rx), and the wait ends
 * when that brought what ready(arg) looks for.  > 0: ready; 0: the
 * timeout passed; -1: errno.
 */
static int wait_sleep(struct uroce_dev *dev, const struct wait_req *w,
		      uint64_t start)
{
	struct pollfd *p = w->fds, *sock = p + w->nfds, *bell = sock + 1;
	nfds_t np = w->nfds + 2;
	int empty = 0, pass = 0;

	for (nfds_t i = 0; i < w->nfds; i++)
		p[i].revents = 0;

	*sock = (struct pollfd){ .fd = uroce_net_sock(dev), .events = POLLIN };
	*bell = (struct pollfd){ .fd = uroce_local_bell(dev), .events = POLLIN };
	if (!dev->net_up || uroce_net_sock(dev) < 0 || !dev->prog.running)
		np = w->nfds;
	for (;;) {
		int ms = wait_left_ms(w, start), n = 0, got;
		bool rings = false;

		if (!ms && pass++)
			break;
		sock->revents = bell->revents = 0;
		if (np == w->nfds) {
			n = poll(p, np, ms);
		} else if (!uroce_local_sleep(dev)) {
			rings = true; /* a ring has packets: no bell comes */
		} else {
			waiter_in(dev);
			n = poll(p, np, ms);
			waiter_out(dev);
		}
		if (!rings && n < 0 && errno == EINTR && wait_restarts(w))
			continue;
		if (!rings && n < 0)
			return -1;
		n = caller_ready(w);
		if (n)
			return n;
		if (!rings && !sock->revents && !bell->revents) {
			if (ms >= 0)
				break; /* (np == nfds sleeps until it is ready) */
			continue;
		}
		got = wait_rx(dev, sock->revents, bell->revents);
		if (got > 0) {
			uroce_count(dev, UROCE_CNT_WAIT_RX, 1);
			n = w->ready(w->arg);
			if (n > 0)
				return n;
			empty = 0; /* (what came was not ours) */
			if (got < SPIN_MIN_PKTS)
				continue;
		}
		/*
		 * The progress thread (or whoever has rx_lock) delivers,
		 * and rings the channel; after a stream too (SPIN_MIN_PKTS
		 * in one wake-up, not yet our event): the thread's own spin
		 * receives the rest while the application copies out what
		 * came, where we would sleep and wake per packet or two.
		 */
		if (got < 0 || got >= SPIN_MIN_PKTS ||
		    ++empty >= WAIT_EMPTY_MAX) {
			np = w->nfds;
			atomic_store(&dev->prog.take_back, true);
			wake_thread(dev);
		}
	}
	for (nfds_t i = 0; i < w->nfds; i++)
		p[i].revents = 0;
	return 0;
}

static int progress_wait(struct uroce_dev *dev, const struct wait_req *w)
{
	uint64_t start = uroce_now_ns();
	int r = 0;

	/* what the last wait's receive held for a reply that did not come */
	uroce_ack_release_unlocked(dev);
	if (w->timeout_ms && dev->net_up && uroce_net_sock(dev) >= 0 &&
	    dev->prog.running)
		r = wait_spin(dev, w, start);
	if (!r)
		r = wait_sleep(dev, w, start);
	wait_took_ns = r < 0 ? UINT64_MAX : uroce_now_ns() - start;
	return r;
}

int uroce_progress_wait(struct uroce_dev *dev, int fd, int (*ready)(void *),
			void *arg)
{
	struct pollfd p[3] = { { .fd = fd, .events = POLLIN } };
	struct wait_req w = { p, 1, -1, ready, arg, false };

	return progress_wait(dev, &w) < 0 ? -1 : 0;
}

/* (the spin's and a receive's look: the caller's descriptors, at once) */
static int fds_ready(void *arg)
{
	const struct wait_req *w = arg;
	int n = poll(w->fds, w->nfds, 0);

	return n > 0 ? n : 0;
}

int uroce_progress_poll_fds(struct uroce_dev *dev, struct pollfd *fds,
			    nfds_t nfds, int timeout_ms)
{
	struct pollfd own[16], *p = own;
	struct wait_req w = { NULL, nfds, timeout_ms, fds_ready, &w, true };
	int n;

	if (nfds + 2 > UROCE_ARRAY_SIZE(own)) {
		p = calloc(nfds + 2, sizeof(*p));
		if (!p) {
			errno = ENOMEM;
			return -1;
		}
	}
	memcpy(p, fds, nfds * sizeof(*p));
	w.fds = p;
	n = progress_wait(dev, &w);
	for (nfds_t i = 0; n >= 0 && i < nfds; i++)
		fds[i].revents = p[i].revents;
	if (p != own)
		free(p);
	return n;
}

static int timer_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	uint64_t v;

	if (read(w->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return 0;
	uroce_timers_run(dev);
	return 0;
}

static int wake_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	uint64_t v;

	(void)dev;
	if (read(w->fd, &v, sizeof(v)) < 0)
		return 0; /* (EAGAIN: another event woke us) */
	return 0;
}

/* the rings' bell brings packets: watched with the socket, and while
 * the application has the socket too (net/local.c) */
int uroce_progress_watch_bell(struct uroce_dev *dev, struct uroce_watcher *w,
			      int fd)
{
	int err = uroce_watcher_add(dev->prog.sock_epfd, w, fd, EPOLLIN);

	return err ? err : uroce_watcher_add(dev->prog.app_epfd, w, fd, EPOLLIN);
}

/* the thread's own descriptors, once they exist (epfd is watched in
 * the other two sets: its events wake them too) */
static int watch_own(struct uroce_dev *dev)
{
	const struct {
		int epfd;
		struct uroce_watcher *w;
		int fd;
	} own[] = {
		{ dev->prog.sock_epfd, &dev->prog.epfd_w, dev->prog.epfd },
		{ dev->prog.app_epfd, &dev->prog.epfd_w, dev->prog.epfd },
		{ dev->prog.epfd, &dev->prog.timer_w, dev->prog.timerfd },
		{ dev->prog.epfd, &dev->prog.wake_w, dev->prog.wakefd },
	};
	size_t i;
	int err;

	dev->prog.timer_w.fn = timer_ready;
	dev->prog.wake_w.fn = wake_ready;
	for (i = 0; i < UROCE_ARRAY_SIZE(own); i++) {
		err = uroce_watcher_add(own[i].epfd, own[i].w, own[i].fd,
					EPOLLIN);
		if (err)
			return err;
	}
	return 0;
}

int uroce_progress_start(struct uroce_dev *dev)
{
	int err;

	dev->prog.epfd = uroce_epoll_create1(EPOLL_CLOEXEC);
	dev->prog.app_epfd = uroce_epoll_create1(EPOLL_CLOEXEC);
	dev->prog.sock_epfd = uroce_epoll_create1(EPOLL_CLOEXEC);
	dev->prog.timerfd = timerfd_create(CLOCK_MONOTONIC,
					   TFD_NONBLOCK | TFD_CLOEXEC);
	dev->prog.wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (dev->prog.epfd < 0 || dev->prog.app_epfd < 0 ||
	    dev->prog.sock_epfd < 0 || dev->prog.timerfd < 0 ||
	    dev->prog.wakefd < 0)
		return -errno;
	err = watch_own(dev);
	if (!err)
		err = uroce_net_watch(dev);
	if (err)
		return err;

	/* (without the looker the thread looks itself, as it did) */
	uroce_looker_start(dev);
	err = uroce_thread_create(&dev->prog.thread, 0, progress_main, dev);
	dev->prog.running = !err;
	if (err) {
		atomic_store(&dev->prog.stopping, true);
		uroce_looker_join(dev, NULL);
		atomic_store(&dev->prog.stopping, false);
	}
	return -err;
}

void uroce_rx_pause(struct uroce_dev *dev)
{
	pthread_mutex_lock(&dev->prog.rx_lock);
	pthread_mutex_lock(&dev->lock);
}

void uroce_rx_resume(struct uroce_dev *dev)
{
	uroce_dev_unlock(dev);
	pthread_mutex_unlock(&dev->prog.rx_lock);
}

/* close what uroce_progress_start opened (no thread runs on them; a
 * looker still running keeps the two it writes and reads).  An exit
 * keeps the timer as well, and its deadline: the process's other
 * threads may still post and arm a CQ, librdmacm's CM thread among
 * them, and a post sets the timer, a hand-back writes wakefd */
static void close_fds(struct uroce_dev *dev, bool exiting)
{
	int *fds[] = { &dev->prog.sock_epfd, &dev->prog.app_epfd,
		       &dev->prog.epfd,	     &dev->prog.timerfd,
		       &dev->prog.wakefd,    &dev->prog.lookfd };
	size_t keep = exiting ? 3 : dev->prog.looking ? 2 : 0;
	size_t i, n = UROCE_ARRAY_SIZE(fds) - keep;

	for (i = 0; i < n; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	if (!exiting)
		armed_set(dev, 0);
}

int uroce_progress_stop(struct uroce_dev *dev, const struct timespec *until)
{
	int err;

	if (!dev->prog.running) {
		/* a device brought up without the thread, or whose start
		 * failed half-way */
		close_fds(dev, false);
		return 0;
	}
	atomic_store(&dev->prog.stopping, true);
	wake_thread(dev);
	err = until ? pthread_timedjoin_np(dev->prog.thread, NULL, until) :
		      pthread_join(dev->prog.thread, NULL);
	if (err) {
		uroce_log(UROCE_LOG_WARN, "progress thread did not stop: %s",
			  strerror(err));
		return -err;
	}
	/* (a looker that did not stop in time, at exit: the rest goes
	 * on, and close_fds leaves it its descriptors) */
	uroce_looker_join(dev, until);
	dev->prog.running = false;
	atomic_store(&dev->prog.stopping, false);
	close_fds(dev, until != NULL);
	return 0;
}
