/* SPDX-License-Identifier: MIT */
/*
 * rsockets (rdma/rsocket.h, docs/rsocket.md): stream sockets over RC QPs
 * and datagram sockets over UD QPs, speaking rdma-core's rsocket
 * protocols on the wire.
 *
 * A stream rsocket's number is the descriptor of its rdma_cm event
 * channel, a datagram rsocket's that of its UDP socket: a kernel
 * descriptor that it owns, so that it never collides with one of
 * the application's: every r* call looks its descriptor up in the table
 * and, when it is not an rsocket, makes the kernel call it stands for.
 *
 *   rsocket.c   the entry points: lookup, pass-through, options, names
 *   rs_conn.c   setup and teardown: connect, listen, accept, CM events,
 *               the connect private data, QP and buffers
 *   rs_data.c   the data path: the ring, credits, control messages, CQ,
 *               waiting
 *   rs_poll.c   rpoll / rselect over rsockets and ordinary descriptors
 *   rs_epoll.c  repoll_*: epoll over rsockets and ordinary descriptors
 *   rs_dgram.c  datagram rsockets: the UDP socket, the UD QP, the peers
 *
 * Locking: rs_table_lock serialises changes to the table (lookups take no
 * lock: rsocket.c says why that holds).  Each rsocket has one mutex
 * (rs->lock) over its state, rings and QP; a call that must wait lets one
 * thread sleep (rs_sleep) on the rsocket's descriptors without the lock
 * (rs->sleeper) and the others on rs->cond, woken when it comes back.
 * Order: rs->lock, then cm.lock (inside the rdma_* calls); the whole
 * table is core/lock.h.
 */
#ifndef UROCE_RDMACM_RS_H
#define UROCE_RDMACM_RS_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "core/lock.h"

/*
 * The wire (rdma-core's rsocket protocol, rsocket(7)).  Every message is
 * an RDMA WRITE WITH IMMEDIATE; the immediate says what it is: bits 31-29
 * the operation, bits 28-0 its datum.
 */
enum {
	RS_OP_DATA = 0,	 /* datum: bytes written into our ring */
	RS_OP_WRITE = 2, /* never on the wire (a plain RDMA WRITE) */
	RS_OP_SGL = 4,	 /* datum: the sender may send up to this seq */
	RS_OP_IOMAP_SGL = 6,
	RS_OP_CTRL = 7, /* datum: one of RS_CTRL_* */
};

enum {
	RS_CTRL_DISCONNECT,
	RS_CTRL_KEEPALIVE,
	RS_CTRL_SHUTDOWN,
};

#define rs_msg(op, data) (((uint32_t)(op) << 29) | (uint32_t)(data))
#define rs_msg_op(m)	 ((m) >> 29)
#define rs_msg_data(m)	 ((m)&0x1fffffff)

/*
 * Where the peer may write next: written by the peer itself (RS_OP_SGL) in
 * its own byte order, which the connect data's NET flag gives.
 */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/* an entry of a target iomap: where riowrite's offset lands (riomap) */
struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

/* one riomap of ours */
struct rs_iomr {
	struct ibv_mr *mr;
	uint64_t offset;
	bool pending; /* the peer has not been told yet */
};

/* the private data of the REQ and of the REP (40 bytes) */
struct rs_conn_data {
	uint8_t version;  /* 1 */
	uint8_t flags;	  /* RS_CONN_FLAG_* */
	uint16_t credits; /* be: receives posted */
	uint8_t reserved[3];
	uint8_t target_iomap_size; /* scaled: no riomap here, 0 */
	struct rs_sge target_sgl;  /* be: where the peer's SGL lives */
	struct rs_sge data_buf;	   /* be: the first half of the ring */
} __attribute__((packed));

#define RS_CONN_FLAG_NET   (1 << 0)
#define RS_CONN_FLAG_IOMAP (1 << 1)

#define RS_SGL_SIZE	2 /* the ring's two halves */
#define RS_CTRL_MAX	4 /* control messages in flight */
#define RS_SNDLOWAT	2048
#define RS_MAX_TRANSFER 65536
#define RS_OLAP_START	2048
#define RS_SIG_EVERY	8 /* data messages per signalled one */
/*
 * Completions are read RS_CQ_BATCH at a time, and a read that returns
 * fewer ends it: the CQ was empty.  Reading on to an empty poll costs a
 * look at the device's socket (a system call) between a message's
 * arrival and the program's answer to it (docs/rsocket.md, "Performance").
 */
