// SPDX-License-Identifier: MIT
/*
 * The IB CM state machine (IBA vol 1 ch. 12) as the kernel's rdma_cm uses
 * it: REQ/REP/RTU to connect, MRA to ask for time, REJ to refuse,
 * DREQ/DREP to disconnect, SIDR_REQ/SIDR_REP to resolve a UD service.
 * Each received message is routed by attribute to one handler, which
 * finds its id by comm ID and acts only in the states the spec allows;
 * anything else is dropped and counted.  Everything here runs with
 * cm.lock held.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "cm.h"
#include "uroce_private.h"

/* Our CM response timeout: 4.096 us * 2^18 = 1.07 s (IBA 12.7.39), and
 * how often we retry a request before giving up on the peer. */
#define CM_RESP_TIMEOUT 18
#define CM_MAX_RETRIES	8
#define CM_DREQ_RETRIES 3
/* MRA service timeout: 4.096 us * 2^19 = 2.1 s */
#define CM_MRA_TIMEOUT 19
/*
 * Time wait (IBA 12.9.7.4): 4.096 us * 2^14 = 67 ms, what the kernel's
 * IB CM waits for our path: its packet lifetime (13, cm_fill_path) + 1
 * on the active side, the REQ's local ACK timeout (ours: 14) on the
 * passive side.
 */
#define CM_TIMEWAIT 14

static const char *const state_names[CM_NSTATES] = {
	[CM_IDLE] = "IDLE",
	[CM_BOUND] = "BOUND",
	[CM_ADDR_RESOLVED] = "ADDR_RESOLVED",
	[CM_ROUTE_RESOLVED] = "ROUTE_RESOLVED",
	[CM_LISTEN] = "LISTEN",
	[CM_REQ_SENT] = "REQ_SENT",
	[CM_REP_RCVD] = "REP_RCVD",
	[CM_REQ_RCVD] = "REQ_RCVD",
	[CM_REP_SENT] = "REP_SENT",
	[CM_ESTABLISHED] = "ESTABLISHED",
	[CM_DREQ_SENT] = "DREQ_SENT",
	[CM_DISCONNECTED] = "DISCONNECTED",
	[CM_SIDR_REQ_SENT] = "SIDR_REQ_SENT",
	[CM_SIDR_REQ_RCVD] = "SIDR_REQ_RCVD",
	[CM_SIDR_DONE] = "SIDR_DONE",
};

const char *cm_state_name(enum cm_state s)
{
	return s < CM_NSTATES ? state_names[s] : "?";
}

static uint64_t exp_ns(uint8_t e)
{
	return 4096ull << (e > 31 ? 31 : e);
}

/*
 * Gives id a comm ID no other id here has, and none an id had recently:
 * a counter from a random start, so that an ID comes back only after
 * 2^24 others (the kernel's CM allocates cyclically too).  An answer to
 * an abandoned connect (a REP or REJ still on its way, or retransmitted
 * by a peer that has not yet heard of the abandon) then finds no id, not
 * a newer one that drew the same random number.
 */
static void new_comm_id(struct cm_id *id)
{
	static uint32_t next;
	uint32_t v;

	if (!next && getrandom(&next, sizeof(next), 0) != sizeof(next))
		next = (uint32_t)cm_now_ns();
	for (;;) {
		v = ++next & 0xffffff;
		if (!v)
			continue;
		/* on a shared address the top byte says which process is
		 * ours (net/share.c demultiplexes QP1 by it); alone, the top
		 * byte is random as before */
		if (cm.ctx && uroce_dev_id_prefix(cm.ctx))
			v |= uroce_dev_id_prefix(cm.ctx);
		else
			v |= (next >> 24 | 1) << 24;
		if (!cm_find_local(v))
			break;
	}
	cm_set_local_id(id, v);
}

static uint64_t new_tid(uint32_t local_id)
{
	static uint32_t seq;

	return cm.tid_hi | (uint64_t)(local_id ^ (++seq << 24));
}

/* Sends id's MAD (kept in id->mad) and arms its retransmission. */
void cm_mad_start(struct cm_id *id)
{
	uroce_assert_held(&cm.lock);
	/* a failed first send is retried like a lost one */
	(void)cm_send_mad(&id->peer_gid, id->mad);
	cm_timer_set(&cm.timers, &id->mad_timer, cm_now_ns(), id->timeout_ns);
	cm_timer_arm();
}

/* Sends id's MAD and keeps it for retransmission; a request (REQ, DREQ,
 * SIDR_REQ) waits its turn in the peer's window (window.c). */
static int send_armed(struct cm_id *id, uint8_t timeout_exp, int retries,
		      bool request)
{
	cm_window_leave(id);
	id->mad_pending = true;
	id->retries_left = retries;
	id->timeout_ns = exp_ns(timeout_exp);
	if (request && cm_window_wait(id))
		return 0;
	cm_mad_start(id);
	return 0;
}

void cm_id_drop_mad(struct cm_id *id)
{
	cm_mad_done(id);
}

static int send_once(const union ibv_gid *gid, struct cm_msg *m)
{
	uint8_t mad[CM_MAD_SIZE];

	cm_mad_build(mad, m);
	return cm_send_mad(gid, mad);
}

/* ---- the rdma_cm private-data header (kernel cma.c, struct cma_hdr) ---- */

