// SPDX-License-Identifier: MIT
/*
 * The shared device (share.c, docs/shared.md), receiving: the datagrams
 * that reach the wrong member are steered to their owner, forwarded
 * ones are taken, and a member's death is noticed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "share.h"
#include "uroce_shm.h"

/* ---- the datapath ---- */

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* The slot a QP1 MAD is for (0: none found): a REQ or SIDR REQ by the
 * service ID it asks for, every later MAD by the comm or request ID our
 * side chose, whose top byte is its slot (rdmacm/proto.c). */
static uint32_t gsi_slot(const struct uroce_share *sh, const uint8_t *buf,
			 size_t len, bool have_gsi)
{
	const uint8_t *mad = buf + MAD_OFF;
	uint32_t k, s = 0;
	uint16_t attr;
	uint64_t sid;

	if (len < MAD_OFF + MAD_DATA + 16 || mad[1] != CM_CLASS)
		return 0;
	attr = (uint16_t)(mad[16] << 8 | mad[17]);
	switch (attr) {
	case CM_REQ:
	case CM_SIDR_REQ:
		sid = get_be64(mad + MAD_DATA + 8);
		for (k = 0; k < UROCE_SHARE_LISTENS; k++)
			if (__atomic_load_n(&sh->seg->listen[k].sid,
					    __ATOMIC_ACQUIRE) == sid) {
				s = __atomic_load_n(&sh->seg->listen[k].slot,
						    __ATOMIC_RELAXED);
				break;
			}
		/* nobody listens: a member with a CM answers with the REJ
		 * (every listener has one), if we have none */
		for (k = 0; !s && !have_gsi && k < UROCE_SHARE_LISTENS; k++)
			if (__atomic_load_n(&sh->seg->listen[k].sid,
					    __ATOMIC_ACQUIRE))
				s = __atomic_load_n(&sh->seg->listen[k].slot,
						    __ATOMIC_RELAXED);
		break;
	case CM_SIDR_REP:
		s = get_be32(mad + MAD_DATA) >> 24;
		break;
	default:
		s = get_be32(mad + MAD_DATA + 4) >> 24;
		break;
	}
	return s;
}

_Static_assert(MAD_OFF + MAD_DATA + 16 <= UROCE_GSI_PEEK,
	       "uroce_share_gsi_dest's callers hand it what gsi_slot reads");

/* (a REQ for a service nobody here listens on: 0, the kernel's way) */
uint32_t uroce_share_gsi_dest(const struct uroce_dev *dev, const uint8_t *buf,
			      size_t len)
{
	const struct uroce_share *sh = dev->net.share;

	return sh ? gsi_slot(sh, buf, len, true) : 0;
}

/* ... and the member to forward it to (0: this one, or none) */
static uint32_t gsi_owner(struct uroce_dev *dev, struct uroce_share *sh,
			  const uint8_t *buf, size_t len)
{
	uint32_t s = gsi_slot(sh, buf, len, uroce_qp_has_gsi(dev));

	return s == sh->slot ? 0 : s;
}

/* The slot a datagram is for (0: ours, or nobody's), without the device
 * (the exit path); with the further ranges' owners. */
static uint32_t owner_of(const struct uroce_share *sh, const uint8_t *buf,
			 size_t len)
{
	uint32_t qpn = bth_qpn(buf), s;

	if (buf[0] == PROBE_OPCODE || qpn == UROCE_MCAST_QPN)
		return 0;
	s = qpn == GSI_QPN ? gsi_slot(sh, buf, len, true) : qpn >> 16;
	if (s && s < UROCE_SHARE_SLOTS && sh->seg->slot[s].owner &&
	    sh->seg->slot[s].owner < UROCE_SHARE_SLOTS)
		s = sh->seg->slot[s].owner;
	return s < UROCE_SHARE_SLOTS && s != sh->slot ? s : 0;
}

