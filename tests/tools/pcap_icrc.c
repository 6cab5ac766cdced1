// SPDX-License-Identifier: MIT
/*
 * Checks a capture file from UROCE_PCAP, frame by frame, with our own
 * ICRC code (src/wire/icrc.c, the one tests/unit cross-checks with scapy):
 *
 *	pcap_icrc FILE [--corrupt N OUT]
 *
 * For every frame: Ethernet, IPv4 or IPv6, UDP to port 4791, and
 *  - the IPv4 header checksum, IP and UDP lengths and UDP checksum right;
 *  - the ICRC exactly what we compute from the IP header in the file (its
 *    identification and DF bit included: "as on the wire"), and accepted
 *    by uroce_icrc_check, the receive path's check.
 * Prints one line per bad frame and a summary "frames=N roce=N bad=N";
 * exits 0 only if every frame is a good RoCE v2 packet and there is one.
 *
 * --corrupt N OUT writes a copy of FILE with one payload bit of frame N
 * (1-based) flipped and (IPv4) its UDP checksum cleared, so that a test
 * can show that the ICRC check fails.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "wire/wire.h"

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t sum16(uint32_t sum, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += rd16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* NULL if the frame is a good RoCE v2 packet, else why not. */
static const char *check_frame(const uint8_t *f, size_t len)
{
	struct uroce_icrc_ip ip = { 0 };
	const uint8_t *l3 = f + 14, *udp, *roce;
	size_t l3len, roce_len;
	uint32_t sum, stored, want;
	struct iovec iov;
	uint16_t ulen;

	if (len < 14)
		return "shorter than an Ethernet header";
	if (rd16(f + 12) == 0x0800) {
		if (len < 14 + 20 + 8 || l3[0] != 0x45)
			return "bad IPv4 header";
		if (l3[9] != IPPROTO_UDP)
			return "not UDP";
		if (rd16(l3 + 2) != len - 14)
			return "IPv4 total length is not the frame's";
		if (fold(sum16(0, l3, 20)) != 0xffff)
			return "bad IPv4 header checksum";
		ip.family = AF_INET;
		ip.ip_id = rd16(l3 + 4);
		ip.df = rd16(l3 + 6) & 0x4000;
		memcpy(&ip.src.v4, l3 + 12, 4);
		memcpy(&ip.dst.v4, l3 + 16, 4);
		l3len = 20;
	} else if (rd16(f + 12) == 0x86dd) {
		if (len < 14 + 40 + 8 || (l3[0] >> 4) != 6)
			return "bad IPv6 header";
		if (l3[6] != IPPROTO_UDP)
			return "not UDP";
		if (rd16(l3 + 4) != len - 14 - 40)
			return "IPv6 payload length is not the frame's";
		ip.family = AF_INET6;
		memcpy(&ip.src.v6, l3 + 8, 16);
		memcpy(&ip.dst.v6, l3 + 24, 16);
		l3len = 40;
	} else {
		return "not IPv4 or IPv6";
	}
	udp = l3 + l3len;
	ulen = rd16(udp + 4);
	if (ulen != len - 14 - l3len)
		return "UDP length is not the frame's";
	if (rd16(udp + 2) != UROCE_UDP_PORT)
		return "not to UDP port 4791";
	/* pseudo header + UDP header + data sums to all ones */
	if (rd16(udp + 6) || ip.family == AF_INET6) {
		size_t alen = ip.family == AF_INET ? 4 : 16;

		sum = sum16(0, ip.family == AF_INET ? l3 + 12 : l3 + 8,
			    2 * alen);
		sum += IPPROTO_UDP + ulen;
		sum = sum16(sum, udp, ulen);
		if (fold(sum) != 0xffff)
			return "bad UDP checksum";
	}
	roce = udp + 8;
	roce_len = ulen - 8u;
	if (roce_len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return "RoCE packet shorter than BTH + ICRC";
	ip.sport = rd16(udp);
	ip.dport = rd16(udp + 2);
	iov.iov_base = (void *)roce;
	iov.iov_len = roce_len - UROCE_ICRC_LEN;
	memcpy(&stored, roce + iov.iov_len, 4);
	uroce_icrc_store((uint8_t *)&want, uroce_icrc_compute(&ip, &iov, 1));
	if (stored != want)
		return "ICRC is not what the IP/UDP headers in the file give";
	if (!uroce_icrc_check(&ip, roce, roce_len))
		return "ICRC rejected by uroce_icrc_check";
	return NULL;
}

static int corrupt(const char *in, long which, const char *out)
{
	FILE *fi = fopen(in, "rb"), *fo = fopen(out, "wb");
	uint8_t hdr[24], rec[16], *frame = NULL;
	long n = 0;

	if (!fi || !fo || fread(hdr, 1, 24, fi) != 24 ||
	    fwrite(hdr, 1, 24, fo) != 24)
		return 2;
	while (fread(rec, 1, 16, fi) == 16) {
		uint32_t caplen;

		memcpy(&caplen, rec + 8, 4);
		frame = realloc(frame, caplen ? caplen : 1);
		if (!frame || fread(frame, 1, caplen, fi) != caplen)
			return 2;
		/* the last byte before the ICRC: payload (or a header);
		 * IPv4: no UDP checksum (0), so only the ICRC can tell */
		if (++n == which && caplen > 14 + 20 + 8 + 5) {
			frame[caplen - 5] ^= 0x10;
			if (frame[12] == 0x08 && frame[13] == 0x00)
				frame[14 + 20 + 6] = frame[14 + 20 + 7] = 0;
		}
		if (fwrite(rec, 1, 16, fo) != 16 ||
		    fwrite(frame, 1, caplen, fo) != caplen)
			return 2;
	}
	free(frame);
	fclose(fi);
	return fclose(fo) ? 2 : 0;
}

int main(int argc, char **argv)
{
	uint8_t hdr[24], rec[16], *frame = NULL;
	unsigned long frames = 0, roce = 0, bad = 0;
	uint32_t magic, caplen, origlen, link;
	FILE *f;

	if (argc == 5 && !strcmp(argv[2], "--corrupt"))
		return corrupt(argv[1], atol(argv[3]), argv[4]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE.pcap [--corrupt N OUT]\n",
			argv[0]);
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	if (fread(hdr, 1, 24, f) != 24) {
		fprintf(stderr, "%s: no pcap file header\n", argv[1]);
		return 1;
	}
	memcpy(&magic, hdr, 4);
	memcpy(&link, hdr + 20, 4);
	if ((magic != 0xa1b2c3d4 && magic != 0xa1b23c4d) || link != 1) {
		fprintf(stderr, "%s: not a host-order Ethernet pcap file\n",
			argv[1]);
		return 1;
	}
	while (fread(rec, 1, 16, f) == 16) {
		const char *why;

		memcpy(&caplen, rec + 8, 4);
		memcpy(&origlen, rec + 12, 4);
		frames++;
		if (caplen > 262144) {
			printf("frame %lu: caplen %u is absurd\n", frames,
			       caplen);
			bad++;
			break;
		}
		frame = realloc(frame, caplen ? caplen : 1);
		if (!frame || fread(frame, 1, caplen, f) != caplen) {
			printf("frame %lu: truncated file\n", frames);
			bad++;
			break;
		}
		why = caplen != origlen ? "frame cut short (caplen < len)" :
					  check_frame(frame, caplen);
		if (why) {
			if (bad < 20)
				printf("frame %lu: %s\n", frames, why);
			bad++;
		} else {
			roce++;
		}
	}
	free(frame);
	fclose(f);
	printf("frames=%lu roce=%lu bad=%lu\n", frames, roce, bad);
	return bad || !roce ? 1 : 0;
}
