// SPDX-License-Identifier: MIT
/*
 * fault_peer - an RC WRITE stream that must fail the right way.
 *
 *   fault_peer -p PORT --port-file FILE                       (server)
 *   fault_peer -s HOST -p PORT [--expect STATUS] [--ack-timeout N]
 *              [--retry-cnt N] [--progress-file FILE] [--max-s S] (client)
 *
 * The server is a passive target: it registers a buffer for remote
 * writes, connects one RC QP and waits for the out-of-band TCP connection
 * to close.  The client keeps WINDOW signalled RDMA WRITEs outstanding
 * until one fails (the test bed has cut the link for longer than the
 * retry budget, or killed the server).  Then it checks what the verbs
 * contract promises: the first error is STATUS (default RETRY_EXC_ERR)
 * and came within the retry budget of the last success, every other
 * outstanding WR and one posted afterwards completes with WR_FLUSH_ERR,
 * the QP reports the error state, and the process can still create,
 * connect and destroy a new QP.  Prints "fault_peer: OK ..." and exits 0,
 * or explains and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/oob.h"
#include "../lib/pattern.h"
#include "../lib/qp_setup.h"

#define WINDOW	       16
#define CHUNK	       (64 << 10)
#define BUF_SIZE       (WINDOW * CHUNK)
#define PROGRESS_AFTER 64 /* successful WRITEs before --progress-file */

struct conn_info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
	uint8_t gid[16];
};

struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	enum ibv_mtu mtu;
	union ibv_gid gid;
};

