// SPDX-License-Identifier: MIT
/*
 * The rdma_cm API (rdma/rdma_cma.h): event channels, ids, connection
 * set-up and tear-down, and the synchronous mode that rdma_create_ep /
 * rdma_get_request users rely on; addresses and ports are in addr.c.
 * Semantics follow rdma-core's librdmacm over the kernel's rdma_cm; the
 * protocol itself is in proto.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "uroce_private.h"

#define CM_USER_REQ_PDATA  (CM_REQ_PDATA - CMA_HDR_SIZE)
#define CM_USER_SIDR_PDATA (CM_SIDR_REQ_PDATA - CMA_HDR_SIZE)

int cm_set_errno(int err)
{
	errno = err;
	return -1;
}

/* ---- channels and events ---- */

struct cm_chan *cm_chan_new(bool sync)
{
	struct cm_chan *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->sync = sync;
	return ch;
}

static void chan_free(struct cm_chan *ch)
{
	close(ch->ch.fd);
	free(ch);
}

/*
 * Keeps the fd readable exactly while events wait: the eventfd is
 * written when the queue gains its first event and read back to zero
 * when it loses its last, so a stream of events that a thread takes as
 * they come costs a system call per transition, not one or two per
 * event (ch->readable says which side of it the fd is on).  cm.lock
 * held.
 */
static void chan_ready(struct cm_chan *ch)
{
	uint64_t v = 1;

	uroce_assert_held(&cm.lock);
	if (!ch->head == !ch->readable)
		return;
	if (ch->head) {
		if (write(ch->ch.fd, &v, sizeof(v)) == sizeof(v))
			ch->readable = true;
	} else if (read(ch->ch.fd, &v, sizeof(v)) == sizeof(v)) {
		ch->readable = false;
	}
}

CM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_chan *ch = cm_chan_new(false);

	return ch ? &ch->ch : NULL;
}

/* destroyed channels whose memory is kept a while; cm.lock */
#define DEAD_CHANS 64
static struct cm_chan *dead_chans[DEAD_CHANS];
static unsigned int dead_next;

CM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_chan *ch = to_chan(channel);
	struct cm_chan *old;

	if (!channel)
		return;
	pthread_mutex_lock(&cm.lock);
	if (ch->nids) {
		/* ids still use it: keep it rather than leave them dangling */
		pthread_mutex_unlock(&cm.lock);
		errno = EBUSY;
		return;
	}
	if (ch->waiters) {
		/* a thread blocks in rdma_get_cm_event on it (Debian's rping
		 * destroys it so): keep it, wake the thread, which finds it
		 * dead and stays blocked, as on a closed ucma fd */
		uint64_t v = 1;
		ssize_t n;

		ch->dead = true;
		n = write(ch->ch.fd, &v, sizeof(v));
		pthread_mutex_unlock(&cm.lock);
		(void)n;
		return;
	}
	/*
	 * No thread waits on it now, but one may be about to: rping's
	 * event thread, between its ack and its next rdma_get_cm_event,
	 * while its main thread destroys the channel and exits.  The fd
	 * goes now; the memory only after DEAD_CHANS later destroys, so
	 * that such a call finds it dead and blocks, as on a closed ucma
	 * fd, rather than reading freed memory.
	 */
	ch->dead = true;
	close(ch->ch.fd);
	ch->ch.fd = -1;
	old = dead_chans[dead_next];
	dead_chans[dead_next] = ch;
	dead_next = (dead_next + 1) % DEAD_CHANS;
	pthread_mutex_unlock(&cm.lock);
	free(old);
}

struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type type,
			      int status)
{
	struct cm_event *e;

	/* an orphan has no application to tell */
	if (id->orphan)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	e->owner = id;
	id->nevents++;
	return e;
}

void cm_event_queue(struct cm_event *e)
{
	struct cm_chan *ch = e->chan ? e->chan : to_chan(e->owner->id.channel);

	if (!cm_link_empty(&cm.disc_held))
		cm_disc_before(ch);
	e->next = NULL;
	e->owner->nqueued++;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	chan_ready(ch);
}

