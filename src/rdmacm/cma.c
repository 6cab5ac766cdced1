// SPDX-License-Identifier: MIT
/*
 * The rdma_cm API (rdma/rdma_cma.h): event channels, ids, addresses,
 * connection set-up and tear-down, and the synchronous mode that
 * rdma_create_ep / rdma_get_request users rely on.  Semantics follow
 * rdma-core's librdmacm over the kernel's rdma_cm; the protocol itself is
 * in proto.c.
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
#include <unistd.h>

#include "cm.h"
#include "uroce_private.h"

#define CM_DEFAULT_BACKLOG 1024
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

/* Keeps the fd readable exactly while events wait.  cm.lock held. */
static void chan_ready(struct cm_chan *ch)
{
	struct pollfd p = { .fd = ch->ch.fd, .events = POLLIN };
	uint64_t v = 1;

	uroce_assert_held(&cm.lock);
	if (ch->head) {
		if (write(ch->ch.fd, &v, sizeof(v)) < 0)
			return;
	} else if (poll(&p, 1, 0) == 1) {
		if (read(ch->ch.fd, &v, sizeof(v)) < 0)
			return;
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
	struct cm_event *e = calloc(1, sizeof(*e));

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

CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				struct rdma_cm_event **event)
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
		if (ch->dead) {
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
		flags = fcntl(channel->fd, F_GETFL);
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

CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;

	if (!event)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	e->owner->nevents--;
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
	id->retry_cnt = 7;
	id->rnr_retry = 7;
	id->ack_timeout = 14;
	id->mtu = (uint8_t)cm.mtu;
	ch->nids++;
	cm_id_link(id);
	return id;
}

void cm_id_free(struct cm_id *id)
{
	struct cm_chan *ch = to_chan(id->id.channel);

	cm_id_unlink(id);
	if (id->nqueued)
		unqueue_events(ch, id, NULL);
	if (id->deferred_ev) {
		free(id->deferred_ev);
		id->deferred_ev = NULL;
	}
	ch->nids--;
	if (ch->sync && !ch->nids)
		chan_free(ch);
	free(id->ep_qp_attr);
	free(id);
	cm_timer_arm();
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

static void unpin(struct cm_id *ci);

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
	cm_for_each_id (ci)
		if (ci->state != CM_LISTEN && tell_peer_gone(ci))
			sent = true;
	if (sent)
		cm_flush_sends(100 * 1000000ull);
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

CM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *ci = to_cid(id);
	struct cm_event *e;
	unsigned int queued = 0;
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
	for (e = ci->nqueued ? to_chan(id->channel)->head : NULL; e; e = e->next)
		if (e->owner == ci)
			queued++;
	if (ci->nevents > queued) {
		/* the kernel's librdmacm would wait here for the acks forever */
		pthread_mutex_unlock(&cm.lock);
		return cm_set_errno(EBUSY);
	}
	listened = ci->state == CM_LISTEN;
	ps = id->ps;
	port = ci->port;
	if (listened)
		destroy_children(ci);
	else
		tell_peer_gone(ci);
	cm_mc_leave_all(ci);
	unpin(ci);
	cm_id_free(ci);
	if (listened)
		unlisten_port(ps, port);
	/* held requests for a port nobody here uses any more are refused */
	cm_hold_update();
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

/* ---- addresses ---- */

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
}

static uint16_t get_port(const struct sockaddr *sa)
{
	return ntohs(sa->sa_family == AF_INET6 ?
			     ((const struct sockaddr_in6 *)sa)->sin6_port :
			     ((const struct sockaddr_in *)sa)->sin_port);
}

static void set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)sa)->sin_port = htons(port);
}

static bool is_any(const struct sockaddr *sa)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == 0;
	return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &any6,
		       sizeof(any6));
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >>
			24) == 127;
	return IN6_IS_ADDR_LOOPBACK(
		&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

static bool same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	union ibv_gid ga, gb;

	cm_gid_from_sa(a, &ga);
	cm_gid_from_sa(b, &gb);
	return !memcmp(ga.raw, gb.raw, 16);
}

/* An IPv4-mapped IPv6 address becomes the IPv4 address it carries. */
static void normalize(const struct sockaddr *in, struct sockaddr_storage *out)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)in;

	memset(out, 0, sizeof(*out));
	if (in->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)out;

		s4->sin_family = AF_INET;
		s4->sin_port = s6->sin6_port;
		memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
		return;
	}
	memcpy(out, in, sa_len(in));
}

