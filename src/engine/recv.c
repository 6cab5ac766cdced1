// SPDX-License-Identifier: MIT
/*
 * Receive demux: a datagram from the socket becomes a parsed packet after
 * the header, length, ICRC and address checks, and goes to the QP's
 * responder (requests) or completer (responses).  Anything malformed is
 * dropped and counted here, before any engine sees it.
 */
#include <string.h>

#include "dev.h"

static uint32_t transport_mask(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return UROCE_M_RC;
	case IBV_QPT_UC:
		return UROCE_M_UC;
	case IBV_QPT_UD:
		return UROCE_M_UD;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return UROCE_M_XRC;
	default:
		return 0;
	}
}

/* Returns the counter to bump when the packet is not acceptable. */
static int parse(uint8_t *buf, size_t len, struct uroce_pkt *pkt)
{
	const struct uroce_opcode_info *info;
	uint32_t body, pad;

	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return UROCE_CNT_DROP_TRUNCATED;
	info = &uroce_opcode[bth_opcode(buf)];
	if (!info->name || bth_tver(buf) != 0)
		return UROCE_CNT_DROP_BAD_HDR;
	if (len < (size_t)info->length + UROCE_ICRC_LEN)
		return UROCE_CNT_DROP_TRUNCATED;
	body = (uint32_t)len - UROCE_ICRC_LEN - info->length;
	pad = bth_pad(buf);
	if (pad > body || (!(info->mask & UROCE_M_PAYLOAD) && body))
		return UROCE_CNT_DROP_BAD_HDR;
	pkt->bth = buf;
	pkt->len = (uint32_t)len - UROCE_ICRC_LEN;
	pkt->info = info;
	pkt->mask = info->mask;
	pkt->opcode = bth_opcode(buf);
	pkt->psn = bth_psn(buf);
	pkt->qpn = bth_qpn(buf);
	pkt->payload = buf + info->offset[UROCE_HDR_PAYLOAD];
	pkt->paylen = body - pad;
	return -1;
}

static void recv_pkt(struct uroce_dev *dev, uint8_t *buf, size_t len,
		     const struct sockaddr_storage *src,
		     const struct sockaddr_storage *dst, uint16_t ip_id_hint,
		     const uint8_t *payload_at);

void uroce_recv(struct uroce_dev *dev, uint8_t *buf, size_t len,
		const struct sockaddr_storage *src,
		const struct sockaddr_storage *dst, uint16_t ip_id_hint)
{
	recv_pkt(dev, buf, len, src, dst, ip_id_hint, NULL);
}

void uroce_recv_local(struct uroce_dev *dev, uint8_t *buf, size_t len,
		      const struct sockaddr_storage *src,
		      const struct sockaddr_storage *dst, uint16_t ip_id_hint,
		      const uint8_t *payload_at)
{
	recv_pkt(dev, buf, len, src, dst, ip_id_hint,
		 payload_at ? payload_at : buf);
}

/*
 * The checks that need no lock: length, header, ICRC, P_Key; pkt is then
 * the parsed packet.  False: dropped (counted).  payload_at NULL: a
 * datagram from the network, whose corruption the ICRC catches.
 * Otherwise from a ring: no ICRC, and the packet's bytes past its headers
 * are read at payload_at + offset (only ever copied out, never parsed)
 * while buf holds a private copy of the headers.
 */
static bool rx_check(struct uroce_dev *dev, uint8_t *buf, size_t len,
		     const struct sockaddr_storage *src,
		     const struct sockaddr_storage *dst, uint16_t ip_id_hint,
		     const uint8_t *payload_at, struct uroce_pkt *pkt)
{
	struct uroce_icrc_ip ip;
	int drop;

	uroce_count(dev, UROCE_CNT_RX_PKTS, 1);
	uroce_count(dev, UROCE_CNT_RX_BYTES, len);
	drop = parse(buf, len, pkt);
	if (drop >= 0) {
		uroce_count(dev, drop, 1);
		return false;
	}
	uroce_icrc_ip_from(src, dst, &ip);
	ip.ip_id = ip_id_hint;
	if (!payload_at && !uroce_icrc_check(&ip, buf, len)) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_ICRC, 1);
		return false;
	}
	if (bth_pkey(buf) != UROCE_DEFAULT_PKEY) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return false;
	}
	if (payload_at) /* (read only: copied to SGEs) */
		pkt->payload = (uint8_t *)(uintptr_t)(payload_at +
						      (pkt->payload - buf));
	pkt->src = *src;
	pkt->dst = dst;
	pkt->ip = payload_at ? (struct uroce_ipopt){ 0 } : dev->net.rx_ip;
	pkt->rx_ns = payload_at ? 0 : dev->net.rx_ns;
	pkt->ring = payload_at != NULL;
	return true;
}

