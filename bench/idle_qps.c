// SPDX-License-Identifier: MIT
/*
 * idle_qps: hold N connected RC QPs on a uroce device and do nothing, so
 * the benchmark driver can read what idle QPs cost: CPU time (from
 * /proc/PID/stat) and resident memory (VmRSS).
 *
 *   idle_qps NQPS [DEPTH [SECONDS]]
 *
 * Opens the first device, creates one PD, one CQ and NQPS RC QPs with
 * DEPTH send and receive work requests each (default 128, perftest's TX
 * depth), and connects QP 2k to QP 2k+1 over the device's own GID (an odd
 * last QP is connected to itself).  Then it prints
 *
 *   ready qps=N depth=D rss_kb_before=.. rss_kb_device=.. rss_kb=..
 *
 * (VmRSS before the device was opened, after opening it with its PD and
 * CQ, and with the QPs) and sleeps SECONDS (default: until killed).
 * Link it against our libibverbs, or run it with LD_LIBRARY_PATH.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void die(const char *what)
{
	fprintf(stderr, "idle_qps: %s failed\n", what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s NQPS [DEPTH [SECONDS]]\n", argv[0]);
		return 2;
	}
	int nqps = atoi(argv[1]);
	int depth = argc > 2 ? atoi(argv[2]) : 128;
	int seconds = argc > 3 ? atoi(argv[3]) : -1;
	if (nqps < 1 || depth < 1)
		return 2;
	long rss_before = rss_kb();

	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	if (!list || ndev < 1)
		die("ibv_get_device_list");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	struct ibv_port_attr pattr;
	union ibv_gid gid;
	if (ibv_query_port(ctx, 1, &pattr) || ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_port/gid");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4096, NULL, NULL, 0) : NULL;
	if (!cq)
		die("ibv_alloc_pd/ibv_create_cq");
	long rss_device = rss_kb();

	struct ibv_qp **qp = calloc(nqps, sizeof(*qp));
	for (int i = 0; i < nqps; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = depth,
				 .max_recv_wr = depth,
				 .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		qp[i] = ibv_create_qp(pd, &ia);
		if (!qp[i])
			die("ibv_create_qp");
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT,
			.pkey_index = 0,
			.port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ,
		};
		if (ibv_modify_qp(qp[i], &a,
				  IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("modify to INIT");
	}
	for (int i = 0; i < nqps; i++) {
		int peer = (i ^ 1) < nqps ? (i ^ 1) : i;
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR,
			.path_mtu = pattr.active_mtu,
			.dest_qp_num = qp[peer]->qp_num,
			.rq_psn = 0,
			.max_dest_rd_atomic = 1,
			.min_rnr_timer = 12,
			.ah_attr = { .is_global = 1,
				     .port_num = 1,
				     .grh = { .dgid = gid,
					      .sgid_index = 0,
					      .hop_limit = 64 } },
		};
		if (ibv_modify_qp(qp[i], &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MIN_RNR_TIMER))
			die("modify to RTR");
		a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS,
					  .timeout = 14,
					  .retry_cnt = 7,
					  .rnr_retry = 7,
					  .sq_psn = 0,
					  .max_rd_atomic = 1 };
		if (ibv_modify_qp(qp[i], &a,
				  IBV_QP_STATE | IBV_QP_TIMEOUT |
					  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
			die("modify to RTS");
	}
	printf("ready qps=%d depth=%d rss_kb_before=%ld rss_kb_device=%ld rss_kb=%ld\n",
	       nqps, depth, rss_before, rss_device, rss_kb());
	fflush(stdout);
	if (seconds < 0)
		for (;;)
			pause();
	sleep(seconds);
	for (int i = 0; i < nqps; i++)
		ibv_destroy_qp(qp[i]);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
