/* SPDX-License-Identifier: MIT */
/*
 * obj/cq.h: contexts, completion queues and async events: the one way
 * the engine reports upward.
 *
 * Owns: struct uroce_context (its async event queue), struct uroce_cq (the
 * completion ring).  Exports: uroce_cq_push (a completion) and
 * uroce_async_event (an async event), defined by the verbs front
 * (verbs/cq.c) and called by the engine; uroce_async_purge.
 * Locking: a CQ's ring is under cq->lock, taken after dev->lock; the
 * async queue under uctx->async_lock.  Never call into the application
 * with a lock held.
 */
#ifndef UROCE_OBJ_CQ_H
#define UROCE_OBJ_CQ_H

#include "core/core.h"

/* ---- context ---- */
struct uroce_async_node;

struct uroce_context {
	struct verbs_context vctx; /* ibv_context is its last member */
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

/* ---- CQ ---- */
struct uroce_cqe {
	struct ibv_wc wc;
	uint64_t ts_ns;	       /* CLOCK_MONOTONIC, if the CQ asked for it */
	uint64_t wallclock_ns; /* CLOCK_REALTIME, likewise */
	bool imm; /* a WRITE with immediate's (its opcode is a WRITE's) */
};

struct uroce_cq {
	struct ibv_cq_ex ex; /* ibv_cq is its head */
	struct uroce_dev *dev;
	pthread_mutex_t lock;
	struct uroce_cqe *ring;
	uint32_t size; /* power of two, >= cqe + 1 */
	uint32_t head; /* next to poll (consumer) */
	uint32_t tail; /* next to fill (producer) */
	bool armed;    /* req_notify_cq pending */
	/* completions came while no arm fired for them, and no poll has
	 * emptied the ring since: the next arm fires at once (verbs/cq.c) */
	bool unnotified;
	bool solicited_only;
	bool overrun;
	uint64_t wc_flags; /* cq_ex: which fields may be read */
	/* cq_ex: copy of the entry being read.  start_poll/next_poll pop it
	 * and drop cq->lock, so the application may post between them. */
	struct uroce_cqe cur;
	_Atomic int refs; /* QPs using it; destroy_cq says EBUSY */

	/* completion channel bookkeeping (verbs/cq.c, channel lock) */
	struct uroce_cq *ev_next;	/* in the channel's pending list */
	uint32_t ev_pending;		/* events queued, not yet read */
	uint32_t comp_events_reported;	/* read by ibv_get_cq_event */
	uint32_t async_events_reported; /* read by ibv_get_async_event */
	bool bell_due;			/* (dev->lock) in dev->obj.bell_cq */
};

static inline struct uroce_cq *to_ucq(struct ibv_cq *cq)
{
	return container_of((struct ibv_cq_ex *)cq, struct uroce_cq, ex);
}

static inline struct ibv_cq *ucq_ibcq(struct uroce_cq *cq)
{
	return ibv_cq_ex_to_cq(&cq->ex);
}

/* verbs/cq.c: add a completion; takes cq->lock.  Raises the CQ event if
 * the CQ is armed.  Returns 0, or -ENOSPC on overrun (CQ is then in error).
 * flags: UROCE_CQE_SOLICITED (a receive of a solicited message),
 * UROCE_CQE_WRITE_IMM (a send completion of a WRITE with immediate, whose
 * opcode is a WRITE's, off the same-host path: the peer takes it as a
 * receive, verbs/cq.c answer_unseen; engine/comp.c cqe_flags) */
#define UROCE_CQE_SOLICITED 1u
#define UROCE_CQE_WRITE_IMM 2u
int uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc,
		  unsigned int flags);
/* verbs/cq.c: remove every completion of QP qpn (its QP went to RESET);
 * dev->lock held, takes cq->lock */
void uroce_cq_clean(struct uroce_cq *cq, uint32_t qpn);
bool uroce_cq_holds(struct uroce_cq *cq, uint32_t qpn);
/* verbs/cq.c, a receive burst's completion-channel doorbells (the
 * caller holds dev->prog.rx_lock throughout).  defer (dev->lock held):
 * from now on they wait; take (dev->lock held): they stop waiting, and
 * the CQs whose doorbell waited (at most UROCE_BELLS_DEFERRED) go to
 * cqs; pay (dev->lock released, so that the woken thread does not find
 * it held): ring them.  ibv_destroy_cq takes rx_lock, so the CQs stay. */
void uroce_cq_bells_defer(struct uroce_dev *dev);
uint32_t uroce_cq_bells_take(struct uroce_dev *dev, struct uroce_cq **cqs);
void uroce_cq_bells_pay(struct uroce_cq *const *cqs, uint32_t n);
void uroce_async_event(struct uroce_context *uctx, struct ibv_async_event *ev);
/* withdraw the queued async events of obj (a CQ, QP, SRQ or WQ) before
 * destroying it; then wait for events_completed == async_events_reported */
void uroce_async_purge(struct uroce_context *uctx, const void *obj);

#endif /* UROCE_OBJ_CQ_H */
