// SPDX-License-Identifier: MIT
/*
 * Thousands of RC QPs between one pair of processes, every one carrying
 * checked data (issue 23, docs/scale.md).
 *
 *   many_qps N [STEP [WINDOW]]
 *
 * Forks a server; each side opens the device (its own address), creates
 * N RC QPs on one CQ, and they exchange GIDs and QPNs over a socketpair
 * and connect QP i to QP i.  The client SENDs 256 bytes on every QP, a
 * pattern of the QP's index, at most WINDOW (default N) at a time; the
 * server checks each message (on the QP
 * it was meant for: wr_id) and echoes it back on the same QP; the client
 * checks the echoes.  Each side prints its RSS and open descriptors
 * (/proc/self/fd) with 0 QPs and after every STEP (default N/4) QPs; it
 * fails if a QP lost, duplicated or changed a message, or if the
 * descriptors grew with the QP count (more than a few for the peer).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/qp_setup.h"

#define MSG	 256
#define FD_SLACK 8 /* per peer: sockets, rings, doorbells */

static int n_qps, step, sock, window;
static const char *who;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *smr, *rmr;
static struct ibv_qp **qps;
static uint8_t *sbuf, *rbuf;
static int next_send; /* client: the next QP to send on */
static long rss0;     /* with the device open, no QP */
static int fd0;

static void fail(const char *what)
{
	fprintf(stderr, "many_qps %s: %s: %s\n", who, what, strerror(errno));
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static int nfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n - 3; /* ., .. and the DIR's own */
}

static void xfer(void *p, size_t len, bool out)
{
	size_t done = 0;
	ssize_t r;

	while (done < len) {
		r = out ? write(sock, (char *)p + done, len - done) :
			  read(sock, (char *)p + done, len - done);
		if (r <= 0)
			fail("socketpair");
		done += (size_t)r;
	}
}

static void pattern(uint8_t *p, int i, int salt)
{
	int k;

	for (k = 0; k < MSG; k++)
		p[k] = (uint8_t)(i * 131 + k * 7 + salt);
}

static void post_recv(int i)
{
	struct ibv_sge s = { (uintptr_t)(rbuf + (size_t)i * MSG), MSG,
			     rmr->lkey };
	struct ibv_recv_wr w = { .wr_id = (uint64_t)i,
				 .sg_list = &s,
				 .num_sge = 1 },
			   *bad;

	if (ibv_post_recv(qps[i], &w, &bad))
		fail("post_recv");
}

