// SPDX-License-Identifier: MIT
/* The simulated wire, the fake clock and the event loop (harness.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"
#include "../lib/qp_setup.h"

#define LOCAL	  "127.0.80.1"
#define BURST_MAX 64

struct eng *E;

/* ---- the wire: a heap of packets ordered by (delivery time, order sent) */
struct wpkt {
	uint64_t at, seq;
	uint64_t arrived; /* when it reached the receiver's kernel (at, but
			   * for a late reader: eng.read_late_ns) */
	uint8_t tos;	  /* its IP header's */
	size_t len;
	uint8_t data[];
};

static struct wpkt **heap;
static size_t nheap, heap_cap;
static uint64_t wseq;
static unsigned int io_calls; /* calls of the packet IO so far */
static unsigned int io_runs;  /* datagrams and GSO runs so far */
static uint64_t rng;
static struct sockaddr_storage local;

static bool before(const struct wpkt *x, const struct wpkt *y)
{
	return x->at < y->at || (x->at == y->at && x->seq < y->seq);
}

static void heap_push(struct wpkt *p)
{
	size_t i;

	if (nheap == heap_cap) {
		heap_cap = heap_cap ? heap_cap * 2 : 1024;
		heap = realloc(heap, heap_cap * sizeof(*heap));
		if (!heap)
			abort();
	}
	i = nheap++;
	while (i && before(p, heap[(i - 1) / 2])) {
		heap[i] = heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap[i] = p;
}

static struct wpkt *heap_pop(void)
{
	struct wpkt *top = heap[0], *last = heap[--nheap];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= nheap)
			break;
		if (c + 1 < nheap && before(heap[c + 1], heap[c]))
			c++;
		if (!before(heap[c], last))
			break;
		heap[i] = heap[c];
		i = c;
	}
	if (nheap)
		heap[i] = last;
	return top;
}

static uint32_t rnd_ppm(void)
{
	/* xorshift64*: the same sequence for a seed */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)(((rng * 0x2545f4914f6cdd1dull) >> 32) % 1000000);
}

static void describe(const uint8_t *b, size_t len, struct eng_pkt *p)
{
	const struct uroce_opcode_info *info = &uroce_opcode[bth_opcode(b)];

	memset(p, 0, sizeof(*p));
	p->opcode = bth_opcode(b);
	p->psn = bth_psn(b);
	p->dqpn = bth_qpn(b);
	p->ackreq = bth_ackreq(b);
	p->is_req = info->mask & UROCE_M_REQ;
	if (info->mask & UROCE_M_AETH) {
		p->has_aeth = true;
		p->syn = aeth_syn(b + info->offset[UROCE_HDR_AETH]);
	}
	if (info->mask & UROCE_M_RETH) {
		p->has_reth = true;
		p->reth_va = reth_va(b + info->offset[UROCE_HDR_RETH]);
		p->reth_len = reth_len(b + info->offset[UROCE_HDR_RETH]);
	}
	p->paylen = (uint32_t)(len - info->length - UROCE_ICRC_LEN - bth_pad(b));
}

static void trace_print(const struct eng_pkt *p)
{
	if (!getenv("ENGINE_TRACE"))
		return;
	fprintf(stderr, "%10.3f ms  %-28s psn %#x -> qp %#x%s%s", eng_ms(),
		uroce_opcode[p->opcode].name, p->psn, p->dqpn,
		p->ackreq ? " A" : "", p->dropped ? "  DROPPED" : "");
	if (p->has_aeth)
		fprintf(stderr, "  syn %#x", p->syn);
	if (p->has_reth)
		fprintf(stderr, "  reth len %u", p->reth_len);
	fprintf(stderr, "\n");
}

static void wire_put(const uint8_t *data, size_t len, uint64_t at,
		     uint64_t late, uint8_t tos)
{
	struct wpkt *w = malloc(sizeof(*w) + len);

	if (!w)
		abort();
	w->arrived = at;
	w->at = at + late;
	w->seq = wseq++;
	w->len = len;
	w->tos = tos;
	memcpy(w->data, data, len);
	heap_push(w);
}

