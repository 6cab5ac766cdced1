/* SPDX-License-Identifier: MIT */
/*
 * obj/qp.h: queue pairs, their work queues, SRQs, XRC domains and
 * multicast groups: the objects the engine is handed.
 *
 * Owns: struct uroce_qp and its queues (struct uroce_sq, struct uroce_rq,
 * the WQEs), struct uroce_srq, struct uroce_xrcd, struct uroce_mcast_grp,
 * and the QP/SRQ/group tables (dev->obj).  The transport state inside a
 * QP (qp->req, qp->comp, qp->resp) is defined here but written only by
 * engine/.  Exports: uroce_qp_lookup (obj/qp.c), uroce_srq_lookup and
 * uroce_srq_consumed (obj/srq.c), uroce_mcast_grp_find (obj/mcast.c).
 * Locking: everything here is under dev->lock; the multicast group list
 * is changed with dev->prog.rx_lock and dev->lock held, so either
 * suffices to read it.  refs fields are atomics.
 */
#ifndef UROCE_OBJ_QP_H
#define UROCE_OBJ_QP_H

#include "obj/cq.h"
#include "obj/mr.h"

/* ---- multicast group (verbs/mcast.c, net/mcast.c) ---- */
struct uroce_mcast_grp {
	struct uroce_mcast_grp *next;
	union ibv_gid gid;
	struct sockaddr_storage addr; /* the group's IP address, port 4791 */
	int fd;			      /* bound to addr, member of the group */
	uint32_t nqps;
	struct uroce_qp *qps[UROCE_MAX_MCAST_QP_ATTACH];
};

/* ---- QP ---- */

/*
 * Where a send WQE stands.  engine/comp.c owns the transitions
 * (uroce_wqe_to: the one place a state changes, with the table of those
 * allowed); verbs/qp.c only enters a new WQE as POSTED.
 *
 *   POSTED --start--> PENDING --READ data--> READING --last--> DONE
 *      |                 |  \--UC/UD, in a send batch--> QUEUED --sent--> DONE
 *      |                 \--ACK / response / UC,UD sent---------------> DONE
 *      \--local op (bind, invalidate) / local error-----> DONE or ERROR
 *   and from any state but DONE: --> ERROR (status says which)
 */
enum uroce_wqe_state {
	UROCE_WQE_POSTED,  /* in the SQ, not yet looked at (IBA 10.8.3) */
	UROCE_WQE_PENDING, /* PSNs given, packets sent or being sent, no
				 * answer yet (9.7.4) */
	UROCE_WQE_READING, /* RDMA READ: responses placed up to read_done
				 * (9.7.5.1.3: they come in PSN order) */
	UROCE_WQE_QUEUED,  /* UC/UD: its last packet in a send batch
				 * not yet with the kernel (engine/xmit.c);
				 * done when it is (9.8.4: once on the wire) */
	UROCE_WQE_DONE,	   /* complete, successfully */
	UROCE_WQE_ERROR,   /* complete, in error: status says which */
	UROCE_WQE_NSTATES
};

/* A posted send work request, as the requester walks it. */
struct uroce_send_wqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	uint32_t imm;	 /* big-endian as posted (imm or inv rkey) */
	uint64_t length; /* total bytes */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	struct ibv_mw *bind_mw; /* BIND_MW: the window, rkey = new key */
	struct ibv_mw_bind_info bind_info;
	struct sockaddr_storage ud_dst; /* UD: where the AH points */
	struct uroce_ipopt ud_ip;	/* UD: the AH's TOS and TTL */
	uint32_t ud_qpn, ud_qkey;
	uint32_t xrc_srqn; /* XRC INI: the SRQ it is sent to */
	uint32_t num_sge;
	struct ibv_sge *sge; /* sq->sge + idx * max_sge */
	uint8_t *inline_data; /* sq->inline_buf + idx * max_inline; NULL if not inline */

	/* requester progress */
	uint32_t seg; /* payload of each packet but the last (req.c seg_of) */
	uint32_t first_psn;
	uint32_t last_psn;
	uint32_t npkts;
	enum uroce_wqe_state state;
	uint64_t read_done; /* READING: response bytes placed */
	uint64_t tx_seq;    /* QUEUED: its last packet's batch */
	uint64_t atomic_orig;
	enum ibv_wc_status status; /* ERROR: which */
	/* a SEND or WRITE with immediate: its number among the QP's
	 * messages that take a receive WQE, counted from 1 as they start
	 * (engine/req.c, end-to-end credits); 0: another kind */
	uint32_t rq_msg;
};

