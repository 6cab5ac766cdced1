// SPDX-License-Identifier: MIT
/*
 * Point-to-point and collectives with every byte checked, for MPICH (built
 * against Debian's mpich: its ch4 device runs on UCX).
 *
 *	mpi_check [ROUNDS]
 *
 * Each round: a ring of MPI_Isend/MPI_Irecv at 8 B (eager), 64 KiB and
 * 1 MiB (rendezvous), each rank to rank+1; MPI_Bcast from a root that
 * moves every round; MPI_Allreduce and MPI_Reduce (sum of known integers);
 * MPI_Allgather and MPI_Alltoall of rank-tagged blocks; MPI_Barrier.
 * Every received element is compared with what its sender must have
 * sent.  Prints "mpi_check: rank R of N OK ..." or "mpi_check: rank R
 * FAIL ..." (then MPI_Abort).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void fail(const char *what, long at, long got, long want)
{
	printf("mpi_check: rank %d FAIL %s: element %ld is %ld, want %ld\n",
	       rank, what, at, got, want);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* what rank `from` sends to rank `to` at element i of round r */
static int32_t val(int from, int to, int r, long i)
{
	return (int32_t)(((uint32_t)from * 7919u + (uint32_t)to * 104729u +
			  (uint32_t)r * 31u + (uint32_t)i * 2654435761u) >>
			 1);
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
	for (i = 0; i < n; i++) {
		out[i] = val(rank, to, r, i);
		in[i] = -1;
	}
	MPI_Irecv(in, (int)n, MPI_INT32_T, from, r, MPI_COMM_WORLD, &req[0]);
	MPI_Isend(out, (int)n, MPI_INT32_T, to, r, MPI_COMM_WORLD, &req[1]);
	MPI_Waitall(2, req, st);
	for (i = 0; i < n; i++)
		if (in[i] != val(from, rank, r, i))
			fail("ring", i, in[i], val(from, rank, r, i));
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

	for (i = 0; i < N; i++)
		a[i] = rank == root ? val(root, -1, r, i) : -1;
	MPI_Bcast(a, N, MPI_INT32_T, root, MPI_COMM_WORLD);
	for (i = 0; i < N; i++)
		if (a[i] != val(root, -1, r, i))
			fail("bcast", i, a[i], val(root, -1, r, i));

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

	for (i = 0; i < N; i++)
		a[i] = val(rank, -2, r, i);
	MPI_Allgather(a, N, MPI_INT32_T, all, N, MPI_INT32_T, MPI_COMM_WORLD);
	for (k = 0; k < size; k++)
		for (i = 0; i < N; i++)
			if (all[k * N + i] != val(k, -2, r, i))
				fail("allgather", k * N + i, all[k * N + i],
				     val(k, -2, r, i));

	for (k = 0; k < size; k++)
		for (i = 0; i < N; i++)
			outs[k * N + i] = val(rank, k, r, i);
	MPI_Alltoall(outs, N, MPI_INT32_T, all, N, MPI_INT32_T, MPI_COMM_WORLD);
	for (k = 0; k < size; k++)
		for (i = 0; i < N; i++)
			if (all[k * N + i] != val(k, rank, r, i))
				fail("alltoall", k * N + i, all[k * N + i],
				     val(k, rank, r, i));
	MPI_Barrier(MPI_COMM_WORLD);
	free(a);
	free(b);
	free(all);
	free(outs);
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
	}
	printf("mpi_check: rank %d of %d OK %d rounds on %s\n", rank, size,
	       rounds, host);
	MPI_Finalize();
	return 0;
}