/*
 * The owner's queue is full.  An AF_UNIX datagram socket queues at most
 * net.unix.max_dgram_qlen datagrams (10 unless the namespace's root
 * raised it), and a burst of CM MADs to a listener, or a moved member's
 * datagrams after a close, is more than that while the owner's thread
 * wakes.  Dropped, a UC or UD datagram would be lost for good, so it
 * waits here behind any other for the same owner (its order kept) and is
 * sent again every FWD_RETRY_NS, and with each datagram we forward;
 * given up (share_fwd_lost) after FWD_HOLD_NS, or beyond FWD_HELD_MAX.
 */
#define FWD_RETRY_NS 50000ull
#define FWD_HOLD_NS  200000000ull
#define FWD_HELD_MAX 1024
#define FWD_LEAVE_NS 20000000ull /* leaving: waits for room this long */

/* 0 sent, -EAGAIN no room (yet), another -errno: nobody has the name */
static int fwd_sendv(struct uroce_share *sh, uint32_t s, struct iovec *iov,
		     int n)
{
	struct sockaddr_un un;
	struct msghdr m = { .msg_name = &un, .msg_iov = iov, .msg_iovlen = n };

	share_fwd_name(sh, s, &un, &m.msg_namelen);
	if (sendmsg(sh->fwd_fd, &m, MSG_DONTWAIT) >= 0)
		return 0;
	return errno == EWOULDBLOCK || errno == ENOBUFS ? -EAGAIN : -errno;
}

/* ... when it must go now (leaving): no room is waited for, a while */
static int fwd_send_patient(struct uroce_share *sh, uint32_t s,
			    struct iovec *iov, int n, uint64_t until_ns)
{
	const struct timespec nap = { .tv_nsec = 20000 };
	int err;

	while ((err = fwd_sendv(sh, s, iov, n)) == -EAGAIN &&
	       uroce_now_ns() < until_ns)
		nanosleep(&nap, NULL);
	return err;
}

static void fwd_dropped(struct uroce_dev *dev, struct uroce_share *sh, int err)
{
	uroce_count(dev,
		    err == -EAGAIN ? UROCE_CNT_SHARE_FWD_LOST :
				     UROCE_CNT_DROP_NO_OWNER,
		    1);
	__atomic_add_fetch(&sh->seg->fwd_drops, 1, __ATOMIC_RELAXED);
}

static void unhold(struct uroce_share *sh, struct share_held *e)
{
	TAILQ_REMOVE(&sh->held, e, link);
	sh->nheld--;
	sh->held_for[e->slot]--;
	free(e);
}

static void retry_arm(struct uroce_share *sh)
{
	struct itimerspec its = { .it_value.tv_nsec = FWD_RETRY_NS };

	if (sh->retry_fd >= 0)
		timerfd_settime(sh->retry_fd, 0, &its, NULL);
}

/* Sends what waits, each owner's in order (held_mu). */
static void held_flush(struct uroce_dev *dev, struct uroce_share *sh)
{
	uint64_t blocked[UROCE_SHARE_SLOTS / 64] = { 0 }, now = uroce_now_ns();
	struct share_held *e, *next;
	struct iovec iov;
	int err;

	for (e = TAILQ_FIRST(&sh->held); e; e = next) {
		next = TAILQ_NEXT(e, link);
		if (blocked[e->slot / 64] & 1ull << e->slot % 64)
			continue;
		iov = (struct iovec){ e->data, e->len };
		err = fwd_sendv(sh, e->slot, &iov, 1);
		if (err == -EAGAIN && now - e->since_ns < FWD_HOLD_NS) {
			blocked[e->slot / 64] |= 1ull << e->slot % 64;
			continue;
		}
		if (err)
			fwd_dropped(dev, sh, err);
		else
			uroce_count(dev, UROCE_CNT_SHARE_FWD_OUT, 1);
		unhold(sh, e);
	}
}

