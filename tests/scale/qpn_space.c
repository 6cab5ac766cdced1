// SPDX-License-Identifier: MIT
/*
 * The QPN space at its limits (issue 23, docs/scale.md).
 *
 *   qpn_space wrap N   creates and destroys N QPs, 256 alive at a time
 *                      (the oldest destroyed as each new one comes):
 *                      every QPN is a valid 24-bit number whose low 16
 *                      bits are not QP0..0x10, none is one still alive,
 *                      none is one destroyed less than the quarantine
 *                      ago; one QP in 4096 is connected to a fresh one
 *                      and carries a message both ways, so the numbers
 *                      of every range (a second slot once the first
 *                      wraps) really reach their QP.
 *   qpn_space limit    creates QPs until ibv_create_qp fails: it must
 *                      fail with ENOSPC at the documented limit (the
 *                      count is printed; the runner checks the one-line
 *                      message); then, one QP destroyed, its number is
 *                      in quarantine: creating fails again at once and
 *                      succeeds within the quarantine plus a second.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "../lib/qp_setup.h"

#define WINDOW	      256
#define QUARANTINE_MS 2000 /* UROCE_QPN_QUARANTINE_MS */
#define QPN_FIRST     0x11
#define MSG	      64

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static uint8_t buf[4 * MSG];
static union ibv_gid gid;

static void die(const char *what)
{
	fprintf(stderr, "qpn_space: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct ibv_qp *new_qp(void)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &a);
}

static void setup(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	if (!l || !l[0])
		die("no device");
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!ctx || ibv_query_gid(ctx, 1, 0, &gid))
		die("open");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) :
		  NULL;
	if (!cq || !mr)
		die("pd/cq/mr");
}

/* the send (wr_id 1) and receive (2) completions, in either order */
static void wait_pair(void)
{
	uint64_t end = now_ms() + 10000;
	unsigned int seen = 0;
	struct ibv_wc wc;
	int n;

	while (seen != 3) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0 || (n && (wc.status != IBV_WC_SUCCESS ||
				    wc.wr_id < 1 || wc.wr_id > 2))) {
			fprintf(stderr, "qpn_space: completion %llu: %s\n",
				(unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status));
			exit(1);
		}
		if (n)
			seen |= 1u << (wc.wr_id - 1);
		else if (now_ms() > end) {
			fprintf(stderr, "qpn_space: no completion\n");
			exit(1);
		}
	}
}

