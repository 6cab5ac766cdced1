// SPDX-License-Identifier: MIT
/*
 * local_far - a sender with many peers at an address that has no
 * same-host ring asks for a ring name once, not once per packet
 * (net/local_tx.c peer_get, docs/local.md "Discovery").
 *
 *   local_far [SLOTS] [ROUNDS]
 *
 * One UD QP sends ROUNDS rounds of one datagram to each of SLOTS QPNs
 * (slot << 16 | 1: a different top byte, so a different ring name, for
 * each) at FAR_ADDR, where no uroce device is: the packets go by UDP and
 * nobody receives them.  SLOTS is more than the ring table holds (64
 * entries), so a negative answer kept per slot in that table is evicted
 * by the next slot's: before the far list the sender tried a connect
 * for every datagram (two: the slot's name and ".../0"), 2 x SLOTS x
 * ROUNDS lookups.  Now the first datagram finds neither name and the
 * address is remembered as far for a second: the counters (the child's
 * uroce-stats line) must show at most MISSES_MAX lookups
 * (local_misses), however many slots and rounds, and every send
 * completed.  The rounds take well under the second (a bound: a run
 * slower than that may look again, once per second).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/stats_line.h"

#define FAR_ADDR   "127.77.0.1" /* no uroce device there (tests use 127.0.0.x) */
#define QKEY	   0x11111111u
#define MISSES_MAX 4 /* two names, and one second's retry of both */
#define HANG_S	   60

static const char *who = "local_far";

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

/* the UD QP's ROUNDS x SLOTS sends, each completed */
static void sender(int slots, int rounds)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = 256,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = 1,
				 .qkey = QKEY };
	struct ibv_ah_attr aa = { .is_global = 1,
				  .port_num = 1,
				  .grh = { .hop_limit = 64 } };
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_wc wc[32];
	struct in_addr ip;
	static char msg[64] = "far";
	int r, s, done = 0, n;
	time_t until = time(NULL) + HANG_S;

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		die("no device");
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 512, NULL, NULL, 0) : NULL;
	if (!cq)
		die("resources");
	qa.send_cq = qa.recv_cq = cq;
	qp = ibv_create_qp(pd, &qa);
	if (!qp || ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					 IBV_QP_PORT | IBV_QP_QKEY))
		die("UD QP to INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("UD QP to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD QP to RTS");
	/* an IPv4-mapped GID */
	inet_pton(AF_INET, FAR_ADDR, &ip);
	aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xff;
	memcpy(&aa.grh.dgid.raw[12], &ip, 4);
	ah = ibv_create_ah(pd, &aa);
	if (!ah)
		die("ibv_create_ah: %s", strerror(errno));
	for (r = 0; r < rounds; r++) {
		for (s = 1; s <= slots; s++) {
			struct ibv_sge sge = { .addr = (uintptr_t)msg,
					       .length = sizeof(msg) };
			struct ibv_send_wr wr = {
				.wr_id = (uint64_t)s,
				.sg_list = &sge,
				.num_sge = 1,
				.opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_INLINE,
				.wr.ud = { .ah = ah,
					   .remote_qpn = (uint32_t)s << 16 | 1,
					   .remote_qkey = QKEY },
			}, *bad;

			if (ibv_post_send(qp, &wr, &bad))
				die("ibv_post_send: round %d slot %d", r, s);
			/* one at a time: each send is its own packet */
			while (done < r * slots + s) {
				n = ibv_poll_cq(cq, 32, wc);
				if (n < 0 || time(NULL) > until)
					die("polling the CQ");
				for (int i = 0; i < n; i++)
					if (wc[i].status != IBV_WC_SUCCESS)
						die("send: %s",
						    ibv_wc_status_str(
							    wc[i].status));
				done += n;
			}
		}
	}
	exit(0); /* (the device open: its counters print at exit) */
}

int main(int argc, char **argv)
{
	int slots = argc > 1 ? atoi(argv[1]) : 200;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	char serr[] = "/tmp/local_far.XXXXXX";
	long long misses, sent;
	int fd, st;
	pid_t pid;

	if (slots < 1 || slots > 255 || rounds < 1)
		die("SLOTS: 1..255, ROUNDS: 1 or more");
	/* (the library read its configuration when it was loaded) */
	if (!getenv("UROCE_STATS") || strcmp(getenv("UROCE_STATS"), "1")) {
		setenv("UROCE_STATS", "1", 1);
		execv("/proc/self/exe", argv);
		die("exec: %s", strerror(errno));
	}
	fd = mkstemp(serr);
	if (fd < 0)
		die("mkstemp");
	pid = fork();
	if (!pid) {
		dup2(fd, 2);
		sender(slots, rounds);
	}
	close(fd);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "%s: FAIL: the sender did not exit 0\n", who);
		execlp("cat", "cat", serr, (char *)NULL);
		return 1;
	}
	misses = uroce_test_stat(serr, "local_misses");
	sent = uroce_test_stat(serr, "tx_pkts");
	unlink(serr);
	printf("%s: %d slots x %d rounds to %s: tx_pkts=%lld "
	       "local_misses=%lld\n",
	       who, slots, rounds, FAR_ADDR, sent, misses);
	if (misses < 1 || misses > MISSES_MAX ||
	    sent < (long long)slots * rounds)
		die("local_misses %lld (1..%d) or tx_pkts %lld (>= %d)", misses,
		    MISSES_MAX, sent, slots * rounds);
	return 0;
}
