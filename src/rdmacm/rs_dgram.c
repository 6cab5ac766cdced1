// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets (SOCK_DGRAM) on rdma-core's datagram rsocket protocol
 * (docs/rsocket.md): a UDP socket per rsocket, whose descriptor is the
 * rsocket's number and whose address is the rsocket's address, and a UD
 * QP that carries the datagrams once the peer's QP number is known.
 *
 * A datagram to a peer whose QP number we do not know yet goes over the
 * UDP socket, behind a ds_udp_header that carries our QP number; the
 * receiver answers a DATA one with a CTRL one carrying its own, makes an
 * address handle for us and delivers the payload.  Everything after that
 * is a UD SEND of a ds_header (the sender's UDP address, so that
 * recvfrom names the peer as the kernel would) and the payload, at most
 * RS_SNDLOWAT bytes in all, and never more than the path MTU (a UD
 * message is one packet): 1024 bytes on a 1500-byte Ethernet.
 *
 * The UDP socket is read whenever the rsocket is looked at (a receive, a
 * send to a peer without an address handle yet, rpoll); a wait sleeps on
 * it and on the CQ channel.  Every function here is called with rs->lock
 * held.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "rs.h"

#define DS_UDP_TAG	    0x55555555
#define DS_IPV4_HDR_LEN	    8
#define DS_IPV6_HDR_LEN	    24
#define DS_UDP_IPV4_HDR_LEN 16
#define DS_UDP_IPV6_HDR_LEN 28
#define DS_GRH		    40
/* a receive slot: the GRH area, then RS_SNDLOWAT bytes at a 64-byte line */
#define DS_RSLOT     (RS_SNDLOWAT + 64)
#define DS_GRH_OFF   (64 - DS_GRH)
#define DS_UDP_QUEUE 64 /* datagrams that came by UDP, unread */
#define DS_DEF_QSIZE 384
#define DS_DEF_MEM   (1 << 20)
#define DS_WR_RECV   (1ULL << 63)

/* what precedes the payload of a UD datagram (rdma-core's ds_header) */
struct ds_header {
	uint8_t version; /* 4 or 6 */
	uint8_t length;	 /* DS_IPV4_HDR_LEN, DS_IPV6_HDR_LEN */
	uint16_t port;	 /* be: the sender's UDP port */
	union {
		uint32_t ipv4; /* be */
		struct {
			uint32_t flowinfo;
			uint8_t addr[16];
		} ipv6;
	} addr;
} __attribute__((packed));

/* what precedes a datagram over UDP (rdma-core's ds_udp_header) */
struct ds_udp_header {
	uint32_t tag; /* be: DS_UDP_TAG */
	uint8_t version;
	uint8_t op;	/* RS_OP_DATA, or RS_OP_CTRL: QPN only */
	uint8_t length; /* DS_UDP_IPV4/6_HDR_LEN */
	uint8_t reserved;
	uint32_t qpn; /* be: the sender's UD QP, 24 bits */
	union {
		uint32_t ipv4;
		uint8_t ipv6[16];
	} addr; /* the sender's QP address */
} __attribute__((packed));

struct ds_dest {
	struct ds_dest *next;
	struct sockaddr_storage addr;
	struct ibv_ah *ah; /* NULL: its QP number is not known */
	uint32_t qpn;
};

/* a datagram not yet read: in a receive slot, or a copy (slot -1) */
struct ds_msg {
	uint8_t *buf; /* ds_header, then the payload */
	uint32_t len;
	int slot;
};

struct rs_dgram {
	int udp;	      /* the rsocket's number */
	struct ibv_qp *qp;    /* made at the first peer */
	struct ds_header hdr; /* ours */
	uint32_t max_msg;     /* header and payload: MTU, SNDLOWAT */
	int *sfree;	      /* free send slots, a stack */
	int nsfree;
	struct ds_msg *msg; /* a ring of cap entries */
	int head, tail, cap, nudp;
	struct ds_dest *dests;
	struct ds_dest *conn; /* rconnect's peer */
};

