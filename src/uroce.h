/* SPDX-License-Identifier: MIT */
/*
 * uroce internal header: the objects every layer shares and the cross-file
 * prototypes, grouped by the file that defines them.
 *
 * Locking: one engine lock per device (dev->lock) protects every QP's
 * transport state, the QP and MR tables and the send/receive queues.
 * A CQ has its own lock (cq->lock) so that polling never waits on the
 * engine.  Order: dev->lock, then cq->lock.  Never call into the
 * application with a lock held.
 */
#ifndef UROCE_H
#define UROCE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "wire/wire.h"

#define UROCE_EXPORT __attribute__((visibility("default")))

/*
 * FLUSH (IBA 1.5, opcode 0x1C) came to libibverbs after the rdma-core 44
 * headers we build against; these are the values rdma-core 45 gave it, so
 * programs built against newer headers reach it.
 */
#define UROCE_WR_FLUSH			14
#define UROCE_WC_FLUSH			8
#define UROCE_ACCESS_FLUSH_GLOBAL	(1 << 8)
#define UROCE_ACCESS_FLUSH_PERSISTENT	(1 << 9)
#define UROCE_QP_EX_WITH_FLUSH		(1 << 11)
#define UROCE_FLUSH_GLOBAL		1	/* placement type bits */
#define UROCE_FLUSH_PERSISTENT		2
#define UROCE_FLUSH_RANGE		0	/* selectivity level */
#define UROCE_FLUSH_MR			1

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define UROCE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- device limits (what query_device reports, and enforces) ---- */
#define UROCE_MAX_QP		(1u << 16)
#define UROCE_MAX_QP_WR		16384
#define UROCE_MAX_SGE		32
#define UROCE_MAX_INLINE	512
#define UROCE_MAX_CQ		(1u << 16)
#define UROCE_MAX_CQE		(1 << 20)
#define UROCE_MAX_MR		(1u << 16)
#define UROCE_MAX_MR_SIZE	(1ull << 40)
#define UROCE_MAX_PD		(1u << 16)
#define UROCE_MAX_RD_ATOMIC	128
#define UROCE_MAX_SRQ		(1u << 16)
#define UROCE_MAX_MSG_SIZE	(1u << 31)
#define UROCE_VENDOR_ID		0x0000	/* none: a software device */
#define UROCE_VENDOR_PART_ID	0x5552	/* "UR" */
#define UROCE_FW_VER		"0.1.0"
#define UROCE_DEV_NAME		"uroce0"
/* multicast (verbs/mcast.c): each group a process joins costs a socket */
#define UROCE_MAX_MCAST_GRP	256
#define UROCE_MAX_MCAST_QP_ATTACH 64
#define UROCE_MAX_TOTAL_MCAST_QP_ATTACH \
	(UROCE_MAX_MCAST_GRP * UROCE_MAX_MCAST_QP_ATTACH)
#define UROCE_MCAST_QPN		0xffffff	/* DQPN of multicast (IBA 10.5.2.3) */

/* Requester pacing: packets in flight per QP, and AckReq spacing. */
#define UROCE_TX_WINDOW_MAX	256
#define UROCE_TX_WINDOW_MIN	8
#define UROCE_ACK_EVERY		16

/* QPNs: 0 and 1 are special (SMI/GSI); ours start above them. */
#define UROCE_QPN_FIRST		0x11

/* ---- counters (one set per device; see issue "See inside") ---- */
enum uroce_counter {
	UROCE_CNT_TX_PKTS,
	UROCE_CNT_TX_BYTES,
	UROCE_CNT_RX_PKTS,
	UROCE_CNT_RX_BYTES,
	UROCE_CNT_TX_ACKS,
	UROCE_CNT_RX_ACKS,
	UROCE_CNT_TX_NAK_SEQ,
	UROCE_CNT_TX_NAK_INV,
	UROCE_CNT_TX_NAK_ACCESS,
	UROCE_CNT_TX_NAK_OP,
	UROCE_CNT_RX_NAK_SEQ,
	UROCE_CNT_RX_NAK_OTHER,
	UROCE_CNT_RX_NAK_INV,
	UROCE_CNT_RX_NAK_ACCESS,
	UROCE_CNT_RX_NAK_OP,
	UROCE_CNT_TX_RNR_NAK,
	UROCE_CNT_RX_RNR_NAK,
	UROCE_CNT_RETRANSMITS,
	UROCE_CNT_TIMEOUTS,
	UROCE_CNT_DUPLICATES,
	UROCE_CNT_OUT_OF_SEQ,
	UROCE_CNT_DROP_BAD_ICRC,
	UROCE_CNT_DROP_BAD_HDR,
	UROCE_CNT_DROP_UNKNOWN_QP,
	UROCE_CNT_DROP_BAD_STATE,
	UROCE_CNT_DROP_BAD_SRC,
	UROCE_CNT_DROP_TRUNCATED,
	UROCE_CNT_REM_ACCESS_ERR,
	UROCE_CNT_DROP_BAD_QKEY,
	UROCE_CNT_DROP_NO_RECV,
	UROCE_CNT_DROP_TOO_LONG,
	UROCE_CNT_UC_MSG_DROPS,
	UROCE_CNT_DUP_ATOMIC_LOST,
	UROCE_CNT_XRC_BAD_SRQN,
	UROCE_CNT_FAULT_DROPS,
	UROCE_CNT_FAULT_DUPS,
	UROCE_CNT_FAULT_DELAYS,
	UROCE_CNT_TX_GSO_SENDS,		/* sends that carried several packets */
	UROCE_CNT_TX_GSO_OFF,		/* the kernel refused GSO: off since */
	UROCE_CNT_RX_GRO_BATCHES,	/* receives that carried several */
	UROCE_CNT_RX_MCAST_PKTS,	/* to a group with QPs attached */
	UROCE_CNT_DROP_MCAST_NO_GROUP,	/* to a group no QP is attached to */
	/* net/share.c: the shared device */
	UROCE_CNT_DROP_NO_OWNER,	/* for a QPN no member of the address has */
	UROCE_CNT_SHARE_FWD_OUT,	/* came here, sent on to its owner */
	UROCE_CNT_SHARE_FWD_IN,		/* came from another member */
	UROCE_CNT_SHARE_REORDERS,	/* a probe moved us in the registry */
	/* what went on and came off the wire, by opcode class (net/pcap.c):
	 * per class a packet and a byte counter, in enum uroce_pkt_class
	 * order; bytes are BTH through ICRC */
	UROCE_CNT_TX_SEND_PKTS, UROCE_CNT_TX_SEND_BYTES,
	UROCE_CNT_TX_WRITE_PKTS, UROCE_CNT_TX_WRITE_BYTES,
	UROCE_CNT_TX_READ_REQ_PKTS, UROCE_CNT_TX_READ_REQ_BYTES,
	UROCE_CNT_TX_READ_RESP_PKTS, UROCE_CNT_TX_READ_RESP_BYTES,
	UROCE_CNT_TX_ATOMIC_PKTS, UROCE_CNT_TX_ATOMIC_BYTES,
	UROCE_CNT_TX_ACK_PKTS, UROCE_CNT_TX_ACK_BYTES,
	UROCE_CNT_TX_CNP_PKTS, UROCE_CNT_TX_CNP_BYTES,
	UROCE_CNT_TX_OTHER_PKTS, UROCE_CNT_TX_OTHER_BYTES,
	UROCE_CNT_RX_SEND_PKTS, UROCE_CNT_RX_SEND_BYTES,
	UROCE_CNT_RX_WRITE_PKTS, UROCE_CNT_RX_WRITE_BYTES,
	UROCE_CNT_RX_READ_REQ_PKTS, UROCE_CNT_RX_READ_REQ_BYTES,
	UROCE_CNT_RX_READ_RESP_PKTS, UROCE_CNT_RX_READ_RESP_BYTES,
	UROCE_CNT_RX_ATOMIC_PKTS, UROCE_CNT_RX_ATOMIC_BYTES,
	UROCE_CNT_RX_ACK_PKTS, UROCE_CNT_RX_ACK_BYTES,
	UROCE_CNT_RX_CNP_PKTS, UROCE_CNT_RX_CNP_BYTES,
	UROCE_CNT_RX_OTHER_PKTS, UROCE_CNT_RX_OTHER_BYTES,
	UROCE_CNT_NUM,
};

