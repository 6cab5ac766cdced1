// SPDX-License-Identifier: MIT
/*
 * The rsocket entry points (rdma/rsocket.h).  Each one first looks its
 * descriptor up: a descriptor that is not an rsocket gets the kernel call
 * the r* call stands for, so that a program preloaded with librspreload
 * (whose select and poll always go through rpoll) behaves on ordinary
 * descriptors exactly as without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/uio.h>
#include <rdma/rsocket.h>

#include "cm.h"
#include "rs.h"

/*
 * rsocket numbers are descriptors, so a flat table indexed by them.  Every
 * r* call looks its descriptor up (rpoll several times per descriptor), so
 * lookups take no lock: a table is published with a release store and
 * never freed (it only grows, doubling: the old ones add up to less than
 * the current one); its slots are atomic.  Writers take rs_table_lock.
 */
struct rs_table {
	struct rs_table *old; /* kept: a lookup may still read it */
	int size;
	_Atomic(struct rsocket *) slot[];
};

static pthread_mutex_t rs_table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct rs_table *) rs_table;

struct rsocket *rs_lookup(int fd)
{
	struct rs_table *t = atomic_load_explicit(&rs_table,
						  memory_order_acquire);

	if (fd < 0 || !t || fd >= t->size)
		return NULL;
	return atomic_load_explicit(&t->slot[fd], memory_order_acquire);
}

/* rs NULL clears the slot */
int rs_table_set(int fd, struct rsocket *rs)
{
	struct rs_table *t, *n;
	int err = 0;

	pthread_mutex_lock(&rs_table_lock);
	t = atomic_load_explicit(&rs_table, memory_order_relaxed);
	if (!t || fd >= t->size) {
		int size = t ? t->size : 64;

		while (size <= fd)
			size *= 2;
		n = calloc(1, sizeof(*n) + (size_t)size * sizeof(n->slot[0]));
		if (!n) {
			err = -ENOMEM;
			goto out;
		}
		n->size = size;
		n->old = t;
		for (int i = 0; t && i < t->size; i++)
			atomic_init(&n->slot[i],
				    atomic_load_explicit(&t->slot[i],
							 memory_order_relaxed));
		atomic_store_explicit(&rs_table, n, memory_order_release);
		t = n;
	}
	atomic_store_explicit(&t->slot[fd], rs, memory_order_release);
out:
	pthread_mutex_unlock(&rs_table_lock);
	return err;
}

static int fail(int err)
{
	errno = err;
	return -1;
}

/* a negative errno from inside, as a socket call returns it */
static ssize_t sret(ssize_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/*
 * A call that succeeds leaves errno as it found it, as the kernel's do:
 * inside, the CM and verbs calls that find nothing (EAGAIN) set it, and
 * programs print errno after cleanup (iperf3's "unable to read from
 * stream socket" said EAGAIN after an rclose, for ECONNRESET).
 */
#define KEEP_ERRNO(call) \
	({ \
		int saved_ = errno; \
		__typeof__(call) r_ = (call); \
		if (r_ >= 0) \
			errno = saved_; \
		r_; \
	})

/*
 * Stream and datagram sockets of AF_INET/AF_INET6 only: anything else
 * fails with ENOTSUP, and librspreload makes a kernel socket instead (our
 * own library makes its sockets with the system call, uroce_socket).
 */
CM_EXPORT int rsocket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct rsocket *rs;
	int err;

	if ((domain != AF_INET && domain != AF_INET6) ||
	    (base != SOCK_STREAM && base != SOCK_DGRAM) ||
	    (base == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (base == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
		return fail(ENOTSUP);
	rs = rs_alloc(domain);
	if (!rs)
		return -1;
	if (base == SOCK_DGRAM)
		err = -rs_ds_init(rs, type);
	else if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP))
		err = errno;
	else
		err = 0;
	if (err) {
		rs_free(rs);
		return fail(err);
	}
	rs->nonblock = type & SOCK_NONBLOCK;
	if (type & SOCK_CLOEXEC)
		fcntl(rs->fd, F_SETFD, FD_CLOEXEC);
	if (rs_table_set(rs->fd, rs)) {
		rs_free(rs);
		return fail(ENOMEM);
	}
	return rs->fd;
}

CM_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	struct rsocket *rs = rs_lookup(s);
	struct sockaddr_storage a;
	int ret = 0;

	if (!rs)
		return bind(s, addr, len);
	if (rs->ds) {
		pthread_mutex_lock(&rs->lock);
		ret = rs_ds_bind(rs, addr, len);
		pthread_mutex_unlock(&rs->lock);
		return (int)sret(ret);
	}
	if (!addr || len < sizeof(struct sockaddr_in) || len > sizeof(a))
		return fail(EINVAL);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return fail(EAFNOSUPPORT);
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, len);
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_INIT)
		ret = fail(EINVAL);
	else if (rdma_bind_addr(rs->id, (struct sockaddr *)&a))
		ret = -1;
	else
		rs->state |= RS_BOUND;
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

