// SPDX-License-Identifier: MIT
/*
 * repoll_create, repoll_ctl, repoll_wait: epoll over rsockets and ordinary
 * descriptors together (rdma-core's RDMACM_1.5, which a librspreload of
 * rdma-core 2026 or later calls for every epoll_* of the program it is
 * preloaded into).  docs/rsocket.md, "epoll".
 *
 * An instance is a kernel epoll descriptor (what repoll_create returns),
 * which holds the ordinary descriptors with the kernel's own semantics
 * (edge triggering, EPOLLONESHOT, EPOLLEXCLUSIVE), and a list of the
 * rsockets added to it.  Those are level-triggered but for EPOLLOUT under
 * EPOLLET, which is reported again only after a send call (nginx keeps
 * EPOLLOUT | EPOLLET on every connection: level-triggered, each wait
 * would return at once); EPOLLONESHOT holds.
 * A wait is one rpoll over the kernel descriptor, an eventfd that
 * repoll_ctl rings when the list changes, and the listed rsockets; then
 * the rsockets that are ready, and the kernel's events without waiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <rdma/rsocket.h>

#include "cm.h"
#include "rs.h"

/* what an rsocket can report, of what epoll_ctl asks */
#define EP_RS_EVENTS (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP)

struct ep_item {
	int fd;
	uint32_t events; /* as added; 0 once a one-shot reported */
	epoll_data_t data;
	bool out_told; /* EPOLLET: EPOLLOUT reported, at send call out_at */
	unsigned int out_at;
};

struct repoll {
	struct repoll *next;  /* in ep_list */
	int kfd;	      /* the kernel epoll: the instance's descriptor */
	int bell;	      /* eventfd: the rsocket list changed */
	int refs;	      /* under ep_lock */
	pthread_mutex_t lock; /* items, n, cap, turn */
	struct ep_item *items;
	int n, cap;
	unsigned int turn; /* which goes first: rotates for fairness */
};

static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct repoll *ep_list;
static _Atomic int ep_count; /* instances: rclose looks only if any */

static int fail(int err)
{
	errno = err;
	return -1;
}

static struct repoll *ep_get(int epfd)
{
	struct repoll *ep;

	pthread_mutex_lock(&ep_lock);
	for (ep = ep_list; ep && ep->kfd != epfd; ep = ep->next)
		;
	if (ep)
		ep->refs++;
	pthread_mutex_unlock(&ep_lock);
	return ep;
}

static void ep_free(struct repoll *ep)
{
	close(ep->bell);
	close(ep->kfd);
	pthread_mutex_destroy(&ep->lock);
	free(ep->items);
	free(ep);
}

static void ep_put(struct repoll *ep)
{
	bool last;

	pthread_mutex_lock(&ep_lock);
	last = !--ep->refs;
	pthread_mutex_unlock(&ep_lock);
	if (last)
		ep_free(ep);
}

/* not an instance: EBADF for a closed descriptor, EINVAL for another */
static int not_epoll(int epfd)
{
	return fail(fcntl(epfd, F_GETFD) < 0 ? EBADF : EINVAL);
}

CM_EXPORT int repoll_create(int flags)
{
	struct repoll *ep = calloc(1, sizeof(*ep));
	int err;

	if (!ep)
		return fail(ENOMEM);
	ep->kfd = uroce_epoll_create1(flags); /* EINVAL for any flag but CLOEXEC */
	if (ep->kfd < 0) {
		err = errno;
		free(ep);
		return fail(err);
	}
	ep->bell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ep->bell < 0) {
		err = errno;
		close(ep->kfd);
		free(ep);
		return fail(err);
	}
	pthread_mutex_init(&ep->lock, NULL);
	ep->refs = 1;
	pthread_mutex_lock(&ep_lock);
	ep->next = ep_list;
	ep_list = ep;
	atomic_fetch_add(&ep_count, 1);
	pthread_mutex_unlock(&ep_lock);
	return ep->kfd;
}

static struct ep_item *ep_find(struct repoll *ep, int fd)
{
	for (int i = 0; i < ep->n; i++)
		if (ep->items[i].fd == fd)
			return &ep->items[i];
	return NULL;
}

