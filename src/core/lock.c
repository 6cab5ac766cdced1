// SPDX-License-Identifier: MIT
/*
 * uroce_assert_held's check (core/lock.h), built with UROCE_LOCK_CHECKS.
 * The thread's id is kept per thread, so a check is a compare, not a
 * system call; a forked child forgets it (its thread has a new id).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/lock.h"

#ifdef UROCE_LOCK_CHECKS
static __thread pid_t my_tid;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_tid(void)
{
	my_tid = 0;
}

static void watch_fork(void)
{
	pthread_atfork(NULL, NULL, forget_tid);
}

static pid_t tid(void)
{
	if (!my_tid) {
		pthread_once(&atfork_once, watch_fork);
		my_tid = gettid();
	}
	return my_tid;
}

void uroce_lock_check_held(const pthread_mutex_t *m, const char *name,
			   const char *file, int line)
{
	if (m->__data.__owner == tid())
		return;
	fprintf(stderr, "uroce: %s:%d: %s not held by this thread (owner %d)\n",
		file, line, name, m->__data.__owner);
	abort();
}

void uroce_lock_check_either(const pthread_mutex_t *a, const pthread_mutex_t *b,
			     const char *names, const char *file, int line)
{
	if (a->__data.__owner == tid() || b->__data.__owner == tid())
		return;
	fprintf(stderr, "uroce: %s:%d: neither %s held by this thread\n", file,
		line, names);
	abort();
}
#endif
