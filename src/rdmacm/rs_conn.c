// SPDX-License-Identifier: MIT
/*
 * rsocket setup and teardown: the rdma_cm id and event channel behind each
 * rsocket, connect and accept with rdma-core's connect private data, the
 * QP, CQ and the registered rings, and the CM events that move a socket
 * through its life (docs/rsocket.md).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "rs.h"

#define RS_DEF_QSIZE  384
#define RS_DEF_INLINE 64
#define RS_DEF_MEM    (1 << 20)
#define RS_QP_MIN     16
#define RS_QP_MAX     0xfffe
#define RS_RESOLVE_MS 2000

static int set_fd_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl) ? -errno : 0;
}

struct rsocket *rs_alloc(int domain)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->domain = domain;
	rs->fd = -1;
	pthread_mutex_init(&rs->lock, NULL);
	pthread_cond_init(&rs->cond, NULL);
	rs->sbuf_size = RS_DEF_MEM;
	rs->rbuf_size = RS_DEF_MEM;
	rs->sq_size = RS_DEF_QSIZE;
	rs->rq_size = RS_DEF_QSIZE;
	rs->sq_inline = RS_DEF_INLINE;
	rs->ctrl_max_seqno = RS_CTRL_MAX;
	/* CM events are always read without blocking: waits are poll()s */
	rs->ch = rdma_create_event_channel();
	if (!rs->ch)
		goto err;
	if (set_fd_nonblock(rs->ch->fd, true))
		goto err;
	rs->fd = rs->ch->fd;
	return rs;
err:
	rs_free(rs);
	return NULL;
}

static void drain_cm(struct rsocket *rs)
{
	struct rdma_cm_event *ev;

	while (rs->ch && !cm_try_event(rs->ch, &ev)) {
		/* a request nobody will accept any more */
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *id = ev->id;

			rdma_reject(id, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(id);
			continue;
		}
		rdma_ack_cm_event(ev);
	}
}

void rs_free(struct rsocket *rs)
{
	/* out of the table, no other thread has rs: the lock only keeps the
	 * rule of rs_data.c and rs_iomap.c (core/lock.h: then cm.lock) */
	pthread_mutex_lock(&rs->lock);
	/* the peers' address handles go before the PD */
	rs_ds_free(rs);
	if (rs->id) {
		if (rs->id->qp) {
			if (rs->state & (RS_CONNECTED | RS_DISCONNECTED))
				rdma_disconnect(rs->id);
			rdma_destroy_qp(rs->id);
		}
		drain_cm(rs);
		rdma_destroy_id(rs->id);
	}
	if (rs->cq) {
		rs_drain_cq_events(rs);
		if (rs->unacked)
			ibv_ack_cq_events(rs->cq, rs->unacked);
		ibv_destroy_cq(rs->cq);
	}
	if (rs->cc)
		ibv_destroy_comp_channel(rs->cc);
	rs_iomap_free(rs);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->target_mr)
		ibv_dereg_mr(rs->target_mr);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	if (rs->ch) {
		drain_cm(rs);
		rdma_destroy_event_channel(rs->ch);
	}
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->target_sgl);
	free(rs->iomap);
	free(rs->rmsg);
	pthread_mutex_unlock(&rs->lock);
	free(rs->sig);
	pthread_cond_destroy(&rs->cond);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

int rs_set_nonblock(struct rsocket *rs, bool on)
{
	rs->nonblock = on;
	return 0;
}

static uint16_t clamp_qsize(uint32_t want, uint32_t max)
{
	if (max > RS_QP_MAX)
		max = RS_QP_MAX;
	if (want > max)
		want = max;
	if (want < RS_QP_MIN)
		want = RS_QP_MIN;
	return (uint16_t)want;
}

/*
 * Page-aligned; zeroed only if asked.  The send and receive rings are
 * not: every byte is written before it is read (ours by rsend, the peer's
 * by its writes, and only what the peer announced is read; the receive
 * ring is remotely writable, not readable), and zeroing 2 MiB of fresh
 * pages was most of a connection's set-up on each side: 512 page faults,
 * 10 of the 12 ms an rconnect took on one host (docs/rsocket.md).
 */
static void *ring_alloc(size_t len, bool zero)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len))
		return NULL;
	if (zero)
		memset(p, 0, len);
	return p;
}

