/* SPDX-License-Identifier: MIT */
/*
 * The descriptors the progress thread watches (docs/progress.md, "The
 * descriptors"): each is a watcher, registered once with its callback
 * and found from the epoll event (data.ptr), never by matching the
 * descriptor against the tables of its owners.
 *
 * A watcher lives as long as the device (a fixed slot of its owner:
 * dev->prog, dev->net, the rings' tables), not as long as what it
 * watches: the events of one epoll_wait may still name it after another
 * thread removed it.  So a callback finds what it watches from the slot
 * and checks, under its owner's lock, that it is still there.
 */
#ifndef UROCE_CORE_WATCH_H
#define UROCE_CORE_WATCH_H

#include <stdbool.h>
#include <stdint.h>

struct uroce_dev;
struct uroce_watcher;

/* fd was ready: 1 if packets may wait (the thread receives as for the
 * socket), 0 if handled */
typedef int uroce_watch_fn(struct uroce_dev *dev, struct uroce_watcher *w);

struct uroce_watcher {
	uroce_watch_fn *fn;
	int fd;	      /* what uroce_watcher_add registered, for its removal */
	bool packets; /* a device's packets (socket, doorbell): left to a
		       * thread asleep in uroce_progress_wait */
};

/* watch fd in epfd for events with w (fn and packets set once by the
 * owner); 0 or -errno */
int uroce_watcher_add(int epfd, struct uroce_watcher *w, int fd,
		      uint32_t events);
/* ... one of the descriptors a watcher shared by several watches (the
 * shared address's members: each is removed by its own descriptor,
 * w->fd is left alone) */
int uroce_watcher_add_shared(int epfd, struct uroce_watcher *w, int fd,
			     uint32_t events);
/* stop watching w's descriptor in epfd (before it is closed) */
void uroce_watcher_del(int epfd, struct uroce_watcher *w);

#endif /* UROCE_CORE_WATCH_H */
