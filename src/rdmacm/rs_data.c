// SPDX-License-Identifier: MIT
/*
 * The rsocket data path (rdma-core's protocol, docs/rsocket.md).
 *
 * Each side owns a receive ring (rbuf) in two halves, and tells the peer
 * which half it may fill: the first in the connect data, the next ones by
 * RDMA-writing an rs_sge into the peer's target_sgl (RS_OP_SGL), once the
 * reader has emptied a half.  A sender copies the application's bytes
 * into its own send ring (sbuf) and RDMA-WRITEs them WITH IMMEDIATE
 * straight into the peer's ring; the immediate carries the length, so the
 * receiver copies them out to the application: one copy on each side.
 * Every message consumes one of the peer's receives, so the sender also
 * counts messages (sseq_no against sseq_comp, which each RS_OP_SGL
 * advances).  Control messages (credits, shutdown, disconnect, keepalive)
 * use RS_CTRL_MAX reserved send slots.
 *
 * Completions: every message but data is signalled; a data message is
 * signalled every RS_SIG_EVERY, and whenever it leaves less than two
 * transfers' room in the send ring or RS_SIG_EVERY twice in the queue (so
 * that a sender that waits for room always has a signalled message ahead
 * of it).  A signalled completion gives back what the
 * unsignalled ones before it held (RC completes in order): each signalled
 * message carries, in rs->sig, the count and bytes of those.  A sender
 * sleeping for the peer's credits thus wakes once per RS_SIG_EVERY
 * messages, not at each.
 *
 * Every function here is called with rs->lock held.
 */
#include <byteswap.h>
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rs.h"
#include "uroce_private.h"

#define RS_WR_RECV (1ULL << 63)

int rs_post_recv(struct rsocket *rs)
{
	struct ibv_recv_wr wr = { .wr_id = RS_WR_RECV }, *bad;

	uroce_assert_held(&rs->lock);
	return -ibv_post_recv(rs->id->qp, &wr, &bad);
}

/* flags without IBV_SEND_SIGNALED: a data message whose completion a
 * later signalled one stands for */
static int post_write(struct rsocket *rs, struct ibv_sge *sgl, int nsge,
		      uint32_t msg, unsigned int flags, uint64_t addr,
		      uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	if (flags & IBV_SEND_SIGNALED) {
		rs->sig[rs->sig_tail] = (struct rs_sig){ rs->unsig_cnt,
							 rs->unsig_bytes };
		if (++rs->sig_tail == rs->sq_size + 1)
			rs->sig_tail = 0;
		rs->unsig_cnt = 0;
		rs->unsig_bytes = 0;
	} else {
		rs->unsig_cnt++;
		rs->unsig_bytes += rs_msg_data(msg);
	}

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	/* RS_OP_WRITE (riowrite) is a plain write: the peer is not told */
	wr.opcode = rs_msg_op(msg) == RS_OP_WRITE ? IBV_WR_RDMA_WRITE :
						    IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = flags;
	wr.imm_data = htobe32(msg);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return -ibv_post_send(rs->id->qp, &wr, &bad);
}

static bool ctrl_avail(struct rsocket *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max_seqno;
}

static int post_ctrl(struct rsocket *rs, uint32_t ctrl)
{
	rs->ctrl_seqno++;
	return post_write(rs, NULL, 0, rs_msg(RS_OP_CTRL, ctrl),
			  IBV_SEND_SIGNALED, 0, 0);
}

/*
 * Gives the peer credits: one more half of our ring when the reader has
 * emptied one, and always the count of receives we have reposted.
 */