/*
 * The PD, the completion channel (non-blocking: waits are poll()s) and
 * one CQ for sends and receives, on the rsocket's id's device; shared by
 * stream and datagram rsockets.  0 or -errno.
 */
int rs_make_cq(struct rsocket *rs)
{
	struct ibv_context *ctx = rs->id->verbs;
	int err;

	rs->pd = ibv_alloc_pd(ctx);
	if (!rs->pd)
		return -ENOMEM;
	rs->cc = ibv_create_comp_channel(ctx);
	if (!rs->cc)
		return -errno;
	err = set_fd_nonblock(rs->cc->fd, true);
	if (err)
		return err;
	rs->cq = ibv_create_cq(ctx, rs->sq_size + rs->rq_size, rs, rs->cc, 0);
	if (!rs->cq)
		return -(errno ? errno : ENOMEM);
	return 0;
}

/* the QP, its CQ and the three registered areas; receives posted */
static int create_ep(struct rsocket *rs)
{
	struct ibv_context *ctx = rs->id->verbs;
	struct ibv_qp_init_attr qa;
	struct ibv_device_attr da;
	size_t tlen;
	int err;

	if (!ctx)
		return -ENODEV;
	if (!ibv_query_device(ctx, &da)) {
		rs->sq_size = clamp_qsize(rs->sq_size, (uint32_t)da.max_qp_wr);
		rs->rq_size = clamp_qsize(rs->rq_size, (uint32_t)da.max_qp_wr);
	}
	err = rs_make_cq(rs);
	if (err)
		return err;

	memset(&qa, 0, sizeof(qa));
	qa.qp_context = rs;
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 0; /* rs_data.c: data signalled in batches */
	qa.cap.max_send_wr = rs->sq_size;
	qa.cap.max_recv_wr = rs->rq_size;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(rs->id, rs->pd, &qa))
		return -errno;
	rs->sq_inline = (uint16_t)qa.cap.max_inline_data;

	/* the send ring and, behind it, a slot per control message */
	rs->sbuf = ring_alloc(rs->sbuf_size + sizeof(struct rs_sge) * RS_CTRL_MAX,
			      false);
	rs->rbuf = ring_alloc(rs->rbuf_size, false);
	/* the target SGL, then the target iomap: one region, one key */
	tlen = sizeof(struct rs_sge) * RS_SGL_SIZE +
	       sizeof(struct rs_iomap) * rs->iomap_size;
	rs->target_sgl = ring_alloc(tlen, true);
	rs->iomap = calloc(rs->iomap_size + 1u, sizeof(*rs->iomap));
	rs->rmsg = calloc(rs->rq_size + 1u, sizeof(*rs->rmsg));
	rs->sig = calloc(rs->sq_size + 1u, sizeof(*rs->sig));
	if (!rs->sbuf || !rs->rbuf || !rs->target_sgl || !rs->rmsg ||
	    !rs->iomap || !rs->sig)
		return -ENOMEM;
	rs->target_iomap = (struct rs_iomap *)(rs->target_sgl + RS_SGL_SIZE);
	rs->smr = ibv_reg_mr(rs->pd, rs->sbuf,
			     rs->sbuf_size + sizeof(struct rs_sge) * RS_CTRL_MAX,
			     IBV_ACCESS_LOCAL_WRITE);
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, rs->rbuf_size,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rs->target_mr = ibv_reg_mr(rs->pd, rs->target_sgl, tlen,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE);
	if (!rs->smr || !rs->rmr || !rs->target_mr)
		return -(errno ? errno : ENOMEM);

	rs->sbuf_avail = rs->sbuf_size;
	/* the first half goes out in the connect data, the second next */
	rs->rfree = rs->rbuf_size / 2;
	rs->rbuf_avail = rs->rbuf_size / 2;
	rs->sqe_avail = rs->sq_size - RS_CTRL_MAX;
	rs->rseq_comp = rs->rq_size / 2;
	for (int i = 0; i < rs->rq_size; i++) {
		err = rs_post_recv(rs);
		if (err)
			return err;
	}
	ibv_req_notify_cq(rs->cq, 0);
	rs->armed = true;
	return 0;
}