/* Opcode classes of the per-class counters (ACK includes atomic ACK). */
enum uroce_pkt_class {
	UROCE_CLASS_SEND,
	UROCE_CLASS_WRITE,
	UROCE_CLASS_READ_REQ,
	UROCE_CLASS_READ_RESP,
	UROCE_CLASS_ATOMIC,
	UROCE_CLASS_ACK,
	UROCE_CLASS_CNP,
	UROCE_CLASS_OTHER,
	UROCE_CLASS_NUM,
};

/* ---- packet IO interface (net/udp.c; tests may plug in their own) ---- */
struct uroce_dev;
struct uroce_txrun;
struct uroce_pkt_io {
	/* Send one RoCE datagram (BTH..ICRC) to dst.  Returns 0 or -errno. */
	int (*send)(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		    const struct iovec *iov, int iovcnt);
	/* Send runs of datagrams in one go (sendmmsg): run r is iov
	 * [iov0, iov0 + niov) and, if it has several datagrams, they are of
	 * seg bytes each (the last may be shorter), back to back (UDP GSO);
	 * the k-th of a run leaves with IPv4 identification k.  Only called
	 * when dev->gso is set.  Returns how many runs went, or -errno. */
	int (*send_runs)(struct uroce_dev *dev, const struct uroce_txrun *run,
			 int nruns, const struct iovec *iov);
};

/* engine/xmit.c: packets held for one sendmmsg */
#define UROCE_ACK_PENDING_MAX	64
#define UROCE_TXB_MAX_PKTS	256
#define UROCE_TXB_MAX_RUNS	64
#define UROCE_TXB_MAX_IOV	1024
struct uroce_txrun {
	struct sockaddr_storage dst;
	uint16_t seg;			/* the first datagram's size */
	uint16_t npkts;
	uint16_t pkt0;			/* its first packet in the batch */
	bool closed;			/* a shorter one ended the run */
	uint32_t bytes;
	int iov0, niov;
};

struct uroce_txbatch {
	struct uroce_txbatch *next;	/* in the send queue or free list */
	int npkts, nruns, niov;
	struct uroce_txrun run[UROCE_TXB_MAX_RUNS];
	uint16_t pkt_iov[UROCE_TXB_MAX_PKTS + 1];	/* packet k's first iov */
	struct iovec iov[UROCE_TXB_MAX_IOV];
	uint8_t hdr[UROCE_TXB_MAX_PKTS][UROCE_MAX_HDR_LEN];
	uint8_t tail[UROCE_TXB_MAX_PKTS][UROCE_ICRC_LEN];
};

/* A received packet after parsing (engine/recv.c). */
struct uroce_pkt {
	uint8_t *bth;			/* BTH; headers follow */
	uint32_t len;			/* BTH .. end of payload+pad, no ICRC */
	const struct uroce_opcode_info *info;
	uint32_t mask;			/* info->mask */
	uint8_t opcode;
	uint32_t psn;
	uint32_t qpn;			/* destination QPN */
	uint8_t *payload;
	uint32_t paylen;		/* payload bytes, without pad */
	struct sockaddr_storage src;	/* who sent it */
	const struct sockaddr_storage *dst; /* to which of our addresses */
};

/* ---- device (one per process) ---- */
struct uroce_dev {
	struct ibv_device ibdev;	/* what ibv_get_device_list hands out */
	uint64_t guid;			/* node GUID, big-endian */

	pthread_mutex_t lock;		/* the engine lock, see top */
	bool net_up;			/* socket bound, progress thread running */

	/* net/udp.c */
	int sock;
	int family;			/* AF_INET or AF_INET6 */
	struct sockaddr_storage local;	/* bound address, port 4791 */
	union ibv_gid gid;		/* RoCE v2 GID of that address */
	uint32_t netdev_mtu;		/* bytes, of the interface carrying it */
	uint32_t rcvbuf;		/* bytes the socket may queue */
	enum ibv_mtu active_mtu;
	const struct uroce_pkt_io *io;
	_Atomic bool gso;		/* io->send_runs works on this socket */
	struct uroce_share *share;	/* net/share.c: the address's group,
					 * NULL when the socket is alone */

