/* SPDX-License-Identifier: MIT */
/*
 * net: packet IO below the engine.
 *
 * Owns: struct uroce_net (dev->net: the device's socket, its address and
 * GID, MTU, the packet IO ops table and UDP GSO; fault injection), the
 * wire tap and pcap (net/pcap.c), the multicast receive sockets
 * (net/mcast.c).  Exports: the ops table struct uroce_pkt_io (UDP today,
 * a fake in tests), open/close/rebind/poll of the socket, address <-> GID.
 *
 * Received datagrams go up only through the receive entry the engine
 * registers (struct uroce_rx_entry; a UDP_GRO train as one call, so the
 * engine takes its lock once a train); net never takes dev->lock itself.
 * Besides it net calls one engine function, uroce_progress_watch_bell
 * (tests/arch/check_layers.sh netcalls checks both).
 * Locking: dev->net.sock and the address are changed by uroce_net_rebind
 * inside the entry's pause/resume (the engine takes rx_lock and
 * dev->lock for it), so either lock suffices to read them.
 */
#ifndef UROCE_NET_H
#define UROCE_NET_H

#include <string.h>

#include "core/core.h"
#include "core/watch.h"

/* ---- packet IO interface (net/udp.c; tests may plug in their own) ---- */
struct uroce_dev;
struct uroce_txrun;
struct uroce_pkt_io {
	/* Send one RoCE datagram (BTH..ICRC) to dst with IP header fields
	 * ip.  Returns 0 or -errno. */
	int (*send)(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		    struct uroce_ipopt ip, const struct iovec *iov, int iovcnt);
	/* Send runs of datagrams in one go (sendmmsg): run r is iov
	 * [iov0, iov0 + niov) and, if it has several datagrams, they are of
	 * seg bytes each (the last may be shorter), back to back (UDP GSO);
	 * the k-th of a run leaves with IPv4 identification k.  Only called
	 * when dev->net.gso is set.  Returns how many runs went, or -errno. */
	int (*send_runs)(struct uroce_dev *dev, const struct uroce_txrun *run,
			 int nruns, const struct iovec *iov);
	/* The engine leaves each packet's ICRC (its last 4 bytes) to this
	 * IO, which computes it where a packet meets a wire or a reader:
	 * the socket, a capture, another member of the address.  A
	 * same-host ring needs none (its receiver does not check one). */
	bool fills_icrc;
	/* Optional: how many packets the same-host ring to dst (QPN qpn)
	 * takes, 0 when packets to it go by UDP (net/local_tx.c
	 * uroce_local_window); NULL: no ring ever. */
	uint32_t (*ring_window)(struct uroce_dev *dev,
				const struct sockaddr_storage *dst,
				uint32_t qpn);
};

/* The payload of a full packet through a same-host ring, whatever the
 * QP's path MTU: the ring's slots hold it (include/uroce_local.h
 * LR_DATA), and the ring pays per packet, not per byte (docs/local.md,
 * "Packets of the ring's size"). */
#define UROCE_RING_MTU 32768u

struct uroce_txrun {
	struct sockaddr_storage dst;
	struct uroce_ipopt ip; /* every datagram of the run's */
	uint16_t seg;	       /* the first datagram's size */
	uint16_t npkts;
	uint16_t pkt0;	/* its first packet in the batch */
	bool closed;	/* a shorter one ended the run */
	uint16_t steer; /* its datagrams' destination QPN bits 23..16 */
	uint32_t bytes;
	int iov0, niov;
};

/* datagram k of a UDP_GRO train: at buf, len bytes, IPv4 ID ip_id */
struct uroce_rx_seg {
	uint8_t *buf;
	uint32_t len;
	uint16_t ip_id;
};
#define UROCE_RX_TRAIN_MAX 64 /* the kernel's UDP_GRO_CNT_MAX */

/*
 * The engine's receive entry, the one way packets go up from packet IO:
 * the engine registers it (uroce_net_set_rx) before the device opens.
 * A receive is a burst: begin (the engine holds plain ACKs and the
 * completion channels' doorbells), recv_train for the datagrams of one
 * UDP_GRO train (at most UROCE_RX_TRAIN_MAX, checked outside dev->lock
 * and dispatched under one hold of it; a datagram alone is a train of
 * one), recv_ring for a packet of a
 * same-host ring: every check but the ICRC's; payload_at, if not NULL,
 * is the packet in the ring, its payload copied from there), end (the
 * held ACKs leave or wait for the receiving thread's reply, as the
 * engine's scheduling says; rings: the burst was the rings').  pause
 * stops every receiver and the engine while net/ changes the socket
 * and address; resume starts them again.  room: the socket's send
 * buffer, full before, has room again (EPOLLOUT; uroce_net_want_room).
 * No lock held by the caller of any.
 */
