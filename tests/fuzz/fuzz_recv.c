// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness on the receive path: packet parsing, the responder
 * and the completer, with real MRs registered, driven through uroce_recv
 * with a fake packet IO (dev->net.io) that checks and swallows every answer.
 *
 * Input: a sequence of datagrams, each [flags][len lo][len hi][len bytes].
 * flags bit 0: the bytes carry their own ICRC (else one is appended, so
 * the fuzzer gets past the check); bit 1: sent from an address that is
 * not the QP's peer.  To let the fuzzer reach real memory without
 * knowing the random keys, an rkey (RETH/AtomicETH/IETH) below 4 is
 * replaced with the key of MR n, a virtual address below 64 KiB is taken
 * relative to that MR, and destination QPN 0 means our RC QP.  Every
 * other value goes through raw.
 *
 * Oracles: ASan/UBSan, every answer the engine sends must parse, and
 * after each input the guard pages, the read-only MR and the MR of the
 * other PD must be byte-identical to their initial pattern.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dev.h"
#include "../lib/qp_setup.h"

#define PAGE  4096
#define PEER  "127.0.79.2"
#define OTHER "127.0.79.3"
#define LOCAL "127.0.79.1"

enum {
	G0,
	R_W,
	G1,
	R_RO,
	G2,
	R_B,
	G3,
	R_LOCAL,
	G4,
	NREG
};
/* regions that no packet may change */
static const int frozen[] = { G0, G1, R_RO, G2, R_B, G3, G4 };

static struct uroce_dev *dev;
static struct ibv_context *ctx;
static struct ibv_pd *pd1, *pd2;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr[4];
static uint8_t *mem;
static struct sockaddr_storage s_peer, s_other, s_local;
static unsigned long answers;

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 167 + 3);
}

static void die(const char *what)
{
	fprintf(stderr, "fuzz_recv: %s failed\n", what);
	abort();
}

static void set_addr(struct sockaddr_storage *ss, const char *a)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(UROCE_UDP_PORT);
	inet_pton(AF_INET, a, &in->sin_addr);
}

/* Every answer must be a well-formed RoCE packet of a known opcode. */
static int fake_send(struct uroce_dev *d, const struct sockaddr_storage *dst,
		     struct uroce_ipopt ip, const struct iovec *iov, int iovcnt)
{
	uint8_t first[UROCE_BTH_LEN];
	size_t len = 0, got = 0;
	int i;

	(void)d;
	(void)dst;
	(void)ip;
	for (i = 0; i < iovcnt; i++) {
		size_t n = iov[i].iov_len;

		if (got < sizeof(first)) {
			size_t c = n < sizeof(first) - got ? n :
							     sizeof(first) - got;

			memcpy(first + got, iov[i].iov_base, c);
			got += c;
		}
		/* touch every byte: ASan checks the engine's iovecs */
		if (n)
			(void)*(volatile const uint8_t *)((const uint8_t *)iov[i]
								  .iov_base +
							  n - 1);
		len += n;
	}
	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN || got < UROCE_BTH_LEN ||
	    !uroce_opcode[bth_opcode(first)].name ||
	    len < uroce_opcode[bth_opcode(first)].length + (size_t)UROCE_ICRC_LEN)
		die("a malformed answer");
	answers++;
	return 0;
}

static const struct uroce_pkt_io fake_io = { .send = fake_send };

static void connect_qp(void)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;
	const char *failed;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("RESET");
	uroce_gid_from_addr(&s_peer, &gid);
	failed = uroce_test_to_rtr(qp,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ |
					   IBV_ACCESS_REMOTE_ATOMIC,
				   0x77, &gid);
	if (failed)
		die(failed);
	/* timeout 0: no retransmission timer, deterministic */
	if (uroce_test_to_rts(qp, 0, 0x200, 4))
		die("RTS");
}