static void send_credits(struct rsocket *rs)
{
	uint32_t half = rs->rbuf_size / 2;
	uint32_t msg;

	rs->ctrl_seqno++;
	rs->rseq_comp = rs->rseq_no + (rs->rq_size >> 1);
	msg = rs_msg(RS_OP_SGL, (uint16_t)(rs->rseq_no + rs->rq_size));
	if (rs->rbuf_avail >= half) {
		struct rs_sge sge = {
			.addr = (uintptr_t)&rs->rbuf[rs->rfree],
			.key = rs->rmr->rkey,
			.length = half,
		};
		struct rs_sge *slot;
		struct ibv_sge ib;
		unsigned int flags = IBV_SEND_SIGNALED;

		if (rs->swap_sgl) {
			sge.addr = bswap_64(sge.addr);
			sge.key = bswap_32(sge.key);
			sge.length = bswap_32(sge.length);
		}
		if (rs->sq_inline >= sizeof(sge)) {
			ib.addr = (uintptr_t)&sge;
			ib.lkey = 0;
			flags |= IBV_SEND_INLINE;
		} else {
			slot = (struct rs_sge *)(rs->sbuf + rs->sbuf_size) +
			       (rs->ctrl_seqno % RS_CTRL_MAX);
			*slot = sge;
			ib.addr = (uintptr_t)slot;
			ib.lkey = rs->smr->lkey;
		}
		ib.length = sizeof(sge);
		post_write(rs, &ib, 1, msg, flags,
			   rs->remote_sgl.addr + (uint64_t)rs->remote_sge *
							 sizeof(struct rs_sge),
			   rs->remote_sgl.key);
		rs->rbuf_avail -= half;
		rs->rfree += half;
		if (rs->rfree >= rs->rbuf_size)
			rs->rfree = 0;
		if (++rs->remote_sge == (int)rs->remote_sgl.length)
			rs->remote_sge = 0;
	} else {
		post_write(rs, NULL, 0, msg, IBV_SEND_SIGNALED, 0, 0);
	}
}

void rs_update_credits(struct rsocket *rs)
{
	uint32_t half = rs->rbuf_size / 2;

	uroce_assert_held(&rs->lock);
	if (!(rs->state & RS_CONNECTED) || !ctrl_avail(rs))
		return;
	if (rs->rbuf_avail >= half ||
	    (int16_t)(rs->rseq_no - rs->rseq_comp) >= 0)
		send_credits(rs);
}

void rs_set_error(struct rsocket *rs, int err)
{
	uroce_assert_held(&rs->lock);
	if (!rs->err)
		rs->err = err;
	rs->state = (rs->state & ~RS_RDWR) | RS_ERROR;
}

static void on_recv(struct rsocket *rs, uint32_t msg, uint32_t len)
{
	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		rs->sseq_comp = (uint16_t)rs_msg_data(msg);
		/* with a payload: the next half of the peer's ring */
		if (len >= sizeof(struct rs_sge)) {
			rs->tsgl[rs->tsgl_in] = rs->target_sgl[rs->tsgl_in];
			rs->tsgl_in = (rs->tsgl_in + 1) % RS_SGL_SIZE;
		}
		break;
	case RS_OP_IOMAP_SGL:
		rs_iomap_arrived(rs, rs_msg_data(msg) & 0xffff, len);
		break;
	case RS_OP_WRITE:
		break;
	case RS_OP_CTRL:
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT) {
			rs->peer_closed = true;
			rs->state = (rs->state & ~RS_RDWR) | RS_DISCONNECTED;
		} else if (rs_msg_data(msg) == RS_CTRL_SHUTDOWN) {
			if (rs->state & RS_WRITABLE) {
				rs->state &= ~RS_READABLE;
			} else {
				rs->peer_closed = true;
				rs->state = (rs->state & ~RS_RDWR) |
					    RS_DISCONNECTED;
			}
		}
		break;
	default:
		rs->rmsg[rs->rmsg_tail].op = rs_msg_op(msg);
		rs->rmsg[rs->rmsg_tail].len = rs_msg_data(msg);
		if (++rs->rmsg_tail == rs->rq_size + 1)
			rs->rmsg_tail = 0;
		break;
	}
}

