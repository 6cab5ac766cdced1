// SPDX-License-Identifier: MIT
/*
 * The CM's device resources: its own context, PD, CQs and QP1 (the GSI QP
 * that our libibverbs gives us through uroce_gsi_create), MAD send and
 * receive, and the CM thread, which sleeps on the receive CQ's completion
 * channel and a timerfd armed to the earliest retransmission deadline.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "core/thread.h"
#include "uroce_private.h"

#define CM_ROCE_PORT 4791 /* RoCE v2's UDP port */
#define NRECV	     2048
#define NSEND	     256
#define RECV_SLOT    (CM_GRH_SIZE + CM_MAD_SIZE)
#define SEND_WRID    0x10000u

struct cm_global cm = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.acked = PTHREAD_COND_INITIALIZER,
	.timerfd = -1,
	.ids = { &cm.ids, &cm.ids },
	.tomb_fifo = { &cm.tomb_fifo, &cm.tomb_fifo },
	.timers.odd = { &cm.timers.odd, &cm.timers.odd },
	.listeners = { &cm.listeners, &cm.listeners },
	.disc_held = { &cm.disc_held, &cm.disc_held },
};

static struct ibv_cq *send_cq;

uint64_t cm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cm_gid_from_sa(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12],
		       &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr,
		       16);
	}
}

/*
 * The kernel's rdma_cm says nothing when a REQ goes unanswered: the
 * application gets RDMA_CM_EVENT_UNREACHABLE (-ETIMEDOUT) seconds later.
 * Where nothing at the address takes UDP 4791 (no RoCE device there: a
 * uroce server in another namespace on its default 127.0.0.1, a peer not
 * run under uroce, a mistyped address), the peer's kernel said so at
 * once with an ICMP port unreachable, which the device's unconnected
 * socket does not hear.  So a connected socket of our own asks once
 * more, with an empty datagram (a RoCE receiver drops it as too short),
 * and waits briefly for the refusal.  At most a few times a process, and
 * said once: it runs in the CM thread, with cm.lock held (so the wait is
 * the system call's, not a librspreload's poll, which is our rpoll).
 */
#define PROBE_WAIT_NS 20000000

void cm_say_no_device(const union ibv_gid *gid)
{
	struct timespec wait = { 0, PROBE_WAIT_NS }; /* (ppoll writes it) */
	static int probes = 4;
	static bool said;
	struct sockaddr_storage ss;
	char ip[INET6_ADDRSTRLEN];
	struct pollfd p;
	int fd, r;
	char c;

	if (said || probes <= 0)
		return;
	probes--;
	cm_sa_from_gid(gid, CM_ROCE_PORT, &ss);
	fd = uroce_socket(ss.ss_family,
			  SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	p.fd = fd;
	p.events = POLLIN;
	r = connect(fd, (struct sockaddr *)&ss, sizeof(ss)) ||
	    send(fd, "", 0, 0) < 0 ||
	    syscall(SYS_ppoll, &p, 1, &wait, NULL, 0) <= 0 ||
	    recv(fd, &c, 1, MSG_DONTWAIT) >= 0 || errno != ECONNREFUSED;
	close(fd);
	if (r)
		return;
	said = true;
	/* (the GID is the address: IPv4-mapped, or IPv6) */
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &gid->raw[12], ip, sizeof(ip));
	else
		inet_ntop(AF_INET6, gid->raw, ip, sizeof(ip));
	fprintf(stderr,
		"uroce: no RDMA device at %s: its UDP port %d refused our "
		"connection request (ICMP port unreachable).  A uroce server "
		"there must be given that address (UROCE_ADDR or "
		"UROCE_IFNAME): given none, it listens on a host-local "
		"127.0.0.x\n",
		ip, CM_ROCE_PORT);
}

void cm_sa_from_gid(const union ibv_gid *gid, uint16_t port,
		    struct sockaddr_storage *ss)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	memset(ss, 0, sizeof(*ss));
	if (!memcmp(gid->raw, v4mapped, 12)) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, &gid->raw[12], 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, gid->raw, 16);
	}
}

static int post_recv(unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(cm.buf + (size_t)i * RECV_SLOT),
		.length = RECV_SLOT,
		.lkey = cm.mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(cm.gsi, &wr, &bad);
}

static uint8_t *send_slot(unsigned int i)
{
	return cm.buf + (size_t)NRECV * RECV_SLOT + (size_t)i * CM_MAD_SIZE;
}

static void free_send_slot(unsigned int i)
{
	if (cm.send_ah[i])
		ibv_destroy_ah(cm.send_ah[i]);
	cm.send_ah[i] = NULL;
	cm.send_busy[i] = false;
}

