// SPDX-License-Identifier: MIT
/*
 * chan_events - completion channels and the async event fd behave as the
 * kernel's uverbs descriptors do (docs/events.md).
 *
 *   chan_events pingpong [-t rc|uc|ud] [-n N] [-w get|poll] [-f]
 *   chan_events semantics
 *
 * pingpong: two QPs, A and B, each with its own CQ on its own completion
 * channel, bounce a message N times.  Each side sleeps for every message
 * the way event-driven programs do: get the event, ack it, re-arm, then
 * poll until the CQ is empty, and only then wait again (-w get: in
 * ibv_get_cq_event; -w poll: in poll(2) on the channel's fd, made
 * O_NONBLOCK, then ibv_get_cq_event, which must not fail).  The two QPs
 * belong to one device, driven by two threads of one process, or with -f
 * to two processes (two devices; the same-host path between them, or
 * UDP with UROCE_LOCAL=0).  A wake-up that never comes is a hang: every
 * wait is bounded by HANG_S and a run that reaches it fails, saying who
 * waited for what.
 *
 * semantics: one process, one device, the rules a program can see:
 *   - a fresh channel's fd is not readable; with O_NONBLOCK
 *     ibv_get_cq_event fails with EAGAIN, as the uverbs fd does;
 *   - an armed CQ that gets completions raises exactly one event; the
 *     fd is readable while it is queued and not after it is read;
 *   - completions of a CQ that is not armed raise none;
 *   - a solicited-only arm ignores an unsolicited receive and fires on a
 *     solicited one;
 *   - two threads waiting on one channel for two CQs both wake;
 *   - ibv_destroy_cq waits for the events it handed out to be acked;
 *   - the async fd likewise honours O_NONBLOCK.
 * Waits for something that must happen are bounded by HANG_S; checks
 * that something did not happen look after the thing that would have
 * caused it is complete (its completion polled), never after a sleep,
 * except the destroy check, which can only show that destroy is still
 * waiting by waiting a little.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define MSG    64
#define RQ     16
#define HANG_S 20
#define QKEY   0x11111111u

static const char *who = "chan_events";

static void die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: FAIL: ", who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static enum ibv_qp_type qp_type = IBV_QPT_UD;
static int iters = 2000;
static bool wait_poll;

/* ---- one end: a QP with its own CQ and channel ---- */

struct end {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	uint8_t *buf; /* RQ receive slots (+40 for a GRH), then send */
	uint32_t qpn;
	union ibv_gid gid;
	uint32_t peer_qpn;
	uint64_t events;
};

#define SLOT (MSG + 40)

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])))
		die("no device");
	ibv_free_device_list(list);
	return ctx;
}

static void post_recv(struct end *e, int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)e->buf + (size_t)slot * SLOT,
		.length = SLOT,
		.lkey = e->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)slot,
				  .sg_list = &sge,
				  .num_sge = 1 },
			   *bad;

	if (ibv_post_recv(e->qp, &wr, &bad))
		die("%s: post_recv", e->name);
}

static void end_open(struct end *e, struct ibv_context *ctx, struct ibv_pd *pd,
		     const char *name)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = qp_type,
		.cap = { .max_send_wr = 4,
			 .max_recv_wr = RQ,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	int i;

	e->name = name;
	e->ctx = ctx;
	e->pd = pd;
	e->ch = ibv_create_comp_channel(ctx);
	if (!e->ch)
		die("%s: create_comp_channel", name);
	e->cq = ibv_create_cq(ctx, 2 * RQ + 8, e, e->ch, 0);
	e->buf = calloc(RQ + 1, SLOT);
	if (!e->cq || !e->buf ||
	    !(e->mr = ibv_reg_mr(pd, e->buf, (RQ + 1) * SLOT,
				 IBV_ACCESS_LOCAL_WRITE)))
		die("%s: resources", name);
	qa.send_cq = qa.recv_cq = e->cq;
	e->qp = ibv_create_qp(pd, &qa);
	if (!e->qp)
		die("%s: create_qp", name);
	if (qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(e->qp, &a, mask))
		die("%s: QP to INIT", name);
	if (ibv_query_gid(ctx, 1, 0, &e->gid))
		die("%s: GID", name);
	e->qpn = e->qp->qp_num;
	for (i = 0; i < RQ; i++)
		post_recv(e, i);
}