static void format_conn_data(struct rsocket *rs, struct rs_conn_data *c)
{
	memset(c, 0, sizeof(*c));
	c->version = 1;
	c->flags = RS_CONN_FLAG_IOMAP |
		   (__BYTE_ORDER == __BIG_ENDIAN ? RS_CONN_FLAG_NET : 0);
	c->credits = htobe16(rs->rq_size);
	c->target_iomap_size = (uint8_t)rs_value_to_scale(rs->iomap_size, 8);
	c->target_sgl.addr = htobe64((uintptr_t)rs->target_sgl);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->target_sgl.key = htobe32(rs->target_mr->rkey);
	c->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	c->data_buf.length = htobe32(rs->rbuf_size / 2);
	c->data_buf.key = htobe32(rs->rmr->rkey);
}

static int save_conn_data(struct rsocket *rs, const void *pdata, uint8_t len)
{
	struct rs_conn_data c;
	bool peer_net;

	if (!pdata || len < sizeof(c))
		return -EPROTO;
	memcpy(&c, pdata, sizeof(c));
	if (c.version != 1)
		return -EPROTO;
	rs->remote_sgl.addr = be64toh(c.target_sgl.addr);
	rs->remote_sgl.length = be32toh(c.target_sgl.length);
	rs->remote_sgl.key = be32toh(c.target_sgl.key);
	if (!rs->remote_sgl.length)
		return -EPROTO;
	/* index 0 of the peer's list came in its connect data */
	rs->remote_sge = 1 % rs->remote_sgl.length;
	peer_net = c.flags & RS_CONN_FLAG_NET;
	rs->swap_sgl = peer_net != (__BYTE_ORDER == __BIG_ENDIAN);
	if (c.flags & RS_CONN_FLAG_IOMAP) {
		rs->remote_iomap.addr = rs->remote_sgl.addr +
					sizeof(struct rs_sge) *
						rs->remote_sgl.length;
		rs->remote_iomap.length =
			(uint32_t)rs_scale_to_value(c.target_iomap_size, 8);
		rs->remote_iomap.key = rs->remote_sgl.key;
	}
	rs->tsgl[0].addr = be64toh(c.data_buf.addr);
	rs->tsgl[0].length = be32toh(c.data_buf.length);
	rs->tsgl[0].key = be32toh(c.data_buf.key);
	rs->target_sge = 0;
	rs->tsgl_in = 1;
	rs->sseq_comp = be16toh(c.credits);
	return 0;
}

static void set_error(struct rsocket *rs, int err)
{
	rs->err = err;
	rs->state = (rs->state & ~(RS_OPENING | RS_RDWR)) | RS_ERROR;
}

static int cm_event_errno(const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
		return ev->status == -ETIMEDOUT ? ETIMEDOUT : EHOSTUNREACH;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ev->status < 0 ? -ev->status : EHOSTUNREACH;
	default:
		return ECONNREFUSED;
	}
}

static void on_connect_event(struct rsocket *rs, struct rdma_cm_event *ev)
{
	struct rdma_conn_param p;
	struct rs_conn_data c;
	int err;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(rs->id, RS_RESOLVE_MS))
			set_error(rs, errno);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		err = create_ep(rs);
		if (err) {
			set_error(rs, -err);
			break;
		}
		format_conn_data(rs, &c);
		memset(&p, 0, sizeof(p));
		p.private_data = &c;
		p.private_data_len = sizeof(c);
		p.flow_control = 1;
		p.retry_count = 7;
		p.rnr_retry_count = 7;
		p.responder_resources = 1;
		p.initiator_depth = 1;
		if (rdma_connect(rs->id, &p))
			set_error(rs, errno);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		err = save_conn_data(rs, ev->param.conn.private_data,
				     ev->param.conn.private_data_len);
		if (err) {
			set_error(rs, -err);
			rdma_disconnect(rs->id);
			break;
		}
		rs->state = (rs->state & ~RS_OPENING) | RS_RDWR;
		/* the peer is ready to receive: the second half of our ring */
		rs_update_credits(rs);
		break;
	default:
		set_error(rs, cm_event_errno(ev));
		break;
	}
}

/*
 * Reads the rsocket's CM events without blocking.  Completions are
 * processed first: a DISCONNECTED comes after the data the peer sent
 * before it, and that data stays readable.
 */
int rs_process_cm(struct rsocket *rs)
{
	struct rdma_cm_event *ev;

	if (rs->ds)
		return rs_ds_process_udp(rs);
	if (rs->state & RS_LISTENING)
		return 0;
	while (!cm_try_event(rs->ch, &ev)) {
		if (rs->state & RS_OPENING) {
			on_connect_event(rs, ev);
		} else if (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
			   ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			if (rs->cq)
				rs_process_cq(rs);
			if (rs->state & RS_CONNECTED) {
				rs->state &= ~(RS_CONNECTED | RS_WRITABLE);
				rs->state |= RS_DISCONNECTED;
				if (!rs->peer_closed && !rs->err)
					rs->err = ECONNRESET;
			}
		}
		rdma_ack_cm_event(ev);
	}
	return 0;
}

