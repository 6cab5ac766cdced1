// SPDX-License-Identifier: MIT
/*
 * Churn with flat resources (issue 23, docs/scale.md).
 *
 *   churn CYCLES
 *
 * CYCLES times each: an rdma_cm RC connection (create id, resolve,
 * create QP, connect, a message each way, disconnect, destroy) and an
 * rdma_cm UD exchange (SIDR, a datagram each way) with a server
 * process; then an RC and a UD QP pair of plain verbs inside the
 * client (create, connect, a message, destroy).  Both processes read
 * their RSS, open descriptors, threads and the /dev/shm files that are
 * theirs or their address's at cycle CYCLES/10 and at CYCLES; they fail
 * if descriptors, threads or files grew in number, or RSS by more than
 * RSS_SLACK_KB.  Every message is checked.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../lib/qp_setup.h"

#define MSG	     64
#define RSS_SLACK_KB 1024

static const char *who = "client";
static int sock;
static uint8_t buf[4 * MSG + 40];
static struct rdma_event_channel *ch;

struct usage {
	long rss_kb;
	int fds, threads, shm;
};

static void die(const char *what)
{
	fprintf(stderr, "churn %s: %s: %s\n", who, what, strerror(errno));
	exit(1);
}

static int count_dir(const char *path, const char *a, const char *b)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' &&
		    (!a || strstr(e->d_name, a) || (b && strstr(e->d_name, b))))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void usage_now(struct usage *u)
{
	char pid[32], ns[32];
	struct stat st;
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];

	u->rss_kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &u->rss_kb) == 1)
			break;
	if (f)
		fclose(f);
	u->fds = count_dir("/proc/self/fd", NULL, NULL);
	u->threads = count_dir("/proc/self/task", NULL, NULL);
	/* ours (uroce.<pid>) and our namespace's address registries */
	snprintf(pid, sizeof(pid), ".%d", (int)getpid());
	ns[0] = 0;
	if (!stat("/proc/self/ns/net", &st))
		snprintf(ns, sizeof(ns), "addr.%lu.", (unsigned long)st.st_ino);
	u->shm = count_dir("/dev/shm", pid, ns[0] ? ns : NULL);
}

static void xfer(void *p, size_t len, bool out)
{
	size_t done = 0;
	ssize_t r;

	while (done < len) {
		r = out ? write(sock, (char *)p + done, len - done) :
			  read(sock, (char *)p + done, len - done);
		if (r <= 0)
			die("socketpair");
		done += (size_t)r;
	}
}

static struct rdma_cm_event *get_event(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *e;

	if (rdma_get_cm_event(ch, &e))
		die("rdma_get_cm_event");
	if (e->event != want) {
		fprintf(stderr, "churn %s: %s, expected %s (status %d)\n", who,
			rdma_event_str(e->event), rdma_event_str(want),
			e->status);
		exit(1);
	}
	return e;
}

static void poll_one(struct ibv_cq *cq, enum ibv_wc_opcode op)
{
	time_t end = time(NULL) + 10;
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (time(NULL) > end)
			die("no completion in 10 s");
	if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.opcode != op) {
		fprintf(stderr, "churn %s: completion %s, opcode %d\n", who,
			ibv_wc_status_str(wc.status), wc.opcode);
		exit(1);
	}
}

/* a SEND and a RECV completion, in either order */
static void poll_pair(struct ibv_cq *cq)
{
	time_t end = time(NULL) + 10;
	unsigned int seen = 0;
	struct ibv_wc wc;
	int n;

	while (seen != 3) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0 || (n && wc.status != IBV_WC_SUCCESS)) {
			fprintf(stderr, "churn %s: completion %s\n", who,
				ibv_wc_status_str(wc.status));
			exit(1);
		}
		if (n)
			seen |= wc.opcode == IBV_WC_SEND ? 1 : 2;
		else if (time(NULL) > end)
			die("no completion in 10 s");
	}
}

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *p,
		      uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)p, len, mr->lkey };
	struct ibv_recv_wr w = { .sg_list = &s, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &w, &bad))
		die("post_recv");
}