static socklen_t addr_len(const struct sockaddr *a)
{
	return a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					  sizeof(struct sockaddr_in);
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr *b)
{
	if (a->ss_family != b->sa_family)
		return false;
	if (b->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a,
					 *y = (const void *)b;

		return x->sin_port == y->sin_port &&
		       x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

	return x->sin6_port == y->sin6_port &&
	       !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

int rs_ds_init(struct rsocket *rs, int type)
{
	struct rs_dgram *ds = calloc(1, sizeof(*ds));

	if (!ds)
		return -ENOMEM;
	rs->ds = ds;
	ds->udp = uroce_socket(rs->domain,
			       SOCK_DGRAM | SOCK_NONBLOCK | (type & SOCK_CLOEXEC),
			       0);
	if (ds->udp < 0)
		return -errno;
	rs->fd = ds->udp;
	rs->sq_size = DS_DEF_QSIZE;
	rs->rq_size = DS_DEF_QSIZE;
	rs->sbuf_size = DS_DEF_MEM;
	rs->rbuf_size = DS_DEF_MEM;
	rs->state = RS_READABLE | RS_WRITABLE;
	return 0;
}

void rs_ds_free(struct rsocket *rs)
{
	struct rs_dgram *ds = rs->ds;
	struct ds_dest *d;

	if (!ds)
		return;
	while ((d = ds->dests)) {
		ds->dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
	while (ds->msg && ds->head != ds->tail) {
		if (ds->msg[ds->head].slot < 0)
			free(ds->msg[ds->head].buf);
		ds->head = (ds->head + 1) % ds->cap;
	}
	if (ds->udp >= 0)
		close(ds->udp);
	free(ds->sfree);
	free(ds->msg);
	free(ds);
	rs->ds = NULL;
}

static int post_recv(struct rsocket *rs, int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rs->rbuf + (size_t)slot * DS_RSLOT +
			DS_GRH_OFF,
		.length = DS_GRH + RS_SNDLOWAT,
		.lkey = rs->rmr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = DS_WR_RECV | (uint64_t)slot,
				  .sg_list = &sge,
				  .num_sge = 1 },
			   *bad;

	return -ibv_post_recv(rs->ds->qp, &wr, &bad);
}

/* The source address that reaches dst: the UDP socket's, or routing's. */
static int source_for(struct rsocket *rs, const struct sockaddr *dst,
		      struct sockaddr_storage *src)
{
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	int fd, err = 0;

	if (getsockname(rs->ds->udp, (struct sockaddr *)&me, &len))
		return -errno;
	*src = me;
	if (me.ss_family == AF_INET ?
		    ((struct sockaddr_in *)&me)->sin_addr.s_addr != INADDR_ANY :
		    !IN6_IS_ADDR_UNSPECIFIED(
			    &((struct sockaddr_in6 *)&me)->sin6_addr))
		return 0;
	fd = uroce_socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	len = sizeof(*src);
	if (connect(fd, dst, addr_len(dst)) ||
	    getsockname(fd, (struct sockaddr *)src, &len))
		err = -errno;
	close(fd);
	if (me.ss_family == AF_INET)
		((struct sockaddr_in *)src)->sin_port =
			((struct sockaddr_in *)&me)->sin_port;
	else
		((struct sockaddr_in6 *)src)->sin6_port =
			((struct sockaddr_in6 *)&me)->sin6_port;
	return err;
}

static void format_hdr(struct ds_header *h, const struct sockaddr *a)
{
	memset(h, 0, sizeof(*h));
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;

		h->version = 4;
		h->length = DS_IPV4_HDR_LEN;
		h->port = s->sin_port;
		h->addr.ipv4 = s->sin_addr.s_addr;
	} else {
		const struct sockaddr_in6 *s = (const void *)a;

		h->version = 6;
		h->length = DS_IPV6_HDR_LEN;
		h->port = s->sin6_port;
		h->addr.ipv6.flowinfo = s->sin6_flowinfo;
		memcpy(h->addr.ipv6.addr, &s->sin6_addr, 16);
	}
}

/* the address a ds_header names, as recvfrom reports it */
static void hdr_to_addr(const struct ds_header *h, struct sockaddr_storage *a)
{
	memset(a, 0, sizeof(*a));
	if (h->version == 4) {
		struct sockaddr_in *s = (void *)a;

		s->sin_family = AF_INET;
		s->sin_port = h->port;
		s->sin_addr.s_addr = h->addr.ipv4;
	} else {
		struct sockaddr_in6 *s = (void *)a;

		s->sin6_family = AF_INET6;
		s->sin6_port = h->port;
		s->sin6_flowinfo = h->addr.ipv6.flowinfo;
		memcpy(&s->sin6_addr, h->addr.ipv6.addr, 16);
	}
}

static bool valid_hdr(const uint8_t *buf, uint32_t len)
{
	const struct ds_header *h = (const void *)buf;

	return len >= DS_IPV4_HDR_LEN &&
	       ((h->version == 4 && h->length == DS_IPV4_HDR_LEN) ||
		(h->version == 6 && h->length == DS_IPV6_HDR_LEN &&
		 len >= DS_IPV6_HDR_LEN));
}

/*
 * The UD QP, its CQ and the send and receive slots, made when the first
 * peer is named: its source address is then known.  rdma-core's sizing:
 * a slot of RS_SNDLOWAT bytes per queue entry.
 */
static int make_qp(struct rsocket *rs, const struct sockaddr *dst)
{
	struct rs_dgram *ds = rs->ds;
	struct sockaddr_storage src, bindto;
	struct ibv_qp_init_attr qa;
	struct ibv_port_attr pa;
	int err;

	err = source_for(rs, dst, &src);
	if (err)
		return err;
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_UDP))
		return -errno;
	/* the CM id only places the QP on the device: its port is ours */
	bindto = src;
	if (bindto.ss_family == AF_INET)
		((struct sockaddr_in *)&bindto)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&bindto)->sin6_port = 0;
	if (rdma_bind_addr(rs->id, (struct sockaddr *)&bindto))
		return -errno;
	if (!rs->id->verbs)
		return -ENODEV;
	format_hdr(&ds->hdr, (struct sockaddr *)&src);
	ds->max_msg = RS_SNDLOWAT;
	if (!ibv_query_port(rs->id->verbs,
			    rs->id->port_num ? rs->id->port_num : 1, &pa) &&
	    pa.active_mtu >= IBV_MTU_256 &&
	    (128u << pa.active_mtu) < ds->max_msg)
		ds->max_msg = 128u << pa.active_mtu;

	if (rs->rq_size > rs->rbuf_size / RS_SNDLOWAT)
		rs->rq_size = (uint16_t)(rs->rbuf_size / RS_SNDLOWAT);
	if (rs->sq_size > rs->sbuf_size / RS_SNDLOWAT)
		rs->sq_size = (uint16_t)(rs->sbuf_size / RS_SNDLOWAT);
	if (rs->rq_size < 16)
		rs->rq_size = 16;
	if (rs->sq_size < 16)
		rs->sq_size = 16;
	err = rs_make_cq(rs);
	if (err)
		return err;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = rs;
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_size;
	qa.cap.max_recv_wr = rs->rq_size;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(rs->id, rs->pd, &qa))
		return -errno;
	ds->qp = rs->id->qp;
	rs->sq_inline = (uint16_t)qa.cap.max_inline_data;

	rs->sbuf = calloc(rs->sq_size, RS_SNDLOWAT);
	rs->rbuf = calloc(rs->rq_size, DS_RSLOT);
	ds->sfree = calloc(rs->sq_size, sizeof(*ds->sfree));
	ds->cap = rs->rq_size + DS_UDP_QUEUE + 1;
	ds->msg = calloc((size_t)ds->cap, sizeof(*ds->msg));
	if (!rs->sbuf || !rs->rbuf || !ds->sfree || !ds->msg)
		return -ENOMEM;
	rs->smr = ibv_reg_mr(rs->pd, rs->sbuf, (size_t)rs->sq_size * RS_SNDLOWAT,
			     IBV_ACCESS_LOCAL_WRITE);
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, (size_t)rs->rq_size * DS_RSLOT,
			     IBV_ACCESS_LOCAL_WRITE);
	if (!rs->smr || !rs->rmr)
		return -(errno ? errno : ENOMEM);
	for (int i = 0; i < rs->sq_size; i++)
		ds->sfree[ds->nsfree++] = i;
	for (int i = 0; i < rs->rq_size; i++) {
		err = post_recv(rs, i);
		if (err)
			return err;
	}
	ibv_req_notify_cq(rs->cq, 0);
	rs->armed = true;
	return 0;
}

