/* SPDX-License-Identifier: MIT */
/*
 * Deterministic engine tests: the in-process engine (uroce_core) on an
 * offline device (uroce_dev_up_offline: no socket, no progress thread)
 * whose packet IO is a simulated wire, and a fake clock.
 *
 * Two RC QPs of the one device, A and B, are connected to each other; what
 * either sends goes onto the wire with a delivery time (now + latency, plus
 * jitter when reordering) and may be dropped, duplicated or reordered by a
 * seeded generator, or by the scenario's own filter.  eng_run() is a
 * discrete-event loop: it takes the earliest event, a burst of packets due
 * at one time (delivered as one receive burst, with ACK coalescing, as
 * net/udp.c does) or the device's earliest timer, moves the clock there and
 * runs it.  Nothing depends on the real time or on thread scheduling: a
 * seed gives the same run every time.
 */
#ifndef UROCE_ENGINE_HARNESS_H
#define UROCE_ENGINE_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "uroce.h"

#define ENG_BUF_SIZE  (1u << 20) /* each side's registered buffer */
#define ENG_TRACE_MAX 65536

/* One packet on the wire, as a filter and the trace see it. */
struct eng_pkt {
	uint64_t sent_ns;
	uint8_t opcode;
	uint32_t psn;
	uint32_t dqpn;
	bool ackreq;
	bool is_req; /* a request (to a responder) */
	uint8_t syn; /* AETH syndrome, if it has one */
	bool has_aeth;
	uint64_t reth_va; /* RETH fields, if it has one */
	uint32_t reth_len;
	bool has_reth;
	uint32_t paylen;
	uint8_t tos;	      /* its IP header's TOS as sent */
	bool dropped;	      /* by the filter or the generator */
	unsigned int nth;     /* its index in the trace */
	unsigned int io_call; /* which call of the packet IO sent
					 * it (one sendmmsg, one sendmsg) */
	unsigned int run;     /* which datagram or GSO run it was */
};

/* a socket buffer that makes the window 256 packets of 1 KiB (engine/req.c
 * tx_window): the congestion tests' figures were set at that window on a
 * wire that has no bandwidth of its own */
#define ENG_RCVBUF_W256 (768u << 10)

struct eng;
/* return true to drop the packet (a filter), or to mark it CE (a
 * marker: asked only for ECN-capable packets) */
typedef bool (*eng_filter_fn)(struct eng *e, const struct eng_pkt *p);

struct eng_opts {
	uint64_t latency_ns;			 /* one way; default 10 us */
	uint32_t drop_ppm, dup_ppm, reorder_ppm; /* per million */
	uint64_t seed;
	uint32_t rcvbuf;	      /* sizes the windows; default 4 MiB */
	uint8_t timeout;	      /* QP local ACK timeout; default 14 */
	uint8_t retry_cnt, rnr_retry; /* default 7, 7 */
	bool gso;		      /* the wire takes runs (send_runs), so
					 * the engine batches as over UDP GSO */
	uint32_t sndbuf;	      /* the socket's send buffer, bytes
				       * (dev->net.sndbuf); default none */
	int unreach_err;	      /* what a send to ENG_UNREACH returns;
					 * default -ENETUNREACH */
	bool cc;		      /* ECN congestion control on, as
					 * UROCE_CC=dcqcn (CNPs 50 us apart) */
	uint64_t cc_delay_us;	      /* delay-based control on, as
					 * UROCE_CC=delay, with this target */
	uint64_t link_bps;	      /* A's requests queue for a link of
					 * this many bytes/s (0: none) */
	bool acks_for_post;	      /* bursts end as an application's own
					 * poll's do: ACKs wait for its post */
	bool channel;		      /* both CQs on one completion channel
					 * (E->ch, its fd non-blocking) */
	uint32_t ring;		      /* the peer is behind a same-host ring
					 * of this many packets: packets
					 * arrive as from a ring */
	bool ring_by_udp;	      /* ... but arrive as datagrams */
};

/* an address the wire has no route to */
#define ENG_UNREACH "192.0.2.1"