/* an rsocket in the instance's list; ep->lock held */
static int ep_ctl_rs(struct repoll *ep, int op, int fd,
		     const struct epoll_event *ev)
{
	struct ep_item *it = ep_find(ep, fd);

	switch (op) {
	case EPOLL_CTL_ADD:
		if (it)
			return -EEXIST;
		if (ep->n == ep->cap) {
			int cap = ep->cap ? 2 * ep->cap : 8;
			struct ep_item *n = realloc(ep->items,
						    (size_t)cap * sizeof(*n));

			if (!n)
				return -ENOMEM;
			ep->items = n;
			ep->cap = cap;
		}
		it = &ep->items[ep->n++];
		it->fd = fd;
		break;
	case EPOLL_CTL_MOD:
		if (!it)
			return -ENOENT;
		break;
	case EPOLL_CTL_DEL:
		if (!it)
			return -ENOENT;
		*it = ep->items[--ep->n];
		return 0;
	default:
		return -EINVAL;
	}
	it->events = ev->events;
	it->data = ev->data;
	it->out_told = false;
	return 0;
}

static unsigned int rs_sends(int fd)
{
	struct rsocket *rs = rs_lookup(fd);

	return rs ? atomic_load_explicit(&rs->sends, memory_order_relaxed) : 0;
}

/* what a wait asks of an rsocket: EPOLLET's EPOLLOUT once told only
 * after another send call */
static short ep_asks(const struct ep_item *it)
{
	uint32_t e = it->events & EP_RS_EVENTS;

	if ((it->events & EPOLLET) && it->out_told &&
	    it->out_at == rs_sends(it->fd))
		e &= ~(uint32_t)EPOLLOUT;
	return (short)e;
}

CM_EXPORT int repoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	struct repoll *ep;
	uint64_t one = 1;
	int err;

	/* the kernel's (by its system call: core/core.h says why) */
	if (!rs_lookup(fd))
		return uroce_epoll_ctl(epfd, op, fd, event);
	ep = ep_get(epfd);
	if (!ep)
		return not_epoll(epfd);
	if (!event && op != EPOLL_CTL_DEL) {
		ep_put(ep);
		return fail(EFAULT);
	}
	pthread_mutex_lock(&ep->lock);
	err = ep_ctl_rs(ep, op, fd, event);
	pthread_mutex_unlock(&ep->lock);
	/* a waiter rebuilds its set */
	if (!err && write(ep->bell, &one, sizeof(one)) < 0)
		err = 0; /* (the counter is full: it is rung) */
	ep_put(ep);
	return err ? fail(-err) : 0;
}

/* ms left until deadline (rs_now_ms); timeout < 0: -1 */
static int ms_left(int timeout, int64_t deadline)
{
	int64_t d;

	if (timeout <= 0)
		return timeout;
	d = deadline - rs_now_ms();
	return d > 0 ? (int)d : 0;
}

/*
 * The rsockets that rpoll found ready, from the rotating start; each
 * still listed and armed when it is collected.  ep->lock held.
 */
static int ep_collect_rs(struct repoll *ep, const struct pollfd *p, int np,
			 struct epoll_event *ev, int max)
{
	int k = 0;

	for (int j = 0; j < np && k < max; j++) {
		const struct pollfd *q = &p[(j + ep->turn) % np];
		struct ep_item *it = q->revents ? ep_find(ep, q->fd) : NULL;
		uint32_t r;

		if (!it || !(it->events & EP_RS_EVENTS))
			continue;
		r = (uint32_t)(q->revents & (ep_asks(it) | POLLERR | POLLHUP));
		if (!r)
			continue;
		if ((it->events & EPOLLET) && (r & EPOLLOUT)) {
			it->out_told = true;
			it->out_at = rs_sends(it->fd);
		}
		ev[k].events = r;
		ev[k++].data = it->data;
		if (it->events & EPOLLONESHOT)
			it->events = 0; /* until EPOLL_CTL_MOD */
	}
	return k;
}

