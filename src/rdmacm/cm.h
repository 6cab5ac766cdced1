/* SPDX-License-Identifier: MIT */
/*
 * Our librdmacm: the rdma_cm API over an IB CM that runs inside the
 * process, speaking CM MADs on the device's QP1 (docs/rdmacm.md).
 *
 * Locking: one mutex (cm.lock) protects every id, channel queue, the GSI
 * resources and the counters.  The CM thread (gsi.c) takes it per batch
 * of completions or timeouts; API calls take it for their bookkeeping and
 * never hold it while they block for an event.  Order: cm.lock, then
 * whatever libibverbs takes inside (it never calls back into us); the
 * whole table is core/lock.h.
 */
#ifndef UROCE_RDMACM_CM_H
#define UROCE_RDMACM_CM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "core/config.h"
#include "core/core.h"

#define CM_EXPORT __attribute__((visibility("default")))

/* ---- mad.c: CM MAD wire format (IBA vol 1 ch. 12, tables 106-120) ---- */

#define CM_MAD_SIZE	 256
#define CM_GRH_SIZE	 40
#define CM_MGMT_CLASS	 0x07
#define CM_CLASS_VERSION 2
#define CM_METHOD_SEND	 0x03

enum cm_attr {
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
	CM_ATTR_SIDR_REQ = 0x0017,
	CM_ATTR_SIDR_REP = 0x0018,
};

/* private data sizes of each message (IBA table 105) */
#define CM_REQ_PDATA	  92
#define CM_MRA_PDATA	  222
#define CM_REJ_PDATA	  148
#define CM_REP_PDATA	  196
#define CM_RTU_PDATA	  224
#define CM_DREQ_PDATA	  220
#define CM_DREP_PDATA	  224
#define CM_SIDR_REQ_PDATA 216
#define CM_SIDR_REP_PDATA 136

/* REJ reasons (IBA table 109) and SIDR_REP status (table 121) */
enum {
	CM_REJ_TIMEOUT = 4,
	CM_REJ_INVALID_COMM_ID = 6,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_INVALID_TRANSPORT = 9,
	CM_REJ_STALE_CONN = 10,
	CM_REJ_CONSUMER_DEFINED = 28,
	CM_SIDR_SUCCESS = 0,
	CM_SIDR_UNSUPPORTED = 1,
	CM_SIDR_REJECT = 2,
};
enum {
	CM_REJ_MSG_REQ = 0,
	CM_REJ_MSG_REP = 1,
	CM_REJ_MSG_OTHER = 2
};

/* The rdma_cm private-data header in REQ and SIDR_REQ (kernel cma.c). */
#define CMA_HDR_SIZE  36
#define CM_SID_PREFIX 0x0000000001000000ULL

/* Every CM message, parsed to host order; which fields mean anything
 * depends on attr. */
struct cm_msg {
	uint16_t attr;
	uint64_t tid;
	uint32_t local_id, remote_id; /* comm IDs; SIDR: request ID */
	uint64_t sid;
	uint64_t ca_guid;
	uint32_t qkey, qpn, psn;
	uint8_t resp_res, init_depth;
	uint8_t remote_resp_to, local_resp_to; /* CM response timeouts */
	uint8_t qp_type;       /* REQ transport: 0 RC, 1 UC, 3 XRC */
	uint8_t ext_transport; /* REQ, with qp_type 3: 1 = XRC */
	uint32_t eecn;	       /* REP local EECN: XRC TGT QPN */
	uint8_t flow_ctrl, retry_cnt, rnr_retry, max_cm_retries, srq;
	uint8_t mtu;
	uint8_t ack_timeout; /* REQ primary local ACK timeout */
	uint8_t tclass, hop_limit;
	union ibv_gid sgid, dgid; /* REQ primary local / remote GID */
	uint8_t target_ack_delay;
	uint8_t msg_mraed, service_to; /* MRA */
	uint8_t msg_rejected;	       /* REJ */
	uint16_t reason;	       /* REJ reason, SIDR_REP status */
	const uint8_t *pdata;
	uint8_t pdata_len;
};

