// SPDX-License-Identifier: MIT
/*
 * The convenience layer of librdmacm: QPs and SRQs made on an id (with
 * CQs and completion channels when the caller gives none, as the
 * rdma_verbs.h helpers expect), rdma_create_ep / rdma_get_request over
 * synchronous ids, and rdma_getaddrinfo over getaddrinfo(3).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_verbs.h>

#include "cm.h"

static struct ibv_context *id_verbs(struct rdma_cm_id *id)
{
	return id->verbs ? id->verbs : cm.app_ctx;
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	/* an XRC SRQ completes on the id's receive CQ: it goes with the
	 * SRQ (rdma_destroy_srq), not with the QP */
	if (!to_cid(id)->own_cqs || (id->qp_type == IBV_QPT_XRC_RECV && id->srq))
		return;
	if (id->recv_cq && id->recv_cq != id->send_cq)
		ibv_destroy_cq(id->recv_cq);
	if (id->send_cq)
		ibv_destroy_cq(id->send_cq);
	if (id->recv_cq_channel && id->recv_cq_channel != id->send_cq_channel)
		ibv_destroy_comp_channel(id->recv_cq_channel);
	if (id->send_cq_channel)
		ibv_destroy_comp_channel(id->send_cq_channel);
	id->recv_cq = id->send_cq = NULL;
	id->recv_cq_channel = id->send_cq_channel = NULL;
	to_cid(id)->own_cqs = false;
}

/* The XRC domain of XRC ids without one of their own, as librdmacm keeps
 * one per device (a private one: fd -1). */
static struct ibv_xrcd *get_xrcd(struct rdma_cm_id *id)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};

	pthread_mutex_lock(&cm.lock);
	if (!cm.xrcd)
		cm.xrcd = ibv_open_xrcd(id_verbs(id), &attr);
	pthread_mutex_unlock(&cm.lock);
	return cm.xrcd;
}

static int make_cq(struct rdma_cm_id *id, int n, struct ibv_cq **cq,
		   struct ibv_comp_channel **ch)
{
	*ch = ibv_create_comp_channel(id_verbs(id));
	if (!*ch)
		return -1;
	*cq = ibv_create_cq(id_verbs(id), n > 0 ? n : 1, id, *ch, 0);
	if (!*cq) {
		ibv_destroy_comp_channel(*ch);
		*ch = NULL;
		return -1;
	}
	to_cid(id)->own_cqs = true;
	return 0;
}

static int create_cqs(struct rdma_cm_id *id, int send_wr, int recv_wr)
{
	if (recv_wr && !id->recv_cq &&
	    make_cq(id, recv_wr, &id->recv_cq, &id->recv_cq_channel))
		return -1;
	if (send_wr && !id->send_cq &&
	    make_cq(id, send_wr, &id->send_cq, &id->send_cq_channel)) {
		destroy_cqs(id);
		return -1;
	}
	return 0;
}

/* Moves a new QP to where rdma_cm leaves it: INIT for connected QPs
 * (RTR/RTS come with the handshake), RTS for UD. */
static int init_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask, err;

	a.qp_state = IBV_QPS_INIT;
	err = rdma_init_qp_attr(id, &a, &mask);
	if (!err)
		err = ibv_modify_qp(qp, &a, mask) ? -1 : 0;
	if (err || id->qp_type != IBV_QPT_UD)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -1 : 0;
}

