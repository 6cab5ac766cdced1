// SPDX-License-Identifier: MIT
/*
 * Orderly device teardown (issue 12): the last ibv_close_device takes the
 * device down (progress and snapshot threads stopped, ACKs and queued
 * packets sent, sockets closed, the stats segment removed), and the next
 * ibv_open_device brings it up again, working.
 *
 * Each of CYCLES rounds opens the device, sends one message between two
 * RC QPs of this process over the loopback (so the progress thread, the
 * socket and the engine really ran), checks the segment exists, closes
 * everything, and then asserts that the threads (/proc/self/task), the
 * descriptors (/proc/self/fd) and /dev/shm/uroce.<pid> are what they were
 * before the first open.  A last round runs in a child that exits with the
 * device open: exit must take it down too (no hang, segment removed).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/qp_setup.h"

#define CYCLES	20
#define MSG_LEN 64
#define POLL_MS 5000

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "teardown: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* entries of a /proc directory, without . and .. (the DIR's own fd is
 * counted the same way every time) */
static int count_dir(const char *path)
{
	struct dirent *e;
	DIR *d = opendir(path);
	int n = 0;

	if (!d)
		die("opendir %s: %s", path, strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static int segment_exists(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/dev/shm/uroce.%d", (int)pid);
	return access(path, F_OK) == 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void poll_one(struct ibv_cq *cq, enum ibv_wc_opcode op, const char *what)
{
	uint64_t until = now_ms() + POLL_MS;
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (now_ms() > until)
			die("%s: no completion in %d ms", what, POLL_MS);
	if (n < 0)
		die("%s: ibv_poll_cq failed", what);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != op)
		die("%s: status %s, opcode %d", what,
		    ibv_wc_status_str(wc.status), (int)wc.opcode);
}

/* open the device, move one message between two of its QPs; closes
 * everything unless keep_open */
static void one_round(struct ibv_device *dev, int round, int keep_open)
{
	char src[MSG_LEN], dst[MSG_LEN];
	struct ibv_context *ctx;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ms, *md;
	struct ibv_sge sge;
	struct ibv_send_wr swr, *bad_s;
	struct ibv_recv_wr rwr, *bad_r;
	union ibv_gid gid;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	const char *st;

	ctx = ibv_open_device(dev);
	if (!ctx)
		die("round %d: ibv_open_device: %s", round, strerror(errno));
	if (!segment_exists(getpid()))
		die("round %d: no stats segment while the device is open",
		    round);
	if (ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq)
		die("pd/cq");
	qa = uroce_test_qp(pd, cq, IBV_QPT_RC, 4);
	qb = uroce_test_qp(pd, cq, IBV_QPT_RC, 4);
	if (!qa || !qb)
		die("create_qp");
	st = uroce_test_to_rtr(qa, 0, qb->qp_num, &gid);
	if (!st)
		st = uroce_test_to_rtr(qb, IBV_ACCESS_LOCAL_WRITE, qa->qp_num,
				       &gid);
	if (st)
		die("round %d: QP to %s", round, st);
	if (uroce_test_to_rts(qa, 14, 0x100, 4))
		die("round %d: QP to RTS", round);

	memset(src, 'a' + round % 26, sizeof(src));
	memset(dst, 0, sizeof(dst));
	ms = ibv_reg_mr(pd, src, sizeof(src), 0);
	md = ibv_reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE);
	if (!ms || !md)
		die("reg_mr");
	sge.addr = (uintptr_t)dst;
	sge.length = sizeof(dst);
	sge.lkey = md->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 2;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(qb, &rwr, &bad_r))
		die("post_recv");
	{
		struct ibv_sge s = { (uintptr_t)src, sizeof(src), ms->lkey };

		memset(&swr, 0, sizeof(swr));
		swr.wr_id = 1;
		swr.sg_list = &s;
		swr.num_sge = 1;
		swr.opcode = IBV_WR_SEND;
		swr.send_flags = IBV_SEND_SIGNALED;
		if (ibv_post_send(qa, &swr, &bad_s))
			die("post_send");
		/* both ends are ours: a receive and a send completion */
		poll_one(cq, IBV_WC_RECV, "receive");
		poll_one(cq, IBV_WC_SEND, "send");
	}
	if (memcmp(src, dst, sizeof(src)))
		die("round %d: the message arrived changed", round);
	if (keep_open)
		return;
	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qb) || ibv_dereg_mr(ms) ||
	    ibv_dereg_mr(md) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		die("destroy");
	if (ibv_close_device(ctx))
		die("ibv_close_device");
}

static void *nothing(void *arg)
{
	return arg;
}

int main(void)
{
	struct ibv_device **list;
	int tasks0, fds0, round, status;
	pid_t child;

	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("no device");
	if (segment_exists(getpid()))
		die("a stats segment before the device was opened");
	/* a sanitizer's runtime starts a thread of its own at the first
	 * pthread_create: let that happen before counting */
	{
		pthread_t t;

		if (pthread_create(&t, NULL, nothing, NULL) ||
		    pthread_join(t, NULL))
			die("pthread_create");
	}
	tasks0 = count_dir("/proc/self/task");
	fds0 = count_dir("/proc/self/fd");
	for (round = 0; round < CYCLES; round++) {
		int tasks, fds;

		one_round(list[0], round, 0);
		tasks = count_dir("/proc/self/task");
		fds = count_dir("/proc/self/fd");
		if (tasks != tasks0)
			die("round %d: %d threads after the last close, %d before "
			    "the first open",
			    round, tasks, tasks0);
		if (fds != fds0)
			die("round %d: %d descriptors after the last close, %d "
			    "before the first open",
			    round, fds, fds0);
		if (segment_exists(getpid()))
			die("round %d: the stats segment is still there after "
			    "the last close",
			    round);
	}
	printf("teardown: %d open/close rounds: threads %d, descriptors %d, "
	       "no segment left\n",
	       CYCLES, tasks0, fds0);

	/* exit with the device open (and a fresh device: fork before any
	 * open would share nothing live) */
	fflush(stdout);
	child = fork();
	if (child < 0)
		die("fork");
	if (!child) {
		one_round(list[0], CYCLES, 1);
		exit(0);
	}
	if (waitpid(child, &status, 0) != child)
		die("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		die("the child that exited with the device open ended with "
		    "status 0x%x",
		    status);
	if (segment_exists(child))
		die("the stats segment of a process that exited with the "
		    "device open is still there");
	printf("teardown: exit with the device open: clean\n");
	ibv_free_device_list(list);
	return 0;
}
