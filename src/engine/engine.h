/* SPDX-License-Identifier: MIT */
/*
 * engine: the transport's rules (IBA chapter 9 over RoCE v2).
 *
 * Owns: the requester (engine/req.c), responder (resp.c), completer
 * (comp.c), receive demux (recv.c, mcast.c), transmit batching (xmit.c),
 * the progress thread and timers (progress.c), QP state changes and
 * flushing (qp_state.c), SGE walking (sge.c), XRC (xrc.c), port LIDs
 * (lid.c), the stats segment (shm.c) and ECN congestion control (cc.c);
 * their device state is dev->tx, dev->ack, dev->prog, dev->flow,
 * dev->port and dev->cc (src/dev.h).
 *
 * Uses: core, wire, net (to send: dev->net.io) and the object tables
 * (obj/).  Reports upward only through uroce_cq_push and
 * uroce_async_event (obj/cq.h).  Includes no verbs/ or rdmacm/ header.
 *
 * Locking: every QP's transport state and the tables are under dev->lock
 * (the engine lock).  Packets are gathered under it and sent after it is
 * released (uroce_dev_unlock); dev->tx.tx_lock is held while sending,
 * dev->tx.txq_lock guards the send queue.  dev->prog.rx_lock: one receiver
 * at a time.  The order they nest in: core/lock.h.
 */
#ifndef UROCE_ENGINE_H
#define UROCE_ENGINE_H

#include <poll.h>

#include "net/net.h"
#include "obj/qp.h"

/* engine/xmit.c: packets held for one sendmmsg */
#define UROCE_ACK_PENDING_MAX 64
#define UROCE_TXB_MAX_PKTS    256
#define UROCE_TXB_MAX_RUNS    64
#define UROCE_TXB_MAX_IOV     1024
#define UROCE_TXFAIL_MAX      64

/* Whose UC/UD packet k of a batch is, so that a send that fails for
 * good is reported on its WQE (engine/comp.c uroce_comp_settle) */
#define UROCE_TXTAG_REQ 0x80000000u /* in qpn: a UC/UD packet */
struct uroce_txtag {
	uint32_t qpn; /* | UROCE_TXTAG_REQ, or 0 (RC) */
	uint32_t wqe; /* its SQ index */
};

struct uroce_txbatch {
	struct uroce_txbatch *next; /* in the send queue or free list */
	uint64_t seq;		    /* in the order opened (= sealed) */
	int npkts, nruns, niov;
	int sent; /* runs gone; a full send buffer holds the rest */
	struct uroce_txrun run[UROCE_TXB_MAX_RUNS];
	uint16_t pkt_iov[UROCE_TXB_MAX_PKTS + 1]; /* packet k's first iov */
	struct iovec iov[UROCE_TXB_MAX_IOV];
	uint8_t hdr[UROCE_TXB_MAX_PKTS][UROCE_MAX_HDR_LEN];
	uint8_t tail[UROCE_TXB_MAX_PKTS][UROCE_ICRC_LEN];
	struct uroce_txtag tag[UROCE_TXB_MAX_PKTS];
};

/* A received packet after parsing (engine/recv.c). */
struct uroce_pkt {
	uint8_t *bth; /* BTH; headers follow */
	uint32_t len; /* BTH .. end of payload+pad, no ICRC */
	const struct uroce_opcode_info *info;
	uint32_t mask; /* info->mask */
	uint8_t opcode;
	uint32_t psn;
	uint32_t qpn; /* destination QPN */
	uint8_t *payload;
	uint32_t paylen;		    /* payload bytes, without pad */
	struct sockaddr_storage src;	    /* who sent it */
	const struct sockaddr_storage *dst; /* to which of our addresses */
	struct uroce_ipopt ip; /* its IP header's TOS (dev->net.rx_ip) */
	uint64_t rx_ns; /* when the kernel received it (dev->net.rx_ns) */
	bool ring;	/* it came through a same-host ring */
};

/* ---- device state owned by the engine (members of struct uroce_dev) ---- */

/* dev->port, engine/lid.c: set when the device comes up or moves */
struct uroce_port {
	uint16_t lid; /* port LID, unique on this host */
	int lid_fd;   /* the socket whose name claims it */
};

/* dev->tx, engine/xmit.c: packets are gathered in a batch under dev->lock,
 * and sent after it is released, in the order batches were sealed */
