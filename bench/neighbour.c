// SPDX-License-Identifier: MIT
/*
 * neighbour SECONDS: a CPU-bound program in a session of its own (so an
 * autogroup of its own, as a program started from another terminal or
 * by another service is), for the bench's "neighbour" case: it reads
 * the monotonic clock in a loop for SECONDS and prints the CPU time it
 * got and the longest time between two reads, the longest it was kept
 * off every core (docs/progress.md, "The looker").
 *
 *   neighbour: cpu_s 4.912 wall_s 5.000 longest_stall_s 0.0040
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs, start, last, end, worst = 0;

	if (argc != 2 || (secs = atof(argv[1])) <= 0) {
		fprintf(stderr, "usage: neighbour SECONDS\n");
		return 2;
	}
	/* (fails only for a process group leader, which we are not when
	 * the bench starts us; then we stay in its session) */
	if (setsid() < 0)
		perror("neighbour: setsid");
	start = last = clock_s(CLOCK_MONOTONIC);
	end = start + secs;
	while (last < end) {
		double now = clock_s(CLOCK_MONOTONIC);

		if (now - last > worst)
			worst = now - last;
		last = now;
	}
	printf("neighbour: cpu_s %.3f wall_s %.3f longest_stall_s %.4f\n",
	       clock_s(CLOCK_PROCESS_CPUTIME_ID), last - start, worst);
	return 0;
}