static void end_connect(struct end *e, uint32_t qpn, const union ibv_gid *gid)
{
	struct ibv_ah_attr ah = {
		.is_global = 1,
		.port_num = 1,
		.grh = { .dgid = *gid, .hop_limit = 64 },
	};
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE;

	e->peer_qpn = qpn;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qpn;
		a.rq_psn = 0x200;
		a.ah_attr = ah;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if (ibv_modify_qp(e->qp, &a, mask))
		die("%s: QP to RTR", e->name);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x200;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(e->qp, &a, mask))
		die("%s: QP to RTS", e->name);
	if (qp_type == IBV_QPT_UD && !(e->ah = ibv_create_ah(e->pd, &ah)))
		die("%s: create_ah", e->name);
}

/* the AH a UD end made in end_connect (the rest stays until exit: the
 * device holds it, the AH only this struct) */
static void end_drop_ah(struct end *e)
{
	if (e->ah && ibv_destroy_ah(e->ah))
		die("%s: destroy_ah", e->name);
	e->ah = NULL;
}

static void post_send(struct end *e, uint64_t seq, unsigned int flags)
{
	uint8_t *p = e->buf + (size_t)RQ * SLOT;
	struct ibv_sge sge = { .addr = (uintptr_t)p,
			       .length = MSG,
			       .lkey = e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = seq, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED | flags,
	}, *bad;

	memcpy(p, &seq, sizeof(seq));
	if (qp_type == IBV_QPT_UD) {
		wr.wr.ud.ah = e->ah;
		wr.wr.ud.remote_qpn = e->peer_qpn;
		wr.wr.ud.remote_qkey = QKEY;
	}
	if (ibv_post_send(e->qp, &wr, &bad))
		die("%s: post_send", e->name);
}

/* ---- waiting for an event ---- */

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		die("fcntl O_NONBLOCK");
}

/* 1 if fd becomes readable within ms, else 0 */
static int readable(int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	int n;

	do
		n = poll(&pf, 1, ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die("poll: %s", strerror(errno));
	return n > 0 && (pf.revents & POLLIN);
}

/*
 * The next event of e's channel, which must be for e's CQ.  A blocking
 * ibv_get_cq_event cannot be bounded, so a watchdog thread (main) bounds
 * the whole run; -w poll waits in poll(2) with the bound itself.
 */
static void get_event(struct end *e, const char *what)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	if (wait_poll && !readable(e->ch->fd, HANG_S * 1000))
		die("%s: no event in %d s waiting for %s (event %llu)", e->name,
		    HANG_S, what, (unsigned long long)e->events);
	if (ibv_get_cq_event(e->ch, &cq, &cq_ctx))
		die("%s: ibv_get_cq_event: %s", e->name, strerror(errno));
	if (cq != e->cq || cq_ctx != e)
		die("%s: an event for another CQ", e->name);
	ibv_ack_cq_events(cq, 1);
	e->events++;
}

/*
 * Wait until want receives have completed (sends are counted and
 * dropped), the way an event loop does: poll until empty, then sleep.
 * The CQ stays armed whenever the thread sleeps.
 */

static void wait_recv(struct end *e, uint64_t *got, uint64_t want,
		      const char *what)
{
	struct ibv_wc wc[4];
	int n, i;

	for (;;) {
		while ((n = ibv_poll_cq(e->cq, 4, wc)) > 0) {
			for (i = 0; i < n; i++) {
				if (wc[i].status != IBV_WC_SUCCESS)
					die("%s: completion %s", e->name,
					    ibv_wc_status_str(wc[i].status));
				if (wc[i].opcode != IBV_WC_RECV)
					continue;
				post_recv(e, (int)wc[i].wr_id);
				++*got;
			}
		}
		if (n < 0)
			die("%s: poll_cq", e->name);
		if (*got >= want)
			return;
		get_event(e, what);
		if (ibv_req_notify_cq(e->cq, 0))
			die("%s: req_notify_cq", e->name);
	}
}

