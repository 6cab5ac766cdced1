// SPDX-License-Identifier: MIT
/*
 * UDP packet IO: the device's one socket on (address, 4791), address
 * selection, batched receive; the fault-injection hook on transmit is
 * net/fault.c.
 *
 * Address selection (docs/transport.md, "Addresses and the MTU"):
 * UROCE_ADDR=<ip> binds that
 * address; UROCE_IFNAME=<ifname> binds the first address of that
 * interface; otherwise the first free loopback address 127.0.0.1 ...
 * 127.0.0.254, so that every process on a host owns one of its own (and
 * the first one, typically a server, is reachable as 127.0.0.1), skipping
 * those `uroce run` holds for a program about to bind them (uroce_host.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dev.h"
#include "uroce_host.h"

#define RX_BATCH 16
/* one receive: with UDP_GRO several datagrams of a flow arrive in one
 * buffer of up to 64 KiB */
#define RX_BUF_SIZE 65536

/*
 * The ICRC the engine left to us (udp_io.fills_icrc), over every byte but
 * the last 4, which receive it.  Packets are BTH..ICRC with the ICRC's
 * place at the end of the last iovec (the engine's tail, a held copy, a
 * ring packet read whole).  The pseudo header is the one the kernel
 * sends: DF on IPv4 (IP_PMTUDISC_DO), IP ID 0 for a datagram of its own
 * and k for the k-th of a GSO send.
 */
void uroce_net_icrc(struct uroce_dev *dev, const struct sockaddr_storage *src,
		    const struct sockaddr_storage *dst, const struct iovec *iov,
		    int n, uint16_t ip_id)
{
	struct iovec body[UROCE_MAX_SGE + 4];
	struct uroce_icrc_ip ip;
	uint8_t *tail;

	if (n < 1 || n > (int)UROCE_ARRAY_SIZE(body) ||
	    iov[n - 1].iov_len < UROCE_ICRC_LEN)
		return; /* (no packet the engine builds) */
	memcpy(body, iov, (size_t)n * sizeof(*iov));
	body[n - 1].iov_len -= UROCE_ICRC_LEN;
	tail = (uint8_t *)iov[n - 1].iov_base + body[n - 1].iov_len;
	uroce_icrc_ip_from(src, dst, &ip);
	ip.ip_id = ip_id;
	ip.df = src->ss_family == AF_INET;
	uroce_icrc_store(tail, uroce_icrc_compute(&ip, body, n));
	uroce_count(dev, UROCE_CNT_ICRC_FILLS, 1);
}

/*
 * The control messages that give one sendmsg's datagrams the GRH's TOS
 * and TTL (IP_TOS/IP_TTL, IPV6_TCLASS/IPV6_HOPLIMIT), after what is at
 * buf already (len bytes); returns the new length.  Per message rather
 * than a setsockopt: the QPs of one sendmmsg may each have their own,
 * and nothing is added for the default (0).
 */
#define IP_CTL_SPACE (2 * CMSG_SPACE(sizeof(int)))

static size_t ip_cmsgs(struct msghdr *m, size_t len, int family,
		       struct uroce_ipopt ip)
{
	const int lvl = family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6;
	const int type[2] = {
		family == AF_INET ? IP_TOS : IPV6_TCLASS,
		family == AF_INET ? IP_TTL : IPV6_HOPLIMIT,
	};
	const uint8_t val[2] = { ip.tos, ip.ttl };
	struct cmsghdr *c;
	int i;

	for (i = 0; i < 2; i++) {
		int v = val[i];

		if (!v)
			continue;
		c = (struct cmsghdr *)((uint8_t *)m->msg_control + len);
		c->cmsg_level = lvl;
		c->cmsg_type = type[i];
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &v, sizeof(v));
		len += CMSG_SPACE(sizeof(int));
	}
	return len;
}