static void put_ip(uint8_t *p, const struct sockaddr *sa)
{
	memset(p, 0, 16);
	if (sa->sa_family == AF_INET)
		memcpy(p + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6)
		memcpy(p, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

static size_t make_cma_hdr(struct cm_id *id, uint8_t *hdr, const void *pdata,
			   uint8_t len, size_t room)
{
	struct rdma_addr *a = &id->id.route.addr;

	memset(hdr, 0, room);
	hdr[0] = 0;
	hdr[1] = a->src_addr.sa_family == AF_INET6 ? 6 << 4 : 4 << 4;
	hdr[2] = (uint8_t)(id->port >> 8);
	hdr[3] = (uint8_t)id->port;
	put_ip(hdr + 4, &a->src_addr);
	put_ip(hdr + 20, &a->dst_addr);
	if (pdata && len)
		memcpy(hdr + CMA_HDR_SIZE, pdata,
		       len < room - CMA_HDR_SIZE ? len : room - CMA_HDR_SIZE);
	return room;
}

/* Reads the header: 0 and the two addresses, or -1 if it is not one. */
static int parse_cma_hdr(const uint8_t *hdr, struct sockaddr_storage *src,
			 struct sockaddr_storage *dst)
{
	uint16_t port = (uint16_t)(hdr[2] << 8 | hdr[3]);
	union ibv_gid g;

	if (hdr[0] != 0)
		return -1;
	memset(src, 0, sizeof(*src));
	memset(dst, 0, sizeof(*dst));
	switch (hdr[1] >> 4) {
	case 4: {
		struct sockaddr_in *s = (struct sockaddr_in *)src;
		struct sockaddr_in *d = (struct sockaddr_in *)dst;

		s->sin_family = d->sin_family = AF_INET;
		memcpy(&s->sin_addr, hdr + 16, 4);
		memcpy(&d->sin_addr, hdr + 32, 4);
		s->sin_port = htons(port);
		return 0;
	}
	case 6:
		memcpy(g.raw, hdr + 4, 16);
		cm_sa_from_gid(&g, port, src);
		memcpy(g.raw, hdr + 20, 16);
		cm_sa_from_gid(&g, 0, dst);
		return 0;
	}
	return -1;
}

/* ---- sending ---- */

int cm_send_req(struct cm_id *id, const void *pdata, uint8_t len)
{
	uint8_t hdr[CM_REQ_PDATA];
	struct cm_msg m = {
		.attr = CM_ATTR_REQ,
		.sid = id->sid,
		.ca_guid = cm.guid,
		.qpn = id->id.qp ? id->id.qp->qp_num : id->param_qpn,
		.resp_res = id->resp_res,
		.init_depth = id->init_depth,
		.remote_resp_to = CM_RESP_TIMEOUT,
		.local_resp_to = CM_RESP_TIMEOUT,
		.qp_type = id->id.qp_type == IBV_QPT_UC ? 1 : 0,
		.flow_ctrl = 1,
		.psn = id->local_psn,
		.retry_cnt = id->retry_cnt,
		.rnr_retry = id->rnr_retry,
		.max_cm_retries = CM_MAX_RETRIES,
		.srq = id->srq,
		.mtu = id->mtu,
		.tclass = id->tos,
		.hop_limit = 64,
		.ack_timeout = id->ack_timeout,
		.pdata = hdr,
		.pdata_len = CM_REQ_PDATA,
	};

	uroce_assert_held(&cm.lock);
	if (id->id.qp_type == IBV_QPT_XRC_SEND) {
		/* IBA 12.6.5 / the kernel's cm_format_req: transport 3,
		 * extended transport 1, and no responder side to describe */
		m.qp_type = 3;
		m.ext_transport = 1;
		m.resp_res = 0;
		m.retry_cnt = 0;
		m.rnr_retry = 0;
		m.srq = 0;
	}
	new_comm_id(id);
	id->tid = new_tid(id->local_id);
	m.local_id = id->local_id;
	m.tid = id->tid;
	m.sgid = cm.gid;
	m.dgid = id->peer_gid;
	make_cma_hdr(id, hdr, pdata, len, sizeof(hdr));
	cm_mad_build(id->mad, &m);
	id->state = CM_REQ_SENT;
	return send_armed(id, CM_RESP_TIMEOUT, CM_MAX_RETRIES, true);
}

int cm_send_rep(struct cm_id *id, const void *pdata, uint8_t len)
{
	struct cm_msg m = {
		.attr = CM_ATTR_REP,
		.tid = id->tid,
		.local_id = id->local_id,
		.remote_id = id->remote_id,
		.qpn = id->id.qp ? id->id.qp->qp_num : id->param_qpn,
		.psn = id->local_psn,
		.resp_res = id->resp_res,
		.init_depth = id->init_depth,
		.target_ack_delay = cm.attr.local_ca_ack_delay,
		.flow_ctrl = 1,
		.rnr_retry = id->rnr_retry,
		.srq = id->srq,
		.ca_guid = cm.guid,
		.pdata = pdata,
		.pdata_len = len,
	};

	uroce_assert_held(&cm.lock);
	if (id->id.qp_type == IBV_QPT_XRC_RECV) {
		/* an XRC TGT QP goes in the EECN field, with SRQ set and no
		 * initiator side (the kernel's cm_format_rep) */
		m.eecn = m.qpn;
		m.qpn = 0;
		m.srq = 1;
		m.init_depth = 0;
		m.flow_ctrl = 0;
	}
	cm_mad_build(id->mad, &m);
	id->state = CM_REP_SENT;
	return send_armed(id, id->peer_resp_to, id->peer_max_retries, false);
}

int cm_send_rtu(struct cm_id *id)
{
	struct cm_msg m = {
		.attr = CM_ATTR_RTU,
		.tid = id->tid,
		.local_id = id->local_id,
		.remote_id = id->remote_id,
	};

	uroce_assert_held(&cm.lock);
	return send_once(&id->peer_gid, &m);
}

int cm_send_rej(struct cm_id *id, uint16_t reason, const void *pdata,
		uint8_t len)
{
	struct cm_msg m = {
		.attr = CM_ATTR_REJ,
		.tid = id->tid,
		.local_id = id->local_id,
		.remote_id = id->remote_id,
		.msg_rejected = id->state == CM_REP_RCVD ? CM_REJ_MSG_REP :
				id->state == CM_REQ_RCVD ? CM_REJ_MSG_REQ :
							   CM_REJ_MSG_OTHER,
		.reason = reason,
		.pdata = pdata,
		.pdata_len = len,
	};

	uroce_assert_held(&cm.lock);
	cm_mad_done(id);
	return send_once(&id->peer_gid, &m);
}

int cm_send_dreq(struct cm_id *id)
{
	struct cm_msg m = {
		.attr = CM_ATTR_DREQ,
		.local_id = id->local_id,
		.remote_id = id->remote_id,
		.qpn = id->remote_qpn,
	};

	uroce_assert_held(&cm.lock);
	/* the connection's last ACKs before it (uroce_private.h) */
	uroce_dev_send_acks(cm.ctx);
	id->tid = new_tid(id->local_id);
	m.tid = id->tid;
	cm_mad_build(id->mad, &m);
	id->state = CM_DREQ_SENT;
	return send_armed(id, CM_RESP_TIMEOUT, CM_DREQ_RETRIES, true);
}

int cm_send_sidr_req(struct cm_id *id, const void *pdata, uint8_t len)
{
	uint8_t hdr[CM_SIDR_REQ_PDATA];
	struct cm_msg m = {
		.attr = CM_ATTR_SIDR_REQ,
		.sid = id->sid,
		.pdata = hdr,
		.pdata_len = CM_SIDR_REQ_PDATA,
	};

	uroce_assert_held(&cm.lock);
	new_comm_id(id);
	id->tid = new_tid(id->local_id);
	m.local_id = id->local_id;
	m.tid = id->tid;
	make_cma_hdr(id, hdr, pdata, len, sizeof(hdr));
	cm_mad_build(id->mad, &m);
	id->state = CM_SIDR_REQ_SENT;
	return send_armed(id, CM_RESP_TIMEOUT, CM_MAX_RETRIES, true);
}

int cm_send_sidr_rep(struct cm_id *id, uint16_t status, uint32_t qpn,
		     const void *pdata, uint8_t len)
{
	struct cm_msg m = {
		.attr = CM_ATTR_SIDR_REP,
		.tid = id->tid,
		.local_id = id->remote_id,
		.reason = status,
		.qpn = qpn,
		.sid = id->sid,
		.qkey = RDMA_UDP_QKEY,
		.pdata = pdata,
		.pdata_len = len,
	};

	uroce_assert_held(&cm.lock);
	/* kept (not armed) so that a repeated SIDR_REQ gets it again */
	cm_mad_build(id->mad, &m);
	cm_mad_done(id);
	id->state = CM_SIDR_DONE;
	return cm_send_mad(&id->peer_gid, id->mad);
}

/* ---- events ---- */

/* What a REQ or REP says of the connection, seen from the receiver: the
 * peer's depth is our resources. */
static void peer_conn_param(struct rdma_conn_param *c, const struct cm_msg *m,
			    uint32_t qpn)
{
	c->responder_resources = m->init_depth;
	c->initiator_depth = m->resp_res;
	c->flow_control = m->flow_ctrl;
	c->retry_count = m->retry_cnt;
	c->rnr_retry_count = m->rnr_retry;
	c->srq = m->srq;
	c->qp_num = qpn;
}

static void conn_event(struct cm_id *id, enum rdma_cm_event_type type,
		       int status, const struct cm_msg *m)
{
	struct cm_event *e = cm_event_new(id, type, status);
	struct rdma_conn_param *c;

	if (!e)
		return;
	c = &e->ev.param.conn;
	if (m && m->pdata_len) {
		memcpy(e->pdata, m->pdata, m->pdata_len);
		c->private_data = e->pdata;
		c->private_data_len = m->pdata_len;
	}
	if (m && (m->attr == CM_ATTR_REP || m->attr == CM_ATTR_REQ))
		/* an XRC TGT QP answers in the REP's EECN field */
		peer_conn_param(c, m,
				m->attr == CM_ATTR_REP &&
						id->id.qp_type ==
							IBV_QPT_XRC_SEND ?
					m->eecn :
					m->qpn);
	cm_event_queue(e);
}

static void ud_fill_ah(struct cm_id *id, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = 1;
	ah->grh.dgid = id->peer_gid;
	ah->grh.sgid_index = 0;
	ah->grh.hop_limit = 64;
	ah->grh.traffic_class = id->tos;
}

/*
 * A connection that reported DISCONNECTED enters time wait and reports
 * TIMEWAIT_EXIT when it ends, as the kernel's rdma_cm does: then its QP
 * may be used again.  Programs free a connection's resources on it
 * (tgt's iSER driver does, and nothing else).
 */
static void disconnected(struct cm_id *id, const struct cm_msg *m)
{
	conn_event(id, RDMA_CM_EVENT_DISCONNECTED, 0, m);
	cm_timer_set(&cm.timers, &id->tw_timer, cm_now_ns(),
		     exp_ns(CM_TIMEWAIT));
	cm_timer_arm();
}

/*
 * The peer's DREQ follows the last packets it sent on the connection
 * (its ACKs among them; the drain in handle_dreq completes their work
 * first).  On a NIC those completions reach the CQ when the packets
 * arrive, a wire's time before the DREQ and the peer's own teardown
 * apart; here one receive burst can take both at once, after the
 * application was descheduled.  A program that reads its CQ and its
 * event channel from two threads (libfabric's rxm) then closes the
 * connection, and so drops the completions (a QP's destroy takes them
 * out of the CQ, as mlx5 does), before its polling thread saw the
 * completion it waits for.  So DISCONNECTED waits while a completion of
 * the QP is still in its CQs, looking every CM_DISC_CHECK_NS, for at
 * most cm.disc_hold_ns (UROCE_CM_DISC_HOLD_MS; 0: no holding), and no
 * longer than until another event is queued on its channel: events keep
 * the order their causes came in (a peer that disconnects, then connects
 * again, gives DISCONNECTED before the new CONNECT_REQUEST;
 * cm_disc_before).
 */
#define CM_DISC_CHECK_NS 200000ull

static void disconnected_after_polls(struct cm_id *id, const struct cm_msg *m)
{
	uint64_t now;

	if (!cm.disc_hold_ns || !m->qpn ||
	    !uroce_dev_qp_unpolled(cm.ctx, m->qpn)) {
		disconnected(id, m);
		return;
	}
	now = cm_now_ns();
	cm.cnt.disc_held++;
	id->disc_qpn = m->qpn;
	id->disc_due_ns = now + cm.disc_hold_ns;
	cm_link_add_tail(&cm.disc_held, &id->disc_node);
	cm_timer_set(&cm.timers, &id->disc_timer, now, CM_DISC_CHECK_NS);
	cm_timer_arm();
}

/* the timer's look at a held DISCONNECTED; cm.lock held */
static void disc_look(struct cm_id *id, uint64_t now)
{
	uroce_assert_held(&cm.lock);
	if (now < id->disc_due_ns &&
	    uroce_dev_qp_unpolled(cm.ctx, id->disc_qpn)) {
		cm_timer_set(&cm.timers, &id->disc_timer, now, CM_DISC_CHECK_NS);
		cm_timer_arm();
		return;
	}
	cm_link_del(&id->disc_node);
	disconnected(id, NULL);
}

/* the application disconnects itself: a held DISCONNECTED goes now */
void cm_disc_release(struct cm_id *id)
{
	uroce_assert_held(&cm.lock);
	if (!id->disc_timer.deadline_ns)
		return;
	cm_timer_cancel(&id->disc_timer);
	cm_link_del(&id->disc_node);
	disconnected(id, NULL);
}

/* an event is about to be queued on ch: the DISCONNECTEDs held for it
 * go first (cm_event_queue); cm.lock held */
void cm_disc_before(struct cm_chan *ch)
{
	struct cm_link *n;

	uroce_assert_held(&cm.lock);
again:
	/* (a release queues an event, which releases the channel's others:
	 * the walk starts over after each) */
	for (n = cm.disc_held.next; n != &cm.disc_held; n = n->next) {
		struct cm_id *id = cm_link_entry(n, struct cm_id, disc_node);

		if (to_chan(id->id.channel) == ch) {
			cm_disc_release(id);
			goto again;
		}
	}
}

/* ---- receiving ---- */

static struct cm_id *find_local(uint32_t local_id)
{
	return cm_find_local(local_id);
}

static bool sa_is_any(const struct sockaddr *sa)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
			       &any6, sizeof(any6));
	return true;
}

