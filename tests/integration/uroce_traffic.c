// SPDX-License-Identifier: MIT
/*
 * uroce_traffic - data-verifying RC traffic between two processes.
 *
 * The client drives and the server answers.  An out-of-band TCP connection
 * carries the configuration (the server takes it from the client), each
 * QP's QPN/PSN/GID, the addr/len/rkey of every remotely accessible memory
 * region, and the handshakes of each round: the server prepares its target
 * memory (canary bytes, READ pattern) and posts receives, the client posts
 * one work request per QP, and whoever received data checks every byte
 * against a pattern both sides regenerate from the seed, plus the canary
 * bytes around it.  Atomics run from both sides at once; error modes each
 * build fresh QPs and check the exact completion statuses.
 *
 * Written against the standard verbs API only; run it with LD_LIBRARY_PATH
 * pointing at the libibverbs.so.1 under test.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "../lib/oob.h"
#include "../lib/pattern.h"
#include "../lib/qp_setup.h"

#define MAX_SGE	       4
#define SQ_DEPTH       128
#define RQ_DEPTH       64
#define RING_SIZE      256  /* > SQ_DEPTH, RQ_DEPTH; power of two */
#define SLOT_PAD       1024 /* room for offsets, SGE gaps, guards */
#define GUARD	       64   /* canary bytes checked after the data */
#define MAX_INLINE_REQ 64
#define ATOMIC_WINDOW  32
#define POST_BATCH     8
#define MAX_SIZES      1024
#define MAX_QPS	       256
#define PORT_NUM       1
#define RNR_SENDS      4 /* SENDs of the rnr "retry" case */
#define RNR_SLOT       8192

enum op {
	OP_WRITE,
	OP_WRITE_IMM,
	OP_READ,
	OP_SEND,
	OP_SEND_IMM,
	OP_CAS,
	OP_FADD,
	OP_NUM,
};

static const char *const op_name[OP_NUM] = {
	[OP_WRITE] = "write", [OP_WRITE_IMM] = "write_imm", [OP_READ] = "read",
	[OP_SEND] = "send",   [OP_SEND_IMM] = "send_imm",   [OP_CAS] = "cas",
	[OP_FADD] = "fadd",
};

#define OPS_DATA   ((1u << OP_CAS) - 1)
#define OPS_ATOMIC ((1u << OP_CAS) | (1u << OP_FADD))
#define OPS_ALL	   ((1u << OP_NUM) - 1)

enum mode {
	MODE_TRAFFIC,
	MODE_ACCESS,
	MODE_RNR_EXC,
	MODE_RNR_RETRY,
	MODE_RNR_LATE,
	MODE_EXPECT,
};

enum access_case {
	AC_BAD_RKEY,
	AC_OOB_END,
	AC_OOB_PAST,
	AC_WRAP,
	AC_NO_REMOTE_WRITE,
	AC_NO_REMOTE_READ,
	AC_NO_REMOTE_ATOMIC,
	AC_NUM,
};

static const char *const access_case_name[AC_NUM] = {
	[AC_BAD_RKEY] = "write with a bad rkey",
	[AC_OOB_END] = "write across the end of the MR",
	[AC_OOB_PAST] = "write past the end of the MR",
	[AC_WRAP] = "write with addr+len wrapping past 2^64",
	[AC_NO_REMOTE_WRITE] = "write to an MR without REMOTE_WRITE",
	[AC_NO_REMOTE_READ] = "read from an MR without REMOTE_READ",
	[AC_NO_REMOTE_ATOMIC] = "fetch-add on an MR without REMOTE_ATOMIC",
};

enum msg_type {
	MSG_CFG = 1,
	MSG_MR,
	MSG_QP,
	MSG_READY,
	MSG_ROUND,
	MSG_VERIFY,
	MSG_RESULT,
	MSG_ATOMIC,
	MSG_ATOMIC_DONE,
	MSG_ATOMIC_FINAL,
	MSG_CASE,
	MSG_POSTED,
	MSG_DONE,
	MSG_FAIL,
};

/* Every out-of-band message: a type and 15 values, big-endian on the wire. */
struct msg {
	uint64_t type;
	uint64_t v[15];
};

struct opts {
	const char *server; /* NULL: we are the server */
	const char *port;
	const char *port_file;
	const char *dev_name;
	const char *sizes_spec;
	unsigned int nqp;
	unsigned int iters;
	unsigned int mtu;
	unsigned int ops;
	uint64_t seed;
	unsigned int wr_api_pct;
	unsigned int natomic;
	unsigned int ncas;
	unsigned int timeout_s;
	unsigned int duration_s; /* >0: passes until this many seconds */
	int retry_cnt;
	int ack_timeout;
	int rnr_retry;
	int min_rnr_timer;
	int mode;
	int expect_status;
	bool no_inline;
	bool verbose;
	unsigned int max_sge;
	uint64_t sizes[MAX_SIZES];
	unsigned int nsizes;
	uint64_t max_size;
};

/* Where the logical bytes of one message lie inside a buffer slot. */
struct chunk_map {
	unsigned int n;
	uint64_t off[MAX_SGE];
	uint64_t len[MAX_SGE];
	uint64_t end; /* first byte after the last chunk */
};

/* One completion we wait for; checked field by field. */
struct expect {
	uint64_t wr_id;
	int status;
	int opcode;
	int64_t byte_len; /* -1: not checked */
	bool has_imm;
	uint32_t imm;	/* as in ibv_wc: big-endian */
	uint64_t bytes; /* counted as moved on success */
};

struct exp_ring {
	struct expect e[RING_SIZE];
	unsigned int head;
	unsigned int tail;
};

struct qp_ctx {
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx; /* set when created with send_ops */
	uint32_t psn;
	uint32_t max_inline;
	uint32_t rqpn;
	uint32_t rpsn;
	union ibv_gid rgid;
	uint32_t seq;
	struct exp_ring ring[2]; /* [0] send queue, [1] receive queue */
	/* the current round */
	int op;
	uint64_t len;
	uint64_t key;
	uint8_t canary;
	struct chunk_map map;
	uint64_t csum;
};

struct rmr {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
};

struct wr_desc {
	int op;
	uint64_t wr_id;
	unsigned int nsge;
	struct ibv_sge sge[MAX_SGE];
	uint64_t raddr;
	uint32_t rkey;
	uint32_t imm;	  /* big-endian */
	uint64_t cmp_add; /* compare (CAS) or add (FADD) */
	uint64_t swap;
	bool inl;
	bool ex; /* post with ibv_wr_*, not ibv_post_send */
};

struct ctx {
	struct opts *o;
	bool is_server;
	int side; /* 0 server, 1 client */
	int fd;
	bool fail_sent;
	uint64_t rng;

	struct ibv_context *ctx;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq[2]; /* [0] send, [1] receive */
	unsigned int pend[2];
	unsigned int max_sge;
	int rd_atomic;

	size_t slot;   /* bytes per QP in tbuf / lbuf */
	uint8_t *tbuf; /* remote target (server) */
	size_t tlen;
	struct ibv_mr *tmr;
	uint8_t *lbuf; /* local source/sink (client) */
	size_t llen;
	struct ibv_mr *lmr;
	uint64_t *abuf; /* atomic counter + one CAS slot per QP */
	size_t alen;
	struct ibv_mr *amr;
	uint64_t *ares; /* atomic results */
	size_t areslen;
	struct ibv_mr *aresmr;
	uint8_t *rbuf; /* access test: one page, two MRs */
	size_t rlen;
	struct ibv_mr *ro_mr; /* REMOTE_READ only */
	struct ibv_mr *nr_mr; /* LOCAL_WRITE | REMOTE_WRITE only */
	struct rmr peer_t, peer_a, peer_ro, peer_nr;

	struct qp_ctx *qps;
	unsigned int nqp;
	unsigned int dops[OP_NUM]; /* data ops of the mix, in order */
	unsigned int ndops;

	uint64_t bytes_moved;
	uint64_t bytes_verified;
	uint64_t completions;
	uint64_t errors;
};

static const char *role = "client";