struct uroce_tx {
	struct uroce_txbatch *txb; /* the open batch (dev->lock) */
	int tx_depth;		   /* uroce_xmit_begin nesting (dev->lock) */
	pthread_mutex_t tx_lock;   /* held while sending */
	pthread_mutex_t txq_lock;  /* the lists below */
	struct uroce_txbatch *txq_head, *txq_tail; /* sealed, oldest first */
	struct uroce_txbatch *txb_free;
	int txb_count; /* batches allocated */
	_Atomic int txq_len;
	/* a receiving thread in send_queued holds tx_lock and looks at
	 * the queue again after it lets go: another that may defer leaves
	 * its batches to it (engine/xmit.c) */
	_Atomic bool draining;
	/* the socket's full send buffer holds txq_head back (engine/xmit.c;
	 * docs/transport.md, "A full send buffer") */
	_Atomic bool full;
	uint64_t full_wait_ns;	   /* a requester's wait for it (dev->lock) */
	uint64_t retry_at_ns;	   /* the timer's next try of it (dev->lock) */
	_Atomic bool room_watched; /* the progress thread wakes on room */
	/* completions that wait for their packets (engine/comp.c) */
	uint64_t open_seq;	      /* the last opened batch's (dev->lock) */
	_Atomic uint64_t sent_seq;    /* batches up to it have gone */
	_Atomic bool settle;	      /* WQEs QUEUED, or a send failed */
	struct uroce_qp *queued_head; /* QPs with QUEUED WQEs (lock) */
	int nfail;		      /* txq_lock: UC/UD packets failed */
	struct uroce_txtag fail[UROCE_TXFAIL_MAX];
};

/*
 * The longest an ACK is held for the application's next call after the
 * burst that brought its request (engine/resp.c): the timer pass sends
 * it then.  The bound an ACK keeps is docs/datapath.md's, "ACKs".
 */
#define UROCE_ACK_HOLD_NS 200000

/*
 * A hold at now needs no timer of its own when the progress thread,
 * asleep, wakes by by at the latest (its next look; 0: it sleeps until
 * woken, or runs) and that is within the hold's bound: each wake-up of
 * the thread sends what is held (docs/events.md, "ACKs held by a
 * waiter").  A look already due (by before now) counts too: the thread
 * has not yet woken from it (waking clears by), and when it does it
 * sends the hold (the hold marks, then reads by; the thread clears by,
 * then reads the mark: one of the two sees the other).  In an
 * event-driven exchange the thread looks every WAITER_NS anyway; a
 * timer armed for each hold fired in between, for nothing, as the reply
 * had taken the ACK, and one armed at a look just due cost 0.6 more
 * context switches a round trip (qperf rc_lat between namespaces).
 */
static inline bool uroce_ack_hold_covered(uint64_t by, uint64_t now)
{
	return by && (by <= now || by - now <= UROCE_ACK_HOLD_NS);
}

/* dev->ack, engine/resp.c: while a receive burst is handled, plain ACKs
 * wait here (QP numbers) and leave once at its end (dev->lock) */
struct uroce_ack_hold {
	bool ack_defer;
	_Atomic bool held; /* some wait for the next post (a hint:
				 * read without the lock) */
	/* this burst brought more of a QP after a whole message of it: a
	 * stream's, nothing is held (engine/resp.c) */
	bool stream;
	uint32_t nack_pending;
	uint32_t ack_pending[UROCE_ACK_PENDING_MAX];
	/* when a timer pass must send the held ACKs by (0: nothing held,
	 * or the progress thread's planned wake sends them): the timer is
	 * armed for it or earlier and keeps it when set afresh; a reply that
	 * takes the ACKs withdraws it if it is the one armed (engine/resp.c) */
	uint64_t by_ns;
};

/* who watches the socket (engine/progress.c): the progress thread's
 * state, changed only through its table (uroce_progress_watch_may) */
enum uroce_watch {
	UROCE_WATCH_SOCK,   /* the progress thread, woken by every packet */
	UROCE_WATCH_APP,    /* an application thread polling its CQ */
	UROCE_WATCH_WAITER, /* one sleeping in uroce_progress_wait; the
				 * thread looks again within WAITER_NS */
	UROCE_WATCH_IDLE,   /* the same, the thread asleep until woken */
	UROCE_WATCH_NSTATES
};