struct uroce_rx_entry {
	void (*begin)(struct uroce_dev *dev);
	void (*recv_train)(struct uroce_dev *dev, const struct uroce_rx_seg *seg,
			   int n, const struct sockaddr_storage *src,
			   const struct sockaddr_storage *dst);
	void (*recv_ring)(struct uroce_dev *dev, uint8_t *buf, size_t len,
			  const struct sockaddr_storage *src,
			  const struct sockaddr_storage *dst,
			  uint16_t ip_id_hint, const uint8_t *payload_at);
	void (*end)(struct uroce_dev *dev, bool rings);
	void (*pause)(struct uroce_dev *dev);
	void (*resume)(struct uroce_dev *dev);
	void (*room)(struct uroce_dev *dev);
};

struct uroce_share;

/* ---- dev->net: owned by net/udp.c ---- */
struct uroce_mcast_grp;
struct uroce_net {
	int sock;
	int family;		       /* AF_INET or AF_INET6 */
	struct sockaddr_storage local; /* bound address, port 4791 */
	union ibv_gid gid;	       /* RoCE v2 GID of that address */
	uint32_t netdev_mtu;	       /* bytes, of the interface carrying it */
	uint32_t rcvbuf;	       /* bytes the socket may queue */
	uint32_t sndbuf;	       /* ... and keep in the host's queues
					* (0: no bound; engine/xmit.c
					* run_max_bytes) */
	enum ibv_mtu active_mtu;
	const struct uroce_pkt_io *io;
	const struct uroce_rx_entry *rx; /* the engine's (uroce_net_set_rx) */
	_Atomic bool gso;		/* io->send_runs works on this socket */
	struct uroce_share *share;	/* net/share.c: the address's group,
					 * NULL when the socket is alone */
	struct uroce_local *local_path; /* net/local.c: the same-host
					 * path, NULL with UROCE_LOCAL=0 */
	_Atomic uint32_t path_gen;	/* moves when a ring comes up: what
					 * a requester knew of its peer's
					 * path is asked again (engine/req.c
					 * ring_slots) */
	/* the IP header fields of the datagram being delivered (rx_lock:
	 * set by uroce_net_poll around uroce_recv; zero for ring packets
	 * and anything else without an IP header) */
	struct uroce_ipopt rx_ip;
	/* ... and when the kernel received it, on uroce_now_ns's clock (only
	 * with UROCE_CC=delay, for its RTT; 0: not known) */
	uint64_t rx_ns;

	/* the progress thread's watchers (core/watch.h) of the socket, the
	 * shared address's forwarding socket, retry timer and members'
	 * pidfds (one for all: a member went), and the multicast groups'
	 * sockets (a slot per group, its grp NULL once closed; rx_lock) */
	struct uroce_watcher sock_w, share_fwd_w, share_retry_w, share_member_w;
	/* the socket once more, for EPOLLOUT (oneshot, armed while a full
	 * send buffer holds the send queue back: engine/xmit.c) */
	struct uroce_watcher room_w;
	struct uroce_mcast_watch {
		struct uroce_watcher w;
		struct uroce_mcast_grp *grp;
	} mcast_w[UROCE_MAX_MCAST_GRP];

	/* fault injection (UROCE_FAULT), off unless set */
	struct uroce_fault {
		bool on;
		uint64_t rng;		   /* xorshift state, from seed */
		uint32_t drop, dup, delay; /* probability * 2^32 */
		_Atomic int rnr_left; /* responder: RNR-NAK this many SENDs */
		_Atomic int access_left; /* responder: fail this many rkey checks */
		_Atomic int nomem_left; /* verbs: fail N allocations */
		uint8_t *held;		/* a delayed datagram */
		size_t held_len;
		struct sockaddr_storage held_dst;
		struct uroce_ipopt held_ip;
	} fault;
};

/* the length of the IPv4 or IPv6 address in ss (sendmsg, bind) */
static inline socklen_t uroce_sa_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					  sizeof(struct sockaddr_in6);
}

/* whether a and b hold the same IP address (ports not compared) */
static inline bool uroce_same_ip(const struct sockaddr_storage *a,
				 const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr,
		       sizeof(struct in6_addr));
}

/* whether ss is a multicast IP address (every received packet asks) */
static inline bool uroce_addr_is_mcast(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >>
			28) == 0xe;
	return ss->ss_family == AF_INET6 &&
	       ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr[0] == 0xff;
}

/* net/pcap.c: the wire tap, called for every datagram sent (after fault
 * injection: what really leaves) and received (before any check).  It
 * counts by opcode class and, with UROCE_PCAP=file, writes the packet
 * with Ethernet/IP/UDP headers to a pcap file. */