/* Takes id's undelivered events off its channel; pred picks which. */
static void unqueue_events(struct cm_chan *ch, struct cm_id *owner,
			   struct cm_chan *to)
{
	struct cm_event **pp = &ch->head, *e;

	ch->tail = NULL;
	while ((e = *pp)) {
		if (e->owner == owner) {
			*pp = e->next;
			owner->nqueued--;
			if (to) {
				e->chan = NULL;
				cm_event_queue(e);
			} else {
				owner->nevents--;
				free(e);
			}
			continue;
		}
		ch->tail = e;
		pp = &e->next;
	}
	chan_ready(ch);
}

/*
 * never_block: the caller knows the channel is nonblocking (rsockets make
 * theirs so and poll it at every call), so an empty queue is EAGAIN
 * without the fcntl that asks the fd, a system call per empty poll.
 */
static int get_event(struct rdma_event_channel *channel,
		     struct rdma_cm_event **event, bool never_block)
{
	struct cm_chan *ch = to_chan(channel);
	bool waited = false;
	struct pollfd p;
	int flags;

	if (!channel || !event)
		return cm_set_errno(EINVAL);
	for (;;) {
		struct cm_event *e;

		pthread_mutex_lock(&cm.lock);
		if (waited)
			ch->waiters--;
		waited = false;
		/* a dead channel, or the process exiting (below, in
		 * end_connections_at_exit): another thread is told nothing
		 * more, as the kernel's ucma tells a process whose exit has
		 * closed its fd; what the exit's own DREQs bring (the
		 * DISCONNECTED of a context the program has freed, as
		 * libiscsi's iSER does) would reach freed memory */
		if (ch->dead || (cm.exit_tid && cm.exit_tid != gettid())) {
			pthread_mutex_unlock(&cm.lock);
			for (;;)
				pause();
		}
		e = ch->head;
		if (e) {
			struct cm_id *lid = e->owner->listener;

			ch->head = e->next;
			if (!ch->head)
				ch->tail = NULL;
			chan_ready(ch);
			e->delivered = true;
			e->taker = gettid();
			cm_link_add_tail(&e->owner->taken, &e->taken_node);
			e->owner->nqueued--;
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && lid) {
				e->owner->listener = NULL;
				cm_link_del(&e->owner->child_node);
				lid->queued_reqs--;
				cm_release_deferred(lid);
			}
			pthread_mutex_unlock(&cm.lock);
			*event = &e->ev;
			return 0;
		}
		flags = never_block ? O_NONBLOCK : fcntl(channel->fd, F_GETFL);
		if (flags >= 0 && (flags & O_NONBLOCK)) {
			pthread_mutex_unlock(&cm.lock);
			return cm_set_errno(EAGAIN);
		}
		ch->waiters++;
		waited = true;
		p.fd = channel->fd;
		pthread_mutex_unlock(&cm.lock);
		p.events = POLLIN;
		if (poll(&p, 1, -1) < 0 && errno != EINTR) {
			int err = errno;

			pthread_mutex_lock(&cm.lock);
			ch->waiters--;
			pthread_mutex_unlock(&cm.lock);
			return cm_set_errno(err);
		}
	}
}

CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				struct rdma_cm_event **event)
{
	return get_event(channel, event, false);
}

int cm_try_event(struct rdma_event_channel *channel,
		 struct rdma_cm_event **event)
{
	return get_event(channel, event, true);
}

CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;

	if (!event)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	e->owner->nevents--;
	cm_link_del(&e->taken_node);
	pthread_cond_broadcast(&cm.acked);
	pthread_mutex_unlock(&cm.lock);
	free(e);
	return 0;
}

/*
 * rdma-core's ucma_complete: a synchronous id waits for its own event.
 * is_sync is ci->sync as the caller read it under cm.lock: once the lock is
 * let go, another thread may take an asynchronous id's event and destroy
 * the id (cmtime's server does), so an asynchronous id is not touched.
 */
static int sync_wait(struct cm_id *ci, bool is_sync)
{
	struct rdma_cm_id *id = &ci->id;
	int ret;

	if (!is_sync)
		return 0;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	ret = rdma_get_cm_event(id->channel, &id->event);
	if (ret)
		return ret;
	if (id->event->status) {
		if (id->event->event == RDMA_CM_EVENT_REJECTED)
			return cm_set_errno(ECONNREFUSED);
		return cm_set_errno(id->event->status < 0 ? -id->event->status :
							    id->event->status);
	}
	return 0;
}