/*
 * The thread's wait, decided by a pure function of its own state (what
 * it saw of the waiters at its last look), the clock and the marks the
 * other threads leave (engine/progress.c, docs/progress.md "The
 * watch"): which watch to take and how long to sleep on its epoll set
 * (UROCE_WAIT_FOREVER: until woken; 0: only look).
 */
struct uroce_wait_look {
	uint32_t gen;	  /* wait_gen at the last look */
	uint64_t seen_ns; /* when a waiter was last seen */
	bool idle;	  /* a waiter slept through the last wait */
};

struct uroce_wait_marks {
	uint64_t now;
	bool sleep;	      /* no ring has packets: the thread may sleep */
	bool take_back;	      /* the last waiter gave the packets back */
	int waiters;	      /* dev->prog's */
	uint32_t wait_gen;    /* ... */
	uint64_t app_rx_ns;   /* ... */
	uint64_t handback_ns; /* ... */
	bool looker;	      /* the looker looks while the application
			       * receives (dev->prog.looking) */
};

#define UROCE_WAIT_FOREVER UINT64_MAX

struct uroce_wait_plan {
	enum uroce_watch watch;
	uint64_t timeout_ns;
};

/* the wait to make now (updates look) */
struct uroce_wait_plan uroce_progress_plan(struct uroce_wait_look *look,
					   const struct uroce_wait_marks *m);
/* after a wait for a waiter (WAITER) that brought n events: whether
 * the next may sleep until woken (look->idle) */
void uroce_progress_waited(struct uroce_wait_look *look, int n,
			   const struct uroce_wait_marks *m);

/* dev->prog, engine/progress.c */
struct uroce_progress {
	pthread_mutex_t rx_lock;      /* one receiver at a time keeps order */
	_Atomic uint64_t app_poll_ns; /* when an application thread last
					 * received for itself */
	_Atomic uint64_t app_done_ns; /* ... last found a completion */
	_Atomic uint64_t app_rx_ns;   /* ... polled an empty CQ, and has
					 * not handed the socket back since */
	_Atomic uint64_t handback_ns; /* ... last handed the socket back */
	_Atomic uint64_t arm_ns;      /* ... last armed a CQ to sleep */
	_Atomic int watch;	      /* enum uroce_watch: the thread's */
	_Atomic int waiters;	      /* threads asleep on the socket and
					 * the bell in uroce_progress_wait */
	_Atomic uint32_t wait_gen;    /* ... how many times one went */
	_Atomic bool take_back;	      /* the last waiter gave up: the
					 * thread watches the packets now */
	_Atomic uint64_t wake_by_ns;  /* the thread sleeps and wakes by
					 * then; 0: until woken, or it runs
					 * (uroce_progress_sleep_by) */
	pthread_t thread;
	int epfd;      /* what the thread waits on but the
					 * packets: timers, wake-ups, ring
					 * connections, shared address */
	int app_epfd;  /* the rings' bell and epfd */
	int sock_epfd; /* the socket, the bell and epfd */
	int timerfd;
	int wakefd; /* eventfd: wake the progress thread */
	/* the looker: a thread at SCHED_IDLE that looks every APP_WAIT_NS
	 * while the watch is APP (docs/progress.md, "The looker") */
	pthread_t looker;
	bool looking;		    /* started, not yet joined */
	int lookfd;		    /* eventfd: wake the looker */
	_Atomic bool looker_asleep; /* ... which sleeps on it */
	/* (core/watch.h; epfd's, in sock_epfd and app_epfd, is expanded) */
	struct uroce_watcher timer_w, wake_w, epfd_w;
	bool running;		    /* thread started, not yet joined */
	_Atomic bool stopping;	    /* uroce_progress_stop asked */
	uint64_t armed_deadline_ns; /* what timerfd is set to, 0 = none */
	uint64_t early_ns;	    /* the armed deadline last set afresh early
			    * (uroce_timer_arm: once each) */
	/* the same, for a thread that reads it without dev->lock: an
	 * application's poll runs what came due (uroce_progress_poll); 0
	 * while a pass runs */
	_Atomic uint64_t due_ns;
	/* verbs/cq.c sets it when a completion found its CQ overrun;
	 * engine/cq_err.c acts on it from the timer pass */
	bool cq_overrun_pending;
};

