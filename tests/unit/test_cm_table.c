// SPDX-License-Identifier: MIT
/*
 * The CM's lookup structures (src/rdmacm/table.c, compiled in directly):
 * the hash tables stay O(1) at 100 000 entries of the keys the CM uses
 * (runs of consecutive comm IDs under a process prefix, a peer's comm IDs
 * mixed with its GID, ports), and the timer queues give every timer back
 * once, earliest first, whatever mix of durations, cancels and re-arms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cm.h"

/* what table.c takes from the rest of the CM */
struct cm_global cm = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.ids = { &cm.ids, &cm.ids },
	.tomb_fifo = { &cm.tomb_fifo, &cm.tomb_fifo },
	.timers.odd = { &cm.timers.odd, &cm.timers.odd },
};

uint64_t cm_now_ns(void)
{
	return 1;
}

void cm_window_leave(struct cm_id *id)
{
	(void)id;
}

#define NKEYS 100000

struct chain_stats {
	double probes; /* nodes compared, on average, to find a key */
	size_t longest;
};

static struct chain_stats chains(const struct cm_hash *h)
{
	struct chain_stats st = { 0, 0 };
	size_t i, len, sum = 0;
	struct cm_hnode *n;

	for (i = 0; i <= h->mask; i++) {
		for (len = 0, n = h->b[i]; n; n = n->next)
			len++;
		/* the k-th node of a chain takes k compares */
		sum += len * (len + 1) / 2;
		if (len > st.longest)
			st.longest = len;
	}
	st.probes = (double)sum / (double)h->n;
	return st;
}

/* Fills a table with n keys from key(i), checks that each is found and
 * that the chains stay short; returns the average compares per lookup. */
static double fill_and_check(size_t n, uint64_t (*key)(size_t, uint64_t),
			     uint64_t seed)
{
	struct cm_hnode *nodes = calloc(n, sizeof(*nodes));
	struct cm_hash h = { 0 };
	struct chain_stats st;
	size_t i;

	assert_non_null(nodes);
	for (i = 0; i < n; i++)
		assert_int_equal(cm_hash_add(&h, &nodes[i], key(i, seed)), 0);
	assert_int_equal(h.n, n);
	/* at most one node per bucket on average */
	assert_true(h.mask + 1 >= n);
	for (i = 0; i < n; i += 97) {
		struct cm_hnode *f = cm_hash_first(&h, key(i, seed));

		assert_ptr_equal(f, &nodes[i]);
		assert_null(cm_hash_next(f));
	}
	st = chains(&h);
	/* a uniform spread at load <= 1 gives ~1.5 compares and chains
	 * of a handful; the slot taken from the product's middle bits gave
	 * 7 compares and chains of 15 at 100 000 consecutive comm IDs */
	assert_true(st.probes < 2.0);
	assert_true(st.longest <= 10);
	free(h.b);
	free(nodes);
	return st.probes;
}

/* our comm IDs: a counter from a random start under the process byte */
static uint64_t comm_id(size_t i, uint64_t seed)
{
	return (seed & 0xff000000) | ((seed + i) & 0xffffff);
}

/* by_remote, tombstones: the peer's comm ID mixed with its GID */
static uint64_t peer_key(size_t i, uint64_t seed)
{
	return comm_id(i, seed) ^ (0xffff0000ull | (seed << 32));
}

/* bound ports: (port space, port), consecutive ports */
static uint64_t port_key(size_t i, uint64_t seed)
{
	return (seed & 0xffff) << 16 | ((32768 + i) & 0xffff);
}

static void hash_flat_at_scale(void **state)
{
	static const uint64_t seeds[] = { 0x01000001, 0x05fffff0, 0xab123456,
					  0x7f000001 };
	size_t s;

	(void)state;
	for (s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		double small = fill_and_check(1000, comm_id, seeds[s]);
		double big = fill_and_check(NKEYS, comm_id, seeds[s]);

		/* what a lookup costs does not grow with the entries */
		assert_true(big < small + 0.5);
		fill_and_check(NKEYS, peer_key, seeds[s]);
	}
	fill_and_check(28232, port_key, 0x0106);
}

