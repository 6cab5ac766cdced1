// SPDX-License-Identifier: MIT
/*
 * Completion queues, completion channels and async events.
 *
 * A CQ is a power-of-two ring of struct uroce_cqe under cq->lock; the
 * engine appends (uroce_cq_push, dev->lock held, so dev->lock then
 * cq->lock), the application pops (poll_cq, or start_poll/next_poll of
 * ibv_cq_ex, which copy the entry out and drop the lock at once, so that
 * the application may post work between them).  A poll that finds the
 * ring empty first lets the calling thread receive what is waiting
 * (uroce_progress_poll), so a busy-polling application needs no wakeup of
 * the progress thread.
 *
 * Events wait in user-space queues, not in the file descriptors the
 * application sees: a completion channel keeps the list of CQs with
 * unread events, a context keeps its async events.  Each descriptor is a
 * doorbell, readable exactly while its queue is non-empty.  That way
 * destroying a CQ or QP can take its unread events back, as the kernel
 * does, instead of leaving a pointer to freed memory in a pipe.  A
 * channel's doorbell is an eventfd whose count is 1 while it rings: the
 * channel knows when it rings (bell_on), so a read of it never blocks,
 * whatever O_NONBLOCK the application set, and a ring and a read cost
 * less than half what a byte through a socketpair did (an event loop
 * pays both for about every message; docs/events.md).  The async fd is
 * one end of an AF_UNIX stream socketpair holding one byte, so that
 * ibv_get_async_event can wait with a blocking MSG_PEEK and drain with
 * MSG_DONTWAIT.  Channel and async locks are leaves: nothing is taken
 * under them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "uroce.h"
#include "uroce_private.h"

struct uroce_comp_channel {
	struct ibv_comp_channel ch;   /* ch.fd: the eventfd */
	pthread_mutex_t lock;	      /* the list below */
	struct uroce_cq *head, *tail; /* CQs with ev_pending > 0 */
	bool bell_on;		      /* (lock) the eventfd is readable */
	bool bell_owed;		      /* (lock) queued without the bell */
	int (*direct)(void *);	      /* takes owed events (receive path) */
	void *direct_arg;
};

/* the channel this thread waits on in ibv_get_cq_event, receiving for
 * the device meanwhile (chan_wait): an event it queues there itself is
 * its to take next, and needs no bell rung and read back */
static __thread struct uroce_comp_channel *waiting_on;

struct uroce_async_node {
	struct uroce_async_node *next;
	struct ibv_async_event ev;
};