int cm_mad_parse(const uint8_t *mad, size_t len, struct cm_msg *m);
void cm_mad_build(uint8_t *mad, const struct cm_msg *m);

/*
 * The layout of each CM message, one table for parse and build: a field
 * is bits [bit, bit + width) counted from the most significant bit of
 * byte off of the CM data (which follows the 24-byte MAD header),
 * big-endian; width 128 is a GID, copied as bytes.  size is that of the
 * struct cm_msg member at offset member that carries it; 0 marks a
 * constant we send as value and ignore when received.
 */
struct cm_field {
	const char *name;
	uint8_t off, bit, width;
	uint8_t size;
	uint16_t member;
	uint64_t value;
};

struct cm_mad_desc {
	uint16_t attr;
	const char *name;
	const struct cm_field *fields;
	size_t nfields;
	uint8_t pdata_off, pdata_len; /* private data, in the CM data */
};

/* NULL: not a message we know */
const struct cm_mad_desc *cm_mad_desc(uint16_t attr);
/* all of them (the unit test walks them) */
const struct cm_mad_desc *cm_mad_descs(size_t *n);

/* ---- table.c: lookups whose cost does not grow with the ids ---- */

/* A circular doubly linked list: O(1) insertion and removal anywhere. */
struct cm_link {
	struct cm_link *prev, *next;
};

static inline void cm_link_init(struct cm_link *h)
{
	h->prev = h;
	h->next = h;
}

static inline bool cm_link_empty(const struct cm_link *h)
{
	return h->next == h;
}

