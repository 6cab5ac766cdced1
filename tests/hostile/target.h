/* SPDX-License-Identifier: MIT */
/*
 * The hostile tests' side of hostile_target: start it (on stdin a pipe
 * that, closed, tells it to report and exit; its info lines on stdout,
 * its counters on stderr), the ok/FAIL checks, the key=value reading of
 * its lines, and the end: exit status, counters in range, no sanitizer
 * report.  Used by hostile_udp.c (packets from the network) and
 * hostile_local.c (packets from a same-host ring).
 */
#ifndef UROCE_TESTS_HOSTILE_TARGET_H
#define UROCE_TESTS_HOSTILE_TARGET_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

static void check(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!ok)
		failures++;
}

static long get_num(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtol(p + strlen(key), NULL, 0) : -1;
}

static uint64_t get_u64(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtoull(p + strlen(key), NULL, 0) : 0;
}

struct target {
	pid_t pid;
	int to, err;	      /* its stdin (ours to close), its stderr */
	FILE *out;	      /* its stdout */
	char errbuf[1 << 16]; /* its stderr, once it exited */
};

/* start prog on addr, talking to peer, with nqp QPs from first_qpn,
 * counters on (UROCE_STATS); nothing after this may hang (alarm) */
static int target_start(struct target *t, const char *prog, const char *addr,
			const char *peer, uint32_t first_qpn, int nqp)
{
	int to[2], from[2], err[2];
	char qpn_arg[16], nqp_arg[8];

	if (pipe(to) || pipe(from) || pipe(err))
		return -1;
	snprintf(qpn_arg, sizeof(qpn_arg), "%u", first_qpn);
	snprintf(nqp_arg, sizeof(nqp_arg), "%d", nqp);
	t->pid = fork();
	if (t->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		dup2(err[1], 2);
		close(to[1]);
		close(from[0]);
		close(err[0]);
		setenv("UROCE_ADDR", addr, 1);
		setenv("UROCE_STATS", "1", 1);
		execl(prog, prog, peer, qpn_arg, nqp_arg, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	close(err[1]);
	alarm(120); /* nothing here may hang */
	t->to = to[1];
	t->err = err[0];
	t->out = fdopen(from[0], "r");
	return t->pid < 0 || !t->out ? -1 : 0;
}

/* its stdin closed: it reports on stdout (read by the caller) and exits */
static void target_stop(struct target *t)
{
	close(t->to);
}

/* after its stdout: its stderr and exit status, checked */
static const char *target_wait(struct target *t)
{
	size_t len = 0;
	int status;

	for (;;) {
		ssize_t n = read(t->err, t->errbuf + len,
				 sizeof(t->errbuf) - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	t->errbuf[len] = 0;
	waitpid(t->pid, &status, 0);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "target exited cleanly (status 0x%x)", status);
	return t->errbuf;
}

struct want_counter {
	const char *name; /* " name=" as in the uroce-stats line */
	long min, max;	  /* max 0: no upper bound */
};

/* the counters in its uroce-stats line in range, no sanitizer report;
 * prints the verdict and returns the exit status */
static int target_verdict(const struct target *t, const char *test,
			  const struct want_counter *want, size_t n)
{
	const char *stats = strstr(t->errbuf, "uroce-stats:");
	size_t k;

	check(stats != NULL, "target printed its counters");
	for (k = 0; stats && k < n; k++) {
		long v = get_num(stats, want[k].name);
		long max = want[k].max ? want[k].max : LONG_MAX;

		if (want[k].max)
			check(v >= want[k].min && v <= max,
			      "counter%s%ld (in [%ld, %ld])", want[k].name, v,
			      want[k].min, max);
		else
			check(v >= want[k].min, "counter%s%ld (>= %ld)",
			      want[k].name, v, want[k].min);
	}
	if (strstr(t->errbuf, "Sanitizer") ||
	    strstr(t->errbuf, "runtime error")) {
		fputs(t->errbuf, stdout);
		check(false, "sanitizer report from the target");
	}
	printf("%s: %s, %d failure(s)\n", test, failures ? "FAIL" : "PASS",
	       failures);
	return failures ? 1 : 0;
}

#endif