int uroce_net_raw_send(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		       struct uroce_ipopt ip, const struct iovec *iov,
		       int iovcnt)
{
	union {
		char buf[IP_CTL_SPACE];
		struct cmsghdr align;
	} ctl;
	struct msghdr msg = {
		.msg_name = (void *)dst,
		.msg_namelen = uroce_sa_len(dst),
		.msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt,
		.msg_control = ctl.buf,
	};

	int local = uroce_local_send(dev, dst, iov, iovcnt);

	if (local > 0) /* went through a ring */
		uroce_tap_tx(dev, dst, ip, iov, iovcnt, 0);
	if (local)
		return local < 0 ? local : 0;
	uroce_net_icrc(dev, &dev->net.local, dst, iov, iovcnt, 0);
	msg.msg_controllen = ip_cmsgs(&msg, 0, dst->ss_family, ip);
	if (!msg.msg_controllen)
		msg.msg_control = NULL;
	for (;;) {
		if (sendmsg(dev->net.sock, &msg, 0) >= 0) {
			uroce_tap_tx(dev, dst, ip, iov, iovcnt, 0);
			return 0;
		}
		if (errno == EINTR)
			continue;
		/* a full socket buffer or a vanished peer is packet loss:
		 * the transport's retransmission deals with it */
		return -errno;
	}
}

static int udp_send(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		    struct uroce_ipopt ip, const struct iovec *iov, int iovcnt)
{
	if (dev->net.fault.on)
		return uroce_net_fault_send(dev, dst, ip, iov, iovcnt);
	return uroce_net_raw_send(dev, dst, ip, iov, iovcnt);
}

/* The ICRC of each datagram of a GSO run: the k-th leaves as IP ID k. */
static void run_icrc(struct uroce_dev *dev, const struct uroce_txrun *run,
		     const struct iovec *iov)
{
	const struct iovec *it = &iov[run->iov0], *end = it + run->niov;
	int k, n;

	for (k = 0; k < run->npkts && it < end; k++, it += n) {
		n = uroce_run_pkt_iovs(it, (int)(end - it), run->seg);
		uroce_net_icrc(dev, &dev->net.local, &run->dst, it, n,
			       (uint16_t)k);
	}
}

static int udp_send_runs(struct uroce_dev *dev, const struct uroce_txrun *run,
			 int nruns, const struct iovec *iov)
{
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t)) + IP_CTL_SPACE];
		struct cmsghdr align;
	} ctl[UROCE_TXB_MAX_RUNS];
	struct mmsghdr msg[UROCE_TXB_MAX_RUNS];
	int r, n;

	/* the leading runs to same-host peers go through their rings */
	n = uroce_local_send_runs(dev, run, nruns, iov, &nruns);
	if (n)
		return n;
	for (r = 0; r < nruns; r++) {
		struct msghdr *m = &msg[r].msg_hdr;

		run_icrc(dev, &run[r], iov);

		memset(m, 0, sizeof(*m));
		m->msg_name = (void *)&run[r].dst;
		m->msg_namelen = uroce_sa_len(&run[r].dst);
		m->msg_iov = (struct iovec *)&iov[run[r].iov0];
		m->msg_iovlen = (size_t)run[r].niov;
		m->msg_control = ctl[r].buf;
		if (run[r].npkts > 1) {
			struct cmsghdr *c = (struct cmsghdr *)ctl[r].buf;

			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			memcpy(CMSG_DATA(c), &run[r].seg, sizeof(uint16_t));
			m->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
		}
		m->msg_controllen = ip_cmsgs(m, m->msg_controllen,
					     run[r].dst.ss_family, run[r].ip);
		if (!m->msg_controllen)
			m->msg_control = NULL;
	}
	do
		n = sendmmsg(dev->net.sock, msg, (unsigned int)nruns, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static const struct uroce_pkt_io udp_io = {
	.send = udp_send,
	.send_runs = udp_send_runs,
	.fills_icrc = true,
	.ring_window = uroce_local_window,
};

/*
 * UDP GSO on send and GRO on receive (Linux 4.18 / 5.0): UROCE_GSO=0
 * turns both off.  GSO is used only if the socket takes the option.
 */
static bool want_gso(void)
{
	return uroce_config()->gso;
}

static bool gso_setup(int fd)
{
	int one = 1, seg = 0;
	socklen_t len = sizeof(seg);

	if (!want_gso())
		return false;
	setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	return !getsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, &len);
}

/* ---- address selection ---- */

