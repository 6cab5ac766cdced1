// SPDX-License-Identifier: MIT
/*
 * Every MPI rank exchanges a buffer with every other rank, round after
 * round (pairwise MPI_Sendrecv, partner rank ^ step order), each message a
 * pattern of (sender, receiver, round) that the receiver checks byte by
 * byte.  Prints one line per rank; exits 1 on any bad byte.
 *
 *	mpi_alltoall [BYTES [ROUNDS]]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char pat(int from, int to, int round, size_t i)
{
	uint32_t x = (uint32_t)(from * 7919 + to * 104729 + round * 31) +
		     (uint32_t)i * 2654435761u;

	return (unsigned char)(x >> 24);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 16;
	int rounds = argc > 2 ? atoi(argv[2]) : 10;
	int rank, size, r, k, bad = 0, xchg = 0;
	unsigned char *out, *in;
	size_t i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	out = malloc(n ? n : 1);
	in = malloc(n ? n : 1);
	if (!out || !in || n > (size_t)1 << 30) {
		fprintf(stderr, "mpi_alltoall: out of memory or > 1 GiB\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (r = 0; r < rounds; r++) {
		for (k = 1; k < size; k++) {
			/* everyone sends k ranks up and receives from k down */
			int to = (rank + k) % size,
			    from = (rank - k + size) % size;

			for (i = 0; i < n; i++)
				out[i] = pat(rank, to, r, i);
			MPI_Sendrecv(out, (int)n, MPI_BYTE, to, r, in, (int)n,
				     MPI_BYTE, from, r, MPI_COMM_WORLD,
				     MPI_STATUS_IGNORE);
			for (i = 0; i < n; i++)
				if (in[i] != pat(from, rank, r, i)) {
					bad++;
					break;
				}
			xchg++;
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d of %d: %d exchanges of %zu bytes, %d bad\n", rank, size,
	       xchg, n, bad);
	free(out);
	free(in);
	MPI_Finalize();
	return bad ? 1 : 0;
}