static bool rx_mcast(const struct uroce_pkt *pkt)
{
	return pkt->qpn == UROCE_MCAST_QPN || uroce_addr_is_mcast(pkt->dst);
}

/* The packet to its QP; dev->lock held, inside an xmit batch. */
static void rx_dispatch(struct uroce_dev *dev, struct uroce_pkt *pkt)
{
	const struct sockaddr_storage *src = &pkt->src;
	struct uroce_qp *qp;

	uroce_assert_held(&dev->lock);
	qp = uroce_qp_lookup(dev, pkt->qpn);
	if (!qp) {
		uroce_count(dev, UROCE_CNT_DROP_UNKNOWN_QP, 1);
		return;
	}
	/* a CNP (RoCE v2, A17.9): the peer saw our packets marked */
	if ((pkt->mask & UROCE_M_CNP) && uroce_same_ip(&qp->peer, src) &&
	    qp->attr.qp_state >= IBV_QPS_RTR) {
		uroce_cc_cnp(qp);
		return;
	}
	/* the opcode must be of the QP's transport (IBA 9.6.1.1) */
	if (!(pkt->mask & transport_mask(qp->type))) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_HDR, 1);
		return;
	}
	if (qp->attr.qp_state < IBV_QPS_RTR || qp->attr.qp_state == IBV_QPS_ERR) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_STATE, 1);
		return;
	}
	/* connected QPs: only the peer may speak to them */
	if (qp->type != IBV_QPT_UD && !uroce_same_ip(&qp->peer, src)) {
		uroce_count(dev, UROCE_CNT_DROP_BAD_SRC, 1);
		return;
	}
	qp->cnt_rx_pkts++;
	/* the peer spoke: what we sent before is answered (xmit.c) */
	if (qp->cnt_tx_pkts != qp->tx_at_rx) {
		atomic_fetch_sub_explicit(&dev->stats.cnt[UROCE_CNT_TX_UNANSWERED],
					  qp->cnt_tx_pkts - qp->tx_at_rx,
					  memory_order_relaxed);
		qp->tx_at_rx = qp->cnt_tx_pkts;
	}
	/* a queue on the way is filling: tell the sender (engine/cc.c) */
	if ((pkt->ip.tos & UROCE_ECN_MASK) == UROCE_ECN_CE && dev->cc.on)
		uroce_cc_ce(qp, pkt);
	/* IBA 11.6.3.1: the first packet on an RTR QP establishes it */
	if (qp->attr.qp_state == IBV_QPS_RTR && !qp->comm_est &&
	    qp->type != IBV_QPT_UD) {
		struct ibv_async_event ev = {
			.element.qp = uqp_ibqp(qp),
			.event_type = IBV_EVENT_COMM_EST,
		};

		qp->comm_est = true;
		uroce_async_event(to_uctx(uqp_ibqp(qp)->context), &ev);
	}
	if (uroce_qp_is_xrc(qp))
		uroce_xrc_rx(qp, pkt);
	else if (pkt->mask & UROCE_M_REQ)
		uroce_resp_rx(qp, pkt);
	else
		uroce_comp_rx(qp, pkt);
}

