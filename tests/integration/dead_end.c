// SPDX-License-Identifier: MIT
/*
 * An RC QP whose peer is on its device's own address but can never answer
 * it is legal (ibv_modify_qp succeeds, as on a NIC), and uroce says so
 * once on stderr when it enters RTS (verbs/qp.c dead_end): two network
 * namespaces that both took the default 127.0.0.1 end there, and
 * ib_write_bw otherwise reports 0.00 MB/s and nothing else
 * (integration.default_addr_2ns runs that).  Each case in a child of its
 * own, its stderr in a file read back here:
 *
 *   - connected to itself, send PSN 0x200 where it expects 0x100: said;
 *   - to a QP number no QP of the address has: said;
 *   - connected to itself with equal PSNs (a working loop): nothing;
 *   - two QPs of this process connected to each other: nothing.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/qp_setup.h"

enum peer {
	SELF_BAD_PSN,
	NOBODY,
	SELF_SAME_PSN,
	OTHER
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "dead_end: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp *qp = uroce_test_qp(pd, cq, IBV_QPT_RC, 4);

	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	return qp;
}

/* the case, in this (child) process: 0 when every modify succeeded */
static int run_case(enum peer peer)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp, *other;
	union ibv_gid gid;
	const char *bad;
	uint32_t dqpn;

	if (!list || !list[0])
		die("no device");
	ctx = ibv_open_device(list[0]);
	if (!ctx || ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_open_device / ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	if (!pd || !cq)
		die("ibv_alloc_pd / ibv_create_cq");
	qp = rc_qp(pd, cq);
	other = rc_qp(pd, cq);
	switch (peer) {
	case SELF_BAD_PSN:
	case SELF_SAME_PSN:
		dqpn = qp->qp_num;
		break;
	case NOBODY: /* (a number the device gave no QP: not ours) */
		dqpn = other->qp_num + 0x100;
		break;
	default:
		dqpn = other->qp_num;
		break;
	}
	bad = uroce_test_to_rtr(qp, IBV_ACCESS_REMOTE_WRITE, dqpn, &gid);
	if (bad)
		die("to %s: %s", bad, strerror(errno));
	/* (uroce_test_to_rtr's receive PSN is 0x100) */
	if (uroce_test_to_rts(qp, 14, peer == SELF_SAME_PSN ? 0x100 : 0x200, 1))
		die("to RTS: %s", strerror(errno));
	ibv_destroy_qp(other);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

/* run the case in a child with stderr in a file; what it said */
static char *said(enum peer peer)
{
	static char buf[4096];
	FILE *f = tmpfile();
	int st;
	size_t n;
	pid_t pid;

	if (!f)
		die("tmpfile: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		dup2(fileno(f), 2);
		_exit(run_case(peer));
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		die("case %d: the child failed (status %#x)", peer, st);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void expect(enum peer peer, const char *what, const char *want)
{
	const char *s = said(peer);
	const char *msg = strstr(s, "uroce: QP ");

	if (want && (!msg || !strstr(msg, want) ||
		     !strstr(msg, "so it can complete nothing")))
		die("%s: not said (\"%s\" wanted), stderr: %s", what, want, s);
	if (want && strstr(msg + 1, "uroce: QP "))
		die("%s: said more than once: %s", what, s);
	if (!want && strstr(s, "complete nothing"))
		die("%s: said, where the QP works: %s", what, s);
	printf("dead_end: PASS: %s\n", what);
}

int main(void)
{
	expect(SELF_BAD_PSN, "connected to itself, PSNs differ",
	       "is connected to itself with a send PSN it does not expect");
	expect(NOBODY, "connected to a QP number nobody has",
	       "is connected to a QP number that no QP at its own address has");
	expect(SELF_SAME_PSN, "connected to itself, equal PSNs", NULL);
	expect(OTHER, "two QPs of one process", NULL);
	return 0;
}