#define CQ_WC_FLAGS_SUPPORTED \
	(IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

static _Atomic uint32_t next_cq_handle = 1;

static struct uroce_comp_channel *to_uchan(struct ibv_comp_channel *ch)
{
	return container_of(ch, struct uroce_comp_channel, ch);
}

static struct uroce_cq *ex_ucq(struct ibv_cq_ex *ex)
{
	return container_of(ex, struct uroce_cq, ex);
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- doorbells ---- */

static void bell_ring(int wfd)
{
	char b = 0;

	/* at most one byte is ever waiting, so this cannot fill the socket */
	(void)send(wfd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void bell_clear(int rfd)
{
	char b;

	(void)recv(rfd, &b, 1, MSG_DONTWAIT);
}

/* Wait until the doorbell is there, without taking it: a peek blocks as
 * a read does (O_NONBLOCK: -1/EAGAIN; a signal: EINTR or a restart, as
 * the handler's SA_RESTART says).  0, or -1 with errno set. */
static int bell_wait(int rfd)
{
	ssize_t n;
	char b;

	n = recv(rfd, &b, 1, MSG_PEEK);
	if (n == 1)
		return 0;
	if (n == 0)
		errno = EIO;
	return -1;
}

/* ---- completion channels ---- */

/* The channel's bell: its eventfd readable (a count of 1) exactly while
 * bell_on, so that a read never blocks, whatever O_NONBLOCK the
 * application set on the fd.  chan->lock held. */
static void chan_bell_ring(struct uroce_comp_channel *chan)
{
	uint64_t one = 1;

	if (chan->bell_on)
		return;
	/* (a count of 1 cannot overflow the eventfd: never blocks) */
	if (write(chan->ch.fd, &one, sizeof(one)) == sizeof(one))
		chan->bell_on = true;
}

static void chan_bell_clear(struct uroce_comp_channel *chan)
{
	uint64_t n;

	if (!chan->bell_on)
		return;
	(void)!read(chan->ch.fd, &n, sizeof(n));
	chan->bell_on = false;
}

UROCE_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(
	struct ibv_context *ctx)
{
	struct uroce_comp_channel *chan;
	int fd;

	chan = calloc(1, sizeof(*chan));
	if (!chan) {
		errno = ENOMEM;
		return NULL;
	}
	fd = eventfd(0, EFD_CLOEXEC);
	if (fd < 0) {
		free(chan);
		return NULL;
	}
	pthread_mutex_init(&chan->lock, NULL);
	chan->ch.context = ctx;
	chan->ch.fd = fd;
	chan->ch.refcnt = 0;
	return &chan->ch;
}

UROCE_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	struct uroce_comp_channel *chan = to_uchan(ch);
	struct ibv_context *ctx = ch->context;

	pthread_mutex_lock(&ctx->mutex);
	if (ch->refcnt) {
		pthread_mutex_unlock(&ctx->mutex);
		return EBUSY;
	}
	pthread_mutex_unlock(&ctx->mutex);

	close(ch->fd);
	pthread_mutex_destroy(&chan->lock);
	free(chan);
	return 0;
}

/*
 * Whether the doorbell cq's event makes owed may wait for the end of the
 * receive burst (dev->lock held, uroce_cq_bells_ring): the thread it
 * wakes would otherwise run at once into this cq->lock and channel lock,
 * and the engine lock, which the receiver holds for the rest of the
 * burst (a futex wait and wake on each, per event).  The burst's end
 * rings it.
 */
static bool bell_later(struct uroce_cq *cq)
{
	struct uroce_objs *o = &cq->dev->obj;

	uroce_assert_held(&cq->dev->lock);
	if (!o->bell_defer)
		return false;
	if (cq->bell_due)
		return true;
	if (o->nbell_cq == UROCE_BELLS_DEFERRED)
		return false;
	o->bell_cq[o->nbell_cq++] = cq;
	cq->bell_due = true;
	return true;
}

/* Queue a completion event for cq.  cq->lock held; in_burst: from the
 * engine's burst, under dev->lock, whose end may ring the bell
 * (bell_later); otherwise from the application's arm. */
static void chan_push(struct uroce_comp_channel *chan, struct uroce_cq *cq,
		      bool in_burst)
{
	uroce_assert_held(&cq->lock);
	pthread_mutex_lock(&chan->lock);
	if (cq->ev_pending++ == 0) {
		cq->ev_next = NULL;
		if (chan->tail)
			chan->tail->ev_next = cq;
		else
			chan->head = cq;
		chan->tail = cq;
		if (chan->head == cq &&
		    (waiting_on == chan || (in_burst && bell_later(cq))))
			chan->bell_owed = true;
		else if (chan->head == cq)
			chan_bell_ring(chan);
	}
	pthread_mutex_unlock(&chan->lock);
}

/* The bell an event queued without it is owed: it rings now, unless the
 * channel's direct taker takes the events here (uroce_channel_direct;
 * may_direct: at a receive burst's end, no engine lock held). */
static void chan_pay_bell(struct uroce_comp_channel *chan, bool may_direct)
{
	int (*direct)(void *) = NULL;

	pthread_mutex_lock(&chan->lock);
	if (chan->bell_owed && chan->head) {
		direct = may_direct ? chan->direct : NULL;
		if (!direct)
			chan_bell_ring(chan);
	}
	chan->bell_owed = false;
	pthread_mutex_unlock(&chan->lock);
	/* (the bell did not ring for what is queued: the taker's chan_take
	 * finds it silent; one that cannot take them leaves them to it) */
	if (direct) {
		bool was = uroce_rx_direct, took;

		/* (a taker's drain receives: nested, its events' takers find
		 * their lock busy and ring) */
		uroce_rx_direct = true;
		took = direct(chan->direct_arg);
		uroce_rx_direct = was;
		if (took)
			return;
		pthread_mutex_lock(&chan->lock);
		if (chan->head)
			chan_bell_ring(chan);
		pthread_mutex_unlock(&chan->lock);
	}
}

UROCE_EXPORT int uroce_channel_direct(struct ibv_comp_channel *ch,
				      int (*fn)(void *), void *arg)
{
	struct uroce_comp_channel *chan;

	if (!ch)
		return EINVAL;
	chan = to_uchan(ch);
	pthread_mutex_lock(&chan->lock);
	chan->direct = fn;
	chan->direct_arg = arg;
	pthread_mutex_unlock(&chan->lock);
	return 0;
}

void uroce_cq_bells_defer(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->lock);
	dev->obj.bell_defer = true;
}

uint32_t uroce_cq_bells_take(struct uroce_dev *dev, struct uroce_cq **cqs)
{
	struct uroce_objs *o = &dev->obj;
	uint32_t i, n = o->nbell_cq;

	uroce_assert_held(&dev->lock);
	o->bell_defer = false;
	for (i = 0; i < n; i++) {
		cqs[i] = o->bell_cq[i];
		cqs[i]->bell_due = false;
	}
	o->nbell_cq = 0;
	return n;
}

void uroce_cq_bells_pay(struct uroce_cq *const *cqs, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		chan_pay_bell(to_uchan(cqs[i]->ex.channel), true);
}

/* cq goes: not while a receiver may have it in its hands (rx_lock), and
 * out of the burst's list, its owed doorbell paid first (the channel's
 * other CQs may have events queued behind it) */
static void bell_forget(struct uroce_cq *cq)
{
	struct uroce_dev *dev = cq->dev;
	struct uroce_objs *o = &dev->obj;
	uint32_t i;

	pthread_mutex_lock(&dev->prog.rx_lock);
	pthread_mutex_lock(&dev->lock);
	if (cq->bell_due) {
		for (i = 0; i < o->nbell_cq && o->bell_cq[i] != cq; i++)
			;
		if (i < o->nbell_cq)
			o->bell_cq[i] = o->bell_cq[--o->nbell_cq];
		cq->bell_due = false;
		chan_pay_bell(to_uchan(cq->ex.channel), false);
	}
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_unlock(&dev->prog.rx_lock);
}

/* Take back cq's unread events: it is being destroyed. */
static void chan_remove(struct uroce_comp_channel *chan, struct uroce_cq *cq)
{
	struct uroce_cq **pp, *prev = NULL;

	pthread_mutex_lock(&chan->lock);
	if (cq->ev_pending) {
		for (pp = &chan->head; *pp; prev = *pp, pp = &(*pp)->ev_next) {
			if (*pp != cq)
				continue;
			*pp = cq->ev_next;
			if (chan->tail == cq)
				chan->tail = prev;
			break;
		}
		cq->ev_pending = 0;
		cq->ev_next = NULL;
		if (!chan->head) {
			chan_bell_clear(chan);
			chan->bell_owed = false;
		}
	}
	pthread_mutex_unlock(&chan->lock);
}

/* Take the channel's next event; NULL if none is queued.  The bell goes
 * silent with the last one (or, owed, rings for the ones left). */
static struct uroce_cq *chan_take(struct uroce_comp_channel *chan)
{
	struct uroce_cq *ucq;

	pthread_mutex_lock(&chan->lock);
	ucq = chan->head;
	if (ucq) {
		if (--ucq->ev_pending == 0) {
			chan->head = ucq->ev_next;
			if (!chan->head)
				chan->tail = NULL;
			ucq->ev_next = NULL;
		}
		ucq->comp_events_reported++;
		if (!chan->head)
			chan_bell_clear(chan);
		else
			chan_bell_ring(chan);
		chan->bell_owed = false;
	}
	pthread_mutex_unlock(&chan->lock);
	return ucq;
}

/* (uroce_progress_wait's spin looks) */
static int chan_ready(void *arg)
{
	struct uroce_comp_channel *chan = arg;
	int ready;

	pthread_mutex_lock(&chan->lock);
	ready = chan->head != NULL;
	pthread_mutex_unlock(&chan->lock);
	return ready;
}

/*
 * Wait until the channel may have an event: at once -1/EAGAIN if the
 * application made its fd non-blocking (as the uverbs fd); otherwise
 * sleeping on the device's packets too and receiving them, so that the
 * one wake-up of the packet that completes our work is enough
 * (engine/progress.c, uroce_progress_wait).
 */
static int chan_wait(struct uroce_comp_channel *chan)
{
	int fl = fcntl(chan->ch.fd, F_GETFL), err;

	if (fl < 0)
		return -1;
	if (fl & O_NONBLOCK) {
		errno = EAGAIN;
		return -1;
	}
	waiting_on = chan;
	err = uroce_progress_wait(ctx_dev(chan->ch.context), chan->ch.fd,
				  chan_ready, chan);
	waiting_on = NULL;
	if (err) /* (not taken after all: the bell rings now) */
		chan_pay_bell(chan, false);
	return err;
}

UROCE_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch,
				  struct ibv_cq **cq, void **cq_context)
{
	struct uroce_comp_channel *chan = to_uchan(ch);
	struct uroce_cq *ucq;

	while (!(ucq = chan_take(chan)))
		if (chan_wait(chan))
			return -1;

	*cq = ucq_ibcq(ucq);
	*cq_context = (*cq)->cq_context;
	return 0;
}

UROCE_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- async events ---- */

/* The object an async event is about, NULL for port and device events. */
static const void *event_obj(const struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		return ev->element.cq;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return ev->element.qp;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return ev->element.srq;
	case IBV_EVENT_WQ_FATAL:
		return ev->element.wq;
	default:
		return NULL;
	}
}