/* dev->flow, engine/req.c: packets all RC QPs have in flight, against one
 * socket buffer, and the QPs waiting for room (a list); pacing of
 * unacknowledged (UC, UD) traffic, which has no other defence against
 * overrunning the peer's socket */
struct uroce_flow {
	uint32_t inflight;
	struct uroce_qp *blocked_head, *blocked_tail;
	uint64_t pace_rate;  /* bytes per second, 0 = off */
	int64_t pace_tokens; /* bytes */
	uint64_t pace_last_ns;
};

/* engine/req.c: the pacing rate from the configuration (a device with a
 * socket, when it comes up) */
void uroce_pace_init(struct uroce_dev *dev);

/* dev->cc, engine/cc.c: ECN and DCQCN, set when the device comes up */
struct uroce_cc_dev {
	bool on;	     /* UROCE_CC=dcqcn */
	uint64_t cnp_gap_ns; /* at most one CNP per QP per this */
	bool delay;	     /* UROCE_CC=delay */
	uint64_t target_ns;  /* its queueing delay target */
};

/* engine/cc.c (docs/congestion.md, "ECN and CNPs"): from the
 * configuration, when the device comes up (nothing else runs yet) */
void uroce_cc_init(struct uroce_dev *dev);
/* dev->lock held: */
/* a packet for qp arrived marked CE: a CNP to its sender, unless one
 * went less than cnp_gap_ns ago */
void uroce_cc_ce(struct uroce_qp *qp, const struct uroce_pkt *pkt);
/* a CNP for qp arrived: cut its rate (DCQCN) */
void uroce_cc_cnp(struct uroce_qp *qp);
/* an RTT sample r of qp's data (send to ACK of a packet that asked for
 * one): the delay-based control's input (dev->cc.delay) */
void uroce_cc_delay(struct uroce_qp *qp, uint64_t r);
/* may qp send a packet of bytes now?  false: qp->req.pace_deadline_ns
 * is armed for when it may (only called with dev->cc.on or .delay) */
bool uroce_cc_pace_ok(struct uroce_qp *qp, uint32_t bytes);

/* engine/req.c: dev->lock held */
void uroce_req_run(struct uroce_qp *qp);
void uroce_req_rewind(struct uroce_qp *qp); /* go back to comp.psn */
void uroce_req_arm(struct uroce_qp *qp);    /* (re)start the ack timer */
void uroce_req_progress(struct uroce_qp *qp, uint32_t acked);
void uroce_req_loss(struct uroce_qp *qp); /* a gap was seen */
/* a CNP came (DCQCN's alpha, of 1024): the window shrinks */
void uroce_req_ecn(struct uroce_qp *qp, uint32_t alpha);
/* bytes/s the window lets through in a round trip, 0: no RTT yet */
uint64_t uroce_req_window_rate(struct uroce_qp *qp);
/* comp.psn moved by n: give the device budget back, wake waiters */
void uroce_req_credit(struct uroce_qp *qp, uint32_t n);
/* an ACK-type AETH for psn counted code's receive WQEs free at the
 * responder (IBA 9.7.7.2; docs/transport.md "End-to-end credits");
 * whether the requester's limit rose */
bool uroce_req_rq_credits(struct uroce_qp *qp, uint32_t psn, uint8_t code);
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
/* the earliest of the QP's requester deadlines, 0 = none */
uint64_t uroce_req_next_deadline(const struct uroce_qp *qp);
/* how long a gap at the same PSN must wait before it is acted on again:
 * half an RTT after a sequence NAK (nak), a few RTTs after a response
 * that shows it (the rest of a READ's responses still coming) */
uint64_t uroce_req_regap_ns(const struct uroce_qp *qp, bool nak);
/* engine/comp.c: an ACK, NAK, READ response or atomic ACK for qp */
void uroce_comp_rx(struct uroce_qp *qp, struct uroce_pkt *pkt);
/* engine/resp.c: a request for qp */
void uroce_resp_rx(struct uroce_qp *qp, struct uroce_pkt *pkt);
/* engine/recv.c: the datagrams of one UDP_GRO train (at most
 * UROCE_RX_TRAIN_MAX, net/net.h), from src to dst: uroce_recv for each,
 * with one hold of dev->lock */