static int find_ifaddr(const char *ifname, struct sockaddr_storage *ss)
{
	struct ifaddrs *ifa, *it;
	int ret = -ENODEV;

	if (getifaddrs(&ifa))
		return -errno;
	for (int pass = 0; pass < 2 && ret; pass++) {
		int fam = pass ? AF_INET6 : AF_INET;

		for (it = ifa; it; it = it->ifa_next) {
			if (!it->ifa_addr || it->ifa_addr->sa_family != fam ||
			    strcmp(it->ifa_name, ifname))
				continue;
			memset(ss, 0, sizeof(*ss));
			memcpy(ss, it->ifa_addr,
			       fam == AF_INET ? sizeof(struct sockaddr_in) :
						sizeof(struct sockaddr_in6));
			ret = 0;
			break;
		}
	}
	freeifaddrs(ifa);
	return ret;
}

/* The MTU of the interface that holds addr (loopback if none found). */
static uint32_t netdev_mtu_of(const struct sockaddr_storage *addr)
{
	struct ifaddrs *ifa, *it;
	uint32_t mtu = 1500;
	struct ifreq ifr;
	int fd;

	if (getifaddrs(&ifa))
		return mtu;
	memset(&ifr, 0, sizeof(ifr));
	for (it = ifa; it; it = it->ifa_next) {
		if (!it->ifa_addr || it->ifa_addr->sa_family != addr->ss_family)
			continue;
		if (addr->ss_family == AF_INET ?
			    ((struct sockaddr_in *)it->ifa_addr)->sin_addr.s_addr !=
				    ((const struct sockaddr_in *)addr)
					    ->sin_addr.s_addr :
			    memcmp(&((struct sockaddr_in6 *)it->ifa_addr)->sin6_addr,
				   &((const struct sockaddr_in6 *)addr)->sin6_addr,
				   16))
			continue;
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", it->ifa_name);
		break;
	}
	freeifaddrs(ifa);
	if (!ifr.ifr_name[0])
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	fd = uroce_socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		if (!ioctl(fd, SIOCGIFMTU, &ifr))
			mtu = (uint32_t)ifr.ifr_mtu;
		close(fd);
	}
	return mtu;
}

static enum ibv_mtu ib_mtu_for(uint32_t netdev_mtu, int family)
{
	/* IP + UDP + the longest header chain + ICRC must fit */
	uint32_t overhead = (family == AF_INET ? 20 : 40) + 8 +
			    UROCE_MAX_HDR_LEN + UROCE_ICRC_LEN;
	int m;

	for (m = IBV_MTU_4096; m > IBV_MTU_256; m--)
		if (uroce_mtu_bytes(m) + overhead <= netdev_mtu)
			break;
	return (enum ibv_mtu)m;
}

/*
 * How a socket takes its address: UROCE_SHARE=0 binds it alone, as
 * before the shared device (nothing can join it); otherwise it joins the
 * address's group (net/share.c), or, choosing an address by itself, takes
 * one only where no group exists yet.
 */
enum bind_mode {
	BIND_ALONE,
	BIND_NEW,
	BIND_JOIN,
};

static enum bind_mode share_mode(bool join)
{
	if (!uroce_config()->share)
		return BIND_ALONE;
	return join ? BIND_JOIN : BIND_NEW;
}

static int open_bound(struct uroce_dev *dev, struct sockaddr_storage *addr,
		      enum bind_mode mode, struct uroce_share **sh)
{
	int fam = addr->ss_family, one = 1, fd, err;
	int pmtu = IP_PMTUDISC_DO, buf = UROCE_SOCK_BUF_BYTES;
	socklen_t len = uroce_sa_len(addr);

	fd = uroce_socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (fam == AF_INET) {
		((struct sockaddr_in *)addr)->sin_port = htons(UROCE_UDP_PORT);
		/* DF and IP ID 0: the ICRC covers both (see icrc.c) */
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	} else {
		((struct sockaddr_in6 *)addr)->sin6_port = htons(UROCE_UDP_PORT);
		pmtu = IPV6_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu,
			   sizeof(pmtu));
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one,
			   sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	}
	*sh = NULL;
	if (mode == BIND_ALONE)
		err = bind(fd, (struct sockaddr *)addr, len) ? -errno : 0;
	else
		err = uroce_share_bind(dev, fd, addr, mode == BIND_JOIN, sh);
	if (err) {
		close(fd);
		return err;
	}
	uroce_mcast_tx_setup(fd, addr);
	/* the delay control times an ACK from its arrival in the kernel,
	 * not from when a thread got round to reading it (engine/req.c) */
	if (dev->cc.delay)
		setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
	/* congestion control reads the ECN bits of what arrives (a control
	 * message in the same recvmmsg), and a capture shows them */
	if (dev->cc.on || uroce_config()->pcap) {
		if (fam == AF_INET)
			setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one,
				   sizeof(one));
		else
			setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one,
				   sizeof(one));
	}
	/* FORCE works for root; others get what net.core.*mem_max allows */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	/* the send buffer bounds what we have in the local link's queue
	 * (docs/transport.md, "A full send buffer"); the kernel doubles it */
	buf = (int)(uroce_config()->sndbuf_kb * 512);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	return fd;
}