static bool addr_env_pinned(void)
{
	return uroce_config()->addr || uroce_config()->ifname;
}

/* Moves the device to addr (rdma_bind_addr to a specific address, or
 * source address selection).  QP1 is remade around the move.
 * cm.lock held; returns 0 or a positive errno. */
static int move_dev(const struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	bool had_gsi = cm.gsi != NULL;
	int err;

	uroce_assert_held(&cm.lock);
	normalize(addr, &ss);
	set_port((struct sockaddr *)&ss, 0);
	cm_gsi_stop();
	err = uroce_dev_set_addr(cm.ctx, (struct sockaddr *)&ss);
	if (had_gsi || !err) {
		int e2 = cm_gsi_start();

		if (!err && !had_gsi) {
			/* keep QP1 down until needed; only the address moved */
			cm_gsi_stop();
		} else if (e2 && !err) {
			err = -e2;
		}
	}
	uroce_dev_get_addr(cm.ctx, &cm.addr);
	cm_gid_from_sa((struct sockaddr *)&cm.addr, &cm.gid);
	return err;
}

/*
 * Ids bound to one port in both families, as the kernel's cma_check_port
 * allows: when both are AFONLY (tgtd listens on 0.0.0.0 and, AFONLY, on
 * [::] with the same port).
 */
static bool apart_by_family(const struct cm_id *a, sa_family_t family,
			    const struct cm_id *b)
{
	return a && a->afonly && b->afonly &&
	       family != b->id.route.addr.src_addr.sa_family;
}

/* Whether (ps, port) is taken for ci about to bind an address of family
 * (ci NULL: taken for anyone). */
static bool port_taken(const struct cm_id *ci, sa_family_t family,
		       enum rdma_port_space ps, uint16_t port, bool reuse)
{
	struct cm_id *id;

	/* passive ids never hold their listener's port for a bind */
	for (id = cm_port_first(false, (uint16_t)ps, port); id;
	     id = cm_port_next(id))
		if (id != ci && id->bound && !id->listener && id->id.ps == ps &&
		    !apart_by_family(ci, family, id) && id->port == port &&
		    id->state != CM_REQ_RCVD && id->state != CM_REP_SENT &&
		    id->state != CM_ESTABLISHED && id->state != CM_DREQ_SENT &&
		    id->state != CM_DISCONNECTED &&
		    (!reuse || !id->reuseaddr || id->state == CM_LISTEN))
			return true;
	return false;
}

#define EPHEMERAL_FIRST 32768
#define EPHEMERAL_N	28232
#define SHARE_AFTER	64

/*
 * A free ephemeral port, from a cursor that moves on, or 0.  shared:
 * the id only connects out (rdma_resolve_addr bound it), and its port
 * is then only a name in the rdma_cm header, never a service ID we
 * listen on: after SHARE_AFTER taken ports in a row it takes one anyway,
 * so that more connections than ephemeral ports (cmtime -c 100000) cost
 * the same as the first (docs/scale.md).
 */
uint16_t cm_alloc_port(enum rdma_port_space ps, bool shared)
{
	uint16_t p = 0;
	int i;

	if (!cm.next_port && getrandom(&cm.next_port, sizeof(cm.next_port),
				       0) != sizeof(cm.next_port))
		cm.next_port = (uint16_t)cm_now_ns();
	for (i = 0; i < EPHEMERAL_N; i++) {
		p = (uint16_t)(EPHEMERAL_FIRST + cm.next_port++ % EPHEMERAL_N);
		if (!port_taken(NULL, AF_UNSPEC, ps, p, false)) {
			cm.ports_full = false;
			return p;
		}
		/* once all were taken, one look each until one is free */
		if (shared && (cm.ports_full || i + 1 >= SHARE_AFTER)) {
			cm.ports_full = true;
			return p;
		}
	}
	return 0;
}

