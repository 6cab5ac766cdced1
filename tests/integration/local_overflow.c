// SPDX-License-Identifier: MIT
/*
 * local_overflow - a sender on the same-host path (net/local.c) never
 * waits for a stopped receiver, and loses nothing it can queue.
 *
 *   local_overflow [NMSG]
 *
 * Two processes, R and S, each with its own uroce device and one UC QP
 * connected to the other's.  R posts 1 + NMSG receives of 16 KiB, tells
 * S its QP, takes S's first message (so the ring is set up: a
 * handshake with a stopped peer falls back to UDP, whose socket buffer
 * would hide what this tests) and stops itself (SIGSTOP); the parent
 * sees it stopped
 * (waitpid WUNTRACED, an event, not a sleep) and only then lets S post
 * NMSG 16 KiB UC sends (a ring packet each).  UC has no retransmission, so what a full ring
 * dropped would be lost: S's sends must all complete while R is still
 * stopped (nobody reads R's ring: 128 slots, fewer than the
 * messages' packets), which they do only if the packets wait in S's
 * overflow queue.  Then the parent resumes R, which must receive every
 * message, in order, every byte as sent.  S's counters (its uroce-stats
 * line) must show the queue used (local_queued > 0), nothing lost to it
 * (local_full_drops == 0) and R's wake-up (local_wakeups > 0).  Every
 * wait is for an event; the only clock is a bound on a hang.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/pattern.h"
#include "../lib/stats_line.h"

#define MSG	 (16u << 10)
#define NMSG_MAX 255 /* (+1) 4 MiB: S's queue bound */
#define HANG_S	 60  /* a run this long is hung */

static const char *who = "local_overflow";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: FAIL: ", who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec;
}

/* what one side tells the other */
struct info {
	uint32_t qpn, psn;
	union ibv_gid gid;
};

static void xsend(int fd, const void *p, size_t len)
{
	if (send(fd, p, len, MSG_NOSIGNAL) != (ssize_t)len)
		die("send: %s", strerror(errno));
}

static void xrecv(int fd, void *p, size_t len)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	if (poll(&pf, 1, HANG_S * 1000) != 1 ||
	    recv(fd, p, len, 0) != (ssize_t)len)
		die("no message from the other side");
}

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct info me;
};

static void side_open(struct side *s, size_t len)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = NMSG_MAX + 1,
			 .max_recv_wr = NMSG_MAX + 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
	};

	if (!list || !list[0] || !(s->ctx = ibv_open_device(list[0])))
		die("no device");
	ibv_free_device_list(list);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = s->pd ? ibv_create_cq(s->ctx, 2 * NMSG_MAX, NULL, NULL, 0) :
			NULL;
	s->buf = calloc(1, len);
	if (!s->cq || !s->buf ||
	    !(s->mr = ibv_reg_mr(s->pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE)))
		die("resources");
	qa.send_cq = qa.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &qa);
	if (!s->qp || ibv_modify_qp(s->qp, &a,
				    IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("UC QP to INIT");
	if (ibv_query_gid(s->ctx, 1, 0, &s->me.gid))
		die("GID");
	s->me.qpn = s->qp->qp_num;
	s->me.psn = 0x100;
}

/* INIT -> RTR -> RTS towards the peer (UC: no timers, no retries) */
static void side_connect(struct side *s, const struct info *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid = peer->gid;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		die("UC QP to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = s->me.psn;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UC QP to RTS");
}

/* completions first..n-1, each successful and of its wr_id (in order) */
static void wait_wcs(struct side *s, int first, int n, enum ibv_wc_opcode op)
{
	uint64_t until = now_s() + HANG_S;
	int got = first;

	while (got < n) {
		struct ibv_wc wc;
		int k = ibv_poll_cq(s->cq, 1, &wc);

		if (k < 0)
			die("ibv_poll_cq");
		if (!k) {
			if (now_s() > until)
				die("%d of %d completions after %d s", got, n,
				    HANG_S);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != op ||
		    wc.wr_id != (uint64_t)got ||
		    (op == IBV_WC_RECV && wc.byte_len != MSG))
			die("completion %d: status %s, opcode %d, wr_id %llu, "
			    "%u bytes",
			    got, ibv_wc_status_str(wc.status), wc.opcode,
			    (unsigned long long)wc.wr_id, wc.byte_len);
		got++;
	}
}

static void receiver(int peer, int nmsg)
{
	struct side s;
	struct info them;
	int i;

	who = "local_overflow[R]";
	nmsg++; /* (message 0 sets the ring up) */
	side_open(&s, (size_t)nmsg * MSG);
	for (i = 0; i < nmsg; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)(s.buf + (size_t)i * MSG),
			.length = MSG,
			.lkey = s.mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i,
					  .sg_list = &sge,
					  .num_sge = 1 },
				   *bad;

		if (ibv_post_recv(s.qp, &wr, &bad))
			die("ibv_post_recv");
	}
	xsend(peer, &s.me, sizeof(s.me));
	xrecv(peer, &them, sizeof(them));
	side_connect(&s, &them);
	/* (UC: a message that reaches a QP not yet RTR is dropped for
	 * good, so S sends only once we are) */
	xsend(peer, "r", 1);
	wait_wcs(&s, 0, 1, IBV_WC_RECV);
	/* (ready: the parent lets S send once it sees us stopped) */
	raise(SIGSTOP);
	wait_wcs(&s, 1, nmsg, IBV_WC_RECV);
	for (i = 0; i < nmsg; i++) {
		uint64_t bad = pat_check(s.buf + (size_t)i * MSG, MSG,
					 key_of(7, (uint64_t)i, 0, 0), 0);

		if (bad != UINT64_MAX)
			die("message %d: byte %llu differs", i,
			    (unsigned long long)bad);
	}
	xsend(peer, "done", 4); /* S may go: nothing left in flight */
	ibv_destroy_qp(s.qp);
	ibv_close_device(s.ctx);
	exit(0);
}