void uroce_recv_train(struct uroce_dev *dev, const struct uroce_rx_seg *seg,
		      int n, const struct sockaddr_storage *src,
		      const struct sockaddr_storage *dst);
/* engine/recv.c: parse, check and dispatch one datagram (no lock held);
 * ip_id_hint is the IPv4 identification it most likely had (the ICRC
 * check tries it first) */
void uroce_recv(struct uroce_dev *dev, uint8_t *buf, size_t len,
		const struct sockaddr_storage *src,
		const struct sockaddr_storage *dst, uint16_t ip_id_hint);
/* the same, for a packet from a same-host ring (net/local.c): every
 * check but the ICRC's (no wire between).  buf is a private copy of at
 * least the headers; payload_at, if not NULL, is the packet in the ring,
 * whose payload is copied from there (only data, never parsed, so a
 * peer changing it meanwhile changes only data it owns anyway) */
void uroce_recv_local(struct uroce_dev *dev, uint8_t *buf, size_t len,
		      const struct sockaddr_storage *src,
		      const struct sockaddr_storage *dst, uint16_t ip_id_hint,
		      const uint8_t *payload_at);
/* engine/recv.c: register the engine's receive entry with packet IO
 * (struct uroce_rx_entry, net/net.h: these functions), before the device
 * opens */
void uroce_rx_register(struct uroce_dev *dev);
/* the receive burst net/ delivers: begin (hold plain ACKs and the
 * completion channels' doorbells), uroce_recv for each datagram, end
 * (the held ACKs leave, what was queued is sent, the doorbells ring);
 * the caller holds dev->prog.rx_lock throughout, and not dev->lock */
void uroce_rx_burst_begin(struct uroce_dev *dev);
void uroce_rx_burst_end(struct uroce_dev *dev);
void uroce_rx_burst_end_for_post(struct uroce_dev *dev);
/* engine/progress.c */
int uroce_progress_start(struct uroce_dev *dev);
/* stop the progress thread (waiting for it until the CLOCK_REALTIME
 * deadline until, NULL: as long as it takes) and close its epoll, timer
 * and wake-up descriptors (with until, at exit, the timer and the
 * wake-ups stay open: other threads may still post or hand the socket
 * back).  0, or -errno (-ETIMEDOUT) with the thread left running and
 * everything open. */
int uroce_progress_stop(struct uroce_dev *dev, const struct timespec *until);
/* an application thread inside a verb: receive what is waiting, unless
 * another thread is already at it (never blocks) */
void uroce_progress_poll(struct uroce_dev *dev);
/* what a poll of an empty CQ does first: send the ACKs held for a post
 * that did not come, unless this thread's last poll found completions
 * (then this one ends a drain, and the post is likely next) */
void uroce_progress_empty_poll(struct uroce_dev *dev);
/* receive what has arrived by now, on every ring and the socket, waiting
 * for a receiver at work to finish first (the CM, before it acts on a
 * DREQ that may have passed the connection's last packets) */
void uroce_progress_drain(struct uroce_dev *dev);
/* the calling thread receives in uroce_progress_poll (an application's),
 * and the progress thread looks by soon (engine/progress.c) */
bool uroce_progress_app_rx(struct uroce_dev *dev);
/* the calling thread sleeps in uroce_progress_wait and received: its
 * ACKs wait for its reply as an application poll's do */
bool uroce_progress_waiter_rx(void);
/* the progress thread goes to sleep until by (0: until woken), and has
 * woken: it sends what is held for a post that did not come, and a hold
 * meanwhile needs no timer if by is within its bound
 * (uroce_ack_hold_covered) */
void uroce_progress_sleep_by(struct uroce_dev *dev, uint64_t by);
void uroce_progress_woke(struct uroce_dev *dev);
/* net/local.c, local_rx.c: the rings' doorbell, watched with the socket */
int uroce_progress_watch_bell(struct uroce_dev *dev, struct uroce_watcher *w,
			      int fd);
/* whether the watch may go from one state to the other */
bool uroce_progress_watch_may(enum uroce_watch from, enum uroce_watch to);
/* the application may stop polling now (it found only send
 * completions, or arms a CQ to sleep): the thread watches the socket */