/* Reap send completions.  cm.lock held. */
static void drain_send(void)
{
	struct ibv_wc wc[32];
	int n, i;

	uroce_assert_held(&cm.lock);
	while ((n = ibv_poll_cq(send_cq, 32, wc)) > 0)
		for (i = 0; i < n; i++)
			if ((wc[i].wr_id & SEND_WRID) &&
			    (wc[i].wr_id & 0xffff) < NSEND)
				free_send_slot(wc[i].wr_id & 0xffff);
}

/* Receive completions: each a MAD behind its 40-byte GRH area.
 * cm.lock held. */
static void drain_recv(void)
{
	struct ibv_wc wc[32];
	int n, i;

	uroce_assert_held(&cm.lock);
	while (cm.gsi && (n = ibv_poll_cq(cm.cq, 32, wc)) > 0) {
		for (i = 0; i < n; i++) {
			unsigned int slot = (unsigned int)wc[i].wr_id;
			uint8_t *b;

			if (slot >= NRECV)
				continue;
			b = cm.buf + (size_t)slot * RECV_SLOT;
			if (wc[i].status == IBV_WC_SUCCESS) {
				cm.cnt.rx++;
				if (wc[i].byte_len >= RECV_SLOT &&
				    (wc[i].wc_flags & IBV_WC_GRH))
					cm_handle_mad(b, b + CM_GRH_SIZE,
						      CM_MAD_SIZE);
				else
					cm.cnt.drop_malformed++;
			}
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR && cm.gsi)
				post_recv(slot);
		}
	}
}

/* Sends one MAD to QP1 of the port owning dgid.  cm.lock held. */
int cm_send_mad(const union ibv_gid *dgid, const uint8_t *mad)
{
	struct ibv_ah_attr ah = {
		.is_global = 1,
		.port_num = 1,
		.grh = { .dgid = *dgid, .sgid_index = 0, .hop_limit = 64 },
	};
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	unsigned int i;
	int err;

	uroce_assert_held(&cm.lock);
	if (!cm.gsi)
		return -ENODEV;
	drain_send();
	for (i = 0; i < NSEND && cm.send_busy[i]; i++)
		;
	if (i == NSEND) {
		cm.cnt.tx_fail++;
		return -ENOBUFS;
	}
	cm.send_ah[i] = ibv_create_ah(cm.pd, &ah);
	if (!cm.send_ah[i]) {
		cm.cnt.tx_fail++;
		return -errno;
	}
	cm.send_busy[i] = true;
	memcpy(send_slot(i), mad, CM_MAD_SIZE);
	sge.addr = (uintptr_t)send_slot(i);
	sge.length = CM_MAD_SIZE;
	sge.lkey = cm.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = SEND_WRID | i;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = cm.send_ah[i];
	wr.wr.ud.remote_qpn = UROCE_GSI_QPN;
	wr.wr.ud.remote_qkey = UROCE_GSI_QKEY;
	err = ibv_post_send(cm.gsi, &wr, &bad);
	if (err) {
		free_send_slot(i);
		cm.cnt.tx_fail++;
		return -err;
	}
	cm.cnt.tx++;
	return 0;
}

/* Waits, at most timeout_ns, until every MAD posted has left (its send
 * completed).  cm.lock held. */
void cm_flush_sends(uint64_t timeout_ns)
{
	uint64_t end = cm_now_ns() + timeout_ns;
	unsigned int i;

	uroce_assert_held(&cm.lock);
	while (cm.gsi && cm_now_ns() < end) {
		drain_send();
		for (i = 0; i < NSEND && !cm.send_busy[i]; i++)
			;
		if (i == NSEND)
			return;
		sched_yield();
	}
}

/*
 * How late a timer may fire: the timerfd is armed to the earliest
 * deadline rounded up to this, so that deadlines close together (the
 * time waits of a burst of disconnects, one every few microseconds) take
 * one wake-up of the CM thread, not one each.
 */
#define TIMER_SLACK_NS 1000000ull

/*
 * Arms the timerfd for the earliest deadline (timers and held REQs).  It
 * is set again only when that deadline is earlier than the one armed: a
 * deadline that moved later (an answer cancelled the timer due first)
 * costs at most one early wake-up, after which this arms it anew, rather
 * than a timerfd_settime per answer.  cm.lock held.
 */
void cm_timer_arm(void)
{
	struct cm_timer *t = cm_timer_first(&cm.timers);
	uint64_t next = t ? t->deadline_ns : 0;
	struct itimerspec its;
	int i;

	uroce_assert_held(&cm.lock);
	for (i = 0; i < CM_HOLD_MAX; i++)
		if (cm.held[i].used && (!next || cm.held[i].deadline_ns < next))
			next = cm.held[i].deadline_ns;
	if (!next)
		return;
	next = (next + TIMER_SLACK_NS - 1) / TIMER_SLACK_NS * TIMER_SLACK_NS;
	if (cm.armed_ns && cm.armed_ns <= next)
		return;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(next / 1000000000ull);
	its.it_value.tv_nsec = (long)(next % 1000000000ull);
	if (!timerfd_settime(cm.timerfd, TFD_TIMER_ABSTIME, &its, NULL))
		cm.armed_ns = next;
}