/* The fake packet IO: every datagram the engine sends comes here. */
static int wire_send(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		     struct uroce_ipopt ip, const struct iovec *iov, int iovcnt)
{
	/* (the longest: a ring packet, headers to ICRC) */
	uint8_t buf[UROCE_MAX_HDR_LEN + UROCE_RING_MTU + 64];
	size_t len = 0;
	struct eng_pkt *p;
	uint64_t at, late;
	int i;

	(void)dev;
	(void)dst;
	for (i = 0; i < iovcnt; i++) {
		if (len + iov[i].iov_len > sizeof(buf))
			abort();
		memcpy(buf + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	if (E->ntrace == ENG_TRACE_MAX)
		abort();
	p = &E->trace[E->ntrace];
	describe(buf, len, p);
	p->sent_ns = E->now;
	p->tos = ip.tos;
	p->nth = E->ntrace++;
	p->io_call = io_calls;
	p->run = io_runs;
	at = E->now + E->o.latency_ns + E->extra_ns;
	if (E->o.link_bps && p->is_req) {
		/* a drop-tail queue of no limit in front of a link */
		uint64_t start = E->link_free > E->now ? E->link_free : E->now;

		E->qdelay_ns = start - E->now;
		if (E->qdelay_ns > E->qdelay_max_ns)
			E->qdelay_max_ns = E->qdelay_ns;
		E->link_free = start + len * 1000000000ull / E->o.link_bps;
		at += E->link_free - E->now;
	}
	p->dropped = (E->filter && E->filter(E, p)) ||
		     (E->o.drop_ppm && rnd_ppm() < E->o.drop_ppm);
	trace_print(p);
	if (p->dropped)
		return 0;
	if (E->o.reorder_ppm && rnd_ppm() < E->o.reorder_ppm)
		at += E->o.latency_ns / 2 + 1; /* overtaken by later ones */
	/* a congested queue on the way marks ECN-capable packets CE */
	if (E->mark_ce && (ip.tos & UROCE_ECN_MASK) && E->mark_ce(E, p))
		ip.tos |= UROCE_ECN_CE;
	/* the requester's thread reads responses late */
	late = p->is_req ? 0 : E->read_late_ns;
	wire_put(buf, len, at, late, ip.tos);
	if (E->o.dup_ppm && rnd_ppm() < E->o.dup_ppm)
		wire_put(buf, len, at + 1, late, ip.tos);
	return 0;
}

static bool is_unreach(const struct sockaddr_storage *dst)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)dst;
	struct in_addr a;

	inet_pton(AF_INET, ENG_UNREACH, &a);
	return dst->ss_family == AF_INET && in->sin_addr.s_addr == a.s_addr;
}

/* The fake socket: no route to ENG_UNREACH, the wire for the rest. */
static int wire_send_to(struct uroce_dev *dev,
			const struct sockaddr_storage *dst,
			struct uroce_ipopt ip, const struct iovec *iov,
			int iovcnt)
{
	if (is_unreach(dst))
		return E->o.unreach_err;
	io_calls++;
	io_runs++;
	return wire_send(dev, dst, ip, iov, iovcnt);
}

/* Runs as sendmmsg with UDP GSO takes them: the datagrams of a run are
 * seg bytes each, back to back in its iovecs; a run that fails ends the
 * call (the count sent before it, or its error if it was the first). */
static int wire_send_runs(struct uroce_dev *dev, const struct uroce_txrun *run,
			  int nruns, const struct iovec *iov)
{
	static uint8_t buf[65536];
	int r, i;

	io_calls++;
	if (E->sndbuf_full) {
		E->sndbuf_full--;
		return E->sndbuf_err ? -E->sndbuf_err : -EAGAIN;
	}
	for (r = 0; r < nruns; r++) {
		size_t len = 0, off;

		if (is_unreach(&run[r].dst))
			return r ? r : E->o.unreach_err;
		for (i = 0; i < run[r].niov; i++) {
			const struct iovec *v = &iov[run[r].iov0 + i];

			if (len + v->iov_len > sizeof(buf))
				abort();
			memcpy(buf + len, v->iov_base, v->iov_len);
			len += v->iov_len;
		}
		if (len > E->run_bytes_max)
			E->run_bytes_max = len;
		io_runs++;
		for (off = 0; off < len; off += run[r].seg) {
			struct iovec one = {
				.iov_base = buf + off,
				.iov_len = len - off < run[r].seg ? len - off :
								    run[r].seg,
			};

			wire_send(dev, &run[r].dst, run[r].ip, &one, 1);
		}
	}
	return nruns;
}