int cm_sync_wait(struct cm_id *ci, bool is_sync)
{
	return sync_wait(ci, is_sync);
}

CM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] =
			"RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned int)event < sizeof(names) / sizeof(names[0]) &&
	    names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

/* ---- devices ---- */

CM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int err;

	pthread_mutex_lock(&cm.lock);
	err = cm_dev_up();
	pthread_mutex_unlock(&cm.lock);
	if (num_devices)
		*num_devices = err ? 0 : 1;
	if (err) {
		errno = -err;
		return NULL;
	}
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = cm.app_ctx;
	return list;
}

CM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* ---- ids ---- */

struct cm_id *cm_id_alloc(struct cm_chan *ch, void *context,
			  enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	id->id.channel = &ch->ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qpt;
	id->sync = ch->sync;
	cm_link_init(&id->taken);
	id->retry_cnt = 7;
	id->rnr_retry = 7;
	id->ack_timeout = 14;
	id->mtu = (uint8_t)cm.mtu;
	ch->nids++;
	cm_id_link(id);
	return id;
}

/* The application's part of an id: its events, its channel's count. */
static void id_leave_chan(struct cm_id *id)
{
	struct cm_chan *ch = to_chan(id->id.channel);

	if (id->nqueued)
		unqueue_events(ch, id, NULL);
	if (id->deferred_ev) {
		free(id->deferred_ev);
		id->deferred_ev = NULL;
	}
	ch->nids--;
	if (ch->sync && !ch->nids)
		chan_free(ch);
	id->id.channel = NULL;
}

void cm_id_free(struct cm_id *id)
{
	cm_id_unlink(id);
	if (!id->orphan)
		id_leave_chan(id);
	free(id->ep_qp_attr);
	free(id);
	cm_timer_arm();
}

bool cm_orphan_done(struct cm_id *id)
{
	if (!id->orphan)
		return false;
	cm_id_free(id);
	return true;
}

/*
 * An id destroyed while its DREQ waits for the DREP (rdma_disconnect,
 * then rdma_destroy_id at once, as rping's client does) stays in the CM,
 * without its channel, port or listener, until the DREP comes or the
 * DREQ's retries run out: a DREQ lost on the way is sent again, as the
 * kernel's CM does for a connection in time wait.  Without that the
 * peer, told nothing, waits for ever on a connection nobody sends on
 * any more (rping's server on a lossy path did).
 */
static void orphan(struct cm_id *ci)
{
	uroce_assert_held(&cm.lock);
	id_leave_chan(ci);
	ci->orphan = true;
	ci->id.qp = NULL;
	cm_link_del(&ci->child_node);
	cm_link_del(&ci->listen_node);
	if (ci->port_table) {
		cm_hash_del(ci->port_table, &ci->port_node);
		ci->port_table = NULL;
	}
	ci->listener = NULL;
}

CM_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
			     struct rdma_cm_id **id, void *context,
			     enum rdma_port_space ps)
{
	enum ibv_qp_type qpt;
	struct cm_chan *ch;
	struct cm_id *ci;
	int err;

	if (!id)
		return cm_set_errno(EINVAL);
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		qpt = IBV_QPT_RC;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		qpt = IBV_QPT_UD;
		break;
	default:
		return cm_set_errno(EINVAL);
	}
	ch = channel ? to_chan(channel) : cm_chan_new(true);
	if (!ch)
		return -1;
	pthread_mutex_lock(&cm.lock);
	err = cm_dev_up();
	ci = err ? NULL : cm_id_alloc(ch, context, ps, qpt);
	pthread_mutex_unlock(&cm.lock);
	if (!ci) {
		if (!channel)
			chan_free(ch);
		return cm_set_errno(err ? -err : ENOMEM);
	}
	*id = &ci->id;
	return 0;
}