/* To member s, now or once its queue has room. */
static void forward(struct uroce_dev *dev, struct uroce_share *sh, uint32_t s,
		    const struct fwd_hdr *h, const uint8_t *buf, size_t len)
{
	struct iovec iov[2] = { { (void *)h, sizeof(*h) },
				{ (void *)buf, len } };
	struct share_held *e;
	int err;

	pthread_mutex_lock(&sh->held_mu);
	if (sh->nheld)
		held_flush(dev, sh);
	err = sh->held_for[s] ? -EAGAIN : fwd_sendv(sh, s, iov, 2);
	if (!err) {
		uroce_count(dev, UROCE_CNT_SHARE_FWD_OUT, 1);
	} else if (err == -EAGAIN && sh->nheld < FWD_HELD_MAX &&
		   (e = malloc(sizeof(*e) + sizeof(*h) + len))) {
		e->since_ns = uroce_now_ns();
		e->slot = s;
		e->len = (uint32_t)(sizeof(*h) + len);
		memcpy(e->data, h, sizeof(*h));
		memcpy(e->data + sizeof(*h), buf, len);
		TAILQ_INSERT_TAIL(&sh->held, e, link);
		sh->nheld++;
		sh->held_for[s]++;
		uroce_count(dev, UROCE_CNT_SHARE_FWD_HELD, 1);
		if (sh->nheld == 1)
			retry_arm(sh);
	} else {
		fwd_dropped(dev, sh, err);
	}
	pthread_mutex_unlock(&sh->held_mu);
}

void share_held_free(struct uroce_share *sh)
{
	struct share_held *e;

	while ((e = TAILQ_FIRST(&sh->held)))
		unhold(sh, e);
}

/*
 * Leaving: what the kernel queued on our socket before the program
 * without us took effect goes on to its owners rather than down with
 * the socket: another member's datagrams, and QP1 MADs the kernel picked
 * us for by hash (a DREQ lost so leaves its connection's passive side
 * waiting for ever).  Ours are dropped: we are going.  Locked.
 */
void share_forward_queued(struct uroce_share *sh, int sock)
{
	static uint8_t pkt[65536];
	uint8_t ctl[128];
	struct fwd_hdr h;
	struct sockaddr_storage src;
	struct share_held *e;
	uint64_t until = uroce_now_ns() + FWD_LEAVE_NS;
	int i;

	/* what waited for room first, in its order */
	pthread_mutex_lock(&sh->held_mu);
	while ((e = TAILQ_FIRST(&sh->held))) {
		struct iovec iov = { e->data, e->len };

		if (fwd_send_patient(sh, e->slot, &iov, 1, until))
			__atomic_add_fetch(&sh->seg->fwd_drops, 1,
					   __ATOMIC_RELAXED);
		unhold(sh, e);
	}
	pthread_mutex_unlock(&sh->held_mu);
	for (i = 0; i < 4096; i++) {
		struct iovec iov = { pkt, sizeof(pkt) }, out[2];
		struct msghdr m = {
			.msg_name = &src,
			.msg_namelen = sizeof(src),
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = ctl,
			.msg_controllen = sizeof(ctl),
		};
		struct sockaddr_storage dst = sh->local;
		struct cmsghdr *c;
		ssize_t len = recvmsg(sock, &m, MSG_DONTWAIT);
		size_t off, seg;
		int gro = 0;
		uint16_t k = 0;

		if (len < 0)
			break;
		if (m.msg_flags & MSG_TRUNC)
			continue;
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO)
				memcpy(&gro, CMSG_DATA(c), sizeof(gro));
			else if (c->cmsg_level == IPPROTO_IP &&
				 c->cmsg_type == IP_PKTINFO)
				memcpy(&((struct sockaddr_in *)&dst)->sin_addr,
				       &((struct in_pktinfo *)CMSG_DATA(c))
						->ipi_addr,
				       sizeof(struct in_addr));
			else if (c->cmsg_level == IPPROTO_IPV6 &&
				 c->cmsg_type == IPV6_PKTINFO)
				memcpy(&((struct sockaddr_in6 *)&dst)->sin6_addr,
				       &((struct in6_pktinfo *)CMSG_DATA(c))
						->ipi6_addr,
				       sizeof(struct in6_addr));
		}
		seg = gro > 0 && gro < len ? (size_t)gro : (size_t)len;
		/* datagram k of a GSO send had IPv4 identification k */
		for (off = 0; off < (size_t)len; off += seg, k++) {
			size_t l = (size_t)len - off < seg ? (size_t)len - off :
							     seg;
			uint32_t s;

			if (l < UROCE_BTH_LEN)
				continue;
			s = owner_of(sh, pkt + off, l);
			if (!s)
				continue;
			memset(&h, 0, sizeof(h));
			h.kind = FWD_PKT;
			h.ip_id = k;
			h.src = src;
			h.dst = dst;
			out[0].iov_base = &h;
			out[0].iov_len = sizeof(h);
			out[1].iov_base = pkt + off;
			out[1].iov_len = l;
			if (fwd_send_patient(sh, s, out, 2, until))
				__atomic_add_fetch(&sh->seg->fwd_drops, 1,
						   __ATOMIC_RELAXED);
		}
	}
}