CM_EXPORT int rlisten(int s, int backlog)
{
	struct rsocket *rs = rs_lookup(s);
	int ret;

	if (!rs)
		return listen(s, backlog);
	if (rs->ds)
		return fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	ret = rs_listen(rs, backlog);
	pthread_mutex_unlock(&rs->lock);
	return (int)sret(ret);
}

static void copy_addr(struct sockaddr *dst, socklen_t *len,
		      const struct sockaddr *src)
{
	socklen_t size = src->sa_family == AF_INET6 ?
				 sizeof(struct sockaddr_in6) :
				 sizeof(struct sockaddr_in);

	if (!len)
		return;
	if (dst)
		memcpy(dst, src, *len < size ? *len : size);
	*len = size;
}

CM_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsocket *rs = rs_lookup(s), *nrs;
	struct pollfd p;

	if (!rs)
		return accept(s, addr, len);
	if (rs->ds)
		return fail(EOPNOTSUPP);
	if (!(rs->state & RS_LISTENING))
		return fail(EINVAL);
	for (;;) {
		nrs = rs_accept(rs);
		if (nrs || errno != EAGAIN || rs->nonblock)
			break;
		p = (struct pollfd){ .fd = rs->ch->fd, .events = POLLIN };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
	if (!nrs)
		return -1;
	if (rs_table_set(nrs->fd, nrs)) {
		rs_free(nrs);
		return fail(ENOMEM);
	}
	copy_addr(addr, len, rdma_get_peer_addr(nrs->id));
	return nrs->fd;
}

CM_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	struct rsocket *rs = rs_lookup(s);
	int ret;

	if (!rs)
		return connect(s, addr, len);
	pthread_mutex_lock(&rs->lock);
	if (rs->ds) {
		ret = rs_ds_connect(rs, addr, len);
		pthread_mutex_unlock(&rs->lock);
		return (int)sret(ret);
	}
	ret = rs_connect(rs, addr, len);
	/*
	 * Called again while it connects, or once connected: rdma-core's
	 * answers (EINPROGRESS or the wait, then 0), not the kernel's
	 * EALREADY and EISCONN.  librspreload takes any error but EINPROGRESS
	 * for "no RDMA here" and moves the socket to TCP, so a program that
	 * calls connect again to learn how it went (hiredis: redis-cli)
	 * lost its connection and was refused by the TCP port.
	 */
	if (ret == -EALREADY || (ret == -EISCONN && (rs->state & RS_CONNECTED)))
		ret = 0;
	if (!ret) {
		ret = rs_wait_connected(rs, rs->nonblock);
		if (ret == -EAGAIN)
			ret = -EINPROGRESS;
		else if (!ret && (rs->state & RS_ERROR))
			ret = -rs->err;
	}
	if (ret && ret != -EINPROGRESS && ret != -EALREADY)
		rs->err = 0;
	pthread_mutex_unlock(&rs->lock);
	return (int)sret(ret);
}

CM_EXPORT int rshutdown(int s, int how)
{
	struct rsocket *rs = rs_lookup(s);
	int ret;

	if (!rs)
		return shutdown(s, how);
	pthread_mutex_lock(&rs->lock);
	if (rs->ds)
		ret = shutdown(s, how) ? -errno : 0;
	else
		ret = KEEP_ERRNO(rs_shutdown(rs, how));
	pthread_mutex_unlock(&rs->lock);
	return (int)sret(ret);
}

