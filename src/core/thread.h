/* SPDX-License-Identifier: MIT */
/*
 * core/thread: how uroce starts a thread of its own (the progress thread,
 * the stats snapshot thread, librdmacm's CM thread).
 *
 * Each blocks every signal for its whole life.  A signal sent to the
 * process (kill(getpid(), ...)) goes to any one thread that does not
 * block it, and the application's signals are for the application's
 * threads: tgt blocks SIGUSR2 in all of its own threads and reads it
 * from a signalfd, so one thread of ours that left it unblocked got the
 * signal, whose default action killed the process.  The mask is set
 * around pthread_create, which the new thread inherits it from, so there
 * is no moment in which the thread runs with signals open.
 *
 * Header only: both libraries use it.  Includes nothing of ours.
 */
#ifndef UROCE_CORE_THREAD_H
#define UROCE_CORE_THREAD_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>

/* pthread_create's return: 0 or a positive errno.  stack 0: the default
 * size. */
static inline int uroce_thread_create(pthread_t *t, size_t stack,
				      void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	err = pthread_attr_init(&attr);
	if (err)
		return err;
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return err;
}

#endif