/* Receives for SENDs, and a READ and a WRITE for responses to answer. */
static void post_work(void)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(mem + R_LOCAL * PAGE),
			       .length = 2048,
			       .lkey = mr[3]->lkey };
	struct ibv_recv_wr rwr = { .sg_list = &sge, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .sg_list = &sge,
				   .num_sge = 1,
				   .send_flags = IBV_SEND_SIGNALED },
			   *sbad;
	struct ibv_wc wc[16];

	if (ibv_post_recv(qp, &rwr, &rbad) || ibv_post_recv(qp, &rwr, &rbad))
		die("ibv_post_recv");
	swr.opcode = IBV_WR_RDMA_READ;
	swr.wr.rdma.remote_addr = 0x10000;
	swr.wr.rdma.rkey = 0x1234;
	if (ibv_post_send(qp, &swr, &sbad))
		die("ibv_post_send READ");
	sge.length = 64;
	swr.opcode = IBV_WR_RDMA_WRITE;
	if (ibv_post_send(qp, &swr, &sbad))
		die("ibv_post_send WRITE");
	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_qp_init_attr ia;
	struct ibv_device **list;
	size_t i;

	(void)argc;
	(void)argv;
	setenv("UROCE_ADDR", LOCAL, 0);
	set_addr(&s_peer, PEER);
	set_addr(&s_other, OTHER);
	set_addr(&s_local, LOCAL);
	mem = mmap(NULL, NREG * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap");
	for (i = 0; i < NREG * PAGE; i++)
		mem[i] = pattern(i);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		die("ibv_open_device");
	pd1 = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
	if (!pd1 || !pd2 || !cq)
		die("PD/CQ");
	mr[0] = ibv_reg_mr(pd1, mem + R_W * PAGE, PAGE, full);
	mr[1] = ibv_reg_mr(pd1, mem + R_RO * PAGE, PAGE, IBV_ACCESS_REMOTE_READ);
	mr[2] = ibv_reg_mr(pd2, mem + R_B * PAGE, PAGE, full);
	mr[3] = ibv_reg_mr(pd1, mem + R_LOCAL * PAGE, PAGE, full);
	if (!mr[0] || !mr[1] || !mr[2] || !mr[3])
		die("ibv_reg_mr");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd1, &ia);
	if (!qp)
		die("ibv_create_qp");
	dev = uroce_dev_get();
	pthread_mutex_lock(&dev->lock);
	dev->net.io = &fake_io;
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

static void fix_key(uint8_t *p, bool has_va)
{
	uint32_t key = uroce_rd_be32(p + 8);
	uint64_t va;

	if (key >= 4)
		return;
	uroce_wr_be32(p + 8, mr[key]->rkey);
	if (!has_va)
		return;
	va = uroce_rd_be64(p);
	if (va < 0x10000)
		uroce_wr_be64(p, va + (uintptr_t)mr[key]->addr);
}

/* The substitutions described at the top. */
static void rewrite(uint8_t *p, size_t len)
{
	const struct uroce_opcode_info *info = &uroce_opcode[p[0]];

	if (len < UROCE_BTH_LEN)
		return;
	if (bth_qpn(p) == 0)
		uroce_wr_be24(p + 5, qp->qp_num);
	if (!info->name || len < info->length)
		return;
	if (info->mask & UROCE_M_RETH)
		fix_key(p + info->offset[UROCE_HDR_RETH], true);
	if (info->mask & UROCE_M_ATMETH)
		fix_key(p + info->offset[UROCE_HDR_ATMETH], true);
	if (info->mask & UROCE_M_IETH) {
		uint32_t key = uroce_rd_be32(p + info->offset[UROCE_HDR_IETH]);

		if (key < 4)
			uroce_wr_be32(p + info->offset[UROCE_HDR_IETH],
				      mr[key]->rkey);
	}
}

static void send_one(uint8_t flags, const uint8_t *data, size_t len)
{
	const struct sockaddr_storage *src = flags & 2 ? &s_other : &s_peer;
	uint8_t *p = malloc(len + UROCE_ICRC_LEN + 1);

	if (!p)
		die("malloc");
	memcpy(p, data, len);
	rewrite(p, len);
	if (!(flags & 1)) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)src;
		struct uroce_icrc_ip ip;
		struct iovec iov = { .iov_base = p, .iov_len = len };

		memset(&ip, 0, sizeof(ip));
		ip.family = AF_INET;
		ip.src.v4 = s->sin_addr;
		ip.dst.v4 = ((const struct sockaddr_in *)&s_local)->sin_addr;
		ip.df = true;
		ip.sport = UROCE_UDP_PORT;
		ip.dport = UROCE_UDP_PORT;
		uroce_icrc_store(p + len, uroce_icrc_compute(&ip, &iov, 1));
		len += UROCE_ICRC_LEN;
	}
	uroce_recv(dev, p, len, src, &s_local, 0);
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ibv_wc wc[16];
	size_t k, i;

	connect_qp();
	post_work();
	while (size >= 3) {
		uint8_t flags = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		send_one(flags, data, len);
		data += len;
		size -= len;
	}
	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
	for (k = 0; k < sizeof(frozen) / sizeof(frozen[0]); k++)
		for (i = (size_t)frozen[k] * PAGE;
		     i < (size_t)(frozen[k] + 1) * PAGE; i++)
			if (mem[i] != pattern(i)) {
				fprintf(stderr,
					"fuzz_recv: byte %zu of region "
					"%d changed: memory an rkey does not "
					"grant was written\n",
					i % PAGE, frozen[k]);
				abort();
			}
	return 0;
}