static void on_send(struct rsocket *rs, uint64_t wr_id)
{
	uint32_t msg = (uint32_t)wr_id;

	/* the unsignalled data messages before this one are done too */
	if (rs->sig_head != rs->sig_tail) {
		rs->sqe_avail += (int)rs->sig[rs->sig_head].cnt;
		rs->sbuf_avail += rs->sig[rs->sig_head].bytes;
		if (++rs->sig_head == rs->sq_size + 1)
			rs->sig_head = 0;
	}

	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
	case RS_OP_CTRL:
		rs->ctrl_max_seqno++;
		break;
	case RS_OP_IOMAP_SGL:
		rs->sqe_avail++;
		rs->sbuf_avail += sizeof(struct rs_iomap);
		break;
	default:
		rs->sqe_avail++;
		rs->sbuf_avail += rs_msg_data(msg);
		break;
	}
}

/* Reads every completion; reposts the receives they used.  0 or -errno. */
int rs_process_cq(struct rsocket *rs)
{
	struct ibv_wc wc[RS_CQ_BATCH];
	int n, rcnt = 0, err = 0;

	uroce_assert_held(&rs->lock);
	if (rs->ds)
		return rs_ds_process_cq(rs);
	if (!rs->cq)
		return 0;
	do {
		n = ibv_poll_cq(rs->cq, RS_CQ_BATCH, wc);
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & RS_WR_RECV) {
				if (wc[i].status != IBV_WC_SUCCESS) {
					if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
						rs_set_error(rs, ECONNRESET);
					continue;
				}
				rcnt++;
				if (wc[i].wc_flags & IBV_WC_WITH_IMM)
					on_recv(rs, be32toh(wc[i].imm_data),
						wc[i].byte_len);
			} else {
				on_send(rs, wc[i].wr_id);
				if (wc[i].status != IBV_WC_SUCCESS &&
				    (rs->state & RS_CONNECTED))
					rs_set_error(rs, ECONNRESET);
			}
		}
	} while (n == RS_CQ_BATCH);
	if (rcnt)
		rs->quiet_ms = 0; /* heard from the peer */
	if (rs->state & RS_CONNECTED)
		while (!err && rcnt--)
			err = rs_post_recv(rs);
	if (err)
		rs_set_error(rs, -err);
	return err;
}

void rs_drain_cq_events(struct rsocket *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	uroce_assert_held(&rs->lock);
	if (!rs->cc)
		return;
	while (!ibv_get_cq_event(rs->cc, &cq, &ctx)) {
		rs->armed = false;
		if (++rs->unacked >= 256) {
			ibv_ack_cq_events(rs->cq, rs->unacked);
			rs->unacked = 0;
		}
	}
}

/* Asks for a completion event; 1 when the CQ was armed just now. */
int rs_arm(struct rsocket *rs)
{
	uroce_assert_held(&rs->lock);
	if (!rs->cq || rs->armed)
		return 0;
	ibv_req_notify_cq(rs->cq, 0);
	rs->armed = true;
	return 1;
}

bool rs_have_rdata(struct rsocket *rs)
{
	uroce_assert_held(&rs->lock);
	return rs->rmsg_head != rs->rmsg_tail;
}

bool rs_can_send(struct rsocket *rs)
{
	uroce_assert_held(&rs->lock);
	return rs->sqe_avail > 0 && rs->sbuf_avail >= RS_SNDLOWAT &&
	       rs->sseq_no != rs->sseq_comp &&
	       rs->tsgl[rs->target_sge].length != 0;
}

bool rs_can_send_or_closed(struct rsocket *rs)
{
	uroce_assert_held(&rs->lock);
	return !(rs->state & RS_WRITABLE) || rs_can_send(rs);
}

static bool rdata_or_eof(struct rsocket *rs)
{
	return rs_have_rdata(rs) || !(rs->state & RS_READABLE);
}

