// SPDX-License-Identifier: MIT
/*
 * Point-to-point, collectives and one-sided with every byte checked, for
 * MPICH (built against Debian's mpich: its ch4 device runs on UCX).
 *
 *	mpi_check [ROUNDS]
 *
 * Each round: a ring of MPI_Isend/MPI_Irecv at 8 B (eager), 64 KiB and
 * 1 MiB (rendezvous), each rank to rank+1; MPI_Bcast from a root that
 * moves every round; MPI_Allreduce and MPI_Reduce (sum of known integers);
 * MPI_Allgather and MPI_Alltoall of rank-tagged blocks; MPI_Barrier;
 * one-sided: MPI_Put and MPI_Get of 256 KiB in fence epochs, and
 * MPI_Accumulate, MPI_Fetch_and_op and MPI_Compare_and_swap on rank 0's
 * window in a passive-target epoch (rma below).  Every received element
 * is compared with what its sender must have sent.  Prints "mpi_check: rank R of N OK ..." or "mpi_check: rank R
 * FAIL ..." (then MPI_Abort).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/pattern.h"

static int rank, size;

static void fail(const char *what, long at, long got, long want)
{
	printf("mpi_check: rank %d FAIL %s: element %ld is %ld, want %ld\n",
	       rank, what, at, got, want);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* the pattern (tests/lib/pattern.h) of what rank `from` sends to rank
 * `to` in round r */
static uint64_t key(int from, int to, int r)
{
	return key_of((uint64_t)from, (uint64_t)to, (uint64_t)r, 0);
}

/* b[0..n) = what `from` sends `to` in round r */
static void fill(int32_t *b, long n, int from, int to, int r)
{
	pat_fill((uint8_t *)b, n * sizeof(*b), key(from, to, r), 0);
}

/* b[0..n) must be what `from` sent `to` in round r; a wrong element is
 * reported as element at + its index */
static void expect(const char *what, const int32_t *b, long n, int from, int to,
		   int r, long at)
{
	uint64_t off = pat_check((const uint8_t *)b, n * sizeof(*b),
				 key(from, to, r), 0);
	long e = (long)(off / sizeof(*b));
	int32_t want;

	if (off == UINT64_MAX)
		return;
	pat_fill((uint8_t *)&want, sizeof(want), key(from, to, r),
		 e * sizeof(*b));
	fail(what, at + e, b[e], want);
}

static void ring(int r, long n)
{
	int to = (rank + 1) % size, from = (rank + size - 1) % size;
	int32_t *out = malloc(n * sizeof(*out)), *in = malloc(n * sizeof(*in));
	MPI_Request req[2];
	MPI_Status st[2];
	long i;

	if (!out || !in)
		MPI_Abort(MPI_COMM_WORLD, 2);
	fill(out, n, rank, to, r);
	for (i = 0; i < n; i++)
		in[i] = -1;
	MPI_Irecv(in, (int)n, MPI_INT32_T, from, r, MPI_COMM_WORLD, &req[0]);
	MPI_Isend(out, (int)n, MPI_INT32_T, to, r, MPI_COMM_WORLD, &req[1]);
	MPI_Waitall(2, req, st);
	expect("ring", in, n, from, rank, r, 0);
	free(out);
	free(in);
}

