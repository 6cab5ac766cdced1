// SPDX-License-Identifier: MIT
/*
 * The same-host path: packets to a uroce device of this host and network
 * namespace go through shared memory instead of UDP
 * (docs/local.md).  Only the packet IO differs: the same RoCE
 * packets, built and checked by the same engine.
 *
 * Discovery: every device listens on the abstract AF_UNIX SOCK_SEQPACKET
 * name "uroce/local/<uid>/<address>/<slot>" (its shared-device slot, 0
 * when alone), and the first member of an address also on ".../0" (QP1,
 * and QPNs of a device bound alone).  Abstract names belong to the
 * network namespace, so finding one means "same host, same netns".  Both
 * ends check with SO_PEERCRED that the other is of our uid.
 *
 * A sender connects, says its address; the receiver answers with a memfd
 * (sealed against shrinking: no SIGBUS) holding a single-producer,
 * single-consumer ring of fixed-size slots made for that sender, and its
 * doorbell eventfd.  The sender writes a packet into the next slot,
 * publishes head (release), and writes the doorbell only if the receiver
 * said it sleeps in epoll (Dekker: both sides store, full fence, load).
 * A full ring does not make a sender wait: the packet goes into the
 * sender's overflow queue for that ring (bounded like a socket's send
 * buffer: past it the sender waits while the receiver takes packets, as
 * on a blocking socket, and loses the packet when it takes none), and
 * every later packet goes behind it, so order is kept.  The queue
 * is drained by whoever sends next, by a poll, and by the progress
 * thread when the receiver, which saw want_room, rings the eventfd the
 * sender gave in its hello (the doorbell scheme the other way round).
 *
 * Trust: nothing read from the ring is believed.  head is bounded by the
 * ring size, each slot's length by the slot, and each packet is copied
 * into private memory before uroce_recv_local parses it as a datagram
 * from the network, so a peer that scribbles the ring can only make us
 * drop (drop_local_bad).  The ICRC is computed on send (pcap sees valid
 * frames) but not checked here: memory is not a wire.
 *
 * Code: local.c (discovery, handshake and setup), local_rx.c (reading
 * the rings, doorbells, events), local_tx.c (writing a peer's ring, the
 * overflow queue); this header holds what they share.
 *
 * Locks: the outbound table (struct lout) is used under dev->tx.tx_lock
 * (every packet IO send holds it); the inbound rings are read by whoever
 * holds dev->prog.rx_lock and only that thread frees them; L->acc_lock
 * guards the inbound table's insertions (accept), the progress thread's
 * scans and the unpublishing of a ring, and is held around nothing that
 * waits, so a sender waiting for a peer's answer may take it to answer
 * that peer's own connection (two processes meeting at once).
 */
#ifndef UROCE_NET_LOCAL_H
#define UROCE_NET_LOCAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dev.h"
#include "uroce_local.h"

#define LR_MAX_IN   64
#define LR_MAX_OUT  64
#define LR_MAX_FAR  16		   /* addresses known to have no ring name */
#define LR_BATCH    32		   /* packets per ring per poll */
#define LR_SPARE    (LR_SLOTS / 8) /* slots an RC window leaves free */
#define LR_HELLO_MS 100		   /* the answer to a connect */
#define LR_RETRY_NS 1000000000ull  /* not local: ask again after 1 s */
#define LR_QUEUE_BYTES \
	(4u << 20) /* a full ring's overflow queue: a
					 * socket send buffer's worth */
#define LR_STALL_NS \
	20000000ull /* past the queue, a receiver that
					 * took nothing for this long: drop */
#define LR_SOCK_NS \
	20000ull /* the socket, read at least this often
					 * while rings are in use */

/* a ring we receive on */
struct lin {
	int fd;
	struct lr_shared *ring;
	_Atomic uint32_t tail; /* ours (the poller's; the progress
					 * thread reads it before sleeping);
					 * the shared one is a copy */
	struct sockaddr_storage src;
	_Atomic bool dead;   /* the connection closed */
	_Atomic bool broken; /* the ring lied: dropped */
	int room_bell;	     /* the sender's eventfd, or -1 */
};