CM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
				struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;

	if (!id || !attr || id->qp)
		return cm_set_errno(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd ? id->pd : cm.app_pd;
	}
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return cm_set_errno(EINVAL);
	if (id->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = get_xrcd(id);
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (create_cqs(id,
		       attr->send_cq || id->send_cq ? 0 :
						      (int)attr->cap.max_send_wr,
		       attr->recv_cq || id->recv_cq ? 0 :
						      (int)attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(attr->pd->context, attr);
	if (!qp)
		goto err;
	if (init_qp(id, qp)) {
		int e = errno;

		ibv_destroy_qp(qp);
		errno = e;
		goto err;
	}
	id->pd = qp->pd;
	id->qp = qp;
	return 0;
err : {
	int e = errno;

	destroy_cqs(id);
	errno = e ? e : EINVAL;
}
	return -1;
}

CM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	int ret;

	if (!id || !qp_init_attr)
		return cm_set_errno(EINVAL);
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd ? pd : id->pd;
	ret = rdma_create_qp_ex(id, &ex);
	memcpy(qp_init_attr, &ex, sizeof(*qp_init_attr));
	return ret;
}

CM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp) {
		/* an attached QP cannot be destroyed */
		pthread_mutex_lock(&cm.lock);
		cm_mc_detach_qp(to_cid(id));
		pthread_mutex_unlock(&cm.lock);
		ibv_destroy_qp(id->qp);
	}
	id->qp = NULL;
	destroy_cqs(id);
}

CM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
				 struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id || !attr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return cm_set_errno(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : cm.app_pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		/* the id's domain and receive CQ, unless given */
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = get_xrcd(id);
			if (!attr->xrcd)
				return -1;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (create_cqs(id, 0, (int)attr->attr.max_wr))
				return -1;
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(id_verbs(id), attr);
	if (!srq)
		return -1;
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

CM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	int ret;

	if (!id || !attr)
		return cm_set_errno(EINVAL);
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, attr, sizeof(*attr));
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC :
							IBV_SRQT_BASIC;
	ex.pd = pd;
	ret = rdma_create_srq_ex(id, &ex);
	memcpy(attr, &ex, sizeof(*attr));
	return ret;
}

CM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	destroy_cqs(id);
}

CM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *lc = to_cid(listen);
	struct rdma_cm_event *event;
	int ret;

	if (!listen || !id || !lc->sync)
		return cm_set_errno(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = rdma_get_cm_event(listen->channel, &event);
	if (ret)
		return ret;
	if (event->event == RDMA_CM_EVENT_REJECTED) {
		ret = cm_set_errno(ECONNREFUSED);
		goto err;
	}
	if (event->status) {
		ret = cm_set_errno(event->status < 0 ? -event->status :
						       event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = cm_set_errno(EINVAL);
		goto err;
	}
	if (lc->ep_qp_attr) {
		struct ibv_qp_init_attr attr = *lc->ep_qp_attr;

		ret = rdma_create_qp(event->id, listen->pd, &attr);
		if (ret)
			goto err;
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
err:
	listen->event = event;
	return ret;
}

CM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			     struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *ci;
	int ret;

	if (!id || !res)
		return cm_set_errno(EINVAL);
	ret = rdma_create_id(NULL, &cid, NULL,
			     (enum rdma_port_space)res->ai_port_space);
	if (ret)
		return ret;
	ci = to_cid(cid);
	cid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cid, res->ai_src_addr);
		if (ret)
			goto err;
		if (pd)
			cid->pd = pd;
		if (qp_init_attr) {
			ci->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (!ci->ep_qp_attr) {
				ret = cm_set_errno(ENOMEM);
				goto err;
			}
			*ci->ep_qp_attr = *qp_init_attr;
			ci->ep_qp_attr->qp_type =
				(enum ibv_qp_type)res->ai_qp_type;
		}
		*id = cid;
		return 0;
	}
	ret = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (ret)
		goto err;
	ret = rdma_resolve_route(cid, 2000);
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		ret = rdma_create_qp(cid, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len && res->ai_connect) {
		ci->ep_pdata_len =
			(uint8_t)(res->ai_connect_len > sizeof(ci->ep_pdata) ?
					  sizeof(ci->ep_pdata) :
					  res->ai_connect_len);
		memcpy(ci->ep_pdata, res->ai_connect, ci->ep_pdata_len);
	}
	*id = cid;
	return 0;
err : {
	int e = errno;

	rdma_destroy_ep(cid);
	errno = e;
}
	return ret;
}

CM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

/* ---- rdma_getaddrinfo ---- */