static bool ctrl_or_closed(struct rsocket *rs)
{
	return ctrl_avail(rs) || !(rs->state & RS_CONNECTED);
}

static bool all_sends_done(struct rsocket *rs)
{
	return !(rs->state & RS_CONNECTED) ||
	       ((int)rs->ctrl_max_seqno - (int)rs->ctrl_seqno) + rs->sqe_avail ==
		       rs->sq_size;
}

static bool not_opening(struct rsocket *rs)
{
	return !(rs->state & RS_OPENING);
}

/*
 * A wait's sleep, on the device's packets too where the set's rsockets
 * are on one device (ctx): a packet that wakes the thread is received by
 * the thread itself (uroce_dev_poll), so the completion it brings costs
 * one wake-up, not the progress thread's and then ours.  A set with no
 * CQ yet (ctx NULL), or with rsockets of several contexts, is poll()'s.
 */
int rs_sleep(struct ibv_context *ctx, struct pollfd *fds, nfds_t n, int ms)
{
	return ctx ? uroce_dev_poll(ctx, fds, n, ms) : poll(fds, n, ms);
}

/*
 * Waits until ready(rs) holds, driving completions and CM events.  One
 * thread sleeps (rs_sleep) on the CQ channel and the CM channel, without
 * the lock; others wait for it on rs->cond.  A wait, blocking or not,
 * that has found nothing for RS_IDLE_PROBE_MS sends a keepalive
 * (rs_probe_if_quiet).
 */
int rs_wait(struct rsocket *rs, bool (*ready)(struct rsocket *rs), bool nonblock)
{
	struct ibv_context *ctx;
	struct pollfd pfd[2];
	int n;

	uroce_assert_held(&rs->lock);
	for (;;) {
		rs_process_cm(rs);
		rs_process_cq(rs);
		rs_update_credits(rs);
		if (ready(rs))
			return 0;
		rs_probe_if_quiet(rs);
		if (nonblock)
			return -EAGAIN;
		if (rs->sleeper) {
			pthread_cond_wait(&rs->cond, &rs->lock);
			continue;
		}
		/* completions that came before the arm are polled again */
		if (rs_arm(rs))
			continue;
		/* the CM channel, or a datagram rsocket's UDP socket */
		pfd[0] = (struct pollfd){ .fd = rs->fd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = rs->cc ? rs->cc->fd : -1,
					  .events = POLLIN };
		ctx = rs->cc ? rs->cc->context : NULL;
		rs->sleeper = true;
		pthread_mutex_unlock(&rs->lock);
		n = rs_sleep(ctx, pfd, 2, RS_IDLE_PROBE_MS);
		pthread_mutex_lock(&rs->lock);
		rs->sleeper = false;
		pthread_cond_broadcast(&rs->cond);
		if (n < 0 && errno != EINTR)
			return -errno;
		rs_drain_cq_events(rs);
	}
}