static bool same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	union ibv_gid ga, gb;

	cm_gid_from_sa(a, &ga);
	cm_gid_from_sa(b, &gb);
	return !memcmp(ga.raw, gb.raw, 16);
}

/*
 * Whether id's bound address takes a request for dst, as the kernel's
 * cma_match_private_data: a specific address only its own; a wildcard
 * that is not AFONLY both families (an AF_INET6 one IPv4 requests too);
 * an AFONLY wildcard only its own family.
 */
static bool addr_takes(const struct cm_id *id, const struct sockaddr *dst)
{
	const struct sockaddr *a = &id->id.route.addr.src_addr;

	if (!sa_is_any(a))
		return same_ip(a, dst);
	return !id->afonly || a->sa_family == dst->sa_family;
}

static struct cm_id *find_listener(uint16_t ps, uint16_t port,
				   const struct sockaddr *dst)
{
	struct cm_link *l;

	for (l = cm.listeners.next; l != &cm.listeners; l = l->next) {
		struct cm_id *id = cm_link_entry(l, struct cm_id, listen_node);

		if (id->state == CM_LISTEN && id->id.ps == ps &&
		    id->port == port && addr_takes(id, dst))
			return id;
	}
	return NULL;
}

static void reject_req(const struct cm_msg *m, const union ibv_gid *peer,
		       uint16_t reason)
{
	struct cm_msg r = {
		.attr = CM_ATTR_REJ,
		.tid = m->tid,
		.remote_id = m->local_id,
		.msg_rejected = CM_REJ_MSG_REQ,
		.reason = reason,
	};

	send_once(peer, &r);
}