void uroce_progress_sock_handback(struct uroce_dev *dev);
/* wake the progress thread (its eventfd) */
void uroce_progress_wake(struct uroce_dev *dev);
/* the application no longer receives for itself (the plan's APP test
 * fails: no empty poll within APP_POLL_NS, or a hand-back) */
bool uroce_progress_app_stopped(struct uroce_dev *dev);

/* engine/looker.c: looks every UROCE_APP_WAIT_NS while the watch is APP
 * (docs/progress.md, "The looker") */
#define UROCE_APP_WAIT_NS 200000
void uroce_looker_start(struct uroce_dev *dev);
/* wake it: the watch is APP now */
void uroce_looker_wake(struct uroce_dev *dev);
/* (dev->prog.stopping set) stop it; 0, or pthread_join's error */
int uroce_looker_join(struct uroce_dev *dev, const struct timespec *until);
/* an application thread polled its CQ and found it empty, at now: it
 * receives for itself, and takes the socket from a thread asleep on it */
void uroce_progress_app_polled(struct uroce_dev *dev, uint64_t now);
void uroce_progress_arm(struct uroce_dev *dev);
/* an application thread waits until fd (its completion channel) is
 * readable or ready(arg) > 0, receiving for the device meanwhile (and,
 * after a short wait, spinning a little first); 0, or -1 with errno */
int uroce_progress_wait(struct uroce_dev *dev, int fd, int (*ready)(void *),
			void *arg);
/* the same wait as poll(2) over the caller's descriptors: until one is
 * ready or timeout_ms (-1: none) passed; their count, 0, or -1 with errno
 * (EINTR after any signal handler, as poll) */
int uroce_progress_poll_fds(struct uroce_dev *dev, struct pollfd *fds,
			    nfds_t nfds, int timeout_ms);
/* stop every receiver and the engine while net/ changes the device's
 * socket and address (takes rx_lock, then dev->lock), and start again
 * (sends what was queued meanwhile) */
void uroce_rx_pause(struct uroce_dev *dev);
void uroce_rx_resume(struct uroce_dev *dev);
void uroce_timer_arm(struct uroce_dev *dev, uint64_t deadline_ns); /* lock held */
/* ... for one of qp's deadlines, which it has just set (the timer walks
 * the QPs that have one: dev->obj.timed) */
void uroce_qp_timer_arm(struct uroce_qp *qp, uint64_t deadline_ns);
/* fire the QP timers that are due and re-arm for the next (no lock held);
 * dev->prog.armed_deadline_ns is then the earliest deadline left, 0 = none */
void uroce_timers_run(struct uroce_dev *dev);
/* the timer is set to deadline_ns for something that no longer needs it
 * (lock held): set it to the earliest deadline left instead, where that
 * is cheap to find */
void uroce_timer_withdraw(struct uroce_dev *dev, uint64_t deadline_ns);
/* engine/xmit.c: send a packet of qp to its peer; hdr holds BTH..ext
 * headers, payload iov follows, pad and ICRC are added here.  Returns 0
 * (with the kernel), 1 (queued in the open batch: it leaves after
 * dev->lock is released, and if that fails for good the WQE it belongs
 * to is failed by uroce_comp_settle) or -errno (uroce_tx_fatal says
 * whether that is loss or a failure). */
int uroce_xmit(struct uroce_qp *qp, uint8_t *hdr, uint32_t hdrlen,
	       const struct iovec *payload, int npayload, uint32_t paylen);
/* the same, to an explicit destination and IP header fields (UD: the
 * AH's) */
int uroce_xmit_to(struct uroce_qp *qp, const struct sockaddr_storage *dst,
		  struct uroce_ipopt ip, uint8_t *hdr, uint32_t hdrlen,
		  const struct iovec *payload, int npayload, uint32_t paylen);
/* hold the packets sent until the matching end, then queue them to be
 * sent in as few system calls as they allow (nests; dev->lock held) */
void uroce_xmit_begin(struct uroce_dev *dev);
void uroce_xmit_end(struct uroce_dev *dev);
/* send what uroce_xmit_end queued; call without dev->lock.  Returns once
 * everything queued before the call is with the kernel (waiting for a
 * thread that is sending, which may send ours), or, in a thread that may
 * defer (below), once a thread that is draining the queue has it */
void uroce_tx_drain(struct uroce_dev *dev);
/* is the send queue held back by a full send buffer?  (a requester then
 * tries it and waits: engine/req.c) */