/* the peer at addr, made (with our QP, the first time) when new */
static int get_dest(struct rsocket *rs, const struct sockaddr *addr,
		    struct ds_dest **out)
{
	struct rs_dgram *ds = rs->ds;
	struct ds_dest *d;
	int err;

	for (d = ds->dests; d; d = d->next)
		if (same_addr(&d->addr, addr)) {
			*out = d;
			return 0;
		}
	if (!ds->qp) {
		err = make_qp(rs, addr);
		if (err)
			return err;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	memcpy(&d->addr, addr, addr_len(addr));
	d->next = ds->dests;
	ds->dests = d;
	*out = d;
	return 0;
}

/* RoCE v2: the peer's GID is its IP address (IPv4-mapped for IPv4) */
static void set_ah(struct rsocket *rs, struct ds_dest *d, uint32_t qpn)
{
	struct ibv_ah_attr a;

	if (d->ah)
		ibv_destroy_ah(d->ah);
	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.port_num = rs->id->port_num ? rs->id->port_num : 1;
	cm_gid_from_sa((struct sockaddr *)&d->addr, &a.grh.dgid);
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	d->ah = ibv_create_ah(rs->pd, &a);
	d->qpn = qpn;
}

static ssize_t send_udp(struct rsocket *rs, struct ds_dest *d, uint8_t op,
			const struct iovec *iov, int iovcnt)
{
	struct rs_dgram *ds = rs->ds;
	struct ds_udp_header h;
	struct iovec v[9];
	struct msghdr m;
	ssize_t r;

	if (iovcnt > 8)
		return -EMSGSIZE;
	memset(&h, 0, sizeof(h));
	h.tag = htobe32(DS_UDP_TAG);
	h.version = ds->hdr.version;
	h.op = op;
	h.qpn = htobe32(ds->qp->qp_num & 0xffffff);
	if (ds->hdr.version == 4) {
		h.length = DS_UDP_IPV4_HDR_LEN;
		h.addr.ipv4 = ds->hdr.addr.ipv4;
	} else {
		h.length = DS_UDP_IPV6_HDR_LEN;
		memcpy(h.addr.ipv6, ds->hdr.addr.ipv6.addr, 16);
	}
	v[0] = (struct iovec){ &h, h.length };
	for (int i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i];
	memset(&m, 0, sizeof(m));
	m.msg_name = &d->addr;
	m.msg_namelen = addr_len((struct sockaddr *)&d->addr);
	m.msg_iov = v;
	m.msg_iovlen = (size_t)iovcnt + 1;
	r = sendmsg(ds->udp, &m, MSG_DONTWAIT);
	if (r < 0)
		return -errno;
	return r - h.length;
}

static bool queue_full(struct rs_dgram *ds)
{
	return (ds->tail + 1) % ds->cap == ds->head;
}

static void queue(struct rs_dgram *ds, uint8_t *buf, uint32_t len, int slot)
{
	ds->msg[ds->tail] = (struct ds_msg){ buf, len, slot };
	ds->tail = (ds->tail + 1) % ds->cap;
}

/* one datagram that came by UDP: learn the peer's QP, deliver its data */
static void on_udp(struct rsocket *rs, uint8_t *buf, size_t n,
		   const struct sockaddr_storage *from)
{
	struct rs_dgram *ds = rs->ds;
	struct ds_udp_header *h = (void *)buf;
	struct ds_header dh;
	struct ds_dest *d;
	uint32_t qpn;
	uint8_t *copy;

	if (n < DS_UDP_IPV4_HDR_LEN || be32toh(h->tag) != DS_UDP_TAG ||
	    !((h->version == 4 && from->ss_family == AF_INET &&
	       h->length == DS_UDP_IPV4_HDR_LEN) ||
	      (h->version == 6 && from->ss_family == AF_INET6 &&
	       h->length == DS_UDP_IPV6_HDR_LEN)) ||
	    n < h->length)
		return;
	qpn = be32toh(h->qpn) & 0xffffff;
	if (get_dest(rs, (const struct sockaddr *)from, &d))
		return;
	/* tell the sender our QP, so that it sends the next ones by UD */
	if (h->op == RS_OP_DATA)
		send_udp(rs, d, RS_OP_CTRL, NULL, 0);
	if (!d->ah || d->qpn != qpn)
		set_ah(rs, d, qpn);
	if (h->op != RS_OP_DATA || ds->nudp >= DS_UDP_QUEUE || queue_full(ds))
		return;
	format_hdr(&dh, (const struct sockaddr *)from);
	copy = malloc(dh.length + n - h->length);
	if (!copy)
		return;
	memcpy(copy, &dh, dh.length);
	memcpy(copy + dh.length, buf + h->length, n - h->length);
	queue(ds, copy, (uint32_t)(dh.length + n - h->length), -1);
	ds->nudp++;
}

/* Reads the UDP socket without blocking. */
int rs_ds_process_udp(struct rsocket *rs)
{
	uint8_t buf[DS_UDP_IPV6_HDR_LEN + RS_SNDLOWAT];
	struct sockaddr_storage from;
	socklen_t flen;
	ssize_t n;

	for (;;) {
		flen = sizeof(from);
		n = recvfrom(rs->ds->udp, buf, sizeof(buf), MSG_DONTWAIT,
			     (struct sockaddr *)&from, &flen);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 :
									 -errno;
		on_udp(rs, buf, (size_t)n, &from);
	}
}

/* Reads every completion: datagrams queued, send slots given back. */
int rs_ds_process_cq(struct rsocket *rs)
{
	struct rs_dgram *ds = rs->ds;
	struct ibv_wc wc[RS_CQ_BATCH];
	int n;

	if (!rs->cq)
		return 0;
	do {
		n = ibv_poll_cq(rs->cq, RS_CQ_BATCH, wc);
		for (int i = 0; i < n; i++) {
			int slot = (int)(wc[i].wr_id & 0xffffffff);
			uint8_t *buf;
			uint32_t len;

			if (!(wc[i].wr_id & DS_WR_RECV)) {
				ds->sfree[ds->nsfree++] = slot;
				continue;
			}
			buf = rs->rbuf + (size_t)slot * DS_RSLOT + 64;
			len = wc[i].byte_len > DS_GRH ? wc[i].byte_len - DS_GRH :
							0;
			if (wc[i].status != IBV_WC_SUCCESS ||
			    !valid_hdr(buf, len) || queue_full(ds)) {
				if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
					post_recv(rs, slot);
				continue;
			}
			queue(ds, buf, len, slot);
		}
	} while (n == RS_CQ_BATCH);
	return 0;
}

bool rs_ds_have_data(struct rsocket *rs)
{
	return rs->ds->head != rs->ds->tail;
}

bool rs_ds_can_send(struct rsocket *rs)
{
	return !rs->ds->qp || rs->ds->nsfree > 0;
}

short rs_ds_revents(struct rsocket *rs)
{
	short r = 0;

	rs_ds_process_udp(rs);
	rs_ds_process_cq(rs);
	if (rs_ds_have_data(rs))
		r |= POLLIN;
	if (rs_ds_can_send(rs))
		r |= POLLOUT;
	return r;
}

int rs_ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	if (rs->ds->qp)
		return -EINVAL;
	if (bind(rs->ds->udp, addr, len))
		return -errno;
	rs->state |= RS_BOUND;
	return 0;
}