/* what was sent is delivered first: a close is an orderly shutdown */
CM_EXPORT int rclose(int s)
{
	struct rsocket *rs = rs_lookup(s);
	int saved = errno;

	if (!rs)
		return rs_epoll_close(s) ? 0 : close(s);
	rs_epoll_forget(s);
	rs_table_set(s, NULL);
	pthread_mutex_lock(&rs->lock);
	if (rs->state & RS_CONNECTED)
		rs_shutdown(rs, SHUT_RDWR);
	else if (rs->ds)
		rs_ds_close(rs);
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	errno = saved;
	return 0;
}

/*
 * from: where a datagram came from (a stream's peer), for rrecvfrom and
 * rrecvmsg; mflags: recvmsg's msg_flags (MSG_TRUNC).
 */
static ssize_t do_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		       int flags, struct sockaddr_storage *from, int *mflags)
{
	ssize_t r;

	if (iovcnt < 0 || (iovcnt && !iov))
		return fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	if (rs->ds) {
		r = KEEP_ERRNO(rs_ds_recv(rs, iov, iovcnt, flags, from, mflags));
	} else {
		r = KEEP_ERRNO(rs_recv(rs, iov, iovcnt, flags));
		if (from)
			memcpy(from, rdma_get_peer_addr(rs->id),
			       sizeof(struct sockaddr_in6));
	}
	pthread_mutex_unlock(&rs->lock);
	return sret(r);
}

/*
 * to: a datagram's destination.  A stream ignores it, as the kernel's TCP
 * does (sockperf names its peer in every sendto); rdma-core's rsockets
 * refuse it with EISCONN.
 */
static ssize_t do_send(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		       int flags, const struct sockaddr *to, socklen_t tolen)
{
	ssize_t r;

	if (iovcnt < 0 || (iovcnt && !iov))
		return fail(EINVAL);
	pthread_mutex_lock(&rs->lock);
	atomic_fetch_add_explicit(&rs->sends, 1, memory_order_relaxed);
	if (rs->ds)
		r = KEEP_ERRNO(rs_ds_send(rs, iov, iovcnt, flags, to, tolen));
	else
		r = KEEP_ERRNO(rs_send(rs, iov, iovcnt, flags));
	pthread_mutex_unlock(&rs->lock);
	return sret(r);
}

CM_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	struct rsocket *rs = rs_lookup(s);
	struct iovec v = { buf, len };

	if (!rs)
		return recv(s, buf, len, flags);
	return do_recv(rs, &v, 1, flags, NULL, NULL);
}

CM_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags,
			    struct sockaddr *addr, socklen_t *alen)
{
	struct rsocket *rs = rs_lookup(s);
	struct iovec v = { buf, len };
	struct sockaddr_storage from;
	ssize_t r;

	if (!rs)
		return recvfrom(s, buf, len, flags, addr, alen);
	r = do_recv(rs, &v, 1, flags, addr && alen ? &from : NULL, NULL);
	if (r >= 0 && addr && alen)
		copy_addr(addr, alen, (struct sockaddr *)&from);
	return r;
}

CM_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	struct rsocket *rs = rs_lookup(s);
	struct sockaddr_storage from;
	ssize_t r;

	if (!rs)
		return recvmsg(s, msg, flags);
	if (!msg)
		return fail(EINVAL);
	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	r = do_recv(rs, msg->msg_iov, (int)msg->msg_iovlen, flags,
		    msg->msg_name ? &from : NULL, &msg->msg_flags);
	if (r >= 0 && msg->msg_name)
		copy_addr(msg->msg_name, &msg->msg_namelen,
			  (struct sockaddr *)&from);
	return r;
}

CM_EXPORT ssize_t rread(int s, void *buf, size_t len)
{
	struct rsocket *rs = rs_lookup(s);
	struct iovec v = { buf, len };

	if (!rs)
		return read(s, buf, len);
	return do_recv(rs, &v, 1, 0, NULL, NULL);
}

CM_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	struct rsocket *rs = rs_lookup(s);

	if (!rs)
		return readv(s, iov, iovcnt);
	return do_recv(rs, iov, iovcnt, 0, NULL, NULL);
}