struct uroce_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge *sge; /* rq->sge + idx * max_sge */
	uint64_t length;     /* sum of sge lengths */
};

struct uroce_sq {
	struct uroce_send_wqe *wqe;
	struct ibv_sge *sge;
	uint8_t *inline_buf;
	uint32_t size; /* power of two */
	uint32_t max_wr, max_sge, max_inline;
	uint32_t head; /* next slot to post into */
	uint32_t next; /* next WQE the requester starts */
	uint32_t tail; /* oldest WQE not yet completed */
};

/*
 * verbs/wr_ex.c: the WQEs built between ibv_wr_start and ibv_wr_complete,
 * private to the thread that holds lock (the per-QP critical section
 * rdma-core promises), entered into the send queue at complete under the
 * engine lock.  Same geometry as the send queue.
 */
struct uroce_wr_stage {
	pthread_mutex_t lock;	    /* wr_start until complete/abort */
	struct uroce_send_wqe *wqe; /* sq.max_wr of them */
	struct ibv_sge *sge;
	uint8_t *inline_buf;
	uint32_t n; /* staged so far */
	int err;    /* first error seen since wr_start */
};

struct uroce_rq {
	struct uroce_recv_wqe *wqe;
	struct ibv_sge *sge;
	uint32_t size;
	uint32_t max_wr, max_sge;
	uint32_t head; /* next slot to post into */
	uint32_t tail; /* oldest posted, not consumed */
};

/* ---- XRC domain (verbs/xrc.c) ---- */
struct uroce_xrcd_dom; /* shared by handles on one file */

struct uroce_xrcd {
	struct ibv_xrcd ibxrcd;
	struct uroce_xrcd_dom *dom;
	_Atomic int refs; /* XRC SRQs and TGT QPs made on it */
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
	uint32_t srqn;		 /* ibv_get_srq_num */
	struct uroce_xrcd *xrcd; /* XRC SRQ: its domain, else NULL */
	struct uroce_cq *cq;	 /* XRC SRQ: its receives' CQ */
	uint32_t limit;		 /* armed SRQ limit, 0 = not armed */
	_Atomic int refs;	 /* QPs attached */
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
	uint32_t psn;  /* of the atomic request */
	uint64_t orig; /* the value it returned */
};

struct uroce_req_state {
	uint32_t psn;		   /* next PSN to send */
	uint32_t psn_max;	   /* one past the highest PSN ever sent */
	uint32_t cur_off;	   /* byte offset in the WQE at sq.next */
	uint32_t cur_psn_idx;	   /* packet index in that WQE */
	uint64_t deadline_ns;	   /* retransmit timer, 0 = off */
	uint64_t rnr_deadline_ns;  /* RNR wait, 0 = none */
	uint64_t pace_deadline_ns; /* UC/UD pacing wait, 0 = none */
	bool tx_wait;		   /* ... for room in the send buffer */
	bool win_wait;		   /* ... for a train's room in the window */
	unsigned int retry_left;
	unsigned int rnr_retry_left;
	uint32_t cwnd;	     /* packets; shrinks on timeout */
	uint32_t ca_acked;   /* congestion avoidance: acked toward +1 */
	uint64_t ecn_cut_ns; /* the window's last cut for a CNP */
	uint32_t ring_slots; /* the peer's ring, 0: not by a ring */
	uint64_t path_ns;    /* when ring_slots was asked */
	uint32_t path_gen;   /* dev->net.path_gen then */
	uint32_t backoff;    /* consecutive timeouts, for the timer */
	bool need_retry;
	/* RTT (RFC 6298): one PSN timed at a time, never a resent one
	 * (Karn's rule); srtt_ns 0 until the first sample */
	uint32_t rtt_psn;
	uint64_t rtt_sent_ns; /* 0 = none being timed */
	bool untimed;	      /* the packet just sent: its ACK may come
			       * only with a later message's */
	uint64_t srtt_ns, rttvar_ns;
	/* tail-loss probe: a few RTTs without an ACK resend the last packet
	 * sent, asking for an ACK; not a retry (IBA timeout is untouched) */
	uint64_t probe_deadline_ns; /* 0 = off */
	uint32_t probes;	    /* since the last progress */
	bool probing;		    /* the packet now sent is a probe */
	/* end-to-end credits (IBA 9.7.7.2, docs/transport.md "End-to-end
	 * credits"): messages that take a receive WQE are numbered as they
	 * start; rq_limit is the last the responder has room for */
	bool e2e;		     /* the responder counts its receives */
	uint32_t rq_msgs;	     /* such messages started */
	uint32_t rq_seen;	     /* of them, the responder had seen these */
	uint32_t rq_limit;	     /* e2e: start none after this one */
	bool credit_wait;	     /* one waits for room */
	uint64_t credit_deadline_ns; /* then it goes anyway, 0: off */
	bool credit_probe;	     /* that time came */
	bool credit_updates;	     /* the peer says when it posts */
};