static inline void cm_link_add_tail(struct cm_link *h, struct cm_link *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

/* safe on a node that is in no list (initialised or zeroed) */
static inline void cm_link_del(struct cm_link *n)
{
	if (!n->next)
		return;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	cm_link_init(n);
}

#define cm_link_entry(p, type, member) container_of(p, type, member)

/* A chained hash table; nodes unlink in O(1) (pprev), the table doubles
 * as it fills (at most one node per bucket on average), several nodes
 * may share a key. */
struct cm_hnode {
	struct cm_hnode *next, **pprev;
	uint64_t key;
};

struct cm_hash {
	struct cm_hnode **b;
	size_t mask, n;	   /* buckets - 1, nodes */
	unsigned int bits; /* log2(buckets) */
};

int cm_hash_add(struct cm_hash *h, struct cm_hnode *n, uint64_t key);
void cm_hash_del(struct cm_hash *h, struct cm_hnode *n);
struct cm_hnode *cm_hash_first(const struct cm_hash *h, uint64_t key);
struct cm_hnode *cm_hash_next(const struct cm_hnode *n);

/*
 * Timers.  Every CM deadline is now + one of a few durations: the
 * response timeouts 4.096 us x 2^e that we and our peers ask for (an MRA
 * adds its service timeout), and the time wait.  So a FIFO per duration
 * is in deadline order: arming appends, an answer unlinks (the id's own
 * node: no search, no stale entry left behind), and the earliest
 * deadline is the earliest of the queues' heads.  A duration that finds
 * no queue free (more than CM_TIMER_QUEUES at once) goes into one more
 * queue kept sorted, walked from its tail.  All O(1) per timer but that
 * last case.
 */
#define CM_TIMER_QUEUES 8

enum cm_timer_kind {
	CM_TIMER_MAD,	   /* retransmit id->mad (cm_id.mad_timer) */
	CM_TIMER_TIMEWAIT, /* TIMEWAIT_EXIT due (cm_id.tw_timer) */
	CM_TIMER_DISC,	   /* a held DISCONNECTED's look (cm_id.disc_timer) */
};

struct cm_timer {
	struct cm_link link;  /* in its queue; unlinked: not armed */
	uint64_t deadline_ns; /* 0: not armed */
	uint8_t kind;	      /* enum cm_timer_kind */
};

struct cm_timer_queue {
	uint64_t dur_ns; /* 0: free */
	struct cm_link q;
};

struct cm_timers {
	struct cm_timer_queue q[CM_TIMER_QUEUES];
	struct cm_link odd; /* any other duration, sorted */
};

/* (Re)arms t for now + dur_ns */
void cm_timer_set(struct cm_timers *ts, struct cm_timer *t, uint64_t now,
		  uint64_t dur_ns);
void cm_timer_cancel(struct cm_timer *t);
/* The armed timer with the earliest deadline, or NULL */
struct cm_timer *cm_timer_first(const struct cm_timers *ts);

/* ---- cma.c, addr.c: ids, channels, events, addresses ---- */

enum cm_state {
	CM_IDLE,
	CM_BOUND, /* rdma_bind_addr */
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_SENT, /* active: waiting for REP/REJ/MRA */
	CM_REP_RCVD, /* active: CONNECT_RESPONSE, no QP */
	CM_REQ_RCVD, /* passive: CONNECT_REQUEST being decided */
	CM_REP_SENT, /* passive: waiting for RTU */
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_DISCONNECTED, /* DISCONNECTED reported, or rejected */
	CM_SIDR_REQ_SENT,
	CM_SIDR_REQ_RCVD,
	CM_SIDR_DONE,
	CM_NSTATES
};

struct cm_event {
	struct rdma_cm_event ev; /* first: what the user holds */
	struct cm_id *owner;	 /* counted against this id */
	struct cm_chan *chan;	 /* queued here if not owner's */
	struct cm_event *next;
	bool delivered;
	struct cm_link taken_node; /* in owner->taken, once delivered */
	pid_t taker;		   /* the thread it was delivered to */
	uint8_t pdata[256];
};

struct cm_chan {
	struct rdma_event_channel ch; /* first: fd, an eventfd readable
					 * while the queue is not empty */
	struct cm_event *head, *tail;
	unsigned int nids;
	unsigned int waiters; /* threads in rdma_get_cm_event */
	bool readable;	      /* the eventfd is (head != NULL, chan_ready) */
	bool sync;	      /* private to one synchronous id */
	bool dead;	      /* destroyed while waited on */
};

struct cm_id {
	struct rdma_cm_id id;	      /* first: what the user holds */
	struct cm_link node;	      /* cm.ids */
	struct cm_hnode local_node;   /* cm.by_local, by local_id */
	struct cm_hnode remote_node;  /* cm.by_remote: passive ids */
	struct cm_hnode port_node;    /* in *port_table, by (ps, port) */
	struct cm_hash *port_table;   /* cm.ports, cm.child_ports or NULL */
	struct cm_link listen_node;   /* cm.listeners, while CM_LISTEN */
	struct cm_link children;      /* listener: ids whose request is
					 * not yet read (->listener) */
	struct cm_link child_node;    /* in the listener's children */
	struct cm_link deferred_q;    /* listener: ->deferred ids, FIFO */
	struct cm_link deferred_node; /* in the listener's deferred_q */
	enum cm_state state;
	unsigned int nevents; /* queued or delivered, not acked */
	unsigned int nqueued; /* of those, still on a channel */
	struct cm_link taken; /* delivered, not acked (taken_node) */
	bool sync;

	uint16_t port; /* bound port (host order), 0 = none */
	bool bound;
	bool pinned; /* its bind moved the device */
	bool reuseaddr;
	bool afonly;		      /* RDMA_OPTION_ID_AFONLY, or the
					 * family's default at bind */
	bool afonly_set;	      /* ... set by the application */
	int backlog;		      /* listener */
	unsigned int queued_reqs;     /* listener: CONNECT_REQUESTs not
					 * yet retrieved */
	struct cm_id *listener;	      /* child: until its request is read */
	bool deferred;		      /* child: held back by the backlog */
	struct cm_event *deferred_ev; /* its CONNECT_REQUEST meanwhile */
	/* destroyed while its DREQ waits for the DREP: kept, with no
	 * channel, for the DREQ's retries (cma.c, orphan()) */
	bool orphan;

	uint32_t local_id, remote_id; /* CM comm IDs */
	uint64_t tid;		      /* of the REQ / DREQ we answer */
	uint64_t sid;
	union ibv_gid peer_gid; /* where MADs go */
	uint32_t remote_qpn, remote_psn, local_psn, remote_qkey;
	uint32_t param_qpn; /* conn_param->qp_num, without id->qp */
	uint8_t resp_res, init_depth;
	uint8_t retry_cnt, rnr_retry, peer_rnr_retry, srq;
	uint8_t mtu; /* enum ibv_mtu agreed */
	uint8_t tos;
	uint8_t ack_timeout;
	uint8_t peer_resp_to; /* exponent for our retransmissions */
	uint8_t peer_max_retries;
	bool connect_error;

	struct cm_timer tw_timer; /* TIMEWAIT_EXIT due */
	/* a peer's DREQ came while a completion of our QP waited for the
	 * application's poll: DISCONNECTED waits (proto.c, disc_look) */
	struct cm_timer disc_timer; /* next look */
	uint64_t disc_due_ns;	    /* it goes by then all the same */
	uint32_t disc_qpn;
	struct cm_link disc_node; /* cm.disc_held, while it waits */

	/* the MAD we retransmit until its answer comes: mad[] below */
	bool mad_pending;	  /* cleared by cm_mad_done */
	struct cm_peer *win_peer; /* window.c: counted or waiting */
	bool win_waiting;	  /* ... waiting, in win_node */
	struct cm_link win_node;
	int retries_left;
	uint64_t timeout_ns;
	struct cm_timer mad_timer; /* its retransmission */

	struct ibv_sa_path_rec path;
	struct ibv_qp_init_attr *ep_qp_attr; /* rdma_create_ep passive */
	uint8_t ep_pdata[CM_REQ_PDATA];	     /* rai->ai_connect */
	uint8_t ep_pdata_len;
	bool own_cqs;
	struct cm_mc *mcs; /* mcast.c: groups joined */
	/* last: the fields a MAD or an event touches (above) then share
	 * fewer cache lines, which matters with 100 000 ids out of cache */
	uint8_t mad[CM_MAD_SIZE];
};

struct cm_counters {
	uint64_t rx, tx, drop_malformed, drop_state, drop_nolistener, retrans,
		timeouts, tx_fail;
	uint64_t held;		/* REQs held for a listen to come */
	uint64_t held_rejected; /* ... and rejected: none came */
	uint64_t disc_held;	/* DISCONNECTEDs held for a poll (proto.c) */
	uint64_t direct; /* QP1 events taken by the receiving thread (gsi.c) */
};

/*
 * A REQ (or SIDR_REQ) for a port that an id of this process uses but
 * nobody listens on yet, kept for a while in case rdma_listen follows
 * (proto.c, docs/rdmacm.md "Early requests").
 */
#define CM_HOLD_MAX		16
#define CM_HOLD_MS_DEFAULT	1000
#define CM_HOLD_MS_MAX		60000
#define CM_DISC_HOLD_MS_DEFAULT 50

struct cm_held {
	bool used;
	struct cm_msg m; /* m.pdata points at pdata below */
	uint8_t pdata[CM_SIDR_REQ_PDATA];
	union ibv_gid peer;
	struct sockaddr_storage dst; /* from the cma_hdr */
	uint64_t deadline_ns;
};

struct cm_global {
	pthread_mutex_t lock;
	bool dev_up, gsi_up, thread_up;
	struct ibv_context *ctx;     /* the CM's own: PD, CQ, QP1 */
	struct ibv_context *app_ctx; /* handed out as id->verbs */
	struct ibv_pd *pd, *app_pd;
	struct ibv_xrcd *xrcd; /* XRC ids' domain (ep.c) */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *gsi;
	struct ibv_mr *mr;
	uint8_t *buf; /* recv slots, then send slots */
	struct ibv_ah *send_ah[256];
	bool send_busy[256];
	int timerfd;
	pthread_t thread;
	struct cm_link ids;	    /* every id (table.c) */
	struct cm_link listeners;   /* ids in CM_LISTEN */
	struct cm_hash by_local;    /* ids by local comm ID */
	struct cm_hash by_remote;   /* passive ids by peer's comm ID */
	struct cm_hash tombs;	    /* passive connections gone (table.c) */
	struct cm_link tomb_fifo;   /* ... oldest first */
	struct cm_hash ports;	    /* bound ids by (ps, port) */
	struct cm_hash child_ports; /* passive ids by (ps, port) */
	struct cm_timers timers;    /* retransmissions, time waits */
	struct cm_link disc_held;   /* ids whose DISCONNECTED waits */
	struct cm_hash peers;	    /* window.c, by peer GID */
	uint64_t armed_ns;	    /* what the timerfd is set to */
	uint16_t next_port;	    /* ephemeral port cursor */
	bool ports_full;	    /* the last search found none free */
	struct ibv_device_attr attr;
	enum ibv_mtu mtu;
	uint64_t guid;
	struct sockaddr_storage addr; /* the device's (port 0) */
	union ibv_gid gid;
	unsigned int npins;	      /* ids whose bind moved the device:
					 * while > 0 the address is chosen */
	struct sockaddr_storage home; /* the device's address before */
	uint64_t tid_hi;
	struct cm_counters cnt;
	struct cm_held held[CM_HOLD_MAX];
	uint64_t hold_ns;      /* UROCE_CM_HOLD_MS; 0: no holding */
	uint64_t disc_hold_ns; /* UROCE_CM_DISC_HOLD_MS (proto.c) */
	pid_t pid;	       /* the process that opened it (a
					 * forked child's exit ends nothing) */
	pid_t exit_tid;	       /* the thread running the exit's end of the
			   * connections (end_connections_at_exit), or 0 */
	pthread_cond_t acked;  /* an event was acknowledged */
};

extern struct cm_global cm;

struct cm_id *cm_id_alloc(struct cm_chan *ch, void *context,
			  enum rdma_port_space ps, enum ibv_qp_type qpt);
void cm_id_free(struct cm_id *id);
/* Frees id if it is an orphan (its DREQ answered or given up): true. */
bool cm_orphan_done(struct cm_id *id);
struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type type,
			      int status);
