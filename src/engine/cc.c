// SPDX-License-Identifier: MIT
/*
 * Congestion control on ECN, in the DCQCN manner (Zhu et al., SIGCOMM
 * 2015; RoCE v2's CNP: IBA annex A17.9): the notification point answers a
 * packet that arrived marked CE with a CNP to the QP that sent it, at most
 * one per QP every UROCE_CNP_US; the reaction point cuts the QP's sending
 * rate on each CNP and recovers it over time when none come.  Off unless
 * UROCE_CC=dcqcn (docs/congestion.md, "ECN and CNPs").  With
 * UROCE_CC=delay the same pacer follows a rate set from the RTT instead
 * (uroce_cc_delay; docs/congestion.md, "Delay").
 *
 * All of it runs under dev->lock: the receive demux calls uroce_cc_ce and
 * uroce_cc_cnp, the requester uroce_cc_pace_ok before each data packet.
 * The rate updates that DCQCN drives by timers (alpha's decay, the rate
 * increase) are applied lazily, for the periods that passed, whenever the
 * QP next asks or is cut, so there is no timer of its own.
 */
#include <string.h>

#include "dev.h"

/* DCQCN's parameters (the paper's names), for software time scales */
#define CC_G_SHIFT     4	  /* g = 1/16: alpha's gain */
#define CC_ALPHA_ONE   1024u	  /* alpha is in 1/1024 */
#define CC_ALPHA_NS    500000ull  /* alpha decays once per 500 us w/o CNP */
#define CC_INC_NS      1000000ull /* one rate increase per 1 ms w/o CNP */
#define CC_FAST_STAGES 5	  /* F: fast recovery steps */
#define CC_RAI	       (40ull * 1000000 / 8)  /* additive increase, B/s */
#define CC_RHAI	       (400ull * 1000000 / 8) /* hyper increase, B/s */
#define CC_MIN_RATE    (10ull * 1000000 / 8)  /* 10 Mbit/s floor */
#define CC_RATE_WIN_NS 100000ull    /* the send rate is measured over */
#define CC_BURST_NS    50000ull	    /* a paced QP may burst this long */
#define CC_BURST_MIN   (32u * 1024) /* ... but at least a short GSO train */
#define CC_WAKE_BYTES  (16u * 1024) /* a paced QP wakes to send this */

void uroce_cc_init(struct uroce_dev *dev)
{
	const struct uroce_config *c = uroce_config();

	dev->cc.on = c->cc;
	dev->cc.cnp_gap_ns = c->cnp_us * 1000ull;
	dev->cc.delay = c->cc_delay;
	dev->cc.target_ns = c->cc_target_us * 1000ull;
}

/*
 * Notification point.  A CE mark says the queue this packet went through
 * is filling: tell the sender, which is the QP's peer (RC, UC, XRC) or the
 * packet's source QP (UD).  The CNP's format (A17.9.2; what ConnectX
 * sends): BTH with opcode 0x81, the default P_Key, BECN set, the sender's
 * QPN, PSN 0, then 16 reserved bytes.  rdma_rxe has no such opcode and
 * drops it; NICs with DCQCN slow down.
 */
void uroce_cc_ce(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	const struct uroce_opcode_info *info = &uroce_opcode[UROCE_OP_CNP];
	struct uroce_dev *dev = qp->dev;
	uint8_t hdr[UROCE_BTH_LEN + UROCE_CNP_RSVD_LEN];
	uint64_t now = uroce_now_ns();
	uint32_t dqpn = qp->attr.dest_qp_num;
	const struct sockaddr_storage *dst = &qp->peer;

	uroce_count(dev, UROCE_CNT_RX_ECN_CE, 1);
	qp->cc.ce_seen++;
	if (qp->cc.cnp_sent_ns && now - qp->cc.cnp_sent_ns < dev->cc.cnp_gap_ns) {
		uroce_count(dev, UROCE_CNT_CNP_LIMITED, 1);
		return;
	}
	if (qp->type == IBV_QPT_UD) {
		if (!(pkt->mask & UROCE_M_DETH))
			return;
		dqpn = deth_sqp(pkt->bth + pkt->info->offset[UROCE_HDR_DETH]);
		dst = &pkt->src;
	}
	qp->cc.cnp_sent_ns = now;
	qp->cc.cnp_sent++;
	memset(hdr, 0, sizeof(hdr));
	bth_init(hdr, UROCE_OP_CNP, false, 0, UROCE_DEFAULT_PKEY, dqpn, false,
		 0);
	hdr[1] = 0;    /* no MigReq: A17.9.2 reserves it */
	hdr[4] = 0x40; /* BECN */
	uroce_xmit_to(qp, dst, qp->ip, hdr, info->length, NULL, 0, 0);
}