int rs_ds_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage a;

	if (!addr || len < sizeof(struct sockaddr_in) || len > sizeof(a))
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, len);
	if (connect(rs->ds->udp, addr, len))
		return -errno;
	return get_dest(rs, (struct sockaddr *)&a, &rs->ds->conn);
}

/* the UDP socket's address is ours; bound to a free port when not yet */
static int ensure_bound(struct rsocket *rs)
{
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);

	if (getsockname(rs->ds->udp, (struct sockaddr *)&me, &len))
		return -errno;
	if (me.ss_family == AF_INET ? ((struct sockaddr_in *)&me)->sin_port :
				      ((struct sockaddr_in6 *)&me)->sin6_port)
		return 0;
	memset(&me, 0, sizeof(me));
	me.ss_family = (sa_family_t)rs->domain;
	if (bind(rs->ds->udp, (struct sockaddr *)&me,
		 addr_len((struct sockaddr *)&me)))
		return -errno;
	return 0;
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	for (int i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
}

ssize_t rs_ds_send(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		   int flags, const struct sockaddr *to, socklen_t tolen)
{
	struct rs_dgram *ds = rs->ds;
	bool nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t len = iov_total(iov, iovcnt), off;
	struct sockaddr_storage a;
	struct ds_dest *d;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	uint8_t *p;
	int err, slot;

	if (!(rs->state & RS_WRITABLE))
		return -EPIPE;
	if (to) {
		if (tolen < sizeof(struct sockaddr_in) || tolen > sizeof(a))
			return -EINVAL;
		if (to->sa_family != rs->domain)
			return -EAFNOSUPPORT;
		memset(&a, 0, sizeof(a));
		memcpy(&a, to, tolen);
		err = ensure_bound(rs);
		if (!err)
			err = get_dest(rs, (struct sockaddr *)&a, &d);
		if (err)
			return err;
	} else if (!(d = ds->conn)) {
		return -EDESTADDRREQ;
	}
	if (len + ds->hdr.length > ds->max_msg)
		return -EMSGSIZE;
	if (!d->ah)
		rs_ds_process_udp(rs);
	if (!d->ah)
		return send_udp(rs, d, RS_OP_DATA, iov, iovcnt);
	if (!ds->nsfree) {
		rs_ds_process_cq(rs);
		if (!ds->nsfree) {
			err = rs_wait(rs, rs_ds_can_send, nonblock);
			if (err)
				return err;
		}
	}
	slot = ds->sfree[--ds->nsfree];
	p = rs->sbuf + (size_t)slot * RS_SNDLOWAT;
	memcpy(p, &ds->hdr, ds->hdr.length);
	off = ds->hdr.length;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(p + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	sge = (struct ibv_sge){ (uintptr_t)p, (uint32_t)off, rs->smr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = off <= rs->sq_inline ? IBV_SEND_INLINE : 0;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	err = ibv_post_send(ds->qp, &wr, &bad);
	if (err) {
		ds->sfree[ds->nsfree++] = slot;
		return -err;
	}
	return (ssize_t)len;
}

static bool have_data(struct rsocket *rs)
{
	return rs_ds_have_data(rs);
}

ssize_t rs_ds_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		   int flags, struct sockaddr_storage *from, int *mflags)
{
	struct rs_dgram *ds = rs->ds;
	bool nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	struct ds_msg *m;
	const struct ds_header *h;
	size_t len, done = 0;
	int err;

	if (!rs_ds_have_data(rs)) {
		rs_ds_process_udp(rs);
		rs_ds_process_cq(rs);
		if (!rs_ds_have_data(rs)) {
			err = rs_wait(rs, have_data, nonblock);
			if (err)
				return err;
		}
	}
	m = &ds->msg[ds->head];
	h = (const void *)m->buf;
	len = m->len - h->length;
	for (int i = 0; i < iovcnt && done < len; i++) {
		size_t n = len - done < iov[i].iov_len ? len - done :
							 iov[i].iov_len;

		memcpy(iov[i].iov_base, m->buf + h->length + done, n);
		done += n;
	}
	if (done < len && mflags)
		*mflags |= MSG_TRUNC;
	if (from)
		hdr_to_addr(h, from);
	if (flags & MSG_TRUNC)
		done = len;
	if (flags & MSG_PEEK)
		return (ssize_t)done;
	if (m->slot < 0) {
		free(m->buf);
		ds->nudp--;
	} else {
		post_recv(rs, m->slot);
	}
	ds->head = (ds->head + 1) % ds->cap;
	return (ssize_t)done;
}

static bool sends_done(struct rsocket *rs)
{
	return !rs->ds->qp || rs->ds->nsfree == rs->sq_size;
}

/* rclose: the datagrams posted leave before the QP goes (UD sends
 * complete without the peer) */
void rs_ds_close(struct rsocket *rs)
{
	rs_wait(rs, sends_done, false);
}

int rs_ds_getname(struct rsocket *rs, struct sockaddr *addr, socklen_t *len,
		  bool peer)
{
	int r = peer ? getpeername(rs->ds->udp, addr, len) :
		       getsockname(rs->ds->udp, addr, len);

	return r ? -errno : 0;
}

int rs_ds_sockopt(struct rsocket *rs, bool set, int level, int name, void *val,
		  socklen_t *len)
{
	int r = set ? setsockopt(rs->ds->udp, level, name, val, *len) :
		      getsockopt(rs->ds->udp, level, name, val, len);

	return r ? -errno : 0;
}