/* eng_opts.ring: the peer is behind a same-host ring of that many
 * packets (net/local_tx.c uroce_local_window) */
static uint32_t wire_ring_window(struct uroce_dev *dev,
				 const struct sockaddr_storage *dst,
				 uint32_t qpn)
{
	(void)dev;
	(void)qpn;
	return is_unreach(dst) ? 0 : E->o.ring;
}

static const struct uroce_pkt_io wire_io = {
	.send = wire_send_to,
	.ring_window = wire_ring_window,
};
static const struct uroce_pkt_io wire_io_gso = {
	.send = wire_send_to,
	.send_runs = wire_send_runs,
	.ring_window = wire_ring_window,
};

/* ---- setup ---- */

static void die(const char *what)
{
	fprintf(stderr, "engine harness: %s failed\n", what);
	exit(2);
}

static struct ibv_qp *make_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 256;
	ia.cap.max_recv_wr = 256;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(E->pd, &ia);
}

static void connect_qp(struct ibv_qp *qp, uint32_t dqpn)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct uroce_test_rc rts = {
		.timeout = E->o.timeout,
		.retry_cnt = E->o.retry_cnt,
		.rnr_retry = E->o.rnr_retry,
		.sq_psn = PSN0,
		.max_rd_atomic = 4,
	};
	union ibv_gid gid;
	const char *failed;

	uroce_gid_from_addr(&local, &gid);
	failed = uroce_test_to_rtr(qp, access, dqpn, &gid);
	if (failed)
		die(failed);
	if (uroce_test_rc_rts(qp, &rts))
		die("RTS");
}