/*
 * Leaving: our socket stops matching anything.  The close has a window
 * of its own: the kernel takes a closing socket out of the reuseport
 * group (reuseport_detach_sock) a moment before it takes it off the
 * address's chain, and a lookup that meets it first in the chain (the
 * newest member is) then finds no group and delivers to it, to be lost
 * with it and counted nowhere: a UC or UD message every few minutes of
 * the soak, whose members come and go several times a second, on an
 * address where no member forwarded and nobody was killed.  A connected
 * UDP socket takes only its peer's datagrams, and the kernel's hash
 * skips it, so before its last drain ours is connected to a peer that
 * never sends (our own address, port 9).  The kernel then scores every
 * member of the group for each lookup (it has a connection), a few ns
 * a member.  Locked.
 */
void share_unmatch(const struct uroce_share *sh, int sock)
{
	struct sockaddr_storage none = sh->local;

	if (none.ss_family == AF_INET)
		((struct sockaddr_in *)&none)->sin_port = htons(9);
	else
		((struct sockaddr_in6 *)&none)->sin6_port = htons(9);
	connect(sock, (struct sockaddr *)&none, uroce_sa_len(&none));
}

/* Probes for every index: each member learns where the kernel has it. */
void share_send_probes(struct uroce_share *sh, int sock,
		       const struct sockaddr_storage *addr)
{
	uint8_t p[PROBE_LEN] = { PROBE_OPCODE };
	uint32_t i, n = sh->seg->nmembers, be;

	memcpy(p + 12, &sh->seg->nonce, 8);
	for (i = 0; i < n; i++) {
		be = htonl(i);
		memcpy(p + 8, &be, 4);
		sendto(sock, p, sizeof(p), MSG_DONTWAIT,
		       (const struct sockaddr *)addr, uroce_sa_len(addr));
	}
}

/* A probe told us our index in the kernel's array: set the registry
 * (and the program) right if it thought otherwise. */
static void probe_rx(struct uroce_dev *dev, struct uroce_share *sh,
		     const uint8_t *buf)
{
	struct uroce_share_seg *seg = sh->seg;
	uint32_t i = get_be32(buf + 8), mine, other;
	uint64_t nonce;

	memcpy(&nonce, buf + 12, 8);
	if (nonce != seg->nonce || seg->slot[sh->slot].index == i)
		return;
	if (share_lock_seg(sh))
		return;
	mine = seg->slot[sh->slot].index;
	if (i < seg->nmembers && mine < seg->nmembers && mine != i) {
		other = seg->order[i];
		seg->order[i] = (uint8_t)sh->slot;
		seg->order[mine] = (uint8_t)other;
		seg->slot[sh->slot].index = i;
		seg->slot[other].index = mine;
		share_seg_changed(seg);
		share_attach_prog(seg, dev->net.sock, 0);
		uroce_count(dev, UROCE_CNT_SHARE_REORDERS, 1);
	}
	share_unlock_seg(sh);
}