/* The device's group, and the QPNs it hands out: slot << 16 | n in a
 * group (n from the slot's counter, which outlives its owners; more
 * slots as the first fills, share.c), any 24-bit number alone. */
static void set_share(struct uroce_dev *dev, struct uroce_share *sh)
{
	uint32_t slot;

	dev->net.share = sh;
	slot = uroce_share_slot(dev);
	dev->obj.qpn_mask = sh ? 0xffff : UROCE_QPN_MASK;
	dev->obj.nranges = 1;
	dev->obj.qpn_range[0].base = slot << 16;
	dev->obj.qpn_range[0].next = uroce_share_first_qpn(dev);
	dev->obj.qpn_range[0].n = dev->obj.nqps;
	memset(dev->obj.range_of_slot, 0xff, sizeof(dev->obj.range_of_slot));
	/* QP1 (slot byte 0) and the member's own QPNs */
	dev->obj.range_of_slot[0] = 0;
	dev->obj.range_of_slot[slot] = 0;
}

static int parse_addr(const char *s, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, s, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
		ss->ss_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, &((struct sockaddr_in6 *)ss)->sin6_addr) ==
	    1) {
		ss->ss_family = AF_INET6;
		return 0;
	}
	return -EINVAL;
}

/* `uroce run` holds this address for a program about to bind it. */
static bool addr_reserved(const struct sockaddr_storage *ss)
{
	char ip[INET6_ADDRSTRLEN];
	int fd;

	fd = uroce_addr_reserve(uroce_addr_ntop(ss, ip, sizeof(ip)));
	if (fd < 0)
		return fd == -EADDRINUSE;
	close(fd);
	return false;
}

bool uroce_net_gso_off(struct uroce_dev *dev)
{
	return atomic_exchange(&dev->net.gso, false);
}

void uroce_net_open_offline(struct uroce_dev *dev, const struct uroce_pkt_io *io,
			    const struct sockaddr_storage *addr, uint32_t rcvbuf)
{
	dev->net.io = io;
	dev->net.family = addr->ss_family;
	dev->net.local = *addr;
	uroce_gid_from_addr(addr, &dev->net.gid);
	dev->net.netdev_mtu = 1500;
	dev->net.active_mtu = IBV_MTU_1024;
	dev->net.rcvbuf = rcvbuf;
}

void uroce_net_set_rx(struct uroce_dev *dev, const struct uroce_rx_entry *rx)
{
	dev->net.rx = rx;
}