	/* engine/lid.c: set when the device comes up or moves */
	uint16_t lid;			/* port LID, unique on this host */
	int lid_fd;			/* the socket whose name claims it */

	/* engine/xmit.c: packets are gathered in a batch under dev->lock,
	 * and sent after it is released, in the order batches were sealed */
	struct uroce_txbatch *txb;	/* the open batch (dev->lock) */
	int tx_depth;			/* uroce_xmit_begin nesting (dev->lock) */
	pthread_mutex_t tx_lock;	/* held while sending */
	pthread_mutex_t txq_lock;	/* the lists below */
	struct uroce_txbatch *txq_head, *txq_tail;	/* sealed, oldest first */
	struct uroce_txbatch *txb_free;
	int txb_count;			/* batches allocated */
	_Atomic int txq_len;

	/* engine/resp.c: while a receive burst is handled, plain ACKs wait
	 * here (QP numbers) and leave once at its end (dev->lock) */
	bool ack_defer;
	uint32_t nack_pending;
	uint32_t ack_pending[UROCE_ACK_PENDING_MAX];

	/* engine/progress.c */
	pthread_mutex_t rx_lock;	/* one receiver at a time keeps order */
	_Atomic uint64_t app_poll_ns;	/* when an application thread last
					 * received for itself */
	pthread_t thread;
	int epfd;
	int timerfd;
	int wakefd;			/* eventfd: wake the progress thread */
	bool stopping;
	uint64_t armed_deadline_ns;	/* what timerfd is set to, 0 = none */

	/* QP table (verbs/qp.c), indexed by qpn % UROCE_MAX_QP */
	struct uroce_qp **qp_tbl;
	uint32_t next_qpn;
	uint32_t qpn_base, qpn_mask;	/* QPN = base | (n & mask), net/udp.c */
	uint32_t nqps;

	/* MR table (verbs/mr.c), indexed by key % UROCE_MAX_MR */
	struct uroce_mr **mr_tbl;
	uint32_t *mr_last_key;		/* per slot: the key it last had */
	uint32_t next_mr_index;
	uint32_t nmrs;

	/* verbs/mcast.c: the multicast groups QPs are attached to (a
	 * list); changed with rx_lock and lock held, so either suffices
	 * to read it */
	struct uroce_mcast_grp *mcast;
	uint32_t nmcast;
	/* SRQ table (verbs/srq.c), indexed by srqn % UROCE_MAX_SRQ; made
	 * at the first SRQ, so that XRC requests can name one */
	struct uroce_srq **srq_tbl;
	uint32_t next_srqn;

	_Atomic unsigned int npds;	/* verbs/pd.c, against UROCE_MAX_PD */
	_Atomic unsigned int ncqs;	/* verbs/cq.c, against UROCE_MAX_CQ */

	/* engine/req.c: packets all RC QPs have in flight, against one
	 * socket buffer, and the QPs waiting for room (a list) */
	uint32_t inflight;
	struct uroce_qp *blocked_head, *blocked_tail;

	/* engine/req.c: pacing of unacknowledged (UC, UD) traffic, which
	 * has no other defence against overrunning the peer's socket */
	uint64_t pace_rate;		/* bytes per second, 0 = off */
	int64_t pace_tokens;		/* bytes */
	uint64_t pace_last_ns;

	/* net/udp.c: fault injection (UROCE_FAULT), off unless set */
	struct uroce_fault {
		bool on;
		uint64_t rng;			/* xorshift state, from seed */
		uint32_t drop, dup, delay;	/* probability * 2^32 */
		_Atomic int rnr_left;		/* responder: RNR-NAK this many SENDs */
		_Atomic int access_left;	/* responder: fail this many rkey checks */
		uint8_t *held;			/* a delayed datagram */
		size_t held_len;
		struct sockaddr_storage held_dst;
	} fault;

	/*
	 * The device counters.  cnt points into the process's stats segment
	 * (engine/shm.c) so that other processes can read them; before that
	 * exists, or if it cannot, at cnt_private.  A device built by hand
	 * (engine tests) must point cnt at cnt_private.
	 */
	_Atomic uint64_t *cnt;
	_Atomic uint64_t cnt_private[UROCE_CNT_NUM];
};

/* the length of the IPv4 or IPv6 address in ss (sendmsg, bind) */
static inline socklen_t uroce_sa_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					  sizeof(struct sockaddr_in6);
}

static inline void uroce_count(struct uroce_dev *dev, enum uroce_counter c,
			       uint64_t n)
{
	atomic_fetch_add_explicit(&dev->cnt[c], n, memory_order_relaxed);
}

/* ---- context ---- */
struct uroce_async_node;

struct uroce_context {
	struct verbs_context vctx;	/* ibv_context is its last member */
	struct uroce_dev *dev;
	/*
	 * Async events wait in a queue (verbs/cq.c); async_pipe is an
	 * AF_UNIX socketpair whose [0] is context->async_fd and holds one
	 * doorbell byte while the queue is non-empty, so that destroying an
	 * object can withdraw its pending events (uroce_async_purge).
	 */
	int async_pipe[2];
	pthread_mutex_t async_lock;
	struct uroce_async_node *async_head, *async_tail;
};

static inline struct uroce_context *to_uctx(struct ibv_context *ctx)
{
	return container_of(ctx, struct uroce_context, vctx.context);
}

static inline struct uroce_dev *ctx_dev(struct ibv_context *ctx)
{
	return to_uctx(ctx)->dev;
}

/* ---- PD ---- */
struct uroce_pd {
	struct ibv_pd ibpd;
	uint32_t pdn;
	_Atomic int refs;		/* MRs, QPs, AHs using it */
};

static inline struct uroce_pd *to_upd(struct ibv_pd *pd)
{
	return container_of(pd, struct uroce_pd, ibpd);
}