/* Queue ev for ibv_get_async_event.  Any lock may be held (this one is a
 * leaf); an event that cannot be allocated is lost. */
void uroce_async_event(struct uroce_context *uctx, struct ibv_async_event *ev)
{
	struct uroce_async_node *n = malloc(sizeof(*n));

	if (!n)
		return;
	n->next = NULL;
	n->ev = *ev;
	pthread_mutex_lock(&uctx->async_lock);
	if (uctx->async_tail) {
		uctx->async_tail->next = n;
	} else {
		uctx->async_head = n;
		bell_ring(uctx->async_pipe[1]);
	}
	uctx->async_tail = n;
	pthread_mutex_unlock(&uctx->async_lock);
}

/* Drop the unread async events about obj (all of them if obj is NULL). */
void uroce_async_purge(struct uroce_context *uctx, const void *obj)
{
	struct uroce_async_node **pp, *n, *prev = NULL, *dead = NULL;

	pthread_mutex_lock(&uctx->async_lock);
	if (!uctx->async_head)
		goto out;
	pp = &uctx->async_head;
	while ((n = *pp)) {
		if (obj && event_obj(&n->ev) != obj) {
			prev = n;
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		n->next = dead;
		dead = n;
	}
	uctx->async_tail = prev;
	if (!uctx->async_head)
		bell_clear(uctx->async_pipe[0]);
out:
	pthread_mutex_unlock(&uctx->async_lock);
	while ((n = dead)) {
		dead = n->next;
		free(n);
	}
}

/* The object's count of events handed out; destroy waits for its acks. */
static void count_reported(const struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		to_ucq(ev->element.cq)->async_events_reported++;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		to_uqp(ev->element.qp)->async_events_reported++;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		to_usrq(ev->element.srq)->async_events_reported++;
		break;
	default:
		break;
	}
}