/* engine/cc.c: ECN and the DCQCN rate (docs/congestion.md) */
struct uroce_cc_state {
	uint64_t rate;		   /* bytes/s the QP may send, 0 = unpaced */
	uint64_t target;	   /* DCQCN's target rate */
	uint64_t free_rate;	   /* the fastest it was measured at:
					 * back to unpaced there */
	uint32_t alpha;		   /* DCQCN's alpha, of 1024 */
	uint32_t stage;		   /* rate increases since the last cut */
	uint64_t alpha_ns, inc_ns; /* when alpha / the rate last moved */
	int64_t tokens;		   /* bytes the pacer lets go now */
	uint64_t tok_ns;
	uint64_t sent_rate;	    /* bytes/s sent, measured */
	uint64_t win_ns, win_bytes; /* the measuring window */
	uint64_t cnp_sent_ns;	    /* notification point: the last CNP */
	uint64_t ce_seen, cnp_sent, cnp_rx, cuts; /* for uroce qps */
	/* delay-based control (UROCE_CC=delay) */
	uint64_t ts_ns;	      /* the timed AckReq packet's send, 0: none */
	uint32_t ts_psn;      /* its PSN */
	uint64_t ack_ns;      /* when the response being handled reached
			       * the kernel (engine/comp.c), 0: unknown */
	bool limited;	      /* the pacer held the QP back since the
				   * last sample (the rate was the limit) */
	uint64_t streak_rate; /* the rate when the RTT rose above
				   * target (0: below it) */
	uint64_t base_ns;     /* base RTT: the least sample */
	uint64_t recent[4];   /* the last samples (CC_DELAY_FILTER) */
	uint32_t nrecent;
	uint64_t rtt_ns, prev_ns; /* the RTT acted on, the one before */
	/* the last sample was above target: the congestion window of an
	 * unpaced QP does not grow (engine/req.c) */
	bool hold;
	/* cuts did not drain the queue: unpaced until the RTT is below
	 * target */
	bool loss_mode;
	/* delivered since the last sample, and its rate */
	uint64_t dlv_ns, dlv_bytes, dlv_rate;
	/* the last cut; no other before this long after it */
	uint64_t cut_ns, cut_wait_ns;
	/* since when at the most back-off, 0: not there */
	uint64_t held_ns;
	uint64_t fallbacks; /* for uroce qps */
};

struct uroce_comp_state {
	uint32_t psn;	     /* oldest unacknowledged PSN */
	uint32_t rewind_psn; /* last PSN we went back to on a gap */
	uint64_t rewind_ns;  /* when */
	bool rewound;
	/* WQEs QUEUED (engine/comp.c uroce_comp_settle): on dev->tx's list */
	uint32_t nqueued;
	struct uroce_qp *queued_next;
};

struct uroce_resp_state {
	uint32_t epsn; /* expected PSN */
	uint32_t msn;
	bool nak_sent;	      /* a PSN sequence NAK is outstanding */
	uint64_t nak_ns;      /* when it (or its repeat) was sent */
	uint32_t nak_max_psn; /* highest PSN seen since */
	/* an ACK held until the end of the receive burst (engine/resp.c),
	 * so that several AckReq packets of one burst get one ACK */
	bool ack_pending;
	bool ack_end; /* its last mark was for a message's last packet */
	uint32_t ack_psn, ack_msn;
	/* requests executed after the last ACK, none of which asked for one
	 * (uroce_resp_ack_unasked) */
	bool unasked;
	/* the last ACK told the requester of no receive WQE: the next post
	 * tells it of the new ones (engine/resp.c uroce_resp_rq_posted) */
	bool rq_told_empty;
	/* the message being received */
	bool in_send;
	uint64_t send_off;
	/*
	 * The receive WQE of the SEND in progress, taken off its queue (a
	 * copy, with its SGEs) when the message starts: the QP owns it until
	 * the message ends (IBA 10.2.9.3), and on an SRQ other QPs' messages
	 * interleave with this one.  An abandoned UC message leaves it for
	 * the next one, as if still at the head of the queue.  recv_cq is the
	 * CQ it completes on (an XRC TGT QP's is its SRQ's).
	 */
	bool recv_taken;
	struct uroce_recv_wqe recv;
	struct ibv_sge recv_sge[UROCE_MAX_SGE];
	struct uroce_cq *recv_cq;
	bool in_write;
	struct uroce_mr *write_mr;
	uint64_t write_va;
	uint64_t write_remaining;
	uint64_t write_len; /* RETH length of the current write */
	uint32_t write_rkey;
	uint32_t xrc_srqn; /* XRC TGT: SRQ of the open message */
	/* a request came through a same-host ring: the requester is uroce
	 * on this host, whose SENDs and WRITEs may then come in packets of
	 * UROCE_RING_MTU (engine/req.c seg_of), by UDP too if its ring
	 * went (never cleared but by a reset) */
	bool ring_peer;
	struct uroce_resp_res *res; /* max_dest_rd_atomic entries */
	uint32_t nres;
	uint32_t res_next;
};