static void sender(int peer, int go, int nmsg)
{
	struct side s;
	struct info them;
	char buf[4];
	int i;

	who = "local_overflow[S]";
	nmsg++;
	side_open(&s, (size_t)nmsg * MSG);
	for (i = 0; i < nmsg; i++)
		pat_fill(s.buf + (size_t)i * MSG, MSG,
			 key_of(7, (uint64_t)i, 0, 0), 0);
	xrecv(peer, &them, sizeof(them));
	xsend(peer, &s.me, sizeof(s.me));
	side_connect(&s, &them);
	xrecv(peer, buf, 1); /* R is RTR */
	for (i = 0; i < nmsg; i++) {
		if (i == 1) {
			wait_wcs(&s, 0, 1, IBV_WC_SEND);
			xrecv(go, buf, 1); /* R is stopped */
		}
		struct ibv_sge sge = {
			.addr = (uintptr_t)(s.buf + (size_t)i * MSG),
			.length = MSG,
			.lkey = s.mr->lkey,
		};
		struct ibv_send_wr wr = {
			.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		if (ibv_post_send(s.qp, &wr, &bad))
			die("ibv_post_send");
	}
	/* all sent while R is stopped: nothing waited for its ring */
	wait_wcs(&s, 1, nmsg, IBV_WC_SEND);
	xsend(go, "s", 1);
	xrecv(peer, buf, 4); /* R has them all */
	exit(0);	     /* (the device open: its counters print at exit) */
}

static int reap(pid_t pid, const char *name)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "%s: FAIL: %s did not exit 0\n", who, name);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int nmsg = argc > 1 ? atoi(argv[1]) : 200;
	char serr[] = "/tmp/local_overflow.XXXXXX", buf[1];
	int rs[2], go[2], fd, st, bad = 0;
	long long queued, drops, wakeups;
	pid_t r, s;

	if (nmsg < 1 || nmsg > NMSG_MAX)
		die("NMSG: 1..%d", NMSG_MAX);
	/* (the library read its configuration when it was loaded) */
	if (!getenv("UROCE_STATS") || strcmp(getenv("UROCE_STATS"), "1")) {
		setenv("UROCE_STATS", "1", 1);
		execv("/proc/self/exe", argv);
		die("exec: %s", strerror(errno));
	}
	fd = mkstemp(serr);
	if (fd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, rs) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, go))
		die("setup");
	r = fork();
	if (!r) {
		close(rs[1]);
		receiver(rs[0], nmsg);
	}
	s = fork();
	if (!s) {
		close(rs[0]);
		dup2(fd, 2);
		sender(rs[1], go[1], nmsg);
	}
	close(fd);
	/* R stops itself once connected and ready */
	if (waitpid(r, &st, WUNTRACED) != r || !WIFSTOPPED(st)) {
		kill(s, SIGKILL);
		die("the receiver did not stop");
	}
	if (send(go[0], "g", 1, 0) != 1)
		die("go");
	/* S has every send completion, R still stopped */
	{
		struct pollfd pf = { .fd = go[0], .events = POLLIN };

		if (poll(&pf, 1, HANG_S * 1000) != 1 ||
		    recv(go[0], buf, 1, 0) != 1) {
			kill(r, SIGKILL);
			kill(s, SIGKILL);
			kill(r, SIGCONT);
			bad = 1;
			fprintf(stderr,
				"%s: FAIL: the sender did not complete "
				"its sends while the receiver was stopped\n",
				who);
		}
	}
	kill(r, SIGCONT);
	bad |= reap(r, "the receiver");
	bad |= reap(s, "the sender");
	queued = uroce_test_stat(serr, "local_queued");
	drops = uroce_test_stat(serr, "local_full_drops");
	wakeups = uroce_test_stat(serr, "local_wakeups");
	printf("%s: %d messages of %u bytes; sender: local_queued=%lld "
	       "local_full_drops=%lld local_wakeups=%lld\n",
	       who, nmsg, MSG, queued, drops, wakeups);
	if (queued <= 0 || drops != 0 || wakeups <= 0) {
		fprintf(stderr, "%s: FAIL: the sender's counters\n", who);
		bad = 1;
	}
	if (bad) {
		FILE *fp = fopen(serr, "r");
		char line[512];

		while (fp && fgets(line, sizeof(line), fp))
			fputs(line, stderr);
		if (fp)
			fclose(fp);
	}
	unlink(serr);
	if (!bad)
		printf("%s: OK\n", who);
	return bad;
}