int uroce_net_open(struct uroce_dev *dev)
{
	const char *addr_env = uroce_config()->addr;
	const char *if_env = uroce_config()->ifname;
	struct sockaddr_storage ss;
	struct uroce_share *sh = NULL;
	socklen_t optlen;
	int fd = -EADDRINUSE, rcv = 0, snd = 0, i, err;

	if (addr_env && *addr_env) {
		err = parse_addr(addr_env, &ss);
		if (err) {
			fprintf(stderr,
				"uroce: UROCE_ADDR=%s is not an IP address\n",
				addr_env);
			return err;
		}
		fd = open_bound(dev, &ss, share_mode(true), &sh);
	} else if (if_env && *if_env) {
		err = find_ifaddr(if_env, &ss);
		if (err) {
			fprintf(stderr,
				"uroce: UROCE_IFNAME=%s has no IP address\n",
				if_env);
			return err;
		}
		fd = open_bound(dev, &ss, share_mode(true), &sh);
	} else {
		for (i = 1; i < 255 && fd == -EADDRINUSE; i++) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;

			memset(&ss, 0, sizeof(ss));
			in->sin_family = AF_INET;
			in->sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)i);
			if (addr_reserved(&ss))
				continue;
			fd = open_bound(dev, &ss, share_mode(false), &sh);
			/* a `uroce run` reserves its address before its probe
			 * lets it go: one that did so between our check and
			 * our bind keeps it (uroce_host.h) */
			if (fd >= 0 && addr_reserved(&ss)) {
				if (sh)
					uroce_share_release(sh, fd);
				else
					close(fd);
				sh = NULL;
				fd = -EADDRINUSE;
			}
		}
	}
	if (fd == -ENOSPC) /* (share.c said which limit) */
		return fd;
	if (fd == -EADDRINUSE && !(addr_env && *addr_env) &&
	    !(if_env && *if_env)) {
		fprintf(stderr,
			"uroce: no free default address: UDP port %d is "
			"taken on every one of 127.0.0.1-254 (by other uroce "
			"processes?); set UROCE_ADDR=127.0.0.1 to share one "
			"address among processes (docs/shared.md)\n",
			UROCE_UDP_PORT);
		return fd;
	}
	if (fd < 0) {
		char buf[INET6_ADDRSTRLEN];

		fprintf(stderr, "uroce: cannot bind UDP %s port %d: %s%s\n",
			uroce_addr_ntop(&ss, buf, sizeof(buf)), UROCE_UDP_PORT,
			strerror(-fd),
			fd == -EADDRINUSE ?
				" (another user's processes, or a program "
				"that is not uroce, hold it: one user's "
				"processes share an address; docs/shared.md)" :
				"");
		return fd;
	}
	optlen = sizeof(rcv);
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &optlen);
	dev->net.rcvbuf = rcv > 0 ? (uint32_t)rcv / 2 : 106496;
	/* (what the kernel took, doubled: a user's SO_SNDBUF stops at
	 * wmem_max) */
	optlen = sizeof(snd);
	getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &optlen);
	dev->net.sndbuf = snd > 0 ? (uint32_t)snd : 0;
	dev->net.sock = fd;
	dev->net.family = ss.ss_family;
	dev->net.local = ss;
	set_share(dev, sh);
	uroce_gid_from_addr(&ss, &dev->net.gid);
	dev->net.netdev_mtu = netdev_mtu_of(&ss);
	dev->net.active_mtu = ib_mtu_for(dev->net.netdev_mtu, dev->net.family);
	dev->net.io = &udp_io;
	dev->net.gso = gso_setup(fd);
	uroce_net_fault_init(dev);
	uroce_pcap_open(dev);
	return uroce_local_open(dev);
}

/* the progress thread saw the socket readable: it receives */
static int sock_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	(void)w;
	uroce_local_sock_ready(dev);
	return 1;
}

/* the socket's send buffer has room again: what it held back goes */
static int room_ready(struct uroce_dev *dev, struct uroce_watcher *w)
{
	(void)w;
	dev->net.rx->room(dev);
	return 0;
}

bool uroce_net_want_room(struct uroce_dev *dev)
{
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLONESHOT,
				  .data.ptr = &dev->net.room_w };

	return dev->prog.epfd >= 0 && dev->net.room_w.fn &&
	       !uroce_epoll_ctl(dev->prog.epfd, EPOLL_CTL_MOD,
				dev->net.room_w.fd, &ev);
}

int uroce_net_watch(struct uroce_dev *dev)
{
	int err;

	dev->net.sock_w.fn = sock_ready;
	dev->net.sock_w.packets = true;
	err = uroce_watcher_add(dev->prog.sock_epfd, &dev->net.sock_w,
				uroce_net_sock(dev), EPOLLIN);
	if (err)
		return err;
	/* (oneshot: the first event, at once, disarms it) */
	dev->net.room_w.fn = room_ready;
	err = uroce_watcher_add(dev->prog.epfd, &dev->net.room_w,
				uroce_net_sock(dev), EPOLLOUT | EPOLLONESHOT);
	if (err)
		return err;
	uroce_share_watch(dev);
	uroce_local_watch(dev);
	return 0;
}

