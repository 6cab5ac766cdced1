// SPDX-License-Identifier: MIT
/*
 * The shared device (share.c, docs/shared.md): what the registry side
 * (share.c) and the receive side (share_rx.c) share.
 */
#ifndef UROCE_NET_SHARE_H
#define UROCE_NET_SHARE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "dev.h"
#include "uroce_shm.h"

/* a manufacturer-specific opcode (IBA 9.2: 0xC0..0xFF), never valid on
 * the wire for us: BTH, then the index asked for at byte 8, nonce at 12 */
#define PROBE_OPCODE 0xfe
#define PROBE_LEN    20

/* IB CM (IBA 12.6): MAD attribute IDs and where the IDs we demux by are
 * (share_rx.c gsi_slot, and the program's prog_gsi in share.c) */
#define CM_CLASS    0x07
#define CM_REQ	    0x0010
#define CM_SIDR_REQ 0x0017
#define CM_SIDR_REP 0x0018
#define MAD_OFF	    (UROCE_BTH_LEN + 8) /* BTH, DETH */
#define MAD_DATA    24			/* the CM data, in the MAD */
#define GSI_QPN	    1 /* IBA 3.9.6: QP1, the general services */

#define FWD_PKT	  1
#define FWD_HELLO 2 /* a member joined: watch it */
#define FWD_LEFT  3 /* a member closed its socket: new program */
#define FWD_BATCH 8
#define FWD_BUF	  (UROCE_MAX_HDR_LEN + 4096 + 8 + UROCE_ICRC_LEN)

struct fwd_hdr {
	uint32_t kind;
	uint32_t ip_id;
	struct sockaddr_storage src, dst;
};

/* a forwarded datagram its owner's queue had no room for (share_rx.c,
 * "The owner's queue is full") */
struct share_held {
	TAILQ_ENTRY(share_held) link;
	uint64_t since_ns;
	uint32_t slot;
	uint32_t len; /* of data: the fwd_hdr, then the packet */
	uint8_t data[];
};

struct uroce_share {
	pthread_mutex_t mu; /* this process's users of the file */
	int fd;		    /* the registry file */
	struct uroce_share_seg *seg;
	uint32_t slot;
	int fwd_fd; /* abstract AF_UNIX datagram socket */
	int epfd;   /* where fwd_fd and pidfds are watched */
	struct uroce_watcher *member_w; /* the pidfds' (dev->net's) */
	char addr[48];
	char path[128];		       /* of the registry file */
	int sock;		       /* our member of the group */
	struct sockaddr_storage local; /* its address */
	bool left;		       /* out of the registry already */
	int pidfd[UROCE_SHARE_SLOTS];  /* the other members, watched */
	/* forwarded datagrams waiting for room in their owners' queues, in
	 * arrival order; held_mu is a leaf lock (taken under rx_lock or the
	 * registry's, never the other way) */
	pthread_mutex_t held_mu;
	TAILQ_HEAD(, share_held) held;
	uint32_t nheld;
	uint16_t held_for[UROCE_SHARE_SLOTS]; /* of them, per owner */
	int retry_fd;			      /* timerfd: try them again */
};

/* share.c: the registry's lock and what runs under it (reap,
 * attach_prog: "Locked"), the forwarding socket's name, probes, and
 * the watch on the other members */
int share_lock_seg(struct uroce_share *sh);
void share_unlock_seg(struct uroce_share *sh);
int share_reap(struct uroce_share_seg *seg, uint32_t self);
/* the registry changed (Locked): its program is stale until one is
 * attached for the new epoch; prog_current (share_rx.c) reads the epoch
 * without the lock */
static inline void share_seg_changed(struct uroce_share_seg *seg)
{
	__atomic_add_fetch(&seg->epoch, 1, __ATOMIC_RELEASE);
}
int share_attach_prog(struct uroce_share_seg *seg, int sock, uint32_t without);
void share_fwd_name(const struct uroce_share *sh, uint32_t slot,
		    struct sockaddr_un *un, socklen_t *len);
void share_send_probes(struct uroce_share *sh, int sock,
		       const struct sockaddr_storage *addr);
void share_rescan(struct uroce_share *sh);
void share_unwatch(struct uroce_share *sh, uint32_t s);
/* share_rx.c: leaving, what our socket holds and what waits for room
 * goes on to its owners */
void share_forward_queued(struct uroce_share *sh, int sock);
void share_unmatch(const struct uroce_share *sh, int sock);
void share_held_free(struct uroce_share *sh);
/* ... the watchers' callbacks (dev->net.share_fwd_w, share_member_w):
 * another member forwarded packets; a member went */
int uroce_share_fwd_ready(struct uroce_dev *dev, struct uroce_watcher *w);
int uroce_share_member_ready(struct uroce_dev *dev, struct uroce_watcher *w);
/* ... and the retry timer of what waits for room (share_retry_w) */
int uroce_share_retry_ready(struct uroce_dev *dev, struct uroce_watcher *w);

#endif /* UROCE_NET_SHARE_H */