bool uroce_tx_full(struct uroce_dev *dev);
/* dev->lock held: 0 if the send queue is not held back (after trying
 * it), else how long a requester waits before it tries again */
uint64_t uroce_tx_room(struct uroce_dev *dev);
/* the progress thread: the send buffer has room (EPOLLOUT); no lock */
void uroce_tx_room_ready(struct uroce_dev *dev);
/* uroce_tx_drain, and wait (at most UROCE_TX_FLUSH_MS) for what a full
 * send buffer holds back: before memory the packets point at may go */
void uroce_tx_flush(struct uroce_dev *dev);
/* this thread's uroce_tx_drain may leave its batches to another such
 * thread that is draining the queue, and return before they are sent:
 * the progress thread, and an application thread receiving in its poll or
 * its wait, never a verb's (engine/xmit.c) */
extern __thread bool uroce_tx_defer;
/* this thread runs a channel's direct taker from its receive (rx_lock
 * held: verbs/cq.c chan_pay_bell) */
extern __thread bool uroce_rx_direct;
/* ... but not a batch with WQEs that complete once it has gone
 * (uroce_wqe_queue): their thread sends and settles them itself */
extern __thread bool uroce_tx_settles;
/* a send error that will not mend by itself (no route, a refused
 * destination): a UC/UD WQE fails; ENOBUFS, EPERM and the like are loss,
 * and so is everything on RC, whose retries decide */
bool uroce_tx_fatal(int err);

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
/* ... or leave them for the application's next post or poll, which
 * send them with uroce_post_run or uroce_ack_release(_unlocked); the
 * timer pass sends them UROCE_ACK_HOLD_NS later at the latest */
void uroce_ack_burst_end_for_post(struct uroce_dev *dev);
void uroce_ack_release(struct uroce_dev *dev);
void uroce_ack_release_unlocked(struct uroce_dev *dev);
/* uroce_req_run for a post, then the ACKs held for it (lock held) */
void uroce_post_run(struct uroce_qp *qp);
/* the device goes down: send every held ACK and what is queued; takes
 * dev->lock, waiting until the deadline until (NULL: forever); 0 or
 * -ETIMEDOUT */
int uroce_ack_flush_held(struct uroce_dev *dev, const struct timespec *until);
/* send the ACK qp holds back, if any, before anything else of qp */
void uroce_ack_flush(struct uroce_qp *qp);
/* qp stops answering: acknowledge what it executed unasked */
void uroce_resp_ack_unasked(struct uroce_qp *qp);
/* receives were posted to qp: tell a requester that the last ACK told
 * of an empty receive queue (end-to-end credits) */
void uroce_resp_rq_posted(struct uroce_qp *qp);
/* the QP is destroyed: flush the held ACK and send the last cumulative
 * ACK again a few times (nothing will answer a retransmission later) */
void uroce_resp_farewell(struct uroce_qp *qp);
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
/* the one place a send WQE changes state (obj/qp.h enum uroce_wqe_state);
 * status matters for UROCE_WQE_ERROR */
void uroce_wqe_to(struct uroce_qp *qp, struct uroce_send_wqe *wqe,
		  enum uroce_wqe_state state, enum ibv_wc_status status);
static inline bool uroce_wqe_started(const struct uroce_send_wqe *wqe)
{
	return wqe->state != UROCE_WQE_POSTED;
}
/* complete (DONE or ERROR): only reporting is left */
static inline bool uroce_wqe_complete(const struct uroce_send_wqe *wqe)
{
	return wqe->state >= UROCE_WQE_DONE;
}
/* UC/UD: the WQE's last packet waits in the open send batch */
void uroce_wqe_queue(struct uroce_qp *qp, struct uroce_send_wqe *wqe);
/* a UC/UD WQE's packet could not be sent (uroce_tx_fatal): it completes
 * with LOC_QP_OP_ERR and the QP moves to the error state */
void uroce_comp_send_failed(struct uroce_qp *qp, struct uroce_send_wqe *wqe);
/* after the send batches went (uroce_tx_drain; no lock held, takes
 * dev->lock): QUEUED WQEs whose batch is with the kernel are done, those
 * whose packet failed fail */