void cm_event_queue(struct cm_event *e);
void cm_wait_init(void);
int cm_set_errno(int err);
int cm_dev_up(void);
int cm_ensure_gsi(void);
struct cm_chan *cm_chan_new(bool sync);
int cm_qp_to_rtr_rts(struct cm_id *id);
void cm_qp_to_err(struct cm_id *id);
const char *cm_state_name(enum cm_state s);
/* addr.c */
uint16_t cm_alloc_port(enum rdma_port_space ps, bool shared);
void cm_fill_path(struct cm_id *id);
void cm_notify(const char *what, uint16_t port);
uint16_t cm_get_port(const struct sockaddr *sa); /* host order */
void cm_unpin(struct cm_id *ci); /* the id goes: its address with it */

static inline struct cm_id *to_cid(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

static inline struct cm_chan *to_chan(struct rdma_event_channel *ch)
{
	return (struct cm_chan *)ch;
}

/* rdma_get_cm_event for a channel known to be nonblocking (an rsocket's),
 * without asking the fd for its flags */
int cm_try_event(struct rdma_event_channel *channel,
		 struct rdma_cm_event **event);

/* rdma-core's ucma_complete: a synchronous id waits for its event */
int cm_sync_wait(struct cm_id *id, bool is_sync);

/* table.c: the ids' indexes; cm.lock held */
void cm_id_link(struct cm_id *id);   /* cm_id_alloc */
void cm_id_unlink(struct cm_id *id); /* cm_id_free: out of every index */
struct cm_id *cm_find_local(uint32_t local_id);
void cm_set_local_id(struct cm_id *id, uint32_t local_id);
void cm_index_passive(struct cm_id *id); /* remote_id, peer_gid set */
/* A freed passive id's peer comm ID stays known for a while (its
 * tombstone): true when a REQ with it is a late copy of a request whose
 * connection is gone. */
bool cm_tomb_find(uint32_t remote_id, const union ibv_gid *peer);
struct cm_id *cm_find_passive(uint32_t remote_id, const union ibv_gid *peer,
			      uint64_t tid);
void cm_index_port(struct cm_id *id, bool passive); /* port set */
struct cm_id *cm_port_first(bool passive, uint16_t ps, uint16_t port);
struct cm_id *cm_port_next(struct cm_id *id);

#define cm_for_each_id(pos) \
	for (struct cm_link *l_ = cm.ids.next; \
	     l_ != &cm.ids && ((pos) = cm_link_entry(l_, struct cm_id, node)); \
	     l_ = l_->next)

/* ---- window.c: requests outstanding per peer; cm.lock held ---- */

#define CM_WINDOW 512 /* a quarter of the peer's NRECV */

struct cm_peer;
/* true: id's request must wait (sent later by cm_mad_start) */
bool cm_window_wait(struct cm_id *id);
/* id's request is answered, given up or its id gone: the next goes */
void cm_window_leave(struct cm_id *id);
/* the answer came: mad_pending off, the window moves */
void cm_mad_done(struct cm_id *id);

/* ---- mcast.c: multicast joins; cm.lock held ---- */

struct cm_mc;
void cm_mc_leave_all(struct cm_id *id); /* rdma_destroy_id */
void cm_mc_detach_qp(struct cm_id *id); /* before its QP goes */

/* ---- gsi.c: QP1, MAD send and receive, the CM thread, timers ---- */

int cm_gsi_start(void);
void cm_gsi_stop(void);
int cm_send_mad(const union ibv_gid *dgid, const uint8_t *mad);
void cm_flush_sends(uint64_t timeout_ns);
void cm_timer_arm(void);
uint64_t cm_now_ns(void);
void cm_gid_from_sa(const struct sockaddr *sa, union ibv_gid *gid);
void cm_sa_from_gid(const union ibv_gid *gid, uint16_t port,
		    struct sockaddr_storage *ss);
/* a connection request to gid got no answer: say so if nothing there
 * takes RoCE at all (UDP 4791 refused) */
void cm_say_no_device(const union ibv_gid *gid);

/* ---- proto.c: the CM state machine ---- */

void cm_handle_mad(const uint8_t *grh, const uint8_t *mad, size_t len);
void cm_handle_timeouts(uint64_t now);
int cm_send_req(struct cm_id *id, const void *pdata, uint8_t len);
int cm_send_rep(struct cm_id *id, const void *pdata, uint8_t len);
int cm_send_rtu(struct cm_id *id);
int cm_send_rej(struct cm_id *id, uint16_t reason, const void *pdata,
		uint8_t len);
int cm_send_dreq(struct cm_id *id);
void cm_disc_release(struct cm_id *id);
void cm_disc_before(struct cm_chan *ch);
int cm_send_sidr_req(struct cm_id *id, const void *pdata, uint8_t len);
int cm_send_sidr_rep(struct cm_id *id, uint16_t status, uint32_t qpn,
		     const void *pdata, uint8_t len);
void cm_release_deferred(struct cm_id *listener);
void cm_hold_update(void);
void cm_id_drop_mad(struct cm_id *id);
void cm_mad_start(struct cm_id *id);

#endif /* UROCE_RDMACM_CM_H */
