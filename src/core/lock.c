// SPDX-License-Identifier: MIT
/*
 * uroce_lock_spin (core/lock.h), and uroce_assert_held's check, built
 * with UROCE_LOCK_CHECKS.  The thread's id is kept per thread, so a check
 * is a compare, not a system call; a forked child forgets it (its thread
 * has a new id).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/lock.h"

static bool spin_worth;
static pthread_once_t spin_once = PTHREAD_ONCE_INIT;

/* (with one CPU to run on, the holder cannot run while we spin) */
static void spin_init(void)
{
	cpu_set_t set;

	spin_worth = !sched_getaffinity(0, sizeof(set), &set) &&
		     CPU_COUNT(&set) > 1;
}

/* (the real clock: the engine tests' fake one, uroce_now_ns's, stands
 * still; and not core/clock.c's conversion: librdmacm and two unit tests
 * compile this file alone) */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

void uroce_lock_spin(pthread_mutex_t *m)
{
	if (!pthread_mutex_trylock(m))
		return;
	pthread_once(&spin_once, spin_init);
	if (spin_worth) {
		uint64_t until = mono_ns() + UROCE_LOCK_SPIN_NS;
		unsigned int i;

		for (i = 1;; i++) {
			cpu_relax();
			if (!pthread_mutex_trylock(m))
				return;
			if (!(i % 32) && mono_ns() >= until)
				break;
		}
	}
	pthread_mutex_lock(m);
}

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
