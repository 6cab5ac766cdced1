// SPDX-License-Identifier: MIT
/*
 * Put one packet of a QP on the wire: pad, ICRC, hand to packet IO.
 *
 * Between uroce_xmit_begin and uroce_xmit_end (the requester's run, the
 * processing of one received packet) packets are held and leave together:
 * a run of equal-sized datagrams to one destination (the middle packets
 * of a message, the READ responses of a request), optionally ended by a
 * shorter one, is one UDP GSO send, one system call instead of one per
 * packet.  The kernel splits it into datagrams with IPv4 identification
 * 0, 1, 2, ... (an unconnected socket with DF starts each send at 0), and
 * the ICRC covers the identification, so packet k of a batch is computed
 * for ID k.  Outside a batch, or without GSO, every packet goes at once
 * with ID 0 as before.
 */
#include <errno.h>
#include <string.h>

#include "uroce.h"

#define XMIT_MAX_IOV (UROCE_MAX_SGE + 4)
/* a GSO send carries at most 64 KiB of UDP payload, and the kernel takes
 * at most UDP_MAX_SEGMENTS (64 on older kernels) datagrams */
#define TXB_MAX_BYTES 65000u

static const uint8_t zeros[4];

static bool same_dst(const struct sockaddr_storage *a,
		     const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return !memcmp(a, b, sizeof(struct sockaddr_in));
	return !memcmp(a, b, sizeof(struct sockaddr_in6));
}

/* Send what the batch holds; dev->lock held. */
static void txb_flush(struct uroce_dev *dev)
{
	struct uroce_txbatch *b = &dev->txb;
	int err, k;

	if (!b->npkts)
		return;
	if (b->npkts == 1)
		err = dev->io->send(dev, &b->dst, b->iov, b->niov);
	else
		err = dev->io->send_gso(dev, &b->dst, b->iov, b->niov, b->seg);
	if (!err && b->npkts > 1) {
		/* (a single datagram was tapped by io->send) */
		for (k = 0; k < b->npkts; k++)
			uroce_tap_tx(dev, &b->dst, &b->iov[b->pkt_iov[k]],
				     b->pkt_iov[k + 1] - b->pkt_iov[k],
				     (uint16_t)k);
	} else if (err != -EAGAIN && err != -ENOBUFS && err != -ECONNREFUSED &&
		   b->npkts > 1) {
		/* the kernel refuses GSO here: lost packets are resent
		 * one by one from now on */
		uroce_count(dev, UROCE_CNT_TX_GSO_OFF, 1);
		dev->gso = false;
	}
	if (b->npkts > 1)
		uroce_count(dev, UROCE_CNT_TX_GSO_SENDS, 1);
	b->npkts = 0;
	b->niov = 0;
	b->bytes = 0;
	b->closed = false;
}

void uroce_xmit_begin(struct uroce_dev *dev)
{
	dev->txb.depth++;
}

void uroce_xmit_end(struct uroce_dev *dev)
{
	if (!--dev->txb.depth)
		txb_flush(dev);
}

int uroce_xmit(struct uroce_qp *qp, uint8_t *hdr, uint32_t hdrlen,
	       const struct iovec *payload, int npayload, uint32_t paylen)
{
	return uroce_xmit_to(qp, &qp->peer, hdr, hdrlen, payload, npayload,
			     paylen);
}

/* Can a packet of len bytes (npayload payload pieces) join the batch? */
static bool txb_fits(const struct uroce_txbatch *b,
		     const struct sockaddr_storage *dst, uint32_t len,
		     int npayload)
{
	if (!b->npkts)
		return true;
	return !b->closed && len <= b->seg && same_dst(&b->dst, dst) &&
	       b->npkts < UROCE_TXB_MAX_PKTS &&
	       b->bytes + len <= TXB_MAX_BYTES &&
	       b->niov + npayload + 3 <= UROCE_TXB_MAX_IOV;
}

int uroce_xmit_to(struct uroce_qp *qp, const struct sockaddr_storage *dst,
		  uint8_t *hdr, uint32_t hdrlen, const struct iovec *payload,
		  int npayload, uint32_t paylen)
{
	struct uroce_dev *dev = qp->dev;
	struct uroce_txbatch *b = &dev->txb;
	struct iovec one[XMIT_MAX_IOV], *iov;
	uint8_t one_hdr[UROCE_MAX_HDR_LEN], one_tail[UROCE_ICRC_LEN];
	uint8_t *h, *tail;
	struct uroce_icrc_ip ip;
	uint32_t pad = (4 - (paylen & 3)) & 3;
	uint32_t len = hdrlen + paylen + pad + UROCE_ICRC_LEN;
	bool batch = b->depth && dev->gso && !dev->fault.on;
	int n = 0, k = 0, i, err = 0;

	if (npayload > UROCE_MAX_SGE || hdrlen > UROCE_MAX_HDR_LEN)
		return -EINVAL;
	if (batch) {
		if (!txb_fits(b, dst, len, npayload))
			txb_flush(dev);
		k = b->npkts;
		iov = &b->iov[b->niov];
		h = b->hdr[k];
		tail = b->tail[k];
	} else {
		iov = one;
		h = one_hdr;
		tail = one_tail;
	}
	memcpy(h, hdr, hdrlen);
	h[1] = (uint8_t)((h[1] & ~0x30) | (pad << 4));
	iov[n].iov_base = h;
	iov[n++].iov_len = hdrlen;
	for (i = 0; i < npayload; i++)
		iov[n++] = payload[i];
	if (pad) {
		iov[n].iov_base = (void *)zeros;
		iov[n++].iov_len = pad;
	}
	uroce_icrc_ip_from(&dev->local, dst, &ip);
	/* an unconnected socket with IP_PMTUDISC_DO sends DF, and IPv4 ID 0
	 * for a datagram of its own, k for the k-th of a GSO send */
	ip.ip_id = (uint16_t)k;
	ip.df = dev->family == AF_INET;
	uroce_icrc_store(tail, uroce_icrc_compute(&ip, iov, n));
	iov[n].iov_base = tail;
	iov[n++].iov_len = UROCE_ICRC_LEN;

	if (batch) {
		if (!k) {
			b->dst = *dst;
			b->seg = (uint16_t)len;
		} else if (len < b->seg) {
			b->closed = true;	/* a shorter datagram ends it */
		}
		b->npkts++;
		b->niov += n;
		b->pkt_iov[b->npkts] = (uint16_t)b->niov;
		b->bytes += len;
	} else {
		err = dev->io->send(dev, dst, iov, n);
	}
	uroce_count(dev, UROCE_CNT_TX_PKTS, 1);
	uroce_count(dev, UROCE_CNT_TX_BYTES, len);
	qp->cnt_tx_pkts++;
	return err;
}