/* QP1's event taken (event), then its MADs, the timers due, the sends
 * done.  cm.lock held. */
static void cm_serve(bool event)
{
	uroce_assert_held(&cm.lock);
	if (event) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		if (!ibv_get_cq_event(cm.cc, &ev_cq, &ev_ctx))
			ibv_ack_cq_events(ev_cq, 1);
	}
	if (cm.gsi) {
		drain_recv();
		ibv_req_notify_cq(cm.cq, 0);
		drain_recv();
	}
	cm_handle_timeouts(cm_now_ns());
	drain_send();
	cm_timer_arm();
}

/*
 * QP1's event where a receive raised it (uroce_channel_direct): the
 * thread that received the MAD handles it, and the CM thread sleeps on.
 * Its wake-up cost a MAD 50-130 us on this 2-core VM, three a connect
 * (REQ, REP, RTU; docs/rdmacm.md, "Shape").  Only if cm.lock is free at
 * once: that thread may be an application's, inside a verb it called
 * holding cm.lock; then the doorbell wakes the CM thread, as before.
 */
static int cm_direct(void *arg)
{
	(void)arg;
	if (pthread_mutex_trylock(&cm.lock))
		return 0;
	cm.cnt.direct++;
	cm_serve(true);
	pthread_mutex_unlock(&cm.lock);
	return 1;
}

static void *cm_thread(void *arg)
{
	struct pollfd p[2];

	(void)arg;
	p[0].fd = cm.cc->fd;
	p[0].events = POLLIN;
	p[1].fd = cm.timerfd;
	p[1].events = POLLIN;
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		pthread_mutex_lock(&cm.lock);
		if (p[1].revents & POLLIN) {
			uint64_t n;

			if (read(cm.timerfd, &n, sizeof(n)) < 0)
				n = 0;
			cm.armed_ns = 0;
		}
		cm_serve(p[0].revents & POLLIN);
		pthread_mutex_unlock(&cm.lock);
	}
	return NULL;
}

/* UROCE_CM_HOLD_MS: how long a REQ may wait for its listener;
 * UROCE_CM_DISC_HOLD_MS: a DISCONNECTED for a poll (proto.c). */
static uint64_t hold_ns(const char *e, unsigned long def)
{
	unsigned long ms = def;
	char *end;

	if (e && *e) {
		ms = strtoul(e, &end, 10);
		if (*end)
			ms = def;
	}
	if (ms > CM_HOLD_MS_MAX)
		ms = CM_HOLD_MS_MAX;
	return (uint64_t)ms * 1000000ull;
}

/* Refreshes what we know of the device's address.  cm.lock held. */
static void read_addr(void)
{
	struct ibv_port_attr pa;

	uroce_assert_held(&cm.lock);
	uroce_dev_get_addr(cm.ctx, &cm.addr);
	cm_gid_from_sa((struct sockaddr *)&cm.addr, &cm.gid);
	if (!ibv_query_port(cm.ctx, 1, &pa))
		cm.mtu = pa.active_mtu;
}

/*
 * Opens the device for the CM, once per process: two contexts (ours, and
 * the one applications get as id->verbs, which they may close), PD, CQs,
 * buffers and the CM thread.  QP1 comes later (cm_ensure_gsi), so that a
 * specific rdma_bind_addr can still move the device.  cm.lock held.
 */
