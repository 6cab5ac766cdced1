// SPDX-License-Identifier: MIT
/*
 * ack_delay: how long an RC SEND waits for its ACK when the receiving
 * processes are busy and the cores are fewer than the processes
 * (docs/datapath.md, "ACKs").
 *
 *   ack_delay NPROCS SECONDS COMPUTE_US
 *
 * Forks NPROCS processes joined in a ring by RC QPs (process i sends to
 * i+1).  Each one, for SECONDS: posts a signaled 64-byte SEND to the
 * next, busy-polls its CQ (reposting the receives its predecessor's
 * SENDs took) until the SEND completes, then computes for COMPUTE_US
 * microseconds without calling the library (0: it polls all the time).
 * While it computes, what arrives for it can only be received and
 * acknowledged by the library's own thread.  What is measured is the
 * time from ibv_post_send to the completion's timestamp (the moment the
 * library saw the ACK, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK),
 * so the sender's own scheduling after that moment does not count.
 * Prints the count and the percentiles of all processes together:
 *
 *   ack_delay procs=4 compute_us=100 sends=N p50_us=.. p90_us=.. p99_us=..
 *   p999_us=.. max_us=..
 *
 * Link it against our libibverbs, or run it with LD_LIBRARY_PATH.  Not a
 * test: the figures depend on the machine and its load.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG	    64
#define RQ_DEPTH    64
#define MAX_SAMPLES (1u << 20)
#define MAX_PROCS   64

struct ends { /* what a process tells the parent */
	union ibv_gid gid;
	uint32_t out_qpn, in_qpn;
};

struct peers { /* what the parent tells it */
	union ibv_gid next_gid, prev_gid;
	uint32_t next_in_qpn, prev_out_qpn;
};

static void die(const char *what)
{
	fprintf(stderr, "ack_delay: %s failed\n", what);
	exit(1);
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void xfer(int fd, void *buf, size_t len, bool out)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = out ? write(fd, (char *)buf + done, len - done) :
				  read(fd, (char *)buf + done, len - done);

		if (n <= 0)
			die(out ? "write to parent" : "read from parent");
		done += (size_t)n;
	}
}

static void connect_rc(struct ibv_qp *qp, uint32_t dqpn,
		       const union ibv_gid *dgid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid = *dgid;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq_ex *cq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ibv_cq_ex_to_cq(cq);
	ia.recv_cq = ibv_cq_ex_to_cq(cq);
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = RQ_DEPTH;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &ia);
}

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr + MSG,
			       .length = MSG,
			       .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

static void compute(uint64_t ns)
{
	uint64_t end = now_ns(CLOCK_MONOTONIC) + ns;
	volatile uint64_t x = 0;

	while (now_ns(CLOCK_MONOTONIC) < end)
		for (int i = 0; i < 100; i++)
			x += (uint64_t)i;
}