/* A sends first; both answer every message they receive */
static void bounce(struct end *e, bool first)
{
	uint64_t got = 0, sent = 0;
	char what[64];

	if (ibv_req_notify_cq(e->cq, 0))
		die("%s: req_notify_cq", e->name);
	if (first)
		post_send(e, sent++, 0);
	while (got < (uint64_t)iters) {
		snprintf(what, sizeof(what), "message %llu",
			 (unsigned long long)got);
		wait_recv(e, &got, got + 1, what);
		if (sent < (uint64_t)iters)
			post_send(e, sent++, 0);
	}
}

static void *bounce_b(void *arg)
{
	bounce(arg, false);
	return NULL;
}

static void *watchdog(void *arg)
{
	(void)arg;
	sleep(HANG_S * 3);
	fprintf(stderr, "%s: FAIL: not done in %d s: a lost wake-up\n", who,
		HANG_S * 3);
	_exit(1);
}

static void start_watchdog(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, watchdog, NULL))
		die("pthread_create");
	pthread_detach(t);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void prepare(struct end *e)
{
	if (wait_poll)
		set_nonblock(e->ch->fd);
}

struct wire {
	uint32_t qpn;
	union ibv_gid gid;
};

static void xfer(int fd, void *p, size_t len, bool out)
{
	ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) :
			  recv(fd, p, len, MSG_WAITALL);

	if (n != (ssize_t)len)
		die("socketpair %s", out ? "send" : "recv");
}

static int pingpong_fork(void)
{
	int sv[2], status;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair");
	pid = fork();
	if (pid < 0)
		die("fork");
	{
		bool is_a = pid > 0;
		int fd = is_a ? sv[0] : sv[1];
		struct ibv_context *ctx = open_dev();
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct end e;
		struct wire me, them;
		double t0;

		memset(&e, 0, sizeof(e));
		who = is_a ? "chan_events[A]" : "chan_events[B]";
		if (!pd)
			die("alloc_pd");
		end_open(&e, ctx, pd, is_a ? "A" : "B");
		prepare(&e);
		me.qpn = e.qpn;
		me.gid = e.gid;
		xfer(fd, &me, sizeof(me), true);
		xfer(fd, &them, sizeof(them), false);
		end_connect(&e, them.qpn, &them.gid);
		/* both ready before A's first message (UC, UD lose it
		 * otherwise) */
		xfer(fd, &me, 1, true);
		xfer(fd, &them, 1, false);
		start_watchdog();
		t0 = now_us();
		bounce(&e, is_a);
		t0 = now_us() - t0;
		if (!is_a)
			_exit(0);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			die("B failed");
		printf("%s: pingpong %d messages each way, %llu events, "
		       "%.2f us a round trip\n",
		       who, iters, (unsigned long long)e.events, t0 / iters);
		end_drop_ah(&e);
	}
	return 0;
}

static int pingpong(bool forked)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct end a, b;
	pthread_t tb;
	double t0;

	if (forked)
		return pingpong_fork();
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ctx = open_dev();
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("alloc_pd");
	end_open(&a, ctx, pd, "A");
	end_open(&b, ctx, pd, "B");
	prepare(&a);
	prepare(&b);
	end_connect(&a, b.qpn, &b.gid);
	end_connect(&b, a.qpn, &a.gid);
	start_watchdog();
	t0 = now_us();
	if (pthread_create(&tb, NULL, bounce_b, &b))
		die("pthread_create");
	bounce(&a, true);
	pthread_join(tb, NULL);
	t0 = now_us() - t0;
	printf("%s: pingpong %d messages each way, %llu + %llu events, "
	       "%.2f us a round trip\n",
	       who, iters, (unsigned long long)a.events,
	       (unsigned long long)b.events, t0 / iters);
	end_drop_ah(&a);
	end_drop_ah(&b);
	return 0;
}