static void sidr_status(const struct cm_msg *m, const union ibv_gid *peer,
			uint16_t status)
{
	struct cm_msg r = {
		.attr = CM_ATTR_SIDR_REP,
		.tid = m->tid,
		.local_id = m->local_id,
		.reason = status,
		.sid = m->sid,
	};

	send_once(peer, &r);
}

/* A REQ or SIDR_REQ we have already seen from this peer. */
static struct cm_id *find_dup(const struct cm_msg *m, const union ibv_gid *peer)
{
	struct cm_id *id = cm_find_passive(m->local_id, peer, m->tid);

	return id && id->state >= CM_REQ_RCVD ? id : NULL;
}

static void send_mra(struct cm_id *id)
{
	struct cm_msg m = {
		.attr = CM_ATTR_MRA,
		.tid = id->tid,
		.local_id = id->local_id,
		.remote_id = id->remote_id,
		.msg_mraed = 0,
		.service_to = CM_MRA_TIMEOUT,
	};

	send_once(&id->peer_gid, &m);
}

/* A request not taken: REJ with rej_reason, or SIDR_REP with sidr_st. */
static void refuse_req(const struct cm_msg *m, const union ibv_gid *peer,
		       uint16_t rej_reason, uint16_t sidr_st)
{
	if (m->attr == CM_ATTR_SIDR_REQ)
		sidr_status(m, peer, sidr_st);
	else
		reject_req(m, peer, rej_reason);
}