int64_t rs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The application waits on rs and nothing came: once RS_IDLE_PROBE_MS
 * passed since the peer was last heard from or probed, a keepalive.  It
 * costs the peer one receive; a peer that is gone makes it fail (retries
 * run out), and the socket with it, so that a peer that died without a
 * word (SIGKILL: no DREQ, docs/rdmacm.md) is an error, never a hang.
 * Whatever way the application waits: asleep, spinning on a nonblocking
 * rrecv (rstream's default), or in rpoll with short timeouts.
 */
void rs_probe_if_quiet(struct rsocket *rs)
{
	int64_t now;

	uroce_assert_held(&rs->lock);
	if (!(rs->state & RS_CONNECTED))
		return;
	now = rs_now_ms();
	if (!rs->quiet_ms) {
		rs->quiet_ms = now;
		return;
	}
	if (now - rs->quiet_ms < RS_IDLE_PROBE_MS || !ctrl_avail(rs))
		return;
	rs->quiet_ms = now;
	post_ctrl(rs, RS_CTRL_KEEPALIVE);
}

int rs_wait_connected(struct rsocket *rs, bool nonblock)
{
	uroce_assert_held(&rs->lock);
	return rs_wait(rs, not_opening, nonblock);
}

int rs_closed_errno(struct rsocket *rs)
{
	uroce_assert_held(&rs->lock);
	if (rs->state & RS_ERROR)
		return rs->err ? rs->err : ECONNRESET;
	if (rs->state & (RS_CONNECTED | RS_DISCONNECTED))
		return EPIPE;
	return ENOTCONN;
}

/* the next transfer: small first (latency), growing to RS_MAX_TRANSFER */
static uint32_t xfer_len(struct rsocket *rs, size_t left, uint32_t *olen)
{
	uint32_t x;
	uint32_t tlen = rs->tsgl[rs->target_sge].length;

	if (*olen < left) {
		x = *olen;
		if (*olen < RS_MAX_TRANSFER)
			*olen <<= 1;
	} else {
		x = (uint32_t)left;
	}
	if (x > rs->sbuf_avail)
		x = rs->sbuf_avail;
	if (x > tlen)
		x = tlen;
	return x;
}

/* copies len bytes from the iovecs at (*vi, *voff) to dst */
static void iov_take(const struct iovec *iov, int *vi, size_t *voff,
		     uint8_t *dst, size_t len)
{
	while (len) {
		size_t n = iov[*vi].iov_len - *voff;

		if (n > len)
			n = len;
		memcpy(dst, (const uint8_t *)iov[*vi].iov_base + *voff, n);
		dst += n;
		len -= n;
		*voff += n;
		if (*voff == iov[*vi].iov_len) {
			(*vi)++;
			*voff = 0;
		}
	}
}

/*
 * Posts len bytes of the iovecs at (*vi, *voff) as one write of msg to
 * (addr, rkey): inline from the application's buffer when they fit and
 * are contiguous, else copied into the send ring (two pieces when they
 * wrap).  The caller has checked the send queue slot and ring space.
 */
int rs_post_data(struct rsocket *rs, const struct iovec *iov, int *vi,
		 size_t *voff, uint32_t len, uint32_t msg, uint64_t addr,
		 uint32_t rkey)
{
	struct ibv_sge sge[2];
	unsigned int flags = 0;
	int nsge = 1;

	uroce_assert_held(&rs->lock);
	rs->sqe_avail--;
	rs->sbuf_avail -= len;
	if (rs_msg_op(msg) != RS_OP_DATA || rs->unsig_cnt + 1 >= RS_SIG_EVERY ||
	    rs->sbuf_avail < 2 * RS_MAX_TRANSFER ||
	    rs->sqe_avail < 2 * RS_SIG_EVERY)
		flags = IBV_SEND_SIGNALED;
	while (iov[*vi].iov_len == *voff && len) {
		(*vi)++;
		*voff = 0;
	}
	if (len <= rs->sq_inline && iov[*vi].iov_len - *voff >= len) {
		sge[0].addr = (uintptr_t)iov[*vi].iov_base + *voff;
		sge[0].length = len;
		sge[0].lkey = 0;
		flags |= IBV_SEND_INLINE;
		*voff += len;
	} else {
		uint32_t room = rs->sbuf_size - rs->shead;
		uint32_t first = len < room ? len : room;

		sge[0].addr = (uintptr_t)rs->sbuf + rs->shead;
		sge[0].length = first;
		sge[0].lkey = rs->smr->lkey;
		iov_take(iov, vi, voff, rs->sbuf + rs->shead, first);
		if (first < len) {
			sge[1].addr = (uintptr_t)rs->sbuf;
			sge[1].length = len - first;
			sge[1].lkey = rs->smr->lkey;
			iov_take(iov, vi, voff, rs->sbuf, len - first);
			nsge = 2;
		}
		rs->shead = (rs->shead + len) % rs->sbuf_size;
	}
	return post_write(rs, sge, nsge, msg, flags, addr, rkey);
}

/* a data message into the current half of the peer's ring */
static int write_data(struct rsocket *rs, const struct iovec *iov, int *vi,
		      size_t *voff, uint32_t len)
{
	struct rs_sge *t = &rs->tsgl[rs->target_sge];
	uint64_t addr = t->addr;

	t->addr += len;
	t->length -= len;
	if (!t->length && ++rs->target_sge == RS_SGL_SIZE)
		rs->target_sge = 0;
	rs->sseq_no++;
	return rs_post_data(rs, iov, vi, voff, len, rs_msg(RS_OP_DATA, len),
			    addr, t->key);
}

/*
 * Room to send: completions reaped first, then a wait unless nonblock
 * (-EAGAIN); 0, or the errno of a peer that closed or failed meanwhile.
 * Shared by rs_send and riowrite.
 */
int rs_wait_sendable(struct rsocket *rs, bool nonblock)
{
	int err;

	uroce_assert_held(&rs->lock);
	if (rs_can_send(rs))
		return 0;
	rs_process_cq(rs);
	if (!rs_can_send(rs)) {
		err = rs_wait(rs, rs_can_send_or_closed, nonblock);
		if (err)
			return err;
	}
	if (!(rs->state & RS_WRITABLE))
		return -rs_closed_errno(rs);
	return 0;
}

ssize_t rs_send(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		int flags)
{
	bool nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	/*
	 * Small first only when nothing is in flight: behind sends still
	 * under way the first bytes wait anyway, and a stream of writes
	 * then goes in the largest transfers (fewer messages, completions
	 * and credits per byte).
	 */
	uint32_t olen = rs->sbuf_avail < rs->sbuf_size ? RS_MAX_TRANSFER :
							 RS_OLAP_START,
		 x;
	size_t total = 0, sent = 0;
	size_t voff = 0;
	int vi = 0, err = 0;

	uroce_assert_held(&rs->lock);
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (rs->state & RS_OPENING) {
		err = rs_wait(rs, not_opening, nonblock);
		if (err)
			return err;
	}
	if (!(rs->state & RS_WRITABLE))
		return -rs_closed_errno(rs);
	if (rs->iomap_pending) {
		err = rs_iomap_send(rs, nonblock);
		if (err)
			return err;
	}
	while (sent < total) {
		err = rs_wait_sendable(rs, nonblock);
		if (err)
			break;
		x = xfer_len(rs, total - sent, &olen);
		err = write_data(rs, iov, &vi, &voff, x);
		if (err) {
			rs_set_error(rs, -err);
			break;
		}
		sent += x;
	}
	if (sent)
		return (ssize_t)sent;
	return err ? err : 0;
}

/* copies up to len bytes of the ring at *off (wrapping) to the iovecs */
static size_t ring_copy(struct rsocket *rs, uint32_t *off,
			const struct iovec *iov, int *vi, size_t *voff,
			int iovcnt, size_t len)
{
	size_t done = 0;

	while (done < len && *vi < iovcnt) {
		size_t n = iov[*vi].iov_len - *voff;
		size_t end = rs->rbuf_size - *off;

		if (n > len - done)
			n = len - done;
		if (n > end)
			n = end;
		memcpy((uint8_t *)iov[*vi].iov_base + *voff, rs->rbuf + *off, n);
		done += n;
		*voff += n;
		*off = (uint32_t)((*off + n) % rs->rbuf_size);
		if (*voff == iov[*vi].iov_len) {
			(*vi)++;
			*voff = 0;
		}
	}
	return done;
}

static size_t peek(struct rsocket *rs, const struct iovec *iov, int iovcnt)
{
	uint32_t off = rs->roff;
	int head = rs->rmsg_head, vi = 0;
	size_t voff = 0, got = 0;

	while (head != rs->rmsg_tail && vi < iovcnt) {
		size_t n = ring_copy(rs, &off, iov, &vi, &voff, iovcnt,
				     rs->rmsg[head].len);

		got += n;
		if (n < rs->rmsg[head].len)
			break;
		if (++head == rs->rq_size + 1)
			head = 0;
	}
	return got;
}

/* Data the peer sent before it closed or failed is still read. */
ssize_t rs_recv(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		int flags)
{
	bool nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t total = 0, got = 0, voff = 0;
	int vi = 0, err = 0;

	uroce_assert_held(&rs->lock);
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (rs->state & RS_OPENING) {
		err = rs_wait(rs, not_opening, nonblock);
		if (err)
			return err;
	}
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)))
		return -ENOTCONN;
	if (!total)
		return 0;
	do {
		if (!rs_have_rdata(rs)) {
			rs_process_cq(rs);
			if (!rs_have_rdata(rs)) {
				err = rs_wait(rs, rdata_or_eof,
					      nonblock ||
						      (got &&
						       !(flags & MSG_WAITALL)));
				if (err || !rs_have_rdata(rs))
					break;
			}
		}
		if (flags & MSG_PEEK) {
			got = peek(rs, iov, iovcnt);
			break;
		}
		while (got < total && rs_have_rdata(rs)) {
			struct rs_rmsg *m = &rs->rmsg[rs->rmsg_head];
			size_t n = ring_copy(rs, &rs->roff, iov, &vi, &voff,
					     iovcnt, m->len);

			got += n;
			rs->rbuf_avail += (uint32_t)n;
			m->len -= (uint32_t)n;
			if (m->len)
				break;
			rs->rseq_no++;
			if (++rs->rmsg_head == rs->rq_size + 1)
				rs->rmsg_head = 0;
		}
		rs_update_credits(rs);
	} while (got < total && (flags & MSG_WAITALL));
	if (got)
		return (ssize_t)got;
	if (err && err != -EAGAIN)
		return err;
	if (!rs_have_rdata(rs) && !(rs->state & RS_READABLE)) {
		/* the end of the stream, or a connection that failed */
		if ((rs->state & RS_ERROR) && !rs->peer_closed)
			return -(rs->err ? rs->err : ECONNRESET);
		return 0;
	}
	return err;
}