/* alpha *= (1 - g) per period passed since t, t moved on */
static void alpha_decay(struct uroce_cc_state *cc, uint64_t now)
{
	while (now - cc->alpha_ns >= CC_ALPHA_NS && cc->alpha) {
		cc->alpha -= cc->alpha >> CC_G_SHIFT ? cc->alpha >> CC_G_SHIFT :
						       1;
		cc->alpha_ns += CC_ALPHA_NS;
	}
	if (!cc->alpha)
		cc->alpha_ns = now;
}

/*
 * DCQCN's rate increase, once per CC_INC_NS without a CNP: F fast
 * recovery steps halve the distance to the target rate (the rate before
 * the last cut), then the target grows additively, then hyper-additively.
 * A QP back above the fastest rate it was measured at is no longer paced
 * at all, but not before the additive steps are over (10 ms without a
 * CNP): unpaced, its whole window goes at once, and a QP unpaced after
 * its fast recovery came back to the queue it had just drained.
 */
static void rate_increase(struct uroce_qp *qp, uint64_t now)
{
	struct uroce_cc_state *cc = &qp->cc;

	while (cc->rate && now - cc->inc_ns >= CC_INC_NS) {
		cc->inc_ns += CC_INC_NS;
		cc->stage++;
		if (cc->stage > 2 * CC_FAST_STAGES)
			cc->target += (cc->stage - 2 * CC_FAST_STAGES) * CC_RHAI;
		else if (cc->stage > CC_FAST_STAGES)
			cc->target += CC_RAI;
		cc->rate = (cc->rate + cc->target) / 2;
		if (cc->stage > 2 * CC_FAST_STAGES && cc->rate >= cc->free_rate) {
			cc->rate = 0; /* recovered: unpaced again */
			uroce_count(qp->dev, UROCE_CNT_CC_RECOVERED, 1);
		}
	}
}

/* The rate the QP sent at recently (bytes over CC_RATE_WIN_NS windows). */
static void rate_measure(struct uroce_cc_state *cc, uint64_t now, uint32_t bytes)
{
	uint64_t dt = now - cc->win_ns;

	if (!cc->win_ns) {
		cc->win_ns = now;
		cc->win_bytes = bytes;
		return;
	}
	cc->win_bytes += bytes;
	if (dt < CC_RATE_WIN_NS)
		return;
	cc->sent_rate = dt ? cc->win_bytes * 1000000000ull / dt : 0;
	cc->win_ns = now;
	cc->win_bytes = 0;
}

/*
 * An unpaced QP about to be cut starts pacing from the fastest rate it
 * was seen to send at, the last full window or the one under way (DCQCN
 * starts from the line rate, which a socket does not know), but from no
 * more than cap (0: none), what the caller knows it gets through.
 */
static void pace_start(struct uroce_cc_state *cc, uint64_t now, uint64_t cap)
{
	uint64_t dt = now - cc->win_ns, est = cc->sent_rate;

	if (cc->win_ns && dt >= CC_RATE_WIN_NS / 10 &&
	    cc->win_bytes * 1000000000ull / dt > est)
		est = cc->win_bytes * 1000000000ull / dt;
	if (est > cc->free_rate)
		cc->free_rate = est;
	if (cc->free_rate < CC_MIN_RATE)
		cc->free_rate = CC_MIN_RATE;
	cc->rate = cc->free_rate;
	if (cap && cap < cc->rate)
		cc->rate = cap < CC_MIN_RATE ? CC_MIN_RATE : cap;
	cc->tokens = 0;
	cc->tok_ns = now;
}

/*
 * Reaction point: a CNP for qp.  A cut of an unpaced QP starts from what
 * its window lets through in a round trip, or from the fastest rate it
 * was measured at if that is less.  DCQCN starts from the line rate,
 * which a socket does not know: the fastest rate stands for that, the
 * rate at which the QP is unpaced again.  But a window of 100 us holds a
 * GSO train or two, so that rate read tens of Gbit/s where the QP got a
 * fraction of one through the bottleneck, and no cut brought it down to
 * what it got (the incast benchmark, docs/congestion.md).  DCQCN: target
 * = rate, rate *= 1 - alpha / 2, alpha = (1 - g) alpha + g.  The window
 * shrinks too, once a round trip (uroce_req_ecn).
 */
