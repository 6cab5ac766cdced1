// SPDX-License-Identifier: MIT
/*
 * Two MPI ranks send a buffer back and forth, each message a pattern of
 * its round that the receiver checks byte by byte (rank 1 answers with
 * the complement).  Prints one line per rank; exits 1 on any bad byte.
 *
 *   mpi_pingpong [bytes [rounds]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(const unsigned char *buf, size_t n, unsigned char want)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (buf[i] != want)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 20;
	int rounds = argc > 2 ? atoi(argv[2]) : 100;
	int rank, size, i, bad = 0;
	unsigned char *buf;
	double t;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	buf = malloc(n ? n : 1);
	if (size != 2 || !buf || n > (size_t)1 << 30) {
		fprintf(stderr, "mpi_pingpong: needs 2 ranks and <= 1 GiB\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	t = MPI_Wtime();
	for (i = 0; i < rounds; i++) {
		unsigned char pat = (unsigned char)(i * 7 + 1);

		if (rank == 0) {
			memset(buf, pat, n);
			MPI_Send(buf, (int)n, MPI_BYTE, 1, i, MPI_COMM_WORLD);
			MPI_Recv(buf, (int)n, MPI_BYTE, 1, i, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			bad += check(buf, n, (unsigned char)~pat);
		} else {
			MPI_Recv(buf, (int)n, MPI_BYTE, 0, i, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			bad += check(buf, n, pat);
			memset(buf, (unsigned char)~pat, n);
			MPI_Send(buf, (int)n, MPI_BYTE, 0, i, MPI_COMM_WORLD);
		}
	}
	t = MPI_Wtime() - t;
	printf("rank %d: %d round trips of %zu bytes, %d bad, %.1f MB/s\n",
	       rank, rounds, n, bad, t > 0 ? 2.0 * rounds * n / t / 1e6 : 0);
	free(buf);
	MPI_Finalize();
	return bad ? 1 : 0;
}