void eng_setup(const struct eng_opts *o)
{
	const int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct sockaddr_in *in = (struct sockaddr_in *)&local;
	struct ibv_device **list;
	const char *seed = getenv("ENGINE_SEED");

	E = calloc(1, sizeof(*E));
	if (!E)
		die("calloc");
	if (o)
		E->o = *o;
	if (!E->o.latency_ns)
		E->o.latency_ns = 10000;
	if (!E->o.rcvbuf)
		E->o.rcvbuf = 4u << 20;
	if (!E->o.timeout)
		E->o.timeout = 14;
	if (!E->o.retry_cnt)
		E->o.retry_cnt = 7;
	if (!E->o.rnr_retry)
		E->o.rnr_retry = 7;
	if (!E->o.unreach_err)
		E->o.unreach_err = -ENETUNREACH;
	if (seed && *seed)
		E->o.seed = strtoull(seed, NULL, 0);
	rng = E->o.seed * 2654435761u + 0x9e3779b97f4a7c15ull;
	/* the fake clock starts at 1 s: 0 would mean "the real clock" */
	E->now = E->start = 1000000000ull;
	uroce_clock_set(E->now);

	memset(&local, 0, sizeof(local));
	in->sin_family = AF_INET;
	in->sin_port = htons(UROCE_UDP_PORT);
	inet_pton(AF_INET, LOCAL, &in->sin_addr);
	E->dev = uroce_dev_get();
	if (!E->dev ||
	    uroce_dev_up_offline(E->dev, E->o.gso ? &wire_io_gso : &wire_io,
				 &local, E->o.rcvbuf))
		die("uroce_dev_up_offline");
	atomic_store(&E->dev->net.gso, E->o.gso);
	E->dev->net.sndbuf = E->o.sndbuf;
	E->dev->cc.on = E->o.cc;
	E->dev->cc.cnp_gap_ns = 50000;
	E->dev->cc.delay = E->o.cc_delay_us != 0;
	E->dev->cc.target_ns = E->o.cc_delay_us * 1000;
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("ibv_get_device_list");
	E->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!E->ctx)
		die("ibv_open_device");
	E->pd = ibv_alloc_pd(E->ctx);
	if (E->o.channel) {
		E->ch = ibv_create_comp_channel(E->ctx);
		if (!E->ch || fcntl(E->ch->fd, F_SETFL, O_NONBLOCK))
			die("ibv_create_comp_channel");
	}
	E->cq_a = ibv_create_cq(E->ctx, 4096, NULL, E->ch, 0);
	E->cq_b = ibv_create_cq(E->ctx, 4096, NULL, E->ch, 0);
	if (!E->pd || !E->cq_a || !E->cq_b)
		die("PD/CQ");
	E->buf_a = mmap(NULL, ENG_BUF_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	E->buf_b = mmap(NULL, ENG_BUF_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (E->buf_a == MAP_FAILED || E->buf_b == MAP_FAILED)
		die("mmap");
	E->mr_a = ibv_reg_mr(E->pd, E->buf_a, ENG_BUF_SIZE, full);
	E->mr_b = ibv_reg_mr(E->pd, E->buf_b, ENG_BUF_SIZE, full);
	if (!E->mr_a || !E->mr_b)
		die("ibv_reg_mr");
	E->a = make_qp(E->cq_a);
	E->b = make_qp(E->cq_b);
	if (!E->a || !E->b)
		die("ibv_create_qp");
	connect_qp(E->a, E->b->qp_num);
	connect_qp(E->b, E->a->qp_num);
}

void eng_pair(struct ibv_qp **a, struct ibv_qp **b)
{
	*a = make_qp(E->cq_a);
	*b = make_qp(E->cq_b);
	if (!*a || !*b)
		die("ibv_create_qp");
	connect_qp(*a, (*b)->qp_num);
	connect_qp(*b, (*a)->qp_num);
}

/* ---- the event loop ---- */

static void set_now(uint64_t t)
{
	if (t > E->now)
		E->now = t;
	uroce_clock_set(E->now);
}

/* Deliver every packet due at the earliest time (up to BURST_MAX) as one
 * receive burst: one ACK per QP for it, as net/udp.c does. */
static void deliver_burst(void)
{
	struct uroce_dev *dev = E->dev;
	uint64_t at = heap[0]->at;
	int n = 0;

	set_now(at);
	pthread_mutex_lock(&dev->lock);
	uroce_ack_burst_begin(dev);
	pthread_mutex_unlock(&dev->lock);
	while (nheap && heap[0]->at == at && n++ < BURST_MAX) {
		struct wpkt *w = heap_pop();

		dev->net.rx_ip.tos = w->tos;
		/* as net/udp.c stamps it, with the socket's timestamps */
		dev->net.rx_ns = E->rx_stamps ? w->arrived : 0;
		if (E->o.ring && !E->o.ring_by_udp)
			uroce_recv_local(dev, w->data, w->len, &local, &local,
					 0, NULL);
		else
			uroce_recv(dev, w->data, w->len, &local, &local, 0);
		dev->net.rx_ip.tos = 0;
		dev->net.rx_ns = 0;
		free(w);
		if (E->mid_burst)
			E->mid_burst(E);
	}
	pthread_mutex_lock(&dev->lock);
	if (E->o.acks_for_post)
		uroce_ack_burst_end_for_post(dev);
	else
		uroce_ack_burst_end(dev);
	uroce_dev_unlock(dev);
}

/* one event; false if there is none */
static bool step(void)
{
	uint64_t timer = E->dev->prog.armed_deadline_ns;
	uint64_t look = atomic_load(&E->dev->prog.wake_by_ns);

	/* the progress thread's look (eng_thread_sleeps) */
	if (look && (!nheap || look < heap[0]->at) && (!timer || look <= timer)) {
		set_now(look);
		uroce_progress_woke(E->dev);
		return true;
	}
	if (nheap && (!timer || heap[0]->at <= timer)) {
		deliver_burst();
		return true;
	}
	if (!timer)
		return false;
	set_now(timer);
	uroce_timers_run(E->dev);
	return true;
}

void eng_thread_sleeps(uint64_t by)
{
	uroce_progress_sleep_by(E->dev, by);
}

bool eng_run(bool (*done)(struct eng *e), uint64_t limit_ns)
{
	uint64_t until = E->now + limit_ns;

	for (;;) {
		if (done && done(E))
			return true;
		if (E->now > until)
			return false;
		if (!step())
			return done ? done(E) : true;
	}
}

void eng_settle(uint64_t limit_ns)
{
	eng_run(NULL, limit_ns);
}

/* ---- verbs helpers ---- */

uint64_t eng_cnt(enum uroce_counter c)
{
	return atomic_load(&E->dev->stats.cnt[c]);
}

bool eng_poll(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc) == 1;
}

static uint8_t *buf_of(struct ibv_qp *qp)
{
	return qp == E->a ? E->buf_a : E->buf_b;
}

static struct ibv_mr *mr_of(struct ibv_qp *qp)
{
	return qp == E->a ? E->mr_a : E->mr_b;
}