/* one process of the ring; writes its samples (ns) to the parent */
static void child(int fd, double seconds, uint64_t compute_ns)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_cq_init_attr_ex ca;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;
	struct ibv_mr *mr;
	struct ibv_qp *out, *in;
	struct ends me;
	struct peers p;
	uint64_t *lat = malloc(MAX_SAMPLES * sizeof(*lat));
	uint32_t n = 0;
	char go;

	if (!list || !list[0] || !lat)
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	memset(&ca, 0, sizeof(ca));
	ca.cqe = 4 * RQ_DEPTH;
	ca.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	cq = pd ? ibv_create_cq_ex(ctx, &ca) : NULL;
	mr = cq ? ibv_reg_mr(pd, calloc(1, 2 * MSG), 2 * MSG,
			     IBV_ACCESS_LOCAL_WRITE) :
		  NULL;
	out = mr ? make_qp(pd, cq) : NULL;
	in = out ? make_qp(pd, cq) : NULL;
	if (!in || ibv_query_gid(ctx, 1, 0, &me.gid))
		die("resources");
	me.out_qpn = out->qp_num;
	me.in_qpn = in->qp_num;
	xfer(fd, &me, sizeof(me), true);
	xfer(fd, &p, sizeof(p), false);
	connect_rc(out, p.next_in_qpn, &p.next_gid);
	connect_rc(in, p.prev_out_qpn, &p.prev_gid);
	for (int i = 0; i < RQ_DEPTH; i++)
		post_recv(in, mr, 0);
	xfer(fd, &go, 1, true);	 /* ready */
	xfer(fd, &go, 1, false); /* go */

	uint64_t end = now_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
	bool sending = true;

	for (;;) {
		struct ibv_sge sge = { .addr = (uintptr_t)mr->addr,
				       .length = MSG,
				       .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 1,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;
		struct ibv_poll_cq_attr pa = { 0 };
		uint64_t posted = 0;
		bool done = false;

		if (sending && now_ns(CLOCK_MONOTONIC) >= end) {
			sending = false;
			xfer(fd, &n, sizeof(n), true);
			xfer(fd, lat, n * sizeof(*lat), true);
		}
		if (sending) {
			posted = now_ns(CLOCK_REALTIME);
			if (ibv_post_send(out, &wr, &bad))
				die("ibv_post_send");
		} else {
			/* the others may still send to us: receive until the
			 * parent says all are done */
			struct timeval tv = { 0, 0 };
			fd_set r;

			FD_ZERO(&r);
			FD_SET(fd, &r);
			if (select(fd + 1, &r, NULL, NULL, &tv) > 0)
				break;
		}
		while (!done) {
			if (ibv_start_poll(cq, &pa)) {
				if (!sending)
					break;
				continue;
			}
			do {
				if (cq->status != IBV_WC_SUCCESS) {
					fprintf(stderr, "ack_delay: %s\n",
						ibv_wc_status_str(cq->status));
					exit(1);
				}
				if (ibv_wc_read_opcode(cq) == IBV_WC_RECV) {
					post_recv(in, mr, 0);
					continue;
				}
				if (n < MAX_SAMPLES)
					lat[n++] =
						ibv_wc_read_completion_wallclock_ns(
							cq) -
						posted;
				done = true;
			} while (!ibv_next_poll(cq));
			ibv_end_poll(cq);
			if (!sending)
				break;
		}
		if (sending && compute_ns)
			compute(compute_ns);
	}
	exit(0);
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int nprocs, fds[MAX_PROCS];
	struct ends e[MAX_PROCS];
	double seconds;
	uint64_t compute_ns, *all = NULL;
	size_t total = 0;
	pid_t pid[MAX_PROCS];
	char c = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: %s NPROCS SECONDS COMPUTE_US\n",
			argv[0]);
		return 2;
	}
	nprocs = atoi(argv[1]);
	seconds = atof(argv[2]);
	compute_ns = strtoull(argv[3], NULL, 0) * 1000;
	if (nprocs < 2 || nprocs > MAX_PROCS || seconds <= 0)
		return 2;
	for (int i = 0; i < nprocs; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			die("socketpair");
		pid[i] = fork();
		if (pid[i] < 0)
			die("fork");
		if (!pid[i]) {
			close(sv[0]);
			child(sv[1], seconds, compute_ns);
		}
		close(sv[1]);
		fds[i] = sv[0];
	}
	for (int i = 0; i < nprocs; i++)
		xfer(fds[i], &e[i], sizeof(e[i]), false);
	for (int i = 0; i < nprocs; i++) {
		const struct ends *nx = &e[(i + 1) % nprocs];
		const struct ends *pv = &e[(i + nprocs - 1) % nprocs];
		struct peers p = {
			.next_gid = nx->gid,
			.prev_gid = pv->gid,
			.next_in_qpn = nx->in_qpn,
			.prev_out_qpn = pv->out_qpn,
		};

		xfer(fds[i], &p, sizeof(p), true);
	}
	for (int i = 0; i < nprocs; i++)
		xfer(fds[i], &c, 1, false);
	for (int i = 0; i < nprocs; i++)
		xfer(fds[i], &c, 1, true);
	for (int i = 0; i < nprocs; i++) {
		uint32_t n;

		xfer(fds[i], &n, sizeof(n), false);
		all = realloc(all, (total + n) * sizeof(*all));
		if (!all)
			die("realloc");
		xfer(fds[i], all + total, n * sizeof(*all), false);
		total += n;
	}
	for (int i = 0; i < nprocs; i++)
		xfer(fds[i], &c, 1, true);
	for (int i = 0; i < nprocs; i++)
		waitpid(pid[i], NULL, 0);
	if (!total)
		die("measuring (no sends)");
	qsort(all, total, sizeof(*all), cmp);
#define PCT(q) (all[(size_t)((q) * (double)(total - 1))] / 1000.0)
	printf("ack_delay procs=%d compute_us=%llu sends=%zu p50_us=%.1f "
	       "p90_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f\n",
	       nprocs, (unsigned long long)(compute_ns / 1000), total, PCT(0.5),
	       PCT(0.9), PCT(0.99), PCT(0.999), all[total - 1] / 1000.0);
	return 0;
}