static void hash_del_and_shared_keys(void **state)
{
	struct cm_hnode *nodes = calloc(NKEYS, sizeof(*nodes)), *f;
	struct cm_hash h = { 0 };
	size_t i, found;

	(void)state;
	assert_non_null(nodes);
	/* every key twice: a port that two ids use */
	for (i = 0; i < NKEYS; i++)
		assert_int_equal(cm_hash_add(&h, &nodes[i], i / 2), 0);
	for (i = 0; i < NKEYS; i += 4)
		cm_hash_del(&h, &nodes[i]);
	/* deleting a node twice, or one in no table, changes nothing */
	cm_hash_del(&h, &nodes[0]);
	assert_int_equal(h.n, NKEYS - NKEYS / 4);
	for (i = 0; i < NKEYS; i += 2) {
		found = 0;
		for (f = cm_hash_first(&h, i / 2); f; f = cm_hash_next(f)) {
			assert_int_equal(f->key, i / 2);
			found++;
		}
		assert_int_equal(found, i % 4 ? 2 : 1);
	}
	free(h.b);
	free(nodes);
}

#define NTIMERS 20000

static struct cm_timer timers[NTIMERS];

/* Takes every due timer off in order; returns how many. */
static size_t drain(uint64_t now, uint64_t *last)
{
	struct cm_timer *t;
	size_t n = 0;

	while ((t = cm_timer_first(&cm.timers)) && t->deadline_ns <= now) {
		assert_true(t->deadline_ns >= *last);
		*last = t->deadline_ns;
		cm_timer_cancel(t);
		assert_int_equal(t->deadline_ns, 0);
		n++;
	}
	return n;
}

static void timers_in_order(void **state)
{
	/* the durations the CM uses: REQ/DREQ/REP response timeouts,
	 * the time wait, an MRA's service timeout added */
	static const uint64_t durs[] = { 1073741824, 67108864, 2147483648,
					 3221225472, 268435456 };
	uint64_t now = 1000, last = 0;
	size_t i, fired, armed = 0;

	(void)state;
	pthread_mutex_lock(&cm.lock);
	for (i = 0; i < NTIMERS; i++) {
		now += 1 + i % 7;
		cm_timer_set(&cm.timers, &timers[i], now, durs[(i * 7919) % 5]);
	}
	/* few durations: no timer in the sorted queue */
	assert_true(cm_link_empty(&cm.timers.odd));
	/* answers cancel some, others are armed again (a retransmission) */
	for (i = 0; i < NTIMERS; i += 3)
		cm_timer_cancel(&timers[i]);
	for (i = 1; i < NTIMERS; i += 101)
		cm_timer_set(&cm.timers, &timers[i], now, durs[i % 5]);
	for (i = 0; i < NTIMERS; i++)
		armed += timers[i].deadline_ns != 0;
	fired = drain(now + 1000000000, &last);
	assert_true(fired > 0 && fired < armed);
	fired += drain(UINT64_MAX, &last);
	assert_int_equal(fired, armed);
	assert_null(cm_timer_first(&cm.timers));
	pthread_mutex_unlock(&cm.lock);
}

static void timers_many_durations(void **state)
{
	uint64_t now = 1, last = 0;
	size_t i;

	(void)state;
	pthread_mutex_lock(&cm.lock);
	/* more durations than queues: the rest go into the sorted one,
	 * and still come back earliest first */
	for (i = 0; i < 4000; i++) {
		now += 3;
		cm_timer_set(&cm.timers, &timers[i], now,
			     1000000 * (1 + (i * 31) % (3 * CM_TIMER_QUEUES)));
	}
	assert_false(cm_link_empty(&cm.timers.odd));
	for (i = 0; i < 4000; i += 5)
		cm_timer_cancel(&timers[i]);
	assert_int_equal(drain(UINT64_MAX, &last), 4000 - 800);
	assert_true(cm_link_empty(&cm.timers.odd));
	assert_null(cm_timer_first(&cm.timers));
	pthread_mutex_unlock(&cm.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hash_flat_at_scale),
		cmocka_unit_test(hash_del_and_shared_keys),
		cmocka_unit_test(timers_in_order),
		cmocka_unit_test(timers_many_durations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