static void post_send(int i)
{
	struct ibv_sge s = { (uintptr_t)(sbuf + (size_t)i * MSG), MSG,
			     smr->lkey };
	struct ibv_send_wr w = { .wr_id = (uint64_t)i | 1ull << 32,
				 .sg_list = &s,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	if (ibv_post_send(qps[i], &w, &bad))
		fail("post_send");
}

/* Polls until want receives came (each checked against salt); sends
 * completing meanwhile are counted; server: each receive is echoed. */
static void run_phase(int want_recv, int want_send, int salt, bool echo)
{
	uint64_t end = now_ms() + 60000;
	int got = 0, sent = 0, n, k;
	uint8_t *seen = calloc((size_t)n_qps, 1), exp[MSG];
	struct ibv_wc wc[64];

	while (got < want_recv || sent < want_send) {
		n = ibv_poll_cq(cq, 64, wc);
		if (n < 0)
			fail("poll_cq");
		if (!n && now_ms() > end) {
			fprintf(stderr,
				"many_qps %s: %d of %d messages, %d of "
				"%d sends after 60 s\n",
				who, got, want_recv, sent, want_send);
			exit(1);
		}
		for (k = 0; k < n; k++) {
			int i = (int)(uint32_t)wc[k].wr_id;

			if (wc[k].status != IBV_WC_SUCCESS || i >= n_qps) {
				fprintf(stderr, "many_qps %s: QP %d: %s\n", who,
					i, ibv_wc_status_str(wc[k].status));
				exit(1);
			}
			if (wc[k].wr_id >> 32) {
				sent++;
				continue;
			}
			pattern(exp, i, salt);
			if (seen[i]++ || wc[k].byte_len != MSG ||
			    wc[k].qp_num != qps[i]->qp_num ||
			    memcmp(rbuf + (size_t)i * MSG, exp, MSG)) {
				fprintf(stderr,
					"many_qps %s: QP %d: message "
					"lost, repeated or changed\n",
					who, i);
				exit(1);
			}
			got++;
			if (echo) {
				memcpy(sbuf + (size_t)i * MSG, exp, MSG);
				post_send(i);
			} else if (next_send < n_qps) {
				post_send(next_send++);
			}
		}
	}
	free(seen);
}

static void report(int nq)
{
	long rss = rss_kb();

	printf("many_qps %s: qps=%d rss_kb=%ld fds=%d rss_kb_per_qp=%.2f\n",
	       who, nq, rss, nfds(), nq ? (double)(rss - rss0) / nq : 0.0);
	if (nfds() > fd0 + FD_SLACK) {
		fprintf(stderr,
			"many_qps %s: %d descriptors with %d QPs, %d "
			"with none\n",
			who, nfds(), nq, fd0);
		exit(1);
	}
}

static int side(bool server)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2,
			 .max_recv_wr = 2,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	union ibv_gid gid, pgid;
	uint32_t *qpn = calloc((size_t)n_qps, 4),
		 *pqpn = calloc((size_t)n_qps, 4);
	int i;

	who = server ? "server" : "client";
	if (!l || !l[0])
		fail("no device");
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!ctx || ibv_query_gid(ctx, 1, 0, &gid))
		fail("open");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 2 * n_qps + 64, NULL, NULL, 0);
	sbuf = calloc((size_t)n_qps, MSG);
	rbuf = calloc((size_t)n_qps, MSG);
	qps = calloc((size_t)n_qps, sizeof(*qps));
	if (!pd || !cq || !sbuf || !rbuf || !qps || !qpn || !pqpn)
		fail("setup");
	smr = ibv_reg_mr(pd, sbuf, (size_t)n_qps * MSG, IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(pd, rbuf, (size_t)n_qps * MSG, IBV_ACCESS_LOCAL_WRITE);
	if (!smr || !rmr)
		fail("reg_mr");
	rss0 = rss_kb();
	fd0 = nfds();
	report(0);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	for (i = 0; i < n_qps; i++) {
		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i])
			fail("create_qp");
		qpn[i] = qps[i]->qp_num;
		if ((i + 1) % step == 0)
			report(i + 1);
	}
	/* one side sends first, the other reads first: both writing at
	 * once fill the socketpair (65 000 QPNs are 260 000 bytes) and
	 * wait for ever */
	if (!server) {
		xfer(&gid, sizeof(gid), true);
		xfer(qpn, (size_t)n_qps * 4, true);
	}
	xfer(&pgid, sizeof(pgid), false);
	xfer(pqpn, (size_t)n_qps * 4, false);
	if (server) {
		xfer(&gid, sizeof(gid), true);
		xfer(qpn, (size_t)n_qps * 4, true);
	}
	for (i = 0; i < n_qps; i++) {
		struct uroce_test_rc r = { .dqpn = pqpn[i],
					   .rq_psn = 0x100,
					   .sq_psn = 0x100,
					   .dgid = pgid,
					   .mtu = IBV_MTU_1024,
					   .timeout = 14,
					   .retry_cnt = 7,
					   .rnr_retry = 7,
					   .max_dest_rd_atomic = 1,
					   .max_rd_atomic = 1,
					   .min_rnr_timer = 1 };

		if (uroce_test_rc_init(qps[i], 0) ||
		    uroce_test_rc_rtr(qps[i], &r) ||
		    uroce_test_rc_rts(qps[i], &r))
			fail("connect");
		post_recv(i);
	}
	free(qpn);
	free(pqpn);
	/* both sides' receives are up before the first SEND */
	xfer(&i, sizeof(i), true);
	xfer(&i, sizeof(i), false);
	return 0;
}

int main(int argc, char **argv)
{
	int sp[2], st;
	pid_t pid;

	if (argc < 2 || (n_qps = atoi(argv[1])) < 1) {
		fprintf(stderr, "usage: many_qps N [STEP]\n");
		return 2;
	}
	step = argc > 2 ? atoi(argv[2]) : n_qps / 4;
	window = argc > 3 ? atoi(argv[3]) : n_qps;
	if (window < 1)
		window = 1;
	if (step < 1)
		step = 1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
		return 1;
	/* before any device is opened: each process has its own */
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		/* a client that fails leaves no server behind */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		sock = sp[1];
		side(true);
		/* every QP's message checked, and echoed */
		run_phase(n_qps, n_qps, 0, true);
		xfer(&st, sizeof(st), false); /* the client is done */
		report(n_qps);
		fflush(stdout);
		_exit(0);
	}
	close(sp[1]);
	sock = sp[0];
	side(false);
	for (st = 0; st < n_qps; st++)
		pattern(sbuf + (size_t)st * MSG, st, 0);
	/* at most window messages (and their echoes) in flight */
	for (next_send = 0; next_send < n_qps && next_send < window; next_send++)
		post_send(next_send);
	/* its own sends, and every echo checked */
	run_phase(n_qps, n_qps, 0, false);
	report(n_qps);
	xfer(&st, sizeof(st), true);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "many_qps: the server failed\n");
		return 1;
	}
	printf("many_qps: %d RC QPs, a message each way on every one, all "
	       "checked\n",
	       n_qps);
	return 0;
}
