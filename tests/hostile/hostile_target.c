// SPDX-License-Identifier: MIT
/*
 * hostile_target - a uroce process for an attacker to aim at.
 *
 *   hostile_target ATTACKER_IPV4 ATTACKER_FIRST_QPN NQP
 *
 * Runs over our libibverbs.so.1 (UROCE_ADDR names its address).  In one
 * mapping it lays out memory regions between guard pages: W (PD 1, every
 * remote right), RO (PD 1, remote read only), B (PD 2, every right),
 * DEAD (registered, then deregistered), RE (registered, deregistered and
 * registered again: its old and new rkeys are both reported).  Every byte
 * starts with a known pattern.  NQP RC QPs in PD 1 (remote read, write
 * and atomic allowed, rq_psn 0x100, path MTU 1024) are connected to
 * ATTACKER_IPV4 with dest QPNs ATTACKER_FIRST_QPN + i.  Three XRC TGT
 * QPs (dest QPNs ATTACKER_FIRST_QPN + NQP + k, same PSNs) share an XRC
 * domain with an XRC SRQ in PD 1; a second domain has an SRQ of its own.
 *
 * Prints one "info ..." line and one "xrc ..." line (TGT QPNs, the two
 * SRQ numbers), then waits for stdin to close; then prints
 * "region NAME changed=N" for every region and guard (bytes that differ
 * from the initial pattern) and "re_head HEX" (the first 16 bytes of RE),
 * and exits 0.  With UROCE_STATS=1 the library adds its counters on
 * stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/qp_setup.h"

#define PAGE 4096
#define RLEN PAGE /* every region is one page */
#define NTGT 3	  /* XRC TGT QPs */

enum {
	R_GUARD0,
	R_W,
	R_GUARD1,
	R_RO,
	R_GUARD2,
	R_B,
	R_GUARD3,
	R_DEAD,
	R_GUARD4,
	R_RE,
	R_GUARD5,
	R_NUM
};

static const char *const rname[R_NUM] = {
	"guard0", "W",	  "guard1", "RO", "guard2", "B",
	"guard3", "DEAD", "guard4", "RE", "guard5",
};

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + 7);
}

static void die(const char *what)
{
	fprintf(stderr, "hostile_target: %s failed\n", what);
	exit(1);
}

/* INIT, then RTR towards the prober's QP dqpn at GID peer */
static void to_rtr(struct ibv_qp *qp, int access, uint32_t dqpn,
		   const union ibv_gid *peer)
{
	const char *failed = uroce_test_to_rtr(qp, (unsigned int)access, dqpn,
					       peer);

	if (failed)
		die(failed);
}