/* No such service: REJ reason 8, or SIDR_REP "not supported". */
static void refuse(const struct cm_msg *m, const union ibv_gid *peer)
{
	refuse_req(m, peer, CM_REJ_INVALID_SERVICE_ID, CM_SIDR_UNSUPPORTED);
}

/* ---- early requests (docs/rdmacm.md, "Early requests") ---- */

/* Whether an id of this process uses (ps, port) at dst: bound to it, or
 * a connection accepted on it; a listen on it may be about to come. */
static bool port_in_use(uint16_t ps, uint16_t port, const struct sockaddr *dst)
{
	struct cm_id *id;
	int passive;

	for (passive = 0; passive < 2; passive++)
		for (id = cm_port_first(passive, ps, port); id;
		     id = cm_port_next(id))
			if (id->bound && id->id.ps == ps && id->port == port &&
			    addr_takes(id, dst))
				return true;
	return false;
}

static struct cm_held *find_held(const struct cm_msg *m,
				 const union ibv_gid *peer)
{
	int i;

	for (i = 0; i < CM_HOLD_MAX; i++) {
		struct cm_held *h = &cm.held[i];

		if (h->used && h->m.attr == m->attr &&
		    h->m.local_id == m->local_id && h->m.tid == m->tid &&
		    !memcmp(h->peer.raw, peer->raw, 16))
			return h;
	}
	return NULL;
}

/*
 * Keeps a REQ that no listener takes, if its port is in use here, for up
 * to cm.hold_ns: servers that bind (perftest -R's second listen, qperf)
 * or hand out their port before rdma_listen are raced by a client on
 * the same host.  false if it is not held; the caller then refuses it
 * at once, as the kernel's CM does.
 */
static bool hold_req(const struct cm_msg *m, const union ibv_gid *peer,
		     const struct sockaddr_storage *dst, uint16_t ps,
		     uint16_t port)
{
	struct cm_held *h = NULL;
	int i;

	if (!cm.hold_ns || !port_in_use(ps, port, (const struct sockaddr *)dst))
		return false;
	for (i = 0; i < CM_HOLD_MAX && !h; i++)
		if (!cm.held[i].used)
			h = &cm.held[i];
	if (!h)
		return false;
	h->used = true;
	h->m = *m;
	h->m.pdata_len = m->pdata_len < sizeof(h->pdata) ?
				 m->pdata_len :
				 (uint8_t)sizeof(h->pdata);
	memcpy(h->pdata, m->pdata, h->m.pdata_len);
	h->m.pdata = h->pdata;
	h->peer = *peer;
	h->dst = *dst;
	h->deadline_ns = cm_now_ns() + cm.hold_ns;
	cm.cnt.held++;
	cm_timer_arm();
	cm_notify("hold", port);
	return true;
}

/* A repeat of a REQ or SIDR_REQ we have, or hold: answered from what we
 * have (our answer was lost, or the application is still deciding). */
static bool answer_repeat(const struct cm_msg *m, const union ibv_gid *peer)
{
	struct cm_id *dup = find_dup(m, peer);

	if (dup) {
		if (dup->state == CM_REQ_RCVD)
			send_mra(dup);
		else if (dup->state == CM_REP_SENT || dup->state == CM_SIDR_DONE)
			cm_send_mad(&dup->peer_gid, dup->mad);
		return true;
	}
	if (find_held(m, peer)) {
		cm.cnt.drop_state++; /* a repeat; the first one waits */
		return true;
	}
	/* a late copy of a REQ whose connection is gone (table.c) */
	if (m->attr == CM_ATTR_REQ && cm_tomb_find(m->local_id, peer)) {
		cm.cnt.drop_state++;
		return true;
	}
	return false;
}

/* The listener a request is for, from its service ID and rdma_cm header;
 * NULL when there is none (the request is then held, refused or
 * dropped here).  src/dst: the addresses the header carries. */
static struct cm_id *req_listener(const struct cm_msg *m,
				  const union ibv_gid *peer,
				  struct sockaddr_storage *src,
				  struct sockaddr_storage *dst)
{
	uint16_t ps = (uint16_t)(m->sid >> 16), port = (uint16_t)m->sid;
	struct cm_id *lid;

	if ((m->sid & ~0xffffffULL) != CM_SID_PREFIX) {
		cm.cnt.drop_nolistener++;
		refuse(m, peer);
		return NULL;
	}
	if (parse_cma_hdr(m->pdata, src, dst)) {
		cm.cnt.drop_malformed++;
		return NULL;
	}
	lid = find_listener(ps, port, (struct sockaddr *)dst);
	if (!lid && !hold_req(m, peer, dst, ps, port)) {
		cm.cnt.drop_nolistener++;
		refuse(m, peer);
	}
	return lid;
}

/* The QP type a request asks for in *type; false when the listener's
 * port space cannot take it: the port space decides the transport (kernel
 * cma_check_req_qp_type); an XRC REQ needs an XRC listener, and only XRC
 * REQs reach one. */
static bool req_qp_type(const struct cm_msg *m, const struct cm_id *lid,
			enum ibv_qp_type *type)
{
	bool sidr = m->attr == CM_ATTR_SIDR_REQ;
	bool xrc = !sidr && m->qp_type == 3 && m->ext_transport == 1;
	uint16_t ps = (uint16_t)(m->sid >> 16);

	if ((sidr && ps == RDMA_PS_TCP) || (!sidr && ps == RDMA_PS_UDP) ||
	    (!sidr && m->qp_type > 1 && !xrc) ||
	    (!sidr && xrc != (lid->id.qp_type == IBV_QPT_XRC_RECV)))
		return false;
	*type = sidr		? IBV_QPT_UD :
		xrc		? IBV_QPT_XRC_RECV :
		m->qp_type == 1 ? IBV_QPT_UC :
				  IBV_QPT_RC;
	return true;
}

