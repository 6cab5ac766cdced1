// SPDX-License-Identifier: MIT
/*
 * One member of a mesh of processes on two shared addresses (issue 23,
 * docs/scale.md "Many processes"; driven by run_mesh.sh).
 *
 *   mesh serve ID GEN ADDR PORT        a B member: listens on ADDR:PORT
 *   mesh connect ID GEN ADDR PORT N [FIRST]
 *                                      an A member: one RC connection to
 *                                      each of the N B members FIRST ..
 *                                      FIRST+N-1 (FIRST 0), on ports
 *                                      PORT .. PORT+N-1 of ADDR
 *
 * Over rdma_cm.  An A member sends a 64-byte ping on each connection
 * about once a second; the B member checks it and echoes it; the A
 * member checks the echo.  Each side names itself (ID.GEN) in the
 * connection's private data, so that a failed connection can be laid at
 * the door of the peer that was killed: "fail" lines name the peer, and
 * an echo later than ECHO_NS counts as a failure (a peer killed after it
 * acked the ping leaves nothing in flight to time out), and
 * run_mesh.sh accepts a failure only on a connection to a process it
 * killed.  An A member whose connection failed connects to that port
 * again after a back-off, as an application would: a random delay in
 * [b/2, b), b doubling from RETRY_MIN_NS to RETRY_MAX_NS with each
 * failure in a row and starting over once a connection is up (256
 * members that retried every 200 ms added a flood of REQs to the load
 * that made connects fail: docs/scale.md "Many processes").
 *
 * SIGTERM ends a member; it prints "done ID.GEN conns=C verified=BYTES
 * fails=F stale=S mismatches=M" (stale: connections up for more than
 * STALE_S seconds without an echo in the last STALE_S) and exits 1 if
 * anything was wrong with the data or a connection went stale.
 * MESH_DEBUG=1 prints every rdma_cm event; MESH_PING_MS sets how often a
 * connection is pinged (default 1000), MESH_STALE_S the stale bound (10).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MSG	     64
#define MAX_CONN     256
#define CQ_DEPTH     (4 * MAX_CONN)
#define PING_NS	     1000000000ull /* default; MESH_PING_MS */
#define RETRY_MIN_NS 200000000ull
#define RETRY_MAX_NS 6400000000ull
#define ECHO_NS	     5000000000ull /* a ping's echo later than this: lost */
#define STALE_S	     10		   /* default; MESH_STALE_S */

enum st {
	ST_FREE,
	ST_CONNECTING,
	ST_UP,
	ST_CLOSING,
	ST_WAIT
};

struct ident { /* the private data of REQ and REP */
	uint32_t magic, id, gen, pad;
};

struct conn {
	struct rdma_cm_id *id;
	enum st st;
	struct ident peer;
	struct ibv_mr *mr;
	uint32_t qpn;	     /* completions of an earlier QP are not ours */
	uint8_t buf[2][MSG]; /* [0] send, [1] receive */
	uint64_t seq;
	bool outstanding;
	uint64_t up_ns, progress_ns, next_ns, sent_ns;
	uint64_t backoff_ns; /* A: the next reconnect's bound */
};

static struct {
	bool server;
	uint32_t id, gen, n, first; /* first: the B member on port */
	const char *addr;
	int port;
	struct rdma_event_channel *ch;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct rdma_cm_id *listen;
	struct conn c[MAX_CONN];
	uint64_t verified, fails, mismatches;
	uint64_t ping_ns, stale_ns;
} g;

#define MAGIC 0x6d657368u /* "mesh" */

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *me(void)
{
	static char s[32];

	snprintf(s, sizeof(s), "%c%u.%u", g.server ? 'B' : 'A', g.id, g.gen);
	return s;
}

