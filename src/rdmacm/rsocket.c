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
#include <stdlib.h>
#include <unistd.h>
#include <sys/uio.h>
#include <rdma/rsocket.h>

#include "cm.h"
#include "rs.h"

/* rsocket numbers are descriptors, so a flat table indexed by them */
static pthread_mutex_t rs_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsocket **rs_table;
static int rs_table_size;

struct rsocket *rs_lookup(int fd)
{
	struct rsocket *rs = NULL;

	if (fd < 0)
		return NULL;
	pthread_mutex_lock(&rs_table_lock);
	if (fd < rs_table_size)
		rs = rs_table[fd];
	pthread_mutex_unlock(&rs_table_lock);
	return rs;
}

CM_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain;
	(void)type;
	(void)protocol;
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	if (!rs_lookup(s))
		return bind(s, addr, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rlisten(int s, int backlog)
{
	if (!rs_lookup(s))
		return listen(s, backlog);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	if (!rs_lookup(s))
		return accept(s, addr, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	if (!rs_lookup(s))
		return connect(s, addr, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rshutdown(int s, int how)
{
	if (!rs_lookup(s))
		return shutdown(s, how);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rclose(int s)
{
	if (!rs_lookup(s))
		return close(s);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	if (!rs_lookup(s))
		return recv(s, buf, len, flags);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags,
			    struct sockaddr *addr, socklen_t *alen)
{
	if (!rs_lookup(s))
		return recvfrom(s, buf, len, flags, addr, alen);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	if (!rs_lookup(s))
		return recvmsg(s, msg, flags);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rread(int s, void *buf, size_t len)
{
	if (!rs_lookup(s))
		return read(s, buf, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	if (!rs_lookup(s))
		return readv(s, iov, iovcnt);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	if (!rs_lookup(s))
		return send(s, buf, len, flags);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags,
			  const struct sockaddr *addr, socklen_t alen)
{
	if (!rs_lookup(s))
		return sendto(s, buf, len, flags, addr, alen);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	if (!rs_lookup(s))
		return sendmsg(s, msg, flags);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rwrite(int s, const void *buf, size_t len)
{
	if (!rs_lookup(s))
		return write(s, buf, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	if (!rs_lookup(s))
		return writev(s, iov, iovcnt);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	if (!rs_lookup(s))
		return getpeername(s, addr, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	if (!rs_lookup(s))
		return getsockname(s, addr, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rsetsockopt(int s, int level, int name, const void *val,
			  socklen_t len)
{
	if (!rs_lookup(s))
		return setsockopt(s, level, name, val, len);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rgetsockopt(int s, int level, int name, void *val,
			  socklen_t *len)
{
	if (!rs_lookup(s))
		return getsockopt(s, level, name, val, len);
	errno = ENOSYS;
	return -1;
}

/* as glibc's fcntl does, the one optional argument is read as a pointer */
CM_EXPORT int rfcntl(int s, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!rs_lookup(s))
		return fcntl(s, cmd, arg);
	errno = ENOSYS;
	return -1;
}

CM_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags,
		       off_t offset)
{
	(void)buf; (void)len; (void)prot; (void)flags; (void)offset;
	errno = rs_lookup(s) ? ENOSYS : ENOTSOCK;
	return -1;
}

CM_EXPORT int riounmap(int s, void *buf, size_t len)
{
	(void)buf; (void)len;
	errno = rs_lookup(s) ? ENOSYS : ENOTSOCK;
	return -1;
}

CM_EXPORT size_t riowrite(int s, const void *buf, size_t len, off_t offset,
			  int flags)
{
	(void)buf; (void)len; (void)offset; (void)flags;
	errno = rs_lookup(s) ? ENOSYS : ENOTSOCK;
	return 0;
}