static void post_send(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *p,
		      struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_sge s = { (uintptr_t)p, MSG, mr->lkey };
	struct ibv_send_wr w = { .sg_list = &s,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = qpn;
	w.wr.ud.remote_qkey = qkey;
	if (ibv_post_send(qp, &w, &bad))
		die("post_send");
}

static void check(const uint8_t *p, int cycle, int salt)
{
	int k;

	for (k = 0; k < MSG; k++)
		if (p[k] != (uint8_t)(cycle * 13 + k + salt)) {
			fprintf(stderr, "churn %s: cycle %d: message changed\n",
				who, cycle);
			exit(1);
		}
}

static void fill(uint8_t *p, int cycle, int salt)
{
	int k;

	for (k = 0; k < MSG; k++)
		p[k] = (uint8_t)(cycle * 13 + k + salt);
}

/* ---- server: accepts RC and UD ids, echoes one message on each ---- */

static void serve(int cycles)
{
	struct rdma_cm_id *lid[2];
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct usage mid = { 0 }, end;
	union ibv_gid gid;
	uint16_t ports[2];
	int done[2] = { 0, 0 }, k;

	who = "server";
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &lid[0], NULL, RDMA_PS_TCP) ||
	    rdma_create_id(ch, &lid[1], NULL, RDMA_PS_UDP))
		die("create listeners");
	for (k = 0; k < 2; k++)
		if (rdma_bind_addr(lid[k], (struct sockaddr *)&any) ||
		    rdma_listen(lid[k], 8))
			die("listen");
	if (ibv_query_gid(lid[0]->verbs, 1, 0, &gid))
		die("query_gid");
	ports[0] = rdma_get_src_port(lid[0]);
	ports[1] = rdma_get_src_port(lid[1]);
	xfer(&gid, sizeof(gid), true);
	xfer(ports, sizeof(ports), true);
	while (done[0] < cycles || done[1] < cycles) {
		struct rdma_cm_event *e = get_event(
			RDMA_CM_EVENT_CONNECT_REQUEST);
		struct rdma_cm_id *id = e->id;
		bool ud = e->listen_id == lid[1];
		struct rdma_conn_param cp = { .responder_resources = 1,
					      .initiator_depth = 1,
					      .rnr_retry_count = 7 };
		struct ibv_qp_init_attr qa = {
			.qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC,
			.cap = { .max_send_wr = 2,
				 .max_recv_wr = 2,
				 .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_mr *mr;
		struct ibv_cq *cq;
		struct ibv_ah *ah = NULL;
		uint32_t qpn = 0, qkey = 0;
		int cycle = done[ud] + 1;

		if (ud) {
			/* where to answer: the requester's QP, from its
			 * private data */
			memcpy(&qpn, e->param.ud.private_data, 4);
		}
		rdma_ack_cm_event(e);
		cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
		qa.send_cq = cq;
		qa.recv_cq = cq;
		if (!cq || rdma_create_qp(id, NULL, &qa))
			die("server QP");
		mr = ibv_reg_mr(id->qp->pd, buf, sizeof(buf),
				IBV_ACCESS_LOCAL_WRITE);
		if (!mr)
			die("reg_mr");
		post_recv(id->qp, mr, buf, ud ? MSG + 40 : MSG);
		if (rdma_accept(id, &cp))
			die("accept");
		if (!ud) {
			rdma_ack_cm_event(get_event(RDMA_CM_EVENT_ESTABLISHED));
		}
		poll_one(cq, IBV_WC_RECV);
		check(ud ? buf + 40 : buf, cycle, ud);
		fill(buf + 2 * MSG, cycle, ud + 2);
		if (ud) {
			struct ibv_ah_attr aa = {
				.is_global = 1,
				.port_num = 1,
				.grh = { .hop_limit = 64,
					 .dgid = id->route.addr.addr.ibaddr.dgid },
			};

			qkey = RDMA_UDP_QKEY;
			ah = ibv_create_ah(id->qp->pd, &aa);
			if (!ah)
				die("create_ah");
		}
		post_send(id->qp, mr, buf + 2 * MSG, ah, qpn, qkey);
		poll_one(cq, IBV_WC_SEND);
		if (!ud)
			rdma_ack_cm_event(get_event(RDMA_CM_EVENT_DISCONNECTED));
		else
			/* the client has the echo: its next REQ may come */
			xfer(&k, sizeof(k), false);
		if (ah)
			ibv_destroy_ah(ah);
		rdma_destroy_qp(id);
		ibv_dereg_mr(mr);
		ibv_destroy_cq(cq);
		rdma_destroy_id(id);
		done[ud]++;
		if (done[0] == cycles / 10 && done[1] == cycles / 10 && !mid.fds)
			usage_now(&mid);
	}
	usage_now(&end);
	xfer(&mid, sizeof(mid), true);
	xfer(&end, sizeof(end), true);
}

/* ---- client ---- */

static void cm_cycle(const struct sockaddr_in *dst, bool ud, int cycle)
{
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa = {
		.qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC,
		.cap = { .max_send_wr = 2,
			 .max_recv_wr = 2,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1,
				      .retry_count = 7,
				      .rnr_retry_count = 7 };
	struct rdma_cm_event *e;
	struct ibv_ah *ah = NULL;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	uint32_t qpn = 0, qkey = 0;

	if (rdma_create_id(ch, &id, NULL, ud ? RDMA_PS_UDP : RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000))
		die("resolve_addr");
	rdma_ack_cm_event(get_event(RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, 2000))
		die("resolve_route");
	rdma_ack_cm_event(get_event(RDMA_CM_EVENT_ROUTE_RESOLVED));
	cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	qa.send_cq = cq;
	qa.recv_cq = cq;
	if (!cq || rdma_create_qp(id, NULL, &qa))
		die("client QP");
	mr = ibv_reg_mr(id->qp->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("reg_mr");
	post_recv(id->qp, mr, buf + MSG, ud ? MSG + 40 : MSG);
	if (ud) {
		/* our QPN for the server's answer */
		cp.private_data = &id->qp->qp_num;
		cp.private_data_len = 4;
	}
	if (rdma_connect(id, &cp))
		die("connect");
	e = get_event(RDMA_CM_EVENT_ESTABLISHED);
	if (ud) {
		qpn = e->param.ud.qp_num;
		qkey = e->param.ud.qkey;
		ah = ibv_create_ah(id->qp->pd, &e->param.ud.ah_attr);
		if (!ah)
			die("create_ah");
	}
	rdma_ack_cm_event(e);
	fill(buf, cycle, ud);
	post_send(id->qp, mr, buf, ah, qpn, qkey);
	poll_pair(cq);
	check(ud ? buf + MSG + 40 : buf + MSG, cycle, ud + 2);
	if (!ud) {
		if (rdma_disconnect(id))
			die("disconnect");
		rdma_ack_cm_event(get_event(RDMA_CM_EVENT_DISCONNECTED));
	} else {
		xfer(&cycle, sizeof(cycle), true);
	}
	if (ah)
		ibv_destroy_ah(ah);
	rdma_destroy_qp(id);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	if (rdma_destroy_id(id))
		die("destroy_id");
}

/* two QPs of one process, connected to each other, one message */
static void verbs_cycle(struct ibv_context *ctx, bool ud, int cycle)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC,
		.cap = { .max_send_wr = 2,
			 .max_recv_wr = 2,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_ah *ah = NULL;
	union ibv_gid gid;

	if (!pd || !cq || ibv_query_gid(ctx, 1, 0, &gid))
		die("verbs setup");
	a = ibv_create_qp(pd, &qa);
	b = ibv_create_qp(pd, &qa);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!a || !b || !mr)
		die("verbs QPs");
	if (ud) {
		struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT,
					  .port_num = 1,
					  .qkey = 0x11 };
		struct ibv_ah_attr aa = { .is_global = 1,
					  .port_num = 1,
					  .grh = { .dgid = gid,
						   .hop_limit = 64 } };
		struct ibv_qp *q[2] = { a, b };
		int k;

		for (k = 0; k < 2; k++) {
			at.qp_state = IBV_QPS_INIT;
			if (ibv_modify_qp(q[k], &at,
					  IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						  IBV_QP_PORT | IBV_QP_QKEY))
				die("UD INIT");
			at.qp_state = IBV_QPS_RTR;
			if (ibv_modify_qp(q[k], &at, IBV_QP_STATE))
				die("UD RTR");
			at.qp_state = IBV_QPS_RTS;
			at.sq_psn = 0;
			if (ibv_modify_qp(q[k], &at,
					  IBV_QP_STATE | IBV_QP_SQ_PSN))
				die("UD RTS");
		}
		ah = ibv_create_ah(pd, &aa);
		if (!ah)
			die("create_ah");
	} else {
		struct uroce_test_rc r = { .rq_psn = 0x100,
					   .sq_psn = 0x100,
					   .dgid = gid,
					   .mtu = IBV_MTU_1024,
					   .timeout = 14,
					   .retry_cnt = 7,
					   .rnr_retry = 7,
					   .max_dest_rd_atomic = 1,
					   .max_rd_atomic = 1,
					   .min_rnr_timer = 1 };
		struct uroce_test_rc rb = r;

		r.dqpn = b->qp_num;
		rb.dqpn = a->qp_num;
		if (uroce_test_rc_init(a, 0) || uroce_test_rc_init(b, 0) ||
		    uroce_test_rc_rtr(a, &r) || uroce_test_rc_rtr(b, &rb) ||
		    uroce_test_rc_rts(a, &r) || uroce_test_rc_rts(b, &rb))
			die("RC connect");
	}
	post_recv(b, mr, buf + MSG, ud ? MSG + 40 : MSG);
	fill(buf, cycle, ud + 4);
	post_send(a, mr, buf, ah, b->qp_num, 0x11);
	poll_pair(cq);
	check(ud ? buf + MSG + 40 : buf + MSG, cycle, ud + 4);
	if (ah)
		ibv_destroy_ah(ah);
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_dereg_mr(mr) ||
	    ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		die("verbs teardown");
}

static bool compare(const char *side, const struct usage *m,
		    const struct usage *e, int at_mid, int at_end)
{
	printf("churn %s: cycle %d: rss_kb=%ld fds=%d threads=%d shm=%d; "
	       "cycle %d: rss_kb=%ld fds=%d threads=%d shm=%d\n",
	       side, at_mid, m->rss_kb, m->fds, m->threads, m->shm, at_end,
	       e->rss_kb, e->fds, e->threads, e->shm);
	if (e->fds > m->fds || e->threads > m->threads || e->shm > m->shm ||
	    e->rss_kb - m->rss_kb > RSS_SLACK_KB) {
		fprintf(stderr, "churn %s: resources grew\n", side);
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	struct usage cm_mid = { 0 }, cm_end, v_mid = { 0 }, v_end, s_mid, s_end;
	struct sockaddr_in dst = { .sin_family = AF_INET };
	struct ibv_context *ctx;
	struct ibv_device **l;
	int cycles, sp[2], i, st;
	uint16_t ports[2];
	union ibv_gid gid;
	bool ok = true;
	pid_t pid;

	if (argc != 2 || (cycles = atoi(argv[1])) < 10) {
		fprintf(stderr, "usage: churn CYCLES (at least 10)\n");
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		/* a client that fails leaves no server behind */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		sock = sp[1];
		serve(cycles);
		fflush(stdout);
		_exit(0);
	}
	close(sp[1]);
	sock = sp[0];
	ch = rdma_create_event_channel();
	if (!ch)
		die("event channel");
	xfer(&gid, sizeof(gid), false);
	xfer(ports, sizeof(ports), false);
	memcpy(&dst.sin_addr, &gid.raw[12], 4);
	for (i = 1; i <= cycles; i++) {
		dst.sin_port = ports[0]; /* (rdma_get_src_port: big-endian) */
		cm_cycle(&dst, false, i);
		dst.sin_port = ports[1];
		cm_cycle(&dst, true, i);
		if (i == cycles / 10)
			usage_now(&cm_mid);
	}
	usage_now(&cm_end);
	xfer(&s_mid, sizeof(s_mid), false);
	xfer(&s_end, sizeof(s_end), false);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "churn: the server failed\n");
		return 1;
	}
	l = ibv_get_device_list(NULL);
	ctx = l && l[0] ? ibv_open_device(l[0]) : NULL;
	if (!ctx)
		die("open");
	ibv_free_device_list(l);
	for (i = 1; i <= cycles; i++) {
		verbs_cycle(ctx, false, i);
		verbs_cycle(ctx, true, i);
		if (i == cycles / 10)
			usage_now(&v_mid);
	}
	usage_now(&v_end);
	ibv_close_device(ctx);
	ok &= compare("rdma_cm client", &cm_mid, &cm_end, cycles / 10, cycles);
	ok &= compare("rdma_cm server", &s_mid, &s_end, cycles / 10, cycles);
	ok &= compare("verbs", &v_mid, &v_end, cycles / 10, cycles);
	if (!ok)
		return 1;
	printf("churn: %d cycles each of rdma_cm RC and UD and verbs RC and "
	       "UD, every message checked, resources flat\n",
	       cycles);
	return 0;
}