static const char *role = "fault_peer";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fault_peer[%s]: ", role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void oob_say(const char *line)
{
	say("%s", line);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct ibv_qp *make_qp(struct peer *p, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = WINDOW * 2,
			 .max_recv_wr = 4,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(p->pd, &ia);
}

static int connect_qp(struct peer *p, struct ibv_qp *qp,
		      const struct conn_info *remote, uint32_t my_psn,
		      int timeout, int retry_cnt)
{
	struct uroce_test_rc r = {
		.dqpn = remote->qpn,
		.rq_psn = remote->psn,
		.sq_psn = my_psn,
		.mtu = p->mtu,
		.max_dest_rd_atomic = 1,
		.max_rd_atomic = 1,
		.min_rnr_timer = 1,
		.timeout = (uint8_t)timeout,
		.retry_cnt = (uint8_t)retry_cnt,
		.rnr_retry = 7,
	};
	int ret;

	memcpy(r.dgid.raw, remote->gid, 16);
	ret = uroce_test_rc_init(qp, IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_LOCAL_WRITE);
	if (!ret)
		ret = uroce_test_rc_rtr(qp, &r);
	if (!ret)
		ret = uroce_test_rc_rts(qp, &r);
	return ret;
}

static int setup(struct peer *p)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;

	if (!list || !list[0]) {
		say("no RDMA device");
		return -1;
	}
	p->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!p->ctx || ibv_query_port(p->ctx, 1, &pa) ||
	    ibv_query_gid(p->ctx, 1, 0, &p->gid)) {
		say("cannot open the device");
		return -1;
	}
	p->mtu = pa.active_mtu;
	p->pd = ibv_alloc_pd(p->ctx);
	p->cq = p->pd ? ibv_create_cq(p->ctx, WINDOW * 4, NULL, NULL, 0) : NULL;
	p->buf = aligned_alloc(4096, BUF_SIZE);
	if (!p->cq || !p->buf)
		return -1;
	pat_fill(p->buf, BUF_SIZE, key_of(0x5a, 0, 0, 0), 0);
	p->mr = ibv_reg_mr(p->pd, p->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	p->qp = p->mr ? make_qp(p, p->cq) : NULL;
	if (!p->qp) {
		say("cannot create the MR or QP: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void teardown(struct peer *p)
{
	if (p->qp && ibv_destroy_qp(p->qp))
		say("ibv_destroy_qp failed");
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->ctx)
		ibv_close_device(p->ctx);
	free(p->buf);
}

static int exchange(int fd, struct peer *p, uint32_t psn,
		    struct conn_info *remote)
{
	struct conn_info mine = {
		.qpn = p->qp->qp_num,
		.psn = psn,
		.rkey = p->mr->rkey,
		.addr = (uintptr_t)p->buf,
	};

	memcpy(mine.gid, p->gid.raw, 16);
	if (uroce_oob_send(fd, &mine, sizeof(mine)) ||
	    uroce_oob_recv(fd, remote, sizeof(*remote), 0)) {
		say("out-of-band exchange failed");
		return -1;
	}
	return 0;
}

static int post_write(struct peer *p, const struct conn_info *remote,
		      uint64_t id)
{
	unsigned int slot = (unsigned int)(id % WINDOW);
	struct ibv_sge sge = {
		.addr = (uintptr_t)p->buf + slot * CHUNK,
		.length = CHUNK,
		.lkey = p->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = remote->addr + slot * CHUNK,
			     .rkey = remote->rkey },
	};
	struct ibv_send_wr *bad;

	return ibv_post_send(p->qp, &wr, &bad);
}

static int status_of(const char *s)
{
	int i;

	for (i = 0; i <= IBV_WC_GENERAL_ERR; i++) {
		const char *n = ibv_wc_status_str((enum ibv_wc_status)i);

		if (!strcasecmp(s, n))
			return i;
	}
	if (!strcmp(s, "RETRY_EXC_ERR"))
		return IBV_WC_RETRY_EXC_ERR;
	if (!strcmp(s, "REM_ACCESS_ERR"))
		return IBV_WC_REM_ACCESS_ERR;
	return -1;
}

struct copts {
	const char *progress_file;
	int expect, timeout, retry_cnt;
	double max_s;
};

static int run_client(struct peer *p, int fd, const struct copts *o)
{
	struct conn_info remote;
	uint64_t posted = 0, done = 0, ok = 0, flushed = 0;
	double t_last_ok, t_err = 0, t0, budget_s;
	int first_err = -1, errors = 0;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct ibv_cq *cq2 = NULL;
	struct ibv_qp *qp2 = NULL;
	struct ibv_wc wc[WINDOW];

	if (exchange(fd, p, 0x1000, &remote) ||
	    connect_qp(p, p->qp, &remote, 0x1000, o->timeout, o->retry_cnt)) {
		say("cannot connect the QP");
		return -1;
	}
	/* what the IBA allows (4.096 us * 2^timeout per try, retry_cnt
	 * retries) with 4x room for back-off, plus scheduling slack */
	budget_s = 4.096e-6 * (double)(1ull << o->timeout) *
			   (o->retry_cnt + 1) * 4 +
		   2.0;
	t0 = t_last_ok = now_s();
	while (first_err < 0) {
		int i, n;

		while (posted - done < WINDOW) {
			if (post_write(p, &remote, posted)) {
				say("ibv_post_send failed before any error");
				return -1;
			}
			posted++;
		}
		n = ibv_poll_cq(p->cq, WINDOW, wc);
		if (n < 0) {
			say("ibv_poll_cq failed");
			return -1;
		}
		for (i = 0; i < n; i++) {
			done++;
			if (wc[i].status == IBV_WC_SUCCESS) {
				ok++;
				t_last_ok = now_s();
				if (ok == PROGRESS_AFTER && o->progress_file)
					uroce_oob_write_file(o->progress_file,
							     "flowing\n");
			} else if (first_err < 0) {
				first_err = wc[i].status;
				t_err = now_s();
			} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
				flushed++;
			} else {
				errors++;
			}
		}
		if (first_err < 0 && now_s() - t0 > o->max_s) {
			say("no error completion after %.0f s (%" PRIu64
			    " WRITEs succeeded)",
			    o->max_s, ok);
			return -1;
		}
	}
	say("first error %s after %.3f s without progress (budget %.3f s), "
	    "%" PRIu64 " WRITEs succeeded before",
	    ibv_wc_status_str((enum ibv_wc_status)first_err), t_err - t_last_ok,
	    budget_s, ok);
	if (first_err != o->expect) {
		say("expected %s",
		    ibv_wc_status_str((enum ibv_wc_status)o->expect));
		errors++;
	}
	if (t_err - t_last_ok > budget_s) {
		say("the error came too late");
		errors++;
	}

	/* every WR still outstanding must come back flushed, promptly */
	if (post_write(p, &remote, posted) == 0)
		posted++;
	while (done < posted && now_s() - t_err < 10) {
		int i, n = ibv_poll_cq(p->cq, WINDOW, wc);

		for (i = 0; i < n; i++) {
			done++;
			if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
				flushed++;
			} else {
				say("WR %" PRIu64 " completed with %s after the "
				    "error, not WR_FLUSH_ERR",
				    wc[i].wr_id,
				    ibv_wc_status_str(wc[i].status));
				errors++;
			}
		}
	}
	if (done != posted) {
		say("%" PRIu64 " of %" PRIu64 " WRs never completed",
		    posted - done, posted);
		errors++;
	}
	if (ibv_query_qp(p->qp, &qa, IBV_QP_STATE, &qia) ||
	    qa.qp_state != IBV_QPS_ERR) {
		say("QP is not in the error state (state %d)", qa.qp_state);
		errors++;
	}

	/* the device still works: a fresh QP connects */
	cq2 = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
	qp2 = cq2 ? make_qp(p, cq2) : NULL;
	if (!qp2 ||
	    connect_qp(p, qp2, &remote, 0x2000, o->timeout, o->retry_cnt)) {
		say("cannot create and connect a new QP after the error");
		errors++;
	}
	if (qp2 && ibv_destroy_qp(qp2)) {
		say("cannot destroy the new QP");
		errors++;
	}
	if (cq2 && ibv_destroy_cq(cq2)) {
		say("cannot destroy the new CQ");
		errors++;
	}
	printf("fault_peer: %s status=%s succeeded=%" PRIu64 " flushed=%" PRIu64
	       " error_after_ms=%.0f budget_ms=%.0f new_qp=%s\n",
	       errors ? "FAIL" : "OK",
	       ibv_wc_status_str((enum ibv_wc_status)first_err), ok, flushed,
	       (t_err - t_last_ok) * 1e3, budget_s * 1e3, qp2 ? "ok" : "failed");
	return errors ? -1 : 0;
}