static struct sockaddr *dup_sa(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, sa, len);
	return c;
}

CM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *next;

	for (; res; res = next) {
		next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
	}
}

/* node and/or service through getaddrinfo(3) into r: the source of a
 * passive (listening) side, else the destination */
static int rai_resolve(struct rdma_addrinfo *r, const char *node,
		       const char *service, const struct rdma_addrinfo *hints)
{
	struct addrinfo ah, *ai = NULL;
	int ret;

	memset(&ah, 0, sizeof(ah));
	ah.ai_socktype = SOCK_STREAM;
	ah.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
	if (r->ai_flags & RAI_PASSIVE)
		ah.ai_flags |= AI_PASSIVE;
	if (r->ai_flags & RAI_NUMERICHOST)
		ah.ai_flags |= AI_NUMERICHOST;
	if (node)
		ah.ai_flags |= AI_CANONNAME;
	if (ah.ai_family == AF_UNSPEC && (r->ai_flags & RAI_PASSIVE) && !node)
		ah.ai_family = AF_INET; /* a wildcard listener on IPv4 */
	ret = getaddrinfo(node, service, &ah, &ai);
	if (ret)
		return ret; /* librdmacm returns the getaddrinfo error code */
	r->ai_family = ai->ai_family;
	if (r->ai_flags & RAI_PASSIVE) {
		r->ai_src_addr = dup_sa(ai->ai_addr, ai->ai_addrlen);
		r->ai_src_len = ai->ai_addrlen;
		if (ai->ai_canonname)
			r->ai_src_canonname = strdup(ai->ai_canonname);
		ret = r->ai_src_addr ? 0 : cm_set_errno(ENOMEM);
	} else {
		r->ai_dst_addr = dup_sa(ai->ai_addr, ai->ai_addrlen);
		r->ai_dst_len = ai->ai_addrlen;
		if (ai->ai_canonname)
			r->ai_dst_canonname = strdup(ai->ai_canonname);
		ret = r->ai_dst_addr ? 0 : cm_set_errno(ENOMEM);
	}
	freeaddrinfo(ai);
	return ret;
}

/*
 * Addresses come from node/service, or with neither from the hints'
 * ai_dst_addr (libfabric's verbs provider asks that way); a source
 * address in the hints is kept when the lookup gave none.
 */
CM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints,
			       struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r;
	int ret = 0;

	if (!res || (!node && !service && !hints))
		return cm_set_errno(EINVAL);
	r = calloc(1, sizeof(*r));
	if (!r)
		return cm_set_errno(ENOMEM);
	if (hints) {
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		r->ai_qp_type = hints->ai_qp_type;
		r->ai_port_space = hints->ai_port_space;
	}
	if (!r->ai_port_space)
		r->ai_port_space = r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP :
								 RDMA_PS_TCP;
	if (!r->ai_qp_type)
		r->ai_qp_type = r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD :
								  IBV_QPT_RC;

	if (node || service) {
		ret = rai_resolve(r, node, service, hints);
	} else if (hints->ai_dst_addr && hints->ai_dst_len) {
		r->ai_dst_addr = dup_sa(hints->ai_dst_addr, hints->ai_dst_len);
		r->ai_dst_len = hints->ai_dst_len;
		ret = r->ai_dst_addr ? 0 : cm_set_errno(ENOMEM);
	}
	if (!ret && !r->ai_src_len && hints && hints->ai_src_addr &&
	    hints->ai_src_len) {
		r->ai_src_addr = dup_sa(hints->ai_src_addr, hints->ai_src_len);
		r->ai_src_len = hints->ai_src_len;
		ret = r->ai_src_addr ? 0 : cm_set_errno(ENOMEM);
	}
	if (ret) {
		rdma_freeaddrinfo(r);
		return ret;
	}
	if (!r->ai_family)
		r->ai_family = r->ai_dst_addr ? r->ai_dst_addr->sa_family :
			       r->ai_src_addr ? r->ai_src_addr->sa_family :
						0;
	*res = r;
	return 0;
}