static void destroy_children(struct cm_id *lid)
{
	struct cm_id *c;

	while (!cm_link_empty(&lid->children)) {
		c = cm_link_entry(lid->children.next, struct cm_id, child_node);
		if (c->state == CM_SIDR_REQ_RCVD)
			cm_send_sidr_rep(c, CM_SIDR_REJECT, 0, NULL, 0);
		else
			cm_send_rej(c, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		/* its CONNECT_REQUEST waits on the listener's channel */
		unqueue_events(to_chan(lid->id.channel), c, NULL);
		cm_id_free(c);
	}
}

/*
 * What the peer of a connection that goes away is told, as the kernel's
 * rdma_cm tells it when an id is destroyed or its process exits: a DREQ
 * for an established connection, a REJ for one not yet made.  Returns
 * whether a MAD went out.  cm.lock held.
 */
static bool tell_peer_gone(struct cm_id *ci)
{
	uroce_assert_held(&cm.lock);
	switch (ci->state) {
	case CM_REQ_SENT:
		cm_send_rej(ci, CM_REJ_TIMEOUT, NULL, 0);
		return true;
	case CM_REQ_RCVD:
	case CM_REP_SENT:
	case CM_REP_RCVD:
		cm_send_rej(ci, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		return true;
	case CM_ESTABLISHED:
		cm_send_dreq(ci);
		return true;
	case CM_SIDR_REQ_RCVD:
		cm_send_sidr_rep(ci, CM_SIDR_REJECT, 0, NULL, 0);
		return true;
	default:
		return false;
	}
}

/* at exit, how long DREQs wait for their DREPs, and how often they are
 * sent again meanwhile */
#define EXIT_DREP_WAIT_NS (500 * 1000000ull)
#define EXIT_DREQ_EVERY	  10

/*
 * At exit, a DREQ still unanswered (the one just sent, or an orphan's,
 * above) dies with the process, and a lost one leaves the peer waiting
 * for ever: so the exit waits for the DREPs a little (the CM thread
 * receives them), and sends the unanswered DREQs again meanwhile every
 * 50 ms, rather than after the usual second.  A peer that is gone costs
 * the exit this wait once.  cm.lock held; let go while waiting.
 */
static void wait_dreps(void)
{
	uint64_t step = EXIT_DREP_WAIT_NS / EXIT_DREQ_EVERY;
	struct timespec ts = { 0, (long)step };
	struct cm_id *ci;
	int round;
	bool any;

	for (round = 0; round < EXIT_DREQ_EVERY; round++) {
		any = false;
		cm_for_each_id (ci)
			if (ci->state == CM_DREQ_SENT && ci->mad_pending) {
				any = true;
				/* (one waiting in the window goes out as
				 * answers come) */
				if (round && !ci->win_waiting) {
					cm.cnt.retrans++;
					cm_send_mad(&ci->peer_gid, ci->mad);
				}
			}
		if (!any)
			return;
		pthread_mutex_unlock(&cm.lock);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&cm.lock);
	}
}

/*
 * At exit (exit() or the return from main; this runs before our
 * libibverbs closes the device) every connection of the process is
 * ended as by rdma_destroy_id, as the kernel's rdma_cm ends them when
 * the process's ucma file closes: the peer learns at once, not seconds
 * later from its retries.  The MADs are sent before we return, with a
 * bound on the wait.  _exit and death by a signal skip this: the peer
 * then learns from its retries, or its CM's DREQ retries.
 */
static void __attribute__((destructor)) end_connections_at_exit(void)
{
	struct cm_id *ci;
	bool sent = false;

	if (!cm.dev_up || cm.pid != getpid())
		return;
	pthread_mutex_lock(&cm.lock);
	cm.exit_tid = gettid();
	cm_for_each_id (ci)
		if (ci->state != CM_LISTEN && tell_peer_gone(ci))
			sent = true;
	if (sent)
		cm_flush_sends(100 * 1000000ull);
	wait_dreps();
	pthread_mutex_unlock(&cm.lock);
}

/*
 * The last listener of this process on (ps, port) is gone: other
 * processes on the address may listen on the port now (the entry stays
 * ours until one does, rdma_listen below).  cm.lock held.
 */
static void unlisten_port(enum rdma_port_space ps, uint16_t port)
{
	struct cm_link *l;

	for (l = cm.listeners.next; l != &cm.listeners; l = l->next) {
		struct cm_id *o = cm_link_entry(l, struct cm_id, listen_node);

		if (o->state == CM_LISTEN && o->id.ps == ps && o->port == port)
			return;
	}
	uroce_dev_listen(cm.ctx, CM_SID_PREFIX | (uint64_t)ps << 16 | port, 0);
}

/* id's events still on its channel.  cm.lock held. */
static unsigned int queued_events(struct cm_id *ci)
{
	struct cm_event *e;
	unsigned int n = 0;

	for (e = ci->nqueued ? to_chan(ci->id.channel)->head : NULL; e;
	     e = e->next)
		if (e->owner == ci)
			n++;
	return n;
}

/* Whether the calling thread holds one of id's events.  cm.lock held. */
static bool holds_event(struct cm_id *ci)
{
	pid_t me = gettid();
	struct cm_link *l;

	for (l = ci->taken.next; l != &ci->taken; l = l->next)
		if (cm_link_entry(l, struct cm_event, taken_node)->taker == me)
			return true;
	return false;
}

CM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *ci = to_cid(id);
	enum rdma_port_space ps;
	uint16_t port;
	bool listened;

	if (!id)
		return cm_set_errno(EINVAL);
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&cm.lock);
	while (ci->nevents > queued_events(ci)) {
		/*
		 * Events of the id were handed out and not acknowledged.  As
		 * the kernel's librdmacm, wait for another thread's acks:
		 * DAPL's CM thread acks the event it is handling for the id
		 * its consumer thread destroys, and frees its own context
		 * once the destroy returns.  One the caller itself holds
		 * (or none we can wait for) would be waited for forever,
		 * where the kernel's library hangs: EBUSY.
		 */
		if (cm.exit_tid || holds_event(ci) || cm_link_empty(&ci->taken)) {
			pthread_mutex_unlock(&cm.lock);
			return cm_set_errno(EBUSY);
		}
		pthread_cond_wait(&cm.acked, &cm.lock);
	}
	listened = ci->state == CM_LISTEN;
	ps = id->ps;
	port = ci->port;
	if (listened)
		destroy_children(ci);
	else
		tell_peer_gone(ci);
	cm_mc_leave_all(ci);
	cm_unpin(ci);
	if (ci->state == CM_DREQ_SENT && ci->mad_pending)
		orphan(ci);
	else
		cm_id_free(ci);
	if (listened)
		unlisten_port(ps, port);
	/* held requests for a port nobody here uses any more are refused */
	cm_hold_update();
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

