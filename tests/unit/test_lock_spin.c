// SPDX-License-Identifier: MIT
/*
 * uroce_lock_spin (src/core/lock.c, compiled in directly): it takes a
 * free lock at once; it waits for a holder that keeps the lock past the
 * spin (and returns only once the holder let it go); two threads that
 * count under it, taking it 200 000 times between them, lose no count;
 * and a process that may run on one CPU only still gets the lock (it
 * then sleeps on it without spinning).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/lock.h"

static void free_lock_taken(void **state)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	(void)state;
	uroce_lock_spin(&m);
	assert_int_equal(pthread_mutex_trylock(&m), EBUSY);
	pthread_mutex_unlock(&m);
}

/* a holder that keeps the lock 20 spins long, then lets it go */
#define HOLD_NS (20ull * UROCE_LOCK_SPIN_NS)

struct holder {
	pthread_mutex_t m;
	atomic_bool held, released;
};

static void *hold(void *arg)
{
	struct holder *h = arg;
	struct timespec nap = { 0, (long)HOLD_NS };

	pthread_mutex_lock(&h->m);
	atomic_store(&h->held, true);
	nanosleep(&nap, NULL);
	atomic_store(&h->released, true);
	pthread_mutex_unlock(&h->m);
	return NULL;
}

static void long_holder_waited_for(void **state)
{
	struct holder h = { .m = PTHREAD_MUTEX_INITIALIZER };
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, hold, &h), 0);
	while (!atomic_load(&h.held))
		sched_yield();
	uroce_lock_spin(&h.m);
	/* (past the spin: the holder's release came first) */
	assert_true(atomic_load(&h.released));
	pthread_mutex_unlock(&h.m);
	pthread_join(t, NULL);
}

#define COUNTS 100000

struct counting {
	pthread_mutex_t m;
	uint64_t count; /* under m, read and written in two steps */
};

static void *count_up(void *arg)
{
	struct counting *c = arg;
	int i;

	for (i = 0; i < COUNTS; i++) {
		uint64_t v;

		uroce_lock_spin(&c->m);
		v = c->count;
		if (!(i % 64))
			sched_yield(); /* (a holder that leaves its core) */
		__atomic_store_n(&c->count, v + 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&c->m);
	}
	return NULL;
}

/* what two threads counted (0: no second thread) */
static uint64_t two_counters(void)
{
	struct counting c = { .m = PTHREAD_MUTEX_INITIALIZER };
	pthread_t t;

	if (pthread_create(&t, NULL, count_up, &c))
		return 0;
	count_up(&c);
	pthread_join(t, NULL);
	return c.count;
}

static void no_count_lost(void **state)
{
	(void)state;
	assert_int_equal(two_counters(), 2 * COUNTS);
}

/* in a child pinned to one CPU before its first contended lock: the
 * lock still excludes (it sleeps at once there) */
static void one_cpu_no_count_lost(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET((unsigned int)sched_getcpu(), &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			_exit(2);
		_exit(two_counters() == 2 * COUNTS ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* (first: the child must be the first to ask for the CPUs) */
		cmocka_unit_test(one_cpu_no_count_lost),
		cmocka_unit_test(free_lock_taken),
		cmocka_unit_test(long_holder_waited_for),
		cmocka_unit_test(no_count_lost),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