static int run_server(struct peer *p, int fd)
{
	struct conn_info remote;
	char c;

	if (exchange(fd, p, 0x1000, &remote) ||
	    connect_qp(p, p->qp, &remote, 0x1000, 14, 7)) {
		say("cannot connect the QP");
		return -1;
	}
	/* serve until the client goes away */
	while (recv(fd, &c, 1, 0) > 0)
		;
	printf("fault_peer: OK server\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "port", required_argument, NULL, 'p' },
		{ "port-file", required_argument, NULL, 'P' },
		{ "expect", required_argument, NULL, 'e' },
		{ "ack-timeout", required_argument, NULL, 't' },
		{ "retry-cnt", required_argument, NULL, 'r' },
		{ "progress-file", required_argument, NULL, 'g' },
		{ "max-s", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	struct copts o = { .expect = IBV_WC_RETRY_EXC_ERR,
			   .timeout = 14,
			   .retry_cnt = 7,
			   .max_s = 60 };
	const char *host = NULL, *port = NULL, *port_file = NULL;
	struct peer p;
	int ch, fd, ret;

	while ((ch = getopt_long(argc, argv, "s:p:", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			host = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'P':
			port_file = optarg;
			break;
		case 'e':
			o.expect = status_of(optarg);
			break;
		case 't':
			o.timeout = atoi(optarg);
			break;
		case 'r':
			o.retry_cnt = atoi(optarg);
			break;
		case 'g':
			o.progress_file = optarg;
			break;
		case 'm':
			o.max_s = atof(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!port || o.expect < 0 || o.timeout < 1 || o.timeout > 31 ||
	    o.retry_cnt < 0 || o.retry_cnt > 7) {
		fprintf(stderr, "usage: see the comment at the top of %s\n",
			__FILE__);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	role = host ? "client" : "server";
	uroce_oob_init(oob_say);
	memset(&p, 0, sizeof(p));
	if (setup(&p)) {
		teardown(&p);
		return 1;
	}
	fd = host ? uroce_oob_connect(host, port) :
		    uroce_oob_listen("fault_peer", port, port_file, 0);
	if (fd < 0) {
		say("out-of-band connection failed");
		teardown(&p);
		return 1;
	}
	ret = host ? run_client(&p, fd, &o) : run_server(&p, fd);
	close(fd);
	teardown(&p);
	return ret ? 1 : 0;
}