void uroce_pcap_open(struct uroce_dev *dev); /* from uroce_net_open */
void uroce_tap_tx(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		  struct uroce_ipopt ip, const struct iovec *iov, int iovcnt,
		  uint16_t ip_id);
void uroce_tap_rx(struct uroce_dev *dev, const uint8_t *buf, size_t len,
		  const struct sockaddr_storage *src,
		  const struct sockaddr_storage *dst, uint16_t ip_id);
const char *uroce_pcap_path(void); /* "" when not capturing */

/* Compute and store the ICRC of a packet whose last 4 bytes (in
 * iov[n - 1]) are its ICRC's place, as IP ID ip_id from src to dst
 * (net/udp.c; uroce_pkt_io fills_icrc). */
void uroce_net_icrc(struct uroce_dev *dev, const struct sockaddr_storage *src,
		    const struct sockaddr_storage *dst, const struct iovec *iov,
		    int n, uint16_t ip_id);

/* the IPv4 (20 bytes, DF, ID 0, checksum) or IPv6 (40 bytes) header of
 * a UDP datagram of udp_len bytes from src to dst with TOS and TTL from
 * ipo (0: the kernel's 0 and 64), as the kernel sends ours; returns its
 * length (pcap frames, UD GRHs) */
size_t uroce_ip_hdr(uint8_t *ip, const struct sockaddr_storage *src,
		    const struct sockaddr_storage *dst, uint16_t udp_len,
		    struct uroce_ipopt ipo);

/* the progress thread's epoll sets exist: watch the socket, the shared
 * address's descriptors and the rings' (core/watch.h); 0 or -errno */
int uroce_net_watch(struct uroce_dev *dev);
/* wake the progress thread once the socket's send buffer has room again
 * (EPOLLOUT: half of it free); false if no thread watches */
bool uroce_net_want_room(struct uroce_dev *dev);

/* net/mcast.c: the sockets that receive multicast groups */
struct uroce_mcast_grp;
/* a socket bound to grp->addr that joined the group on the interface of
 * the device's address, watched by the progress thread; sets grp->fd */
int uroce_mcast_open(struct uroce_dev *dev, struct uroce_mcast_grp *grp);
void uroce_mcast_close(struct uroce_dev *dev, struct uroce_mcast_grp *grp);
/* the device's socket sends multicast out of the interface that holds
 * its address and loops it back to this host (from open_bound) */
void uroce_mcast_tx_setup(int fd, const struct sockaddr_storage *addr);

/* net/share.c: one address shared by many processes */
/* bind sock to ss in the address's group (join: or only if there is no
 * group yet); sets *out */
int uroce_share_bind(struct uroce_dev *dev, int sock,
		     const struct sockaddr_storage *ss, bool join,
		     struct uroce_share **out);
/* leave the group; closes sock */
void uroce_share_release(struct uroce_share *sh, int sock);
/* the progress thread's epoll exists: watch the group's descriptors
 * (from uroce_net_watch and a rebind) */
void uroce_share_watch(struct uroce_dev *dev);
/* a received datagram: true if it was another member's (forwarded or
 * counted as dropped) or the group's own; rx_lock held */
bool uroce_share_steer(struct uroce_dev *dev, const uint8_t *buf, size_t len,
		       const struct sockaddr_storage *src,
		       const struct sockaddr_storage *dst, uint16_t ip_id);
uint32_t uroce_share_slot(const struct uroce_dev *dev); /* 0: alone */
/* a member of the device's group holds QPN slot s (read without the
 * registry's lock: a hint, for messages) */
bool uroce_share_slot_held(const struct uroce_dev *dev, uint32_t s);
/* the member a QP1 MAD we send to our own address is for: its slot, 0
 * if not known here (buf: the packet from its BTH on, len bytes) */
uint32_t uroce_share_gsi_dest(const struct uroce_dev *dev, const uint8_t *buf,
			      size_t len);
#define UROCE_GSI_PEEK 64 /* (what it reads at most: BTH, DETH, MAD) */
uint32_t uroce_share_first_qpn(const struct uroce_dev *dev);
void uroce_share_note_qpn(struct uroce_dev *dev, uint32_t r); /* dev->lock */
int uroce_share_add_range(struct uroce_dev *dev);	      /* dev->lock */
int uroce_share_listen(struct uroce_dev *dev, uint64_t sid, bool on);

/* net/local.c: the same-host path (shared-memory rings to the devices
 * of this host and network namespace; docs/local.md) */
struct uroce_local;
int uroce_local_open(struct uroce_dev *dev); /* after the bind */
void uroce_local_close(struct uroce_dev *dev);
void uroce_local_rebind(struct uroce_dev *dev); /* rx_pause held */
void uroce_local_watch(struct uroce_dev *dev);	/* uroce_net_watch's */
/* packet IO's hooks, tx_lock held: 1 sent through a ring, 0 not a local
 * peer (send it by UDP), -errno lost */
