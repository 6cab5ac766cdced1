// SPDX-License-Identifier: MIT
/*
 * rsockets (rdma/rsocket.h) are outside what uroce implements: every call
 * exists, so that BIND_NOW programs load, and fails with ENOSYS.
 */
#include <errno.h>
#include <rdma/rsocket.h>

#include "cm.h"

#define NOSYS(ret)	do { errno = ENOSYS; return (ret); } while (0)

CM_EXPORT int rsocket(int domain, int type, int protocol) { NOSYS(-1); }
CM_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l) { NOSYS(-1); }
CM_EXPORT int rlisten(int s, int backlog) { NOSYS(-1); }
CM_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l) { NOSYS(-1); }
CM_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l) { NOSYS(-1); }
CM_EXPORT int rshutdown(int s, int how) { NOSYS(-1); }
CM_EXPORT int rclose(int s) { NOSYS(-1); }
CM_EXPORT ssize_t rrecv(int s, void *b, size_t n, int f) { NOSYS(-1); }
CM_EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f,
			    struct sockaddr *a, socklen_t *l) { NOSYS(-1); }
CM_EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f) { NOSYS(-1); }
CM_EXPORT ssize_t rsend(int s, const void *b, size_t n, int f) { NOSYS(-1); }
CM_EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f,
			  const struct sockaddr *a, socklen_t l) { NOSYS(-1); }
CM_EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f) { NOSYS(-1); }
CM_EXPORT ssize_t rread(int s, void *b, size_t n) { NOSYS(-1); }
CM_EXPORT ssize_t rreadv(int s, const struct iovec *v, int n) { NOSYS(-1); }
CM_EXPORT ssize_t rwrite(int s, const void *b, size_t n) { NOSYS(-1); }
CM_EXPORT ssize_t rwritev(int s, const struct iovec *v, int n) { NOSYS(-1); }
CM_EXPORT int rpoll(struct pollfd *fds, nfds_t n, int t) { NOSYS(-1); }
CM_EXPORT int rselect(int n, fd_set *r, fd_set *w, fd_set *e,
		      struct timeval *t) { NOSYS(-1); }
CM_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l) { NOSYS(-1); }
CM_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l) { NOSYS(-1); }
CM_EXPORT int rsetsockopt(int s, int level, int name, const void *v,
			  socklen_t l) { NOSYS(-1); }
CM_EXPORT int rgetsockopt(int s, int level, int name, void *v,
			  socklen_t *l) { NOSYS(-1); }
CM_EXPORT int rfcntl(int s, int cmd, ...) { NOSYS(-1); }
CM_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags,
		       off_t off) { NOSYS(-1); }
CM_EXPORT int riounmap(int s, void *b, size_t n) { NOSYS(-1); }
CM_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t off,
			  int flags)
{
	errno = ENOSYS;
	return 0;
}