/* ---- MR ---- */
struct uroce_mr {
	struct ibv_mr ibmr;		/* lkey, rkey, addr, length (verbs_mr is not public) */
	struct uroce_pd *pd;
	uint64_t iova;			/* what remote addresses are relative to */
	uint8_t *addr;			/* where iova maps to */
	uint64_t length;
	unsigned int access;		/* enum ibv_access_flags */
	uint32_t key;			/* lkey == rkey */
	/* memory windows live in the same key table (verbs/mw.c) */
	struct uroce_mr *parent;	/* MW: the MR it is bound over */
	uint8_t mw_type;		/* 0: an MR; 1 or 2: a window */
	bool mw_bound;
	uint32_t mw_qpn;		/* type 2: the QP it is bound to */
	_Atomic int mw_refs;		/* MR: windows bound over it */
};

static inline struct uroce_mr *to_umr(struct ibv_mr *mr)
{
	return container_of(mr, struct uroce_mr, ibmr);
}

/*
 * Keys (lkey == rkey): bits 8..23 index the key table; bits 24..31 and
 * 0..7 are random for an MR.  IBA leaves the low 8 bits to the consumer
 * for windows (ibv_inc_rkey), so a window's key keeps its upper 24 bits.
 */
#define UROCE_KEY_INDEX_SHIFT	8
static inline uint32_t uroce_key_index(uint32_t key)
{
	return (key >> UROCE_KEY_INDEX_SHIFT) & (UROCE_MAX_MR - 1);
}

struct uroce_mw {
	struct ibv_mw ibmw;
	struct uroce_mr win;		/* the key table entry */
};

static inline struct uroce_mw *to_umw(struct ibv_mw *mw)
{
	return container_of(mw, struct uroce_mw, ibmw);
}

/* ---- CQ ---- */
struct uroce_cqe {
	struct ibv_wc wc;
	uint64_t ts_ns;			/* CLOCK_MONOTONIC, if the CQ asked for it */
	uint64_t wallclock_ns;		/* CLOCK_REALTIME, likewise */
};

struct uroce_cq {
	struct ibv_cq_ex ex;		/* ibv_cq is its head */
	struct uroce_dev *dev;
	pthread_mutex_t lock;
	struct uroce_cqe *ring;
	uint32_t size;			/* power of two, >= cqe + 1 */
	uint32_t head;			/* next to poll (consumer) */
	uint32_t tail;			/* next to fill (producer) */
	bool armed;			/* req_notify_cq pending */
	bool solicited_only;
	bool overrun;
	uint64_t wc_flags;		/* cq_ex: which fields may be read */
	/* cq_ex: copy of the entry being read.  start_poll/next_poll pop it
	 * and drop cq->lock, so the application may post between them. */
	struct uroce_cqe cur;
	_Atomic int refs;		/* QPs using it; destroy_cq says EBUSY */

	/* completion channel bookkeeping (verbs/cq.c, channel lock) */
	struct uroce_cq *ev_next;	/* in the channel's pending list */
	uint32_t ev_pending;		/* events queued, not yet read */
	uint32_t comp_events_reported;	/* read by ibv_get_cq_event */
	uint32_t async_events_reported;	/* read by ibv_get_async_event */
};

static inline struct uroce_cq *to_ucq(struct ibv_cq *cq)
{
	return container_of((struct ibv_cq_ex *)cq, struct uroce_cq, ex);
}

static inline struct ibv_cq *ucq_ibcq(struct uroce_cq *cq)
{
	return ibv_cq_ex_to_cq(&cq->ex);
}

/* ---- AH ---- */
struct uroce_ah {
	struct ibv_ah ibah;
	struct ibv_ah_attr attr;
	struct sockaddr_storage dst;	/* from attr.grh.dgid */
};

static inline struct uroce_ah *to_uah(struct ibv_ah *ah)
{
	return container_of(ah, struct uroce_ah, ibah);
}

/* ---- multicast group (verbs/mcast.c, net/mcast.c) ---- */
struct uroce_mcast_grp {
	struct uroce_mcast_grp *next;
	union ibv_gid gid;
	struct sockaddr_storage addr;	/* the group's IP address, port 4791 */
	int fd;				/* bound to addr, member of the group */
	uint32_t nqps;
	struct uroce_qp *qps[UROCE_MAX_MCAST_QP_ATTACH];
};

/* ---- QP ---- */

/* A posted send work request, as the requester walks it. */
struct uroce_send_wqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	uint32_t imm;			/* big-endian as posted (imm or inv rkey) */
	uint64_t length;		/* total bytes */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	struct ibv_mw *bind_mw;		/* BIND_MW: the window, rkey = new key */
	struct ibv_mw_bind_info bind_info;
	struct sockaddr_storage ud_dst;	/* UD: where the AH points */
	uint32_t ud_qpn, ud_qkey;
	uint32_t xrc_srqn;		/* XRC INI: the SRQ it is sent to */
	uint32_t num_sge;
	struct ibv_sge *sge;		/* sq->sge + idx * max_sge */
	uint8_t *inline_data;		/* sq->inline_buf + idx * max_inline; NULL if not inline */

	/* requester progress */
	uint32_t first_psn;
	uint32_t last_psn;
	uint32_t npkts;
	bool started;
	bool acked;			/* done on the wire (ack or response seen) */
	uint64_t read_done;		/* READ: bytes of response placed */
	uint64_t atomic_orig;
	enum ibv_wc_status status;
};

struct uroce_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge *sge;		/* rq->sge + idx * max_sge */
	uint64_t length;		/* sum of sge lengths */
};

struct uroce_sq {
	struct uroce_send_wqe *wqe;
	struct ibv_sge *sge;
	uint8_t *inline_buf;
	uint32_t size;			/* power of two */
	uint32_t max_wr, max_sge, max_inline;
	uint32_t head;			/* next slot to post into */
	uint32_t next;			/* next WQE the requester starts */
	uint32_t tail;			/* oldest WQE not yet completed */
	uint32_t ex_start;		/* ibv_wr_start: head when started */
	int ex_err;			/* first error seen inside wr_start/complete */
};

struct uroce_rq {
	struct uroce_recv_wqe *wqe;
	struct ibv_sge *sge;
	uint32_t size;
	uint32_t max_wr, max_sge;
	uint32_t head;			/* next slot to post into */
	uint32_t tail;			/* oldest posted, not consumed */
};