UROCE_EXPORT int ibv_get_async_event(struct ibv_context *ctx,
				     struct ibv_async_event *event)
{
	struct uroce_context *uctx = to_uctx(ctx);
	struct uroce_async_node *n;

	/* an event is taken if one is queued; the doorbell goes with the
	 * last (both under the lock: readable exactly while one is) */
	for (;;) {
		pthread_mutex_lock(&uctx->async_lock);
		n = uctx->async_head;
		if (n) {
			uctx->async_head = n->next;
			if (!n->next) {
				uctx->async_tail = NULL;
				bell_clear(uctx->async_pipe[0]);
			}
			count_reported(&n->ev);
		}
		pthread_mutex_unlock(&uctx->async_lock);
		if (n)
			break;
		if (bell_wait(ctx->async_fd))
			return -1;
	}

	*event = n->ev;
	free(n);
	return 0;
}

UROCE_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;

		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_signal(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		break;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;

		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_signal(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		break;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = event->element.srq;

		pthread_mutex_lock(&srq->mutex);
		srq->events_completed++;
		pthread_cond_signal(&srq->cond);
		pthread_mutex_unlock(&srq->mutex);
		break;
	}
	case IBV_EVENT_WQ_FATAL: {
		struct ibv_wq *wq = event->element.wq;

		pthread_mutex_lock(&wq->mutex);
		wq->events_completed++;
		pthread_cond_signal(&wq->cond);
		pthread_mutex_unlock(&wq->mutex);
		break;
	}
	default:
		break;
	}
}