/* ---- semantics ---- */

/* poll e's CQ until a receive completes (the CQ's arm is left alone) */
static void spin_recv(struct end *e)
{
	time_t until = time(NULL) + HANG_S;
	struct ibv_wc wc;
	int n;

	for (;;) {
		n = ibv_poll_cq(e->cq, 1, &wc);
		if (n < 0)
			die("%s: poll_cq", e->name);
		if (n && wc.status != IBV_WC_SUCCESS)
			die("%s: completion %s", e->name,
			    ibv_wc_status_str(wc.status));
		if (n && wc.opcode == IBV_WC_RECV) {
			post_recv(e, (int)wc.wr_id);
			return;
		}
		if (time(NULL) > until)
			die("%s: no receive in %d s", e->name, HANG_S);
	}
}

/* drain e's CQ of what is left (send completions) */
static void drain(struct end *e)
{
	struct ibv_wc wc[8];

	while (ibv_poll_cq(e->cq, 8, wc) > 0)
		;
}

static void expect_eagain(struct end *e, const char *when)
{
	struct ibv_cq *cq;
	void *ctx;

	if (readable(e->ch->fd, 0))
		die("%s: channel fd readable %s", e->name, when);
	errno = 0;
	if (ibv_get_cq_event(e->ch, &cq, &ctx) != -1 || errno != EAGAIN)
		die("%s: ibv_get_cq_event %s: not -1/EAGAIN (%s)", e->name,
		    when, strerror(errno));
}

struct waiter {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	int err;
};

static _Atomic int woke; /* waiters back from the wait */

static void *wait_one(void *arg)
{
	struct waiter *w = arg;
	void *ctx;

	w->err = ibv_get_cq_event(w->ch, &w->cq, &ctx) ? errno : 0;
	atomic_fetch_add(&woke, 1);
	return NULL;
}

struct destroyer {
	struct ibv_cq *cq;
	_Atomic int done;
};

static void *destroy_it(void *arg)
{
	struct destroyer *d = arg;

	if (ibv_destroy_cq(d->cq))
		die("destroy_cq");
	atomic_store(&d->done, 1);
	return NULL;
}

/* A UD QP on a CQ of one entry gets three messages from a: the CQ
 * overruns and the context gets IBV_EVENT_CQ_ERR. */
static void async_overrun(struct ibv_context *ctx, struct ibv_pd *pd,
			  struct end *a)
{
	bool cq_err = false, qp_fatal = false;
	struct ibv_async_event aev;
	struct end c;
	int i;

