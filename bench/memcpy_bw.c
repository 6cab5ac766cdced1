// SPDX-License-Identifier: MIT
/*
 * memcpy_bw: one core's memcpy bandwidth, the ceiling for anything that
 * copies the payload (uroce copies it into and out of socket buffers).
 *
 *   memcpy_bw SECONDS SIZE...
 *
 * For each SIZE, copies SIZE-byte blocks for about SECONDS, walking source
 * and destination through two 64 MiB regions (so a small block is not
 * served from L1 again and again), and prints
 *
 *   size=S bytes=B secs=T gbps=G
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGION (64UL << 20)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s SECONDS SIZE...\n", argv[0]);
		return 2;
	}
	double seconds = atof(argv[1]);
	size_t region = REGION;
	for (int a = 2; a < argc; a++) {
		size_t s = strtoul(argv[a], NULL, 0);
		if (s > region)
			region = s;
	}
	char *src = malloc(region), *dst = malloc(region);
	if (!src || !dst)
		return 1;
	memset(src, 1, region);
	memset(dst, 2, region);
	for (int a = 2; a < argc; a++) {
		size_t size = strtoul(argv[a], NULL, 0), off = 0;
		unsigned long long bytes = 0, n = 0;
		double t0 = now_s(), t = t0;
		for (;;) {
			if (off + size > region)
				off = 0;
			memcpy(dst + off, src + off, size);
			/* keep the compiler from eliding the copy */
			__asm__ volatile("" : : "r"(dst) : "memory");
			off += size;
			bytes += size;
			if ((++n & 255) == 0 || size >= 65536)
				if ((t = now_s()) - t0 >= seconds)
					break;
		}
		t -= t0;
		printf("size=%zu bytes=%llu secs=%.6f gbps=%.4f\n", size, bytes,
		       t, bytes * 8 / t / 1e9);
		fflush(stdout);
	}
	return 0;
}