/*
 * A loopback address while the device has another one, given by
 * UROCE_ADDR/UROCE_IFNAME: no RDMA device has it, and the kernel's
 * rdma_cm then binds the id without a device (id->verbs NULL) instead of
 * failing.  libfabric's verbs provider binds "localhost" to learn where a
 * server given no address listens and, finding no device there, takes the
 * device's interface address; moving our device to 127.0.0.1 instead made
 * that the address every rxm endpoint announced, which a peer on another
 * host cannot reach (fi_pingpong between two namespaces hung).
 */
static bool bind_without_device(const struct sockaddr *addr)
{
	return addr_env_pinned() && is_loopback(addr) &&
	       !is_loopback((const struct sockaddr *)&cm.addr);
}

/*
 * net.ipv6.bindv6only of our network namespace: whether an AF_INET6 id
 * is AFONLY when the application does not say (the kernel's rdma_cm
 * takes the same default).
 */
static bool bindv6only(void)
{
	char c = '0';
	int fd = open("/proc/sys/net/ipv6/bindv6only", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = '0';
		close(fd);
	}
	return c == '1';
}

/* cm.lock held; returns 0 or a positive errno. */
static int bind_locked(struct cm_id *ci, const struct sockaddr *addr,
		       bool implicit)
{
	struct rdma_addr *ra = &ci->id.route.addr;
	struct sockaddr_storage ss;
	uint16_t port;
	bool devless;
	int err;

	uroce_assert_held(&cm.lock);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return EAFNOSUPPORT;
	if (ci->bound || ci->state != CM_IDLE)
		return EINVAL;
	err = cm_dev_up();
	if (err)
		return -err;
	if (!ci->afonly_set)
		ci->afonly = addr->sa_family == AF_INET || bindv6only();
	normalize(addr, &ss);
	devless = bind_without_device((struct sockaddr *)&ss);
	if (!devless && !is_any((struct sockaddr *)&ss) &&
	    !same_ip((struct sockaddr *)&ss, (struct sockaddr *)&cm.addr)) {
		struct sockaddr_storage before = cm.addr;

		err = move_dev((struct sockaddr *)&ss);
		if (err)
			return err == EINVAL ? EADDRNOTAVAIL : err;
		if (!cm.npins++)
			cm.home = before;
		ci->pinned = true;
	}
	port = get_port(addr);
	if (!port)
		port = cm_alloc_port(ci->id.ps, implicit);
	else if (port_taken(ci, addr->sa_family, ci->id.ps, port, ci->reuseaddr))
		return EADDRINUSE;
	if (!port)
		return EADDRINUSE;
	memset(&ra->src_storage, 0, sizeof(ra->src_storage));
	memcpy(&ra->src_storage, addr, sa_len(addr));
	set_port(&ra->src_addr, port);
	ra->addr.ibaddr.sgid = cm.gid;
	ra->addr.ibaddr.pkey = htobe16(0xffff);
	ci->port = port;
	ci->bound = true;
	cm_index_port(ci, false);
	ci->state = CM_BOUND;
	ci->id.verbs = devless ? NULL : cm.app_ctx;
	ci->id.port_num = devless ? 0 : 1;
	return 0;
}

/*
 * The last id whose bind moved the device is gone: the address is no
 * longer chosen, and the device goes back where it was unless QPs now
 * use the new address (uroce_dev_set_addr refuses then).  libfabric's
 * verbs provider binds an id to each local address in turn to learn which
 * device has it, then destroys the id; without this the device stayed on
 * the last of them (an IPv6 link-local address) and could not reach an
 * IPv4 peer.  cm.lock held.
 */
static void unpin(struct cm_id *ci)
{
	uroce_assert_held(&cm.lock);
	if (!ci->pinned)
		return;
	ci->pinned = false;
	if (--cm.npins)
		return;
	if (!same_ip((struct sockaddr *)&cm.home, (struct sockaddr *)&cm.addr))
		move_dev((struct sockaddr *)&cm.home);
}

CM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	int err;

	if (!id || !addr)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	err = bind_locked(to_cid(id), addr, false);
	pthread_mutex_unlock(&cm.lock);
	return err ? cm_set_errno(err) : 0;
}