/* a packet waiting behind a full ring */
struct lq_pkt {
	struct lq_pkt *next;
	uint32_t len;
	uint16_t ip_id;
	uint8_t data[];
};

/* a peer we send to: connected (ring), or known not local until retry */
struct lout {
	bool used, up, alone;
	bool self; /* our own ring: never wait on it */
	struct sockaddr_storage addr;
	uint8_t sbyte; /* top byte of the QPNs it is for */
	uint64_t retry_ns, last_ns;
	_Atomic int fd;
	_Atomic bool dead;
	struct lr_shared *ring;
	int bell;
	uint32_t head;			 /* ours; the shared one is a copy */
	struct uroce_watcher w;		 /* fd's (its end closing) */
	struct lq_pkt *q_first, *q_last; /* the overflow queue */
	uint32_t q_bytes;
	bool stalled; /* past the queue, dropped at stall_tail */
	uint32_t stall_tail;
};

/* an address with no ring name at all, not even ".../0": another host
 * or namespace, until until_ns */
struct lfar {
	struct sockaddr_storage addr;
	uint64_t until_ns;
};

struct uroce_local {
	int lfd[2]; /* listening: our slot's name, ".../0" */
	int nl;
	int bell; /* our doorbell, given to every sender */
	char names[2][108];
	pthread_mutex_t acc_lock;
	_Atomic(struct lin *) in[LR_MAX_IN];
	int in_fd[LR_MAX_IN]; /* acc_lock */
	/* the progress thread's watchers (core/watch.h), in the tables'
	 * fixed slots: the bell, the listeners, the inbound connections
	 * (the outbound ones': struct lout's) */
	struct uroce_watcher bell_w, lfd_w[2], in_w[LR_MAX_IN];
	struct lout out[LR_MAX_OUT]; /* tx_lock */
	struct lfar far[LR_MAX_FAR]; /* tx_lock */
	struct lout *last;
	_Atomic int queues;	 /* outbound peers with a queue (a hint,
					 * read without tx_lock) */
	bool recent;		 /* rx_lock: the last poll had packets */
	int rings;		 /* rx_lock: inbound rings, last poll */
	bool sock_busy;		 /* rx_lock: the last read had packets */
	uint64_t sock_ns;	 /* rx_lock: the socket's last read */
	_Atomic bool sock_ready; /* epoll saw the socket readable */
	uint8_t rxbuf[LR_DATA] __attribute__((aligned(64)));
};

static inline struct uroce_local *loc(const struct uroce_dev *dev)
{
	return dev->net.local_path;
}

/* local.c: connections */
void lr_accept_one(struct uroce_dev *dev, struct uroce_local *L, int lfd);
int lr_out_connect(struct uroce_dev *dev, struct uroce_local *L, struct lout *o);

/* local_rx.c */
void lr_reap(struct uroce_local *L, int i);
/* the watchers' callbacks: the bell, a listener, an inbound and an
 * outbound connection */
int lr_bell_ready(struct uroce_dev *dev, struct uroce_watcher *w);
int lr_lfd_ready(struct uroce_dev *dev, struct uroce_watcher *w);
int lr_in_ready(struct uroce_dev *dev, struct uroce_watcher *w);
int lr_out_ready(struct uroce_dev *dev, struct uroce_watcher *w);

/* local_tx.c (tx_lock held, but lr_queues_drain) */
void lr_q_free(struct uroce_local *L, struct lout *o);
void lr_out_down(struct uroce_local *L, struct lout *o);
void lr_queues_settle(struct uroce_dev *dev, struct uroce_local *L);
bool lr_queues_drain(struct uroce_dev *dev, struct uroce_local *L, bool wait,
		     bool ask);

#endif /* UROCE_NET_LOCAL_H */