int main(int argc, char **argv)
{
	const int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *mw, *mro, *mb, *mdead, *mre;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd1, *pd2;
	struct ibv_cq *cq;
	struct ibv_qp **qps, *tgt[NTGT];
	struct ibv_srq *xsrq, *xsrq2;
	uint32_t xsrqn, xsrqn2;
	union ibv_gid peer;
	uint32_t dead_rkey, re_old, first_qpn;
	uint8_t *mem;
	char buf[64];
	size_t i;
	int nqp, q;

	if (argc != 4) {
		fprintf(stderr, "usage: hostile_target IPV4 FIRST_QPN NQP\n");
		return 2;
	}
	memset(&peer, 0, sizeof(peer));
	peer.raw[10] = peer.raw[11] = 0xff;
	if (inet_pton(AF_INET, argv[1], &peer.raw[12]) != 1)
		die("parsing the attacker address");
	first_qpn = (uint32_t)strtoul(argv[2], NULL, 0);
	nqp = atoi(argv[3]);
	if (nqp < 1 || nqp > 64)
		die("NQP");

	mem = mmap(NULL, (size_t)R_NUM * RLEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	for (i = 0; i < (size_t)R_NUM * RLEN; i++)
		mem[i] = pattern(i);

	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	pd1 = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!pd1 || !pd2 || !cq)
		die("PD/CQ");
	mw = ibv_reg_mr(pd1, mem + R_W * RLEN, RLEN, full);
	mro = ibv_reg_mr(pd1, mem + R_RO * RLEN, RLEN, IBV_ACCESS_REMOTE_READ);
	mb = ibv_reg_mr(pd2, mem + R_B * RLEN, RLEN, full);
	mdead = ibv_reg_mr(pd1, mem + R_DEAD * RLEN, RLEN, full);
	mre = ibv_reg_mr(pd1, mem + R_RE * RLEN, RLEN, full);
	if (!mw || !mro || !mb || !mdead || !mre)
		die("ibv_reg_mr");
	dead_rkey = mdead->rkey;
	re_old = mre->rkey;
	if (ibv_dereg_mr(mdead) || ibv_dereg_mr(mre))
		die("ibv_dereg_mr");
	mre = ibv_reg_mr(pd1, mem + R_RE * RLEN, RLEN, full);
	if (!mre)
		die("ibv_reg_mr again");

	qps = calloc((size_t)nqp, sizeof(*qps));
	for (q = 0; q < nqp; q++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4,
				 .max_recv_wr = 4,
				 .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};

		qps[q] = ibv_create_qp(pd1, &ia);
		if (!qps[q])
			die("ibv_create_qp");
		to_rtr(qps[q], full, first_qpn + (uint32_t)q, &peer);
		if (uroce_test_to_rts(qps[q], 14, 0x200, 1))
			die("RTS");
	}

	/* XRC: TGT QPs (peer QPNs first_qpn + nqp + k) in a domain with an
	 * XRC SRQ in PD 1, and a second domain with an SRQ of its own */
	{
		struct ibv_xrcd_init_attr xa = {
			.comp_mask = IBV_XRCD_INIT_ATTR_FD |
				     IBV_XRCD_INIT_ATTR_OFLAGS,
			.fd = -1,
			.oflags = O_CREAT,
		};
		struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
		struct ibv_xrcd *xrcd2 = ibv_open_xrcd(ctx, &xa);
		struct ibv_srq_init_attr_ex sa = {
			.attr = { .max_wr = 4, .max_sge = 1 },
			.comp_mask = IBV_SRQ_INIT_ATTR_TYPE |
				     IBV_SRQ_INIT_ATTR_PD |
				     IBV_SRQ_INIT_ATTR_XRCD |
				     IBV_SRQ_INIT_ATTR_CQ,
			.srq_type = IBV_SRQT_XRC,
			.pd = pd1,
			.cq = cq,
		};
		int k;

		if (!xrcd || !xrcd2)
			die("ibv_open_xrcd");
		sa.xrcd = xrcd;
		xsrq = ibv_create_srq_ex(ctx, &sa);
		sa.xrcd = xrcd2;
		xsrq2 = ibv_create_srq_ex(ctx, &sa);
		if (!xsrq || !xsrq2 || ibv_get_srq_num(xsrq, &xsrqn) ||
		    ibv_get_srq_num(xsrq2, &xsrqn2))
			die("XRC SRQ");
		for (k = 0; k < NTGT; k++) {
			struct ibv_qp_init_attr_ex ia = {
				.qp_type = IBV_QPT_XRC_RECV,
				.comp_mask = IBV_QP_INIT_ATTR_XRCD,
				.xrcd = xrcd,
			};
			struct ibv_qp_attr a;

			tgt[k] = ibv_create_qp_ex(ctx, &ia);
			if (!tgt[k])
				die("TGT QP");
			to_rtr(tgt[k], full, first_qpn + (uint32_t)(nqp + k),
			       &peer);
			memset(&a, 0, sizeof(a));
			a.qp_state = IBV_QPS_RTS;
			a.timeout = 14;
			a.sq_psn = 0x200;
			if (ibv_modify_qp(tgt[k], &a,
					  IBV_QP_STATE | IBV_QP_TIMEOUT |
						  IBV_QP_SQ_PSN))
				die("TGT RTS");
		}
	}

	printf("info qpn=%u nqp=%d w_addr=%" PRIu64 " w_rkey=%u ro_addr=%" PRIu64
	       " ro_rkey=%u b_addr=%" PRIu64 " b_rkey=%u dead_addr=%" PRIu64
	       " dead_rkey=%u re_addr=%" PRIu64 " re_old=%u re_new=%u\n",
	       qps[0]->qp_num, nqp, (uint64_t)(uintptr_t)mw->addr, mw->rkey,
	       (uint64_t)(uintptr_t)mro->addr, mro->rkey,
	       (uint64_t)(uintptr_t)mb->addr, mb->rkey,
	       (uint64_t)(uintptr_t)(mem + R_DEAD * RLEN), dead_rkey,
	       (uint64_t)(uintptr_t)mre->addr, re_old, mre->rkey);
	printf("xrc tgt0=%u tgt1=%u tgt2=%u srqn=%u srqn_other=%u\n",
	       tgt[0]->qp_num, tgt[1]->qp_num, tgt[2]->qp_num, xsrqn, xsrqn2);
	fflush(stdout);
	for (q = 1; q < nqp; q++)
		if (qps[q]->qp_num != qps[0]->qp_num + (uint32_t)q)
			die("consecutive QPNs");

	while (read(0, buf, sizeof(buf)) > 0)
		;
	/* a verb that takes the engine lock orders the progress thread's
	 * remote WRITEs before our reads (what polling a CQ does in a real
	 * program; TSan checks it) */
	for (q = 0; q < nqp; q++) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;

		if (ibv_query_qp(qps[q], &qa, IBV_QP_STATE, &qia))
			die("ibv_query_qp");
	}

	for (q = 0; q < R_NUM; q++) {
		size_t changed = 0;

		for (i = (size_t)q * RLEN; i < (size_t)(q + 1) * RLEN; i++)
			changed += mem[i] != pattern(i);
		printf("region %s changed=%zu\n", rname[q], changed);
	}
	printf("re_head ");
	for (i = 0; i < 16; i++)
		printf("%02x", mem[R_RE * RLEN + i]);
	printf("\n");
	for (q = 0; q < nqp; q++)
		if (ibv_destroy_qp(qps[q]))
			die("ibv_destroy_qp");
	ibv_dereg_mr(mw);
	ibv_dereg_mr(mro);
	ibv_dereg_mr(mb);
	ibv_dereg_mr(mre);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd1);
	ibv_dealloc_pd(pd2);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(qps);
	printf("done\n");
	return 0;
}