static void collectives(int r)
{
	enum {
		N = 4096
	};
	int root = r % size, k;
	int32_t *a = malloc(N * sizeof(*a)), *b = malloc(N * sizeof(*b));
	int32_t *all = malloc((size_t)size * N * sizeof(*all));
	int32_t *outs = malloc((size_t)size * N * sizeof(*outs));
	long i, want;

	if (!a || !b || !all || !outs)
		MPI_Abort(MPI_COMM_WORLD, 2);

	if (rank == root)
		fill(a, N, root, -1, r);
	else
		for (i = 0; i < N; i++)
			a[i] = -1;
	MPI_Bcast(a, N, MPI_INT32_T, root, MPI_COMM_WORLD);
	expect("bcast", a, N, root, -1, r, 0);

	/* sums of (rank + 1) * (i + r): exact, known in closed form */
	for (i = 0; i < N; i++)
		a[i] = (int32_t)((rank + 1) * (i % 1000 + r));
	MPI_Allreduce(a, b, N, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
	for (i = 0; i < N; i++) {
		want = (long)size * (size + 1) / 2 * (i % 1000 + r);
		if (b[i] != want)
			fail("allreduce", i, b[i], want);
	}
	memset(b, 0xff, N * sizeof(*b));
	MPI_Reduce(a, b, N, MPI_INT32_T, MPI_SUM, root, MPI_COMM_WORLD);
	for (i = 0; rank == root && i < N; i++) {
		want = (long)size * (size + 1) / 2 * (i % 1000 + r);
		if (b[i] != want)
			fail("reduce", i, b[i], want);
	}

	fill(a, N, rank, -2, r);
	MPI_Allgather(a, N, MPI_INT32_T, all, N, MPI_INT32_T, MPI_COMM_WORLD);
	for (k = 0; k < size; k++)
		expect("allgather", all + k * N, N, k, -2, r, k * N);

	for (k = 0; k < size; k++)
		fill(outs + k * N, N, rank, k, r);
	MPI_Alltoall(outs, N, MPI_INT32_T, all, N, MPI_INT32_T, MPI_COMM_WORLD);
	for (k = 0; k < size; k++)
		expect("alltoall", all + k * N, N, k, rank, r, k * N);
	MPI_Barrier(MPI_COMM_WORLD);
	free(a);
	free(b);
	free(all);
	free(outs);
}

/*
 * One-sided (RMA) in a window allocated each round: MPI_Put into the next
 * rank and MPI_Get from the previous one in fence epochs, then in a
 * passive-target epoch on rank 0 MPI_Accumulate, MPI_Fetch_and_op and an
 * MPI_Compare_and_swap loop from every rank, their totals checked.
 */
static void rma(int r)
{
	enum {
		N = 64 << 10, /* int32s: 256 KiB */
		ACC = N - 3,
		FOP = N - 2,
		CAS = N - 1 /* rank 0's counters */
	};
	int to = (rank + 1) % size, from = (rank + size - 1) % size;
	int32_t *win_buf, *local = malloc(N * sizeof(*local));
	int32_t one = 1, old, seen, next;
	MPI_Win win;

	if (!local)
		MPI_Abort(MPI_COMM_WORLD, 2);
	MPI_Win_allocate(N * sizeof(int32_t), sizeof(int32_t), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &win_buf, &win);

	fill(local, N, rank, -3, r);
	MPI_Win_fence(0, win);
	MPI_Put(local, N, MPI_INT32_T, to, 0, N, MPI_INT32_T, win);
	MPI_Win_fence(0, win);
	expect("put", win_buf, N, from, -3, r, 0);

	fill(win_buf, N, rank, -4, r);
	MPI_Win_fence(0, win);
	MPI_Get(local, N, MPI_INT32_T, from, 0, N, MPI_INT32_T, win);
	MPI_Win_fence(0, win);
	expect("get", local, N, from, -4, r, 0);

	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
		win_buf[ACC] = win_buf[FOP] = win_buf[CAS] = 0;
		MPI_Win_unlock(0, win);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
	next = rank + 1;
	MPI_Accumulate(&next, 1, MPI_INT32_T, 0, ACC, 1, MPI_INT32_T, MPI_SUM,
		       win);
	MPI_Fetch_and_op(&one, &old, MPI_INT32_T, 0, FOP, MPI_SUM, win);
	MPI_Win_flush(0, win);
	if (old < 0 || old >= size)
		fail("fetch_and_op's old value", FOP, old, 0);
	do {
		MPI_Fetch_and_op(NULL, &seen, MPI_INT32_T, 0, CAS, MPI_NO_OP,
				 win);
		MPI_Win_flush(0, win);
		next = seen + 1;
		MPI_Compare_and_swap(&next, &seen, &old, MPI_INT32_T, 0, CAS,
				     win);
		MPI_Win_flush(0, win);
	} while (old != seen);
	MPI_Win_unlock(0, win);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
		if (win_buf[ACC] != size * (size + 1) / 2)
			fail("accumulate", ACC, win_buf[ACC],
			     size * (size + 1) / 2);
		if (win_buf[FOP] != size)
			fail("fetch_and_op", FOP, win_buf[FOP], size);
		if (win_buf[CAS] != size)
			fail("compare_and_swap", CAS, win_buf[CAS], size);
		MPI_Win_unlock(0, win);
	}
	MPI_Win_free(&win);
	free(local);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5, r;
	char host[MPI_MAX_PROCESSOR_NAME];
	int len;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_processor_name(host, &len);
	for (r = 0; r < rounds; r++) {
		ring(r, 2);
		ring(r, 16 << 10);
		ring(r, 256 << 10);
		collectives(r);
		rma(r);
	}
	printf("mpi_check: rank %d of %d OK %d rounds on %s\n", rank, size,
	       rounds, host);
	MPI_Finalize();
	return 0;
}