bool uroce_share_steer(struct uroce_dev *dev, const uint8_t *buf, size_t len,
		       const struct sockaddr_storage *src,
		       const struct sockaddr_storage *dst, uint16_t ip_id)
{
	struct uroce_share *sh = dev->net.share;
	struct fwd_hdr h;
	uint32_t qpn, s;

	uroce_assert_held(&dev->prog.rx_lock);
	if (!sh || len < UROCE_BTH_LEN)
		return false;
	if (buf[0] == PROBE_OPCODE && len == PROBE_LEN) {
		probe_rx(dev, sh, buf);
		return true;
	}
	qpn = bth_qpn(buf);
	if (qpn == GSI_QPN)
		s = gsi_owner(dev, sh, buf, len);
	else if (qpn == UROCE_MCAST_QPN)
		return false;
	else
		s = qpn >> 16;
	if (!s || s == sh->slot || dev->obj.range_of_slot[s] != 0xff)
		return false;
	/* a further range of another member: to that member */
	if (sh->seg->slot[s].owner && sh->seg->slot[s].owner < UROCE_SHARE_SLOTS)
		s = sh->seg->slot[s].owner;
	/* not ours: to its owner, if there is one */
	memset(&h, 0, sizeof(h));
	h.kind = FWD_PKT;
	h.ip_id = ip_id;
	h.src = *src;
	h.dst = *dst;
	forward(dev, sh, s, &h, buf, len);
	return true;
}

/* Is the group's program the one for the registry as it is?  The program
 * is the group's, whichever member attaches it, and a function of the
 * registry alone, which bumps its epoch at every change: the survivors
 * told of a leave (FWD_LEFT) need one of them to attach it, not all. */
static bool prog_current(const struct uroce_share_seg *seg)
{
	return __atomic_load_n(&seg->prog_epoch, __ATOMIC_ACQUIRE) ==
	       __atomic_load_n(&seg->epoch, __ATOMIC_ACQUIRE);
}

static uint8_t fwd_buf[FWD_BATCH][sizeof(struct fwd_hdr) + FWD_BUF];