void uroce_cc_cnp(struct uroce_qp *qp)
{
	struct uroce_cc_state *cc = &qp->cc;
	uint64_t now = uroce_now_ns();

	qp->cc.cnp_rx++;
	if (!qp->dev->cc.on || !uroce_qp_reliable(qp))
		return;
	alpha_decay(cc, now);
	if (cc->rate)
		rate_increase(qp, now);
	if (!cc->rate) {
		pace_start(cc, now, uroce_req_window_rate(qp));
		if (!cc->cuts)
			cc->alpha = CC_ALPHA_ONE;
	}
	cc->target = cc->rate;
	cc->rate -= cc->rate * cc->alpha / (2 * CC_ALPHA_ONE);
	if (cc->rate < CC_MIN_RATE)
		cc->rate = CC_MIN_RATE;
	uroce_req_ecn(qp, cc->alpha);
	cc->alpha += (CC_ALPHA_ONE - cc->alpha) >> CC_G_SHIFT;
	cc->alpha_ns = now;
	cc->inc_ns = now;
	cc->stage = 0;
	cc->cuts++;
	uroce_count(qp->dev, UROCE_CNT_CC_RATE_CUTS, 1);
}

/*
 * Delay-based control (docs/congestion.md, "Delay"; Swift, SIGCOMM 2020,
 * with a rate instead of a window, as TIMELY): one RTT sample per round
 * trip, from the send of a packet that asks for an ACK to that ACK; the
 * RTT it acts on is the least of the last CC_DELAY_FILTER of them.  The
 * target is the base RTT (the least sample) plus dev->cc.target_ns.
 * Below it (and the last sample too) the rate grows by CC_DELAY_AI per
 * sample (by one more of it every 32 samples in a row below, so that a
 * long RTT does not make the way back too long).  Above it the rate is
 * cut in proportion to the excess, CC_DELAY_BETA of it, at most by half,
 * at most once per RTT of the packets sent after the last cut, and not
 * while the RTT is falling (the last cut works, the queue drains).  An
 * unpaced QP starts from what it delivered.  At a quarter of the rate
 * it had when the RTT rose above target (CC_DELAY_MAX_BACKOFF) it holds
 * for CC_DELAY_HOLD_RTTS, so that other flows through the queue can
 * drain it too; if the RTT is still above target then, the queue is not
 * ours (a TCP flow's): the QP is left to its loss-based window until the
 * RTT is back below target (the cap on its back-off).  A sample above
 * target also stops an unpaced QP's congestion window from growing
 * (cc->hold), which under this control starts from the least
 * (engine/req.c cur_window): a slow start that ends before the filter
 * lets a cut see the queue.
 */
#define CC_DELAY_AI	     (10ull * 1000000 / 8) /* + 10 Mbit/s a sample */
#define CC_DELAY_BETA	     820u		   /* 0.8, of 1024 */
#define CC_DELAY_MAX_CUT     512u		   /* at most half, of 1024 */
#define CC_DELAY_FILTER	     4u /* samples: the RTT is their least */
#define CC_DELAY_MAX_BACKOFF 4u /* of the rate above target */
#define CC_DELAY_HOLD_RTTS   8u /* ... held there this long */

