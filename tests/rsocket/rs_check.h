/* SPDX-License-Identifier: MIT */
/*
 * The rsocket test programs' checks: a failed one prints the program's
 * name (RS_PROG, defined before this is included) and its message, and
 * exits with status 1.
 */
#ifndef UROCE_TESTS_RS_CHECK_H
#define UROCE_TESTS_RS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define DIE(...) \
	do { \
		fprintf(stderr, RS_PROG ": " __VA_ARGS__); \
		fputc('\n', stderr); \
		exit(1); \
	} while (0)
#define EXPECT(c, ...) \
	do { \
		if (!(c)) \
			DIE(__VA_ARGS__); \
	} while (0)

#endif