/* ---- XRC domain (verbs/xrc.c) ---- */
struct uroce_xrcd_dom;		/* shared by handles on one file */

struct uroce_xrcd {
	struct ibv_xrcd ibxrcd;
	struct uroce_xrcd_dom *dom;
	_Atomic int refs;		/* XRC SRQs and TGT QPs made on it */
};

static inline struct uroce_xrcd *to_uxrcd(struct ibv_xrcd *xrcd)
{
	return container_of(xrcd, struct uroce_xrcd, ibxrcd);
}

/* ---- SRQ ---- */
struct uroce_srq {
	struct ibv_srq ibsrq;
	struct uroce_dev *dev;
	struct uroce_pd *pd;
	struct uroce_rq rq;
	uint32_t srqn;			/* ibv_get_srq_num */
	struct uroce_xrcd *xrcd;	/* XRC SRQ: its domain, else NULL */
	struct uroce_cq *cq;		/* XRC SRQ: its receives' CQ */
	uint32_t limit;			/* armed SRQ limit, 0 = not armed */
	_Atomic int refs;		/* QPs attached */
	uint32_t async_events_reported;
};

static inline struct uroce_srq *to_usrq(struct ibv_srq *srq)
{
	return container_of(srq, struct uroce_srq, ibsrq);
}

/* A saved atomic result, to answer a duplicate without executing it
 * again (duplicate READs are simply served again: no side effects). */
struct uroce_resp_res {
	bool valid;
	uint32_t psn;			/* of the atomic request */
	uint64_t orig;			/* the value it returned */
};

struct uroce_req_state {
	uint32_t psn;			/* next PSN to send */
	uint32_t psn_max;		/* one past the highest PSN ever sent */
	uint32_t cur_off;		/* byte offset in the WQE at sq.next */
	uint32_t cur_psn_idx;		/* packet index in that WQE */
	uint64_t deadline_ns;		/* retransmit timer, 0 = off */
	uint64_t rnr_deadline_ns;	/* RNR wait, 0 = none */
	uint64_t pace_deadline_ns;	/* UC/UD pacing wait, 0 = none */
	unsigned int retry_left;
	unsigned int rnr_retry_left;
	uint32_t cwnd;			/* packets; shrinks on timeout */
	uint32_t backoff;		/* consecutive timeouts, for the timer */
	bool need_retry;
};

struct uroce_comp_state {
	uint32_t psn;			/* oldest unacknowledged PSN */
	uint32_t rewind_psn;		/* last PSN we went back to on a gap */
	bool rewound;
};

struct uroce_resp_state {
	uint32_t epsn;			/* expected PSN */
	uint32_t msn;
	bool nak_sent;			/* a PSN sequence NAK is outstanding */
	/* an ACK held until the end of the receive burst (engine/resp.c),
	 * so that several AckReq packets of one burst get one ACK */
	bool ack_pending;
	uint32_t ack_psn, ack_msn;
	/* the message being received */
	bool in_send;
	uint64_t send_off;
	bool in_write;
	struct uroce_mr *write_mr;
	uint64_t write_va;
	uint64_t write_remaining;
	uint64_t write_len;		/* RETH length of the current write */
	uint32_t write_rkey;
	uint32_t xrc_srqn;		/* XRC TGT: SRQ of the open message */
	struct uroce_resp_res *res;	/* max_dest_rd_atomic entries */
	uint32_t nres;
	uint32_t res_next;
};

typedef void (*uroce_wr_flush_fn)(struct ibv_qp_ex *qp, uint32_t rkey,
				  uint64_t remote_addr, size_t len,
				  uint8_t type, uint8_t level);

struct uroce_qp {
	struct ibv_qp_ex ex;		/* ibv_qp is its head */
	uroce_wr_flush_fn wr_flush;	/* ibv_qp_ex.wr_flush in rdma-core 45+ */
	struct uroce_dev *dev;
	struct uroce_pd *pd;
	struct uroce_cq *scq, *rcq;
	struct uroce_srq *srq;		/* receives come from here if set */
	struct uroce_xrcd *xrcd;	/* XRC TGT: its domain */
	enum ibv_qp_type type;
	bool sq_sig_all;
	bool is_ex;			/* created with send_ops_flags */
	bool blocked;			/* on dev's list, waiting for room */
	struct uroce_qp *blocked_next;
	bool comm_est;			/* COMM_EST raised */
	bool sqd_notify;		/* raise SQ_DRAINED when drained */
	bool block_self_mcast;		/* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB */
	uint32_t nmcast;		/* groups attached (verbs/mcast.c) */
	uint64_t send_ops_flags;

	struct ibv_qp_attr attr;	/* current attributes (query_qp) */
	struct sockaddr_storage peer;	/* from ah_attr.grh.dgid at RTR */
	uint32_t mtu;			/* path MTU, bytes */

	struct uroce_sq sq;
	struct uroce_rq rq;
	struct uroce_req_state req;
	struct uroce_comp_state comp;
	struct uroce_resp_state resp;

	uint64_t cnt_tx_pkts, cnt_rx_pkts, cnt_retrans;

	/* bumped by ibv_get_async_event (under the context's async_lock);
	 * destroy_qp waits for ibv_qp.events_completed to reach it */
	uint32_t async_events_reported;
};

_Static_assert(offsetof(struct uroce_qp, wr_flush) == 352,
	       "wr_flush sits where rdma-core 45 put it in ibv_qp_ex");

static inline struct uroce_qp *to_uqp(struct ibv_qp *qp)
{
	return container_of((struct ibv_qp_ex *)qp, struct uroce_qp, ex);
}

static inline struct ibv_qp *uqp_ibqp(struct uroce_qp *qp)
{
	return &qp->ex.qp_base;
}

static inline bool uroce_qp_is_xrc(const struct uroce_qp *qp)
{
	return qp->type == IBV_QPT_XRC_SEND || qp->type == IBV_QPT_XRC_RECV;
}

/* acknowledged (RC rules): RC and both XRC halves */
static inline bool uroce_qp_reliable(const struct uroce_qp *qp)
{
	return qp->type == IBV_QPT_RC || uroce_qp_is_xrc(qp);
}

