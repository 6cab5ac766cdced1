// SPDX-License-Identifier: MIT
/*
 * rpoll and rselect.  librspreload sends every select and every poll that
 * names an rsocket here, with ordinary descriptors among them: a set with
 * no rsocket in it is the kernel's poll or select itself, unchanged.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/select.h>
#include <rdma/rsocket.h>

#include "cm.h"
#include "rs.h"

static bool any_rsocket(const struct pollfd *fds, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		if (rs_lookup(fds[i].fd))
			return true;
	return false;
}

CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	if (!any_rsocket(fds, nfds))
		return poll(fds, nfds, timeout);
	errno = ENOSYS;
	return -1;
}

static bool any_rsocket_set(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
	for (int fd = 0; fd < nfds; fd++) {
		if (!(r && FD_ISSET(fd, r)) && !(w && FD_ISSET(fd, w)) &&
		    !(e && FD_ISSET(fd, e)))
			continue;
		if (rs_lookup(fd))
			return true;
	}
	return false;
}

CM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds,
		      fd_set *exceptfds, struct timeval *timeout)
{
	if (nfds < 0 || nfds > FD_SETSIZE) {
		errno = EINVAL;
		return -1;
	}
	if (!any_rsocket_set(nfds, readfds, writefds, exceptfds))
		return select(nfds, readfds, writefds, exceptfds, timeout);
	errno = ENOSYS;
	return -1;
}