/* What other members forwarded to us. rx_lock held. */
static void fwd_rx(struct uroce_dev *dev, struct uroce_share *sh)
{
	struct mmsghdr msgs[FWD_BATCH];
	struct iovec iov[FWD_BATCH];
	bool hello = false, left = false;
	int i, n;

	uroce_assert_held(&dev->prog.rx_lock);
	do {
		memset(msgs, 0, sizeof(msgs));
		for (i = 0; i < FWD_BATCH; i++) {
			iov[i].iov_base = fwd_buf[i];
			iov[i].iov_len = sizeof(fwd_buf[i]);
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		n = recvmmsg(sh->fwd_fd, msgs, FWD_BATCH, MSG_DONTWAIT, NULL);
		for (i = 0; i < n; i++) {
			struct fwd_hdr h;
			struct uroce_rx_seg seg;
			size_t len = msgs[i].msg_len;

			if (len < sizeof(h))
				continue;
			memcpy(&h, fwd_buf[i], sizeof(h));
			if (h.kind == FWD_HELLO) {
				hello = true;
				continue;
			}
			if (h.kind == FWD_LEFT) {
				left = true;
				continue;
			}
			if (h.kind != FWD_PKT ||
			    (msgs[i].msg_hdr.msg_flags & MSG_TRUNC))
				continue;
			uroce_count(dev, UROCE_CNT_SHARE_FWD_IN, 1);
			len -= sizeof(h);
			uroce_tap_rx(dev, fwd_buf[i] + sizeof(h), len, &h.src,
				     &h.dst, (uint16_t)h.ip_id);
			seg.buf = fwd_buf[i] + sizeof(h);
			seg.len = (uint32_t)len;
			seg.ip_id = (uint16_t)h.ip_id;
			dev->net.rx->recv_train(dev, &seg, 1, &h.src, &h.dst);
		}
	} while (n == FWD_BATCH);
	if (hello) {
		pthread_mutex_lock(&sh->mu);
		share_rescan(sh);
		pthread_mutex_unlock(&sh->mu);
	}
	/* (the first survivor to get here attaches it for all) */
	if (left && !prog_current(sh->seg) && !share_lock_seg(sh)) {
		if (!prog_current(sh->seg))
			share_attach_prog(sh->seg, dev->net.sock, 0);
		share_unlock_seg(sh);
	}
}

/*
 * Stop watching the members our pidfds say are dead; true if we are the
 * first member of the kernel's order not among them, the one that takes
 * them out of the registry.  Every survivor hears of a death at once, and
 * when each took the registry's lock to reap, attach and probe, 255
 * survivors queued on it, each holder reading /proc for every slot: on a
 * loaded host whole members' progress threads waited seconds behind it
 * (docs/scale.md, "128 + 128").  The others find the dead gone when
 * their rescan next looks (a member joining reaps too).  sh->mu held.
 */
static bool forget_dead(struct uroce_share *sh)
{
	struct pollfd p[UROCE_SHARE_SLOTS];
	uint8_t slot_at[UROCE_SHARE_SLOTS];
	bool dead[UROCE_SHARE_SLOTS] = { false };
	uint32_t s, i, n = 0, nm;

	for (s = 1; s < UROCE_SHARE_SLOTS; s++)
		if (sh->pidfd[s] >= 0) {
			p[n] = (struct pollfd){ .fd = sh->pidfd[s],
						.events = POLLIN };
			slot_at[n++] = (uint8_t)s;
		}
	if (poll(p, n, 0) < 0)
		return true; /* (cannot tell: take them out ourselves) */
	for (i = 0; i < n; i++) {
		if (!p[i].revents)
			continue;
		s = slot_at[i];
		dead[s] = true;
		share_unwatch(sh, s);
	}
	nm = __atomic_load_n(&sh->seg->nmembers, __ATOMIC_ACQUIRE);
	for (i = 0; i < nm && i < UROCE_SHARE_SLOTS; i++) {
		s = sh->seg->order[i];
		if (s && !dead[s])
			return s == sh->slot;
	}
	return true;
}

/* Members died: the first live member of the order takes them out, fixes
 * the program and probes (forget_dead); the rest stop watching. */
static void member_gone(struct uroce_dev *dev, struct uroce_share *sh)
{
	bool act;

	pthread_mutex_lock(&sh->mu);
	act = forget_dead(sh);
	pthread_mutex_unlock(&sh->mu);
	if (!act || share_lock_seg(sh))
		return;
	/* (it may have left at exit already, with a program for the order
	 * before its socket went: the new order's program and probes all
	 * the same, its socket went only now) */
	share_reap(sh->seg, sh->slot);
	share_attach_prog(sh->seg, dev->net.sock, 0);
	share_send_probes(sh, dev->net.sock, &dev->net.local);
	share_rescan(sh);
	share_unlock_seg(sh);
}

/* (a watcher outlives a group left by a rebind: its events then name
 * the address's new group, which finds nothing to do) */
int uroce_share_fwd_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct uroce_share *sh;

	(void)w;
	pthread_mutex_lock(&dev->prog.rx_lock);
	sh = dev->net.share;
	if (sh)
		fwd_rx(dev, sh);
	pthread_mutex_unlock(&dev->prog.rx_lock);
	return 0;
}

int uroce_share_retry_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct uroce_share *sh;
	uint64_t n;

	(void)w;
	pthread_mutex_lock(&dev->prog.rx_lock);
	sh = dev->net.share;
	if (sh && read(sh->retry_fd, &n, sizeof(n)) == sizeof(n)) {
		pthread_mutex_lock(&sh->held_mu);
		held_flush(dev, sh);
		if (sh->nheld)
			retry_arm(sh);
		pthread_mutex_unlock(&sh->held_mu);
	}
	pthread_mutex_unlock(&dev->prog.rx_lock);
	return 0;
}

int uroce_share_member_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	struct uroce_share *sh = dev->net.share;

	(void)w;
	if (sh)
		member_gone(dev, sh);
	return 0;
}