#define RS_CQ_BATCH 16

/* the socket's life; bits, so that a test asks for what it needs */
enum {
	RS_INIT = 0,
	RS_BOUND = 1 << 0,
	RS_LISTENING = 1 << 1,
	RS_OPENING = 1 << 2, /* resolving, connecting */
	RS_CONNECTED = 1 << 3,
	RS_READABLE = 1 << 4,
	RS_WRITABLE = 1 << 5,
	RS_DISCONNECTED = 1 << 6, /* the peer closed (or we did) */
	RS_ERROR = 1 << 7,	  /* the QP failed, the connect failed */
};
#define RS_RDWR (RS_CONNECTED | RS_READABLE | RS_WRITABLE)

/* what a signalled send's completion gives back of the unsignalled
 * data messages posted before it */
struct rs_sig {
	uint32_t cnt;
	uint32_t bytes;
};

struct rs_rmsg {
	uint32_t op;
	uint32_t len;
};

struct rs_dgram;

struct rsocket {
	int fd; /* our number: ch->fd, or ds->udp */
	int domain;
	struct rs_dgram *ds; /* SOCK_DGRAM: rs_dgram.c */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool sleeper; /* a thread waits in rs_sleep */
	int state;
	int err;	  /* SO_ERROR */
	bool nonblock;	  /* O_NONBLOCK */
	bool peer_closed; /* the peer sent DISCONNECT */
	/* send calls made: repoll's edge-triggered EPOLLOUT (rs_epoll.c) */
	_Atomic unsigned int sends;

	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	bool armed;
	unsigned int unacked;
	int64_t quiet_ms; /* waited on since, nothing received (0: not) */

	/* options, fixed once connected */
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline;
	bool keepalive, nodelay, reuseaddr, v6only;
	int keepidle;

	/* sending: our ring, the peer's ring halves, credits */
	uint8_t *sbuf; /* sbuf_size + control area */
	struct ibv_mr *smr;
	uint32_t shead; /* next byte of sbuf to fill */
	uint32_t sbuf_avail;
	int sqe_avail;
	uint16_t sseq_no, sseq_comp; /* messages sent, allowed */
	struct rs_sig *sig;	     /* sq_size + 1, signalled in flight */
	int sig_head, sig_tail;
	uint32_t unsig_cnt, unsig_bytes; /* since the last signalled */
	unsigned int ctrl_seqno, ctrl_max_seqno;
	struct rs_sge *target_sgl; /* RS_SGL_SIZE, written by the peer */
	struct ibv_mr *target_mr;
	/*
	 * Our copy of the target SGL, taken when the SGL message's
	 * completion says an entry was written (never read while the
	 * peer's write may be landing); tsgl_in: the entry it writes next.
	 */
	struct rs_sge tsgl[RS_SGL_SIZE];
	int tsgl_in;
	int target_sge;		  /* the entry we send into */
	bool swap_sgl;		  /* the peer's byte order differs */
	struct rs_sge remote_sgl; /* the peer's target_sgl */
	int remote_sge;

	/* riomap: the table the peer writes, our copy, our mappings */
	uint16_t iomap_size;	       /* entries of our table */
	struct rs_iomap *target_iomap; /* behind target_sgl, same MR */
	struct rs_iomap *iomap;	       /* our copy, iomap_size entries */
	struct rs_sge remote_iomap;    /* the peer's table (length: entries) */
	struct rs_iomr *maps;	       /* remote_iomap.length slots */
	struct rs_iomr *local_maps;    /* PROT_NONE mappings */
	int nlocal_maps;
	bool iomap_pending;

	/* receiving: our ring, messages not yet read */
	uint8_t *rbuf;
	struct ibv_mr *rmr;
	uint32_t roff;	     /* next byte to read */
	uint32_t rbuf_avail; /* read, not yet given back */
	uint32_t rfree;	     /* the half given back next */
	uint16_t rseq_no, rseq_comp;
	struct rs_rmsg *rmsg; /* rq_size + 1 */
	int rmsg_head, rmsg_tail;
};