/* ---- the ring ---- */

/* The smallest power of two above cqe; capacity is that minus one. */
static uint32_t ring_size(uint32_t cqe)
{
	uint32_t size = 2;

	while (size <= cqe)
		size <<= 1;
	return size;
}

/* Called by the engine with dev->lock held. */
int uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc,
		  unsigned int flags)
{
	bool solicited = flags & UROCE_CQE_SOLICITED;
	struct uroce_dev *dev;
	struct uroce_cqe *e;
	bool overrun_now = false;

	uroce_assert_held(&ctx_dev(cq->ex.context)->lock);
	pthread_mutex_lock(&cq->lock);
	if (cq->overrun)
		goto lost;
	if (cq->tail - cq->head >= cq->size - 1) {
		cq->overrun = true;
		overrun_now = true;
		goto lost;
	}
	e = &cq->ring[cq->tail & (cq->size - 1)];
	e->wc = *wc;
	e->imm = flags & UROCE_CQE_WRITE_IMM;
	if (cq->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		e->ts_ns = uroce_now_ns();
	if (cq->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		e->wallclock_ns = realtime_ns();
	/* release: a poller that sees the new tail without the lock (the
	 * empty check in uroce_poll_cq) sees the entry too */
	__atomic_store_n(&cq->tail, cq->tail + 1, __ATOMIC_RELEASE);

	/* IBA Request Completion Notification: a solicited-only arm also
	 * fires on an unsuccessful completion */
	if (cq->armed && (!cq->solicited_only || solicited ||
			  wc->status != IBV_WC_SUCCESS)) {
		cq->armed = false;
		cq->unnotified = false;
		if (cq->ex.channel)
			chan_push(to_uchan(cq->ex.channel), cq, true);
	} else {
		cq->unnotified = true;
	}
	pthread_mutex_unlock(&cq->lock);
	return 0;

lost:
	/*
	 * A completion is lost: its QP, and every other QP of this CQ, go to
	 * the error state (rxe: the responder's class G error).  Not here,
	 * with the caller in the middle of a queue: at the engine's next
	 * timer pass, which this arms for now.
	 */
	pthread_mutex_unlock(&cq->lock);
	dev = ctx_dev(cq->ex.context);
	uroce_cq_overrun_soon(dev);
	if (overrun_now) {
		struct ibv_async_event ev = {
			.element.cq = ucq_ibcq(cq),
			.event_type = IBV_EVENT_CQ_ERR,
		};

		uroce_async_event(to_uctx(cq->ex.context), &ev);
	}
	return -ENOSPC;
}

/*
 * The QP qpn went to RESET: its completions leave the CQ, the others
 * stay in their order (mlx4 and mlx5 do this; rxe does not).  A program
 * that recovers a QP in place (ERR, RESET, ... RTS) must not poll the
 * flush errors of its old receives after the recovery.  dev->lock held
 * (no completion of the QP can come meanwhile); takes cq->lock.
 */
void uroce_cq_clean(struct uroce_cq *cq, uint32_t qpn)
{
	uint32_t mask = cq->size - 1, from, to;

	uroce_assert_held(&ctx_dev(cq->ex.context)->lock);
	pthread_mutex_lock(&cq->lock);
	for (from = to = cq->head; from != cq->tail; from++) {
		if (cq->ring[from & mask].wc.qp_num == qpn)
			continue;
		if (to != from)
			cq->ring[to & mask] = cq->ring[from & mask];
		to++;
	}
	/* (the lock-free empty check in uroce_poll_cq only reads it as a
	 * hint; the entries are read under the lock) */
	__atomic_store_n(&cq->tail, to, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cq->lock);
}

/* Whether a completion of QP qpn waits in cq for the application's
 * poll.  Takes cq->lock. */
bool uroce_cq_holds(struct uroce_cq *cq, uint32_t qpn)
{
	uint32_t mask = cq->size - 1, i;
	bool found = false;

	pthread_mutex_lock(&cq->lock);
	for (i = cq->head; i != cq->tail && !found; i++)
		found = cq->ring[i & mask].wc.qp_num == qpn;
	pthread_mutex_unlock(&cq->lock);
	return found;
}

/*
 * A poll found completions.  If they were RDMA WRITEs alone, the
 * application may now wait for the peer in a way we cannot see: a WRITE
 * in answer leaves no completion, only memory that changes (ib_write_lat
 * spins on it).  The progress thread then takes the socket back
 * (engine/progress.c).  So it does after READs and atomics: their
 * answer comes from a passive peer's progress thread, and with ours off
 * the socket that answer came 3x later over UDP (ib_read_lat 2 B 26 us
 * against 8; docs/progress.md, "Who receives when").  A receive or a
 * SEND's completion (whose answer is a receive) is taken to come back to
 * the CQ, and off the same-host path so is a WRITE with immediate's (the
 * peer takes it as a receive, and answers in kind: rsockets, NCCL;
 * engine/comp.c cqe_flags).  It has a WRITE's opcode, so the entry says
 * which it was: with WRITE_WITH_IMM taken for a WRITE, rstream handed
 * the socket back at every round trip, and its polls then sent each ACK
 * alone instead of with its reply (two datagrams a message for the peer
 * to take, not one; docs/datapath.md, "ACKs").  answer_unseen: none of
 * the completions is one whose answer comes back to this CQ.
 */
static bool answer_unseen(const struct uroce_cqe *e)
{
	return !e->imm && (e->wc.opcode == IBV_WC_RDMA_WRITE ||
			   e->wc.opcode == IBV_WC_RDMA_READ ||
			   e->wc.opcode == IBV_WC_COMP_SWAP ||
			   e->wc.opcode == IBV_WC_FETCH_ADD);
}

static void poll_found(struct uroce_cq *cq, bool unseen)
{
	uroce_progress_poll_done(cq->dev);
	if (unseen)
		uroce_progress_sock_handback(cq->dev);
}

int uroce_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct uroce_cq *cq = to_ucq(ibcq);
	uint32_t mask = cq->size - 1;
	bool unseen = true;
	int i = 0;

	/* empty (a hint, read without the lock): the polling thread drives
	 * receive itself, and takes no lock unless something came in */
	if (__atomic_load_n(&cq->head, __ATOMIC_RELAXED) ==
	    __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE)) {
		uroce_progress_poll(cq->dev);
		if (__atomic_load_n(&cq->head, __ATOMIC_RELAXED) ==
		    __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE))
			return 0;
	}
	pthread_mutex_lock(&cq->lock);
	while (i < n && cq->head != cq->tail) {
		const struct uroce_cqe *e = &cq->ring[cq->head & mask];

		unseen = unseen && answer_unseen(e);
		wc[i++] = e->wc;
		__atomic_store_n(&cq->head, cq->head + 1, __ATOMIC_RELAXED);
	}
	if (cq->head == cq->tail)
		cq->unnotified = false;
	pthread_mutex_unlock(&cq->lock);
	if (i)
		poll_found(cq, unseen);
	return i;
}

