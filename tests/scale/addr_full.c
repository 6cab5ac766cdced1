// SPDX-License-Identifier: MIT
/*
 * The limit of processes on one address (docs/scale.md): 255 processes
 * open the device on one UROCE_ADDR and hold it; the 256th must fail to
 * open it with ENOSPC (the runner checks the one-line message), no
 * hang, no clash; once one holder is gone, a newcomer gets in.
 *
 *   addr_full ADDRESS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define HOLDERS 255

/* opens the device; 0 if it came up, else the errno */
static int try_open(struct ibv_context **out)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	int err = errno ? errno : EIO;

	if (l)
		ibv_free_device_list(l);
	*out = ctx;
	return ctx ? 0 : err;
}

/* a child that holds the device until its parent goes or says so;
 * returns its pid, the result of its open through *res */
static pid_t holder(int *res)
{
	int p[2], q[2];
	pid_t pid;
	char c;

	if (pipe(p) || pipe(q))
		return -1;
	pid = fork();
	if (!pid) {
		struct ibv_context *ctx;
		int r;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		close(q[1]);
		r = try_open(&ctx);
		if (write(p[1], &r, sizeof(r)) != sizeof(r))
			_exit(1);
		/* until the parent closes its end */
		while (read(q[0], &c, 1) > 0)
			;
		if (ctx)
			ibv_close_device(ctx);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	if (pid < 0 || read(p[0], res, sizeof(*res)) != sizeof(*res))
		*res = EIO;
	close(p[0]);
	/* (q[1] stays open in us: the child holds on while we live) */
	return pid;
}

int main(int argc, char **argv)
{
	pid_t pids[HOLDERS], extra;
	int i, r, st;

	if (argc != 2) {
		fprintf(stderr, "usage: addr_full ADDRESS\n");
		return 2;
	}
	/* the library reads its settings when it is loaded: run again
	 * with the address in the environment */
	if (!getenv("UROCE_ADDR") || strcmp(getenv("UROCE_ADDR"), argv[1])) {
		setenv("UROCE_ADDR", argv[1], 1);
		execv("/proc/self/exe", argv);
		perror("addr_full: exec");
		return 1;
	}
	for (i = 0; i < HOLDERS; i++) {
		pids[i] = holder(&r);
		if (pids[i] < 0 || r) {
			fprintf(stderr,
				"addr_full: process %d of %d could not "
				"open the device: %s\n",
				i + 1, HOLDERS, strerror(r));
			return 1;
		}
	}
	extra = holder(&r);
	if (r != ENOSPC) {
		fprintf(stderr, "addr_full: process %d: %s, expected ENOSPC\n",
			HOLDERS + 1, r ? strerror(r) : "opened");
		return 1;
	}
	kill(extra, SIGKILL);
	waitpid(extra, &st, 0);
	/* one holder gone: its slot is free again */
	kill(pids[0], SIGKILL);
	waitpid(pids[0], &st, 0);
	extra = holder(&r);
	if (r) {
		fprintf(stderr, "addr_full: after one left: %s\n", strerror(r));
		return 1;
	}
	printf("addr_full: %d processes on %s, the next one ENOSPC, and one "
	       "more once one left\n",
	       HOLDERS, argv[1]);
	return 0;
}