void uroce_comp_settle(struct uroce_dev *dev);
/* the QP stops (error, reset, destroy): off the QUEUED list */
void uroce_comp_release(struct uroce_qp *qp);
enum ibv_wc_opcode uroce_wc_opcode(enum ibv_wr_opcode op);

/* engine/qp_state.c: QP state changes and flushing; dev->lock held */
void uroce_qp_set_state(struct uroce_qp *qp, enum ibv_qp_state state);
/* complete every outstanding WQE of the SQ / RQ with WR_FLUSH_ERR */
void uroce_qp_flush_sq(struct uroce_qp *qp);
void uroce_qp_flush_rq(struct uroce_qp *qp);
void uroce_qp_to_error(struct uroce_qp *qp);
void uroce_sq_flush_if_error(struct uroce_qp *qp);
/* what ibv_modify_qp's attributes start in the transport (IBA 11.2.4.2):
 * the expected PSN at RTR, the send PSN at RTS, the retry counters, the
 * responder resources (allocated by the caller; the old ones freed) */
void uroce_qp_set_rq_psn(struct uroce_qp *qp, uint32_t psn);
void uroce_qp_set_sq_psn(struct uroce_qp *qp, uint32_t psn);
void uroce_qp_set_retry(struct uroce_qp *qp, uint8_t retry_cnt);
void uroce_qp_set_rnr_retry(struct uroce_qp *qp, uint8_t rnr_retry);
void uroce_qp_set_resp_res(struct uroce_qp *qp, struct uroce_resp_res *res,
			   uint32_t nres);
/* RESET: all requester/responder/completer state forgotten, rings empty */
void uroce_qp_reset(struct uroce_qp *qp);
/* free what the transport allocated for the QP (destroy, failed create;
 * the one function here that needs no lock: the QP is unreachable) */
void uroce_qp_transport_free(struct uroce_qp *qp);

/* engine/cq_err.c: move the QPs of every overrun CQ to the error state
 * (dev->lock held; from the timer pass, where no QP is mid-update) */
void uroce_cq_overrun_sweep(struct uroce_dev *dev);
/* a completion was lost: the sweep runs at the next timer pass, armed
 * for now (dev->lock held) */
void uroce_cq_overrun_soon(struct uroce_dev *dev);

/* engine/mcast.c: a packet that came to a multicast group, or that has
 * the multicast DQPN; delivered to every QP attached to the group.  No
 * lock held; takes dev->lock. */
void uroce_mcast_rx(struct uroce_dev *dev, struct uroce_pkt *pkt);

/* engine/shm.c: the stats segment /dev/shm/uroce.<pid> (include/uroce_shm.h).
 * uroce_shm_open, after uroce_net_open: create it and move the counters
 * into it; failure only means nobody can look, so it returns nothing. */
void uroce_shm_open(struct uroce_dev *dev);
/* the device goes down (the last close; nothing else runs on it): stop the
 * snapshot thread, move the counters back to dev->stats.cnt_private,
 * remove and unmap the segment */
void uroce_shm_close(struct uroce_dev *dev);
/* after the device moved (rdma_bind_addr): publish its new address and LID */
void uroce_shm_set_addr(struct uroce_dev *dev);
/* the GID of the live device on this host whose port has that LID, from
 * the other processes' segments: 0, -ENOENT, or -ENOTUNIQ if two claim it */
int uroce_shm_find_lid(uint16_t lid, union ibv_gid *gid);
/* the LIDs below nlids that the other live processes' segments name, as
 * a bitmap of (nlids + 7) / 8 bytes: one pass over /dev/shm */
void uroce_shm_lids(uint8_t *named, size_t nlids);

/* engine/lid.c: port LIDs, unique among the uroce devices of a host, so
 * that GRH-less addresses (ah_attr.is_global 0) work between them.
 * uroce_lid_claim: after uroce_net_open and uroce_net_rebind, before the
 * segment publishes it; returns 0 or a negative errno.
 * uroce_lid_resolve: the GID a GRH-less address to dlid goes to; 0 or
 * -EINVAL (no uroce device on this host has that LID). */
int uroce_lid_claim(struct uroce_dev *dev);
/* the device goes down: let the LID go (a later claim may find another) */
void uroce_lid_release(struct uroce_dev *dev);
int uroce_lid_resolve(struct uroce_dev *dev, uint16_t dlid, union ibv_gid *gid);

#endif /* UROCE_ENGINE_H */