/* ---- cross-file prototypes, grouped by defining file ---- */

/* verbs/device.c */
struct uroce_dev *uroce_dev_get(void);	/* the process's device */
int uroce_dev_up(struct uroce_dev *dev); /* bring up net + progress, once */
uint64_t uroce_now_ns(void);

/* verbs/mr.c: caller holds dev->lock.  Returns the MR if key names a
 * live MR in pd granting every bit of access and covering
 * [va, va + len) without wrapping, else NULL. */
struct uroce_mr *uroce_mr_check(struct uroce_dev *dev, struct uroce_pd *pd,
				uint32_t key, uint64_t va, uint64_t len,
				unsigned int access);
/* put mr in a free key-table slot and give it a key; dev->lock held */
int uroce_mr_insert(struct uroce_dev *dev, struct uroce_mr *mr);
/* pointer to iova va inside mr (caller checked the range) */
static inline uint8_t *uroce_mr_ptr(struct uroce_mr *mr, uint64_t va)
{
	return mr->addr + (va - mr->iova);
}

/* verbs/cq.c: add a completion; takes cq->lock.  Raises the CQ event if
 * the CQ is armed.  Returns 0, or -ENOSPC on overrun (CQ is then in error). */
int uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc, bool solicited);
void uroce_async_event(struct uroce_context *uctx, struct ibv_async_event *ev);
/* withdraw the queued async events of obj (a CQ, QP, SRQ or WQ) before
 * destroying it; then wait for events_completed == async_events_reported */
void uroce_async_purge(struct uroce_context *uctx, const void *obj);

/* verbs/device.c: ops that verbs.h reaches through struct verbs_context */
int uroce_query_port(struct ibv_context *ctx, uint8_t port,
		     struct ibv_port_attr *attr, size_t attr_len);
int uroce_query_device_ex(struct ibv_context *ctx,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size);

/* verbs/cq.c: ops reached through ibv_context.ops / verbs_context */
int uroce_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int uroce_req_notify_cq(struct ibv_cq *cq, int solicited_only);
struct ibv_cq_ex *uroce_create_cq_ex(struct ibv_context *ctx,
				     struct ibv_cq_init_attr_ex *attr);

/* verbs/qp.c */
struct ibv_qp *uroce_create_qp_ex(struct ibv_context *ctx,
				  struct ibv_qp_init_attr_ex *attr);
int uroce_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr);
int uroce_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr);
struct uroce_qp *uroce_qp_lookup(struct uroce_dev *dev, uint32_t qpn);
/* append receive WRs to a receive queue (a QP's or an SRQ's); dev->lock
 * held; returns 0 or a positive errno with *bad_wr set */
int uroce_rq_post(struct uroce_rq *rq, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);
/* check a filled WQE and compute its length; dev->lock held.  Returns 0
 * or a positive errno. */
int uroce_sq_check(struct uroce_qp *qp, struct uroce_send_wqe *wqe);
void uroce_sq_flush_if_error(struct uroce_qp *qp);
/* a WQE slot at sq.head, or NULL if the SQ is full; dev->lock held */
struct uroce_send_wqe *uroce_sq_slot(struct uroce_qp *qp);
void uroce_qp_to_error(struct uroce_qp *qp);	/* dev->lock held */

/* verbs/srq.c */
int uroce_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);
struct ibv_srq *uroce_create_srq_ex(struct ibv_context *ctx,
				    struct ibv_srq_init_attr_ex *attr);
/* the receive queue a QP takes receives from */
static inline struct uroce_rq *uroce_qp_rq(struct uroce_qp *qp)
{
	return qp->srq ? &qp->srq->rq : &qp->rq;
}
/* a receive WQE was consumed from the SRQ: raise the limit event */
void uroce_srq_consumed(struct uroce_srq *srq);
/* the SRQ numbered srqn, or NULL; dev->lock held */
struct uroce_srq *uroce_srq_lookup(struct uroce_dev *dev, uint32_t srqn);

/* verbs/xrc.c: XRC domains, reached through struct verbs_context */
struct ibv_xrcd *uroce_open_xrcd(struct ibv_context *ctx,
				 struct ibv_xrcd_init_attr *attr);
int uroce_close_xrcd(struct ibv_xrcd *xrcd);
int uroce_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
int uroce_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		    uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);
static inline bool uroce_xrcd_same(const struct uroce_xrcd *a,
				   const struct uroce_xrcd *b)
{
	return a && b && a->dom == b->dom;
}

/* verbs/mw.c */
struct ibv_mw *uroce_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int uroce_dealloc_mw(struct ibv_mw *mw);
int uroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		  struct ibv_mw_bind *bind);
/* run a bind / an invalidation; dev->lock held */
enum ibv_wc_status uroce_mw_bind(struct uroce_qp *qp, struct ibv_mw *mw,
				 uint32_t new_key,
				 const struct ibv_mw_bind_info *info);
enum ibv_wc_status uroce_invalidate(struct uroce_qp *qp, uint32_t key);

/* verbs/wr_ex.c */
void uroce_qp_ex_init(struct uroce_qp *qp);

