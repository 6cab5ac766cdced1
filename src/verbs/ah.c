// SPDX-License-Identifier: MIT
/* Address handles: on RoCE v2 an AH is the peer's IP address (its GID,
 * or a uroce port's LID on this host). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/ip.h>

#include "uroce.h"

UROCE_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
					  struct ibv_ah_attr *attr)
{
	struct uroce_dev *dev;
	struct uroce_ah *ah;
	union ibv_gid dgid;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	dev = ctx_dev(pd->context);
	if ((attr->is_global && attr->grh.sgid_index != 0) ||
	    (attr->port_num && attr->port_num != 1)) {
		errno = EINVAL;
		return NULL;
	}
	/*
	 * RoCE needs the GRH: the GID is the address (IBA A17.4.5).  Without
	 * one, the DLID must be the LID of a uroce device on this host.
	 */
	if (attr->is_global) {
		dgid = attr->grh.dgid;
	} else if (uroce_lid_resolve(dev, attr->dlid, &dgid)) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	if (uroce_addr_from_gid(&dgid, &ah->dst) ||
	    ah->dst.ss_family != dev->net.family) {
		free(ah);
		errno = EINVAL;
		return NULL;
	}
	ah->attr = *attr;
	ah->ip = uroce_ipopt_of(attr, dev->cc.on);
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	atomic_fetch_add(&to_upd(pd)->refs, 1);
	return &ah->ibah;
}

UROCE_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct uroce_ah *ah = to_uah(ibah);

	atomic_fetch_sub(&to_upd(ibah->pd)->refs, 1);
	free(ah);
	return 0;
}

/*
 * ibv_init_ah_from_wc(3): the reply address of a UD receive.  RoCE v2
 * puts the IP header of the packet in the 40-byte GRH area: an IPv6
 * header, or for IPv4 the IPv4 header in its last 20 bytes.
 */
UROCE_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context,
				     uint8_t port_num, struct ibv_wc *wc,
				     struct ibv_grh *grh,
				     struct ibv_ah_attr *ah_attr)
{
	const uint8_t *raw = (const uint8_t *)grh;

	if (!context || !wc || !grh || !ah_attr || !(wc->wc_flags & IBV_WC_GRH)) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	ah_attr->is_global = 1;
	ah_attr->grh.sgid_index = 0;
	ah_attr->grh.hop_limit = 0xff;
	if ((raw[20] >> 4) == 4) {
		struct ip iph;

		memcpy(&iph, raw + 20, sizeof(iph));
		ah_attr->grh.dgid.raw[10] = 0xff;
		ah_attr->grh.dgid.raw[11] = 0xff;
		memcpy(&ah_attr->grh.dgid.raw[12], &iph.ip_src, 4);
		ah_attr->grh.traffic_class = iph.ip_tos;
	} else if ((raw[0] >> 4) == 6) {
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.traffic_class =
			(uint8_t)(be32toh(grh->version_tclass_flow) >> 20);
		ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) &
					  0xfffff;
	} else {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

UROCE_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
						  struct ibv_wc *wc,
						  struct ibv_grh *grh,
						  uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}