/* Which local address the kernel's routing would send to dst from. */
static int route_source(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	struct sockaddr_storage d;
	socklen_t len = sizeof(*src);
	int fd, err = 0;

	normalize(dst, &d);
	set_port((struct sockaddr *)&d, 4791);
	fd = uroce_socket(d.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	if (connect(fd, (struct sockaddr *)&d, sa_len((struct sockaddr *)&d)) ||
	    getsockname(fd, (struct sockaddr *)src, &len))
		err = errno;
	close(fd);
	return err;
}

/* Whether addr is one of this host's addresses. */
static bool is_local(const struct sockaddr *addr)
{
	struct sockaddr_storage a;
	int fd;
	bool ok;

	normalize(addr, &a);
	set_port((struct sockaddr *)&a, 0);
	fd = uroce_socket(a.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ok = !bind(fd, (struct sockaddr *)&a, sa_len((struct sockaddr *)&a));
	close(fd);
	return ok;
}

/*
 * Source address selection: the device keeps its address when that can
 * reach dst (same family; a loopback address reaches only this host);
 * otherwise, unless the address was chosen (bind, UROCE_ADDR), it moves
 * to the address the routing table picks for dst.  Returns 0 or a
 * positive errno.  cm.lock held.
 */
static int select_source(const struct sockaddr *dst)
{
	const struct sockaddr *cur = (struct sockaddr *)&cm.addr;
	struct sockaddr_storage src;
	int err;

	uroce_assert_held(&cm.lock);
	if (cur->sa_family == dst->sa_family &&
	    (!is_loopback(cur) || is_loopback(dst) || is_local(dst)))
		return 0;
	err = route_source(dst, &src);
	if (err)
		return err;
	if (cm.npins || addr_env_pinned())
		return cur->sa_family == dst->sa_family ? 0 : EAFNOSUPPORT;
	return move_dev((struct sockaddr *)&src);
}

CM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	bool is_sync;
	struct cm_id *ci = to_cid(id);
	struct rdma_addr *ra;
	struct sockaddr_storage dst;
	struct cm_event *e;
	int err;

	if (!id || !dst_addr ||
	    (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6))
		return cm_set_errno(EINVAL);
	ra = &id->route.addr;
	pthread_mutex_lock(&cm.lock);
	if (!ci->bound) {
		struct sockaddr_storage any;

		if (src_addr) {
			memcpy(&any, src_addr, sa_len(src_addr));
		} else {
			memset(&any, 0, sizeof(any));
			any.ss_family = dst_addr->sa_family;
		}
		err = bind_locked(ci, (struct sockaddr *)&any, true);
		if (err)
			goto out;
	}
	if (ci->state != CM_BOUND && ci->state != CM_ADDR_RESOLVED) {
		err = EINVAL;
		goto out;
	}
	normalize(dst_addr, &dst);
	if (is_any((struct sockaddr *)&dst)) {
		/* the wildcard reaches this host: our own device */
		memcpy(&dst, &cm.addr, sizeof(dst));
		set_port((struct sockaddr *)&dst, get_port(dst_addr));
	}
	err = select_source((struct sockaddr *)&dst);
	e = cm_event_new(ci,
			 err ? RDMA_CM_EVENT_ADDR_ERROR :
			       RDMA_CM_EVENT_ADDR_RESOLVED,
			 err ? -err : 0);
	if (!e) {
		err = ENOMEM;
		goto out;
	}
	if (!err) {
		uint16_t port = ci->port;

		memset(&ra->dst_storage, 0, sizeof(ra->dst_storage));
		memcpy(&ra->dst_storage, dst_addr, sa_len(dst_addr));
		if (is_any(dst_addr))
			memcpy(&ra->dst_storage, &dst, sizeof(dst));
		if (is_any(&ra->src_addr) ||
		    ra->src_addr.sa_family != cm.addr.ss_family) {
			memcpy(&ra->src_storage, &cm.addr, sizeof(cm.addr));
			set_port(&ra->src_addr, port);
		}
		ra->addr.ibaddr.sgid = cm.gid;
		cm_gid_from_sa((struct sockaddr *)&dst, &ra->addr.ibaddr.dgid);
		ci->peer_gid = ra->addr.ibaddr.dgid;
		ci->state = CM_ADDR_RESOLVED;
	}
	cm_event_queue(e);
	err = 0;
out:
	is_sync = ci->sync;
	pthread_mutex_unlock(&cm.lock);
	(void)timeout_ms;
	if (err)
		return cm_set_errno(err);
	return sync_wait(ci, is_sync);
}

void cm_fill_path(struct cm_id *ci)
{
	struct ibv_sa_path_rec *p = &ci->path;

	memset(p, 0, sizeof(*p));
	p->dgid = ci->peer_gid;
	p->sgid = cm.gid;
	p->dlid = htobe16(0xffff);
	p->slid = htobe16(0xffff);
	p->raw_traffic = 0;
	p->flow_label = 0;
	p->hop_limit = 64;
	p->traffic_class = ci->tos;
	p->reversible = htobe32(1);
	p->numb_path = 1;
	p->pkey = htobe16(0xffff);
	p->sl = 0;
	p->mtu_selector = 2;
	p->mtu = (uint8_t)cm.mtu;
	p->rate_selector = 2;
	p->rate = 2;
	p->packet_life_time_selector = 2;
	p->packet_life_time = 13;
	ci->id.route.path_rec = p;
	ci->id.route.num_paths = 1;
}

CM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	bool is_sync;
	struct cm_id *ci = to_cid(id);
	struct cm_event *e;
	int err;

	if (!id)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	if (ci->state != CM_ADDR_RESOLVED && ci->state != CM_ROUTE_RESOLVED) {
		pthread_mutex_unlock(&cm.lock);
		return cm_set_errno(EINVAL);
	}
	err = cm_ensure_gsi();
	e = cm_event_new(ci,
			 err ? RDMA_CM_EVENT_ROUTE_ERROR :
			       RDMA_CM_EVENT_ROUTE_RESOLVED,
			 err);
	if (!e) {
		pthread_mutex_unlock(&cm.lock);
		return cm_set_errno(ENOMEM);
	}
	if (!err) {
		ci->mtu = (uint8_t)cm.mtu;
		cm_fill_path(ci);
		ci->state = CM_ROUTE_RESOLVED;
	}
	cm_event_queue(e);
	is_sync = ci->sync;
	pthread_mutex_unlock(&cm.lock);
	(void)timeout_ms;
	return sync_wait(ci, is_sync);
}