/* Move a running device to another address (rdma_bind_addr). */
int uroce_net_rebind(struct uroce_dev *dev, const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	struct uroce_share *sh, *old_sh;
	int fd, old;

	memset(&ss, 0, sizeof(ss));
	if (sa->sa_family == AF_INET)
		memcpy(&ss, sa, sizeof(struct sockaddr_in));
	else if (sa->sa_family == AF_INET6)
		memcpy(&ss, sa, sizeof(struct sockaddr_in6));
	else
		return -EAFNOSUPPORT;
	fd = open_bound(dev, &ss, share_mode(true), &sh);
	if (fd < 0)
		return fd;
	dev->net.rx->pause(dev);
	old = dev->net.sock;
	old_sh = dev->net.share;
	uroce_watcher_del(dev->prog.sock_epfd, &dev->net.sock_w);
	uroce_watcher_add(dev->prog.sock_epfd, &dev->net.sock_w, fd, EPOLLIN);
	if (dev->net.room_w.fn) {
		uroce_watcher_del(dev->prog.epfd, &dev->net.room_w);
		uroce_watcher_add(dev->prog.epfd, &dev->net.room_w, fd,
				  EPOLLOUT | EPOLLONESHOT);
	}
	/* senders hold only tx_lock (engine/xmit.c) and read the socket,
	 * GSO and the address; the progress thread's dispatch reads the
	 * socket with no lock (uroce_net_sock) */
	pthread_mutex_lock(&dev->tx.tx_lock);
	__atomic_store_n(&dev->net.sock, fd, __ATOMIC_RELAXED);
	dev->net.gso = gso_setup(fd);
	dev->net.family = ss.ss_family;
	dev->net.local = ss;
	pthread_mutex_unlock(&dev->tx.tx_lock);
	set_share(dev, sh);
	uroce_share_watch(dev);
	uroce_gid_from_addr(&ss, &dev->net.gid);
	dev->net.netdev_mtu = netdev_mtu_of(&ss);
	dev->net.active_mtu = ib_mtu_for(dev->net.netdev_mtu, dev->net.family);
	uroce_local_rebind(dev);
	dev->net.rx->resume(dev);
	if (old_sh)
		uroce_share_release(old_sh, old); /* closes old */
	else
		close(old);
	return 0;
}

void uroce_net_close(struct uroce_dev *dev)
{
	uroce_local_close(dev);
	if (dev->net.share)
		uroce_share_release(dev->net.share, dev->net.sock);
	else if (dev->net.sock >= 0)
		close(dev->net.sock);
	dev->net.share = NULL;
	dev->net.sock = -1;
}

/* A kernel receive time (CLOCK_REALTIME) on the engine's clock, given
 * both clocks read at once after the receive; 0 if it is not before them
 * (the realtime clock was set back meanwhile). */
static uint64_t rx_mono(uint64_t real, uint64_t real_now, uint64_t now)
{
	if (!real || real > real_now || real_now - real >= now)
		return 0;
	return now - (real_now - real);
}

/* The address a datagram came to, the size of the datagrams UDP_GRO put
 * together in it (0: a single one; GRO merges only datagrams of one TOS),
 * with IP_RECVTOS its TOS, and with SO_TIMESTAMPNS when the kernel
 * received it (CLOCK_REALTIME ns; 0 without). */
static void dst_of(struct msghdr *msg, struct uroce_dev *dev,
		   struct sockaddr_storage *dst, int *gro_size, uint8_t *tos,
		   uint64_t *real_ns)
{
	struct cmsghdr *c;

	*dst = dev->net.local;
	*gro_size = 0;
	*tos = 0;
	*real_ns = 0;
	for (c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level == SOL_SOCKET &&
		    c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;

			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			*real_ns = uroce_timespec_ns(&ts);
		} else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			memcpy(gro_size, CMSG_DATA(c), sizeof(*gro_size));
		} else if (c->cmsg_level == IPPROTO_IP &&
			   c->cmsg_type == IP_TOS) {
			*tos = *CMSG_DATA(c);
		} else if (c->cmsg_level == IPPROTO_IPV6 &&
			   c->cmsg_type == IPV6_TCLASS) {
			int tc;

			memcpy(&tc, CMSG_DATA(c), sizeof(tc));
			*tos = (uint8_t)tc;
		} else if (c->cmsg_level == IPPROTO_IP &&
			   c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			((struct sockaddr_in *)dst)->sin_addr = pi.ipi_addr;
		} else if (c->cmsg_level == IPPROTO_IPV6 &&
			   c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			((struct sockaddr_in6 *)dst)->sin6_addr = pi.ipi6_addr;
		}
	}
}