	memset(&c, 0, sizeof(c));
	c.name = "C";
	c.ctx = ctx;
	c.pd = pd;
	c.cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	c.buf = calloc(RQ + 1, SLOT);
	if (!c.cq || !c.buf ||
	    !(c.mr = ibv_reg_mr(pd, c.buf, (RQ + 1) * SLOT,
				IBV_ACCESS_LOCAL_WRITE)))
		die("C: resources");
	{
		struct ibv_qp_init_attr qa = {
			.qp_type = IBV_QPT_UD,
			.send_cq = c.cq,
			.recv_cq = c.cq,
			.cap = { .max_send_wr = 1,
				 .max_recv_wr = 4,
				 .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT,
					  .port_num = 1,
					  .qkey = QKEY };

		c.qp = ibv_create_qp(pd, &qa);
		if (!c.qp || ibv_modify_qp(c.qp, &at,
					   IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						   IBV_QP_PORT | IBV_QP_QKEY))
			die("C: QP");
	}
	for (i = 0; i < 3; i++)
		post_recv(&c, i);
	end_connect(&c, a->qpn, &a->gid);
	a->peer_qpn = c.qp->qp_num;
	for (i = 0; i < 3; i++)
		post_send(a, (uint64_t)(40 + i), 0);
	/* CQ_ERR for the CQ, then QP_FATAL for C (the lost completion's
	 * QP goes to the error state); each read while the fd is readable */
	while (!cq_err || !qp_fatal) {
		if (!readable(ctx->async_fd, HANG_S * 1000))
			die("overrun CQ: no %s in %d s",
			    cq_err ? "QP_FATAL" : "CQ_ERR", HANG_S);
		if (ibv_get_async_event(ctx, &aev))
			die("ibv_get_async_event: %s", strerror(errno));
		if (aev.event_type == IBV_EVENT_CQ_ERR && aev.element.cq == c.cq)
			cq_err = true;
		else if (aev.event_type == IBV_EVENT_QP_FATAL &&
			 aev.element.qp == c.qp)
			qp_fatal = true;
		else
			die("unexpected async event %d", aev.event_type);
		ibv_ack_async_event(&aev);
	}
	if (readable(ctx->async_fd, 0))
		die("async fd readable after its one event was read");
	errno = 0;
	if (ibv_get_async_event(ctx, &aev) != -1 || errno != EAGAIN)
		die("ibv_get_async_event after the event: not -1/EAGAIN (%s)",
		    strerror(errno));
	end_drop_ah(&c);
}

static int semantics(void)
{
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_async_event aev;
	struct waiter w1, w2;
	struct destroyer d;
	struct end a, b;
	pthread_t t1, t2;
	struct ibv_cq *cq;
	void *cctx;
	int i;

	qp_type = IBV_QPT_UD;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!pd)
		die("alloc_pd");
	end_open(&a, ctx, pd, "A");
	end_open(&b, ctx, pd, "B");
	end_connect(&a, b.qpn, &b.gid);
	end_connect(&b, a.qpn, &a.gid);
	set_nonblock(b.ch->fd);

	/* nothing queued: not readable, EAGAIN */
	expect_eagain(&b, "on a fresh channel");

	/* armed, then three messages: one event, readable until read */
	if (ibv_req_notify_cq(b.cq, 0))
		die("req_notify_cq");
	for (i = 0; i < 3; i++) {
		post_send(&a, (uint64_t)i, 0);
		spin_recv(&b);
	}
	if (!readable(b.ch->fd, HANG_S * 1000))
		die("armed CQ: no event");
	if (!readable(b.ch->fd, 0))
		die("event: readable only once (edge, not level)");
	if (ibv_get_cq_event(b.ch, &cq, &cctx) || cq != b.cq)
		die("ibv_get_cq_event after readable: %s", strerror(errno));
	expect_eagain(&b, "after the one event of an arm was read");
	ibv_ack_cq_events(cq, 1);

	/* not armed: completions raise nothing */
	post_send(&a, 10, 0);
	spin_recv(&b);
	expect_eagain(&b, "after a completion on a CQ not armed");

	/* solicited only: an unsolicited message is not an event, a
	 * solicited one is */
	if (ibv_req_notify_cq(b.cq, 1))
		die("req_notify_cq solicited");
	post_send(&a, 11, 0);
	spin_recv(&b);
	expect_eagain(&b, "after an unsolicited message, solicited arm");
	post_send(&a, 12, IBV_SEND_SOLICITED);
	spin_recv(&b);
	if (!readable(b.ch->fd, HANG_S * 1000))
		die("solicited arm: no event for a solicited message");
	if (ibv_get_cq_event(b.ch, &cq, &cctx) || cq != b.cq)
		die("ibv_get_cq_event, solicited: %s", strerror(errno));
	ibv_ack_cq_events(cq, 1);
	expect_eagain(&b, "after the solicited event was read");
	drain(&a);
	drain(&b);