CM_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	struct rsocket *rs = rs_lookup(s);
	struct iovec v = { (void *)buf, len };

	if (!rs)
		return send(s, buf, len, flags);
	return do_send(rs, &v, 1, flags, NULL, 0);
}

CM_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags,
			  const struct sockaddr *addr, socklen_t alen)
{
	struct rsocket *rs = rs_lookup(s);
	struct iovec v = { (void *)buf, len };

	if (!rs)
		return sendto(s, buf, len, flags, addr, alen);
	return do_send(rs, &v, 1, flags, addr, alen);
}

CM_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	struct rsocket *rs = rs_lookup(s);

	if (!rs)
		return sendmsg(s, msg, flags);
	if (!msg)
		return fail(EINVAL);
	return do_send(rs, msg->msg_iov, (int)msg->msg_iovlen, flags,
		       msg->msg_name, msg->msg_namelen);
}

CM_EXPORT ssize_t rwrite(int s, const void *buf, size_t len)
{
	struct rsocket *rs = rs_lookup(s);
	struct iovec v = { (void *)buf, len };

	if (!rs)
		return write(s, buf, len);
	return do_send(rs, &v, 1, 0, NULL, 0);
}

CM_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	struct rsocket *rs = rs_lookup(s);

	if (!rs)
		return writev(s, iov, iovcnt);
	return do_send(rs, iov, iovcnt, 0, NULL, 0);
}

CM_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsocket *rs = rs_lookup(s);

	if (!rs || rs->ds)
		return getpeername(s, addr, len);
	if (!len || (!addr && *len))
		return fail(EFAULT);
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED)))
		return fail(ENOTCONN);
	copy_addr(addr, len, rdma_get_peer_addr(rs->id));
	return 0;
}

CM_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	struct rsocket *rs = rs_lookup(s);
	struct sockaddr_in6 none = { .sin6_family = AF_INET6 };
	struct sockaddr_in none4 = { .sin_family = AF_INET };
	struct sockaddr *src;

	/*
	 * A null address with a zero length asks only for the length:
	 * librspreload learns a socket's family that way when it falls
	 * back to a kernel socket after a failed rconnect.
	 */
	if (!rs || rs->ds)
		return getsockname(s, addr, len);
	if (!len || (!addr && *len))
		return fail(EFAULT);
	src = rdma_get_local_addr(rs->id);
	if (src->sa_family != AF_INET && src->sa_family != AF_INET6)
		src = rs->domain == AF_INET6 ? (struct sockaddr *)&none :
					       (struct sockaddr *)&none4;
	copy_addr(addr, len, src);
	return 0;
}

static int int_opt(const void *val, socklen_t len, int *out)
{
	if (!val || len < sizeof(int))
		return -EINVAL;
	memcpy(out, val, sizeof(int));
	return 0;
}

/* sizes take effect at connect or accept; later changes are ignored */
static int set_opt(struct rsocket *rs, int level, int name, int v)
{
	bool open = rs->state & (RS_OPENING | RS_CONNECTED | RS_DISCONNECTED);

	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR:
			rs->reuseaddr = v;
			return 0;
		case SO_KEEPALIVE:
			rs->keepalive = v;
			return 0;
		case SO_SNDBUF:
		case SO_RCVBUF:
			/* as the kernel: the size asked for, doubled */
			if (v < RS_SNDLOWAT)
				v = RS_SNDLOWAT;
			if (v > (1 << 23))
				v = 1 << 23;
			if (open)
				return 0;
			if (name == SO_SNDBUF)
				rs->sbuf_size = (uint32_t)v << 1;
			else
				rs->rbuf_size = (uint32_t)v << 1;
			return 0;
		case SO_LINGER:
		case SO_OOBINLINE:
			return 0;
		}
		break;
	case IPPROTO_TCP:
		switch (name) {
		case TCP_NODELAY:
			rs->nodelay = v;
			return 0;
		case TCP_KEEPIDLE:
			rs->keepidle = v;
			return 0;
		case TCP_MAXSEG:
			return 0;
		}
		break;
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY) {
			rs->v6only = v;
			return 0;
		}
		break;
	case SOL_RDMA:
		if (open)
			return -EINVAL;
		switch (name) {
		case RDMA_SQSIZE:
			rs->sq_size = (uint16_t)(v < 0 || v > 0xfffe ? 0xfffe :
								       v);
			return 0;
		case RDMA_RQSIZE:
			rs->rq_size = (uint16_t)(v < 0 || v > 0xfffe ? 0xfffe :
								       v);
			return 0;
		case RDMA_INLINE:
			rs->sq_inline = (uint16_t)(v < 0 || v > 0xffff ? 0xffff :
									 v);
			return 0;
		case RDMA_IOMAPSIZE:
			/* as the connect data carries it: 8-bit scaled */
			v = v < 0 ? 0 : v > 0xffff ? 0xffff : v;
			rs->iomap_size = (uint16_t)rs_scale_to_value(
				(uint8_t)rs_value_to_scale(v, 8), 8);
			return 0;
		}
		break;
	}
	return -ENOTSUP;
}

