// SPDX-License-Identifier: MIT
/*
 * A process that takes a signal through a signalfd, as tgt's tgtd does:
 * once the rdma_cm is up, it blocks the signal in its own thread and
 * sends it to itself with kill(getpid()).  The kernel delivers a process-directed signal to any
 * thread that does not block it; every thread uroce starts (the
 * progress thread, the CM thread, the stats snapshot thread) must block
 * all signals, or the signal's default action kills the process.
 *
 *   signal_probe ADDR     bind and listen on ADDR (QP1 and the CM
 *                         thread up), then 200 signals to ourselves
 *
 * Prints "PASS: ..." and exits 0, or "FAIL: ..." and exits 1.  Killed
 * by SIGUSR2 when a thread of ours took the signal.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#define ROUNDS 200

static void fail(const char *what)
{
	printf("FAIL: %s: %s\n", what, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct signalfd_siginfo si;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rdma_cm_id *id;
	struct pollfd p;
	sigset_t set;
	int sfd, i;

	if (argc != 2 || inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1) {
		fprintf(stderr, "usage: signal_probe IPV4-ADDR\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* every thread of ours: the device's, and the CM's with QP1; made
	 * before the signal is blocked, as tgtd's iSER driver is, so that
	 * they cannot inherit the program's mask */
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&sin) || rdma_listen(id, 1))
		fail("rdma_cm listen");
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		fail("sigprocmask");
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		fail("signalfd");
	for (i = 0; i < ROUNDS; i++) {
		if (kill(getpid(), SIGUSR2))
			fail("kill");
		p.fd = sfd;
		p.events = POLLIN;
		if (poll(&p, 1, 10000) != 1) {
			printf("FAIL: signal %d never reached the signalfd\n",
			       i);
			return 1;
		}
		if (read(sfd, &si, sizeof(si)) != sizeof(si))
			fail("read signalfd");
		if (si.ssi_signo != SIGUSR2) {
			printf("FAIL: signalfd gave signal %u\n", si.ssi_signo);
			return 1;
		}
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("PASS: %d SIGUSR2 read from the signalfd\n", ROUNDS);
	return 0;
}