/* a and b connected to each other; a message each way, checked */
static void exchange(struct ibv_qp *a, struct ibv_qp *b, uint8_t seed)
{
	struct uroce_test_rc ra = { .dqpn = b->qp_num,
				    .rq_psn = 0x100,
				    .sq_psn = 0x100,
				    .dgid = gid,
				    .mtu = IBV_MTU_1024,
				    .timeout = 14,
				    .retry_cnt = 7,
				    .rnr_retry = 7,
				    .max_dest_rd_atomic = 1,
				    .max_rd_atomic = 1,
				    .min_rnr_timer = 1 };
	struct uroce_test_rc rb = ra;
	struct ibv_qp *q[2] = { a, b };
	int i;

	rb.dqpn = a->qp_num;
	if (uroce_test_rc_init(a, 0) || uroce_test_rc_init(b, 0) ||
	    uroce_test_rc_rtr(a, &ra) || uroce_test_rc_rtr(b, &rb) ||
	    uroce_test_rc_rts(a, &ra) || uroce_test_rc_rts(b, &rb))
		die("connect");
	for (i = 0; i < 2; i++) {
		uint8_t *src = buf + (size_t)i * 2 * MSG, *dst = src + MSG;
		struct ibv_sge ss = { (uintptr_t)src, MSG, mr->lkey };
		struct ibv_sge rs = { (uintptr_t)dst, MSG, mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 2,
					  .sg_list = &rs,
					  .num_sge = 1 },
				   *brw;
		struct ibv_send_wr sw = { .wr_id = 1,
					  .sg_list = &ss,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bsw;

		memset(src, seed + i, MSG);
		memset(dst, 0, MSG);
		if (ibv_post_recv(q[1 - i], &rw, &brw) ||
		    ibv_post_send(q[i], &sw, &bsw))
			die("post");
		wait_pair();
		if (memcmp(src, dst, MSG)) {
			fprintf(stderr,
				"qpn_space: data differs between QPs "
				"0x%06x and 0x%06x\n",
				q[i]->qp_num, q[1 - i]->qp_num);
			exit(1);
		}
	}
}

static int do_wrap(long n)
{
	/* per 24-bit QPN: alive, and when it was last destroyed */
	uint8_t *alive = calloc(1 << 24, 1);
	uint32_t *gone = calloc(1 << 24, sizeof(*gone));
	struct ibv_qp *ring[WINDOW] = { 0 };
	uint64_t t0 = now_ms();
	long i, checked = 0;
	uint32_t hi_seen[256] = { 0 };
	int nslots = 0, s;

	if (!alive || !gone)
		die("calloc");
	setup();
	for (i = 0; i < n; i++) {
		struct ibv_qp *qp = new_qp(), *old = ring[i % WINDOW];
		uint32_t qpn, t = (uint32_t)(now_ms() - t0) + 1;

		if (!qp) {
			fprintf(stderr, "qpn_space: create %ld of %ld: %s\n", i,
				n, strerror(errno));
			return 1;
		}
		qpn = qp->qp_num;
		if (qpn > 0xffffff || (qpn & 0xffff) < QPN_FIRST) {
			fprintf(stderr, "qpn_space: QPN 0x%x is not valid\n",
				qpn);
			return 1;
		}
		if (alive[qpn]) {
			fprintf(stderr,
				"qpn_space: QPN 0x%06x handed out "
				"while in use\n",
				qpn);
			return 1;
		}
		if (gone[qpn] && t - gone[qpn] < QUARANTINE_MS) {
			fprintf(stderr,
				"qpn_space: QPN 0x%06x handed out %u "
				"ms after it was destroyed\n",
				qpn, t - gone[qpn]);
			return 1;
		}
		alive[qpn] = 1;
		hi_seen[qpn >> 16]++;
		if (old) {
			alive[old->qp_num] = 0;
			gone[old->qp_num] = (uint32_t)(now_ms() - t0) + 1;
			if (ibv_destroy_qp(old))
				die("destroy");
		}
		ring[i % WINDOW] = qp;
		if (i % 4096 == 4095) {
			struct ibv_qp *peer = new_qp();

			if (!peer)
				die("create peer");
			/* the ring's slot: a fresh QP after the exchange */
			exchange(qp, peer, (uint8_t)i);
			alive[qp->qp_num] = 0;
			gone[qp->qp_num] = (uint32_t)(now_ms() - t0) + 1;
			ibv_destroy_qp(qp);
			ibv_destroy_qp(peer);
			ring[i % WINDOW] = NULL;
			checked++;
		}
	}
	for (s = 0; s < 256; s++)
		nslots += hi_seen[s] != 0;
	printf("qpn_space wrap: %ld QPs created and destroyed in %.1f s, "
	       "%ld pairs carried data, QPNs from %d range(s)\n",
	       n, (double)(now_ms() - t0) / 1000, checked, nslots);
	free(alive);
	free(gone);
	return 0;
}

static int do_limit(void)
{
	size_t cap = 1 << 16, n = 0;
	struct ibv_qp **qps = malloc(cap * sizeof(*qps)), *qp;
	uint64_t t0, t;
	int err;

	setup();
	for (;;) {
		qp = new_qp();
		if (!qp)
			break;
		if (n == cap) {
			cap *= 2;
			qps = realloc(qps, cap * sizeof(*qps));
			if (!qps)
				die("realloc");
		}
		qps[n++] = qp;
	}
	err = errno;
	printf("qpn_space limit: %zu QPs, then %s\n", n, strerror(err));
	if (err != ENOSPC) {
		fprintf(stderr, "qpn_space: expected ENOSPC\n");
		return 1;
	}
	/* the freed number is in quarantine: not handed out at once */
	if (ibv_destroy_qp(qps[--n]))
		die("destroy");
	t0 = now_ms();
	qp = new_qp();
	if (qp) {
		fprintf(stderr,
			"qpn_space: QPN 0x%06x handed out again at "
			"once\n",
			qp->qp_num);
		return 1;
	}
	while (!(qp = new_qp())) {
		if (errno != ENOSPC || now_ms() - t0 > QUARANTINE_MS + 1000) {
			fprintf(stderr, "qpn_space: after the quarantine: %s\n",
				strerror(errno));
			return 1;
		}
		/* (a bounded wait for a time-based rule, not a sync) */
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	}
	t = now_ms() - t0;
	printf("qpn_space limit: a QP again after %llu ms\n",
	       (unsigned long long)t);
	free(qps);
	if (t + 100 < QUARANTINE_MS) {
		fprintf(stderr, "qpn_space: quarantine of only %llu ms\n",
			(unsigned long long)t);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "wrap"))
		return do_wrap(atol(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "limit"))
		return do_limit();
	fprintf(stderr, "usage: qpn_space wrap N | qpn_space limit\n");
	return 2;
}
