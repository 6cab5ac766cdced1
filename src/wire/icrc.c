// SPDX-License-Identifier: MIT
/*
 * RoCE v2 invariant CRC (IBA annex A17.8): CRC-32 over a pseudo packet made
 * of 8 bytes of ones in place of the LRH, the IP and UDP headers with every
 * field a router may change set to ones, the BTH with its FECN/BECN/resv6
 * byte set to ones, and the rest of the transport packet.  We must produce
 * the same bytes rdma_rxe and RoCE NICs put on the wire.
 *
 * The CRC is isa-l's crc32_gzip_refl (zlib's CRC-32, chained the same
 * way): its AVX-512 folding runs 30-70 GB/s on 1-4 KiB packets here,
 * libdeflate 1.14's 17 (docs/transport.md, "The ICRC and the IPv4
 * identification").  Every call goes through crc_run() below, which clears
 * the vector registers' upper halves that isa-l leaves dirty.
 */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <isa-l/crc.h>
#include <zlib.h>

#include "wire/wire.h"

#define LRH_LEN	  8
#define IPV4_LEN  20
#define IPV6_LEN  40
#define UDP_LEN	  8
#define PSHDR_MAX (LRH_LEN + IPV6_LEN + UDP_LEN + UROCE_BTH_LEN)

#define IPV4_DF 0x4000 /* in the flags/fragment offset word */

/*
 * isa-l 2.30's AVX-512 CRC returns without VZEROUPPER, leaving the vector
 * registers' upper halves dirty.  On a Sapphire Rapids Xeon the next SSE
 * instruction of ours (a struct copy) then stalls about 130 ns, ten times
 * the CRC of a 1 KiB packet, and the next CRC call as long again
 * (docs/transport.md, "The ICRC and the IPv4 identification").
 */
static uint32_t crc_run(uint32_t seed, const uint8_t *buf, size_t len)
{
	uint32_t v = crc32_gzip_refl(seed, buf, len);

#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx"))
		__asm__ volatile("vzeroupper" ::: "memory");
#endif
	return v;
}

static void wr_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/*
 * Build the masked headers in front of the payload; roce_len is BTH through
 * ICRC, which is what the IP and UDP length fields count.  Returns the
 * number of bytes written to h.
 */
static size_t build_pshdr(uint8_t *h, const struct uroce_icrc_ip *ip,
			  size_t roce_len, const uint8_t *bth)
{
	uint8_t *p = h + LRH_LEN;
	uint16_t udp_len = (uint16_t)(UDP_LEN + roce_len);

	memset(h, 0xff, LRH_LEN);
	if (ip->family == AF_INET6) {
		/* version 6; traffic class and flow label masked */
		uroce_wr_be32(p, 0x6fffffff);
		wr_be16(p + 4, udp_len);
		p[6] = IPPROTO_UDP;
		p[7] = 0xff; /* hop limit */
		memcpy(p + 8, &ip->src.v6, 16);
		memcpy(p + 24, &ip->dst.v6, 16);
		p += IPV6_LEN;
	} else {
		p[0] = 0x45;
		p[1] = 0xff; /* TOS */
		wr_be16(p + 2, (uint16_t)(IPV4_LEN + udp_len));
		wr_be16(p + 4, ip->ip_id);
		wr_be16(p + 6, ip->df ? IPV4_DF : 0);
		p[8] = 0xff; /* TTL */
		p[9] = IPPROTO_UDP;
		p[10] = 0xff; /* header checksum */
		p[11] = 0xff;
		memcpy(p + 12, &ip->src.v4, 4);
		memcpy(p + 16, &ip->dst.v4, 4);
		p += IPV4_LEN;
	}
	wr_be16(p, ip->sport);
	wr_be16(p + 2, ip->dport);
	wr_be16(p + 4, udp_len);
	p[6] = 0xff; /* UDP checksum */
	p[7] = 0xff;
	p += UDP_LEN;

	memcpy(p, bth, UROCE_BTH_LEN);
	p[4] = 0xff; /* FECN, BECN, resv6 */
	p += UROCE_BTH_LEN;
	return (size_t)(p - h);
}

uint32_t uroce_icrc_compute(const struct uroce_icrc_ip *ip,
			    const struct iovec *iov, int iovcnt)
{
	uint8_t bth[UROCE_BTH_LEN] = { 0 };
	uint8_t h[PSHDR_MAX];
	size_t total = 0, got = 0, skip;
	uint32_t crc;
	int i;

	/* The BTH is masked, so gather it even if the iov splits it. */
	for (i = 0; i < iovcnt; i++) {
		size_t n = iov[i].iov_len;

		if (got < UROCE_BTH_LEN) {
			size_t take = UROCE_BTH_LEN - got;

			if (take > n)
				take = n;
			memcpy(bth + got, iov[i].iov_base, take);
			got += take;
		}
		total += n;
	}

	crc = crc_run(0, h, build_pshdr(h, ip, total + UROCE_ICRC_LEN, bth));

	skip = UROCE_BTH_LEN;
	for (i = 0; i < iovcnt; i++) {
		const uint8_t *b = iov[i].iov_base;
		size_t n = iov[i].iov_len;

		if (skip >= n) {
			skip -= n;
			continue;
		}
		crc = crc_run(crc, b + skip, n - skip);
		skip = 0;
	}
	return crc;
}