static void die(const char *what)
{
	printf("mesh %s: FATAL %s: %s\n", me(), what, strerror(errno));
	fflush(stdout);
	_exit(2);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* a ping: A's and B's names, the sequence number, then a pattern of
 * them all, so that a byte from any other connection or round shows */
static void fill(uint8_t *p, const struct ident *a, const struct ident *b,
		 uint64_t seq)
{
	uint32_t h[4] = { a->id, a->gen, b->id, b->gen };
	uint64_t k;
	unsigned int i;

	memcpy(p, h, sizeof(h));
	memcpy(p + 16, &seq, 8);
	k = mix(((uint64_t)a->id << 48) ^ ((uint64_t)a->gen << 32) ^
		((uint64_t)b->id << 16) ^ b->gen ^ mix(seq));
	for (i = 24; i < MSG; i++) {
		if (!(i % 8))
			k = mix(k);
		p[i] = (uint8_t)(k >> (i % 8 * 8));
	}
}

static struct ident self(void)
{
	return (struct ident){ .magic = MAGIC, .id = g.id, .gen = g.gen };
}

static void fail(struct conn *c, const char *why)
{
	if (c->st == ST_CLOSING || c->st == ST_WAIT || c->st == ST_FREE)
		return;
	g.fails++;
	printf("mesh %s: fail peer %c%u.%u %s\n", me(), g.server ? 'A' : 'B',
	       c->peer.id, c->peer.gen, why);
	c->st = ST_CLOSING;
	rdma_disconnect(c->id);
}

static void setup_verbs(struct ibv_context *verbs)
{
	if (g.verbs)
		return;
	g.verbs = verbs;
	g.pd = ibv_alloc_pd(verbs);
	g.cc = ibv_create_comp_channel(verbs);
	if (!g.pd || !g.cc || fcntl(g.cc->fd, F_SETFL, O_NONBLOCK))
		die("pd/comp channel");
	g.cq = ibv_create_cq(verbs, CQ_DEPTH, NULL, g.cc, 0);
	if (!g.cq || ibv_req_notify_cq(g.cq, 0))
		die("cq");
}

static int post_recv(struct conn *c)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->buf[1],
			       .length = MSG,
			       .lkey = c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)c,
				  .sg_list = &sge,
				  .num_sge = 1 },
			   *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static int post_send(struct conn *c)
{
	struct ibv_sge sge = { .addr = (uintptr_t)c->buf[0],
			       .length = MSG,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uintptr_t)c | 1,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	return ibv_post_send(c->id->qp, &wr, &bad);
}

/* QP, MR and the first receive of a new connection */
static int conn_qp(struct conn *c)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2,
			 .max_recv_wr = 2,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	setup_verbs(c->id->verbs);
	a.send_cq = a.recv_cq = g.cq;
	if (rdma_create_qp(c->id, g.pd, &a))
		return -1;
	c->qpn = c->id->qp->qp_num;
	c->mr = ibv_reg_mr(g.pd, c->buf, sizeof(c->buf), IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return -1;
	return post_recv(c);
}

static void conn_free(struct conn *c)
{
	if (c->id) {
		if (c->id->qp)
			rdma_destroy_qp(c->id);
		rdma_destroy_id(c->id);
	}
	if (c->mr)
		ibv_dereg_mr(c->mr);
	c->id = NULL;
	c->mr = NULL;
	c->outstanding = false;
}

static struct conn *conn_of(struct rdma_cm_id *id)
{
	return id->context;
}

/* A: connect again after the back-off, which doubles */
static void retry_later(struct conn *c)
{
	uint64_t b = c->backoff_ns ? c->backoff_ns : RETRY_MIN_NS;

	c->st = ST_WAIT;
	c->next_ns = now_ns() + b / 2 + mix(now_ns() ^ g.id) % (b / 2);
	c->backoff_ns = b * 2 < RETRY_MAX_NS ? b * 2 : RETRY_MAX_NS;
}

/* ---- A: connect to every B member ---- */

static void start_connect(unsigned int j)
{
	struct conn *c = &g.c[j];
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(
					  (uint16_t)(g.port + (int)j)) };

	inet_pton(AF_INET, g.addr, &sa.sin_addr);
	memset(&c->peer, 0, sizeof(c->peer));
	c->peer.id = j;
	if (rdma_create_id(g.ch, &c->id, c, RDMA_PS_TCP))
		die("rdma_create_id");
	c->st = ST_CONNECTING;
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&sa, 2000)) {
		printf("mesh %s: rdma_resolve_addr: %s\n", me(),
		       strerror(errno));
		rdma_destroy_id(c->id);
		c->id = NULL;
		retry_later(c);
	}
}

static void connect_again(struct conn *c)
{
	conn_free(c);
	retry_later(c);
}

static void a_event(struct rdma_cm_event *e)
{
	struct conn *c = conn_of(e->id);
	struct ident me_ = self();
	struct rdma_conn_param p = {
		.private_data = &me_,
		.private_data_len = sizeof(me_),
		.retry_count = 7,
		.rnr_retry_count = 7,
	};

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(c->id, 2000))
			connect_again(c);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (conn_qp(c) || rdma_connect(c->id, &p))
			connect_again(c);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (e->param.conn.private_data_len >= sizeof(struct ident))
			memcpy(&c->peer, e->param.conn.private_data,
			       sizeof(c->peer));
		if (c->peer.magic != MAGIC ||
		    c->peer.id != g.first + (uint32_t)(c - g.c)) {
			g.mismatches++;
			printf("mesh %s: MISMATCH port %u answered by %u\n",
			       me(), g.first + (unsigned int)(c - g.c),
			       c->peer.id);
		}
		c->st = ST_UP;
		c->up_ns = c->progress_ns = now_ns();
		c->next_ns = c->up_ns;
		c->backoff_ns = 0;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		fail(c, "disconnected");
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		/* (the port's member is being replaced) */
		c->st = ST_CLOSING;
		break;
	default:
		break;
	}
}

