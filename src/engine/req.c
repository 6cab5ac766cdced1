// SPDX-License-Identifier: MIT
/*
 * The requester: walks the send queue and turns WQEs into request packets,
 * paced by a PSN window, with go-back-N retransmission from the completer's
 * oldest unacknowledged PSN (IBA 9.7.4).
 */
#include <errno.h>
#include <string.h>

#include "dev.h"

static uint32_t sq_mask(const struct uroce_qp *qp)
{
	return qp->sq.size - 1;
}

/* Packets the requester may have in flight (the peer's socket buffer is
 * the only flow control a UDP path has), and at most 1 MiB of them: a
 * cap in bytes, so that a path of 1 KiB packets (Ethernet MTU 1500)
 * keeps as much in flight as one of 4 KiB packets (docs/transport.md,
 * "Flow control") */
static uint32_t tx_window(const struct uroce_qp *qp)
{
	uint32_t w = qp->dev->net.rcvbuf / (2 * (qp->mtu + 512));
	uint32_t max = UROCE_TX_WINDOW_BYTES / qp->mtu;

	if (w > max)
		w = max;
	if (w < UROCE_TX_WINDOW_MIN)
		w = UROCE_TX_WINDOW_MIN;
	return w;
}

/*
 * READ responses come in a burst that the responder sends at its own
 * pace, which no window of ours spaces out: so a QP asks for at most
 * UROCE_READ_WINDOW packets of them at once, whatever its window (rxe
 * in the interop guest, asked for 1 024 at once, delivered them with
 * gaps until RETRY_EXC_ERR: docs/transport.md, "Flow control").  A
 * request asks for half of that at most, so that two keep the responder
 * busy.
 */
static uint32_t read_window(const struct uroce_qp *qp)
{
	uint32_t w = tx_window(qp);

	return w < UROCE_READ_WINDOW ? w : UROCE_READ_WINDOW;
}

static uint32_t read_seg(const struct uroce_qp *qp)
{
	return read_window(qp) / 2;
}

#define PATH_CHECK_NS 1000000ull /* ring or UDP: asked about once a ms */

/* the peer's ring in packets, 0 when packets to it go by UDP (asked
 * again after PATH_CHECK_NS, on the coarse clock: this is asked for
 * every packet; and at once when a ring came up: the first packet to a
 * same-host peer connects its ring, and the window of 1 KiB packets the
 * requester went on with for a millisecond filled the ring and went on
 * through the overflow queue, docs/local.md) */
static uint32_t ring_slots(struct uroce_qp *qp)
{
	const struct uroce_pkt_io *io = qp->dev->net.io;
	uint64_t now = uroce_coarse_ns();
	uint32_t gen = atomic_load_explicit(&qp->dev->net.path_gen,
					    memory_order_relaxed);

	if (!qp->req.path_ns || now - qp->req.path_ns > PATH_CHECK_NS ||
	    gen != qp->req.path_gen) {
		qp->req.path_ns = now;
		qp->req.path_gen = gen;
		qp->req.ring_slots =
			io && io->ring_window ?
				io->ring_window(qp->dev, &qp->peer,
						qp->attr.dest_qp_num) :
				0;
	}
	return qp->req.ring_slots;
}

/* the payload of a full packet on the QP's path now (seg_of, below) */
static uint32_t full_pkt(struct uroce_qp *qp)
{
	return ring_slots(qp) && qp->mtu < UROCE_RING_MTU ? UROCE_RING_MTU :
							    qp->mtu;
}

/*
 * The most the window may open to: tx_window, and on the same-host path
 * no more than the peer's ring holds.  Past a full ring packets are
 * copied into the sender's overflow queue and copied again later
 * (docs/local.md, "A full ring"); a window of the ring's size leaves
 * them in the send queue instead (tgtd's RDMA WRITEs to libiscsi, 32
 * commands of 64 KiB in flight: half of all packets went through the
 * queue).  Not for READ segments (send_read), which must keep the
 * packet offsets they were first sent at.
 */
static uint32_t flow_window(struct uroce_qp *qp)
{
	uint32_t w = tx_window(qp), ring = ring_slots(qp);

	if (ring && ring < w)
		w = ring;
	return w < UROCE_TX_WINDOW_MIN ? UROCE_TX_WINDOW_MIN : w;
}

/* after a CNP's cut (uroce_req_ecn), the window grows by a packet a
 * round trip; it slow-starts again this long after the last cut */
#define ECN_CA_NS 100000000ull

/*
 * The window actually used (a congestion window): a timeout drops it to a
 * few packets, a gap halves it, and every packet acknowledged adds one,
 * so a slow or lossy peer is not buried under whole-window resends.
 */
static uint32_t cur_window(struct uroce_qp *qp)
{
	uint32_t w = flow_window(qp);

	/* never set: the whole window; under the delay control a slow
	 * start from the least, so that the first RTT samples, which set
	 * the base, do not wait behind a whole window of each QP that
	 * started at the same time (docs/congestion.md, "Delay") */
	if (!qp->req.cwnd && qp->dev->cc.delay && uroce_qp_reliable(qp))
		qp->req.cwnd = UROCE_TX_WINDOW_MIN;
	if (!qp->req.cwnd || qp->req.cwnd > w)
		qp->req.cwnd = w;
	return qp->req.cwnd;
}

static uint64_t timeout_ns(const struct uroce_qp *qp)
{
	/* IBA 9.7.6.1.3: 4.096 us * 2^timeout; 0 means wait forever */
	if (!qp->attr.timeout)
		return 0;
	return 4096ull << qp->attr.timeout;
}

/*
 * Loss detection at RTT scale (docs/transport.md, "Loss recovery at RTT
 * scale").  The
 * RTT is measured as TCP does (RFC 6298): one PSN timed at a time, from
 * its first transmission to the ACK or response that covers it; a PSN
 * sent again is never timed (Karn's rule).
 */
#define PROBE_MIN_NS	1000000ull /* docs/transport.md: the 1 ms floor */
#define PROBE_INIT_NS	2000000ull /* before the first RTT sample */
#define PROBE_MAX_SHIFT 6
#define REGAP_MIN_NS	20000ull

static void rtt_sample(struct uroce_qp *qp, uint64_t r)
{
	struct uroce_req_state *q = &qp->req;

	if (!r)
		r = 1;
	if (!q->srtt_ns) {
		q->srtt_ns = r;
		q->rttvar_ns = r / 2;
		return;
	}
	q->rttvar_ns = (3 * q->rttvar_ns +
			(q->srtt_ns > r ? q->srtt_ns - r : r - q->srtt_ns)) /
		       4;
	q->srtt_ns = (7 * q->srtt_ns + r) / 8;
}

/* RFC 6298's RTO without its floor: SRTT + 4 RTTVAR */
static uint64_t rto_ns(const struct uroce_req_state *q)
{
	return q->srtt_ns + 4 * q->rttvar_ns;
}

uint64_t uroce_req_regap_ns(const struct uroce_qp *qp, bool nak)
{
	uint64_t t = nak ? qp->req.srtt_ns / 2 : rto_ns(&qp->req);

	return t > REGAP_MIN_NS ? t : REGAP_MIN_NS;
}