static void recv_pkt(struct uroce_dev *dev, uint8_t *buf, size_t len,
		     const struct sockaddr_storage *src,
		     const struct sockaddr_storage *dst, uint16_t ip_id_hint,
		     const uint8_t *payload_at)
{
	struct uroce_pkt pkt;

	if (!rx_check(dev, buf, len, src, dst, ip_id_hint, payload_at, &pkt))
		return;
	if (rx_mcast(&pkt)) {
		uroce_mcast_rx(dev, &pkt);
		return;
	}
	uroce_lock_spin(&dev->lock);
	uroce_xmit_begin(dev);
	rx_dispatch(dev, &pkt);
	uroce_xmit_end(dev);
	uroce_dev_unlock(dev);
}

/*
 * A train of datagrams from one sender (UDP_GRO): each checked outside
 * the engine lock (the ICRC is most of a packet's cost before it meets a
 * QP), then all of them dispatched under one hold of it.  Per packet,
 * the lock's cache line went back and forth between the receiver and an
 * application thread that posts and polls meanwhile (iscsi-perf over
 * iSER: 24 datagrams a train at IB MTU 1024).
 */
void uroce_recv_train(struct uroce_dev *dev, const struct uroce_rx_seg *seg,
		      int n, const struct sockaddr_storage *src,
		      const struct sockaddr_storage *dst)
{
	struct uroce_pkt pkt[UROCE_RX_TRAIN_MAX];
	int i, ok = 0;

	for (i = 0; i < n && i < UROCE_RX_TRAIN_MAX; i++) {
		if (!rx_check(dev, seg[i].buf, seg[i].len, src, dst,
			      seg[i].ip_id, NULL, &pkt[ok]))
			continue;
		if (rx_mcast(&pkt[ok]))
			uroce_mcast_rx(dev, &pkt[ok]);
		else
			ok++;
	}
	if (!ok)
		return;
	uroce_lock_spin(&dev->lock);
	uroce_xmit_begin(dev);
	for (i = 0; i < ok; i++)
		rx_dispatch(dev, &pkt[i]);
	uroce_xmit_end(dev);
	uroce_dev_unlock(dev);
}

void uroce_rx_burst_begin(struct uroce_dev *dev)
{
	uroce_assert_held(&dev->prog.rx_lock);
	uroce_lock_spin(&dev->lock);
	uroce_ack_burst_begin(dev);
	uroce_cq_bells_defer(dev);
	pthread_mutex_unlock(&dev->lock);
}

void uroce_rx_burst_end(struct uroce_dev *dev)
{
	struct uroce_cq *bells[UROCE_BELLS_DEFERRED];
	uint32_t n;

	uroce_lock_spin(&dev->lock);
	uroce_ack_burst_end(dev);
	n = uroce_cq_bells_take(dev, bells);
	uroce_dev_unlock(dev);
	uroce_cq_bells_pay(bells, n);
}

/* (a burst the application's own poll took: engine/resp.c) */
void uroce_rx_burst_end_for_post(struct uroce_dev *dev)
{
	struct uroce_cq *bells[UROCE_BELLS_DEFERRED];
	uint32_t n;

	uroce_lock_spin(&dev->lock);
	uroce_ack_burst_end_for_post(dev);
	n = uroce_cq_bells_take(dev, bells);
	uroce_dev_unlock(dev);
	uroce_cq_bells_pay(bells, n);
}

/* The end of a burst: its ACKs wait for the reply of an application
 * thread that received it (its poll; for the rings only a thread asleep
 * in ibv_get_cq_event: engine/progress.c says which) */
static void rx_end(struct uroce_dev *dev, bool rings)
{
	if (rings ? uroce_progress_waiter_rx() : uroce_progress_app_rx(dev))
		uroce_rx_burst_end_for_post(dev);
	else
		uroce_rx_burst_end(dev);
}

static const struct uroce_rx_entry rx_entry = {
	.begin = uroce_rx_burst_begin,
	.recv_train = uroce_recv_train,
	.recv_ring = uroce_recv_local,
	.end = rx_end,
	.pause = uroce_rx_pause,
	.resume = uroce_rx_resume,
	.room = uroce_tx_room_ready,
};

void uroce_rx_register(struct uroce_dev *dev)
{
	uroce_net_set_rx(dev, &rx_entry);
}
