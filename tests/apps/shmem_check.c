// SPDX-License-Identifier: MIT
/*
 * OpenSHMEM with every element checked, for Open MPI's oshmem (Debian's
 * openmpi-bin: its spml runs on UCX).
 *
 *	shmem_check [ROUNDS]
 *
 * Each round, on the symmetric heap, with values that change every round:
 * shmem_putmem of 8 B, 64 KiB and 1 MiB into the next PE, then a fence and
 * a flag (shmem_long_p) that PE waits for (shmem_long_wait_until): the
 * data must be there when the flag is; shmem_getmem of the previous PE's
 * block; shmem_putmem_nbi and shmem_quiet; atomics on every PE from every
 * PE (fetch-add, add, inc, and a compare-and-swap loop), their totals
 * checked; shmem_long_sum_to_all and shmem_broadcast64 from a root that
 * moves every round; shmem_barrier_all between the phases.  Prints
 * "shmem_check: pe P of N OK ..." or "shmem_check: pe P FAIL ..." (then
 * shmem_global_exit).
 */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/pattern.h"

#define MAX_LONGS (1048576 / sizeof(long))

static int me, npes;

static void fail(const char *what, long at, long got, long want)
{
	printf("shmem_check: pe %d FAIL %s: element %ld is %ld, want %ld\n", me,
	       what, at, got, want);
	fflush(stdout);
	shmem_global_exit(1);
}

/* the pattern (tests/lib/pattern.h) of what PE `from` puts into its next
 * PE in round r, phase p */
static uint64_t key(int from, int r, int p)
{
	return key_of((uint64_t)from, (uint64_t)r, (uint64_t)p, 0);
}

/* a value of that pattern, not negative */
static long val(int from, int r, int p)
{
	return (long)(pat_word(key(from, r, p), 0) >> 1);
}

static void fill(long *b, long n, int from, int r, int p)
{
	pat_fill((uint8_t *)b, n * sizeof(*b), key(from, r, p), 0);
}

static void check(const char *what, const long *b, long n, int from, int r,
		  int p)
{
	uint64_t off = pat_check((const uint8_t *)b, n * sizeof(*b),
				 key(from, r, p), 0);
	long e = (long)(off / sizeof(*b)), want;

	if (off == UINT64_MAX)
		return;
	pat_fill((uint8_t *)&want, sizeof(want), key(from, r, p),
		 e * sizeof(*b));
	fail(what, e, b[e], want);
}

/* the symmetric objects */
static long *src, *dst;
static long flag, counter, ticket, red_src, red_dst, bcast_buf;
static long pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static long psync_red[SHMEM_REDUCE_SYNC_SIZE];
static long psync_bc[SHMEM_BCAST_SYNC_SIZE];

/* put n longs into the next PE, then a fence and the flag it waits for */
static void put_flagged(int r, int p, long n)
{
	int next = (me + 1) % npes, prev = (me + npes - 1) % npes;

	fill(src, n, me, r, p);
	shmem_putmem(dst, src, n * sizeof(long), next);
	shmem_fence();
	shmem_long_p(&flag, (long)r * 8 + p + 1, next);
	shmem_long_wait_until(&flag, SHMEM_CMP_GE, (long)r * 8 + p + 1);
	check("put", dst, n, prev, r, p);
	shmem_barrier_all();
}

/* read the previous PE's source block */
static void get(int r, long n)
{
	int prev = (me + npes - 1) % npes;

	fill(src, n, me, r, 4);
	shmem_barrier_all();
	shmem_getmem(dst, src, n * sizeof(long), prev);
	check("get", dst, n, prev, r, 4);
	shmem_barrier_all();
}

static void put_nbi(int r, long n)
{
	int next = (me + 1) % npes, prev = (me + npes - 1) % npes;

	fill(src, n, me, r, 5);
	shmem_putmem_nbi(dst, src, n * sizeof(long), next);
	shmem_quiet();
	shmem_barrier_all();
	check("put_nbi", dst, n, prev, r, 5);
	shmem_barrier_all();
}

/* every PE adds to every PE's counter; then a CAS loop on PE 0's ticket */
static void atomics(int r)
{
	long old, want, seen;
	int pe;

	want = (long)npes * (npes + 1) / 2 + 1001L * npes;
	counter = 0;
	shmem_barrier_all();
	for (pe = 0; pe < npes; pe++) {
		old = shmem_long_atomic_fetch_add(&counter, me + 1, pe);
		if (old < 0 || old > want)
			fail("fetch_add's old value", pe, old, want);
		shmem_long_atomic_add(&counter, 1000, pe);
		shmem_long_atomic_inc(&counter, pe);
	}
	shmem_barrier_all();
	if (counter != want)
		fail("atomic total", r, counter, want);
	if (shmem_long_atomic_fetch(&counter, (me + 1) % npes) != want)
		fail("atomic fetch", r, counter, want);
	shmem_barrier_all();

	/* each PE takes one ticket of PE 0's by compare-and-swap */
	do {
		seen = shmem_long_atomic_fetch(&ticket, 0);
		old = shmem_long_atomic_compare_swap(&ticket, seen, seen + 1, 0);
	} while (old != seen);
	shmem_barrier_all();
	if (me == 0 && ticket != (long)(r + 1) * npes)
		fail("compare_swap total", r, ticket, (long)(r + 1) * npes);
	shmem_barrier_all();
}

static void collectives(int r)
{
	long want = 0;
	int pe, root = r % npes;

	red_src = val(me, r, 6) & 0xffffff;
	for (pe = 0; pe < npes; pe++)
		want += val(pe, r, 6) & 0xffffff;
	shmem_barrier_all();
	shmem_long_sum_to_all(&red_dst, &red_src, 1, 0, 0, npes, pwrk,
			      psync_red);
	if (red_dst != want)
		fail("sum_to_all", r, red_dst, want);
	shmem_barrier_all();

	/* (shmem_broadcast64 leaves the root's target unchanged) */
	bcast_buf = me == root ? val(root, r, 7) : -1;
	src[0] = bcast_buf;
	shmem_barrier_all();
	shmem_broadcast64(&bcast_buf, src, 1, root, 0, 0, npes, psync_bc);
	if (me != root && bcast_buf != val(root, r, 7))
		fail("broadcast64", r, bcast_buf, val(root, r, 7));
	shmem_barrier_all();
}

int main(int argc, char **argv)
{
	static const long sizes[] = { 1, 65536 / sizeof(long), MAX_LONGS };
	int rounds = argc > 1 ? atoi(argv[1]) : 5, r, i;

	shmem_init();
	me = shmem_my_pe();
	npes = shmem_n_pes();
	for (i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++)
		psync_red[i] = SHMEM_SYNC_VALUE;
	for (i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++)
		psync_bc[i] = SHMEM_SYNC_VALUE;
	src = shmem_malloc(MAX_LONGS * sizeof(long));
	dst = shmem_malloc(MAX_LONGS * sizeof(long));
	if (!src || !dst) {
		printf("shmem_check: pe %d FAIL shmem_malloc\n", me);
		shmem_global_exit(2);
	}
	shmem_barrier_all();

	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 3; i++)
			put_flagged(r, i, sizes[i]);
		get(r, sizes[2]);
		put_nbi(r, sizes[1]);
		atomics(r);
		collectives(r);
	}
	printf("shmem_check: pe %d of %d OK %d rounds\n", me, npes, rounds);
	fflush(stdout);
	shmem_free(dst);
	shmem_free(src);
	shmem_finalize();
	return 0;
}