int uroce_local_send(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		     const struct iovec *iov, int iovcnt);
/* the leading runs that are local, sent; or 0 and *udp_runs: how many
 * leading runs are not */
int uroce_local_send_runs(struct uroce_dev *dev, const struct uroce_txrun *run,
			  int nruns, const struct iovec *iov, int *udp_runs);
/* how many of the n iovecs at iov the next datagram of a run takes (seg
 * bytes, or what is left) */
int uroce_run_pkt_iovs(const struct iovec *iov, int n, uint32_t seg);
/* receive from the rings (rx_lock held); returns the packets */
int uroce_local_poll(struct uroce_dev *dev);
/* the progress thread: before epoll_wait (false: packets wait, do not
 * sleep), and after it */
bool uroce_local_sleep(struct uroce_dev *dev);
void uroce_local_awake(struct uroce_dev *dev);
/* our doorbell (an eventfd senders write while we sleep), or -1; and
 * reading it from another thread than the progress thread (rx_lock) */
int uroce_local_bell(const struct uroce_dev *dev);
void uroce_local_bell_take(struct uroce_dev *dev);
/* whether uroce_net_poll reads the socket this time, what it got (both
 * rx_lock held), and the progress thread saw the socket readable */
bool uroce_local_sock_due(struct uroce_dev *dev);
void uroce_local_sock_read(struct uroce_dev *dev, int n);
void uroce_local_sock_ready(struct uroce_dev *dev);
/* the last uroce_local_poll received something (rx_lock held) */
bool uroce_local_recent(const struct uroce_dev *dev);
/* the last uroce_local_poll found inbound rings (rx_lock held) */
bool uroce_local_rings(const struct uroce_dev *dev);
/* packets to dst for QPN qpn go through a ring (uroce qps) */
bool uroce_local_peer(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		      uint32_t qpn);
/* the slots of that ring, 0 when they go by UDP (the requester's window;
 * takes tx_lock) */
uint32_t uroce_local_window(struct uroce_dev *dev,
			    const struct sockaddr_storage *dst, uint32_t qpn);

/* net/udp.c */
/* GSO off for good (a send said the kernel has none): whether it was on */
bool uroce_net_gso_off(struct uroce_dev *dev);
/* a device with packet IO io instead of a socket (engine tests): the
 * address, and rcvbuf bytes of receive buffer */
void uroce_net_open_offline(struct uroce_dev *dev, const struct uroce_pkt_io *io,
			    const struct sockaddr_storage *addr,
			    uint32_t rcvbuf);
/* the engine's receive entry (before uroce_net_open) */
void uroce_net_set_rx(struct uroce_dev *dev, const struct uroce_rx_entry *rx);
int uroce_net_open(struct uroce_dev *dev);
void uroce_net_close(struct uroce_dev *dev);
int uroce_net_rebind(struct uroce_dev *dev, const struct sockaddr *sa);
/* receive and dispatch what is waiting on the socket, without blocking;
 * returns the number of datagrams received (each of a GRO train) */
int uroce_net_poll(struct uroce_dev *dev);
int uroce_addr_from_gid(const union ibv_gid *gid, struct sockaddr_storage *ss);
void uroce_gid_from_addr(const struct sockaddr_storage *ss, union ibv_gid *gid);
/* an AF_INET or AF_INET6 address as text, in buf (INET6_ADDRSTRLEN
 * bytes); "?" for another family */
const char *uroce_addr_ntop(const struct sockaddr_storage *ss, char *buf,
			    size_t len);
/* 127.0.0.0/8, ::1 or an IPv4-mapped 127.x */
bool uroce_addr_loopback(const struct sockaddr_storage *ss);
/* the same IP address (the ports aside) */
bool uroce_addr_same(const struct sockaddr *a, const struct sockaddr_storage *b);
/* UROCE_FAULT=nomem=N: true for the next N calls (allocation failures) */
bool uroce_fault_nomem(struct uroce_dev *dev);

/* within net/: one datagram, BTH..ICRC, at most this long */
#define UROCE_DGRAM_MAX (UROCE_MAX_HDR_LEN + 4096 + 8 + UROCE_ICRC_LEN)
/* net/udp.c: one datagram out through a ring or the socket, no fault
 * injection; 0 or -errno */
int uroce_net_raw_send(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		       struct uroce_ipopt ip, const struct iovec *iov,
		       int iovcnt);
/* net/fault.c: UROCE_FAULT read at open, and the send that applies it */
void uroce_net_fault_init(struct uroce_dev *dev);
int uroce_net_fault_send(struct uroce_dev *dev,
			 const struct sockaddr_storage *dst,
			 struct uroce_ipopt ip, const struct iovec *iov,
			 int iovcnt);

#endif /* UROCE_NET_H */