/* ---- connecting ---- */

static uint32_t random_psn(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint32_t)cm_now_ns();
	return v & 0xffffff;
}

CM_EXPORT int rdma_connect(struct rdma_cm_id *id,
			   struct rdma_conn_param *conn_param)
{
	bool is_sync;
	struct cm_id *ci = to_cid(id);
	uint8_t pdata[CM_USER_SIDR_PDATA];
	uint8_t len = 0;
	int err = 0;

	if (!id)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	if (ci->state != CM_ROUTE_RESOLVED) {
		err = EINVAL;
		goto out;
	}
	if (ci->ep_pdata_len) {
		memcpy(pdata, ci->ep_pdata, ci->ep_pdata_len);
		len = ci->ep_pdata_len;
	}
	if (conn_param && conn_param->private_data &&
	    conn_param->private_data_len) {
		if (len + conn_param->private_data_len > (int)sizeof(pdata)) {
			err = EINVAL;
			goto out;
		}
		memcpy(pdata + len, conn_param->private_data,
		       conn_param->private_data_len);
		len = (uint8_t)(len + conn_param->private_data_len);
	}
	err = -cm_ensure_gsi();
	if (err)
		goto out;
	ci->sid = CM_SID_PREFIX | (uint64_t)id->ps << 16 |
		  cm_get_port(&id->route.addr.dst_addr);
	if (id->qp_type == IBV_QPT_UD) {
		err = -cm_send_sidr_req(ci, pdata, len);
		goto out;
	}
	if (len > CM_USER_REQ_PDATA || (!id->qp && !conn_param)) {
		err = EINVAL;
		goto out;
	}
	ci->init_depth = conn_param && conn_param->initiator_depth !=
						 RDMA_MAX_INIT_DEPTH ?
				 conn_param->initiator_depth :
				 (uint8_t)cm.attr.max_qp_init_rd_atom;
	ci->resp_res = conn_param && conn_param->responder_resources !=
					       RDMA_MAX_RESP_RES ?
			       conn_param->responder_resources :
			       (uint8_t)cm.attr.max_qp_rd_atom;
	ci->retry_cnt = conn_param ? conn_param->retry_count & 7 : 7;
	ci->rnr_retry = conn_param ? conn_param->rnr_retry_count & 7 : 7;
	if (id->qp) {
		ci->srq = id->qp->srq != NULL;
	} else {
		ci->srq = conn_param->srq;
		ci->param_qpn = conn_param->qp_num;
	}
	ci->local_psn = random_psn();
	ci->mtu = (uint8_t)cm.mtu;
	err = -cm_send_req(ci, pdata, len);
	if (!err)
		ci->ep_pdata_len = 0;
out:
	is_sync = ci->sync;
	pthread_mutex_unlock(&cm.lock);
	if (err)
		return cm_set_errno(err);
	return sync_wait(ci, is_sync);
}

