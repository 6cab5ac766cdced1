// SPDX-License-Identifier: MIT
/*
 * Addresses and GIDs: the IPv4-mapped GID of an address and back, an
 * address as text, and the comparisons the transport and the CM make.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "dev.h"

void uroce_gid_from_addr(const struct sockaddr_storage *ss, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (ss->ss_family == AF_INET) {
		/* IPv4-mapped IPv6 address, as RoCE v2 GIDs carry IPv4 */
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12],
		       &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)ss)->sin6_addr,
		       16);
	}
}

int uroce_addr_from_gid(const union ibv_gid *gid, struct sockaddr_storage *ss)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	memset(ss, 0, sizeof(*ss));
	if (!memcmp(gid->raw, v4mapped, sizeof(v4mapped))) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(UROCE_UDP_PORT);
		memcpy(&in->sin_addr, &gid->raw[12], 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		static const uint8_t zero[16];

		if (!memcmp(gid->raw, zero, 16))
			return -EINVAL;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(UROCE_UDP_PORT);
		memcpy(&in6->sin6_addr, gid->raw, 16);
	}
	return 0;
}

static const void *ip_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ?
		       (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
		       (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
}

const char *uroce_addr_ntop(const struct sockaddr_storage *ss, char *buf,
			    size_t len)
{
	if ((ss->ss_family != AF_INET && ss->ss_family != AF_INET6) ||
	    !inet_ntop(ss->ss_family, ip_of(ss), buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

bool uroce_addr_loopback(const struct sockaddr_storage *ss)
{
	const struct in6_addr *a6;

	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >>
			24) == 127;
	if (ss->ss_family != AF_INET6)
		return false;
	a6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a6) ||
	       (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}

bool uroce_addr_same(const struct sockaddr *a, const struct sockaddr_storage *b)
{
	if (a->sa_family != b->ss_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr,
			       sizeof(struct in6_addr));
	return false;
}
