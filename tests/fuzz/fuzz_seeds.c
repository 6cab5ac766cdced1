// SPDX-License-Identifier: MIT
/*
 * fuzz_seeds DIR - write the seed corpus of fuzz_recv: a valid packet (or
 * a valid message of several) for every opcode of the table, in the
 * harness's input format ([flags][len lo][len hi][bytes], ICRC appended
 * by the harness), with rkey n / small addresses that the harness maps
 * onto its MRs and destination QPN 0 for its RC QP.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../hostile/craft.h"

static uint8_t payload[4096];

/* append one packet (without its ICRC) to buf */
static size_t add(uint8_t *buf, size_t off, struct craft c)
{
	uint8_t p[CRAFT_MAX];
	struct in_addr any = { 0 };
	size_t len = craft_build(&c, p, any, any) - UROCE_ICRC_LEN;

	buf[off] = 0;
	buf[off + 1] = (uint8_t)len;
	buf[off + 2] = (uint8_t)(len >> 8);
	memcpy(buf + off + 3, p, len);
	return off + 3 + len;
}

static int put(const char *dir, const char *name, const uint8_t *b, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
		perror(path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t buf[4 * CRAFT_MAX];
	int op, nseeds = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_seeds DIR\n");
		return 2;
	}
	if (mkdir(argv[1], 0755) && errno != EEXIST) {
		perror(argv[1]);
		return 1;
	}
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7);
	for (op = 0; op < 256; op++) {
		const struct uroce_opcode_info *info = &uroce_opcode[op];
		uint32_t mask = info->mask;
		struct craft c = { .op = (uint8_t)op,
				   .qpn = 0,
				   .ackreq = true,
				   .pad = -1,
				   .payload = payload };
		bool resp = !(mask & UROCE_M_REQ);
		char name[64];
		size_t n = 0;

		if (!info->name)
			continue;
		c.psn = resp ? 0x200 : 0x100;
		c.rkey = 0;
		c.va = mask & UROCE_M_ATMETH ? 8 : 16;
		if (mask & UROCE_M_PAYLOAD)
			c.paylen = (mask & UROCE_M_LAST) ||
						   !(mask & UROCE_M_FIRST ||
						     mask & UROCE_M_MIDDLE) ?
					   13 :
					   1024;
		if ((mask & UROCE_M_MIDDLE) ||
		    ((mask & UROCE_M_LAST) && !(mask & UROCE_M_FIRST))) {
			/* a MIDDLE or LAST: lead in with the FIRST of its kind */
			struct craft f = c;

			f.op = (uint8_t)(mask & UROCE_M_WRITE ?
						 op - (mask & UROCE_M_MIDDLE ?
							       1 :
							       2) :
						 op - (mask & UROCE_M_MIDDLE ?
							       1 :
							       2));
			if (mask & UROCE_M_LAST && (op & 0x1f) != 0x08 &&
			    (op & 0x1f) != 0x02)
				f.op = (uint8_t)(op & 0xe0) |
				       (mask & UROCE_M_WRITE ? 0x06 :
					mask & UROCE_M_READ  ? 0x0d :
							       0x00);
			f.paylen = 1024;
			f.dmalen = 1024 + c.paylen;
			n = add(buf, n, f);
			c.psn++;
		}
		c.dmalen = mask & UROCE_M_READ ? 64 : c.paylen;
		n = add(buf, n, c);
		snprintf(name, sizeof(name), "op_%02x_%s", op, info->name);
		for (char *p = name; *p; p++)
			if (*p == ' ' || *p == '/')
				*p = '_';
		if (put(argv[1], name, buf, n))
			return 1;
		nseeds++;
	}
	printf("fuzz_seeds: %d seeds in %s\n", nseeds, argv[1]);
	return 0;
}
