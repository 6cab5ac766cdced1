// SPDX-License-Identifier: MIT
/*
 * rpoll and rselect.  librspreload sends every select and every poll that
 * names an rsocket here, with ordinary descriptors among them: a set with
 * no rsocket in it is the kernel's poll or select itself, unchanged.
 *
 * With rsockets in the set: each rsocket's state is computed from its
 * completions and CM events without blocking, the ordinary descriptors
 * are polled with a zero timeout; if nothing is ready, every rsocket's CQ
 * is armed (and looked at once more), and one sleep (rs_sleep: with the
 * device's packets) watches the ordinary descriptors, the rsockets' CQ
 * channels and CM channels.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

static short listen_revents(struct rsocket *rs)
{
	struct pollfd p = { .fd = rs->ch->fd, .events = POLLIN };

	return poll(&p, 1, 0) > 0 ? (p.revents & POLLIN) : 0;
}

/* what the rsocket reports now; reads its completions and CM events */
static short rs_revents(struct rsocket *rs, short events)
{
	short r = 0;

	pthread_mutex_lock(&rs->lock);
	if (rs->ds) {
		r = rs_ds_revents(rs);
		goto out;
	}
	if (rs->state & RS_LISTENING) {
		r = listen_revents(rs);
		goto out;
	}
	rs_process_cm(rs);
	rs_process_cq(rs);
	if (rs->state & RS_OPENING)
		goto out;
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR))) {
		/* as a TCP socket that was never connected */
		r = POLLOUT | POLLHUP;
		goto out;
	}
	if (rs_have_rdata(rs) || !(rs->state & RS_READABLE))
		r |= POLLIN;
	if (!(rs->state & RS_WRITABLE) || rs_can_send(rs))
		r |= POLLOUT;
	if (rs->state & RS_ERROR)
		r |= POLLERR;
	/* a hang-up once what the peer sent before it closed is read */
	if (!(rs->state & (RS_READABLE | RS_WRITABLE)) && !rs_have_rdata(rs))
		r |= POLLHUP;
	/* waited on, and nothing for the caller: a keepalive may be due */
	if (!(r & (events | POLLERR | POLLHUP)))
		rs_probe_if_quiet(rs);
out:
	pthread_mutex_unlock(&rs->lock);
	return r & (events | POLLERR | POLLHUP);
}

/* arms every rsocket's CQ; 1 if one of them is ready after all */
static int arm_all(struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++) {
		struct rsocket *rs = rs_lookup(fds[i].fd);
		bool armed;

		if (!rs)
			continue;
		pthread_mutex_lock(&rs->lock);
		armed = rs_arm(rs);
		pthread_mutex_unlock(&rs->lock);
		if (armed && rs_revents(rs, fds[i].events))
			return 1;
	}
	return 0;
}

static int check_all(struct pollfd *fds, nfds_t nfds, struct pollfd *kfds)
{
	nfds_t nk = 0;
	int cnt = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		struct rsocket *rs = rs_lookup(fds[i].fd);

		if (rs) {
			fds[i].revents = rs_revents(rs, fds[i].events);
		} else {
			kfds[nk] = fds[i];
			kfds[nk++].revents = 0;
		}
	}
	if (nk && poll(kfds, nk, 0) < 0)
		return -1;
	nk = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		if (!rs_lookup(fds[i].fd))
			fds[i].revents = kfds[nk++].revents;
		if (fds[i].revents)
			cnt++;
	}
	return cnt;
}

/*
 * The descriptors one sleep watches: ordinary ones, then two per
 * rsocket; *ctx: the device of every rsocket with a CQ, NULL if none
 * has one or they are on several (rs_sleep is then poll()).
 */
static nfds_t sleep_set(struct pollfd *fds, nfds_t nfds, struct pollfd *s,
			struct ibv_context **ctx)
{
	bool several = false;
	nfds_t n = 0;