struct eng {
	struct uroce_dev *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq_a, *cq_b;
	struct ibv_comp_channel *ch; /* eng_opts.channel */
	struct ibv_qp *a, *b;
	struct ibv_mr *mr_a, *mr_b;
	uint8_t *buf_a, *buf_b;
	struct eng_opts o;
	eng_filter_fn filter;
	eng_filter_fn mark_ce; /* an ECN-marking queue, or NULL */
	uint64_t extra_ns;     /* added to every packet's latency: a
				* standing queue nobody here drains */
	/* responses (to A's requests) are delivered this much after they
	 * arrive: a requester's thread that reads them late; rx_stamps: a
	 * delivered packet carries its arrival (dev->net.rx_ns), as a
	 * socket with SO_TIMESTAMPNS gives it */
	uint64_t read_late_ns;
	bool rx_stamps;
	/* eng_opts.link_bps: when the link is free again; the last
	 * queueing delay of a request, and the most since reset */
	uint64_t link_free;
	uint64_t qdelay_ns, qdelay_max_ns;
	/* the next send_runs calls that find the socket's send buffer
	 * full (nothing sent): they fail with -sndbuf_err, -EAGAIN if 0 */
	unsigned int sndbuf_full;
	int sndbuf_err;
	size_t run_bytes_max; /* the largest run send_runs was given */
	/* called after each packet of a receive burst: an application
	 * thread that runs while another thread is in the burst */
	void (*mid_burst)(struct eng *e);
	void *priv;   /* the scenario's own state */
	uint64_t now; /* the fake clock */
	uint64_t start;
	/* the completions a test waits for (eng_wait, eng_all_done) */
	unsigned int want_a, want_b, got_a, got_b;
	struct ibv_wc wc_a[512], wc_b[512];
	unsigned int ntrace;
	struct eng_pkt trace[ENG_TRACE_MAX];
};

extern struct eng *E;

#define PSN0 0x100u /* both directions start here */
#define MS   1000000ull

/* B's buffer at off, as A addresses it */
static inline uint64_t rva(uint32_t off)
{
	return (uintptr_t)E->buf_b + off;
}

/* build the device, both QPs (RTS) and their MRs; o may be NULL */
void eng_setup(const struct eng_opts *o);
/* one more pair of RC QPs connected to each other, as E->a and E->b
 * (a's completions on E->cq_a, b's on E->cq_b) */
void eng_pair(struct ibv_qp **a, struct ibv_qp **b);
/* run events until done(e) holds or the clock passes limit_ns after the
 * start of this call; returns whether done held */
bool eng_run(bool (*done)(struct eng *e), uint64_t limit_ns);
/* the progress thread (there is none: the device is offline) sleeps
 * until by, 0: until woken (uroce_progress_sleep_by); eng_run wakes it
 * at by, an event of its own (uroce_progress_woke) */
void eng_thread_sleeps(uint64_t by);
/* run until the wire is empty and no timer is armed, or limit_ns */
void eng_settle(uint64_t limit_ns);
uint64_t eng_cnt(enum uroce_counter c);
/* poll one completion from cq into wc; false if none */
bool eng_poll(struct ibv_cq *cq, struct ibv_wc *wc);
/* a signalled WR; _flags: with these send_flags instead */
void eng_post_send(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
		   uint32_t loff, uint32_t len, uint64_t raddr, uint32_t rkey);
void eng_post_send_flags(struct ibv_qp *qp, enum ibv_wr_opcode op,
			 uint64_t wr_id, uint32_t loff, uint32_t len,
			 uint64_t raddr, uint32_t rkey, unsigned int flags);
void eng_post_atomic(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id,
		     uint32_t loff, uint64_t raddr, uint32_t rkey,
		     uint64_t compare_add, uint64_t swap);
void eng_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint32_t off,
		   uint32_t len);
/* wait for a completions at A and b at B (eng_run(eng_all_done, ...)),
 * which land in E->wc_a and E->wc_b */
void eng_wait(unsigned int a, unsigned int b);
bool eng_all_done(struct eng *e);
void eng_expect_ok(const struct ibv_wc *wc, uint64_t wr_id);
/* the engine state of a QP (dev->lock is not needed: one thread) */
struct uroce_qp *eng_uqp(struct ibv_qp *qp);
/* how often a packet to the same QP with the same PSN went out before p
 * (a resent READ response may have another opcode: FIRST for MIDDLE) */
unsigned int eng_times_sent(const struct eng_pkt *p);
/* packets in the trace that match */
unsigned int eng_count_sent(bool (*match)(const struct eng_pkt *p));
/* the GID of ENG_UNREACH, and of the device's own address */
void eng_gid_unreach(union ibv_gid *gid);
void eng_gid_local(union ibv_gid *gid);
/* fill both buffers with distinct patterns */
void eng_pattern(void);
/* ms since eng_setup on the fake clock */
double eng_ms(void);
void eng_dump_counters(void);

struct eng_test {
	const char *name;
	void (*fn)(void);
};

/* run the test argv[1] names; 0 if it passed (a failure exits 1);
 * "--list" prints the names, one a line (CMake's discover.cmake adds a
 * ctest test for each, so a test is listed only in its table) */
int eng_main(int argc, char **argv, const struct eng_test *t, size_t n);

#define ENG_CHECK(cond, ...) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, \
				__LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fprintf(stderr, "\n"); \
			eng_dump_counters(); \
			exit(1); \
		} \
	} while (0)

#endif