int cm_dev_up(void)
{
	struct ibv_device **list;
	size_t bufsz = (size_t)NRECV * RECV_SLOT + (size_t)NSEND * CM_MAD_SIZE;
	int n, err;

	uroce_assert_held(&cm.lock);
	if (cm.dev_up)
		return 0;
	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	cm.ctx = ibv_open_device(list[0]);
	cm.app_ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!cm.ctx || !cm.app_ctx)
		goto err;
	if (ibv_query_device(cm.ctx, &cm.attr))
		goto err;
	cm.guid = be64toh(cm.attr.node_guid);
	cm.pd = ibv_alloc_pd(cm.ctx);
	cm.app_pd = ibv_alloc_pd(cm.app_ctx);
	cm.cc = ibv_create_comp_channel(cm.ctx);
	if (!cm.pd || !cm.app_pd || !cm.cc)
		goto err;
	fcntl(cm.cc->fd, F_SETFL, fcntl(cm.cc->fd, F_GETFL) | O_NONBLOCK);
	uroce_channel_direct(cm.cc, cm_direct, NULL);
	cm.cq = ibv_create_cq(cm.ctx, NRECV, NULL, cm.cc, 0);
	send_cq = ibv_create_cq(cm.ctx, NSEND, NULL, NULL, 0);
	if (!cm.cq || !send_cq)
		goto err;
	/* Faulted in now, as ibv_reg_mr pins a real device's buffers: the
	 * receive queue consumes its 2 048 slots in ring order, so a lazily
	 * faulted buffer would grow the process by 600 KiB over its first
	 * few thousand MADs, which reads as a leak. */
	cm.buf = mmap(NULL, bufsz, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (cm.buf == MAP_FAILED) {
		cm.buf = NULL;
		goto err;
	}
	cm.mr = ibv_reg_mr(cm.pd, cm.buf, bufsz, IBV_ACCESS_LOCAL_WRITE);
	if (!cm.mr)
		goto err;
	/* non-blocking: another thread may re-arm it (cm_timer_arm) between
	 * the CM thread's poll and its read, which resets the expirations:
	 * a blocking read then waited, holding cm.lock, for the new
	 * deadline, or for ever if there was none (a mesh member hung so) */
	cm.timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (cm.timerfd < 0)
		goto err;
	cm.tid_hi = (uint64_t)(uint32_t)random() << 32;
	cm.hold_ns = hold_ns(uroce_config()->cm_hold_ms, CM_HOLD_MS_DEFAULT);
	cm.disc_hold_ns = hold_ns(uroce_config()->cm_disc_hold_ms,
				  CM_DISC_HOLD_MS_DEFAULT);
	cm.pid = getpid();
	read_addr();
	err = uroce_thread_create(&cm.thread, 0, cm_thread, NULL);
	if (err) {
		errno = err;
		goto err;
	}
	pthread_detach(cm.thread);
	cm.dev_up = true;
	return 0;
err:
	/* half-made resources are kept out of use; a retry starts over */
	err = errno ? errno : ENODEV;
	return -err;
}

/* UROCE_STATS=1: the CM's counters at exit, next to the device's. */
static void __attribute__((destructor)) print_stats(void)
{
	if (!cm.dev_up || !uroce_config()->stats)
		return;
	fprintf(stderr,
		"uroce-cm-stats: rx=%llu tx=%llu drop_malformed=%llu "
		"drop_state=%llu drop_nolistener=%llu retrans=%llu "
		"timeouts=%llu tx_fail=%llu held=%llu held_rejected=%llu "
		"disc_held=%llu direct=%llu\n",
		(unsigned long long)cm.cnt.rx, (unsigned long long)cm.cnt.tx,
		(unsigned long long)cm.cnt.drop_malformed,
		(unsigned long long)cm.cnt.drop_state,
		(unsigned long long)cm.cnt.drop_nolistener,
		(unsigned long long)cm.cnt.retrans,
		(unsigned long long)cm.cnt.timeouts,
		(unsigned long long)cm.cnt.tx_fail,
		(unsigned long long)cm.cnt.held,
		(unsigned long long)cm.cnt.held_rejected,
		(unsigned long long)cm.cnt.disc_held,
		(unsigned long long)cm.cnt.direct);
}

/* Creates QP1 and fills its receive queue.  cm.lock held. */
int cm_gsi_start(void)
{
	struct ibv_qp_cap cap = {
		.max_send_wr = NSEND,
		.max_recv_wr = NRECV,
		.max_send_sge = 1,
		.max_recv_sge = 1,
	};
	unsigned int i;

	uroce_assert_held(&cm.lock);
	if (cm.gsi)
		return 0;
	cm.gsi = uroce_gsi_create(cm.pd, send_cq, cm.cq, &cap);
	if (!cm.gsi)
		return -errno;
	for (i = 0; i < NRECV; i++)
		post_recv(i);
	ibv_req_notify_cq(cm.cq, 0);
	read_addr();
	return 0;
}

/* Destroys QP1, so that the device may move.  cm.lock held. */
void cm_gsi_stop(void)
{
	struct ibv_wc wc[32];
	unsigned int i;

	uroce_assert_held(&cm.lock);
	if (!cm.gsi)
		return;
	ibv_destroy_qp(cm.gsi);
	cm.gsi = NULL;
	drain_send();
	while (ibv_poll_cq(cm.cq, 32, wc) > 0)
		;
	for (i = 0; i < NSEND; i++)
		if (cm.send_busy[i])
			free_send_slot(i);
}

/* The device up and QP1 receiving.  cm.lock held. */
int cm_ensure_gsi(void)
{
	int err = cm_dev_up();

	uroce_assert_held(&cm.lock);
	return err ? err : cm_gsi_start();
}
