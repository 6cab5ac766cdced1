// SPDX-License-Identifier: MIT
/*
 * The rdma_cm API (cma.c), addresses: rdma_bind_addr, rdma_resolve_addr
 * and rdma_resolve_route, rdma_listen; ports, and where the device
 * moves when an id binds or resolves an address.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cm.h"
#include "uroce_private.h"

#define CM_DEFAULT_BACKLOG 1024

/* ---- addresses ---- */

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
}

uint16_t cm_get_port(const struct sockaddr *sa)
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
	port = cm_get_port(addr);
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
void cm_unpin(struct cm_id *ci)
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
		set_port((struct sockaddr *)&dst, cm_get_port(dst_addr));
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
	return cm_sync_wait(ci, is_sync);
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
	return cm_sync_wait(ci, is_sync);
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