/* The attributes a QP needs for qp_attr->qp_state, as the kernel's
 * rdma_init_qp_attr gives them.  cm.lock held. */
static int qp_attr_for(struct cm_id *ci, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;
	enum ibv_qp_type type = ci->id.qp_type;
	bool ud = type == IBV_QPT_UD;
	/* which halves of RC the QP has (the kernel's cm_init_qp_*_attr):
	 * an XRC INI QP only sends, an XRC TGT QP only responds */
	bool requester = type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND;
	bool responder = type == IBV_QPT_RC || type == IBV_QPT_XRC_RECV;

	uroce_assert_held(&cm.lock);
	memset(a, 0, sizeof(*a));
	a->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (ud) {
			a->qkey = RDMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (type != IBV_QPT_UC)
				a->qp_access_flags |= IBV_ACCESS_REMOTE_READ |
						      IBV_ACCESS_REMOTE_ATOMIC;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		if (ud)
			return 0;
		if (ci->state < CM_REP_RCVD || ci->state == CM_LISTEN)
			return EINVAL;
		a->path_mtu = ci->mtu ? (enum ibv_mtu)ci->mtu : cm.mtu;
		a->dest_qp_num = ci->remote_qpn;
		/* each side receives from the Starting PSN of its own REQ/REP
		 * and sends from the peer's, as the kernel's IB CM does */
		a->rq_psn = ci->local_psn;
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = 1;
		a->ah_attr.grh.dgid = ci->peer_gid;
		a->ah_attr.grh.sgid_index = 0;
		a->ah_attr.grh.hop_limit = 64;
		a->ah_attr.grh.traffic_class = ci->tos;
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			 IBV_QP_RQ_PSN;
		if (responder) {
			a->max_dest_rd_atomic = ci->resp_res;
			a->min_rnr_timer = 12;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = ud ? 0 : ci->remote_psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (type == IBV_QPT_XRC_RECV) {
			a->timeout = ci->ack_timeout;
			*mask |= IBV_QP_TIMEOUT;
		}
		if (requester) {
			a->timeout = ci->ack_timeout;
			a->retry_cnt = ci->retry_cnt;
			a->rnr_retry = ci->peer_rnr_retry;
			a->max_rd_atomic = ci->init_depth;
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		return 0;
	default:
		return EINVAL;
	}
}

CM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
				struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	int err;

	if (!id || !qp_attr || !qp_attr_mask)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	err = qp_attr_for(to_cid(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&cm.lock);
	return err ? cm_set_errno(err) : 0;
}

/* RTR then RTS for a connected QP.  cm.lock held; 0 or a positive errno. */
int cm_qp_to_rtr_rts(struct cm_id *ci)
{
	struct ibv_qp_attr a;
	int mask, err;

	uroce_assert_held(&cm.lock);
	a.qp_state = IBV_QPS_RTR;
	err = qp_attr_for(ci, &a, &mask);
	if (!err)
		err = ibv_modify_qp(ci->id.qp, &a, mask);
	if (err)
		return err;
	a.qp_state = IBV_QPS_RTS;
	err = qp_attr_for(ci, &a, &mask);
	return err ? err : ibv_modify_qp(ci->id.qp, &a, mask);
}

void cm_qp_to_err(struct cm_id *ci)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (ci->id.qp)
		ibv_modify_qp(ci->id.qp, &a, IBV_QP_STATE);
}

CM_EXPORT int rdma_accept(struct rdma_cm_id *id,
			  struct rdma_conn_param *conn_param)
{
	bool is_sync;
	struct cm_id *ci = to_cid(id);
	const void *pd = conn_param ? conn_param->private_data : NULL;
	uint8_t len = conn_param && pd ? conn_param->private_data_len : 0;
	int err = 0;

	if (!id)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	if (ci->state == CM_SIDR_REQ_RCVD) {
		uint32_t qpn = id->qp	  ? id->qp->qp_num :
			       conn_param ? conn_param->qp_num :
					    0;

		err = len > CM_SIDR_REP_PDATA ?
			      EINVAL :
			      -cm_send_sidr_rep(ci, CM_SIDR_SUCCESS, qpn, pd,
						len);
		pthread_mutex_unlock(&cm.lock);
		if (err)
			return cm_set_errno(err);
		if (ci->sync && id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		return 0;
	}
	if (ci->state != CM_REQ_RCVD || ci->deferred ||
	    (!id->qp && !conn_param) || len > CM_REP_PDATA) {
		err = EINVAL;
		goto out;
	}
	if (conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH)
		ci->init_depth = conn_param->initiator_depth;
	else if (ci->init_depth > cm.attr.max_qp_init_rd_atom)
		ci->init_depth = (uint8_t)cm.attr.max_qp_init_rd_atom;
	if (conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES)
		ci->resp_res = conn_param->responder_resources;
	else if (ci->resp_res > cm.attr.max_qp_rd_atom)
		ci->resp_res = (uint8_t)cm.attr.max_qp_rd_atom;
	ci->rnr_retry = conn_param ? conn_param->rnr_retry_count & 7 : 7;
	if (id->qp) {
		ci->srq = id->qp->srq != NULL;
		ci->state = CM_REP_SENT; /* what qp_attr_for checks */
		err = cm_qp_to_rtr_rts(ci);
		ci->state = CM_REQ_RCVD;
		if (err)
			goto out;
	} else {
		ci->srq = conn_param->srq;
		ci->param_qpn = conn_param->qp_num;
	}
	err = -cm_send_rep(ci, pd, len);
out:
	is_sync = ci->sync;
	pthread_mutex_unlock(&cm.lock);
	if (err)
		return cm_set_errno(err);
	return sync_wait(ci, is_sync);
}

static int reject(struct rdma_cm_id *id, const void *pdata, uint8_t len,
		  uint16_t reason)
{
	struct cm_id *ci = to_cid(id);
	int err = 0;

	if (!id)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	if (ci->state == CM_SIDR_REQ_RCVD) {
		err = -cm_send_sidr_rep(ci, CM_SIDR_REJECT, 0, pdata,
					len > CM_SIDR_REP_PDATA ?
						CM_SIDR_REP_PDATA :
						len);
	} else if (ci->state == CM_REQ_RCVD || ci->state == CM_REP_RCVD) {
		err = -cm_send_rej(ci, reason, pdata,
				   len > CM_REJ_PDATA ? CM_REJ_PDATA : len);
		ci->state = CM_DISCONNECTED;
	} else {
		err = EINVAL;
	}
	pthread_mutex_unlock(&cm.lock);
	return err ? cm_set_errno(err) : 0;
}

CM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			  uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len,
		      CM_REJ_CONSUMER_DEFINED);
}

