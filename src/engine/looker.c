// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* pthread_timedjoin_np */
/*
 * The looker: a thread at SCHED_IDLE that looks, while an application
 * receives for itself, whether it still does (docs/progress.md, "The
 * looker").
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "core/thread.h"
#include "dev.h"

/*
 * While an application receives for itself (the APP watch) something
 * must look every UROCE_APP_WAIT_NS whether it still does, and send an
 * ACK it holds (docs/datapath.md, "The bound").  The progress thread
 * did, by waking from epoll that often; but a thread that sleeps and
 * wakes thousands of times a second beside a thread of its process that
 * spins can keep every core from other cgroups' tasks for seconds
 * (Linux 6.18's EEVDF with group scheduling, autogroups included: on
 * this 2-core host, beside two ib_send_lat processes between namespaces,
 * a CPU-bound program in another session stood still for 0.5-2.5 s in
 * 13 runs of 25, and ksoftirqd waited as long; a QEMU guest's rxe
 * stopped answering for 3.4 s and its peers' retries ran out;
 * docs/progress.md, "The looker").  A thread at SCHED_IDLE does not do
 * that: its weight, 3 against 1024, barely moves its group's share as it
 * sleeps and wakes.  An unprivileged thread may go to SCHED_IDLE but not
 * come back (RLIMIT_NICE, sched(7)), so the looks are a thread of their
 * own, at SCHED_IDLE for life, and the progress thread sleeps until woken
 * under the APP watch (by its descriptors: timers, wake-ups, the rings'
 * bell, forwarded datagrams).  The looker wakes it when there is
 * something to do: the application stopped receiving (what the plan
 * asks, app_receives), or an ACK is held.  The price: when every core is
 * busy the look waits for one, up to a time slice, where the progress
 * thread preempted.  Off the APP watch the looker sleeps on lookfd.
 */
static void looker_look(struct uroce_dev *dev)
{
	uint64_t by = uroce_now_ns() + UROCE_APP_WAIT_NS;
	struct timespec nap = { 0, UROCE_APP_WAIT_NS };

	/* the promise first, then the mark: a hold marks, then reads the
	 * promise (engine/resp.c); one of the two sees the other */
	atomic_store(&dev->prog.wake_by_ns, by);
	if (atomic_load(&dev->ack.held))
		uroce_progress_wake(dev);
	nanosleep(&nap, NULL);
	if (atomic_load(&dev->ack.held) ||
	    (atomic_load(&dev->prog.watch) == UROCE_WATCH_APP &&
	     uroce_progress_app_stopped(dev)))
		uroce_progress_wake(dev);
	/* (a promise the progress thread has replaced is its own) */
	atomic_compare_exchange_strong(&dev->prog.wake_by_ns, &by, 0);
	if (atomic_load(&dev->ack.held))
		uroce_progress_wake(dev);
}

static void *looker_main(void *arg)
{
	struct uroce_dev *dev = arg;
	uint64_t v;

	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	while (!atomic_load(&dev->prog.stopping)) {
		/* (asleep first, then the watch; the thread stores the
		 * watch, then takes the mark: one sees the other) */
		atomic_store(&dev->prog.looker_asleep, true);
		if (atomic_load(&dev->prog.watch) != UROCE_WATCH_APP &&
		    !atomic_load(&dev->prog.stopping) &&
		    read(dev->prog.lookfd, &v, sizeof(v)) < 0 && errno != EINTR)
			break;
		atomic_store(&dev->prog.looker_asleep, false);
		if (atomic_load(&dev->prog.watch) == UROCE_WATCH_APP)
			looker_look(dev);
	}
	return NULL;
}

void uroce_looker_wake(struct uroce_dev *dev)
{
	uint64_t one = 1;

	if (atomic_exchange(&dev->prog.looker_asleep, false) &&
	    write(dev->prog.lookfd, &one, sizeof(one)) < 0)
		uroce_log(UROCE_LOG_DEBUG, "looker wake-up: %s",
			  strerror(errno));
}

void uroce_looker_start(struct uroce_dev *dev)
{
	struct sched_param sp = { 0 };
	int err;

	dev->prog.lookfd = eventfd(0, EFD_CLOEXEC);
	if (dev->prog.lookfd < 0)
		return;
	/* (before the thread, which reads it) */
	dev->prog.looking = true;
	if (uroce_thread_create(&dev->prog.looker, 0, looker_main, dev)) {
		dev->prog.looking = false;
		return;
	}
	/* (from here: at SCHED_IDLE before the device is up) */
	err = pthread_setschedparam(dev->prog.looker, SCHED_IDLE, &sp);
	if (err)
		uroce_log(UROCE_LOG_DEBUG, "looker at SCHED_IDLE: %s",
			  strerror(err));
}

/* (dev->prog.stopping set) */
int uroce_looker_join(struct uroce_dev *dev, const struct timespec *until)
{
	uint64_t one = 1;
	int err;

	if (!dev->prog.looking)
		return 0;
	if (write(dev->prog.lookfd, &one, sizeof(one)) < 0)
		uroce_log(UROCE_LOG_WARN, "looker stop: %s", strerror(errno));
	err = until ? pthread_timedjoin_np(dev->prog.looker, NULL, until) :
		      pthread_join(dev->prog.looker, NULL);
	if (err)
		uroce_log(UROCE_LOG_DEBUG, "looker did not stop: %s",
			  strerror(err));
	else
		dev->prog.looking = false;
	return err;
}