/* probe timeout: two RTTs (RACK-TLP's PTO), at least the RTT's spread
 * beyond it, doubling with each probe that brought nothing; 0: no more
 * probes until the next progress */
static uint64_t probe_ns(const struct uroce_qp *qp)
{
	const struct uroce_req_state *q = &qp->req;
	uint64_t t = PROBE_INIT_NS;

	if (q->srtt_ns) {
		t = 2 * q->srtt_ns;
		if (t < rto_ns(q))
			t = rto_ns(q);
	}
	t <<= q->probes < PROBE_MAX_SHIFT ? q->probes : PROBE_MAX_SHIFT;
	/* at least one probe, however slow the path looked, at most a
	 * quarter of the ACK timeout away: a probe costs one packet, a
	 * timeout a retry.  But once they are that far apart the peer is
	 * slow, not lossy (a descheduled process): further probes only add
	 * to its load, and the timeout's go-back resends the tail anyway */
	if (timeout_ns(qp) && t > timeout_ns(qp) / 4) {
		if (q->probes)
			return 0;
		t = timeout_ns(qp) / 4;
	}
	return t < PROBE_MIN_NS ? PROBE_MIN_NS : t;
}

static void probe_arm(struct uroce_qp *qp)
{
	uint64_t t;

	if (!uroce_qp_reliable(qp) || qp->comp.psn == qp->req.psn_max ||
	    qp->req.rnr_deadline_ns || !(t = probe_ns(qp))) {
		qp->req.probe_deadline_ns = 0;
		return;
	}
	qp->req.probe_deadline_ns = uroce_now_ns() + t;
	uroce_qp_timer_arm(qp, qp->req.probe_deadline_ns);
}

uint64_t uroce_req_next_deadline(const struct uroce_qp *qp)
{
	const uint64_t d[] = {
		qp->req.rnr_deadline_ns ? qp->req.rnr_deadline_ns :
					  qp->req.deadline_ns,
		qp->req.pace_deadline_ns,
		qp->req.rnr_deadline_ns ? 0 : qp->req.probe_deadline_ns,
		qp->req.credit_deadline_ns,
	};
	uint64_t next = 0;
	size_t i;

	for (i = 0; i < UROCE_ARRAY_SIZE(d); i++)
		if (d[i] && (!next || d[i] < next))
			next = d[i];
	return next;
}

void uroce_req_progress(struct uroce_qp *qp, uint32_t acked)
{
	uint32_t w = flow_window(qp);

	uroce_assert_held(&qp->dev->lock);
	/* grow by what was acknowledged: doubles once per round trip (from
	 * the window in use: cwnd 0, never set, means the whole window) */
	uint32_t c = cur_window(qp);

	qp->req.backoff = 0;
	/* the delay control holds it while the QP is unpaced and the last
	 * RTT sample was above its target (engine/cc.c): a slow start ends
	 * before the filter lets the control see the queue it builds; a
	 * paced QP's window grows, the rate is its limit */
	if (qp->req.ecn_cut_ns &&
	    uroce_now_ns() - qp->req.ecn_cut_ns < ECN_CA_NS) {
		/* a CNP cut it lately: one packet a round trip, as after an
		 * ECN cut in TCP (uroce_req_ecn) */
		qp->req.ca_acked += acked;
		if (qp->req.ca_acked >= c) {
			qp->req.ca_acked -= c;
			qp->req.cwnd = c + 1 > w ? w : c + 1;
		}
	} else if (!qp->dev->cc.delay || !qp->cc.hold || qp->cc.rate) {
		qp->req.cwnd = c + acked > w ? w : c + acked;
	}
	/* the timed PSN is covered: an RTT sample */
	if (qp->req.rtt_sent_ns &&
	    uroce_psn_cmp(qp->comp.psn, qp->req.rtt_psn) > 0) {
		rtt_sample(qp, uroce_now_ns() - qp->req.rtt_sent_ns);
		qp->req.rtt_sent_ns = 0;
	}
	if (qp->dev->cc.delay)
		qp->cc.dlv_bytes += (uint64_t)acked * full_pkt(qp);
	if (qp->cc.ts_ns && uroce_psn_cmp(qp->comp.psn, qp->cc.ts_psn) > 0) {
		/* to the ACK's arrival in the kernel where the socket says
		 * it: not the wait for a thread to read it (docs/congestion.md
		 * "The RTT") */
		uint64_t end = uroce_now_ns(), at = qp->cc.ack_ns;

		if (at > qp->cc.ts_ns && at < end)
			end = at;
		uroce_cc_delay(qp, end - qp->cc.ts_ns);
		qp->cc.ts_ns = 0;
	}
	qp->req.probes = 0;
	probe_arm(qp);
}

void uroce_req_loss(struct uroce_qp *qp)
{
	uroce_assert_held(&qp->dev->lock);
	/* a packet was lost: halve, so a lossy path is not flooded with
	 * whole-window resends (go-back-N resends all after the gap) */
	qp->req.cwnd = cur_window(qp) / 2;
	if (qp->req.cwnd < UROCE_TX_WINDOW_MIN)
		qp->req.cwnd = UROCE_TX_WINDOW_MIN;
}

/*
 * A CNP under DCQCN (engine/cc.c): besides the rate, the window shrinks
 * by alpha / 2, at most once a round trip (DCTCP's rule, RFC 8257).  The
 * rate alone does not keep the queue short here: its feedback comes
 * every few milliseconds on a loaded host, not every 50 us as on a NIC,
 * and between CNPs the rate recovers to more than the window lets
 * through, so the window (1 MiB a QP) was what filled the queue.
 */
void uroce_req_ecn(struct uroce_qp *qp, uint32_t alpha)
{
	uint64_t now = uroce_now_ns();
	uint32_t c;

	uroce_assert_held(&qp->dev->lock);
	if (qp->req.ecn_cut_ns && now - qp->req.ecn_cut_ns < qp->req.srtt_ns)
		return;
	qp->req.ecn_cut_ns = now;
	c = cur_window(qp);
	c -= (uint32_t)((uint64_t)c * alpha / (2 * 1024));
	qp->req.cwnd = c < UROCE_TX_WINDOW_MIN ? UROCE_TX_WINDOW_MIN : c;
	qp->req.ca_acked = 0;
}

uint64_t uroce_req_window_rate(struct uroce_qp *qp)
{
	if (!qp->req.srtt_ns)
		return 0;
	return (uint64_t)cur_window(qp) * full_pkt(qp) * 1000000000ull /
	       qp->req.srtt_ns;
}

static uint32_t max_rd(const struct uroce_qp *qp)
{
	return qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
}

/*
 * READ and atomic requests that may be executing at the responder: every
 * one sent with a PSN in [comp.psn, psn_max).  Counted from the WQEs, not
 * kept as a counter, so that rewinds and late responses cannot skew it:
 * the responder keeps only max_dest_rd_atomic results to replay.
 */
