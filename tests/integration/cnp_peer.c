// SPDX-License-Identifier: MIT
/*
 * A CNP-sending peer played from a plain UDP socket (docs/congestion.md,
 * "ECN and CNPs"): this process runs a uroce RC QP with UROCE_CC=dcqcn
 * that streams RDMA WRITEs to a fake responder, the socket, bound to
 * another loopback address on port 4791.  The fake responder ACKs every
 * packet that asks for one and measures the payload it receives:
 *
 *   1. clean:    no CNP; the data packets must be ECT(0) (IP_RECVTOS);
 *   2. notified: a CNP (opcode 0x81, BECN, our QPN) whenever a packet
 *                arrives and the last CNP is 50 us old, as a DCQCN NIC
 *                behind a marking switch sends them: the rate must fall
 *                below half the clean rate, and every CNP received
 *                must have cut it (cc_rate_cuts = rx_cnp_pkts);
 *   3. recovered: CNPs stop: the QP must be back to the fastest rate it
 *                had before the cuts, unpaced (cc_recovered), or at
 *                least at twice the rate of phase 2 (a QP that phase 2
 *                left unpaced has nothing to recover).
 *
 *   cnp_peer          (exit 0 pass, 1 fail, 77 skip)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../hostile/craft.h"
#include "../lib/qp_setup.h"
#include "uroce_shm.h"

#define MSG_LEN	   65536u
#define NMSG	   16 /* WRITEs kept posted */
#define PHASE_NS   (300 * 1000000ull)
#define CNP_GAP_NS 50000ull

static int sock;
static struct in_addr a_peer, a_dev;
static uint32_t qpn, msn;
static uint64_t bytes, not_ect, cnps;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "cnp_peer: FAIL: %s (%s)\n", what, strerror(errno));
	exit(1);
}

static void send_craft(struct craft *c, bool becn)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons(UROCE_UDP_PORT),
				  .sin_addr = a_dev };
	uint8_t p[CRAFT_MAX];
	size_t len = craft_build(c, p, a_peer, a_dev);

	if (becn) { /* (the header changed: ICRC again) */
		p[1] = 0;
		p[4] |= 0x40;
		len = craft_icrc(p, len - UROCE_ICRC_LEN, a_peer, a_dev);
	}
	sendto(sock, p, len, 0, (struct sockaddr *)&to, sizeof(to));
}

/* Receive what waits; ACK AckReq packets, count payload and ECT, and in
 * the notified phase send CNPs. */
static void serve(bool notify, uint64_t *last_cnp)
{
	uint8_t buf[8192];
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int n;

	for (;;) {
		const struct uroce_opcode_info *info;
		struct cmsghdr *c;
		uint8_t tos = 0;

		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		n = (int)recvmsg(sock, &m, MSG_DONTWAIT);
		if (n < UROCE_BTH_LEN + UROCE_ICRC_LEN)
			return;
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
				tos = *CMSG_DATA(c);
		if ((tos & 3) != 2) /* ECT(0) */
			not_ect++;
		info = &uroce_opcode[bth_opcode(buf)];
		if (!info->name || !(info->mask & UROCE_M_REQ))
			continue;
		bytes += (uint32_t)n - info->length - UROCE_ICRC_LEN;
		if (bth_ackreq(buf)) {
			struct craft ack = { .op = UROCE_OP_RC_ACK,
					     .qpn = qpn,
					     .psn = bth_psn(buf),
					     .syn = 0x1f,
					     .pad = -1 };

			msn++;
			send_craft(&ack, false);
		}
		if (notify && now_ns() - *last_cnp >= CNP_GAP_NS) {
			struct craft cnp = { .op = UROCE_OP_CNP,
					     .qpn = qpn,
					     .pad = 0 };

			send_craft(&cnp, true);
			*last_cnp = now_ns();
			cnps++;
		}
	}
}

/* a phase: keep NMSG WRITEs posted for PHASE_NS; the payload rate of
 * its second half, bytes/s */
static double phase(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		    bool notify, unsigned int *posted)
{
	uint64_t t0 = now_ns(), half = 0, half_bytes = 0, last_cnp = 0, t;
	struct ibv_wc wc[16];
	int i, n;

	while ((t = now_ns()) - t0 < PHASE_NS) {
		while (*posted < NMSG) {
			struct ibv_sge sge = { .addr = (uintptr_t)mr->addr,
					       .length = MSG_LEN,
					       .lkey = mr->lkey };
			struct ibv_send_wr wr = {
				.sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = 0x10000,
					     .rkey = 0x1234 },
			}, *bad;

			if (ibv_post_send(qp, &wr, &bad))
				die("ibv_post_send");
			(*posted)++;
		}
		serve(notify, &last_cnp);
		n = ibv_poll_cq(cq, 16, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr,
					"cnp_peer: FAIL: completion %s\n",
					ibv_wc_status_str(wc[i].status));
				exit(1);
			}
			(*posted)--;
		}
		if (!half && t - t0 >= PHASE_NS / 2) {
			half = t;
			half_bytes = bytes;
		}
	}
	return (double)(bytes - half_bytes) * 1e9 / (double)(t - half);
}