/* rsocket.c */
struct rsocket *rs_lookup(int fd);
int rs_table_set(int fd, struct rsocket *rs);

/* rs_conn.c */
struct rsocket *rs_alloc(int domain);
void rs_free(struct rsocket *rs);
int rs_make_cq(struct rsocket *rs);
int rs_process_cm(struct rsocket *rs);
int rs_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len);
int rs_listen(struct rsocket *rs, int backlog);
struct rsocket *rs_accept(struct rsocket *rs);
int rs_set_nonblock(struct rsocket *rs, bool on);

/* rs_data.c */
int rs_process_cq(struct rsocket *rs);
void rs_update_credits(struct rsocket *rs);
bool rs_can_send(struct rsocket *rs);
bool rs_have_rdata(struct rsocket *rs);
int rs_sleep(struct ibv_context *ctx, struct pollfd *fds, nfds_t n, int ms);
int rs_wait(struct rsocket *rs, bool (*ready)(struct rsocket *rs),
	    bool nonblock);
int rs_wait_connected(struct rsocket *rs, bool nonblock);
void rs_probe_if_quiet(struct rsocket *rs);
#define RS_IDLE_PROBE_MS 1000
int64_t rs_now_ms(void);
ssize_t rs_send(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		int flags);
ssize_t rs_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		int flags);
int rs_shutdown(struct rsocket *rs, int how);
void rs_drain_cq_events(struct rsocket *rs);
int rs_arm(struct rsocket *rs);
int rs_post_recv(struct rsocket *rs);
int rs_post_data(struct rsocket *rs, const struct iovec *iov, int *vi,
		 size_t *voff, uint32_t len, uint32_t msg, uint64_t addr,
		 uint32_t rkey);
void rs_set_error(struct rsocket *rs, int err);
int rs_closed_errno(struct rsocket *rs);
bool rs_can_send_or_closed(struct rsocket *rs);
int rs_wait_sendable(struct rsocket *rs, bool nonblock);

/* rs_iomap.c */
off_t rs_iomap_add(struct rsocket *rs, void *buf, size_t len, int prot,
		   off_t offset);
int rs_iomap_remove(struct rsocket *rs, void *buf, size_t len);
int rs_iomap_send(struct rsocket *rs, bool nonblock);
void rs_iomap_arrived(struct rsocket *rs, uint32_t index, uint32_t len);
ssize_t rs_iowrite(struct rsocket *rs, const void *buf, size_t len,
		   off_t offset, int flags);
void rs_iomap_free(struct rsocket *rs);
int rs_value_to_scale(int value, int bits);
int rs_scale_to_value(int value, int bits);

/* rs_epoll.c (their prototypes are rdma-core's rsocket.h since 2026) */
int repoll_create(int flags);
int repoll_ctl(int epfd, int op, int fd, struct epoll_event *event);
int repoll_wait(int epfd, struct epoll_event *events, int maxevents,
		int timeout);
void rs_epoll_forget(int fd);
bool rs_epoll_close(int fd);

/* rs_dgram.c */
int rs_ds_init(struct rsocket *rs, int type);
void rs_ds_free(struct rsocket *rs);
int rs_ds_process_udp(struct rsocket *rs);
int rs_ds_process_cq(struct rsocket *rs);
bool rs_ds_have_data(struct rsocket *rs);
bool rs_ds_can_send(struct rsocket *rs);
short rs_ds_revents(struct rsocket *rs);
int rs_ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t len);
int rs_ds_connect(struct rsocket *rs, const struct sockaddr *addr,
		  socklen_t len);
ssize_t rs_ds_send(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		   int flags, const struct sockaddr *to, socklen_t tolen);
ssize_t rs_ds_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		   int flags, struct sockaddr_storage *from, int *mflags);
void rs_ds_close(struct rsocket *rs);
int rs_ds_getname(struct rsocket *rs, struct sockaddr *addr, socklen_t *len,
		  bool peer);
int rs_ds_sockopt(struct rsocket *rs, bool set, int level, int name, void *val,
		  socklen_t *len);

#endif