CM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
			      uint8_t private_data_len)
{
	/* IBTA: vendor option not supported */
	return reject(id, private_data, private_data_len, 35);
}

CM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *ci = to_cid(id);
	int err = 0;

	if (!id || id->qp)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	if (ci->state == CM_REP_RCVD) {
		err = -cm_send_rtu(ci);
		ci->state = CM_ESTABLISHED;
	} else {
		err = EINVAL;
	}
	pthread_mutex_unlock(&cm.lock);
	return err ? cm_set_errno(err) : 0;
}

CM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cm_id *ci = to_cid(id);

	if (!id)
		return cm_set_errno(EINVAL);
	if (event != IBV_EVENT_COMM_EST && event != IBV_EVENT_PATH_MIG &&
	    event != IBV_EVENT_LID_CHANGE)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	/* IBA 12.9.5: traffic on the QP before the RTU: connected */
	if (event == IBV_EVENT_COMM_EST && ci->state == CM_REP_SENT) {
		struct cm_event *e;

		cm_mad_done(ci);
		ci->state = CM_ESTABLISHED;
		e = cm_event_new(ci, RDMA_CM_EVENT_ESTABLISHED, 0);
		if (e)
			cm_event_queue(e);
	}
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

CM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	bool is_sync;
	struct cm_id *ci = to_cid(id);
	struct cm_event *e;
	bool wait = false;
	int err = 0;

	if (!id)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	switch (ci->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
		cm_qp_to_err(ci);
		cm_send_dreq(ci);
		wait = true;
		break;
	case CM_DREQ_SENT:
		wait = true;
		break;
	case CM_DISCONNECTED:
		cm_disc_release(ci);
		cm_qp_to_err(ci);
		for (e = ci->nqueued ? to_chan(id->channel)->head : NULL; e;
		     e = e->next)
			if (e->owner == ci &&
			    e->ev.event == RDMA_CM_EVENT_DISCONNECTED)
				wait = true;
		break;
	default:
		err = EINVAL;
	}
	is_sync = ci->sync;
	pthread_mutex_unlock(&cm.lock);
	if (err)
		return cm_set_errno(err);
	return wait ? sync_wait(ci, is_sync) : 0;
}