/* The passive id's addresses: the rdma_cm header's, our port, the GIDs. */
static void passive_addr(struct cm_id *id, const union ibv_gid *peer,
			 const struct sockaddr_storage *src,
			 const struct sockaddr_storage *dst, uint16_t port)
{
	struct rdma_addr *a = &id->id.route.addr;

	memcpy(&a->dst_storage, src, sizeof(*src));
	memcpy(&a->src_storage, dst, sizeof(*dst));
	if (dst->ss_family == AF_INET)
		((struct sockaddr_in *)&a->src_storage)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&a->src_storage)->sin6_port = htons(port);
	a->addr.ibaddr.sgid = cm.gid;
	a->addr.ibaddr.dgid = *peer;
	a->addr.ibaddr.pkey = htobe16(0xffff);
}

/* What a connection REQ tells the passive side (IBA 12.7.2 table 106):
 * the peer's QP, PSN and limits, ours mirrored from them. */
static void passive_conn(struct cm_id *id, const struct cm_msg *m)
{
	uint32_t psn;

	id->remote_qpn = m->qpn;
	id->remote_psn = m->psn;
	if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
		psn = (uint32_t)cm_now_ns();
	id->local_psn = psn & 0xffffff;
	id->resp_res = m->init_depth;
	id->init_depth = m->resp_res;
	id->retry_cnt = m->retry_cnt;
	id->peer_rnr_retry = m->rnr_retry;
	id->rnr_retry = 7;
	id->mtu = m->mtu && m->mtu < cm.mtu ? m->mtu : (uint8_t)cm.mtu;
	id->tos = m->tclass;
	id->ack_timeout = m->ack_timeout ? m->ack_timeout : 14;
	id->peer_resp_to = m->local_resp_to;
	id->peer_max_retries = m->max_cm_retries;
	id->srq = m->srq;
}

/* The new id a request makes on the listener's channel (a synchronous
 * listener's children get a private one); NULL: no resources. */
static struct cm_id *passive_id(struct cm_id *lid, const struct cm_msg *m,
				const union ibv_gid *peer, enum ibv_qp_type type,
				const struct sockaddr_storage *src,
				const struct sockaddr_storage *dst)
{
	bool sidr = m->attr == CM_ATTR_SIDR_REQ;
	struct cm_chan *ch;
	struct cm_id *id;

	ch = lid->sync ? cm_chan_new(true) : to_chan(lid->id.channel);
	id = ch ? cm_id_alloc(ch, lid->id.context, lid->id.ps, type) : NULL;
	if (!id)
		return NULL;
	id->sync = lid->sync;
	id->listener = lid;
	cm_link_add_tail(&lid->children, &id->child_node);
	id->state = sidr ? CM_SIDR_REQ_RCVD : CM_REQ_RCVD;
	id->remote_id = m->local_id;
	new_comm_id(id);
	id->tid = m->tid;
	id->sid = m->sid;
	id->peer_gid = *peer;
	id->port = (uint16_t)m->sid;
	id->bound = true;
	cm_index_port(id, true);
	cm_index_passive(id);
	id->id.verbs = cm.app_ctx;
	id->id.port_num = 1;
	passive_addr(id, peer, src, dst, id->port);
	if (!sidr)
		passive_conn(id, m);
	cm_fill_path(id);
	return id;
}

/* CONNECT_REQUEST for the listener, with the application's private data
 * (after the rdma_cm header) and the request's parameters. */
static struct cm_event *req_event(struct cm_id *id, struct cm_id *lid,
				  const struct cm_msg *m)
{
	uint8_t len = (uint8_t)(m->pdata_len - CMA_HDR_SIZE);
	struct cm_event *e;

	e = cm_event_new(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e)
		return NULL;
	e->ev.listen_id = &lid->id;
	e->chan = to_chan(lid->id.channel);
	memcpy(e->pdata, m->pdata + CMA_HDR_SIZE, len);
	if (m->attr == CM_ATTR_SIDR_REQ) {
		struct rdma_ud_param *u = &e->ev.param.ud;

		u->private_data = e->pdata;
		u->private_data_len = len;
		ud_fill_ah(id, &u->ah_attr);
		u->qkey = RDMA_UDP_QKEY;
	} else {
		struct rdma_conn_param *c = &e->ev.param.conn;

		c->private_data = e->pdata;
		c->private_data_len = len;
		peer_conn_param(c, m, m->qpn);
	}
	return e;
}

/* Beyond the backlog, requests wait (answering repeats with MRA) until
 * the application has read earlier ones. */
static void deliver_req(struct cm_id *id, struct cm_id *lid, struct cm_event *e)
{
	if (lid->queued_reqs >= (unsigned int)lid->backlog) {
		id->deferred = true;
		cm_link_add_tail(&lid->deferred_q, &id->deferred_node);
		e->next = NULL;
		id->deferred_ev = e;
		return;
	}
	lid->queued_reqs++;
	cm_event_queue(e);
}

/* IBA 12.6.5 / 12.9.6: a REQ (or SIDR_REQ) for a listening service makes a
 * new id, reported as CONNECT_REQUEST on the listener's channel. */
static void handle_req(const struct cm_msg *m, const union ibv_gid *peer)
{
	struct sockaddr_storage src, dst;
	enum ibv_qp_type type;
	struct cm_id *lid, *id;
	struct cm_event *e;

	if (answer_repeat(m, peer))
		return;
	lid = req_listener(m, peer, &src, &dst);
	if (!lid)
		return;
	if (!req_qp_type(m, lid, &type)) {
		refuse_req(m, peer, CM_REJ_INVALID_TRANSPORT,
			   CM_SIDR_UNSUPPORTED);
		return;
	}
	id = passive_id(lid, m, peer, type, &src, &dst);
	if (!id) {
		refuse_req(m, peer, 3 /* no resources */, CM_SIDR_REJECT);
		return;
	}
	e = req_event(id, lid, m);
	if (!e) {
		cm_id_free(id);
		return;
	}
	deliver_req(id, lid, e);
}