void eng_post_send_flags(struct ibv_qp *qp, enum ibv_wr_opcode op,
			 uint64_t wr_id, uint32_t loff, uint32_t len,
			 uint64_t raddr, uint32_t rkey, unsigned int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf_of(qp) + loff),
			       .length = len,
			       .lkey = mr_of(qp)->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = flags },
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
}

void eng_post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
		   uint32_t loff, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	eng_post_send_flags(qp, op, wr_id, loff, len, raddr, rkey,
			    IBV_SEND_SIGNALED);
}

void eng_post_atomic(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
		     uint32_t loff, uint64_t raddr, uint32_t rkey,
		     uint64_t compare_add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf_of(qp) + loff),
			       .length = 8,
			       .lkey = mr_of(qp)->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send atomic");
}

void eng_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(buf_of(qp) + off),
			       .length = len,
			       .lkey = mr_of(qp)->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

void eng_wait(unsigned int a, unsigned int b)
{
	E->want_a = a;
	E->want_b = b;
	E->got_a = E->got_b = 0;
}

bool eng_all_done(struct eng *e)
{
	while (e->got_a < e->want_a && eng_poll(e->cq_a, &e->wc_a[e->got_a]))
		e->got_a++;
	while (e->got_b < e->want_b && eng_poll(e->cq_b, &e->wc_b[e->got_b]))
		e->got_b++;
	return e->got_a >= e->want_a && e->got_b >= e->want_b;
}

void eng_expect_ok(const struct ibv_wc *wc, uint64_t wr_id)
{
	ENG_CHECK(wc->status == IBV_WC_SUCCESS && wc->wr_id == wr_id,
		  "wr_id %llu status %s, wanted %llu success",
		  (unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status),
		  (unsigned long long)wr_id);
}

struct uroce_qp *eng_uqp(struct ibv_qp *qp)
{
	return to_uqp(qp);
}

unsigned int eng_times_sent(const struct eng_pkt *p)
{
	unsigned int i, n = 0;

	for (i = 0; i < p->nth; i++)
		if (E->trace[i].dqpn == p->dqpn && E->trace[i].psn == p->psn)
			n++;
	return n;
}

unsigned int eng_count_sent(bool (*match)(const struct eng_pkt *p))
{
	unsigned int i, n = 0;

	for (i = 0; i < E->ntrace; i++)
		n += match(&E->trace[i]);
	return n;
}

void eng_gid_unreach(union ibv_gid *gid)
{
	struct sockaddr_storage ss = local;

	inet_pton(AF_INET, ENG_UNREACH, &((struct sockaddr_in *)&ss)->sin_addr);
	uroce_gid_from_addr(&ss, gid);
}

void eng_gid_local(union ibv_gid *gid)
{
	uroce_gid_from_addr(&local, gid);
}

void eng_pattern(void)
{
	size_t i;

	for (i = 0; i < ENG_BUF_SIZE; i++) {
		E->buf_a[i] = (uint8_t)(i * 7 + 1 + (i >> 10));
		E->buf_b[i] = (uint8_t)(i * 13 + 5 + (i >> 11));
	}
}

double eng_ms(void)
{
	return (double)(E->now - E->start) / 1e6;
}

void eng_dump_counters(void)
{
	int c;

	fprintf(stderr, "at %.3f ms (fake clock), %u packets sent:\n", eng_ms(),
		E->ntrace);
	for (c = 0; c < UROCE_CNT_NUM; c++)
		if (eng_cnt(c) && uroce_counter_name[c])
			fprintf(stderr, "  %s=%llu\n", uroce_counter_name[c],
				(unsigned long long)eng_cnt(c));
}

int eng_main(int argc, char **argv, const struct eng_test *t, size_t n)
{
	size_t i;

	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (i = 0; i < n; i++)
			printf("%s\n", t[i].name);
		return 0;
	}
	for (i = 0; argc == 2 && i < n; i++)
		if (!strcmp(argv[1], t[i].name)) {
			t[i].fn();
			printf("%s: ok (%.3f ms on the fake clock, %u packets)\n",
			       argv[1], eng_ms(), E->ntrace);
			return 0;
		}
	fprintf(stderr, "usage: %s NAME; names:", argv[0]);
	for (i = 0; i < n; i++)
		fprintf(stderr, " %s", t[i].name);
	fprintf(stderr, "\n");
	return 2;
}