static uint32_t rd_outstanding(struct uroce_qp *qp)
{
	uint32_t seg = read_seg(qp), count = 0, i;

	for (i = qp->sq.tail; i != qp->sq.head; i++) {
		struct uroce_send_wqe *wqe = &qp->sq.wqe[i & sq_mask(qp)];
		int32_t p0, p1;

		if (!uroce_wqe_started(wqe) ||
		    uroce_psn_cmp(wqe->first_psn, qp->req.psn_max) >= 0)
			break;
		if (uroce_wqe_complete(wqe) || !uroce_wqe_rd_atomic(wqe))
			continue;
		if (wqe->opcode != IBV_WR_RDMA_READ) {
			count++;
			continue;
		}
		p0 = uroce_psn_cmp(qp->comp.psn, wqe->first_psn);
		p1 = uroce_psn_cmp(qp->req.psn_max, wqe->first_psn);
		if (p0 < 0)
			p0 = 0;
		if (p1 > (int32_t)wqe->npkts)
			p1 = (int32_t)wqe->npkts;
		if (p1 > p0)
			count += (uint32_t)((p1 - 1) / (int32_t)seg -
					    p0 / (int32_t)seg + 1);
	}
	return count;
}

/* May one more READ/atomic request go out now? Resends always may. */
static bool rd_room(struct uroce_qp *qp)
{
	if (uroce_psn_cmp(qp->req.psn, qp->req.psn_max) < 0)
		return true;
	return rd_outstanding(qp) < max_rd(qp);
}

/*
 * How long to wait for an ACK: the QP's timeout (IBA 9.7.6.1.3: a
 * minimum), or the RTT's own bound when that is longer (RFC 6298's RTO,
 * SRTT + 4 RTTVAR, at most 8x the timeout), doubled by each timeout in a
 * row up to 8x.  A path whose RTT stays below the timeout declares a dead
 * peer lost exactly when it did without the RTT's bound; one measured
 * slower waits longer, as TCP does.  On a host whose processes wait
 * tens of milliseconds for a CPU, a 67 ms timeout fired for nearly
 * every message of a 128 + 128 mesh, and the go-back's duplicates were
 * three quarters of what members received (docs/transport.md,
 * "Retransmission").
 */
static uint64_t ack_wait_ns(const struct uroce_qp *qp)
{
	uint64_t t = timeout_ns(qp), w = t;

	if (!t)
		return 0; /* timeout 0: wait for ever */
	if (qp->req.srtt_ns && rto_ns(&qp->req) > w)
		w = rto_ns(&qp->req);
	if (w > 8 * t)
		w = 8 * t;
	return w << (qp->req.backoff < 3 ? qp->req.backoff : 3);
}

void uroce_req_arm(struct uroce_qp *qp)
{
	uint64_t t = ack_wait_ns(qp);

	uroce_assert_held(&qp->dev->lock);
	if (!t || qp->comp.psn == qp->req.psn_max) {
		qp->req.deadline_ns = 0;
		return;
	}
	qp->req.deadline_ns = uroce_now_ns() + t;
	uroce_qp_timer_arm(qp, qp->req.deadline_ns);
}

static uint32_t npkts_of(const struct uroce_send_wqe *wqe)
{
	uint64_t n;

	if (uroce_wqe_rd_atomic(wqe) && wqe->opcode != IBV_WR_RDMA_READ)
		return 1; /* atomics and FLUSH */
	n = (wqe->length + wqe->seg - 1) / wqe->seg;
	return n ? (uint32_t)n : 1;
}

/*
 * The payload of each packet but the last of a message: the path MTU,
 * but on the same-host path UROCE_RING_MTU for the SENDs and WRITEs of
 * a QP whose path MTU is less (gloo sets IB MTU 1024 whatever the port
 * says, and the ring pays per packet: a quarter of the bytes per packet
 * ran at a third of the rate).  The responder takes such packets from
 * a ring only (engine/resp.c check_sequence): a uroce peer on this host.
 * Fixed for the WQE once it starts, so that a resend from any PSN finds
 * the same offsets; READs keep the path MTU, since the responder sizes
 * their responses.
 */
static uint32_t seg_of(struct uroce_qp *qp, const struct uroce_send_wqe *wqe)
{
	if (qp->type == IBV_QPT_UD || uroce_wqe_rd_atomic(wqe))
		return qp->mtu;
	return full_pkt(qp);
}

static bool is_inline(const struct uroce_send_wqe *wqe)
{
	return (wqe->send_flags & IBV_SEND_INLINE) && !uroce_wqe_rd_atomic(wqe);
}