CM_EXPORT int rsetsockopt(int s, int level, int name, const void *val,
			  socklen_t len)
{
	struct rsocket *rs = rs_lookup(s);
	int v = 0, ret;

	if (!rs)
		return setsockopt(s, level, name, val, len);
	/* a datagram rsocket's UDP socket takes the socket options too */
	if (rs->ds && level != SOL_RDMA) {
		if (setsockopt(s, level, name, val, len))
			return -1;
		if (int_opt(val, len, &v))
			return 0;
		pthread_mutex_lock(&rs->lock);
		set_opt(rs, level, name, v);
		pthread_mutex_unlock(&rs->lock);
		return 0;
	}
	/* the route comes from our own CM: a path given here is not needed */
	if (level == SOL_RDMA && name == RDMA_ROUTE)
		return 0;
	if (level == SOL_SOCKET && name == SO_LINGER)
		return 0;
	ret = int_opt(val, len, &v);
	if (!ret) {
		pthread_mutex_lock(&rs->lock);
		ret = set_opt(rs, level, name, v);
		pthread_mutex_unlock(&rs->lock);
	}
	return (int)sret(ret);
}

/* the segment size a TCP program asks for: the RDMA path MTU */
static int path_mss(struct rsocket *rs)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (rs->id->qp && !ibv_query_qp(rs->id->qp, &a, IBV_QP_PATH_MTU, &ia) &&
	    a.path_mtu >= IBV_MTU_256 && a.path_mtu <= IBV_MTU_4096)
		return 128 << a.path_mtu;
	return 1024;
}

/*
 * TCP_INFO: what a TCP program reads after a transfer (iperf3 reads its
 * retransmits and window).  The state and segment size are real; there
 * are no TCP retransmits or congestion window to report: zeros.
 */
static int tcp_info(struct rsocket *rs, void *val, socklen_t *len)
{
	struct tcp_info ti;
	socklen_t n = *len < sizeof(ti) ? *len : sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	pthread_mutex_lock(&rs->lock);
	if (rs->state & RS_LISTENING)
		ti.tcpi_state = TCP_LISTEN;
	else if (rs->state & RS_OPENING)
		ti.tcpi_state = TCP_SYN_SENT;
	else if (rs->state & RS_CONNECTED)
		ti.tcpi_state = (rs->state & RS_READABLE) ? TCP_ESTABLISHED :
							    TCP_CLOSE_WAIT;
	else
		ti.tcpi_state = TCP_CLOSE;
	ti.tcpi_snd_mss = ti.tcpi_rcv_mss = (uint32_t)path_mss(rs);
	pthread_mutex_unlock(&rs->lock);
	memcpy(val, &ti, n);
	*len = n;
	return 0;
}