static uint32_t icrc_load(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

/* Multiply by x modulo the CRC-32 polynomial, in zlib's reflected form. */
static uint32_t mul_x(uint32_t v)
{
	return (v >> 1) ^ ((v & 1) ? 0xedb88320u : 0);
}

/*
 * Is r a GF(2) combination of vec[0..n)?  Gaussian elimination: each vector
 * in turn becomes a pivot on its lowest set bit and clears that bit from
 * the later vectors and from r.  Branch-free, as the bits are random.
 */
static bool in_span(uint32_t *vec, int n, uint32_t r)
{
	int i, k;

	for (i = 0; i < n; i++) {
		uint32_t v = vec[i], pivot = v & -v;

		for (k = i + 1; k < n; k++)
			vec[k] ^= v & -(uint32_t) !!(vec[k] & pivot);
		r ^= v & -(uint32_t) !!(r & pivot);
	}
	return r == 0;
}

/*
 * Multiply the CRC-linear image v by x^(8 * n) mod P, as if n zero bytes
 * followed: a CRC pass over zeros for short tails, zlib's polynomial
 * arithmetic (about 300 ns whatever n) for long ones.
 */
static uint32_t shift_bytes(uint32_t v, size_t n)
{
	static const uint8_t zeros[1024];

	if (n > sizeof(zeros))
		return (uint32_t)crc32_combine_op(v, 0,
						  crc32_combine_gen((z_off_t)n));
	/* crc32_gzip_refl inverts before and after: cancel both */
	return ~crc_run(~v, zeros, n);
}

/*
 * A UDP socket never learns the IPv4 identification and DF bit the sender's
 * kernel chose, yet both are inside the ICRC.  The CRC is affine in those
 * 17 bits: crc(id, df) = crc(0, 1) ^ the sum of one vector per changed bit,
 * so the ICRC is right iff crc(0, 1) ^ icrc lies in the span of the vectors
 * (and the same holds from any other starting point).  The caller's guess
 * with DF is tried first: Linux puts ID 0 and DF on an unconnected UDP
 * socket's datagrams, and ID k on the k-th of a GSO send, so the usual
 * case needs no algebra.  A one-bit change's vector is x^(bits
 * that follow it) mod P: we carry the DF bit over the rest of the packet,
 * then step back one bit at a time, one more factor of x each, to the id.
 */
static bool check_ipv4(const struct uroce_icrc_ip *ip, const uint8_t *pkt,
		       size_t len)
{
	/* id high byte, id low byte, flags high byte; DF is 0x40 there */
	static const uint8_t zero[3], df[3] = { 0, 0, IPV4_DF >> 8 };
	struct uroce_icrc_ip ip0 = *ip;
	struct iovec iov = {
		.iov_base = (void *)pkt,
		.iov_len = len - UROCE_ICRC_LEN,
	};
	uint32_t vec[17], r, v;
	int n = 0, bit;

	ip0.df = true; /* ip0.ip_id: the caller's guess */
	r = uroce_icrc_compute(&ip0, &iov, 1) ^ icrc_load(pkt + iov.iov_len);
	if (!r)
		return true;

	/* after the flags byte: the rest of IP and UDP, then BTH..payload */
	v = crc_run(0, df, 3) ^ crc_run(0, zero, 3);
	v = shift_bytes(v, IPV4_LEN - 7 + UDP_LEN + iov.iov_len);

	/*
	 * Stream bit s = 8 * byte + bit (the CRC takes each byte LSB first):
	 * DF is s = 22, the id bits are s = 0..15.
	 */
	vec[n++] = v;
	for (bit = 21; bit >= 0; bit--) {
		v = mul_x(v);
		if (bit < 16)
			vec[n++] = v;
	}
	return in_span(vec, n, r);
}

bool uroce_icrc_check(const struct uroce_icrc_ip *ip, const uint8_t *pkt,
		      size_t len)
{
	struct iovec iov = {
		.iov_base = (void *)pkt,
		.iov_len = len - UROCE_ICRC_LEN,
	};

	if (len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return false;
	if (ip->family == AF_INET)
		return check_ipv4(ip, pkt, len);
	if (ip->family != AF_INET6)
		return false;
	return uroce_icrc_compute(ip, &iov, 1) == icrc_load(pkt + iov.iov_len);
}

void uroce_icrc_ip_from(const struct sockaddr_storage *src,
			const struct sockaddr_storage *dst,
			struct uroce_icrc_ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	ip->family = src->ss_family;
	if (src->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)src;
		const struct sockaddr_in *d = (const struct sockaddr_in *)dst;

		ip->src.v4 = s->sin_addr;
		ip->dst.v4 = d->sin_addr;
		ip->sport = ntohs(s->sin_port);
	} else {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)src;
		const struct sockaddr_in6 *d = (const struct sockaddr_in6 *)dst;

		ip->src.v6 = s->sin6_addr;
		ip->dst.v6 = d->sin6_addr;
		ip->sport = ntohs(s->sin6_port);
	}
	ip->dport = UROCE_UDP_PORT;
}