void uroce_cc_delay(struct uroce_qp *qp, uint64_t r)
{
	struct uroce_cc_state *cc = &qp->cc;
	uint64_t now = uroce_now_ns(), target, cut, raw;
	bool falling;
	uint32_t i;

	if (!r)
		r = 1;
	raw = r;
	if (!cc->base_ns || r < cc->base_ns)
		cc->base_ns = r;
	/* what was delivered since the last sample */
	if (cc->dlv_ns && now > cc->dlv_ns)
		cc->dlv_rate = cc->dlv_bytes * 1000000000ull /
			       (now - cc->dlv_ns);
	cc->dlv_ns = now;
	cc->dlv_bytes = 0;
	/* the least of the last CC_DELAY_FILTER samples: a queue holds
	 * every sample up, a descheduled peer or progress thread only one */
	cc->recent[cc->nrecent++ % CC_DELAY_FILTER] = r;
	for (i = 0; i < CC_DELAY_FILTER && i < cc->nrecent; i++)
		if (cc->recent[i] < r)
			r = cc->recent[i];
	falling = cc->prev_ns && r + r / 64 < cc->prev_ns;
	cc->prev_ns = cc->rtt_ns = r;
	target = cc->base_ns + qp->dev->cc.target_ns;
	cc->hold = raw > target && !cc->loss_mode;
	if (r <= target) {
		cc->streak_rate = 0;
		cc->held_ns = 0;
		cc->loss_mode = false; /* the queue drained: ours again */
		/* grow only a rate that held the QP back, and only while
		 * the last sample is below target too (the filter's lag
		 * would grow it into a queue that is building); it stays
		 * paced (unpaced, it would send its whole window at once) */
		if (raw > target) {
			cc->stage = 0;
			return;
		}
		if (cc->rate && cc->limited) {
			cc->rate += CC_DELAY_AI * (1 + cc->stage / 32);
			cc->stage++;
		}
		cc->limited = false;
		return;
	}
	cc->stage = 0;
	/* the queue is someone else's; the last cut works, or has not had
	 * an RTT to show (Swift: at most one decrease per RTT): the RTT of
	 * the packets sent after it, which queue behind what the last
	 * sample saw, however much the filter holds the RTT down */
	if (cc->loss_mode || falling ||
	    (cc->cut_ns && now - cc->cut_ns < cc->cut_wait_ns))
		return;
	if (!cc->rate) {
		/* start from what it delivered, not from the bursts it sent:
		 * through a shared queue that is its share */
		pace_start(cc, now, cc->dlv_rate);
	}
	if (!cc->streak_rate)
		cc->streak_rate = cc->rate;
	cut = (uint64_t)CC_DELAY_BETA * (r - target) / r;
	if (cut > CC_DELAY_MAX_CUT)
		cut = CC_DELAY_MAX_CUT;
	cut = cc->rate * cut / 1024;
	if (cc->rate - cut < cc->streak_rate / CC_DELAY_MAX_BACKOFF) {
		/* cut this deep: the QP holds there for a while, so that
		 * the others sharing the queue, which may have begun to cut
		 * later, can drain it too */
		cc->rate = cc->streak_rate / CC_DELAY_MAX_BACKOFF;
		if (cc->rate < CC_MIN_RATE)
			cc->rate = CC_MIN_RATE;
		if (!cc->held_ns)
			cc->held_ns = now;
		if (now - cc->held_ns < CC_DELAY_HOLD_RTTS * r)
			return;
		/* and the RTT still up: not our queue.  Leave the QP to its
		 * loss-based window until the RTT is back below target */
		cc->held_ns = 0;
		cc->rate = 0;
		cc->loss_mode = true;
		cc->hold = false;
		cc->streak_rate = 0;
		cc->fallbacks++;
		uroce_count(qp->dev, UROCE_CNT_CC_DELAY_FALLBACKS, 1);
		return;
	}
	cc->rate -= cut;
	cc->cut_ns = now;
	cc->cut_wait_ns = raw > r ? raw : r;
	if (cc->rate < CC_MIN_RATE)
		cc->rate = CC_MIN_RATE;
	cc->limited = false;
	cc->cuts++;
	uroce_count(qp->dev, UROCE_CNT_CC_DELAY_CUTS, 1);
}

bool uroce_cc_pace_ok(struct uroce_qp *qp, uint32_t bytes)
{
	struct uroce_cc_state *cc = &qp->cc;
	uint64_t now = uroce_now_ns(), burst, add;

	if (cc->rate && qp->dev->cc.on) {
		alpha_decay(cc, now);
		rate_increase(qp, now);
	}
	if (!cc->rate) {
		rate_measure(cc, now, bytes);
		return true;
	}
	burst = cc->rate * CC_BURST_NS / 1000000000ull;
	if (burst < CC_BURST_MIN)
		burst = CC_BURST_MIN;
	add = (now - cc->tok_ns) * cc->rate / 1000000000ull;
	if (add) { /* (the rest of a byte waits) */
		cc->tokens += (int64_t)add;
		cc->tok_ns = now;
	}
	if (cc->tokens > (int64_t)burst)
		cc->tokens = (int64_t)burst;
	if (cc->tokens > 0) {
		cc->tokens -= bytes;
		rate_measure(cc, now, bytes);
		return true;
	}
	/* the QP waits until a few packets' worth is back, so that a wake-up
	 * (uroce_req_timeout) sends a GSO train, not one packet */
	cc->limited = true;
	qp->req.pace_deadline_ns = now + 1 +
				   ((uint64_t)(-cc->tokens) + CC_WAKE_BYTES) *
					   1000000000ull / cc->rate;
	uroce_qp_timer_arm(qp, qp->req.pace_deadline_ns);
	return false;
}