/* engine/req.c: dev->lock held */
void uroce_req_run(struct uroce_qp *qp);
void uroce_req_rewind(struct uroce_qp *qp);	/* go back to comp.psn */
void uroce_req_arm(struct uroce_qp *qp);	/* (re)start the ack timer */
void uroce_req_progress(struct uroce_qp *qp, uint32_t acked);
void uroce_req_loss(struct uroce_qp *qp);	/* a gap was seen */
/* comp.psn moved by n: give the device budget back, wake waiters */
void uroce_req_credit(struct uroce_qp *qp, uint32_t n);
/* the QP stops (error, reset, destroy): give back all it holds */
void uroce_req_release(struct uroce_qp *qp);
static inline bool uroce_wqe_rd_atomic(const struct uroce_send_wqe *wqe)
{
	return wqe->opcode == IBV_WR_RDMA_READ ||
	       wqe->opcode == (enum ibv_wr_opcode)UROCE_WR_FLUSH ||
	       wqe->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       wqe->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
void uroce_req_timeout(struct uroce_qp *qp, uint64_t now);
/* engine/comp.c: an ACK, NAK, READ response or atomic ACK for qp */
void uroce_comp_rx(struct uroce_qp *qp, struct uroce_pkt *pkt);
/* engine/resp.c: a request for qp */
void uroce_resp_rx(struct uroce_qp *qp, struct uroce_pkt *pkt);
/* engine/recv.c: the IP/UDP fields the ICRC covers, for a datagram from
 * src to dst (port 4791); IPv4 ID and DF are left 0 */
void uroce_icrc_ip_from(const struct sockaddr_storage *src,
			const struct sockaddr_storage *dst,
			struct uroce_icrc_ip *ip);
/* engine/recv.c: parse, check and dispatch one datagram (no lock held);
 * ip_id_hint is the IPv4 identification it most likely had (the ICRC
 * check tries it first) */
void uroce_recv(struct uroce_dev *dev, uint8_t *buf, size_t len,
		const struct sockaddr_storage *src,
		const struct sockaddr_storage *dst, uint16_t ip_id_hint);
/* engine/progress.c */
int uroce_progress_start(struct uroce_dev *dev);
/* an application thread inside a verb: receive what is waiting, unless
 * another thread is already at it (never blocks) */
void uroce_progress_poll(struct uroce_dev *dev);
/* the application found what it polled for: it may stop polling now, so
 * the progress thread must not wait for it */
static inline void uroce_progress_poll_done(struct uroce_dev *dev)
{
	atomic_store_explicit(&dev->app_poll_ns, 0, memory_order_relaxed);
}
void uroce_timer_arm(struct uroce_dev *dev, uint64_t deadline_ns); /* lock held */
/* engine/xmit.c: send a packet of qp to its peer; hdr holds BTH..ext
 * headers, payload iov follows, pad and ICRC are added here. */
int uroce_xmit(struct uroce_qp *qp, uint8_t *hdr, uint32_t hdrlen,
	       const struct iovec *payload, int npayload, uint32_t paylen);
/* the same, to an explicit destination (UD) */
int uroce_xmit_to(struct uroce_qp *qp, const struct sockaddr_storage *dst,
		  uint8_t *hdr, uint32_t hdrlen, const struct iovec *payload,
		  int npayload, uint32_t paylen);
/* hold the packets sent until the matching end, then queue them to be
 * sent in as few system calls as they allow (nests; dev->lock held) */
void uroce_xmit_begin(struct uroce_dev *dev);
void uroce_xmit_end(struct uroce_dev *dev);
/* send what uroce_xmit_end queued; call without dev->lock.  Returns once
 * everything queued before the call is with the kernel (waiting for a
 * thread that is sending, which may send ours) */
void uroce_tx_drain(struct uroce_dev *dev);
/* release the engine lock and send what was queued under it */
static inline void uroce_dev_unlock(struct uroce_dev *dev)
{
	pthread_mutex_unlock(&dev->lock);
	uroce_tx_drain(dev);
}

/* engine/sge.c: dev->lock held */
/* check every SGE against its MR: valid lkey in pd, range, access */
int uroce_sge_check(struct uroce_dev *dev, struct uroce_pd *pd,
		    const struct ibv_sge *sge, uint32_t n, unsigned int access);
/* scatter len bytes of data to the SGE list starting at byte off */
void uroce_sge_scatter(const struct ibv_sge *sge, uint32_t n, uint64_t off,
		       const uint8_t *data, uint32_t len);
/* describe len bytes at byte off of the SGE list as iovecs; returns the
 * number used, at most max */
int uroce_sge_iov(const struct ibv_sge *sge, uint32_t n, uint64_t off,
		  uint32_t len, struct iovec *iov, int max);

/* engine/resp.c */
void uroce_send_ack(struct uroce_qp *qp, uint8_t syn, uint32_t psn);
/* hold plain ACKs until uroce_ack_burst_end (a receive burst; lock held) */
void uroce_ack_burst_begin(struct uroce_dev *dev);
void uroce_ack_burst_end(struct uroce_dev *dev);
/* send the ACK qp holds back, if any, before anything else of qp */
void uroce_ack_flush(struct uroce_qp *qp);
/* answer the request at psn with an invalid request NAK and move the
 * QP to the error state (IBA 9.7.5.2.2, class C) */
void uroce_resp_nak_invalid(struct uroce_qp *qp, uint32_t psn);

/* engine/xrc.c: dev->lock held */
/* send a packet of an XRC QP: hdr is built as RC's, this makes it XRC's
 * (opcode | 0xa0, an XRCETH after the BTH of a request) */
int uroce_xrc_xmit(struct uroce_qp *qp, uint8_t *hdr, uint32_t hdrlen,
		   const struct iovec *payload, int npayload, uint32_t paylen);
/* a packet for an XRC QP: responses to INI QPs, requests to TGT QPs */
void uroce_xrc_rx(struct uroce_qp *qp, struct uroce_pkt *pkt);

/* engine/comp.c */
/* report acknowledged WQEs at the SQ tail, in order; one that failed
 * moves the QP to the error state */
void uroce_comp_retire(struct uroce_qp *qp);
enum ibv_wc_opcode uroce_wc_opcode(enum ibv_wr_opcode op);

/* engine/stats.c */
extern const char *const uroce_counter_name[UROCE_CNT_NUM];

/* engine/shm.c: the stats segment /dev/shm/uroce.<pid> (include/uroce_shm.h).
 * uroce_shm_open, after uroce_net_open: create it and move the counters
 * into it; failure only means nobody can look, so it returns nothing. */
void uroce_shm_open(struct uroce_dev *dev);
/* after the device moved (rdma_bind_addr): publish its new address and LID */
void uroce_shm_set_addr(struct uroce_dev *dev);
/* the GID of the live device on this host whose port has that LID, from
 * the other processes' segments: 0, -ENOENT, or -ENOTUNIQ if two claim it */
int uroce_shm_find_lid(uint16_t lid, union ibv_gid *gid);

/* engine/lid.c: port LIDs, unique among the uroce devices of a host, so
 * that GRH-less addresses (ah_attr.is_global 0) work between them.
 * uroce_lid_claim: after uroce_net_open and uroce_net_rebind, before the
 * segment publishes it; returns 0 or a negative errno.
 * uroce_lid_resolve: the GID a GRH-less address to dlid goes to; 0 or
 * -EINVAL (no uroce device on this host has that LID). */
int uroce_lid_claim(struct uroce_dev *dev);
int uroce_lid_resolve(struct uroce_dev *dev, uint16_t dlid,
		      union ibv_gid *gid);

/* engine/log.c: UROCE_LOG=error|warn|info|debug, off by default.  One
 * line per event on stderr; uroce_log_qp lines are rate-limited, for the
 * datapath.  psn < 0: no PSN. */
enum uroce_log_level {
	UROCE_LOG_OFF,
	UROCE_LOG_ERROR,
	UROCE_LOG_WARN,
	UROCE_LOG_INFO,
	UROCE_LOG_DEBUG,
};
extern int uroce_log_level;
void uroce_log_emit(int level, bool limited, int64_t qpn, int64_t psn,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define uroce_log(level, ...)						\
	do {								\
		if (__builtin_expect(uroce_log_level >= (level), 0))	\
			uroce_log_emit(level, false, -1, -1, __VA_ARGS__); \
	} while (0)
#define uroce_log_qp(level, qp, psn, ...)				\
	do {								\
		if (__builtin_expect(uroce_log_level >= (level), 0))	\
			uroce_log_emit(level, true,			\
				       (qp)->ex.qp_base.qp_num,	\
				       (int64_t)(psn), __VA_ARGS__);	\
	} while (0)

/* net/pcap.c: the wire tap, called for every datagram sent (after fault
 * injection: what really leaves) and received (before any check).  It
 * counts by opcode class and, with UROCE_PCAP=file, writes the packet
 * with Ethernet/IP/UDP headers to a pcap file. */
void uroce_pcap_open(struct uroce_dev *dev);	/* from uroce_net_open */
void uroce_tap_tx(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		  const struct iovec *iov, int iovcnt, uint16_t ip_id);
void uroce_tap_rx(struct uroce_dev *dev, const uint8_t *buf, size_t len,
		  const struct sockaddr_storage *src,
		  const struct sockaddr_storage *dst, uint16_t ip_id);
const char *uroce_pcap_path(void);		/* "" when not capturing */
/* the IPv4 (20 bytes, DF, ID 0, TTL 64, checksum) or IPv6 (40 bytes)
 * header of a UDP datagram of udp_len bytes from src to dst, as the
 * kernel sends ours; returns its length (pcap frames, UD GRHs) */
size_t uroce_ip_hdr(uint8_t *ip, const struct sockaddr_storage *src,
		    const struct sockaddr_storage *dst, uint16_t udp_len);

/* verbs/mcast.c: a packet that came to a multicast group, or that has
 * the multicast DQPN; delivered to every QP attached to the group.  No
 * lock held; takes dev->lock. */
void uroce_mcast_rx(struct uroce_dev *dev, struct uroce_pkt *pkt);
/* whether gid is a multicast GID (an IPv4-mapped 224/4 address or ff00::/8) */
bool uroce_gid_is_mcast(const union ibv_gid *gid);
/* whether ss is a multicast IP address (every received packet asks) */
static inline bool uroce_addr_is_mcast(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr)
			>> 28) == 0xe;
	return ss->ss_family == AF_INET6 &&
	       ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr[0] == 0xff;
}