/* a message that takes a receive WQE at the responder */
static bool takes_recv(const struct uroce_send_wqe *wqe)
{
	return wqe->opcode == IBV_WR_SEND ||
	       wqe->opcode == IBV_WR_SEND_WITH_IMM ||
	       wqe->opcode == IBV_WR_SEND_WITH_INV ||
	       wqe->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/*
 * How long a message held for credits waits, with nothing in flight,
 * for word that the responder posted receives before it goes anyway (and
 * meets an RNR NAK if there still is none, IBA 9.7.7.2's one message
 * beyond the count).  A peer that has sent such word (uroce does, engine/
 * resp.c uroce_resp_rq_posted) is given long, one that never has (a
 * NIC's may not) not much longer than a peer's wake-up.
 */
#define CREDIT_PROBE_NS	     1000000ull
#define CREDIT_PROBE_LONG_NS 100000000ull

/*
 * May wqe start now, as far as the responder's receive queue goes?  Only
 * once its ACKs have counted receive WQEs (an SRQ's and rxe's say
 * "unlimited"), and only for a message that takes one: within the count
 * it goes; beyond it, it waits for the ACKs of what is in flight, which
 * bring a new count, and with nothing in flight for the word above.
 */
static bool credit_ok(struct uroce_qp *qp, const struct uroce_send_wqe *wqe)
{
	struct uroce_req_state *q = &qp->req;
	uint64_t t;

	if (!q->e2e || !takes_recv(wqe) ||
	    (int32_t)(q->rq_msgs + 1 - q->rq_limit) <= 0) {
		q->credit_wait = false;
		return true;
	}
	if (qp->comp.psn == q->psn_max) {
		if (q->credit_probe) {
			q->credit_probe = false;
			q->credit_wait = false;
			uroce_count(qp->dev, UROCE_CNT_CREDIT_PROBES, 1);
			return true;
		}
		if (!q->credit_deadline_ns) {
			t = q->credit_updates ? CREDIT_PROBE_LONG_NS :
						CREDIT_PROBE_NS;
			q->credit_deadline_ns = uroce_now_ns() + t;
			uroce_qp_timer_arm(qp, q->credit_deadline_ns);
		}
	}
	if (!q->credit_wait)
		uroce_count(qp->dev, UROCE_CNT_CREDIT_WAITS, 1);
	q->credit_wait = true;
	return false;
}

/*
 * An ACK (or a READ response or atomic ACK with an AETH) for psn says
 * the responder has room for code's count of messages beyond those it
 * had seen.  It had seen every receive-taking message up to psn; of
 * those after it, none (one it has begun to take in is counted twice:
 * the count errs low, never high).  A lower limit than one already
 * known is an older view: kept the higher.  Returns whether the limit
 * rose.
 */
bool uroce_req_rq_credits(struct uroce_qp *qp, uint32_t psn, uint8_t code)
{
	struct uroce_req_state *q = &qp->req;
	uint32_t limit, i;

	if (code == UROCE_AETH_ACK_UNLIMITED) {
		q->e2e = false;
		return false;
	}
	if (q->rq_seen != q->rq_msgs) {
		q->rq_seen = q->rq_msgs;
		for (i = qp->sq.tail; i != qp->sq.head; i++) {
			const struct uroce_send_wqe *wqe =
				&qp->sq.wqe[i & sq_mask(qp)];

			if (!uroce_wqe_started(wqe))
				break;
			if (wqe->rq_msg &&
			    uroce_psn_cmp(wqe->first_psn, psn) > 0) {
				q->rq_seen = wqe->rq_msg - 1;
				break;
			}
		}
	}
	limit = q->rq_seen + uroce_aeth_credits(code);
	if (q->e2e && (int32_t)(limit - q->rq_limit) <= 0)
		return false;
	q->e2e = true;
	q->rq_limit = limit;
	q->credit_deadline_ns = 0;
	q->credit_probe = false;
	return true;
}

/* First look at a WQE: local key checks and its PSN range. */
static int start_wqe(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	unsigned int access = uroce_wqe_rd_atomic(wqe) ? IBV_ACCESS_LOCAL_WRITE :
							 0;

	if (!is_inline(wqe) &&
	    uroce_sge_check(qp->dev, qp->pd, wqe->sge, wqe->num_sge, access))
		return -EACCES;
	uroce_wqe_to(qp, wqe, UROCE_WQE_PENDING, IBV_WC_SUCCESS);
	wqe->rq_msg = 0;
	if (takes_recv(wqe)) {
		/* numbered from 1, 0 is "takes none": past 2^32 the count
		 * skips 0, which errs low (uroce_req_rq_credits) */
		if (!++qp->req.rq_msgs)
			++qp->req.rq_msgs;
		wqe->rq_msg = qp->req.rq_msgs;
	}
	wqe->seg = seg_of(qp, wqe);
	wqe->first_psn = qp->req.psn;
	wqe->npkts = npkts_of(wqe);
	wqe->last_psn = uroce_psn_add(wqe->first_psn, wqe->npkts - 1);
	wqe->read_done = 0;
	qp->req.cur_off = 0;
	return 0;
}

/* Packets every RC QP of the device may have in flight together: what
 * the one socket buffer holds.  Many QPs each within their own window
 * would overrun it (ib_read_bw -q 1024). */
static uint32_t dev_window(const struct uroce_dev *dev)
{
	uint32_t w = dev->net.rcvbuf / (4096 + 512);

	return w < UROCE_DEV_WINDOW_MIN ? UROCE_DEV_WINDOW_MIN : w;
}

static void block(struct uroce_qp *qp)
{
	struct uroce_dev *dev = qp->dev;

	qp->flow_turn = false;
	if (qp->blocked)
		return;
	qp->blocked = true;
	qp->blocked_next = NULL;
	if (dev->flow.blocked_tail)
		dev->flow.blocked_tail->blocked_next = qp;
	else
		dev->flow.blocked_head = qp;
	dev->flow.blocked_tail = qp;
}

static void unblock(struct uroce_qp *qp)
{
	struct uroce_dev *dev = qp->dev;
	struct uroce_qp **pp = &dev->flow.blocked_head, *prev = NULL;

	if (!qp->blocked)
		return;
	while (*pp && *pp != qp) {
		prev = *pp;
		pp = &(*pp)->blocked_next;
	}
	if (*pp)
		*pp = qp->blocked_next;
	if (dev->flow.blocked_tail == qp)
		dev->flow.blocked_tail = prev;
	qp->blocked = false;
}

/*
 * Once the window is full, the room a QP over UDP waits for before it
 * sends again: a GSO send's worth (64 KiB), or a quarter of a smaller
 * window (docs/transport.md, "Refilled by trains").  A ring is not
 * refilled by GSO sends: none there.
 */
static uint32_t win_train(const struct uroce_qp *qp, uint32_t window)
{
	uint32_t train = 65536u / qp->mtu;

	if (qp->req.ring_slots) /* (as flow_window found it just now) */
		return 0;
	return train < window / 4 ? train : window / 4;
}

/* may npkts more go out, with at most window of the QP's in flight? */
static bool window_full_at(struct uroce_qp *qp, uint32_t npkts, uint32_t window)
{
	uint32_t inflight = (qp->req.psn - qp->comp.psn) & UROCE_PSN_MASK;
	uint32_t need = npkts;
	struct uroce_dev *dev = qp->dev;

	/* a probe is one packet sent again: it takes no room */
	if (qp->req.probing)
		return false;
	/* once full, a train's room more; always let one request out when
	 * nothing is in flight */
	if (qp->req.win_wait)
		need += win_train(qp, window);
	qp->req.win_wait = inflight && inflight + need > window;
	if (qp->req.win_wait)
		return true;
	/* resending what was sent before takes no new room; while others
	 * wait for room, a QP takes none before them (uroce_req_credit
	 * starts them in turn, oldest first) */
	if (!uroce_qp_reliable(qp) || !dev->flow.inflight ||
	    uroce_psn_cmp(uroce_psn_add(qp->req.psn, npkts), qp->req.psn_max) <=
		    0 ||
	    (dev->flow.inflight + npkts <= dev_window(dev) &&
	     (!dev->flow.blocked_head || qp->flow_turn)))
		return false;
	block(qp);
	return true;
}

static bool window_full(struct uroce_qp *qp, uint32_t npkts)
{
	return window_full_at(qp, npkts, cur_window(qp));
}

/* ... and a READ request for npkts responses, within read_window too */
static bool read_window_full(struct uroce_qp *qp, uint32_t npkts)
{
	uint32_t w = cur_window(qp), r = read_window(qp);

	return window_full_at(qp, npkts, w < r ? w : r);
}

/* let waiting QPs try again, each once, oldest first, once a quarter of
 * the budget is free: started at every ACK's few packets of room, each
 * sent a train of a few packets that asked for an ACK of its own
 * (ib_write_bw -q 1024 at IB MTU 1024: 10 packets per GSO send, one ACK
 * per 10 packets; now 32 and one per 80) */
static void start_waiting(struct uroce_dev *dev, struct uroce_qp *self)
{
	uint32_t rounds;

	for (rounds = 0; dev->flow.blocked_head && rounds < 64; rounds++) {
		struct uroce_qp *w = dev->flow.blocked_head;

		if (dev->flow.inflight + dev_window(dev) / 4 > dev_window(dev))
			break;
		unblock(w);
		w->flow_turn = true;
		/* (self runs next anyway: its ACK is being handled) */
		if (w != self)
			uroce_req_run(w);
	}
}

void uroce_req_credit(struct uroce_qp *qp, uint32_t n)
{
	struct uroce_dev *dev = qp->dev;

	uroce_assert_held(&qp->dev->lock);
	dev->flow.inflight = dev->flow.inflight > n ? dev->flow.inflight - n : 0;
	start_waiting(dev, qp);
}

void uroce_req_release(struct uroce_qp *qp)
{
	struct uroce_dev *dev = qp->dev;
	uint32_t held;

	uroce_assert_held(&qp->dev->lock);
	unblock(qp);
	uroce_comp_release(qp);
	if (!uroce_qp_reliable(qp))
		return;
	held = (qp->req.psn_max - qp->comp.psn) & UROCE_PSN_MASK;
	/* a peer that left first dropped them: nothing says which */
	uroce_count(dev, UROCE_CNT_TX_UNACKED_LEFT, held);
	dev->flow.inflight = dev->flow.inflight > held ?
				     dev->flow.inflight - held :
				     0;
	qp->comp.psn = qp->req.psn_max;
	/* no ACK will give this room back: the QPs waiting for it start now */
	if (held)
		start_waiting(dev, qp);
}

static void next_wqe(struct uroce_qp *qp)
{
	qp->sq.next++;
	qp->req.cur_off = 0;
}

static int send_read(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	uint8_t hdr[UROCE_BTH_LEN + UROCE_RETH_LEN];
	uint32_t seg_pkts = read_seg(qp);
	uint64_t remaining = wqe->length - qp->req.cur_off;
	uint32_t done = qp->req.cur_off / qp->mtu;
	uint64_t seg;
	uint32_t npkts;

	/*
	 * Large READs go out as several requests of at most half a window,
	 * so the responses of one never overrun our socket buffer.  The
	 * segments sit at fixed packet offsets: a request resent from the
	 * middle of one ends where the original ended, so the responder
	 * never sees a retried request skip over PSNs it still expects.
	 */
	seg = (uint64_t)(seg_pkts - done % seg_pkts) * qp->mtu;
	if (seg > remaining)
		seg = remaining;
	npkts = seg ? (uint32_t)((seg + qp->mtu - 1) / qp->mtu) : 1;
	if (read_window_full(qp, npkts) || !rd_room(qp))
		return 0;
	if (uroce_psn_cmp(qp->req.psn, qp->req.psn_max) < 0)
		uroce_count(qp->dev, UROCE_CNT_TX_RESENT_BYTES, seg);
	bth_init(hdr, UROCE_OP_RC_READ_REQUEST, false, 0, UROCE_DEFAULT_PKEY,
		 qp->attr.dest_qp_num, false, qp->req.psn);
	reth_init(hdr + UROCE_BTH_LEN, wqe->remote_addr + qp->req.cur_off,
		  wqe->rkey, (uint32_t)seg);
	uroce_xmit(qp, hdr, sizeof(hdr), NULL, 0, 0);
	qp->req.psn = uroce_psn_add(qp->req.psn, npkts);
	qp->req.cur_off += (uint32_t)seg;
	if (qp->req.cur_off >= wqe->length)
		next_wqe(qp);
	return 1;
}

/* FLUSH: FETH + RETH, one PSN, answered like a READ (IBA 1.5 9.4.8) */
static int send_flush(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	const struct uroce_opcode_info *info = &uroce_opcode[UROCE_OP_RC_FLUSH];
	uint8_t hdr[UROCE_MAX_HDR_LEN];

	if (window_full(qp, 1) || !rd_room(qp))
		return 0;
	bth_init(hdr, UROCE_OP_RC_FLUSH, false, 0, UROCE_DEFAULT_PKEY,
		 qp->attr.dest_qp_num, true, qp->req.psn);
	/* swap holds the selectivity level, compare_add the length */
	feth_init(hdr + info->offset[UROCE_HDR_FETH], (uint8_t)(wqe->swap >> 8),
		  (uint8_t)wqe->swap);
	reth_init(hdr + info->offset[UROCE_HDR_RETH], wqe->remote_addr,
		  wqe->rkey, (uint32_t)wqe->compare_add);
	uroce_xmit(qp, hdr, info->length, NULL, 0, 0);
	qp->req.psn = uroce_psn_add(qp->req.psn, 1);
	next_wqe(qp);
	return 1;
}

static int send_atomic(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	uint8_t hdr[UROCE_BTH_LEN + UROCE_ATMETH_LEN];
	uint8_t op = wqe->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
			     UROCE_OP_RC_CMP_SWAP :
			     UROCE_OP_RC_FETCH_ADD;
	uint64_t swap_add = wqe->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ?
				    wqe->swap :
				    wqe->compare_add;

	if (window_full(qp, 1) || !rd_room(qp))
		return 0;
	bth_init(hdr, op, false, 0, UROCE_DEFAULT_PKEY, qp->attr.dest_qp_num,
		 true, qp->req.psn);
	atmeth_init(hdr + UROCE_BTH_LEN, wqe->remote_addr, wqe->rkey, swap_add,
		    wqe->compare_add);
	uroce_xmit(qp, hdr, sizeof(hdr), NULL, 0, 0);
	qp->req.psn = uroce_psn_add(qp->req.psn, 1);
	next_wqe(qp);
	return 1;
}

/*
 * UC and UD have no ACKs, so nothing tells the sender that the peer's
 * socket buffer is full; a lossless RoCE fabric would pause the link
 * (PFC).  A token bucket per device stands in for that pause.
 */
#define PACE_BURST (1 << 20)

/* UC/UD pacing rate: UROCE_UNRELIABLE_MBPS (Mbit/s), 0 turns it off. */
void uroce_pace_init(struct uroce_dev *dev)
{
	dev->flow.pace_rate = uroce_config()->unreliable_mbps * 1000000 / 8;
}

static bool pace_ok(struct uroce_qp *qp, uint32_t bytes)
{
	struct uroce_dev *dev = qp->dev;
	uint64_t now;

	if (!dev->flow.pace_rate)
		return true;
	now = uroce_now_ns();
	if (!dev->flow.pace_last_ns) {
		dev->flow.pace_last_ns = now;
		dev->flow.pace_tokens = PACE_BURST;
	}
	dev->flow.pace_tokens += (int64_t)((now - dev->flow.pace_last_ns) *
					   dev->flow.pace_rate / 1000000000ull);
	dev->flow.pace_last_ns = now;
	if (dev->flow.pace_tokens > PACE_BURST)
		dev->flow.pace_tokens = PACE_BURST;
	if (dev->flow.pace_tokens >= (int64_t)bytes) {
		dev->flow.pace_tokens -= bytes;
		return true;
	}
	qp->req.pace_deadline_ns = now + 1 +
				   ((uint64_t)((int64_t)bytes -
					       dev->flow.pace_tokens) *
				    1000000000ull) /
					   dev->flow.pace_rate;
	uroce_qp_timer_arm(qp, qp->req.pace_deadline_ns);
	return false;
}

/*
 * The local link's queue holds all of ours that the socket's send buffer
 * lets it (engine/xmit.c): new packets wait in the SQ, as a NIC's do
 * when its port is busy, rather than in our send queue or as loss
 * (docs/transport.md, "A full send buffer").  The wait is the pacer's.
 */
static bool tx_room(struct uroce_qp *qp)
{
	uint64_t wait = uroce_tx_room(qp->dev);

	qp->req.tx_wait = wait != 0;
	if (!wait)
		return true;
	qp->req.pace_deadline_ns = uroce_now_ns() + wait;
	uroce_qp_timer_arm(qp, qp->req.pace_deadline_ns);
	return false;
}

/* IBA 9.2: pick the opcode of a SEND/WRITE packet by its place. */
static uint8_t pick_opcode(const struct uroce_send_wqe *wqe, bool first,
			   bool last)
{
	if (wqe->opcode == IBV_WR_ATOMIC_WRITE)
		return UROCE_OP_RC_ATOMIC_WRITE;
	if (wqe->opcode == IBV_WR_SEND_WITH_INV) {
		if (last)
			return first ? UROCE_OP_RC_SEND_ONLY_INV :
				       UROCE_OP_RC_SEND_LAST_INV;
		return first ? UROCE_OP_RC_SEND_FIRST : UROCE_OP_RC_SEND_MIDDLE;
	}
	bool write = wqe->opcode == IBV_WR_RDMA_WRITE ||
		     wqe->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool imm = wqe->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
		   wqe->opcode == IBV_WR_SEND_WITH_IMM;

	if (write) {
		if (first && last)
			return imm ? UROCE_OP_RC_WRITE_ONLY_IMM :
				     UROCE_OP_RC_WRITE_ONLY;
		if (first)
			return UROCE_OP_RC_WRITE_FIRST;
		if (last)
			return imm ? UROCE_OP_RC_WRITE_LAST_IMM :
				     UROCE_OP_RC_WRITE_LAST;
		return UROCE_OP_RC_WRITE_MIDDLE;
	}
	if (first && last)
		return imm ? UROCE_OP_RC_SEND_ONLY_IMM : UROCE_OP_RC_SEND_ONLY;
	if (first)
		return UROCE_OP_RC_SEND_FIRST;
	if (last)
		return imm ? UROCE_OP_RC_SEND_LAST_IMM : UROCE_OP_RC_SEND_LAST;
	return UROCE_OP_RC_SEND_MIDDLE;
}

/*
 * The last packet of a UC/UD WQE went to the packet IO (xmit's result
 * err): with the kernel (or lost: loss is no error on these transports),
 * the WQE is done; waiting in the open send batch, its completion waits
 * too (QUEUED), so that a send that then fails can still fail it.
 */
static void unacked_sent(struct uroce_qp *qp, struct uroce_send_wqe *wqe,
			 int err)
{
	if (err > 0)
		uroce_wqe_queue(qp, wqe);
	else
		uroce_wqe_to(qp, wqe, UROCE_WQE_DONE, IBV_WC_SUCCESS);
}

/*
 * Does the last packet of wqe ask for an ACK (docs/transport.md, "Asking
 * for ACKs")?  Where somebody waits for one: the application for the
 * completion it asked for, the requester for the responder's word on its
 * receive credits once few are left, every QP for room in the device's
 * budget once half of it is taken, a QP moving to SQD for its drained
 * event.  An unsignalled message's ACK comes with the next one asked for.
 */
static bool ack_wanted(struct uroce_qp *qp, const struct uroce_send_wqe *wqe)
{
	const struct uroce_req_state *q = &qp->req;

	if (qp->sq_sig_all || (wqe->send_flags & IBV_SEND_SIGNALED) ||
	    qp->attr.qp_state == IBV_QPS_SQD)
		return true;
	if (q->e2e && takes_recv(wqe) &&
	    (int32_t)(q->rq_limit - q->rq_msgs) < UROCE_ACK_CREDITS_LOW)
		return true;
	return qp->dev->flow.inflight * 2 >= dev_window(qp->dev);
}

static int send_data(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	uint8_t hdr[UROCE_MAX_HDR_LEN];
	struct iovec iov[UROCE_MAX_SGE];
	const struct uroce_opcode_info *info;
	uint64_t remaining = wqe->length - qp->req.cur_off;
	uint32_t paylen = remaining < wqe->seg ? (uint32_t)remaining : wqe->seg;
	uint32_t idx = (qp->req.psn - wqe->first_psn) & UROCE_PSN_MASK;
	bool first = qp->req.cur_off == 0;
	bool last = remaining <= wqe->seg;
	bool ackreq, wanted, se;
	uint8_t op;
	int niov, err;

	if (window_full(qp, 1))
		return 0;
	if (!tx_room(qp))
		return 0;
	if (qp->type == IBV_QPT_UC && !pace_ok(qp, paylen + UROCE_MAX_HDR_LEN))
		return 0;
	/* congestion control's rate (engine/cc.c); a probe is not new */
	if ((qp->dev->cc.on || qp->dev->cc.delay) && uroce_qp_reliable(qp) &&
	    !qp->req.probing &&
	    !uroce_cc_pace_ok(qp, paylen + UROCE_MAX_HDR_LEN))
		return 0;
	op = pick_opcode(wqe, first, last);
	if (qp->type == IBV_QPT_UC)
		op |= 0x20; /* UC opcodes mirror RC's SEND/WRITE ones */
	info = &uroce_opcode[op];
	/* ask for an ACK at the end of a message somebody waits for, every
	 * few packets, and on the packet that fills the window: otherwise a
	 * small window could wait for an ACK nobody was asked for */
	wanted = uroce_qp_reliable(qp) && ack_wanted(qp, wqe);
	ackreq = uroce_qp_reliable(qp) &&
		 ((last && wanted) || qp->req.probing ||
		  (idx % UROCE_ACK_EVERY) == UROCE_ACK_EVERY - 1 ||
		  window_full(qp, 2));
	/* (a packet after the last one of its message that asks, in a
	 * message that asks for no ACK at its end, gets its ACK only with
	 * a later message: not one to time) */
	qp->req.untimed = uroce_qp_reliable(qp) && !ackreq && !wanted &&
			  idx - idx % UROCE_ACK_EVERY + UROCE_ACK_EVERY - 1 >=
				  wqe->npkts;
	if (uroce_qp_reliable(qp) &&
	    uroce_psn_cmp(qp->req.psn, qp->req.psn_max) < 0)
		uroce_count(qp->dev, UROCE_CNT_TX_RESENT_BYTES, paylen);
	se = last && (wqe->send_flags & IBV_SEND_SOLICITED) &&
	     (info->mask & UROCE_M_SEND);
	bth_init(hdr, op, se, 0, UROCE_DEFAULT_PKEY, qp->attr.dest_qp_num,
		 ackreq, qp->req.psn);
	/* the delay control's RTT: from a packet that asks for an ACK, on
	 * its first trip, to that ACK (engine/cc.c uroce_cc_delay); not
	 * from the first packet after the last sample, as the loss
	 * recovery's is: that would count a paced QP's own wait until
	 * the AckReq packet */
	if (qp->dev->cc.delay && ackreq && !qp->cc.ts_ns &&
	    uroce_qp_reliable(qp) && !qp->req.probing &&
	    uroce_psn_cmp(qp->req.psn, qp->req.psn_max) >= 0) {
		qp->cc.ts_psn = qp->req.psn;
		qp->cc.ts_ns = uroce_now_ns();
		/* what is delivered is counted from the first timed send,
		 * so that the first sample has its rate */
		if (!qp->cc.dlv_ns)
			qp->cc.dlv_ns = qp->cc.ts_ns;
	}
	if (info->mask & UROCE_M_RETH)
		reth_init(hdr + info->offset[UROCE_HDR_RETH], wqe->remote_addr,
			  wqe->rkey, (uint32_t)wqe->length);
	if (info->mask & UROCE_M_IMMDT)
		immdt_set_raw(hdr + info->offset[UROCE_HDR_IMMDT], wqe->imm);
	if (info->mask & UROCE_M_IETH)
		ieth_init(hdr + info->offset[UROCE_HDR_IETH], wqe->imm);
	niov = uroce_sge_iov(wqe->sge, wqe->num_sge, qp->req.cur_off, paylen,
			     iov, UROCE_MAX_SGE);
	err = uroce_xmit(qp, hdr, info->length, iov, niov, paylen);
	/* RC: loss, its retries decide; UC: the WQE fails */
	if (qp->type == IBV_QPT_UC && uroce_tx_fatal(err))
		return err;
	qp->req.psn = uroce_psn_add(qp->req.psn, 1);
	qp->req.cur_off += paylen;
	if (qp->type == IBV_QPT_UC) {
		/* UC is unacknowledged: done once the last packet is out */
		qp->comp.psn = qp->req.psn;
		if (last)
			unacked_sent(qp, wqe, err);
	}
	if (last)
		next_wqe(qp);
	return 1;
}

/* UD: one packet per message, done once it is on the wire (IBA 9.8.4) */
static int send_ud(struct uroce_qp *qp, struct uroce_send_wqe *wqe)
{
	uint8_t hdr[UROCE_MAX_HDR_LEN];
	struct iovec iov[UROCE_MAX_SGE];
	bool imm = wqe->opcode == IBV_WR_SEND_WITH_IMM;
	uint8_t op = imm ? UROCE_OP_UD_SEND_ONLY_IMM : UROCE_OP_UD_SEND_ONLY;
	const struct uroce_opcode_info *info = &uroce_opcode[op];
	int niov, err;

	if (!pace_ok(qp, (uint32_t)wqe->length + info->length))
		return 0;
	bth_init(hdr, op, wqe->send_flags & IBV_SEND_SOLICITED, 0,
		 UROCE_DEFAULT_PKEY, wqe->ud_qpn, false, qp->req.psn);
	deth_init(hdr + info->offset[UROCE_HDR_DETH], wqe->ud_qkey,
		  uqp_ibqp(qp)->qp_num);
	if (imm)
		immdt_set_raw(hdr + info->offset[UROCE_HDR_IMMDT], wqe->imm);
	niov = uroce_sge_iov(wqe->sge, wqe->num_sge, 0, (uint32_t)wqe->length,
			     iov, UROCE_MAX_SGE);
	err = uroce_xmit_to(qp, &wqe->ud_dst, wqe->ud_ip, hdr, info->length,
			    iov, niov, (uint32_t)wqe->length);
	if (uroce_tx_fatal(err))
		return err;
	qp->req.psn = uroce_psn_add(qp->req.psn, 1);
	qp->comp.psn = qp->req.psn;
	unacked_sent(qp, wqe, err);
	next_wqe(qp);
	return 1;
}

/* A WQE done (or failed) before reaching the wire: the completer reports
 * it in order, and on failure moves the QP to the error state. */
static void local_done(struct uroce_qp *qp, struct uroce_send_wqe *wqe,
		       enum ibv_wc_status status)
{
	wqe->first_psn = wqe->last_psn = qp->req.psn;
	uroce_wqe_to(qp, wqe,
		     status == IBV_WC_SUCCESS ? UROCE_WQE_DONE : UROCE_WQE_ERROR,
		     status);
	next_wqe(qp);
}

void uroce_req_run(struct uroce_qp *qp)
{
	struct uroce_sq *sq = &qp->sq;
	bool was_idle = qp->comp.psn == qp->req.psn_max;
	unsigned int nsent = 0;

	uroce_assert_held(&qp->dev->lock);
	if ((qp->attr.qp_state != IBV_QPS_RTS &&
	     qp->attr.qp_state != IBV_QPS_SQD) ||
	    qp->req.rnr_deadline_ns || qp->req.pace_deadline_ns)
		return;
	uroce_xmit_begin(qp->dev);
	while (sq->next != sq->head) {
		struct uroce_send_wqe *wqe = &sq->wqe[sq->next & sq_mask(qp)];
		int sent;

		/* SQD: finish the message on the wire, start nothing new */
		if (qp->attr.qp_state == IBV_QPS_SQD &&
		    (!uroce_wqe_started(wqe) || qp->req.cur_off == 0))
			break;
		if (!uroce_wqe_started(wqe) &&
		    (wqe->opcode == IBV_WR_BIND_MW ||
		     wqe->opcode == IBV_WR_LOCAL_INV)) {
			/* local operations: done in order, no packet */
			local_done(qp, wqe,
				   wqe->opcode == IBV_WR_BIND_MW ?
					   uroce_mw_bind(qp, wqe->bind_mw,
							 wqe->rkey,
							 &wqe->bind_info) :
					   uroce_invalidate(qp, wqe->imm));
			continue;
		}
		if (!uroce_wqe_started(wqe)) {
			/* IBA 10.8.3.3: a fenced WQE waits for prior READs/atomics */
			if ((wqe->send_flags & IBV_SEND_FENCE) &&
			    rd_outstanding(qp))
				break;
			/* IBA 9.7.7.2: room in the responder's receive queue */
			if (uroce_qp_reliable(qp) && !credit_ok(qp, wqe))
				break;
			if (start_wqe(qp, wqe)) {
				local_done(qp, wqe, IBV_WC_LOC_PROT_ERR);
				break;
			}
		} else if (qp->req.cur_off == 0) {
			/* resending after a rewind: same PSNs as before */
			qp->req.psn = wqe->first_psn;
		}
		qp->req.untimed = false;
		if (qp->type == IBV_QPT_UD) {
			if (wqe->length > qp->mtu) {
				local_done(qp, wqe, IBV_WC_LOC_LEN_ERR);
				break;
			}
			sent = send_ud(qp, wqe);
		} else if (wqe->opcode == IBV_WR_RDMA_READ)
			sent = send_read(qp, wqe);
		else if (wqe->opcode == (enum ibv_wr_opcode)UROCE_WR_FLUSH)
			sent = send_flush(qp, wqe);
		else if (uroce_wqe_rd_atomic(wqe))
			sent = send_atomic(qp, wqe);
		else
			sent = send_data(qp, wqe);
		if (sent < 0) {
			/* a local send failure, not loss: the QP fails */
			uroce_comp_send_failed(qp, wqe);
			uroce_xmit_end(qp->dev);
			return;
		}
		if (!sent)
			break;
		nsent++;
		if (uroce_psn_cmp(qp->req.psn, qp->req.psn_max) > 0) {
			if (uroce_qp_reliable(qp))
				qp->dev->flow.inflight += (qp->req.psn -
							   qp->req.psn_max) &
							  UROCE_PSN_MASK;
			/* a PSN on its first trip: time it, if none is,
			 * unless its ACK may wait for the next message that
			 * asks for one (send_data): the RTT, and the probe
			 * timeout, would take that wait in */
			if (!qp->req.rtt_sent_ns && !qp->req.untimed) {
				qp->req.rtt_psn = uroce_psn_add(qp->req.psn,
								UROCE_PSN_MASK);
				qp->req.rtt_sent_ns = uroce_now_ns();
			}
			qp->req.psn_max = qp->req.psn;
		}
		if (qp->req.probing)
			break;
	}
	if (was_idle || !qp->req.deadline_ns)
		uroce_req_arm(qp);
	/* a few RTTs after the last packet sent without an ACK: probe */
	if (nsent)
		probe_arm(qp);
	/* WQEs that failed locally may be completable now */
	if (sq->tail != sq->next) {
		struct uroce_send_wqe *t = &sq->wqe[sq->tail & sq_mask(qp)];

		if (uroce_wqe_complete(t))
			uroce_comp_retire(qp);
	}
	qp->flow_turn = false;
	uroce_xmit_end(qp->dev);
}

/*
 * Go back to PSN target (comp.psn, or for a probe the last PSN sent): the
 * WQE that holds it becomes the next to send, from the packet at target;
 * a READ from there to the end of its segment, an atomic whole.  Every PSN
 * from target on is a resend: none of them may be timed (Karn).
 */
static bool rewind_to(struct uroce_qp *qp, uint32_t target)
{
	struct uroce_sq *sq = &qp->sq;
	uint32_t i;

	qp->req.rtt_sent_ns = 0;
	/* the delay control's timed PSN only if it goes again (a probe
	 * resends the last packet: one sent before it stays timed) */
	if (qp->cc.ts_ns && uroce_psn_cmp(qp->cc.ts_psn, target) >= 0)
		qp->cc.ts_ns = 0;
	for (i = sq->tail; i != sq->head; i++) {
		struct uroce_send_wqe *wqe = &sq->wqe[i & sq_mask(qp)];
		int32_t done;

		if (!uroce_wqe_started(wqe))
			break;
		if (uroce_wqe_complete(wqe) ||
		    (target != qp->comp.psn &&
		     uroce_psn_cmp(wqe->last_psn, target) < 0))
			continue;
		sq->next = i;
		done = uroce_psn_cmp(target, wqe->first_psn);
		/* an atomic is one packet: it goes again whole */
		if (done < 0 || (uroce_wqe_rd_atomic(wqe) &&
				 wqe->opcode != IBV_WR_RDMA_READ))
			done = 0;
		qp->req.cur_off = (uint32_t)done * wqe->seg;
		qp->req.psn = uroce_psn_add(wqe->first_psn, (uint32_t)done);
		return true;
	}
	if (target != qp->comp.psn)
		return false;
	sq->next = i;
	qp->req.cur_off = 0;
	qp->req.psn = qp->comp.psn;
	return true;
}

void uroce_req_rewind(struct uroce_qp *qp)
{
	uroce_assert_held(&qp->dev->lock);
	rewind_to(qp, qp->comp.psn);
}

/*
 * Tail-loss probe (RACK-TLP's TLP, RFC 8985 7): nothing was acknowledged
 * for a few RTTs, so the last packet sent goes again, asking for an ACK.
 * Whatever was lost, the answer restarts recovery within an RTT: an ACK
 * (only ACKs were lost, or only that packet), a sequence NAK (the tail
 * before it was lost), a repeated NAK (the NAK or the resent packet was
 * lost), a READ response or an atomic's saved result.  It is not a retry:
 * it neither consumes retry_cnt nor moves the ACK timeout, which still
 * bounds how long a dead peer takes to be declared lost.
 */
static void send_probe(struct uroce_qp *qp)
{
	uint32_t last = uroce_psn_add(qp->req.psn, UROCE_PSN_MASK);

	if (qp->req.psn == qp->comp.psn || !rewind_to(qp, last)) {
		probe_arm(qp);
		return;
	}
	uroce_count(qp->dev, UROCE_CNT_TLP_PROBES, 1);
	uroce_log_qp(UROCE_LOG_INFO, qp, last, "tail-loss probe");
	qp->req.probing = true;
	uroce_req_run(qp);
	qp->req.probing = false;
	qp->req.probes++;
	probe_arm(qp);
}

void uroce_req_timeout(struct uroce_qp *qp, uint64_t now)
{
	struct uroce_dev *dev = qp->dev;

	uroce_assert_held(&qp->dev->lock);
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return;
	if (qp->req.pace_deadline_ns && now >= qp->req.pace_deadline_ns) {
		qp->req.pace_deadline_ns = 0;
		uroce_req_run(qp);
		return;
	}
	if (qp->req.credit_deadline_ns && now >= qp->req.credit_deadline_ns) {
		qp->req.credit_deadline_ns = 0;
		qp->req.credit_probe = true;
		uroce_req_run(qp);
	}
	if (qp->req.rnr_deadline_ns && now >= qp->req.rnr_deadline_ns) {
		qp->req.rnr_deadline_ns = 0;
		uroce_req_rewind(qp);
		uroce_req_run(qp);
		return;
	}
	if (!qp->req.deadline_ns || now < qp->req.deadline_ns) {
		if (qp->req.probe_deadline_ns &&
		    now >= qp->req.probe_deadline_ns) {
			qp->req.probe_deadline_ns = 0;
			if (uroce_tx_full(dev))
				probe_arm(qp); /* (below) */
			else
				send_probe(qp);
		}
		return;
	}
	qp->req.deadline_ns = 0;
	if (qp->comp.psn == qp->req.psn_max)
		return;
	/* a full send buffer holds our own packets back: what has not
	 * left is not lost, and resending it would only queue behind it
	 * (docs/transport.md, "A full send buffer"); the clock starts
	 * again */
	if (uroce_tx_full(dev)) {
		uroce_req_arm(qp);
		return;
	}
	uroce_count(dev, UROCE_CNT_TIMEOUTS, 1);
	uroce_log_qp(UROCE_LOG_INFO, qp, qp->comp.psn,
		     "ACK timeout, %u retries left", qp->req.retry_left);
	if (!qp->req.retry_left) {
		struct uroce_send_wqe *wqe =
			&qp->sq.wqe[qp->sq.tail & sq_mask(qp)];

		/* IBA 9.7.6.1.3: transport retries exhausted */
		uroce_wqe_to(qp, wqe, UROCE_WQE_ERROR, IBV_WC_RETRY_EXC_ERR);
		uroce_comp_retire(qp);
		return;
	}
	qp->req.retry_left--;
	uroce_count(dev, UROCE_CNT_TIMEOUT_RETRIES, 1);
	qp->req.backoff++;
	qp->req.cwnd = UROCE_TX_WINDOW_MIN;
	uroce_count(dev, UROCE_CNT_RETRANSMITS, 1);
	qp->cnt_retrans++;
	uroce_req_rewind(qp);
	uroce_req_run(qp);
	uroce_req_arm(qp);
}
