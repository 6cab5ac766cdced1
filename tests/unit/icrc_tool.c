// SPDX-License-Identifier: MIT
/*
 * Cross-check helper for test_icrc_scapy.py: reads whole IPv4 or IPv6
 * packets (IP header, UDP header, RoCE transport packet with ICRC) as hex,
 * one per argument or one per stdin line, and prints for each
 *	<ICRC we compute, in wire byte order> <1 if uroce_icrc_check passes>
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "wire/wire.h"

#define MAX_PKT 16384

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static long parse_hex(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;

	while (*s) {
		int hi, lo;

		if (isspace((unsigned char)*s)) {
			s++;
			continue;
		}
		hi = hexval((unsigned char)s[0]);
		lo = s[1] ? hexval((unsigned char)s[1]) : -1;
		if (hi < 0 || lo < 0 || n == max)
			return -1;
		out[n++] = (uint8_t)(hi << 4 | lo);
		s += 2;
	}
	return (long)n;
}

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static int one(const char *hex)
{
	static uint8_t pkt[MAX_PKT];
	struct uroce_icrc_ip ip = { 0 };
	struct iovec iov;
	const uint8_t *udp, *roce;
	size_t roce_len;
	uint8_t icrc[4];
	long n;
	bool ok;

	n = parse_hex(hex, pkt, sizeof(pkt));
	if (n < 1)
		return -1;
	if ((pkt[0] >> 4) == 4) {
		if (n < 28 || pkt[0] != 0x45 || pkt[9] != IPPROTO_UDP)
			return -1;
		ip.family = AF_INET;
		ip.ip_id = rd16(pkt + 4);
		ip.df = rd16(pkt + 6) & 0x4000;
		memcpy(&ip.src.v4, pkt + 12, 4);
		memcpy(&ip.dst.v4, pkt + 16, 4);
		udp = pkt + 20;
	} else if ((pkt[0] >> 4) == 6) {
		if (n < 48 || pkt[6] != IPPROTO_UDP)
			return -1;
		ip.family = AF_INET6;
		memcpy(&ip.src.v6, pkt + 8, 16);
		memcpy(&ip.dst.v6, pkt + 24, 16);
		udp = pkt + 40;
	} else {
		return -1;
	}
	ip.sport = rd16(udp);
	ip.dport = rd16(udp + 2);
	roce = udp + 8;
	roce_len = (size_t)(pkt + n - roce);
	if (rd16(udp + 4) != roce_len + 8 ||
	    roce_len < UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return -1;

	iov.iov_base = (void *)roce;
	iov.iov_len = roce_len - UROCE_ICRC_LEN;
	uroce_icrc_store(icrc, uroce_icrc_compute(&ip, &iov, 1));
	ok = uroce_icrc_check(&ip, roce, roce_len);
	printf("%02x%02x%02x%02x %d\n", icrc[0], icrc[1], icrc[2], icrc[3], ok);
	return 0;
}

int main(int argc, char **argv)
{
	static char line[2 * MAX_PKT + 16];
	int i;

	for (i = 1; i < argc; i++) {
		if (one(argv[i])) {
			fprintf(stderr, "icrc_tool: bad packet %d\n", i);
			return 2;
		}
	}
	if (argc > 1)
		return 0;
	for (i = 1; fgets(line, sizeof(line), stdin); i++) {
		if (one(line)) {
			fprintf(stderr, "icrc_tool: bad packet on line %d\n", i);
			return 2;
		}
	}
	return 0;
}