CM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
			      struct rdma_event_channel *channel)
{
	struct cm_id *ci = to_cid(id);
	struct cm_chan *old, *nc;

	if (!id || (ci->sync && !channel))
		return cm_set_errno(EINVAL);
	nc = channel ? to_chan(channel) : cm_chan_new(true);
	if (!nc)
		return -1;
	if (ci->sync && id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&cm.lock);
	old = to_chan(id->channel);
	id->channel = &nc->ch;
	nc->nids++;
	ci->sync = nc->sync;
	/* events not yet read follow the id */
	unqueue_events(old, ci, nc);
	old->nids--;
	if (old->sync && !old->nids)
		chan_free(old);
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

CM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
			      void *optval, size_t optlen)
{
	struct cm_id *ci = to_cid(id);
	int err = 0;

	if (!id || !optval)
		return cm_set_errno(EINVAL);
	if (level != RDMA_OPTION_ID)
		return cm_set_errno(ENOSYS);
	pthread_mutex_lock(&cm.lock);
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			err = EINVAL;
		else
			ci->tos = *(uint8_t *)optval;
		break;
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int) || ci->state != CM_IDLE)
			err = EINVAL;
		else
			ci->reuseaddr = *(int *)optval != 0;
		break;
	case RDMA_OPTION_ID_AFONLY:
		/* before the bind, as the kernel's rdma_set_afonly */
		if (optlen != sizeof(int) || ci->state != CM_IDLE) {
			err = EINVAL;
		} else {
			ci->afonly = *(int *)optval != 0;
			ci->afonly_set = true;
		}
		break;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t))
			err = EINVAL;
		else
			ci->ack_timeout = *(uint8_t *)optval & 31;
		break;
	default:
		err = ENOSYS;
	}
	pthread_mutex_unlock(&cm.lock);
	return err ? cm_set_errno(err) : 0;
}

CM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	struct sockaddr *sa = &id->route.addr.src_addr;

	return htons(cm_get_port(sa));
}

CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	struct sockaddr *sa = &id->route.addr.dst_addr;

	return htons(cm_get_port(sa));
}

/* ---- ECE: vendor 0 only ---- */

CM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece)
		return cm_set_errno(EINVAL);
	/* vendor 0: no enhanced connection establishment options */
	return ece->vendor_id ? cm_set_errno(EOPNOTSUPP) : 0;
}

CM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!id || !ece)
		return cm_set_errno(EINVAL);
	memset(ece, 0, sizeof(*ece));
	return 0;
}