/*
 * SHUT_WR sends SHUTDOWN (or DISCONNECT when we no longer read), SHUT_RD
 * only stops reading; both then wait for what was sent to be delivered.
 */
int rs_shutdown(struct rsocket *rs, int how)
{
	uint32_t ctrl;
	int err = 0;

	uroce_assert_held(&rs->lock);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)))
		return -ENOTCONN;
	if (!(rs->state & RS_CONNECTED))
		return 0;
	if (how == SHUT_RDWR) {
		ctrl = RS_CTRL_DISCONNECT;
		rs->state &= ~(RS_READABLE | RS_WRITABLE);
	} else if (how == SHUT_WR) {
		if (!(rs->state & RS_WRITABLE))
			return 0;
		rs->state &= ~RS_WRITABLE;
		ctrl = (rs->state & RS_READABLE) ? RS_CTRL_SHUTDOWN :
						   RS_CTRL_DISCONNECT;
	} else {
		rs->state &= ~RS_READABLE;
		if (rs->state & RS_WRITABLE)
			return 0;
		ctrl = RS_CTRL_DISCONNECT;
	}
	if (!ctrl_avail(rs))
		err = rs_wait(rs, ctrl_or_closed, false);
	if (!err && (rs->state & RS_CONNECTED) && ctrl_avail(rs))
		err = post_ctrl(rs, ctrl);
	if (!err && (rs->state & RS_CONNECTED))
		err = rs_wait(rs, all_sends_done, false);
	if (ctrl == RS_CTRL_DISCONNECT && (rs->state & RS_CONNECTED))
		rs->state = (rs->state & ~RS_CONNECTED) | RS_DISCONNECTED;
	return err;
}