/*
 * UROCE_CM_LISTEN_FILE=<path>: append "listen <port>" there once a
 * listener is up, so that a test runner can start the client without
 * guessing when the server got that far; "hold <port>" when a REQ waits
 * for a listener and "reject <port>" when a held one is refused (tests
 * synchronise on these).
 */
void cm_notify(const char *what, uint16_t port)
{
	const char *path = uroce_config()->cm_listen_file;
	char line[48];
	int fd, n;

	if (!path || !*path)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%s %u\n", what, port);
	if (write(fd, line, (size_t)n) < 0)
		n = 0;
	close(fd);
}

CM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *ci = to_cid(id);
	int err = 0;

	if (!id)
		return cm_set_errno(EINVAL);
	pthread_mutex_lock(&cm.lock);
	if (!ci->bound) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		err = bind_locked(ci, (struct sockaddr *)&any, false);
	}
	if (!err && ci->state != CM_BOUND && ci->state != CM_LISTEN)
		err = EINVAL;
	if (!err)
		err = -cm_ensure_gsi();
	/* other processes on the address: REQs for this port come here,
	 * for as long as this process lives (not only while this id does:
	 * a REQ that comes between two listens, or for a connection
	 * accepted on the port, must reach this process, whose CM holds or
	 * rejects it as before, docs/rdmacm.md "Early requests") */
	if (!err && ci->state != CM_LISTEN)
		err = uroce_dev_listen(cm.ctx,
				       CM_SID_PREFIX | (uint64_t)id->ps << 16 |
					       ci->port,
				       1);
	if (!err) {
		ci->backlog = backlog > 0 && backlog < CM_DEFAULT_BACKLOG ?
				      backlog :
				      CM_DEFAULT_BACKLOG;
		if (ci->state != CM_LISTEN)
			cm_link_add_tail(&cm.listeners, &ci->listen_node);
		ci->state = CM_LISTEN;
		/* requests that came before us (docs/rdmacm.md) */
		cm_hold_update();
	}
	pthread_mutex_unlock(&cm.lock);
	if (err)
		return cm_set_errno(err);
	cm_notify("listen", ci->port);
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
		  get_port(&id->route.addr.dst_addr);
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

	return htons(get_port(sa));
}

CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	struct sockaddr *sa = &id->route.addr.dst_addr;

	return htons(get_port(sa));
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
