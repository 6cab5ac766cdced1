// SPDX-License-Identifier: MIT
/* Registered descriptors (core/watch.h). */
#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>

#include "core/core.h"
#include "core/watch.h"

int uroce_watcher_add_shared(int epfd, struct uroce_watcher *w, int fd,
			     uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epfd < 0 || fd < 0)
		return -EBADF;
	return uroce_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int uroce_watcher_add(int epfd, struct uroce_watcher *w, int fd, uint32_t events)
{
	w->fd = fd;
	return uroce_watcher_add_shared(epfd, w, fd, events);
}

void uroce_watcher_del(int epfd, struct uroce_watcher *w)
{
	if (epfd >= 0 && w->fd >= 0)
		uroce_epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
}