int uroce_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct uroce_cq *cq = to_ucq(ibcq);

	/* the caller may sleep now: the progress thread watches the
	 * socket.  ACKs held for a post stay: the poll that follows an arm
	 * and the post that answers it send them (with the reply, in one
	 * wake-up of the peer), sleeping in ibv_get_cq_event does, and the
	 * engine's timer bounds the rest (docs/datapath.md, "ACKs") */
	uroce_progress_arm(cq->dev);
	pthread_mutex_lock(&cq->lock);
	/* a pending "next completion" arm is not narrowed to solicited */
	if (!cq->armed)
		cq->solicited_only = solicited_only;
	else if (!solicited_only)
		cq->solicited_only = false;
	cq->armed = true;
	/*
	 * Completions came while no arm was set and are still unpolled: the
	 * arm fires at once, as a ConnectX's does (it arms with its
	 * consumer index).  UCX's wake-up polls its CQ empty, arms and
	 * sleeps; a completion that lands between that poll and the arm
	 * must wake it.  Not for completions an event already announced:
	 * perftest's -e loop re-arms before it polls the ones its event
	 * was for, and takes any event for a completion to come.
	 */
	if (!cq->solicited_only && cq->unnotified && cq->head != cq->tail &&
	    cq->ex.channel) {
		cq->armed = false;
		cq->unnotified = false;
		chan_push(to_uchan(cq->ex.channel), cq, false);
	}
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* ---- ibv_cq_ex ---- */