	*ctx = NULL;
	for (nfds_t i = 0; i < nfds; i++) {
		struct rsocket *rs = rs_lookup(fds[i].fd);

		if (!rs) {
			s[n++] = fds[i];
			continue;
		}
		if (rs->cc && *ctx && rs->cc->context != *ctx)
			several = true;
		else if (rs->cc)
			*ctx = rs->cc->context;
		s[n++] = (struct pollfd){ .fd = rs->fd, .events = POLLIN };
		s[n++] = (struct pollfd){ .fd = rs->cc ? rs->cc->fd : -1,
					  .events = POLLIN };
	}
	if (several)
		*ctx = NULL;
	return n;
}

static void drain_all(struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++) {
		struct rsocket *rs = rs_lookup(fds[i].fd);

		if (!rs)
			continue;
		pthread_mutex_lock(&rs->lock);
		rs_drain_cq_events(rs);
		pthread_mutex_unlock(&rs->lock);
	}
}

static int rpoll_rsockets(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pollfd *kfds = calloc(nfds * 2 + 1, sizeof(*kfds));
	int64_t end = timeout > 0 ? rs_now_ms() + timeout : 0;
	int ret;

	if (!kfds) {
		errno = ENOMEM;
		return -1;
	}
	for (;;) {
		int left = timeout;

		ret = check_all(fds, nfds, kfds);
		if (ret || !timeout)
			break;
		if (arm_all(fds, nfds))
			continue;
		if (timeout > 0) {
			int64_t d = end - rs_now_ms();

			if (d <= 0)
				break;
			left = (int)d;
		}
		struct ibv_context *ctx;
		nfds_t n = sleep_set(fds, nfds, kfds, &ctx);
		int woke;

		/* sleeps of at most RS_IDLE_PROBE_MS: a keepalive may be due
		 * (check_all) */
		if (left < 0 || left > RS_IDLE_PROBE_MS)
			left = RS_IDLE_PROBE_MS;
		/* a signal handler ends the wait (EINTR), as it ends
		 * poll's and select's whatever SA_RESTART says: a program
		 * whose handler sets a flag (nginx's SIGTERM) looks at it
		 * when its wait returns */
		woke = rs_sleep(ctx, kfds, n, left);
		if (woke < 0) {
			ret = -1;
			break;
		}
		drain_all(fds, nfds);
	}
	free(kfds);
	return ret;
}

CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	int saved = errno, ret;

	if (!any_rsocket(fds, nfds))
		return poll(fds, nfds, timeout);
	ret = rpoll_rsockets(fds, nfds, timeout);
	/* what it found inside (EAGAIN) is not the caller's errno */
	if (ret >= 0)
		errno = saved;
	return ret;
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

static int select_rsockets(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			   struct timeval *tv)
{
	struct pollfd *fds = calloc((size_t)nfds + 1, sizeof(*fds));
	int n = 0, ret, cnt = 0;

	if (!fds) {
		errno = ENOMEM;
		return -1;
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (rd && FD_ISSET(fd, rd))
			ev |= POLLIN;
		if (wr && FD_ISSET(fd, wr))
			ev |= POLLOUT;
		if (ev || (ex && FD_ISSET(fd, ex)))
			fds[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	ret = rpoll(fds, (nfds_t)n,
		    tv ? (int)(tv->tv_sec * 1000 + tv->tv_usec / 1000) : -1);
	if (rd)
		FD_ZERO(rd);
	if (wr)
		FD_ZERO(wr);
	if (ex)
		FD_ZERO(ex);
	for (int i = 0; ret > 0 && i < n; i++) {
		if (fds[i].revents & POLLNVAL) {
			errno = EBADF;
			cnt = -1;
			break;
		}
		if (rd && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    (fds[i].events & POLLIN)) {
			FD_SET(fds[i].fd, rd);
			cnt++;
		}
		if (wr && (fds[i].revents & (POLLOUT | POLLERR)) &&
		    (fds[i].events & POLLOUT)) {
			FD_SET(fds[i].fd, wr);
			cnt++;
		}
		if (ex && (fds[i].revents & POLLPRI)) {
			FD_SET(fds[i].fd, ex);
			cnt++;
		}
	}
	free(fds);
	return ret < 0 ? ret : cnt;
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
	return select_rsockets(nfds, readfds, writefds, exceptfds, timeout);
}