/* ---- B: accept from A members ---- */

static void b_event(struct rdma_cm_event *e)
{
	struct conn *c;
	struct ident me_ = self();
	struct rdma_conn_param p = {
		.private_data = &me_,
		.private_data_len = sizeof(me_),
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	unsigned int i;

	switch (e->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		for (i = 0; i < MAX_CONN && g.c[i].st != ST_FREE; i++)
			;
		if (i == MAX_CONN) {
			rdma_reject(e->id, NULL, 0);
			rdma_destroy_id(e->id);
			break;
		}
		c = &g.c[i];
		memset(&c->peer, 0, sizeof(c->peer));
		if (e->param.conn.private_data_len >= sizeof(struct ident))
			memcpy(&c->peer, e->param.conn.private_data,
			       sizeof(c->peer));
		c->id = e->id;
		c->id->context = c;
		c->st = ST_CONNECTING;
		if (c->peer.magic != MAGIC || conn_qp(c) ||
		    rdma_accept(c->id, &p)) {
			printf("mesh %s: refused a request (%s)\n", me(),
			       strerror(errno));
			rdma_reject(c->id, NULL, 0);
			conn_free(c);
			c->st = ST_FREE;
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		c = conn_of(e->id);
		c->st = ST_UP;
		c->up_ns = c->progress_ns = now_ns();
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		c = conn_of(e->id);
		/* A's members go only when killed: each one is a failure */
		fail(c, "disconnected");
		c->st = ST_CLOSING;
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		/* (its A member died before the connection was up) */
		c = conn_of(e->id);
		fail(c, "connect error");
		c->st = ST_CLOSING;
		break;
	default:
		break;
	}
}

/* events whose id is to be destroyed are only acked here, then freed */
static void cm_events(void)
{
	struct rdma_cm_event *e;
	struct conn *c;

	while (!rdma_get_cm_event(g.ch, &e)) {
		if (e->id == g.listen) {
			rdma_ack_cm_event(e);
			continue;
		}
		if (getenv("MESH_DEBUG"))
			printf("mesh %s: event %s status %d\n", me(),
			       rdma_event_str(e->event), e->status);
		if (g.server)
			b_event(e);
		else
			a_event(e);
		c = e->id->context;
		rdma_ack_cm_event(e);
		if (c && c->st == ST_CLOSING) {
			conn_free(c);
			if (g.server) {
				c->st = ST_FREE;
			} else {
				retry_later(c);
			}
		}
	}
	if (errno != EAGAIN)
		die("rdma_get_cm_event");
}

static void on_recv(struct conn *c, uint32_t len)
{
	struct ident me_ = self();
	uint8_t want[MSG];

	if (g.server) {
		/* a ping: A's name and ours, any sequence number */
		uint64_t seq;

		memcpy(&seq, c->buf[1] + 16, 8);
		fill(want, &c->peer, &me_, seq);
	} else {
		fill(want, &me_, &c->peer, c->seq);
	}
	if (len != MSG || memcmp(want, c->buf[1], MSG)) {
		g.mismatches++;
		printf("mesh %s: MISMATCH on the connection to %u.%u\n", me(),
		       c->peer.id, c->peer.gen);
		fail(c, "mismatch");
		return;
	}
	g.verified += MSG;
	c->progress_ns = now_ns();
	if (post_recv(c)) {
		fail(c, "post_recv");
		return;
	}
	if (g.server) {
		memcpy(c->buf[0], c->buf[1], MSG);
		if (post_send(c))
			fail(c, "post_send");
	} else {
		c->outstanding = false;
	}
}

static void cq_events(void)
{
	struct ibv_cq *cq;
	struct ibv_wc wc[32];
	void *ctx;
	int n, i;

	if (!g.cc)
		return;
	if (ibv_get_cq_event(g.cc, &cq, &ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		ibv_req_notify_cq(cq, 0);
	}
	while ((n = ibv_poll_cq(g.cq, 32, wc)) > 0) {
		for (i = 0; i < n; i++) {
			struct conn *c = (struct conn *)(uintptr_t)(wc[i].wr_id &
								    ~1ull);

			if ((c->st != ST_UP && c->st != ST_CONNECTING) ||
			    !c->id || !c->id->qp || wc[i].qp_num != c->qpn)
				continue;
			if (wc[i].status != IBV_WC_SUCCESS) {
				char why[64];

				snprintf(why, sizeof(why), "%s",
					 ibv_wc_status_str(wc[i].status));
				fail(c, why);
				continue;
			}
			if (!(wc[i].wr_id & 1))
				on_recv(c, wc[i].byte_len);
		}
	}
}

/* A: a ping on every connection whose last one came back */
static void pings(uint64_t now)
{
	struct ident me_ = self();
	unsigned int j;

	for (j = 0; j < g.n; j++) {
		struct conn *c = &g.c[j];

		if (c->st == ST_WAIT && now >= c->next_ns) {
			start_connect(j);
			continue;
		}
		/* a peer killed after it acked our ping never echoes, and
		 * with nothing in flight the QP never learns it is gone */
		if (c->st == ST_UP && c->outstanding &&
		    now - c->sent_ns > ECHO_NS) {
			fail(c, "no echo");
			continue;
		}
		if (c->st != ST_UP || c->outstanding || now < c->next_ns)
			continue;
		c->seq++;
		fill(c->buf[0], &me_, &c->peer, c->seq);
		c->outstanding = true;
		c->sent_ns = now;
		c->next_ns = now + g.ping_ns;
		if (post_send(c))
			fail(c, "post_send");
	}
}

static void report(void)
{
	uint64_t now = now_ns(), stale = 0, up = 0;
	unsigned int j;

	for (j = 0; j < MAX_CONN; j++) {
		struct conn *c = &g.c[j];

		if (c->st != ST_UP)
			continue;
		up++;
		if (!g.server && now - c->up_ns > g.stale_ns &&
		    now - c->progress_ns > g.stale_ns) {
			stale++;
			printf("mesh %s: stale connection to B%u.%u\n", me(),
			       c->peer.id, c->peer.gen);
		}
	}
	printf("mesh %s: done conns=%" PRIu64 " verified=%" PRIu64
	       " fails=%" PRIu64 " stale=%" PRIu64 " mismatches=%" PRIu64 "\n",
	       me(), up, g.verified, g.fails, stale, g.mismatches);
	fflush(stdout);
	_exit(stale || g.mismatches ? 1 : 0);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_term };
	bool announced = false;
	unsigned int j, up;

	if (argc < 6 ||
	    (strcmp(argv[1], "serve") && strcmp(argv[1], "connect")) ||
	    (!strcmp(argv[1], "connect") && argc < 7)) {
		fprintf(stderr, "usage: mesh serve ID GEN ADDR PORT\n"
				"       mesh connect ID GEN ADDR PORT N "
				"[FIRST]\n");
		return 2;
	}
	g.server = !strcmp(argv[1], "serve");
	g.id = (uint32_t)atoi(argv[2]);
	g.gen = (uint32_t)atoi(argv[3]);
	g.addr = argv[4];
	g.port = atoi(argv[5]);
	g.n = g.server ? 0 : (uint32_t)atoi(argv[6]);
	g.first = !g.server && argc > 7 ? (uint32_t)atoi(argv[7]) : 0;
	if (g.n > MAX_CONN)
		return 2;
	g.ping_ns = getenv("MESH_PING_MS") ?
			    strtoull(getenv("MESH_PING_MS"), NULL, 10) * 1000000 :
			    PING_NS;
	g.stale_ns = (getenv("MESH_STALE_S") ?
			      strtoull(getenv("MESH_STALE_S"), NULL, 10) :
			      STALE_S) *
		     1000000000ull;
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	g.ch = rdma_create_event_channel();
	if (!g.ch)
		die("rdma_create_event_channel");
	if (g.server) {
		struct sockaddr_in sin = { .sin_family = AF_INET,
					   .sin_port = htons((uint16_t)g.port) };

		inet_pton(AF_INET, g.addr, &sin.sin_addr);
		if (rdma_create_id(g.ch, &g.listen, NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(g.listen, (struct sockaddr *)&sin) ||
		    rdma_listen(g.listen, 1024))
			die("listen");
		printf("mesh %s: listening\n", me());
	} else {
		for (j = 0; j < g.n; j++)
			start_connect(j);
	}
	if (fcntl(g.ch->fd, F_SETFL, O_NONBLOCK))
		die("fcntl");

	while (!stop) {
		struct pollfd p[2] = { { .fd = g.ch->fd, .events = POLLIN },
				       { .fd = g.cc ? g.cc->fd : -1,
					 .events = POLLIN } };
		uint64_t now;

		poll(p, 2, 50);
		cm_events();
		cq_events();
		now = now_ns();
		if (!g.server) {
			pings(now);
			for (j = 0, up = 0; j < g.n; j++)
				up += g.c[j].st == ST_UP;
			if (!announced && up == g.n) {
				printf("mesh %s: up conns=%u\n", me(), up);
				announced = true;
			}
		}
	}
	report();
	return 0;
}