static int cq_pop_cur(struct uroce_cq *cq)
{
	pthread_mutex_lock(&cq->lock);
	if (cq->head == cq->tail) {
		pthread_mutex_unlock(&cq->lock);
		uroce_progress_poll(cq->dev);
		pthread_mutex_lock(&cq->lock);
	}
	if (cq->head == cq->tail) {
		pthread_mutex_unlock(&cq->lock);
		return ENOENT;
	}
	cq->cur = cq->ring[cq->head & (cq->size - 1)];
	__atomic_store_n(&cq->head, cq->head + 1, __ATOMIC_RELAXED);
	if (cq->head == cq->tail)
		cq->unnotified = false;
	pthread_mutex_unlock(&cq->lock);
	poll_found(cq, answer_unseen(&cq->cur));

	cq->ex.status = cq->cur.wc.status;
	cq->ex.wr_id = cq->cur.wc.wr_id;
	return 0;
}

static int cq_start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	return cq_pop_cur(ex_ucq(ex));
}

static int cq_next_poll(struct ibv_cq_ex *ex)
{
	return cq_pop_cur(ex_ucq(ex));
}

static void cq_end_poll(struct ibv_cq_ex *ex)
{
}

static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.opcode;
}

static uint32_t cq_read_vendor_err(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.vendor_err;
}

static uint32_t cq_read_byte_len(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.byte_len;
}

static __be32 cq_read_imm_data(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.imm_data;
}

static uint32_t cq_read_qp_num(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.qp_num;
}

static uint32_t cq_read_src_qp(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.src_qp;
}

static unsigned int cq_read_wc_flags(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.wc_flags;
}

static uint32_t cq_read_slid(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.slid;
}

static uint8_t cq_read_sl(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.sl;
}

static uint8_t cq_read_dlid_path_bits(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wc.dlid_path_bits;
}

/* in "HCA clock" ticks: query_device_ex says the clock runs at 1 GHz */
static uint64_t cq_read_completion_ts(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.ts_ns;
}

static uint64_t cq_read_completion_wallclock_ns(struct ibv_cq_ex *ex)
{
	return ex_ucq(ex)->cur.wallclock_ns;
}

/* ---- create, resize, destroy ---- */

static struct uroce_cq *cq_create(struct ibv_context *ctx, uint32_t cqe,
				  void *cq_context,
				  struct ibv_comp_channel *channel,
				  uint32_t comp_vector, uint64_t wc_flags)
{
	struct uroce_dev *dev = ctx_dev(ctx);
	struct uroce_cq *cq;
	struct ibv_cq_ex *ex;

	if (cqe < 1 || cqe > UROCE_MAX_CQE ||
	    comp_vector >= (uint32_t)ctx->num_comp_vectors ||
	    (channel && channel->context != ctx)) {
		errno = EINVAL;
		return NULL;
	}
	if (atomic_fetch_add(&dev->obj.ncqs, 1) >= UROCE_MAX_CQ) {
		errno = ENOMEM;
		goto err_count;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		goto err_count;
	}
	cq->size = ring_size(cqe);
	cq->ring = calloc(cq->size, sizeof(*cq->ring));
	if (!cq->ring) {
		errno = ENOMEM;
		goto err_free;
	}
	cq->dev = dev;
	cq->wc_flags = wc_flags;
	pthread_mutex_init(&cq->lock, NULL);

	ex = &cq->ex;
	ex->context = ctx;
	ex->channel = channel;
	ex->cq_context = cq_context;
	ex->handle = atomic_fetch_add(&next_cq_handle, 1);
	ex->cqe = (int)(cq->size - 1);
	pthread_mutex_init(&ex->mutex, NULL);
	pthread_cond_init(&ex->cond, NULL);

	ex->start_poll = cq_start_poll;
	ex->next_poll = cq_next_poll;
	ex->end_poll = cq_end_poll;
	ex->read_opcode = cq_read_opcode;
	ex->read_vendor_err = cq_read_vendor_err;
	ex->read_byte_len = cq_read_byte_len;
	ex->read_imm_data = cq_read_imm_data;
	ex->read_qp_num = cq_read_qp_num;
	ex->read_src_qp = cq_read_src_qp;
	ex->read_wc_flags = cq_read_wc_flags;
	ex->read_slid = cq_read_slid;
	ex->read_sl = cq_read_sl;
	ex->read_dlid_path_bits = cq_read_dlid_path_bits;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		ex->read_completion_ts = cq_read_completion_ts;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		ex->read_completion_wallclock_ns =
			cq_read_completion_wallclock_ns;

	if (channel) {
		pthread_mutex_lock(&ctx->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&ctx->mutex);
	}
	return cq;

err_free:
	free(cq);
err_count:
	atomic_fetch_sub(&dev->obj.ncqs, 1);
	return NULL;
}