	/*
	 * Two threads wait on one channel for two CQs: both wake.  A's CQ
	 * moves to B's channel: a second CQ on the channel of b, armed,
	 * both threads blocked (blocking fd again) before anything is sent.
	 */
	{
		int fl = fcntl(b.ch->fd, F_GETFL);

		fcntl(b.ch->fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	w1.ch = w2.ch = b.ch;
	w1.cq = w2.cq = NULL;
	if (ibv_req_notify_cq(b.cq, 0) || ibv_req_notify_cq(a.cq, 0))
		die("req_notify_cq");
	/* (a.cq is on a's channel: it is the sender, b.cq gets the
	 * receives; a second receive CQ event comes from a second message
	 * after the first event is read by one of the threads) */
	if (pthread_create(&t1, NULL, wait_one, &w1) ||
	    pthread_create(&t2, NULL, wait_one, &w2))
		die("pthread_create");
	post_send(&a, 20, 0);
	spin_recv(&b);
	/* one of the two has it; re-arm for the other */
	for (i = 0; i < HANG_S * 100 && !atomic_load(&woke); i++)
		usleep(10000);
	if (!atomic_load(&woke))
		die("two waiters: neither woke for the first event");
	if (ibv_req_notify_cq(b.cq, 0))
		die("req_notify_cq");
	post_send(&a, 21, 0);
	spin_recv(&b);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	if (w1.err || w2.err || w1.cq != b.cq || w2.cq != b.cq)
		die("two waiters: %s / %s", strerror(w1.err), strerror(w2.err));
	ibv_ack_cq_events(b.cq, 2);
	drain(&a);
	drain(&b);

	/* destroy waits for acks: an event read, not acked */
	if (ibv_req_notify_cq(b.cq, 0))
		die("req_notify_cq");
	post_send(&a, 30, 0);
	spin_recv(&b);
	if (ibv_get_cq_event(b.ch, &cq, &cctx) || cq != b.cq)
		die("ibv_get_cq_event before destroy: %s", strerror(errno));
	drain(&a);
	drain(&b);
	if (ibv_destroy_qp(b.qp))
		die("destroy_qp");
	d.cq = b.cq;
	atomic_store(&d.done, 0);
	if (pthread_create(&t1, NULL, destroy_it, &d))
		die("pthread_create");
	usleep(200000);
	if (atomic_load(&d.done))
		die("ibv_destroy_cq returned with an event not acked");
	ibv_ack_cq_events(cq, 1);
	pthread_join(t1, NULL);
	if (!atomic_load(&d.done))
		die("ibv_destroy_cq did not return after the ack");
	if (ibv_destroy_comp_channel(b.ch))
		die("destroy_comp_channel");

	/* the async fd: O_NONBLOCK honoured, not readable while empty */
	set_nonblock(ctx->async_fd);
	if (readable(ctx->async_fd, 0))
		die("async fd readable with no event");
	errno = 0;
	if (ibv_get_async_event(ctx, &aev) != -1 || errno != EAGAIN)
		die("ibv_get_async_event on an empty O_NONBLOCK fd: not "
		    "-1/EAGAIN (%s)",
		    strerror(errno));

	/* ... readable while an event is queued (an overrun CQ's CQ_ERR),
	 * and not once it is read */
	async_overrun(ctx, pd, &a);

	end_drop_ah(&a);
	end_drop_ah(&b);
	printf("%s: semantics: all checks passed\n", who);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: chan_events pingpong [-t rc|uc|ud] [-n N] "
			"[-w get|poll] [-f]\n       chan_events semantics\n");
	exit(2);
}

int main(int argc, char **argv)
{
	bool forked = false;
	int c;

	if (argc < 2)
		usage();
	if (!strcmp(argv[1], "semantics"))
		return semantics();
	if (strcmp(argv[1], "pingpong"))
		usage();
	optind = 2;
	while ((c = getopt(argc, argv, "t:n:w:f")) != -1) {
		switch (c) {
		case 't':
			if (!strcmp(optarg, "rc"))
				qp_type = IBV_QPT_RC;
			else if (!strcmp(optarg, "uc"))
				qp_type = IBV_QPT_UC;
			else if (!strcmp(optarg, "ud"))
				qp_type = IBV_QPT_UD;
			else
				usage();
			break;
		case 'n':
			iters = atoi(optarg);
			if (iters < 1)
				usage();
			break;
		case 'w':
			if (!strcmp(optarg, "poll"))
				wait_poll = true;
			else if (strcmp(optarg, "get"))
				usage();
			break;
		case 'f':
			forked = true;
			break;
		default:
			usage();
		}
	}
	return pingpong(forked);
}
