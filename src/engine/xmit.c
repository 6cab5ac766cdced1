// SPDX-License-Identifier: MIT
/* Put one packet of a QP on the wire: pad, ICRC, hand to packet IO. */
#include <errno.h>
#include <string.h>

#include "uroce.h"

#define XMIT_MAX_IOV (UROCE_MAX_SGE + 4)

int uroce_xmit(struct uroce_qp *qp, uint8_t *hdr, uint32_t hdrlen,
	       const struct iovec *payload, int npayload, uint32_t paylen)
{
	if (uroce_qp_is_xrc(qp))
		return uroce_xrc_xmit(qp, hdr, hdrlen, payload, npayload,
				      paylen);
	return uroce_xmit_to(qp, &qp->peer, hdr, hdrlen, payload, npayload,
			     paylen);
}

int uroce_xmit_to(struct uroce_qp *qp, const struct sockaddr_storage *dst,
		  uint8_t *hdr, uint32_t hdrlen, const struct iovec *payload,
		  int npayload, uint32_t paylen)
{
	static const uint8_t zeros[4];
	struct uroce_dev *dev = qp->dev;
	struct iovec iov[XMIT_MAX_IOV];
	struct uroce_icrc_ip ip;
	uint8_t icrc[UROCE_ICRC_LEN];
	uint32_t pad = (4 - (paylen & 3)) & 3;
	int n = 0, i, err;

	if (npayload > UROCE_MAX_SGE)
		return -EINVAL;
	hdr[1] = (uint8_t)((hdr[1] & ~0x30) | (pad << 4));
	iov[n].iov_base = hdr;
	iov[n++].iov_len = hdrlen;
	for (i = 0; i < npayload; i++)
		iov[n++] = payload[i];
	if (pad) {
		iov[n].iov_base = (void *)zeros;
		iov[n++].iov_len = pad;
	}
	uroce_icrc_ip_from(&dev->local, dst, &ip);
	/* an unconnected socket with IP_PMTUDISC_DO sends IPv4 ID 0, DF */
	ip.ip_id = 0;
	ip.df = dev->family == AF_INET;
	uroce_icrc_store(icrc, uroce_icrc_compute(&ip, iov, n));
	iov[n].iov_base = icrc;
	iov[n++].iov_len = UROCE_ICRC_LEN;

	err = dev->io->send(dev, dst, iov, n);
	uroce_count(dev, UROCE_CNT_TX_PKTS, 1);
	uroce_count(dev, UROCE_CNT_TX_BYTES, hdrlen + paylen + pad + 4);
	qp->cnt_tx_pkts++;
	return err;
}