typedef void (*uroce_wr_flush_fn)(struct ibv_qp_ex *qp, uint32_t rkey,
				  uint64_t remote_addr, size_t len,
				  uint8_t type, uint8_t level);

struct uroce_qp {
	struct ibv_qp_ex ex;	    /* ibv_qp is its head */
	uroce_wr_flush_fn wr_flush; /* ibv_qp_ex.wr_flush in rdma-core 45+ */
	struct uroce_dev *dev;
	struct uroce_pd *pd;
	struct uroce_cq *scq, *rcq;
	struct uroce_srq *srq;	 /* receives come from here if set */
	struct uroce_xrcd *xrcd; /* XRC TGT: its domain */
	uint32_t live_idx;	 /* in dev->obj.live */
	uint32_t timed_idx;	 /* in dev->obj.timed; UINT32_MAX: not */
	enum ibv_qp_type type;
	bool sq_sig_all;
	bool is_ex;		      /* created with send_ops_flags */
	struct uroce_wr_stage *stage; /* is_ex: ibv_wr_* staging */
	bool blocked;		      /* on dev's list, waiting for room */
	bool flow_turn;		      /* started from that list: may take
					 * room while others still wait */
	struct uroce_qp *blocked_next;
	bool comm_est;	       /* COMM_EST raised */
	bool sqd_notify;       /* raise SQ_DRAINED when drained */
	bool block_self_mcast; /* IBV_QP_CREATE_BLOCK_SELF_MCAST_LB */
	uint32_t nmcast;       /* groups attached (verbs/mcast.c) */
	uint64_t send_ops_flags;

	struct ibv_qp_attr attr;      /* current attributes (query_qp) */
	struct sockaddr_storage peer; /* from ah_attr.grh.dgid at RTR */
	struct uroce_ipopt ip;	      /* from ah_attr.grh at RTR: every
					 * packet's TOS and TTL */
	uint32_t mtu;		      /* path MTU, bytes */

	struct uroce_sq sq;
	struct uroce_rq rq;
	struct uroce_req_state req;
	struct uroce_comp_state comp;
	struct uroce_resp_state resp;
	struct uroce_cc_state cc;