/* Receive buffers: only the progress thread receives (one reader keeps
 * packets in order), so they are static to this file. */
static uint8_t rx_buf[RX_BATCH][RX_BUF_SIZE];
static uint8_t rx_ctl[RX_BATCH][128];
static struct sockaddr_storage rx_src[RX_BATCH];
static struct iovec rx_iov[RX_BATCH];
static struct mmsghdr rx_msgs[RX_BATCH];
static bool rx_ready;

/* the message headers: made once, and after a receive only the fields
 * the kernel wrote are set back (a busy-polling application calls this
 * millions of times a second, mostly to find nothing) */
static void rx_reset(int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct msghdr *m = &rx_msgs[i].msg_hdr;

		m->msg_name = &rx_src[i];
		m->msg_namelen = sizeof(rx_src[i]);
		m->msg_iov = &rx_iov[i];
		m->msg_iovlen = 1;
		m->msg_control = rx_ctl[i];
		m->msg_controllen = sizeof(rx_ctl[i]);
		m->msg_flags = 0;
		rx_iov[i].iov_base = rx_buf[i];
		rx_iov[i].iov_len = RX_BUF_SIZE;
	}
}

int uroce_net_poll(struct uroce_dev *dev)
{
	struct sockaddr_storage *src = rx_src, dst;
	struct mmsghdr *msgs = rx_msgs;
	struct uroce_rx_seg train[UROCE_RX_TRAIN_MAX];
	int i, n, pkts, local, ntrain;
	uint64_t real_now = 0, now = 0;

	if (!rx_ready) {
		rx_reset(RX_BATCH);
		rx_ready = true;
	}
	local = uroce_local_poll(dev); /* the same-host rings */
	if (!uroce_local_sock_due(dev))
		return local;
	n = recvmmsg(dev->net.sock, msgs, RX_BATCH, MSG_DONTWAIT, NULL);
	uroce_local_sock_read(dev, n);
	if (n <= 0)
		return local;
	pkts = local;
	/* one ACK per QP for what this receive brought (engine/resp.c) */
	dev->net.rx->begin(dev);
	if (dev->cc.delay) {
		real_now = uroce_real_ns();
		now = uroce_now_ns();
	}
	for (i = 0; i < n; i++) {
		size_t len = msgs[i].msg_len, off, seg;
		uint16_t k = 0;
		uint64_t real = 0;
		int gro;

		if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
			uroce_count(dev, UROCE_CNT_DROP_TRUNCATED, 1);
			continue;
		}
		dst_of(&msgs[i].msg_hdr, dev, &dst, &gro, &dev->net.rx_ip.tos,
		       &real);
		dev->net.rx_ns = rx_mono(real, real_now, now);
		seg = gro > 0 && (size_t)gro < len ? (size_t)gro : len;
		if (seg < len)
			uroce_count(dev, UROCE_CNT_RX_GRO_BATCHES, 1);
		/* datagram k of a GSO send (the usual reason for GRO on the
		 * loopback) had IPv4 identification k */
		ntrain = 0;
		for (off = 0; off < len; off += seg, k++) {
			size_t l = len - off < seg ? len - off : seg;

			/* another member's, or a probe (net/share.c) */
			if (uroce_share_steer(dev, rx_buf[i] + off, l, &src[i],
					      &dst, k))
				continue;
			uroce_tap_rx(dev, rx_buf[i] + off, l, &src[i], &dst, k);
			if (ntrain == UROCE_RX_TRAIN_MAX) {
				dev->net.rx->recv_train(dev, train, ntrain,
							&src[i], &dst);
				ntrain = 0;
			}
			train[ntrain++] = (struct uroce_rx_seg){
				rx_buf[i] + off, (uint32_t)l, k
			};
			pkts++;
		}
		if (ntrain)
			dev->net.rx->recv_train(dev, train, ntrain, &src[i],
						&dst);
	}
	dev->net.rx_ip.tos = 0;
	dev->net.rx_ns = 0;
	/* (the buffers are free before the end, whose events a channel's
	 * direct taker may handle, and receive again: engine/progress.c
	 * uroce_progress_drain) */
	rx_reset(n);
	/* (an application's poll: its ACKs go behind its reply) */
	dev->net.rx->end(dev, false);
	return pkts ? pkts : n;
}