static int ep_wait(struct repoll *ep, struct epoll_event *ev, int max,
		   int timeout)
{
	struct pollfd *p = NULL;
	int64_t deadline = timeout > 0 ? rs_now_ms() + timeout : 0;
	int cap = 0;

	for (;;) {
		int np = 0, k = 0, r;
		uint64_t v;

		/* the set: the kernel's epoll, the bell, the armed rsockets */
		pthread_mutex_lock(&ep->lock);
		if (ep->n + 2 > cap) {
			struct pollfd *n = realloc(p, (size_t)(ep->n + 2) *
							      sizeof(*n));

			if (!n) {
				pthread_mutex_unlock(&ep->lock);
				free(p);
				return -ENOMEM;
			}
			p = n;
			cap = ep->n + 2;
		}
		p[0] = (struct pollfd){ .fd = ep->kfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = ep->bell, .events = POLLIN };
		for (int i = 0; i < ep->n; i++) {
			const struct ep_item *it = &ep->items[i];

			if (!(it->events & EP_RS_EVENTS))
				continue;
			p[2 + np].fd = it->fd;
			p[2 + np].events = ep_asks(it);
			p[2 + np++].revents = 0;
		}
		pthread_mutex_unlock(&ep->lock);

		r = rpoll(p, (nfds_t)np + 2, ms_left(timeout, deadline));
		if (r < 0) {
			r = -errno;
			free(p);
			return r;
		}
		if (p[1].revents && read(ep->bell, &v, sizeof(v)) < 0)
			v = 0; /* (another waiter drained it) */
		pthread_mutex_lock(&ep->lock);
		/* the kernel's events first every other wait, so that
		 * neither kind starves the other of room */
		if ((ep->turn & 1) && p[0].revents) {
			r = uroce_epoll_wait(ep->kfd, ev, max, 0);
			k = r > 0 ? r : 0;
		}
		k += ep_collect_rs(ep, p + 2, np, ev + k, max - k);
		if (!(ep->turn & 1) && p[0].revents && k < max) {
			r = uroce_epoll_wait(ep->kfd, ev + k, max - k, 0);
			k += r > 0 ? r : 0;
		}
		ep->turn++;
		pthread_mutex_unlock(&ep->lock);
		if (k || !ms_left(timeout, deadline)) {
			free(p);
			return k;
		}
	}
}

CM_EXPORT int repoll_wait(int epfd, struct epoll_event *events, int maxevents,
			  int timeout)
{
	struct repoll *ep = ep_get(epfd);
	int r;

	if (!ep)
		return not_epoll(epfd);
	if (maxevents <= 0 || !events) {
		ep_put(ep);
		return fail(maxevents <= 0 ? EINVAL : EFAULT);
	}
	r = ep_wait(ep, events, maxevents, timeout);
	ep_put(ep);
	return r < 0 ? fail(-r) : r;
}

/* rclose of an rsocket: out of every instance, as a closed descriptor
 * leaves the kernel's epoll sets */
void rs_epoll_forget(int fd)
{
	if (!atomic_load(&ep_count))
		return;
	pthread_mutex_lock(&ep_lock);
	for (struct repoll *ep = ep_list; ep; ep = ep->next) {
		pthread_mutex_lock(&ep->lock);
		ep_ctl_rs(ep, EPOLL_CTL_DEL, fd, NULL);
		pthread_mutex_unlock(&ep->lock);
	}
	pthread_mutex_unlock(&ep_lock);
}

/* rclose of an instance: true if fd was one (then it is closed) */
bool rs_epoll_close(int fd)
{
	struct repoll **pp, *ep = NULL;

	if (!atomic_load(&ep_count))
		return false;
	pthread_mutex_lock(&ep_lock);
	for (pp = &ep_list; *pp; pp = &(*pp)->next)
		if ((*pp)->kfd == fd) {
			ep = *pp;
			*pp = ep->next;
			atomic_fetch_sub(&ep_count, 1);
			break;
		}
	pthread_mutex_unlock(&ep_lock);
	if (!ep)
		return false;
	ep_put(ep);
	return true;
}