static void __attribute__((format(printf, 1, 2))) err(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "uroce_traffic[%s]: ", role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define note err

static void oob_say(const char *line)
{
	err("%s", line);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000ull),
		.tv_nsec = (long)(ns % 1000000000ull),
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- names ---- */

static const struct {
	int st;
	const char *name;
} wc_status_names[] = {
	{ IBV_WC_SUCCESS, "SUCCESS" },
	{ IBV_WC_LOC_LEN_ERR, "LOC_LEN_ERR" },
	{ IBV_WC_LOC_QP_OP_ERR, "LOC_QP_OP_ERR" },
	{ IBV_WC_LOC_EEC_OP_ERR, "LOC_EEC_OP_ERR" },
	{ IBV_WC_LOC_PROT_ERR, "LOC_PROT_ERR" },
	{ IBV_WC_WR_FLUSH_ERR, "WR_FLUSH_ERR" },
	{ IBV_WC_MW_BIND_ERR, "MW_BIND_ERR" },
	{ IBV_WC_BAD_RESP_ERR, "BAD_RESP_ERR" },
	{ IBV_WC_LOC_ACCESS_ERR, "LOC_ACCESS_ERR" },
	{ IBV_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR" },
	{ IBV_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR" },
	{ IBV_WC_REM_OP_ERR, "REM_OP_ERR" },
	{ IBV_WC_RETRY_EXC_ERR, "RETRY_EXC_ERR" },
	{ IBV_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR" },
	{ IBV_WC_LOC_RDD_VIOL_ERR, "LOC_RDD_VIOL_ERR" },
	{ IBV_WC_REM_INV_RD_REQ_ERR, "REM_INV_RD_REQ_ERR" },
	{ IBV_WC_REM_ABORT_ERR, "REM_ABORT_ERR" },
	{ IBV_WC_INV_EECN_ERR, "INV_EECN_ERR" },
	{ IBV_WC_INV_EEC_STATE_ERR, "INV_EEC_STATE_ERR" },
	{ IBV_WC_FATAL_ERR, "FATAL_ERR" },
	{ IBV_WC_RESP_TIMEOUT_ERR, "RESP_TIMEOUT_ERR" },
	{ IBV_WC_GENERAL_ERR, "GENERAL_ERR" },
};

static const char *st_name(int st)
{
	size_t i;

	for (i = 0; i < sizeof(wc_status_names) / sizeof(wc_status_names[0]);
	     i++)
		if (wc_status_names[i].st == st)
			return wc_status_names[i].name;
	return "?";
}

static int st_parse(const char *s)
{
	size_t i;
	char *end;
	long v;

	if (!strncasecmp(s, "IBV_WC_", 7))
		s += 7;
	for (i = 0; i < sizeof(wc_status_names) / sizeof(wc_status_names[0]);
	     i++)
		if (!strcasecmp(s, wc_status_names[i].name))
			return wc_status_names[i].st;
	v = strtol(s, &end, 10);
	if (*s && !*end && v >= 0 && v < 256)
		return (int)v;
	return -1;
}

static const char *opc_name(int opc)
{
	switch (opc) {
	case IBV_WC_SEND:
		return "SEND";
	case IBV_WC_RDMA_WRITE:
		return "RDMA_WRITE";
	case IBV_WC_RDMA_READ:
		return "RDMA_READ";
	case IBV_WC_COMP_SWAP:
		return "COMP_SWAP";
	case IBV_WC_FETCH_ADD:
		return "FETCH_ADD";
	case IBV_WC_RECV:
		return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM:
		return "RECV_RDMA_WITH_IMM";
	default:
		return "?";
	}
}

static uint64_t canary_check(const uint8_t *p, uint64_t len, uint8_t v)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return i;
	return UINT64_MAX;
}

#define FNV_INIT 0xcbf29ce484222325ull

static uint64_t fnv(uint64_t h, const uint8_t *p, uint64_t len)
{
	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint8_t canary_of(uint64_t key)
{
	return (uint8_t)(0xa5 ^ (key >> 56));
}

static uint32_t imm_of(uint64_t key)
{
	return htobe32((uint32_t)mix64(key ^ 0x1111));
}

/* ---- chunk maps: the scatter/gather layout of one message ---- */

static void map_contig(struct chunk_map *m, uint64_t off, uint64_t len)
{
	m->n = len ? 1 : 0;
	m->off[0] = off;
	m->len[0] = len;
	m->end = off + len;
}

/*
 * Split len + extra bytes into 1..max chunks at a random offset, with
 * random gaps between them, so that each SGE lands somewhere else.
 * The footprint stays below len + extra + 256.
 */
static void map_random(struct chunk_map *m, uint64_t len, unsigned int max,
		       uint64_t extra, uint64_t *rng)
{
	uint64_t cap = len + extra, pos = rng_below(rng, 64), left, l;
	unsigned int n, i;

	m->n = 0;
	m->end = pos;
	if (!cap)
		return;
	n = 1 + (unsigned int)rng_below(rng, cap < max ? cap : max);
	left = cap;
	for (i = 0; i < n; i++) {
		l = i == n - 1 ? left : 1 + rng_below(rng, left - (n - 1 - i));
		m->off[i] = pos;
		m->len[i] = l;
		left -= l;
		pos += l;
		if (i != n - 1)
			pos += 8 + rng_below(rng, 57);
	}
	m->n = n;
	m->end = pos;
}

/* (the map_ functions touch MR contents: MR_ACCESS_BEGIN in pattern.h) */
static void map_prepare(uint8_t *slot, const struct chunk_map *m, uint8_t canary)
{
	MR_ACCESS_BEGIN();
	memset(slot, canary, m->end + GUARD);
	MR_ACCESS_END();
}

/* Fill the first dlen logical bytes; returns their checksum. */
static uint64_t map_fill(uint8_t *slot, const struct chunk_map *m,
			 uint64_t dlen, uint64_t key)
{
	uint64_t h = FNV_INIT, loff = 0, d;
	unsigned int i;

	MR_ACCESS_BEGIN();
	for (i = 0; i < m->n && loff < dlen; i++) {
		d = m->len[i] < dlen - loff ? m->len[i] : dlen - loff;
		pat_fill(slot + m->off[i], d, key, loff);
		h = fnv(h, slot + m->off[i], d);
		loff += d;
	}
	MR_ACCESS_END();
	return h;
}

static uint64_t map_csum(const uint8_t *slot, const struct chunk_map *m,
			 uint64_t dlen)
{
	uint64_t h = FNV_INIT, loff = 0, d;
	unsigned int i;

	MR_ACCESS_BEGIN();
	for (i = 0; i < m->n && loff < dlen; i++) {
		d = m->len[i] < dlen - loff ? m->len[i] : dlen - loff;
		h = fnv(h, slot + m->off[i], d);
		loff += d;
	}
	MR_ACCESS_END();
	return h;
}

/*
 * The first dlen logical bytes of the chunks must hold the pattern and
 * every other byte of [0, end + GUARD) the canary.
 */
static int map_check_mr(struct ctx *c, const char *what, const uint8_t *slot,
			const struct chunk_map *m, uint64_t dlen, uint64_t key,
			uint8_t canary)
{
	uint64_t pos = 0, loff = 0, d, bad;
	unsigned int i;

	for (i = 0; i < m->n; i++) {
		bad = canary_check(slot + pos, m->off[i] - pos, canary);
		if (bad != UINT64_MAX)
			goto canary;
		d = m->len[i] < dlen - loff ? m->len[i] : dlen - loff;
		bad = pat_check(slot + m->off[i], d, key, loff);
		if (bad != UINT64_MAX) {
			err("%s: data mismatch at byte %" PRIu64 " of %" PRIu64
			    " (sge %u, slot offset %" PRIu64
			    "): got 0x%02x, expected 0x%02x",
			    what, loff + bad, dlen, i, m->off[i] + bad,
			    slot[m->off[i] + bad], pat_byte(key, loff + bad));
			c->errors++;
			return -1;
		}
		loff += d;
		pos = m->off[i] + d;
		bad = canary_check(slot + pos, m->off[i] + m->len[i] - pos,
				   canary);
		if (bad != UINT64_MAX)
			goto canary;
		pos = m->off[i] + m->len[i];
	}
	if (loff != dlen) {
		err("%s: %" PRIu64 " bytes do not fit the buffers", what, dlen);
		c->errors++;
		return -1;
	}
	bad = canary_check(slot + pos, m->end + GUARD - pos, canary);
	if (bad == UINT64_MAX)
		return 0;
canary:
	err("%s: byte at slot offset %" PRIu64
	    " outside the message was overwritten: 0x%02x, canary 0x%02x",
	    what, pos + bad, slot[pos + bad], canary);
	c->errors++;
	return -1;
}

static int map_check(struct ctx *c, const char *what, const uint8_t *slot,
		     const struct chunk_map *m, uint64_t dlen, uint64_t key,
		     uint8_t canary)
{
	int r;

	MR_ACCESS_BEGIN();
	r = map_check_mr(c, what, slot, m, dlen, key, canary);
	MR_ACCESS_END();
	return r;
}

/* ---- out-of-band channel (tests/lib/oob.c) ---- */

static int msg_send(struct ctx *c, const struct msg *m)
{
	uint64_t buf[16];
	int i;

	buf[0] = htobe64(m->type);
	for (i = 0; i < 15; i++)
		buf[i + 1] = htobe64(m->v[i]);
	return uroce_oob_send(c->fd, buf, sizeof(buf)) ? -1 : 0;
}

static int msg_recv(struct ctx *c, struct msg *m, uint64_t want)
{
	uint64_t buf[16];
	int i, ret;

	ret = uroce_oob_recv(c->fd, buf, sizeof(buf), c->o->timeout_s);
	if (ret == UROCE_OOB_CLOSED) {
		err("peer closed the out-of-band connection");
		c->fail_sent = true;
	}
	if (ret)
		return -1;
	m->type = be64toh(buf[0]);
	for (i = 0; i < 15; i++)
		m->v[i] = be64toh(buf[i + 1]);
	if (m->type == MSG_FAIL) {
		err("peer reported a failure (see its log)");
		c->fail_sent = true;
		return -1;
	}
	if (want && m->type != want) {
		err("protocol error: message %" PRIu64 ", expected %" PRIu64,
		    m->type, want);
		return -1;
	}
	return 0;
}

static void fail_peer(struct ctx *c)
{
	struct msg m = { .type = MSG_FAIL };

	if (c->fd < 0 || c->fail_sent)
		return;
	c->fail_sent = true;
	msg_send(c, &m);
}

static int oob_listen(struct ctx *c)
{
	c->fd = uroce_oob_listen("uroce_traffic", c->o->port, c->o->port_file,
				 c->o->timeout_s);
	return c->fd < 0 ? -1 : 0;
}

static int oob_connect(struct ctx *c)
{
	c->fd = uroce_oob_connect(c->o->server, c->o->port);
	return c->fd < 0 ? -1 : 0;
}

/* The client's configuration, which the server adopts. */
static int cfg_exchange(struct ctx *c)
{
	struct opts *o = c->o;
	struct msg m = { .type = MSG_CFG };

	if (!c->is_server) {
		m.v[0] = (uint64_t)o->mode;
		m.v[1] = o->nqp;
		m.v[2] = o->max_size;
		m.v[3] = o->mtu;
		m.v[4] = o->seed;
		m.v[5] = o->ops;
		m.v[6] = o->wr_api_pct;
		m.v[7] = o->natomic;
		m.v[8] = o->ncas;
		m.v[9] = (uint64_t)o->retry_cnt;
		m.v[10] = (uint64_t)o->ack_timeout;
		m.v[11] = (uint64_t)o->rnr_retry;
		m.v[12] = (uint64_t)o->min_rnr_timer;
		m.v[13] = o->max_sge;
		m.v[14] = o->no_inline;
		return msg_send(c, &m);
	}
	if (msg_recv(c, &m, MSG_CFG))
		return -1;
	o->mode = (int)m.v[0];
	o->nqp = (unsigned int)m.v[1];
	o->max_size = m.v[2];
	o->mtu = (unsigned int)m.v[3];
	o->seed = m.v[4];
	o->ops = (unsigned int)m.v[5];
	o->wr_api_pct = (unsigned int)m.v[6];
	o->natomic = (unsigned int)m.v[7];
	o->ncas = (unsigned int)m.v[8];
	o->retry_cnt = (int)m.v[9];
	o->ack_timeout = (int)m.v[10];
	o->rnr_retry = (int)m.v[11];
	o->min_rnr_timer = (int)m.v[12];
	o->max_sge = (unsigned int)m.v[13];
	o->no_inline = m.v[14];
	if (o->nqp < 1 || o->nqp > MAX_QPS || o->max_sge < 1 ||
	    o->max_sge > MAX_SGE || o->max_size > (1ull << 40) ||
	    o->mode > MODE_EXPECT) {
		err("bad configuration from the client");
		return -1;
	}
	return 0;
}

/* ---- device and memory ---- */

static int dev_open(struct ctx *c)
{
	struct ibv_device **list;
	int n, i;

	list = ibv_get_device_list(&n);
	if (!list) {
		err("ibv_get_device_list: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!c->o->dev_name ||
		    !strcmp(ibv_get_device_name(list[i]), c->o->dev_name))
			break;
	if (i == n) {
		if (c->o->dev_name)
			err("no RDMA device named %s", c->o->dev_name);
		else
			err("no RDMA device found");
		ibv_free_device_list(list);
		return -1;
	}
	c->ctx = ibv_open_device(list[i]);
	if (!c->ctx) {
		err("ibv_open_device(%s): %s", ibv_get_device_name(list[i]),
		    strerror(errno));
		ibv_free_device_list(list);
		return -1;
	}
	ibv_free_device_list(list);
	if (ibv_query_device(c->ctx, &c->dattr)) {
		err("ibv_query_device failed");
		return -1;
	}
	if (ibv_query_port(c->ctx, PORT_NUM, &c->pattr)) {
		err("ibv_query_port failed");
		return -1;
	}
	if (ibv_query_gid(c->ctx, PORT_NUM, 0, &c->gid)) {
		err("ibv_query_gid(index 0) failed");
		return -1;
	}
	for (i = 0; i < 16 && !c->gid.raw[i]; i++)
		;
	if (i == 16) {
		err("GID index 0 is empty");
		return -1;
	}
	return 0;
}

static void *map_mem(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static struct ibv_mr *reg(struct ctx *c, void *p, size_t len, int access,
			  const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(c->pd, p, len, access);

	if (!mr)
		err("ibv_reg_mr(%s, %zu bytes): %s", what, len, strerror(errno));
	return mr;
}

static int res_setup(struct ctx *c)
{
	const struct opts *o = c->o;
	int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	unsigned int i;
	int cqe;

	c->nqp = o->mode == MODE_TRAFFIC ? o->nqp : 1;
	for (i = 0; i < OP_CAS; i++)
		if (o->ops & (1u << i))
			c->dops[c->ndops++] = i;
	c->max_sge = o->max_sge;
	if ((int)c->max_sge > c->dattr.max_sge)
		c->max_sge = (unsigned int)c->dattr.max_sge;
	if (!c->max_sge)
		c->max_sge = 1;
	c->rd_atomic = c->dattr.max_qp_rd_atom < 16 ? c->dattr.max_qp_rd_atom :
						      16;
	if (c->rd_atomic < 1)
		c->rd_atomic = 1;
	if (o->max_size > c->pattr.max_msg_sz && o->mode == MODE_TRAFFIC) {
		err("size %" PRIu64 " exceeds the port's max_msg_sz %u",
		    o->max_size, c->pattr.max_msg_sz);
		return -1;
	}
	if ((o->ops & OPS_ATOMIC) && c->dattr.atomic_cap == IBV_ATOMIC_NONE) {
		err("atomics requested but the device reports IBV_ATOMIC_NONE");
		return -1;
	}

	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd) {
		err("ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	cqe = (int)(c->nqp * SQ_DEPTH);
	if (cqe > c->dattr.max_cqe)
		cqe = c->dattr.max_cqe;
	c->cq[0] = ibv_create_cq(c->ctx, cqe, NULL, NULL, 0);
	cqe = (int)(c->nqp * RQ_DEPTH);
	if (cqe > c->dattr.max_cqe)
		cqe = c->dattr.max_cqe;
	c->cq[1] = ibv_create_cq(c->ctx, cqe, NULL, NULL, 0);
	if (!c->cq[0] || !c->cq[1]) {
		err("ibv_create_cq: %s", strerror(errno));
		return -1;
	}
	c->qps = calloc(c->nqp, sizeof(*c->qps));
	if (!c->qps) {
		err("out of memory");
		return -1;
	}

	c->slot = (o->max_size + SLOT_PAD + 4095) & ~(size_t)4095;
	if (c->is_server) {
		c->tlen = c->slot * c->nqp;
		c->tbuf = map_mem(c->tlen);
		if (!c->tbuf) {
			err("cannot map %zu bytes", c->tlen);
			return -1;
		}
		c->tmr = reg(c, c->tbuf, c->tlen, full, "target");
		if (!c->tmr)
			return -1;
	} else {
		c->llen = c->slot * c->nqp;
		c->lbuf = map_mem(c->llen);
		if (!c->lbuf) {
			err("cannot map %zu bytes", c->llen);
			return -1;
		}
		c->lmr = reg(c, c->lbuf, c->llen, IBV_ACCESS_LOCAL_WRITE,
			     "local");
		if (!c->lmr)
			return -1;
	}

	c->alen = (4096 + 8 * (c->nqp + 1) + 4095) & ~(size_t)4095;
	c->abuf = map_mem(c->alen);
	c->areslen = ((size_t)c->nqp * (o->natomic + 2 * o->ncas + 2) * 8 +
		      4096 + 4095) &
		     ~(size_t)4095;
	c->ares = map_mem(c->areslen);
	if (!c->abuf || !c->ares) {
		err("out of memory");
		return -1;
	}
	c->amr = reg(c, c->abuf, c->alen, full, "atomic");
	c->aresmr = reg(c, c->ares, c->areslen, IBV_ACCESS_LOCAL_WRITE,
			"atomic results");
	if (!c->amr || !c->aresmr)
		return -1;

	if (c->is_server && o->mode == MODE_ACCESS) {
		c->rlen = 4096;
		c->rbuf = map_mem(c->rlen);
		if (!c->rbuf)
			return -1;
		c->ro_mr = reg(c, c->rbuf, c->rlen, IBV_ACCESS_REMOTE_READ,
			       "read-only");
		c->nr_mr = reg(c, c->rbuf, c->rlen,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			       "write-only");
		if (!c->ro_mr || !c->nr_mr)
			return -1;
	}
	return 0;
}

static void res_free(struct ctx *c)
{
	unsigned int i;

	for (i = 0; c->qps && i < c->nqp; i++)
		if (c->qps[i].qp && ibv_destroy_qp(c->qps[i].qp))
			err("ibv_destroy_qp failed");
	free(c->qps);
	if (c->ro_mr)
		ibv_dereg_mr(c->ro_mr);
	if (c->nr_mr)
		ibv_dereg_mr(c->nr_mr);
	if (c->aresmr)
		ibv_dereg_mr(c->aresmr);
	if (c->amr)
		ibv_dereg_mr(c->amr);
	if (c->lmr)
		ibv_dereg_mr(c->lmr);
	if (c->tmr)
		ibv_dereg_mr(c->tmr);
	for (i = 0; i < 2; i++)
		if (c->cq[i])
			ibv_destroy_cq(c->cq[i]);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	if (c->rbuf)
		munmap(c->rbuf, c->rlen);
	if (c->ares)
		munmap(c->ares, c->areslen);
	if (c->abuf)
		munmap(c->abuf, c->alen);
	if (c->lbuf)
		munmap(c->lbuf, c->llen);
	if (c->tbuf)
		munmap(c->tbuf, c->tlen);
}

static void mr_put(uint64_t *v, const struct ibv_mr *mr, const void *p,
		   size_t len)
{
	v[0] = mr ? (uint64_t)(uintptr_t)p : 0;
	v[1] = mr ? len : 0;
	v[2] = mr ? mr->rkey : 0;
}

static void mr_get(struct rmr *r, const uint64_t *v)
{
	r->addr = v[0];
	r->len = v[1];
	r->rkey = (uint32_t)v[2];
}

static int mr_exchange(struct ctx *c)
{
	struct msg m = { .type = MSG_MR };

	mr_put(&m.v[0], c->tmr, c->tbuf, c->tlen);
	mr_put(&m.v[3], c->amr, c->abuf, c->alen);
	mr_put(&m.v[6], c->ro_mr, c->rbuf, c->rlen);
	mr_put(&m.v[9], c->nr_mr, c->rbuf, c->rlen);
	if (msg_send(c, &m) || msg_recv(c, &m, MSG_MR))
		return -1;
	mr_get(&c->peer_t, &m.v[0]);
	mr_get(&c->peer_a, &m.v[3]);
	mr_get(&c->peer_ro, &m.v[6]);
	mr_get(&c->peer_nr, &m.v[9]);
	return 0;
}

/* ---- QPs ---- */

static enum ibv_mtu mtu_enum(unsigned int mtu)
{
	switch (mtu) {
	case 256:
		return IBV_MTU_256;
	case 512:
		return IBV_MTU_512;
	case 1024:
		return IBV_MTU_1024;
	case 2048:
		return IBV_MTU_2048;
	default:
		return IBV_MTU_4096;
	}
}

#define SEND_OPS \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static int qp_create(struct ctx *c, unsigned int idx)
{
	struct qp_ctx *q = &c->qps[idx];
	bool ex = c->o->wr_api_pct > 0;
	uint32_t inl = c->o->no_inline ? 0 : MAX_INLINE_REQ;
	struct ibv_qp_cap cap;
	int ret;

	memset(q, 0, sizeof(*q));
	for (;;) {
		memset(&cap, 0, sizeof(cap));
		cap.max_send_wr = SQ_DEPTH;
		cap.max_recv_wr = RQ_DEPTH;
		cap.max_send_sge = c->max_sge;
		cap.max_recv_sge = c->max_sge;
		cap.max_inline_data = inl;
		if (ex) {
			struct ibv_qp_init_attr_ex a = {
				.qp_type = IBV_QPT_RC,
				.send_cq = c->cq[0],
				.recv_cq = c->cq[1],
				.cap = cap,
				.comp_mask = IBV_QP_INIT_ATTR_PD |
					     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
				.pd = c->pd,
				.send_ops_flags = SEND_OPS,
			};

			q->qp = ibv_create_qp_ex(c->ctx, &a);
			cap = a.cap;
		} else {
			struct ibv_qp_init_attr a = {
				.qp_type = IBV_QPT_RC,
				.send_cq = c->cq[0],
				.recv_cq = c->cq[1],
				.cap = cap,
			};

			q->qp = ibv_create_qp(c->pd, &a);
			cap = a.cap;
		}
		if (q->qp || !inl)
			break;
		note("create QP with max_inline_data=%u failed (%s), "
		     "retrying without inline data",
		     inl, strerror(errno));
		inl = 0;
	}
	if (!q->qp) {
		err("ibv_create_qp%s: %s", ex ? "_ex" : "", strerror(errno));
		return -1;
	}
	q->max_inline = inl ? cap.max_inline_data : 0;
	if (ex) {
		q->qpx = ibv_qp_to_qp_ex(q->qp);
		if (!q->qpx) {
			err("ibv_qp_to_qp_ex returned NULL");
			return -1;
		}
	}
	/* QP 0 starts just below the 24-bit wrap so rounds cross it. */
	q->psn = idx ? (uint32_t)rng_next(&c->rng) & 0xffffff :
		       0xfffff0u + (uint32_t)rng_below(&c->rng, 8);
	ret = uroce_test_rc_init(q->qp, IBV_ACCESS_LOCAL_WRITE |
						IBV_ACCESS_REMOTE_WRITE |
						IBV_ACCESS_REMOTE_READ |
						IBV_ACCESS_REMOTE_ATOMIC);
	if (ret) {
		err("modify QP to INIT: %s", strerror(ret));
		return -1;
	}
	return 0;
}

static int qp_connect(struct ctx *c, struct qp_ctx *q, int rnr_retry)
{
	const struct opts *o = c->o;
	struct uroce_test_rc r = {
		.dqpn = q->rqpn,
		.rq_psn = q->rpsn,
		.sq_psn = q->psn,
		.dgid = q->rgid,
		.mtu = mtu_enum(o->mtu),
		.max_dest_rd_atomic = (uint8_t)c->rd_atomic,
		.max_rd_atomic = (uint8_t)c->rd_atomic,
		.min_rnr_timer = (uint8_t)o->min_rnr_timer,
		.timeout = (uint8_t)o->ack_timeout,
		.retry_cnt = (uint8_t)o->retry_cnt,
		.rnr_retry = (uint8_t)rnr_retry,
	};
	int ret;

	ret = uroce_test_rc_rtr(q->qp, &r);
	if (ret) {
		err("modify QP 0x%x to RTR: %s", q->qp->qp_num, strerror(ret));
		return -1;
	}
	ret = uroce_test_rc_rts(q->qp, &r);
	if (ret) {
		err("modify QP 0x%x to RTS: %s", q->qp->qp_num, strerror(ret));
		return -1;
	}
	return 0;
}

static int qp_exchange(struct ctx *c)
{
	struct msg m;
	unsigned int i;

	for (i = 0; i < c->nqp; i++) {
		memset(&m, 0, sizeof(m));
		m.type = MSG_QP;
		m.v[0] = i;
		m.v[1] = c->qps[i].qp->qp_num;
		m.v[2] = c->qps[i].psn;
		memcpy(&m.v[3], c->gid.raw, 8);
		memcpy(&m.v[4], c->gid.raw + 8, 8);
		if (msg_send(c, &m))
			return -1;
	}
	for (i = 0; i < c->nqp; i++) {
		if (msg_recv(c, &m, MSG_QP))
			return -1;
		if (m.v[0] != i) {
			err("protocol error: QP info %" PRIu64 ", expected %u",
			    m.v[0], i);
			return -1;
		}
		c->qps[i].rqpn = (uint32_t)m.v[1];
		c->qps[i].rpsn = (uint32_t)m.v[2];
		memcpy(c->qps[i].rgid.raw, &m.v[3], 8);
		memcpy(c->qps[i].rgid.raw + 8, &m.v[4], 8);
	}
	return 0;
}

static int qp_state(struct qp_ctx *q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(q->qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

/* ---- completions ---- */

static struct expect *exp_push(struct ctx *c, struct qp_ctx *q, int rq)
{
	struct exp_ring *r = &q->ring[rq];
	struct expect *e;

	if (r->tail - r->head >= RING_SIZE)
		return NULL;
	e = &r->e[r->tail++ % RING_SIZE];
	memset(e, 0, sizeof(*e));
	e->wr_id = ((uint64_t)(q - c->qps) << 32) | q->seq++;
	e->status = IBV_WC_SUCCESS;
	e->byte_len = -1;
	c->pend[rq]++;
	return e;
}

static int wc_opcode_of(int op)
{
	switch (op) {
	case OP_WRITE:
	case OP_WRITE_IMM:
		return IBV_WC_RDMA_WRITE;
	case OP_READ:
		return IBV_WC_RDMA_READ;
	case OP_CAS:
		return IBV_WC_COMP_SWAP;
	case OP_FADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

/* Expect a send-queue completion for d (of len bytes); sets d->wr_id. */
static int exp_send(struct ctx *c, struct qp_ctx *q, struct wr_desc *d,
		    uint64_t len, int status)
{
	struct expect *e = exp_push(c, q, 0);

	if (!e) {
		err("send queue tracking overflow");
		return -1;
	}
	e->status = status;
	e->opcode = wc_opcode_of(d->op);
	if (d->op == OP_READ)
		e->byte_len = (int64_t)len;
	else if (d->op == OP_CAS || d->op == OP_FADD)
		e->byte_len = 8;
	e->bytes = len;
	d->wr_id = e->wr_id;
	return 0;
}

static int wc_fail(struct ctx *c, const struct ibv_wc *wc, int rq)
{
	c->errors++;
	err("%s completion wr_id 0x%" PRIx64 " qp 0x%x: status %s (%d), "
	    "vendor_err 0x%x, opcode %s, byte_len %u",
	    rq ? "receive" : "send", wc->wr_id, wc->qp_num, st_name(wc->status),
	    wc->status, wc->vendor_err, opc_name(wc->opcode), wc->byte_len);
	return -1;
}

static int wc_check(struct ctx *c, const struct ibv_wc *wc, int rq)
{
	uint64_t idx = wc->wr_id >> 32;
	struct exp_ring *r;
	struct expect *e;
	struct qp_ctx *q;
	bool imm;

	c->completions++;
	if (idx >= c->nqp || !c->qps[idx].qp) {
		wc_fail(c, wc, rq);
		err("  unexpected wr_id");
		return -1;
	}
	q = &c->qps[idx];
	r = &q->ring[rq];
	if (r->head == r->tail) {
		wc_fail(c, wc, rq);
		err("  no completion was expected on this QP");
		return -1;
	}
	e = &r->e[r->head % RING_SIZE];
	if (wc->wr_id != e->wr_id) {
		wc_fail(c, wc, rq);
		err("  out of order: expected wr_id 0x%" PRIx64, e->wr_id);
		return -1;
	}
	if (wc->qp_num != q->qp->qp_num) {
		wc_fail(c, wc, rq);
		err("  qp_num: expected 0x%x", q->qp->qp_num);
		return -1;
	}
	if ((int)wc->status != e->status) {
		wc_fail(c, wc, rq);
		err("  expected status %s", st_name(e->status));
		return -1;
	}
	if (wc->status == IBV_WC_SUCCESS) {
		if ((int)wc->opcode != e->opcode) {
			wc_fail(c, wc, rq);
			err("  expected opcode %s", opc_name(e->opcode));
			return -1;
		}
		if (e->byte_len >= 0 && wc->byte_len != e->byte_len) {
			wc_fail(c, wc, rq);
			err("  expected byte_len %" PRId64, e->byte_len);
			return -1;
		}
		imm = wc->wc_flags & IBV_WC_WITH_IMM;
		if (rq &&
		    (imm != e->has_imm || (imm && wc->imm_data != e->imm))) {
			wc_fail(c, wc, rq);
			err("  imm: got %s 0x%08x, expected %s 0x%08x",
			    imm ? "flag" : "no flag", be32toh(wc->imm_data),
			    e->has_imm ? "flag" : "no flag", be32toh(e->imm));
			return -1;
		}
		c->bytes_moved += e->bytes;
	}
	r->head++;
	c->pend[rq]--;
	return 0;
}

static int cq_poll(struct ctx *c, int rq)
{
	struct ibv_wc wc[32];
	int n, i;

	n = ibv_poll_cq(c->cq[rq], 32, wc);
	if (n < 0) {
		err("ibv_poll_cq: %d", n);
		c->errors++;
		return -1;
	}
	for (i = 0; i < n; i++)
		if (wc_check(c, &wc[i], rq))
			return -1;
	return n;
}

/* Let the library's threads (and the peer process) run while we wait. */
static void idle_wait(unsigned int *idle)
{
	if (++*idle < 16)
		return;
	if (*idle < 512)
		sched_yield();
	else
		sleep_ns(20000);
}

static int cq_timeout(struct ctx *c, int rq)
{
	unsigned int i;
	struct exp_ring *r;

	c->errors++;
	err("timed out after %u s without progress, %u %s completions "
	    "outstanding",
	    c->o->timeout_s, c->pend[rq], rq ? "receive" : "send");
	for (i = 0; i < c->nqp; i++) {
		r = &c->qps[i].ring[rq];
		if (r->head != r->tail)
			err("  QP %u (0x%x): %u outstanding, next wr_id 0x%" PRIx64
			    " %s",
			    i, c->qps[i].qp->qp_num, r->tail - r->head,
			    r->e[r->head % RING_SIZE].wr_id,
			    st_name(r->e[r->head % RING_SIZE].status));
	}
	return -1;
}

/* Wait for every expected completion of one queue kind. */
static int cq_drain(struct ctx *c, int rq)
{
	uint64_t deadline = now_ns() + c->o->timeout_s * 1000000000ull;
	unsigned int idle = 0;
	int n;

	while (c->pend[rq]) {
		n = cq_poll(c, rq);
		if (n < 0)
			return -1;
		if (n) {
			idle = 0;
			deadline = now_ns() + c->o->timeout_s * 1000000000ull;
			continue;
		}
		if (now_ns() > deadline)
			return cq_timeout(c, rq);
		idle_wait(&idle);
	}
	return 0;
}

/* ---- posting ---- */

static enum ibv_wr_opcode wr_opcode_of(int op)
{
	switch (op) {
	case OP_WRITE:
		return IBV_WR_RDMA_WRITE;
	case OP_WRITE_IMM:
		return IBV_WR_RDMA_WRITE_WITH_IMM;
	case OP_READ:
		return IBV_WR_RDMA_READ;
	case OP_SEND_IMM:
		return IBV_WR_SEND_WITH_IMM;
	case OP_CAS:
		return IBV_WR_ATOMIC_CMP_AND_SWP;
	case OP_FADD:
		return IBV_WR_ATOMIC_FETCH_AND_ADD;
	default:
		return IBV_WR_SEND;
	}
}

static int post_classic(struct ctx *c, struct qp_ctx *q, struct wr_desc *d,
			unsigned int n)
{
	struct ibv_send_wr wr[POST_BATCH], *bad = NULL;
	unsigned int i;
	int ret;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		wr[i].wr_id = d[i].wr_id;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = d[i].nsge ? d[i].sge : NULL;
		wr[i].num_sge = (int)d[i].nsge;
		wr[i].opcode = wr_opcode_of(d[i].op);
		wr[i].send_flags = IBV_SEND_SIGNALED |
				   (d[i].inl ? IBV_SEND_INLINE : 0);
		wr[i].imm_data = d[i].imm;
		if (d[i].op == OP_CAS || d[i].op == OP_FADD) {
			wr[i].wr.atomic.remote_addr = d[i].raddr;
			wr[i].wr.atomic.rkey = d[i].rkey;
			wr[i].wr.atomic.compare_add = d[i].cmp_add;
			wr[i].wr.atomic.swap = d[i].swap;
		} else {
			wr[i].wr.rdma.remote_addr = d[i].raddr;
			wr[i].wr.rdma.rkey = d[i].rkey;
		}
	}
	ret = ibv_post_send(q->qp, wr, &bad);
	if (ret) {
		err("ibv_post_send: %s (failed at wr %td of %u)", strerror(ret),
		    bad ? bad - wr : -1, n);
		c->errors++;
		return -1;
	}
	return 0;
}

static int post_ex(struct ctx *c, struct qp_ctx *q, struct wr_desc *d,
		   unsigned int n)
{
	struct ibv_qp_ex *qx = q->qpx;
	struct ibv_data_buf buf[MAX_SGE];
	unsigned int i, k;
	int ret;

	ibv_wr_start(qx);
	for (i = 0; i < n; i++) {
		qx->wr_id = d[i].wr_id;
		qx->wr_flags = IBV_SEND_SIGNALED |
			       (d[i].inl ? IBV_SEND_INLINE : 0);
		switch (d[i].op) {
		case OP_WRITE:
			ibv_wr_rdma_write(qx, d[i].rkey, d[i].raddr);
			break;
		case OP_WRITE_IMM:
			ibv_wr_rdma_write_imm(qx, d[i].rkey, d[i].raddr,
					      d[i].imm);
			break;
		case OP_READ:
			ibv_wr_rdma_read(qx, d[i].rkey, d[i].raddr);
			break;
		case OP_SEND:
			ibv_wr_send(qx);
			break;
		case OP_SEND_IMM:
			ibv_wr_send_imm(qx, d[i].imm);
			break;
		case OP_CAS:
			ibv_wr_atomic_cmp_swp(qx, d[i].rkey, d[i].raddr,
					      d[i].cmp_add, d[i].swap);
			break;
		case OP_FADD:
			ibv_wr_atomic_fetch_add(qx, d[i].rkey, d[i].raddr,
						d[i].cmp_add);
			break;
		}
		if (d[i].inl) {
			for (k = 0; k < d[i].nsge; k++) {
				buf[k].addr = (void *)(uintptr_t)d[i].sge[k].addr;
				buf[k].length = d[i].sge[k].length;
			}
			ibv_wr_set_inline_data_list(qx, d[i].nsge, buf);
		} else if (d[i].nsge == 1) {
			ibv_wr_set_sge(qx, d[i].sge[0].lkey, d[i].sge[0].addr,
				       d[i].sge[0].length);
		} else {
			ibv_wr_set_sge_list(qx, d[i].nsge, d[i].sge);
		}
	}
	ret = ibv_wr_complete(qx);
	if (ret) {
		err("ibv_wr_complete: %s", strerror(ret));
		c->errors++;
		return -1;
	}
	return 0;
}

/* Post n WRs, chaining runs that use the same API into one call. */
static int post_descs(struct ctx *c, struct qp_ctx *q, struct wr_desc *d,
		      unsigned int n)
{
	unsigned int i = 0, j;
	int ret;

	while (i < n) {
		for (j = i + 1;
		     j < n && j - i < POST_BATCH && d[j].ex == d[i].ex; j++)
			;
		ret = d[i].ex && q->qpx ? post_ex(c, q, d + i, j - i) :
					  post_classic(c, q, d + i, j - i);
		if (ret)
			return -1;
		i = j;
	}
	return 0;
}

static bool use_ex(struct ctx *c, struct qp_ctx *q)
{
	return q->qpx && rng_below(&c->rng, 100) < c->o->wr_api_pct;
}

static void desc_sges(struct wr_desc *d, const struct chunk_map *m,
		      uint8_t *slot, uint32_t lkey)
{
	unsigned int i;

	d->nsge = m->n;
	for (i = 0; i < m->n; i++) {
		d->sge[i].addr = (uint64_t)(uintptr_t)(slot + m->off[i]);
		d->sge[i].length = (uint32_t)m->len[i];
		d->sge[i].lkey = lkey;
	}
}

static int post_recv_map(struct ctx *c, struct qp_ctx *q, uint8_t *slot,
			 const struct chunk_map *m, int opcode, uint64_t len,
			 bool has_imm, uint32_t imm)
{
	struct ibv_sge sge[MAX_SGE];
	struct ibv_recv_wr wr, *bad = NULL;
	struct expect *e = exp_push(c, q, 1);
	unsigned int i;
	int ret;

	if (!e) {
		err("receive queue tracking overflow");
		return -1;
	}
	e->opcode = opcode;
	e->byte_len = (int64_t)len;
	e->has_imm = has_imm;
	e->imm = imm;
	e->bytes = len;
	for (i = 0; i < m->n; i++) {
		sge[i].addr = (uint64_t)(uintptr_t)(slot + m->off[i]);
		sge[i].length = (uint32_t)m->len[i];
		sge[i].lkey = c->tmr->lkey;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = e->wr_id;
	wr.sg_list = m->n ? sge : NULL;
	wr.num_sge = (int)m->n;
	ret = ibv_post_recv(q->qp, &wr, &bad);
	if (ret) {
		err("ibv_post_recv: %s", strerror(ret));
		c->errors++;
		return -1;
	}
	return 0;
}

/* ---- traffic rounds ---- */

static int op_for(struct ctx *c, uint64_t base, unsigned int qp)
{
	return (int)c->dops[(base + qp) % c->ndops];
}

static uint64_t round_key(struct ctx *c, uint64_t round, unsigned int qp)
{
	return key_of(c->o->seed, round, qp, 0xda7a);
}

static int cli_round(struct ctx *c, uint64_t round, uint64_t base, uint64_t len)
{
	uint64_t roff = rng_below(&c->rng, 64);
	struct msg m = {
		.type = MSG_ROUND,
		.v = { round, base, len, roff },
	};
	struct wr_desc d;
	struct qp_ctx *q;
	uint8_t *slot;
	unsigned int i, k;
	char what[96];

	if (msg_send(c, &m) || msg_recv(c, &m, MSG_READY))
		return -1;
	for (i = 0; i < c->nqp; i++) {
		q = &c->qps[i];
		slot = c->lbuf + i * c->slot;
		q->op = op_for(c, base, i);
		q->len = len;
		q->key = round_key(c, round, i);
		q->canary = canary_of(q->key);
		map_random(&q->map, len, c->max_sge, 0, &c->rng);
		map_prepare(slot, &q->map, q->canary);
		if (q->op != OP_READ)
			q->csum = map_fill(slot, &q->map, len, q->key);
		memset(&d, 0, sizeof(d));
		d.op = q->op;
		desc_sges(&d, &q->map, slot, c->lmr->lkey);
		d.raddr = c->peer_t.addr + i * c->slot + roff;
		d.rkey = c->peer_t.rkey;
		d.imm = imm_of(q->key);
		d.inl = q->op != OP_READ && len && len <= q->max_inline &&
			(rng_next(&c->rng) & 1);
		d.ex = use_ex(c, q);
		if (exp_send(c, q, &d, len, IBV_WC_SUCCESS) ||
		    post_descs(c, q, &d, 1))
			return -1;
		/* Inline data belongs to the library once posted: scribble. */
		if (d.inl)
			for (k = 0; k < q->map.n; k++)
				memset(slot + q->map.off[k], 0xee,
				       q->map.len[k]);
	}
	if (cq_drain(c, 0))
		return -1;
	for (i = 0; i < c->nqp; i++) {
		q = &c->qps[i];
		if (q->op != OP_READ)
			continue;
		snprintf(what, sizeof(what),
			 "round %" PRIu64 " QP %u read of %" PRIu64 " bytes",
			 round, i, len);
		if (map_check(c, what, c->lbuf + i * c->slot, &q->map, len,
			      q->key, q->canary))
			return -1;
		c->bytes_verified += len;
	}
	for (i = 0; i < c->nqp; i++) {
		m = (struct msg){
			.type = MSG_VERIFY,
			.v = { round, i, c->qps[i].csum },
		};
		if (msg_send(c, &m))
			return -1;
	}
	if (msg_recv(c, &m, MSG_RESULT))
		return -1;
	if (m.v[0] != round || !m.v[1]) {
		err("round %" PRIu64 ": server reports failure", round);
		c->errors++;
		return -1;
	}
	return 0;
}

static int srv_round_prep(struct ctx *c, const struct msg *m)
{
	uint64_t round = m->v[0], base = m->v[1], len = m->v[2];
	uint64_t roff = m->v[3];
	struct qp_ctx *q;
	uint8_t *slot;
	unsigned int i;
	struct msg r = { .type = MSG_READY };

	if (len > c->o->max_size || roff >= 64 || !c->ndops) {
		err("protocol error: bad round");
		return -1;
	}
	for (i = 0; i < c->nqp; i++) {
		q = &c->qps[i];
		slot = c->tbuf + i * c->slot;
		q->op = op_for(c, base, i);
		q->len = len;
		q->key = round_key(c, round, i);
		q->canary = canary_of(q->key);
		if (q->op == OP_SEND || q->op == OP_SEND_IMM)
			map_random(&q->map, len, c->max_sge,
				   rng_below(&c->rng, 65), &c->rng);
		else
			map_contig(&q->map, roff, len);
		map_prepare(slot, &q->map, q->canary);
		switch (q->op) {
		case OP_READ:
			map_fill(slot, &q->map, len, q->key);
			break;
		case OP_SEND:
		case OP_SEND_IMM:
			if (post_recv_map(c, q, slot, &q->map, IBV_WC_RECV, len,
					  q->op == OP_SEND_IMM, imm_of(q->key)))
				return -1;
			break;
		case OP_WRITE_IMM: {
			struct chunk_map none = { .n = 0 };

			if (post_recv_map(c, q, slot, &none,
					  IBV_WC_RECV_RDMA_WITH_IMM, len, true,
					  imm_of(q->key)))
				return -1;
			break;
		}
		}
	}
	return msg_send(c, &r);
}

static int srv_round_check(struct ctx *c, uint64_t round, const uint64_t *csum)
{
	struct msg r = { .type = MSG_RESULT, .v = { round, 1 } };
	struct qp_ctx *q;
	uint8_t *slot;
	unsigned int i;
	uint64_t h;
	char what[96];

	if (cq_drain(c, 1))
		return -1;
	for (i = 0; i < c->nqp; i++) {
		q = &c->qps[i];
		slot = c->tbuf + i * c->slot;
		snprintf(what, sizeof(what),
			 "round %" PRIu64 " QP %u %s of %" PRIu64 " bytes",
			 round, i, op_name[q->op], q->len);
		if (map_check(c, what, slot, &q->map, q->len, q->key, q->canary))
			return -1;
		if (q->op == OP_READ)
			continue;
		h = map_csum(slot, &q->map, q->len);
		if (h != csum[i]) {
			err("%s: checksum 0x%016" PRIx64
			    " differs from the writer's 0x%016" PRIx64,
			    what, h, csum[i]);
			c->errors++;
			return -1;
		}
		c->bytes_verified += q->len;
	}
	return msg_send(c, &r);
}

/* ---- atomics ---- */

struct aop {
	bool cas;
	uint64_t a;	 /* add, or compare */
	uint64_t b;	 /* swap */
	uint64_t expect; /* CAS: the value it must return */
};

struct fres {
	uint64_t v; /* returned original value */
	uint64_t add;
};

static uint64_t counter_init(struct ctx *c, int owner)
{
	return key_of(c->o->seed, 0xc0, (uint64_t)owner, 0) >> 24;
}

static uint64_t add_val(struct ctx *c, int issuer, unsigned int qp,
			unsigned int k)
{
	return 1 + key_of(c->o->seed, 0xad00 + (uint64_t)issuer, qp, k) % 1000;
}

static uint64_t cas_val(struct ctx *c, int issuer, unsigned int qp,
			unsigned int j)
{
	return key_of(c->o->seed, 0xca00 + (uint64_t)issuer, qp, j);
}

static unsigned int n_fadd(struct ctx *c)
{
	return c->o->ops & (1u << OP_FADD) ? c->o->natomic : 0;
}

static unsigned int n_cas(struct ctx *c)
{
	return c->o->ops & (1u << OP_CAS) ? c->o->ncas : 0;
}

static unsigned int aops_per_qp(struct ctx *c)
{
	return n_fadd(c) + 2 * n_cas(c) + 2;
}

/*
 * Fetch-adds interleaved with a CAS chain: each CAS swaps chain value j
 * for j + 1; every third step is first tried with a wrong compare value,
 * which must fail and return the current value.  The chain values are
 * known in advance, so the whole chain can be pipelined.
 */
static unsigned int aops_build(struct ctx *c, unsigned int qp, struct aop *ops)
{
	unsigned int nf = n_fadd(c), nc = n_cas(c), n = 0, f = 0, j = 0;
	bool missed = false;
	uint64_t x;

	while (f < nf || j < nc) {
		if (f < nf) {
			ops[n++] = (struct aop){
				.a = add_val(c, c->side, qp, f++),
			};
		}
		if (j < nc) {
			x = cas_val(c, c->side, qp, j);
			if (j % 3 == 2 && !missed) {
				ops[n++] = (struct aop){
					.cas = true,
					.a = x ^ 0x8000000000000001ull,
					.b = ~x,
					.expect = x,
				};
				missed = true;
			} else {
				ops[n++] = (struct aop){
					.cas = true,
					.a = x,
					.b = cas_val(c, c->side, qp, j + 1),
					.expect = x,
				};
				j++;
				missed = false;
			}
		}
	}
	return n;
}

static void atomic_init_own(struct ctx *c)
{
	int peer = 1 - c->side;
	unsigned int i;

	c->abuf[0] = counter_init(c, c->side);
	for (i = 0; i < c->nqp; i++)
		c->abuf[1 + i] = cas_val(c, peer, i, 0);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static int fres_cmp(const void *a, const void *b)
{
	const struct fres *x = a, *y = b;

	return x->v < y->v ? -1 : x->v > y->v;
}

/* Issue this side's atomics at the peer; collect fetch-add results. */
static int atomic_run(struct ctx *c, struct fres *fr, unsigned int *nfr)
{
	unsigned int per = aops_per_qp(c), i, k, nb;
	unsigned int *n = calloc(c->nqp, sizeof(*n));
	unsigned int *posted = calloc(c->nqp, sizeof(*posted));
	struct aop *ops = calloc((size_t)c->nqp * per, sizeof(*ops));
	struct wr_desc d[POST_BATCH];
	uint64_t deadline, *res;
	unsigned int idle = 0;
	struct qp_ctx *q;
	struct aop *a;
	bool more;
	int ret = -1, got;

	if (!n || !posted || !ops) {
		err("out of memory");
		goto out;
	}
	for (i = 0; i < c->nqp; i++)
		n[i] = aops_build(c, i, ops + (size_t)i * per);
	memset(c->ares, 0x5a, c->areslen);
	deadline = now_ns() + c->o->timeout_s * 1000000000ull;
	for (;;) {
		more = false;
		for (i = 0; i < c->nqp; i++) {
			q = &c->qps[i];
			while (posted[i] < n[i] &&
			       q->ring[0].tail - q->ring[0].head <
				       ATOMIC_WINDOW) {
				for (nb = 0; nb < POST_BATCH && posted[i] < n[i];
				     nb++, posted[i]++) {
					k = posted[i];
					a = &ops[(size_t)i * per + k];
					memset(&d[nb], 0, sizeof(d[nb]));
					d[nb].op = a->cas ? OP_CAS : OP_FADD;
					d[nb].nsge = 1;
					d[nb].sge[0].addr =
						(uint64_t)(uintptr_t)&c
							->ares[(size_t)i * per + k];
					d[nb].sge[0].length = 8;
					d[nb].sge[0].lkey = c->aresmr->lkey;
					d[nb].raddr = c->peer_a.addr +
						      (a->cas ? 8 * (1 + i) : 0);
					d[nb].rkey = c->peer_a.rkey;
					d[nb].cmp_add = a->a;
					d[nb].swap = a->b;
					d[nb].ex = use_ex(c, q);
					if (exp_send(c, q, &d[nb], 8,
						     IBV_WC_SUCCESS))
						goto out;
				}
				if (post_descs(c, q, d, nb))
					goto out;
			}
			if (posted[i] < n[i])
				more = true;
		}
		if (!more && !c->pend[0])
			break;
		got = cq_poll(c, 0);
		if (got < 0)
			goto out;
		if (got) {
			idle = 0;
			deadline = now_ns() + c->o->timeout_s * 1000000000ull;
		} else if (now_ns() > deadline) {
			cq_timeout(c, 0);
			goto out;
		} else {
			idle_wait(&idle);
		}
	}
	*nfr = 0;
	for (i = 0; i < c->nqp; i++) {
		for (k = 0; k < n[i]; k++) {
			a = &ops[(size_t)i * per + k];
			res = &c->ares[(size_t)i * per + k];
			if (!a->cas) {
				fr[(*nfr)++] = (struct fres){ *res, a->a };
			} else if (*res != a->expect) {
				err("QP %u CAS #%u (compare 0x%016" PRIx64
				    "): returned 0x%016" PRIx64
				    ", expected 0x%016" PRIx64,
				    i, k, a->a, *res, a->expect);
				c->errors++;
				goto out;
			}
		}
	}
	ret = 0;
out:
	free(ops);
	free(posted);
	free(n);
	return ret;
}

/* The counter and CAS slots the peer worked on, in our memory. */
static bool atomic_check_own(struct ctx *c)
{
	int peer = 1 - c->side;
	uint64_t want = counter_init(c, c->side), got;
	unsigned int i, k;
	bool ok = true;

	for (i = 0; i < c->nqp; i++)
		for (k = 0; k < n_fadd(c); k++)
			want += add_val(c, peer, i, k);
	got = __atomic_load_n(&c->abuf[0], __ATOMIC_ACQUIRE);
	if (got != want) {
		err("fetch-add counter is %" PRIu64
		    ", expected exactly %" PRIu64,
		    got, want);
		ok = false;
	}
	for (i = 0; i < c->nqp; i++) {
		want = cas_val(c, peer, i, n_cas(c));
		got = __atomic_load_n(&c->abuf[1 + i], __ATOMIC_ACQUIRE);
		if (got != want) {
			err("CAS slot %u is 0x%016" PRIx64
			    ", expected chain end 0x%016" PRIx64,
			    i, got, want);
			ok = false;
		}
	}
	return ok;
}

/*
 * Sorted by the value each fetch-add returned, our adds must form one
 * unbroken chain from the peer counter's initial value to its final value:
 * every original value distinct, each below the final, nothing lost.
 */
static bool chain_check(struct ctx *c, struct fres *fr, unsigned int n,
			uint64_t final)
{
	uint64_t v = counter_init(c, 1 - c->side);
	unsigned int i;

	qsort(fr, n, sizeof(*fr), fres_cmp);
	for (i = 0; i < n; i++) {
		if (fr[i].v >= final || (i && fr[i].v == fr[i - 1].v)) {
			err("fetch-add returned %" PRIu64
			    " (duplicate or not below the final %" PRIu64 ")",
			    fr[i].v, final);
			return false;
		}
		if (fr[i].v != v) {
			err("fetch-add chain broken at %u of %u: returned %" PRIu64
			    ", expected %" PRIu64,
			    i, n, fr[i].v, v);
			return false;
		}
		v += fr[i].add;
	}
	if (v != final) {
		err("peer counter ended at %" PRIu64 ", our adds give %" PRIu64,
		    final, v);
		return false;
	}
	return true;
}

static int atomic_phase(struct ctx *c)
{
	struct fres *fr;
	unsigned int nfr = 0;
	bool own_ok, chain_ok, peer_ok, peer_chain_ok;
	struct msg m;
	uint64_t mine;
	int ret = -1;

	fr = calloc((size_t)c->nqp * aops_per_qp(c), sizeof(*fr));
	if (!fr) {
		err("out of memory");
		return -1;
	}
	/* Each side initialises its own counter before the peer may start. */
	atomic_init_own(c);
	if (c->is_server) {
		m = (struct msg){ .type = MSG_READY };
		if (msg_send(c, &m))
			goto out;
	} else {
		m = (struct msg){ .type = MSG_ATOMIC };
		if (msg_send(c, &m) || msg_recv(c, &m, MSG_READY))
			goto out;
	}
	if (atomic_run(c, fr, &nfr))
		goto out;
	/* Our requests completed, so the peer's memory holds their effect. */
	m = (struct msg){ .type = MSG_ATOMIC_DONE };
	if (msg_send(c, &m) || msg_recv(c, &m, MSG_ATOMIC_DONE))
		goto out;
	own_ok = atomic_check_own(c);
	mine = __atomic_load_n(&c->abuf[0], __ATOMIC_ACQUIRE);
	m = (struct msg){ .type = MSG_ATOMIC_FINAL, .v = { mine, own_ok } };
	if (msg_send(c, &m) || msg_recv(c, &m, MSG_ATOMIC_FINAL))
		goto out;
	peer_ok = m.v[1];
	chain_ok = chain_check(c, fr, nfr, m.v[0]);
	m = (struct msg){ .type = MSG_RESULT, .v = { 0, chain_ok } };
	if (msg_send(c, &m) || msg_recv(c, &m, MSG_RESULT))
		goto out;
	peer_chain_ok = m.v[1];
	if (!own_ok || !chain_ok) {
		c->errors++;
		goto out;
	}
	if (!peer_ok || !peer_chain_ok) {
		err("the peer's atomic checks failed (see its log)");
		c->errors++;
		goto out;
	}
	c->bytes_verified += 8ull * nfr;
	note("atomics: %u fetch-adds and %u CAS steps per QP on %u QPs, "
	     "both directions, verified",
	     n_fadd(c), n_cas(c), c->nqp);
	ret = 0;
out:
	free(fr);
	return ret;
}

/* ---- error-path cases: one fresh QP each ---- */

static int case_qp_setup(struct ctx *c, int rnr_retry)
{
	struct qp_ctx *q = &c->qps[0];

	if (q->qp && ibv_destroy_qp(q->qp)) {
		err("ibv_destroy_qp failed");
		return -1;
	}
	q->qp = NULL;
	if (qp_create(c, 0) || qp_exchange(c) || qp_connect(c, q, rnr_retry))
		return -1;
	return 0;
}

static int case_rnr_retry(struct ctx *c)
{
	switch (c->o->mode) {
	case MODE_RNR_EXC:
		return 0;
	case MODE_RNR_RETRY:
	case MODE_RNR_LATE:
		return 7;
	default:
		return c->o->rnr_retry;
	}
}

static int cli_case_begin(struct ctx *c, unsigned int id)
{
	struct msg m = { .type = MSG_CASE, .v = { id } };

	if (msg_send(c, &m) || case_qp_setup(c, case_rnr_retry(c)) ||
	    msg_recv(c, &m, MSG_READY))
		return -1;
	return 0;
}

static int cli_case_end(struct ctx *c, unsigned int id)
{
	struct msg m = { .type = MSG_VERIFY, .v = { id } };

	if (msg_send(c, &m) || msg_recv(c, &m, MSG_RESULT))
		return -1;
	if (!m.v[1]) {
		err("case %u: server reports failure", id);
		c->errors++;
		return -1;
	}
	return 0;
}

static int expect_qp_error(struct ctx *c, const char *what)
{
	int st = qp_state(&c->qps[0]);

	if (st != IBV_QPS_ERR) {
		err("%s: QP state is %d after the error, expected ERR (%d)",
		    what, st, IBV_QPS_ERR);
		c->errors++;
		return -1;
	}
	return 0;
}

/* One good 8-byte WRITE, to follow a failing WR and be flushed. */
static void desc_small_write(struct ctx *c, struct wr_desc *d)
{
	memset(d, 0, sizeof(*d));
	d->op = OP_WRITE;
	d->nsge = 1;
	d->sge[0].addr = (uint64_t)(uintptr_t)c->lbuf;
	d->sge[0].length = 8;
	d->sge[0].lkey = c->lmr->lkey;
	d->raddr = c->peer_t.addr;
	d->rkey = c->peer_t.rkey;
}

static uint32_t bad_rkey(struct ctx *c)
{
	uint32_t k = c->peer_t.rkey ^ 0x00a5a500u;

	while (k == c->peer_t.rkey || k == c->peer_a.rkey ||
	       k == c->peer_ro.rkey || k == c->peer_nr.rkey)
		k += 0x01000001u;
	return k;
}

static int cli_access(struct ctx *c)
{
	struct qp_ctx *q = &c->qps[0];
	struct wr_desc d[3];
	unsigned int k, i;
	uint64_t t0;

	if (!c->peer_ro.rkey || !c->peer_nr.rkey) {
		err("server did not register the access-test MRs");
		return -1;
	}
	for (k = 0; k < AC_NUM; k++) {
		if (cli_case_begin(c, k))
			return -1;
		memset(&d[0], 0, sizeof(d[0]));
		d[0].op = OP_WRITE;
		d[0].nsge = 1;
		d[0].sge[0].addr = (uint64_t)(uintptr_t)(c->lbuf + 64);
		d[0].sge[0].length = 64;
		d[0].sge[0].lkey = c->lmr->lkey;
		d[0].rkey = c->peer_t.rkey;
		switch (k) {
		case AC_BAD_RKEY:
			d[0].raddr = c->peer_t.addr + 4096;
			d[0].rkey = bad_rkey(c);
			break;
		case AC_OOB_END:
			d[0].raddr = c->peer_t.addr + c->peer_t.len - 8;
			break;
		case AC_OOB_PAST:
			d[0].raddr = c->peer_t.addr + c->peer_t.len;
			d[0].sge[0].length = 1;
			break;
		case AC_WRAP:
			d[0].raddr = UINT64_MAX - 15;
			break;
		case AC_NO_REMOTE_WRITE:
			d[0].raddr = c->peer_ro.addr;
			d[0].rkey = c->peer_ro.rkey;
			break;
		case AC_NO_REMOTE_READ:
			d[0].op = OP_READ;
			d[0].raddr = c->peer_nr.addr;
			d[0].rkey = c->peer_nr.rkey;
			break;
		case AC_NO_REMOTE_ATOMIC:
			d[0].op = OP_FADD;
			d[0].sge[0].addr = (uint64_t)(uintptr_t)c->ares;
			d[0].sge[0].length = 8;
			d[0].sge[0].lkey = c->aresmr->lkey;
			d[0].raddr = c->peer_nr.addr;
			d[0].rkey = c->peer_nr.rkey;
			d[0].cmp_add = 1;
			break;
		}
		desc_small_write(c, &d[1]);
		desc_small_write(c, &d[2]);
		for (i = 0; i < 3; i++)
			d[i].ex = use_ex(c, q);
		if (exp_send(c, q, &d[0], d[0].sge[0].length,
			     IBV_WC_REM_ACCESS_ERR) ||
		    exp_send(c, q, &d[1], 8, IBV_WC_WR_FLUSH_ERR) ||
		    exp_send(c, q, &d[2], 8, IBV_WC_WR_FLUSH_ERR))
			return -1;
		t0 = now_ns();
		if (post_descs(c, q, d, 3) || cq_drain(c, 0)) {
			err("access case %u (%s) failed", k,
			    access_case_name[k]);
			return -1;
		}
		if (expect_qp_error(c, access_case_name[k]) ||
		    cli_case_end(c, k))
			return -1;
		note("access case %u: %s -> REM_ACCESS_ERR + 2 x WR_FLUSH_ERR "
		     "(%.3f s)",
		     k, access_case_name[k], (double)(now_ns() - t0) / 1e9);
	}
	return 0;
}

static int srv_access_check(struct ctx *c, unsigned int id)
{
	uint64_t bad;

	bad = canary_check(c->tbuf, c->tlen, 0xc3);
	if (bad == UINT64_MAX)
		bad = canary_check(c->rbuf, c->rlen, 0x3c);
	if (bad == UINT64_MAX)
		return 0;
	err("access case %u (%s): target memory was modified at offset %" PRIu64,
	    id, id < AC_NUM ? access_case_name[id] : "?", bad);
	c->errors++;
	return -1;
}

/* SENDs of the rnr cases: k-th lies at k * RNR_SLOT on both sides. */
static uint64_t rnr_len(unsigned int k)
{
	static const uint64_t len[RNR_SENDS] = { 1000, 64, 4000, 1 };

	return len[k % RNR_SENDS];
}

static int cli_rnr_sends(struct ctx *c, unsigned int n, int status)
{
	struct qp_ctx *q = &c->qps[0];
	struct wr_desc d[RNR_SENDS];
	struct chunk_map map;
	unsigned int k;
	uint8_t *slot;

	for (k = 0; k < n; k++) {
		slot = c->lbuf + k * RNR_SLOT;
		map_contig(&map, 0, rnr_len(k));
		map_fill(slot, &map, rnr_len(k), round_key(c, 1000 + k, 0));
		memset(&d[k], 0, sizeof(d[k]));
		d[k].op = OP_SEND;
		desc_sges(&d[k], &map, slot, c->lmr->lkey);
		d[k].ex = use_ex(c, q);
		if (exp_send(c, q, &d[k], rnr_len(k),
			     k ? (status ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS) :
				 status))
			return -1;
	}
	return post_descs(c, q, d, n);
}

static int srv_rnr_post(struct ctx *c, unsigned int n)
{
	struct chunk_map map;
	unsigned int k;

	map_contig(&map, 0, 4096);
	for (k = 0; k < n; k++) {
		map_prepare(c->tbuf + k * RNR_SLOT, &map, 0x77);
		if (post_recv_map(c, &c->qps[0], c->tbuf + k * RNR_SLOT, &map,
				  IBV_WC_RECV, rnr_len(k), false, 0))
			return -1;
	}
	return 0;
}

static int srv_rnr_check(struct ctx *c, unsigned int n)
{
	struct chunk_map map;
	unsigned int k;
	char what[64];

	if (cq_drain(c, 1))
		return -1;
	for (k = 0; k < n; k++) {
		snprintf(what, sizeof(what), "SEND %u of %" PRIu64 " bytes", k,
			 rnr_len(k));
		map_contig(&map, 0, 4096);
		if (map_check(c, what, c->tbuf + k * RNR_SLOT, &map, rnr_len(k),
			      round_key(c, 1000 + k, 0), 0x77))
			return -1;
		c->bytes_verified += rnr_len(k);
	}
	return 0;
}

static int cli_rnr(struct ctx *c)
{
	const struct opts *o = c->o;
	struct msg m;
	uint64_t t0;

	if (cli_case_begin(c, 0))
		return -1;
	t0 = now_ns();
	switch (o->mode) {
	case MODE_RNR_EXC:
		if (cli_rnr_sends(c, 2, IBV_WC_RNR_RETRY_EXC_ERR) ||
		    cq_drain(c, 0) || expect_qp_error(c, "rnr_retry=0"))
			return -1;
		note("rnr exc: SEND without a receive, rnr_retry=0 -> "
		     "RNR_RETRY_EXC_ERR + WR_FLUSH_ERR (%.3f s)",
		     (double)(now_ns() - t0) / 1e9);
		break;
	case MODE_RNR_RETRY:
		if (cli_rnr_sends(c, RNR_SENDS, IBV_WC_SUCCESS) ||
		    cq_drain(c, 0))
			return -1;
		note("rnr retry: %u SENDs with rnr_retry=7 succeeded "
		     "(%.3f s)",
		     RNR_SENDS, (double)(now_ns() - t0) / 1e9);
		break;
	case MODE_RNR_LATE:
		m = (struct msg){ .type = MSG_POSTED };
		if (cli_rnr_sends(c, 1, IBV_WC_SUCCESS) || msg_send(c, &m) ||
		    cq_drain(c, 0))
			return -1;
		note("rnr late: SEND completed after the receive was posted "
		     "late (%.3f s)",
		     (double)(now_ns() - t0) / 1e9);
		break;
	}
	return cli_case_end(c, 0);
}

static int cli_expect(struct ctx *c)
{
	const struct opts *o = c->o;
	struct qp_ctx *q = &c->qps[0];
	struct wr_desc d[3];
	uint64_t len = o->max_size < 65536 ? o->max_size : 65536, t0;
	int op = 0, i;

	while (op < OP_NUM && !(o->ops & (1u << op)))
		op++;
	if (op == OP_CAS || op == OP_FADD)
		len = 8;
	if (cli_case_begin(c, 0))
		return -1;
	for (i = 0; i < 3; i++) {
		memset(&d[i], 0, sizeof(d[i]));
		d[i].op = op;
		d[i].nsge = len ? 1 : 0;
		d[i].sge[0].addr = (uint64_t)(uintptr_t)c->lbuf;
		d[i].sge[0].length = (uint32_t)len;
		d[i].sge[0].lkey = c->lmr->lkey;
		d[i].raddr = c->peer_t.addr;
		d[i].rkey = c->peer_t.rkey;
		d[i].imm = imm_of((uint64_t)i);
		if (op == OP_CAS || op == OP_FADD) {
			d[i].sge[0].addr = (uint64_t)(uintptr_t)c->ares;
			d[i].sge[0].lkey = c->aresmr->lkey;
			d[i].raddr = c->peer_a.addr;
			d[i].rkey = c->peer_a.rkey;
		}
		d[i].ex = use_ex(c, q);
		if (exp_send(c, q, &d[i], len,
			     i && o->expect_status != IBV_WC_SUCCESS ?
				     IBV_WC_WR_FLUSH_ERR :
				     o->expect_status))
			return -1;
	}
	t0 = now_ns();
	if (post_descs(c, q, d, 3) || cq_drain(c, 0))
		return -1;
	if (o->expect_status != IBV_WC_SUCCESS &&
	    expect_qp_error(c, "expect-status"))
		return -1;
	note("expect-status: %s of %" PRIu64 " bytes completed with %s%s "
	     "after %.3f s",
	     op_name[op], len, st_name(o->expect_status),
	     o->expect_status != IBV_WC_SUCCESS ? ", then 2 x WR_FLUSH_ERR" : "",
	     (double)(now_ns() - t0) / 1e9);
	return cli_case_end(c, 0);
}

static int srv_case(struct ctx *c, unsigned int id)
{
	struct msg m = { .type = MSG_READY };

	if (case_qp_setup(c, case_rnr_retry(c)))
		return -1;
	if (c->o->verbose)
		note("case %u: QP 0x%x connected", id, c->qps[0].qp->qp_num);
	switch (c->o->mode) {
	case MODE_ACCESS:
		memset(c->tbuf, 0xc3, c->tlen);
		memset(c->rbuf, 0x3c, c->rlen);
		break;
	case MODE_RNR_RETRY:
		if (srv_rnr_post(c, RNR_SENDS))
			return -1;
		break;
	}
	return msg_send(c, &m);
}

static int srv_case_check(struct ctx *c, unsigned int id)
{
	struct msg m = { .type = MSG_RESULT, .v = { id, 1 } };
	int st, n;

	switch (c->o->mode) {
	case MODE_ACCESS:
		if (srv_access_check(c, id))
			return -1;
		break;
	case MODE_RNR_EXC:
		/* An RNR NAK leaves the responder as it was (IBA 9.7.5.2.8). */
		st = qp_state(&c->qps[0]);
		if (st != IBV_QPS_RTS) {
			err("after RNR NAKs the responder QP is in state %d, "
			    "expected RTS",
			    st);
			c->errors++;
			return -1;
		}
		n = cq_poll(c, 1);
		if (n) {
			if (n > 0)
				err("receive completion without a receive");
			return -1;
		}
		break;
	case MODE_RNR_RETRY:
		if (srv_rnr_check(c, RNR_SENDS))
			return -1;
		break;
	}
	return msg_send(c, &m);
}

/* The client's MSG_VERIFY that follows gets the result. */
static int srv_rnr_late(struct ctx *c)
{
	/* Let the SEND meet an empty receive queue for a while. */
	sleep_ns(200 * 1000000ull);
	return srv_rnr_post(c, 1) || srv_rnr_check(c, 1) ? -1 : 0;
}

/* ---- the two roles ---- */

static int serve(struct ctx *c)
{
	uint64_t csum[MAX_QPS], round = 0;
	unsigned int nver = 0;
	struct msg m;

	for (;;) {
		if (msg_recv(c, &m, 0))
			return -1;
		switch (m.type) {
		case MSG_ROUND:
			round = m.v[0];
			nver = 0;
			if (srv_round_prep(c, &m))
				return -1;
			break;
		case MSG_VERIFY:
			if (c->o->mode != MODE_TRAFFIC) {
				if (srv_case_check(c, (unsigned int)m.v[0]))
					return -1;
				break;
			}
			if (m.v[0] != round || m.v[1] != nver) {
				err("protocol error: verify out of order");
				return -1;
			}
			csum[nver++] = m.v[2];
			if (nver == c->nqp && srv_round_check(c, round, csum))
				return -1;
			break;
		case MSG_ATOMIC:
			if (atomic_phase(c))
				return -1;
			break;
		case MSG_CASE:
			if (srv_case(c, (unsigned int)m.v[0]))
				return -1;
			break;
		case MSG_POSTED:
			if (srv_rnr_late(c))
				return -1;
			break;
		case MSG_DONE:
			return 0;
		default:
			err("protocol error: message %" PRIu64, m.type);
			return -1;
		}
	}
}

static int drive(struct ctx *c)
{
	const struct opts *o = c->o;
	uint64_t round = 0, base, t0 = now_ns();
	unsigned int it, s;

	switch (o->mode) {
	case MODE_ACCESS:
		return cli_access(c);
	case MODE_RNR_EXC:
	case MODE_RNR_RETRY:
	case MODE_RNR_LATE:
		return cli_rnr(c);
	case MODE_EXPECT:
		return cli_expect(c);
	}
	for (it = 0; it < o->iters; it++) {
		for (s = 0; s < o->nsizes; s++) {
			for (base = 0; base < c->ndops; base++) {
				if (o->verbose)
					note("round %" PRIu64 ": %s.. x %u QPs,"
					     " %" PRIu64 " bytes",
					     round, op_name[op_for(c, base, 0)],
					     c->nqp, o->sizes[s]);
				if (cli_round(c, round++, base, o->sizes[s]))
					return -1;
			}
		}
		if (!o->duration_s)
			continue;
		/* a long run says how far it got after each pass */
		printf("uroce_traffic: pass %u bytes_moved=%" PRIu64
		       " bytes_verified=%" PRIu64 " completions=%" PRIu64 "\n",
		       it + 1, c->bytes_moved, c->bytes_verified,
		       c->completions);
		if (now_ns() - t0 >= o->duration_s * 1000000000ull)
			break;
	}
	if ((o->ops & OPS_ATOMIC) && (n_fadd(c) || n_cas(c)))
		return atomic_phase(c);
	return 0;
}

static int run(struct ctx *c)
{
	struct msg m = { .type = MSG_DONE };
	unsigned int i;

	if (dev_open(c))
		return -1;
	if (c->is_server ? oob_listen(c) : oob_connect(c))
		return -1;
	if (cfg_exchange(c))
		return -1;
	c->rng = mix64(c->o->seed) ^
		 (c->is_server ? 0x5e4e5e4eull : 0xc11ec11eull);
	if (res_setup(c) || mr_exchange(c))
		return -1;
	if (c->o->mode == MODE_TRAFFIC) {
		for (i = 0; i < c->nqp; i++)
			if (qp_create(c, i))
				return -1;
		if (qp_exchange(c))
			return -1;
		for (i = 0; i < c->nqp; i++)
			if (qp_connect(c, &c->qps[i], c->o->rnr_retry))
				return -1;
	}
	if (c->is_server) {
		if (serve(c))
			return -1;
		return msg_send(c, &m);
	}
	if (drive(c))
		return -1;
	return msg_send(c, &m) || msg_recv(c, &m, MSG_DONE) ? -1 : 0;
}

/* ---- options ---- */

static int parse_num(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *e;

	errno = 0;
	v = strtoull(s, &e, 10);
	if (e == s || errno)
		return -1;
	switch (*e) {
	case 'k':
	case 'K':
		v <<= 10;
		e++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		e++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		e++;
		break;
	}
	if (*e || v > (1ull << 40))
		return -1;
	*out = v;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int add_size(struct opts *o, uint64_t v)
{
	if (o->nsizes == MAX_SIZES) {
		fprintf(stderr, "too many sizes (at most %d)\n", MAX_SIZES);
		return -1;
	}
	o->sizes[o->nsizes++] = v;
	return 0;
}

/*
 * "A,B,C" lists sizes; "A-B" stands for A, B and every 2^k - 1, 2^k,
 * 2^k + 1 between them.  Suffixes K, M, G.
 */
static int parse_sizes(struct opts *o, const char *spec)
{
	char *copy = strdup(spec), *tok, *save = NULL, *dash;
	uint64_t a, b, p, v;
	unsigned int i, n;

	o->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		dash = strchr(tok, '-');
		if (dash)
			*dash = 0;
		if (parse_num(tok, &a) || (dash && parse_num(dash + 1, &b)))
			goto bad;
		if (!dash) {
			if (add_size(o, a))
				goto fail;
			continue;
		}
		if (b < a)
			goto bad;
		if (add_size(o, a) || add_size(o, b))
			goto fail;
		for (p = 1; p <= b + 1 && p; p <<= 1)
			for (v = p - 1; v <= p + 1; v++)
				if (v > a && v < b && add_size(o, v))
					goto fail;
	}
	if (!o->nsizes)
		goto bad;
	qsort(o->sizes, o->nsizes, sizeof(o->sizes[0]), u64_cmp);
	for (i = 1, n = 1; i < o->nsizes; i++)
		if (o->sizes[i] != o->sizes[n - 1])
			o->sizes[n++] = o->sizes[i];
	o->nsizes = n;
	o->max_size = o->sizes[n - 1];
	free(copy);
	return 0;
bad:
	fprintf(stderr, "bad size list '%s'\n", spec);
fail:
	free(copy);
	return -1;
}

static int parse_ops(struct opts *o, const char *spec)
{
	char *copy = strdup(spec), *tok, *save = NULL;
	unsigned int i;

	o->ops = 0;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			o->ops |= OPS_ALL;
			continue;
		}
		if (!strcmp(tok, "data")) {
			o->ops |= OPS_DATA;
			continue;
		}
		if (!strcmp(tok, "atomic")) {
			o->ops |= OPS_ATOMIC;
			continue;
		}
		for (i = 0; i < OP_NUM; i++)
			if (!strcmp(tok, op_name[i]))
				break;
		if (i == OP_NUM) {
			fprintf(stderr, "unknown op '%s'\n", tok);
			free(copy);
			return -1;
		}
		o->ops |= 1u << i;
	}
	free(copy);
	return o->ops ? 0 : -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: uroce_traffic -p PORT [--port-file FILE] [-d DEV]      (server)\n"
		"       uroce_traffic -s HOST -p PORT [options]                (client)\n"
		"The server takes its configuration from the client.  Client options:\n"
		"  -q, --qps N           QPs used at once (default 4, max %d)\n"
		"  -n, --iters N         passes over sizes x ops (default 1)\n"
		"  -S, --sizes SPEC      sizes: list \"0,1,4K,1M\" and/or range \"A-B\"\n"
		"                        (A, B, every 2^k-1, 2^k, 2^k+1 between;\n"
		"                        default 0-4M)\n"
		"  -m, --mtu BYTES       path MTU 256|512|1024|2048|4096 (default 1024)\n"
		"  -o, --ops LIST        write,write_imm,read,send,send_imm,cas,fadd,\n"
		"                        data, atomic or all (default all)\n"
		"  -r, --seed N          seed of data, sizes and layout (default 1)\n"
		"  -W, --wr-api PCT      post PCT%% of WRs with ibv_wr_* (default 0)\n"
		"  -A, --atomics N       fetch-adds per QP per side (default 256)\n"
		"  -C, --cas N           CAS chain steps per QP per side (default 64)\n"
		"  -t, --timeout S       fail after S s without progress (default 60)\n"
		"      --duration S      repeat the passes for S seconds (at most -n of\n"
		"                        them), a progress line after each\n"
		"      --max-sge N       SGEs per WR, 1..4 (default 4)\n"
		"      --no-inline       never post inline\n"
		"      --retry-cnt N     (default 7)   --ack-timeout N (default 14)\n"
		"      --rnr-retry N     (default 7)   --min-rnr-timer N (default 1)\n"
		"      --access-test     bad rkey, out of bounds, wrap, missing rights\n"
		"      --rnr-test MODE   exc (rnr_retry=0, no receive), retry (rnr_retry=7,\n"
		"                        receives posted), late (receive posted late)\n"
		"      --expect-status S post 3 WRs of the first op; the first must\n"
		"                        complete with S (e.g. RETRY_EXC_ERR), the rest flush\n"
		"  -v, --verbose\n",
		MAX_QPS);
}

enum {
	OPT_PORT_FILE = 256,
	OPT_MAX_SGE,
	OPT_NO_INLINE,
	OPT_RETRY_CNT,
	OPT_ACK_TIMEOUT,
	OPT_RNR_RETRY,
	OPT_MIN_RNR_TIMER,
	OPT_ACCESS,
	OPT_RNR,
	OPT_EXPECT,
	OPT_DURATION,
};

static const struct option long_opts[] = {
	{ "server", required_argument, NULL, 's' },
	{ "port", required_argument, NULL, 'p' },
	{ "port-file", required_argument, NULL, OPT_PORT_FILE },
	{ "device", required_argument, NULL, 'd' },
	{ "qps", required_argument, NULL, 'q' },
	{ "iters", required_argument, NULL, 'n' },
	{ "sizes", required_argument, NULL, 'S' },
	{ "mtu", required_argument, NULL, 'm' },
	{ "ops", required_argument, NULL, 'o' },
	{ "seed", required_argument, NULL, 'r' },
	{ "wr-api", required_argument, NULL, 'W' },
	{ "atomics", required_argument, NULL, 'A' },
	{ "cas", required_argument, NULL, 'C' },
	{ "timeout", required_argument, NULL, 't' },
	{ "max-sge", required_argument, NULL, OPT_MAX_SGE },
	{ "no-inline", no_argument, NULL, OPT_NO_INLINE },
	{ "retry-cnt", required_argument, NULL, OPT_RETRY_CNT },
	{ "ack-timeout", required_argument, NULL, OPT_ACK_TIMEOUT },
	{ "rnr-retry", required_argument, NULL, OPT_RNR_RETRY },
	{ "min-rnr-timer", required_argument, NULL, OPT_MIN_RNR_TIMER },
	{ "access-test", no_argument, NULL, OPT_ACCESS },
	{ "rnr-test", required_argument, NULL, OPT_RNR },
	{ "expect-status", required_argument, NULL, OPT_EXPECT },
	{ "duration", required_argument, NULL, OPT_DURATION },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int opt_uint(const char *name, const char *s, uint64_t lo, uint64_t hi,
		    uint64_t *out)
{
	if (parse_num(s, out) || *out < lo || *out > hi) {
		fprintf(stderr, "bad %s '%s' (%" PRIu64 "..%" PRIu64 ")\n",
			name, s, lo, hi);
		return -1;
	}
	return 0;
}

static int parse_args(struct opts *o, int argc, char **argv)
{
	uint64_t v;
	int ch, st;

	memset(o, 0, sizeof(*o));
	o->nqp = 4;
	o->mtu = 1024;
	o->ops = OPS_ALL;
	o->seed = 1;
	o->natomic = 256;
	o->ncas = 64;
	o->timeout_s = 60;
	o->retry_cnt = 7;
	o->ack_timeout = 14;
	o->rnr_retry = 7;
	o->min_rnr_timer = 1;
	o->max_sge = MAX_SGE;
	o->expect_status = -1;
	o->sizes_spec = "0-4M";

	while ((ch = getopt_long(argc, argv, "s:p:d:q:n:S:m:o:r:W:A:C:t:vh",
				 long_opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o->server = optarg;
			break;
		case 'p':
			o->port = optarg;
			break;
		case OPT_PORT_FILE:
			o->port_file = optarg;
			break;
		case 'd':
			o->dev_name = optarg;
			break;
		case 'S':
			o->sizes_spec = optarg;
			break;
		case 'q':
			if (opt_uint("QP count", optarg, 1, MAX_QPS, &v))
				return -1;
			o->nqp = (unsigned int)v;
			break;
		case 'n':
			if (opt_uint("iterations", optarg, 1, 1u << 30, &v))
				return -1;
			o->iters = (unsigned int)v;
			break;
		case 'm':
			if (opt_uint("MTU", optarg, 256, 4096, &v) ||
			    (v & (v - 1))) {
				fprintf(stderr, "MTU must be 256, 512, 1024, "
						"2048 or 4096\n");
				return -1;
			}
			o->mtu = (unsigned int)v;
			break;
		case 'o':
			if (parse_ops(o, optarg))
				return -1;
			break;
		case 'r':
			if (opt_uint("seed", optarg, 0, UINT64_MAX, &v))
				return -1;
			o->seed = v;
			break;
		case 'W':
			if (opt_uint("wr-api percentage", optarg, 0, 100, &v))
				return -1;
			o->wr_api_pct = (unsigned int)v;
			break;
		case 'A':
			if (opt_uint("atomics", optarg, 0, 1u << 20, &v))
				return -1;
			o->natomic = (unsigned int)v;
			break;
		case 'C':
			if (opt_uint("cas steps", optarg, 0, 1u << 20, &v))
				return -1;
			o->ncas = (unsigned int)v;
			break;
		case OPT_DURATION:
			if (opt_uint("duration", optarg, 1, 1u << 30, &v))
				return -1;
			o->duration_s = (unsigned int)v;
			break;
		case 't':
			if (opt_uint("timeout", optarg, 1, 86400, &v))
				return -1;
			o->timeout_s = (unsigned int)v;
			break;
		case OPT_MAX_SGE:
			if (opt_uint("max-sge", optarg, 1, MAX_SGE, &v))
				return -1;
			o->max_sge = (unsigned int)v;
			break;
		case OPT_NO_INLINE:
			o->no_inline = true;
			break;
		case OPT_RETRY_CNT:
			if (opt_uint("retry-cnt", optarg, 0, 7, &v))
				return -1;
			o->retry_cnt = (int)v;
			break;
		case OPT_ACK_TIMEOUT:
			if (opt_uint("ack-timeout", optarg, 0, 31, &v))
				return -1;
			o->ack_timeout = (int)v;
			break;
		case OPT_RNR_RETRY:
			if (opt_uint("rnr-retry", optarg, 0, 7, &v))
				return -1;
			o->rnr_retry = (int)v;
			break;
		case OPT_MIN_RNR_TIMER:
			if (opt_uint("min-rnr-timer", optarg, 0, 31, &v))
				return -1;
			o->min_rnr_timer = (int)v;
			break;
		case OPT_ACCESS:
			o->mode = MODE_ACCESS;
			break;
		case OPT_RNR:
			if (!strcmp(optarg, "exc")) {
				o->mode = MODE_RNR_EXC;
			} else if (!strcmp(optarg, "retry")) {
				o->mode = MODE_RNR_RETRY;
			} else if (!strcmp(optarg, "late")) {
				o->mode = MODE_RNR_LATE;
			} else {
				fprintf(stderr, "--rnr-test: exc, retry or "
						"late\n");
				return -1;
			}
			break;
		case OPT_EXPECT:
			st = st_parse(optarg);
			if (st < 0) {
				fprintf(stderr, "unknown status '%s'\n", optarg);
				return -1;
			}
			o->expect_status = st;
			o->mode = MODE_EXPECT;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc || !o->port) {
		usage(stderr);
		return -1;
	}
	if (!o->iters)
		o->iters = o->duration_s ? 1u << 30 : 1;
	if (o->server && parse_sizes(o, o->sizes_spec))
		return -1;
	if (o->server && o->mode != MODE_TRAFFIC && o->mode != MODE_EXPECT)
		o->max_size = 65536;
	if (o->server && o->mode == MODE_EXPECT && o->max_size < 8)
		o->max_size = 8;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct ctx c;
	int ret;

	if (parse_args(&o, argc, argv))
		return 2;
	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.fd = -1;
	c.is_server = !o.server;
	c.side = c.is_server ? 0 : 1;
	role = c.is_server ? "server" : "client";
	uroce_oob_init(oob_say);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);

	ret = run(&c);
	if (ret) {
		if (!c.errors)
			c.errors = 1;
		fail_peer(&c);
	}
	res_free(&c);
	if (c.fd >= 0)
		close(c.fd);
	printf("uroce_traffic: %s bytes_moved=%" PRIu64 " bytes_verified=%" PRIu64
	       " completions=%" PRIu64 " errors=%" PRIu64 "\n",
	       ret ? "FAIL" : "OK", c.bytes_moved, c.bytes_verified,
	       c.completions, c.errors);
	return ret ? 1 : 0;
}