int rs_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage dst;

	if (rs->state & RS_OPENING)
		return -EALREADY;
	if (rs->state & (RS_CONNECTED | RS_DISCONNECTED))
		return -EISCONN;
	if (rs->state & (RS_LISTENING | RS_ERROR))
		return -EINVAL;
	if (!addr || len < sizeof(struct sockaddr_in) || len > sizeof(dst))
		return -EINVAL;
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	memset(&dst, 0, sizeof(dst));
	memcpy(&dst, addr, len);
	rs->state |= RS_OPENING;
	if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)&dst,
			      RS_RESOLVE_MS)) {
		int err = errno;

		rs->state &= ~RS_OPENING;
		return -err;
	}
	return 0;
}

int rs_listen(struct rsocket *rs, int backlog)
{
	if (rs->state & RS_LISTENING)
		return 0;
	if (rs->state & (RS_OPENING | RS_CONNECTED | RS_DISCONNECTED))
		return -EINVAL;
	if (!(rs->state & RS_BOUND)) {
		struct sockaddr_in6 any6 = { .sin6_family = AF_INET6 };
		struct sockaddr_in any = { .sin_family = AF_INET };
		struct sockaddr *a = rs->domain == AF_INET6 ?
					     (struct sockaddr *)&any6 :
					     (struct sockaddr *)&any;

		if (rdma_bind_addr(rs->id, a))
			return -errno;
		rs->state |= RS_BOUND;
	}
	if (rdma_listen(rs->id, backlog))
		return -errno;
	rs->state |= RS_LISTENING;
	return 0;
}

/*
 * One request from the listener's channel, or NULL with errno (EAGAIN
 * when none is queued).  The new id moves to an event channel of its own,
 * whose descriptor is the new rsocket's number.
 */
struct rsocket *rs_accept(struct rsocket *lrs)
{
	struct rdma_cm_event *ev;
	struct rdma_conn_param p;
	struct rs_conn_data c, peer;
	struct rdma_cm_id *id;
	struct rsocket *rs;
	uint8_t plen;
	int err;

	for (;;) {
		if (rdma_get_cm_event(lrs->ch, &ev))
			return NULL;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	id = ev->id;
	p = ev->param.conn;
	plen = p.private_data_len;
	memset(&peer, 0, sizeof(peer));
	if (p.private_data)
		memcpy(&peer, p.private_data,
		       plen < sizeof(peer) ? plen : sizeof(peer));
	rdma_ack_cm_event(ev);

	rs = rs_alloc(lrs->domain);
	if (!rs) {
		err = ENOMEM;
		goto reject;
	}
	rs->sbuf_size = lrs->sbuf_size;
	rs->rbuf_size = lrs->rbuf_size;
	rs->sq_size = lrs->sq_size;
	rs->rq_size = lrs->rq_size;
	rs->sq_inline = lrs->sq_inline;
	rs->iomap_size = lrs->iomap_size;
	rs->nodelay = lrs->nodelay;
	rs->keepalive = lrs->keepalive;
	rs->nonblock = lrs->nonblock;
	if (rdma_migrate_id(id, rs->ch)) {
		err = errno;
		goto reject;
	}
	rs->id = id;
	id->context = rs;
	/* no other thread has rs yet: the lock only keeps rs_data.c's rule */
	pthread_mutex_lock(&rs->lock);
	err = -create_ep(rs);
	pthread_mutex_unlock(&rs->lock);
	if (!err)
		err = -save_conn_data(rs, &peer, plen);
	if (err)
		goto reject;
	format_conn_data(rs, &c);
	p.private_data = &c;
	p.private_data_len = sizeof(c);
	if (rdma_accept(id, &p)) {
		err = errno;
		goto reject;
	}
	rs->state = RS_RDWR;
	return rs;

reject:
	rdma_reject(id, NULL, 0);
	/* once migrated, the id is the rsocket's to destroy */
	if (!rs || !rs->id)
		rdma_destroy_id(id);
	if (rs)
		rs_free(rs);
	errno = err;
	return NULL;
}