	uint64_t cnt_tx_pkts, cnt_rx_pkts, cnt_retrans;
	uint64_t tx_at_rx; /* cnt_tx_pkts when the peer last spoke */

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

/* obj/qp.c: the QP numbered qpn, or NULL; dev->lock held */
struct uroce_qp *uroce_qp_lookup(struct uroce_dev *dev, uint32_t qpn);
/* qpn's place in dev->obj.qp_tbl; UINT32_MAX: none of ours */
uint32_t uroce_qp_index(const struct uroce_dev *dev, uint32_t qpn);
/* obj/qp.c: put qp in the table as qpn (its slot is free) / take it out;
 * dev->lock held */
void uroce_qp_table_add(struct uroce_dev *dev, struct uroce_qp *qp,
			uint32_t qpn);
void uroce_qp_table_del(struct uroce_dev *dev, struct uroce_qp *qp);
/* ... and in dev->obj.timed (no-op if it is already / is not); dev->lock
 * held */
void uroce_qp_timed_add(struct uroce_dev *dev, struct uroce_qp *qp);
void uroce_qp_timed_del(struct uroce_dev *dev, struct uroce_qp *qp);
/* QP1 (the CM's, verbs/private.c) sits in this slot of the table */
#define UROCE_QP_GSI_SLOT 1
/* whether the device has a QP1: no lock needed (net/share.c asks with
 * rx_lock only), so the table's slots are stored atomically */
bool uroce_qp_has_gsi(struct uroce_dev *dev);

/* obj/srq.c */
/* the receive queue a QP takes receives from */
static inline struct uroce_rq *uroce_qp_rq(struct uroce_qp *qp)
{
	return qp->srq ? &qp->srq->rq : &qp->rq;
}
/* a receive WQE was consumed from the SRQ: raise the limit event */
void uroce_srq_consumed(struct uroce_srq *srq);
/* the SRQ numbered srqn, or NULL; dev->lock held */
struct uroce_srq *uroce_srq_lookup(struct uroce_dev *dev, uint32_t srqn);
static inline bool uroce_xrcd_same(const struct uroce_xrcd *a,
				   const struct uroce_xrcd *b)
{
	return a && b && a->dom == b->dom;
}

/* obj/mcast.c: the group of gid, or NULL; dev->lock (or rx_lock) held */
struct uroce_mcast_grp *uroce_mcast_grp_find(struct uroce_dev *dev,
					     const union ibv_gid *gid);

/* ---- dev->obj: the object tables ---- */
#define UROCE_BELLS_DEFERRED 8

struct uroce_objs {
	/* QP table (obj/qp.c, for verbs/qp.c), indexed by uroce_qp_index */
	struct uroce_qp **qp_tbl;
	/*
	 * The QPNs the device hands out, in ranges (docs/scale.md): alone
	 * on an address one, the 24-bit space (mask UROCE_QPN_MASK); on a
	 * shared address one per registry slot the process holds, QPN =
	 * slot << 16 | n (mask 0xffff), the member's own slot first and
	 * more taken as they fill (net/share.c).  Set by net/udp.c.
	 */
	struct uroce_qpn_range {
		uint32_t base; /* slot << 16, or 0 alone */
		uint32_t next; /* the counter n */
		uint32_t n;    /* live QPs in the range */
	} qpn_range[UROCE_QPN_RANGES];
	uint32_t nranges;
	uint32_t qpn_mask;
	uint8_t range_of_slot[256]; /* shared: slot -> range, 0xff none */
	uint32_t nqps;
	/* per qp_tbl slot: the QPN its last QP had, and when that was
	 * destroyed (ms, 0: never) */
	struct uroce_qp_freed {
		uint32_t qpn, ms;
	} * qp_freed;
	/* the same nqps QPs, packed in no order: what walks every QP (the
	 * stats snapshot, the CQ overrun sweep) visits, instead of
	 * UROCE_MAX_QP slots */
	struct uroce_qp **live;
	/* the QPs of live that have a deadline (a requester's retransmit,
	 * RNR, pacing or probe timer; engine/progress.c uroce_timers_run):
	 * what the timer walks.  A QP joins when one of its deadlines is
	 * set (uroce_qp_timed_add) and leaves when a walk finds none */
	struct uroce_qp **timed;
	uint32_t ntimed;

	/* MR table (filled by verbs/mr.c, mw.c), indexed by key % UROCE_MAX_MR */
	struct uroce_mr **mr_tbl;
	uint32_t *mr_last_key; /* per slot: the key it last had */
	uint32_t next_mr_index;
	uint32_t nmrs;

	/* verbs/mcast.c: the multicast groups QPs are attached to (a
	 * list); changed with rx_lock and lock held, so either suffices
	 * to read it */
	struct uroce_mcast_grp *mcast;
	uint32_t nmcast;
	/* SRQ table (filled by verbs/srq.c), indexed by srqn % UROCE_MAX_SRQ; made
	 * at the first SRQ, so that XRC requests can name one */
	struct uroce_srq **srq_tbl;
	uint32_t next_srqn;

	_Atomic unsigned int npds; /* verbs/pd.c, against UROCE_MAX_PD */
	_Atomic unsigned int ncqs; /* verbs/cq.c, against UROCE_MAX_CQ */

	/* verbs/cq.c, dev->lock: inside a receive burst a completion
	 * channel's doorbell waits for the burst's end (the CQs whose event
	 * made it owed are listed), so that the woken thread does not find
	 * the CQ and channel locks held by the receiver */
	bool bell_defer;
	uint32_t nbell_cq;
	struct uroce_cq *bell_cq[UROCE_BELLS_DEFERRED];
};

#endif /* UROCE_OBJ_QP_H */