UROCE_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe,
					  void *cq_context,
					  struct ibv_comp_channel *channel,
					  int comp_vector)
{
	struct uroce_cq *cq;

	if (cqe < 1 || comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	cq = cq_create(ctx, (uint32_t)cqe, cq_context, channel,
		       (uint32_t)comp_vector, IBV_WC_STANDARD_FLAGS);
	return cq ? ucq_ibcq(cq) : NULL;
}

struct ibv_cq_ex *uroce_create_cq_ex(struct ibv_context *ctx,
				     struct ibv_cq_init_attr_ex *attr)
{
	uint32_t flags = 0;
	struct uroce_cq *cq;

	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
					  IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)
		flags = attr->flags;
	if (flags & ~(uint32_t)(IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
				IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) {
		errno = EINVAL;
		return NULL;
	}
	/* no parent domains; and an overrun always puts the CQ in error */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) ||
	    (flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) ||
	    (attr->wc_flags & ~(uint64_t)CQ_WC_FLAGS_SUPPORTED)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = cq_create(ctx, attr->cqe, attr->cq_context, attr->channel,
		       attr->comp_vector, attr->wc_flags);
	return cq ? &cq->ex : NULL;
}

UROCE_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct uroce_cq *cq = to_ucq(ibcq);
	struct uroce_cqe *ring, *old;
	uint32_t size, held, i;

	if (cqe < 1 || cqe > UROCE_MAX_CQE)
		return EINVAL;
	size = ring_size((uint32_t)cqe);
	ring = calloc(size, sizeof(*ring));
	if (!ring)
		return ENOMEM;

	pthread_mutex_lock(&cq->lock);
	held = cq->tail - cq->head;
	if (held > (uint32_t)cqe) {
		pthread_mutex_unlock(&cq->lock);
		free(ring);
		return EINVAL;
	}
	for (i = 0; i < held; i++)
		ring[i] = cq->ring[(cq->head + i) & (cq->size - 1)];
	old = cq->ring;
	cq->ring = ring;
	cq->size = size;
	__atomic_store_n(&cq->head, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&cq->tail, held, __ATOMIC_RELEASE);
	ibcq->cqe = (int)(size - 1);
	pthread_mutex_unlock(&cq->lock);

	free(old);
	return 0;
}

UROCE_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct uroce_cq *cq = to_ucq(ibcq);
	struct ibv_context *ctx = ibcq->context;
	struct ibv_comp_channel *channel = ibcq->channel;

	if (atomic_load(&cq->refs) > 0)
		return EBUSY;

	if (channel) {
		bell_forget(cq);
		chan_remove(to_uchan(channel), cq);
	}
	uroce_async_purge(to_uctx(ctx), ibcq);

	/* as the kernel does: wait until every event handed out is acked */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != cq->comp_events_reported ||
	       ibcq->async_events_completed != cq->async_events_reported)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);

	if (channel) {
		pthread_mutex_lock(&ctx->mutex);
		channel->refcnt--;
		pthread_mutex_unlock(&ctx->mutex);
	}
	atomic_fetch_sub(&cq->dev->obj.ncqs, 1);

	pthread_cond_destroy(&ibcq->cond);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
	return 0;
}