/* our device's counter name, from its stats segment (uroce_shm.h) */
static uint64_t counter(const char *name)
{
	char path[64];
	const struct uroce_shm_hdr *h;
	const _Atomic uint64_t *cnt;
	uint64_t v = UINT64_MAX;
	struct stat st;
	uint32_t i;
	void *m;
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/uroce.%d", (int)getpid());
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		die(path);
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		die("mmap");
	h = m;
	cnt = (const _Atomic uint64_t *)((const char *)m + h->cnt_off);
	for (i = 0; i < h->ncounters; i++)
		if (!strcmp((const char *)m + h->names_off +
				    i * UROCE_SHM_NAME_LEN,
			    name))
			v = atomic_load(&cnt[i]);
	munmap(m, (size_t)st.st_size);
	if (v == UINT64_MAX) {
		fprintf(stderr, "cnp_peer: FAIL: no counter %s\n", name);
		exit(1);
	}
	return v;
}

static int bind_peer(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(UROCE_UDP_PORT) };
	int one = 1, buf = 8 << 20, i;

	sock = socket(AF_INET, SOCK_DGRAM, 0);
	if (sock < 0)
		die("socket");
	setsockopt(sock, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	/* a loopback address of our own (127.81.0.x), away from where
	 * devices start and from 127.77.0.1, where integration.local_far
	 * sends to nobody */
	for (i = 1; i < 250; i++) {
		sin.sin_addr.s_addr = htonl(0x7f510000u | (uint32_t)i);
		if (!bind(sock, (struct sockaddr *)&sin, sizeof(sin))) {
			a_peer = sin.sin_addr;
			return 0;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 64,
						.max_recv_wr = 1,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_port_attr port;
	union ibv_gid gid, dgid;
	unsigned int posted = 0;
	double clean, notified, recovered;
	uint64_t cuts, rx_cnps, freed, freed2;
	void *mem;

	/* the library reads its settings when it is loaded */
	if (argc < 2 || strcmp(argv[1], "--cc")) {
		char *args[] = { argv[0], "--cc", NULL };

		setenv("UROCE_CC", "dcqcn", 1);
		execv("/proc/self/exe", args);
		die("execv");
	}
	if (bind_peer()) {
		printf("cnp_peer: SKIP: no free loopback address\n");
		return 77;
	}
	list = ibv_get_device_list(NULL);
	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		die("ibv_open_device");
	ibv_free_device_list(list);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	mem = calloc(1, MSG_LEN);
	if (!pd || !cq || !mem)
		die("PD/CQ");
	mr = ibv_reg_mr(pd, mem, MSG_LEN, IBV_ACCESS_LOCAL_WRITE);
	qa.send_cq = qa.recv_cq = cq;
	qp = ibv_create_qp(pd, &qa);
	if (!mr || !qp || ibv_query_port(ctx, 1, &port) ||
	    ibv_query_gid(ctx, 1, 0, &gid))
		die("MR/QP");
	memcpy(&a_dev, &gid.raw[12], 4);
	qpn = qp->qp_num;
	memset(&dgid, 0, sizeof(dgid));
	dgid.raw[10] = dgid.raw[11] = 0xff;
	memcpy(&dgid.raw[12], &a_peer, 4);
	if (uroce_test_to_rtr(qp, 0, 0x42, &dgid) ||
	    uroce_test_to_rts(qp, 14, 0x100, 1))
		die("connect");

	clean = phase(qp, cq, mr, false, &posted);
	notified = phase(qp, cq, mr, true, &posted);
	freed2 = counter("cc_recovered");
	recovered = phase(qp, cq, mr, false, &posted);
	cuts = counter("cc_rate_cuts");
	rx_cnps = counter("rx_cnp_pkts");
	freed = counter("cc_recovered") - freed2;
	printf("cnp_peer: clean %.0f Mbit/s, with CNPs %.0f Mbit/s (%llu "
	       "CNPs sent, %llu received, %llu rate cuts), after %.0f Mbit/s"
	       " (recovered %llu); %llu packets not ECT(0)\n",
	       clean * 8 / 1e6, notified * 8 / 1e6, (unsigned long long)cnps,
	       (unsigned long long)rx_cnps, (unsigned long long)cuts,
	       recovered * 8 / 1e6, (unsigned long long)freed,
	       (unsigned long long)not_ect);
	if (not_ect) {
		printf("cnp_peer: FAIL: packets without ECT(0)\n");
		return 1;
	}
	if (!cuts || cuts != rx_cnps) {
		printf("cnp_peer: FAIL: not every CNP cut the rate\n");
		return 1;
	}
	/* the machine's load moves the clean rate 5x between runs: the
	 * bound is loose, the CNPs' effect is not */
	if (!(notified < clean / 2)) {
		printf("cnp_peer: FAIL: the CNPs did not slow the QP down\n");
		return 1;
	}
	if (!freed && !(recovered > 2 * notified)) {
		printf("cnp_peer: FAIL: the rate did not recover\n");
		return 1;
	}
	printf("cnp_peer: PASS\n");
	return 0;
}