static int get_opt(struct rsocket *rs, int level, int name, int *v)
{
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR:
			*v = rs->reuseaddr;
			return 0;
		case SO_KEEPALIVE:
			*v = rs->keepalive;
			return 0;
		case SO_SNDBUF:
			*v = (int)rs->sbuf_size;
			return 0;
		case SO_RCVBUF:
			*v = (int)rs->rbuf_size;
			return 0;
		case SO_TYPE:
			*v = SOCK_STREAM;
			return 0;
		case SO_ERROR:
			*v = rs->err;
			rs->err = 0;
			return 0;
		}
		break;
	case IPPROTO_TCP:
		switch (name) {
		case TCP_NODELAY:
			*v = rs->nodelay;
			return 0;
		case TCP_KEEPIDLE:
			*v = rs->keepidle ? rs->keepidle : 7200;
			return 0;
		case TCP_MAXSEG:
			*v = path_mss(rs);
			return 0;
		}
		break;
	case IPPROTO_IPV6:
		if (name == IPV6_V6ONLY) {
			*v = rs->v6only;
			return 0;
		}
		break;
	case SOL_RDMA:
		switch (name) {
		case RDMA_SQSIZE:
			*v = rs->sq_size;
			return 0;
		case RDMA_RQSIZE:
			*v = rs->rq_size;
			return 0;
		case RDMA_INLINE:
			*v = rs->sq_inline;
			return 0;
		case RDMA_IOMAPSIZE:
			*v = rs->iomap_size;
			return 0;
		}
		break;
	}
	return -ENOTSUP;
}

CM_EXPORT int rgetsockopt(int s, int level, int name, void *val, socklen_t *len)
{
	struct rsocket *rs = rs_lookup(s);
	int v = 0, ret;

	if (!rs || (rs->ds && level != SOL_RDMA))
		return getsockopt(s, level, name, val, len);
	if (!val || !len || *len < sizeof(int))
		return fail(EINVAL);
	if (level == SOL_SOCKET && name == SO_LINGER) {
		struct linger l = { 0, 0 };

		if (*len < sizeof(l))
			return fail(EINVAL);
		memcpy(val, &l, sizeof(l));
		*len = sizeof(l);
		return 0;
	}
	if (level == IPPROTO_TCP && name == TCP_INFO)
		return tcp_info(rs, val, len);
	pthread_mutex_lock(&rs->lock);
	if (level == SOL_SOCKET && name == SO_ERROR)
		KEEP_ERRNO(rs_process_cm(rs));
	ret = get_opt(rs, level, name, &v);
	pthread_mutex_unlock(&rs->lock);
	if (ret)
		return (int)sret(ret);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(v);
	return 0;
}

/* as glibc's fcntl does, the one optional argument is read as a pointer */
CM_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rsocket *rs;
	va_list ap;
	void *arg;
	int ret = 0;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	rs = rs_lookup(s);
	if (!rs)
		return fcntl(s, cmd, arg);
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		pthread_mutex_lock(&rs->lock);
		ret = rs_set_nonblock(rs, (long)arg & O_NONBLOCK);
		pthread_mutex_unlock(&rs->lock);
		return (int)sret(ret);
	case F_GETFD:
	case F_SETFD:
		return fcntl(s, cmd, arg);
	default:
		return fail(ENOTSUP);
	}
}

/*
 * riomap: the peer may riowrite into buf at offsets [offset, offset+len)
 * (PROT_WRITE), told with the next message; -1 chooses the address.
 */
CM_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags,
		       off_t offset)
{
	struct rsocket *rs = rs_lookup(s);
	off_t r;

	(void)flags;
	if (!rs)
		return fail(ENOTSOCK);
	if (rs->ds)
		return fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	r = rs_iomap_add(rs, buf, len, prot, offset);
	pthread_mutex_unlock(&rs->lock);
	return r < 0 ? fail((int)-r) : r;
}

CM_EXPORT int riounmap(int s, void *buf, size_t len)
{
	struct rsocket *rs = rs_lookup(s);
	int r;

	if (!rs)
		return fail(ENOTSOCK);
	if (rs->ds)
		return fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	r = rs_iomap_remove(rs, buf, len);
	pthread_mutex_unlock(&rs->lock);
	return (int)sret(r);
}

/* as rdma-core: the bytes written, or (size_t)-1 with errno */
CM_EXPORT size_t riowrite(int s, const void *buf, size_t len, off_t offset,
			  int flags)
{
	struct rsocket *rs = rs_lookup(s);
	ssize_t r;

	if (!rs)
		return (size_t)fail(ENOTSOCK);
	if (rs->ds)
		return (size_t)fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	atomic_fetch_add_explicit(&rs->sends, 1, memory_order_relaxed);
	r = KEEP_ERRNO(rs_iowrite(rs, buf, len, offset, flags));
	pthread_mutex_unlock(&rs->lock);
	return (size_t)sret(r);
}