/*
 * Held requests: those a listener now takes go to it as if they had just
 * come; those whose time is up (now != 0) or whose port nobody here uses
 * any more are refused.  cm.lock held.
 */
static void hold_sweep(uint64_t now)
{
	int i;

	uroce_assert_held(&cm.lock);
	for (i = 0; i < CM_HOLD_MAX; i++) {
		struct cm_held *h = &cm.held[i];
		uint8_t pdata[sizeof(h->pdata)];
		uint16_t ps = (uint16_t)(h->m.sid >> 16);
		uint16_t port = (uint16_t)h->m.sid;
		const struct sockaddr *dst = (struct sockaddr *)&h->dst;
		union ibv_gid peer;
		struct cm_msg m;

		if (!h->used)
			continue;
		m = h->m;
		peer = h->peer;
		memcpy(pdata, h->pdata, sizeof(pdata));
		m.pdata = pdata;
		if (find_listener(ps, port, dst)) {
			h->used = false;
			handle_req(&m, &peer);
		} else if ((now && h->deadline_ns <= now) ||
			   !port_in_use(ps, port, dst)) {
			h->used = false;
			cm.cnt.held_rejected++;
			cm.cnt.drop_nolistener++;
			refuse(&m, &peer);
			cm_notify("reject", port);
		}
	}
}

void cm_hold_update(void)
{
	uroce_assert_held(&cm.lock);
	hold_sweep(0);
}

void cm_release_deferred(struct cm_id *lid)
{
	struct cm_id *id;

	uroce_assert_held(&cm.lock);
	while (lid->queued_reqs < (unsigned int)lid->backlog &&
	       !cm_link_empty(&lid->deferred_q)) {
		id = cm_link_entry(lid->deferred_q.next, struct cm_id,
				   deferred_node);
		cm_link_del(&id->deferred_node);
		id->deferred = false;
		lid->queued_reqs++;
		cm_event_queue(id->deferred_ev);
		id->deferred_ev = NULL;
	}
}

static void handle_mra(const struct cm_msg *m)
{
	struct cm_id *id = find_local(m->remote_id);

	if (!id || !id->mad_pending ||
	    !((id->state == CM_REQ_SENT && m->msg_mraed == 0) ||
	      (id->state == CM_REP_SENT && m->msg_mraed == 1))) {
		cm.cnt.drop_state++;
		return;
	}
	/* IBA 12.6.6: the peer needs service_to more before it answers */
	cm_timer_set(&cm.timers, &id->mad_timer, cm_now_ns(),
		     exp_ns(m->service_to) + id->timeout_ns);
	cm_timer_arm();
}

static void handle_rej(const struct cm_msg *m)
{
	struct cm_id *id = find_local(m->remote_id);

	if (!id ||
	    (id->state != CM_REQ_SENT && id->state != CM_REP_SENT &&
	     id->state != CM_REP_RCVD) ||
	    (id->state == CM_REQ_SENT && m->tid != id->tid)) {
		cm.cnt.drop_state++;
		return;
	}
	cm_mad_done(id);
	id->state = CM_DISCONNECTED;
	cm_qp_to_err(id);
	conn_event(id, RDMA_CM_EVENT_REJECTED, m->reason, m);
}

static void handle_rep(const struct cm_msg *m)
{
	struct cm_id *id = find_local(m->remote_id);

	if (!id) {
		cm.cnt.drop_state++;
		return;
	}
	if (id->state == CM_ESTABLISHED && id->remote_id == m->local_id) {
		/* our RTU was lost: the REP comes again (IBA 12.9.5) */
		cm_send_rtu(id);
		return;
	}
	/* the REP answers our REQ's transaction (the kernel's CM echoes it
	 * too): one for an earlier REQ is stale, whatever its comm ID */
	if (id->state != CM_REQ_SENT || m->tid != id->tid) {
		cm.cnt.drop_state++;
		return;
	}
	cm_mad_done(id);
	id->remote_id = m->local_id;
	/* an XRC TGT QP answers in the EECN field */
	id->remote_qpn = id->id.qp_type == IBV_QPT_XRC_SEND ? m->eecn : m->qpn;
	id->remote_psn = m->psn;
	id->resp_res = m->init_depth;
	id->init_depth = m->resp_res;
	id->peer_rnr_retry = m->rnr_retry;
	id->tid = m->tid;
	id->state = CM_REP_RCVD;
	if (!id->id.qp) {
		conn_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m);
		return;
	}
	if (cm_qp_to_rtr_rts(id)) {
		cm_send_rej(id, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		id->state = CM_DISCONNECTED;
		id->connect_error = true;
		conn_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, m);
		return;
	}
	cm_send_rtu(id);
	id->state = CM_ESTABLISHED;
	conn_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m);
}

static void handle_rtu(const struct cm_msg *m)
{
	struct cm_id *id = find_local(m->remote_id);

	if (!id || id->state != CM_REP_SENT || id->remote_id != m->local_id) {
		cm.cnt.drop_state++;
		return;
	}
	cm_mad_done(id);
	id->state = CM_ESTABLISHED;
	conn_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, m);
}