/* net/mcast.c: the sockets that receive multicast groups */
/* a socket bound to grp->addr that joined the group on the interface of
 * the device's address, watched by the progress thread; sets grp->fd */
int uroce_mcast_open(struct uroce_dev *dev, struct uroce_mcast_grp *grp);
void uroce_mcast_close(struct uroce_dev *dev, struct uroce_mcast_grp *grp);
/* the progress thread saw fd readable: if it is a group's, receive and
 * dispatch what waits there (takes rx_lock); returns false if it is not */
bool uroce_mcast_poll(struct uroce_dev *dev, int fd);
/* the device's socket sends multicast out of the interface that holds
 * its address and loops it back to this host (from open_bound) */
void uroce_mcast_tx_setup(int fd, const struct sockaddr_storage *addr);

/* net/share.c: one address shared by many processes */
struct uroce_share;
/* bind sock to ss in the address's group (join: or only if there is no
 * group yet); sets *out */
int uroce_share_bind(struct uroce_dev *dev, int sock,
		     const struct sockaddr_storage *ss, bool join,
		     struct uroce_share **out);
/* leave the group; closes sock */
void uroce_share_release(struct uroce_share *sh, int sock);
/* the progress thread's epoll exists: watch the group's descriptors */
void uroce_share_watch(struct uroce_dev *dev);
/* a received datagram: true if it was another member's (forwarded or
 * counted as dropped) or the group's own; rx_lock held */
bool uroce_share_steer(struct uroce_dev *dev, const uint8_t *buf, size_t len,
		       const struct sockaddr_storage *src,
		       const struct sockaddr_storage *dst, uint16_t ip_id);
/* the progress thread saw fd readable: true if it was the group's */
bool uroce_share_poll(struct uroce_dev *dev, int fd);
uint32_t uroce_share_slot(const struct uroce_dev *dev);	/* 0: alone */
uint32_t uroce_share_first_qpn(const struct uroce_dev *dev);
void uroce_share_note_qpn(struct uroce_dev *dev);	/* dev->lock */
int uroce_share_listen(struct uroce_dev *dev, uint64_t sid, bool on);

/* net/udp.c */
int uroce_net_open(struct uroce_dev *dev);
void uroce_net_close(struct uroce_dev *dev);
int uroce_net_rebind(struct uroce_dev *dev, const struct sockaddr *sa);
/* receive and dispatch what is waiting on the socket, without blocking;
 * returns the number of datagrams received (each of a GRO train) */
int uroce_net_poll(struct uroce_dev *dev);
int uroce_addr_from_gid(const union ibv_gid *gid, struct sockaddr_storage *ss);
void uroce_gid_from_addr(const struct sockaddr_storage *ss, union ibv_gid *gid);

#endif /* UROCE_H */