static void handle_dreq(const struct cm_msg *m, const union ibv_gid *peer)
{
	struct cm_id *id = find_local(m->remote_id);
	struct cm_msg r = {
		.attr = CM_ATTR_DREP,
		.tid = m->tid,
		.local_id = m->remote_id,
		.remote_id = m->local_id,
	};

	if (!id || id->remote_id != m->local_id) {
		/* IBA 12.9.8.4: a DREQ for no connection still gets a DREP */
		cm.cnt.drop_state++;
		send_once(peer, &r);
		return;
	}
	switch (id->state) {
	case CM_ESTABLISHED:
	case CM_REP_SENT:
	case CM_DREQ_SENT:
		/* what the peer sent before its DREQ first (its last ACKs,
		 * on the connection's ring: uroce_private.h) */
		uroce_dev_rx_drain(cm.ctx);
		send_once(&id->peer_gid, &r);
		cm_mad_done(id);
		id->state = CM_DISCONNECTED;
		if (!cm_orphan_done(id))
			disconnected_after_polls(id, m);
		break;
	case CM_DISCONNECTED:
		send_once(&id->peer_gid, &r);
		break;
	default:
		cm.cnt.drop_state++;
	}
}

static void handle_drep(const struct cm_msg *m)
{
	struct cm_id *id = find_local(m->remote_id);

	if (!id || id->state != CM_DREQ_SENT) {
		cm.cnt.drop_state++;
		return;
	}
	cm_mad_done(id);
	id->state = CM_DISCONNECTED;
	if (!cm_orphan_done(id))
		disconnected(id, m);
}

static void handle_sidr_rep(const struct cm_msg *m)
{
	struct cm_id *id = find_local(m->local_id);
	struct cm_event *e;

	if (!id || id->state != CM_SIDR_REQ_SENT) {
		cm.cnt.drop_state++;
		return;
	}
	cm_mad_done(id);
	id->state = CM_SIDR_DONE;
	e = cm_event_new(id,
			 m->reason == CM_SIDR_SUCCESS ?
				 RDMA_CM_EVENT_ESTABLISHED :
				 RDMA_CM_EVENT_UNREACHABLE,
			 m->reason);
	if (!e)
		return;
	memcpy(e->pdata, m->pdata, m->pdata_len);
	e->ev.param.ud.private_data = e->pdata;
	e->ev.param.ud.private_data_len = m->pdata_len;
	if (m->reason == CM_SIDR_SUCCESS) {
		ud_fill_ah(id, &e->ev.param.ud.ah_attr);
		e->ev.param.ud.qp_num = m->qpn;
		e->ev.param.ud.qkey = m->qkey;
		id->remote_qpn = m->qpn;
		id->remote_qkey = m->qkey;
	}
	cm_event_queue(e);
}

/* The sender's GID: from the IPv4 header in the last 20 bytes of the GRH
 * area, or the IPv6 header filling it (RoCE v2, IBA A17.4.5.1). */
static int peer_of(const uint8_t *grh, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if ((grh[20] >> 4) == 4) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], grh + 20 + 12, 4);
		return 0;
	}
	if ((grh[0] >> 4) == 6) {
		memcpy(gid->raw, grh + 8, 16);
		return 0;
	}
	return -1;
}

void cm_handle_mad(const uint8_t *grh, const uint8_t *mad, size_t len)
{
	union ibv_gid peer;
	struct cm_msg m;

	uroce_assert_held(&cm.lock);
	if (cm_mad_parse(mad, len, &m) || peer_of(grh, &peer)) {
		cm.cnt.drop_malformed++;
		return;
	}
	switch (m.attr) {
	case CM_ATTR_REQ:
	case CM_ATTR_SIDR_REQ:
		handle_req(&m, &peer);
		break;
	case CM_ATTR_MRA:
		handle_mra(&m);
		break;
	case CM_ATTR_REJ:
		handle_rej(&m);
		break;
	case CM_ATTR_REP:
		handle_rep(&m);
		break;
	case CM_ATTR_RTU:
		handle_rtu(&m);
		break;
	case CM_ATTR_DREQ:
		handle_dreq(&m, &peer);
		break;
	case CM_ATTR_DREP:
		handle_drep(&m);
		break;
	case CM_ATTR_SIDR_REP:
		handle_sidr_rep(&m);
		break;
	}
}

/* The end of a time wait (IBA 12.9.7.4): the QP may be used again. */
static void timewait_exit(struct cm_id *id)
{
	struct cm_event *e = cm_event_new(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);

	if (e)
		cm_event_queue(e);
}

/* id's MAD got no answer in time: sent again, or, out of retries, its
 * handshake ends with the event the kernel's rdma_cm gives. */
static void mad_timeout(struct cm_id *id, uint64_t now)
{
	if (!id->mad_pending)
		return;
	if (id->retries_left > 0) {
		id->retries_left--;
		cm.cnt.retrans++;
		cm_send_mad(&id->peer_gid, id->mad);
		cm_timer_set(&cm.timers, &id->mad_timer, now, id->timeout_ns);
		return;
	}
	cm_mad_done(id);
	cm.cnt.timeouts++;
	switch (id->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_SIDR_REQ_SENT:
		if (id->state != CM_REP_SENT)
			cm_say_no_device(&id->peer_gid);
		id->state = CM_DISCONNECTED;
		conn_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
		break;
	case CM_DREQ_SENT:
		id->state = CM_DISCONNECTED;
		if (!cm_orphan_done(id))
			disconnected(id, NULL);
		break;
	default:
		break;
	}
}

/* Fires the timers that are due.  (A timer's handler may free ids, and
 * with them their timers: the queues are read afresh each time.) */
void cm_handle_timeouts(uint64_t now)
{
	struct cm_timer *t;

	uroce_assert_held(&cm.lock);
	while ((t = cm_timer_first(&cm.timers)) && t->deadline_ns <= now) {
		cm_timer_cancel(t);
		if (t->kind == CM_TIMER_TIMEWAIT)
			timewait_exit(container_of(t, struct cm_id, tw_timer));
		else if (t->kind == CM_TIMER_DISC)
			disc_look(container_of(t, struct cm_id, disc_timer),
				  now);
		else
			mad_timeout(container_of(t, struct cm_id, mad_timer),
				    now);
	}
	hold_sweep(now);
}
