// SPDX-License-Identifier: MIT
/*
 * hostile_udp - hand-crafted hostile packets from plain UDP sockets at a
 * real uroce process (hostile_target, started here over our library).
 *
 *   hostile_udp TARGET_BINARY
 *
 * Each case sends one crafted packet from the target's connected peer
 * address and checks the answer:
 *   - NAK cases (IBA 9.7.5.2: remote access error / invalid request) get
 *     exactly that NAK, on a QP of their own (the NAK puts it in error);
 *   - drop cases get no answer: a valid 8-byte RDMA READ sent right after
 *     on the same QP must be the first thing answered, with the right
 *     bytes, proving the bad packet was dropped and the QP is unharmed.
 * Then the target reports how many bytes of each region changed (none
 * may, except the 16 bytes the one legitimate WRITE put into RE) and its
 * counters, which must show each drop reason.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "craft.h"
#include "target.h"

#define NQP	  16
#define FIRST_QPN 0x500
#define EPSN0	  0x100

struct info {
	uint32_t qpn;
	uint64_t w_addr, ro_addr, b_addr, dead_addr, re_addr;
	uint32_t w_rkey, ro_rkey, b_rkey, dead_rkey, re_old, re_new;
};

static struct in_addr a_target, a_me, a_intruder;
static int s_me, s_intruder;
static struct info inf;
static uint32_t epsn[NQP];
static int next_qp; /* next unused QP index */
static uint32_t xrc_tgt[3], xrc_srqn, xrc_srqn_other;

static int udp_bound(struct in_addr a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(UROCE_UDP_PORT),
				   .sin_addr = a };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("hostile_udp: bind");
		exit(1);
	}
	return fd;
}

static void send_raw(int fd, const uint8_t *p, size_t len)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons(UROCE_UDP_PORT),
				  .sin_addr = a_target };

	if (sendto(fd, p, len, 0, (struct sockaddr *)&to, sizeof(to)) !=
	    (ssize_t)len) {
		perror("hostile_udp: sendto");
		exit(1);
	}
}

/* Send c from our (peer) address; mangle lets a case break the result. */
static void send_pkt(int fd, struct in_addr from, const struct craft *c,
		     size_t (*mangle)(uint8_t *, size_t))
{
	uint8_t p[CRAFT_MAX];
	size_t len = craft_build(c, p, from, a_target);

	if (mangle)
		len = mangle(p, len);
	send_raw(fd, p, len);
}

/* The next datagram for us (up to 2 s); its length, or 0. */
static size_t recv_resp(uint8_t *p, size_t max)
{
	struct pollfd pfd = { .fd = s_me, .events = POLLIN };
	ssize_t n;

	if (poll(&pfd, 1, 2000) != 1)
		return 0;
	n = recv(s_me, p, max, 0);
	return n > 0 ? (size_t)n : 0;
}

static uint32_t qpn_of(int i)
{
	return inf.qpn + (uint32_t)i;
}

/* An 8-byte READ of W at qp i; the first answer must be its response. */
static bool probe(int i, const char *after)
{
	uint8_t r[CRAFT_MAX];
	struct craft c = { .op = UROCE_OP_RC_READ_REQUEST,
			   .qpn = qpn_of(i),
			   .psn = epsn[i],
			   .ackreq = true,
			   .pad = 0,
			   .va = inf.w_addr + 64,
			   .rkey = inf.w_rkey,
			   .dmalen = 8 };
	size_t n;
	bool ok;

	send_pkt(s_me, a_me, &c, NULL);
	n = recv_resp(r, sizeof(r));
	ok = n == UROCE_BTH_LEN + UROCE_AETH_LEN + 8 + UROCE_ICRC_LEN &&
	     bth_opcode(r) == UROCE_OP_RC_READ_RESPONSE_ONLY &&
	     bth_psn(r) == epsn[i] && bth_qpn(r) == FIRST_QPN + (uint32_t)i;
	check(ok, "%s: dropped silently, QP %d still answers a READ", after, i);
	if (ok)
		epsn[i] = uroce_psn_add(epsn[i], 1);
	return ok;
}

/* Expect an ACK/NAK (opcode op) with syndrome syn (and psn) next. */
static void expect_ack(const char *what, uint8_t op, uint8_t syn, uint32_t psn)
{
	uint8_t r[CRAFT_MAX];
	size_t n = recv_resp(r, sizeof(r));
	bool ok = n >= UROCE_BTH_LEN + UROCE_AETH_LEN + UROCE_ICRC_LEN &&
		  bth_opcode(r) == op && aeth_syn(r + UROCE_BTH_LEN) == syn &&
		  bth_psn(r) == psn;

	check(ok,
	      "%s: answered with AETH syndrome 0x%02x psn 0x%x (got %s "
	      "0x%02x psn 0x%x)",
	      what, syn, psn, n ? "opcode/syndrome" : "nothing",
	      n >= UROCE_BTH_LEN + 4 ? aeth_syn(r + UROCE_BTH_LEN) : 0,
	      n >= UROCE_BTH_LEN ? bth_psn(r) : 0);
}

static void expect_aeth(const char *what, uint8_t syn, uint32_t psn)
{
	expect_ack(what, UROCE_OP_RC_ACK, syn, psn);
}

/* An XRC request to TGT QP tgt naming SRQ srqn: answered with an XRC
 * NAK (opcode 0xb1) with code, and nothing lands. */
static void xrc_case(const char *what, struct craft c, uint32_t tgt,
		     uint32_t srqn, uint8_t code)
{
	c.qpn = tgt;
	c.psn = EPSN0;
	c.ackreq = true;
	c.srqn = srqn;
	send_pkt(s_me, a_me, &c, NULL);
	expect_ack(what, UROCE_OP_XRC_ACK, UROCE_AETH_NAK | code, c.psn);
}

static const uint8_t evil[64] = {
	0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef,
	0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef,
};

/* One packet that must be NAKed with code (on a fresh QP). */
static void nak_case(const char *what, struct craft c, uint8_t code)
{
	int i = next_qp++;

	c.qpn = qpn_of(i);
	c.psn = epsn[i];
	c.ackreq = true;
	send_pkt(s_me, a_me, &c, NULL);
	expect_aeth(what, UROCE_AETH_NAK | code, c.psn);
}

static struct craft write_only(uint64_t va, uint32_t rkey, uint32_t len)
{
	struct craft c = { .op = UROCE_OP_RC_WRITE_ONLY,
			   .pad = -1,
			   .va = va,
			   .rkey = rkey,
			   .dmalen = len,
			   .payload = evil,
			   .paylen = len };
	return c;
}

static size_t truncate_to_reth(uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	return UROCE_BTH_LEN + 8; /* half a RETH, no ICRC */
}

static size_t flip_icrc(uint8_t *p, size_t len)
{
	p[len - 1] ^= 0x40;
	return len;
}

/* PadCnt 3 on a packet with one byte after its headers */
static size_t pad_past_payload(uint8_t *p, size_t len)
{
	p[1] |= 0x30;
	return craft_icrc(p, len - UROCE_ICRC_LEN, a_me, a_target);
}

static size_t too_short(uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	return 6;
}

/* One packet that must be dropped silently (on the shared QP 0). */
static void drop_case(const char *what, struct craft c, int fd,
		      struct in_addr from, size_t (*mangle)(uint8_t *, size_t),
		      bool keep_qpn)
{
	if (!keep_qpn)
		c.qpn = qpn_of(0);
	if (!c.psn)
		c.psn = epsn[0];
	c.ackreq = true;
	send_pkt(fd, from, &c, mangle);
	probe(0, what);
}

int main(int argc, char **argv)
{
	static struct target tg;
	int i;
	char addr[3][32], line[4096];
	unsigned int net = (unsigned int)getpid() % 200 + 20;
	FILE *out;

	if (argc != 2) {
		fprintf(stderr, "usage: hostile_udp TARGET_BINARY\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < 3; i++)
		snprintf(addr[i], sizeof(addr[i]), "127.78.%u.%d", net, i + 1);
	inet_pton(AF_INET, addr[0], &a_target);
	inet_pton(AF_INET, addr[1], &a_me);
	inet_pton(AF_INET, addr[2], &a_intruder);
	s_me = udp_bound(a_me);
	s_intruder = udp_bound(a_intruder);

	if (target_start(&tg, argv[1], addr[0], addr[1], FIRST_QPN, NQP))
		return 1;
	out = tg.out;
	if (!fgets(line, sizeof(line), out) || strncmp(line, "info ", 5)) {
		fprintf(stderr, "hostile_udp: no info line from the target\n");
		return 1;
	}
	inf.qpn = (uint32_t)get_num(line, "qpn=");
	inf.w_addr = get_u64(line, "w_addr=");
	inf.w_rkey = (uint32_t)get_u64(line, "w_rkey=");
	inf.ro_addr = get_u64(line, "ro_addr=");
	inf.ro_rkey = (uint32_t)get_u64(line, "ro_rkey=");
	inf.b_addr = get_u64(line, "b_addr=");
	inf.b_rkey = (uint32_t)get_u64(line, "b_rkey=");
	inf.dead_addr = get_u64(line, "dead_addr=");
	inf.dead_rkey = (uint32_t)get_u64(line, "dead_rkey=");
	inf.re_addr = get_u64(line, "re_addr=");
	inf.re_old = (uint32_t)get_u64(line, "re_old=");
	inf.re_new = (uint32_t)get_u64(line, "re_new=");
	if (!fgets(line, sizeof(line), out) || strncmp(line, "xrc ", 4)) {
		fprintf(stderr, "hostile_udp: no xrc line from the target\n");
		return 1;
	}
	xrc_tgt[0] = (uint32_t)get_num(line, "tgt0=");
	xrc_tgt[1] = (uint32_t)get_num(line, "tgt1=");
	xrc_tgt[2] = (uint32_t)get_num(line, "tgt2=");
	xrc_srqn = (uint32_t)get_num(line, "srqn=");
	xrc_srqn_other = (uint32_t)get_num(line, "srqn_other=");
	for (i = 0; i < NQP; i++)
		epsn[i] = EPSN0;
	next_qp = 1; /* QP 0 takes the drop cases */

	/* ---- XRC: the XRCETH names the SRQ, and so the PD and memory ---- */
	{
		struct craft s = { .op = UROCE_OP_XRC_SEND_ONLY,
				   .pad = -1,
				   .payload = evil,
				   .paylen = 16 };
		struct craft w = { .op = UROCE_OP_XRC_WRITE_ONLY,
				   .pad = -1,
				   .va = inf.w_addr,
				   .rkey = inf.w_rkey,
				   .dmalen = 16,
				   .payload = evil,
				   .paylen = 16 };

		xrc_case("XRC SEND naming an SRQ number nobody has", s,
			 xrc_tgt[0], xrc_srqn ^ 0x800000, UROCE_NAK_INVALID_REQ);
		xrc_case("XRC WRITE to W naming the SRQ of another XRC domain",
			 w, xrc_tgt[1], xrc_srqn_other, UROCE_NAK_INVALID_REQ);
		w.va = inf.b_addr;
		w.rkey = inf.b_rkey;
		xrc_case("XRC WRITE with the rkey of an MR outside the named "
			 "SRQ's PD",
			 w, xrc_tgt[2], xrc_srqn, UROCE_NAK_REM_ACCESS);
	}

	/* ---- answered with a NAK (IBA 9.7.5.2.3 / 9.7.5.2.2) ---- */
	nak_case("WRITE with the rkey of an MR in another PD",
		 write_only(inf.b_addr, inf.b_rkey, 16), UROCE_NAK_REM_ACCESS);
	nak_case("WRITE with the rkey of a deregistered MR",
		 write_only(inf.dead_addr, inf.dead_rkey, 16),
		 UROCE_NAK_REM_ACCESS);
	nak_case("WRITE whose address + length wraps past 2^64",
		 write_only(UINT64_MAX - 7, inf.w_rkey, 16),
		 UROCE_NAK_REM_ACCESS);
	{
		struct craft c = { .op = UROCE_OP_RC_READ_REQUEST,
				   .pad = 0,
				   .va = inf.w_addr + 64,
				   .rkey = inf.w_rkey,
				   .dmalen = 0xffffffc0 };
		nak_case("READ of 4 GiB from a 4 KiB MR (length wraps the "
			 "address space check)",
			 c, UROCE_NAK_REM_ACCESS);
	}
	nak_case("WRITE running 8 bytes past the MR end",
		 write_only(inf.w_addr + 4096 - 8, inf.w_rkey, 16),
		 UROCE_NAK_REM_ACCESS);
	nak_case("WRITE to an MR without remote write access",
		 write_only(inf.ro_addr, inf.ro_rkey, 16), UROCE_NAK_REM_ACCESS);
	{
		struct craft c = { .op = UROCE_OP_RC_FETCH_ADD,
				   .pad = 0,
				   .va = inf.ro_addr,
				   .rkey = inf.ro_rkey,
				   .swap_add = 1 };
		nak_case("FETCH_ADD on an MR without remote atomic access", c,
			 UROCE_NAK_REM_ACCESS);
		c.op = UROCE_OP_RC_CMP_SWAP;
		c.va = inf.w_addr + 4;
		c.rkey = inf.w_rkey;
		nak_case("CMP_SWAP at a misaligned address", c,
			 UROCE_NAK_INVALID_REQ);
	}
	/* keys: a re-registered MR has a new rkey, the old one is dead */
	check(inf.re_new != inf.re_old,
	      "re-registered MR has a new rkey (0x%x -> 0x%x)", inf.re_old,
	      inf.re_new);
	nak_case("WRITE with the rkey the MR had before re-registration",
		 write_only(inf.re_addr, inf.re_old, 16), UROCE_NAK_REM_ACCESS);
	{
		int q = next_qp++;
		struct craft c = write_only(inf.re_addr, inf.re_new, 16);

		c.qpn = qpn_of(q);
		c.psn = epsn[q];
		c.ackreq = true;
		send_pkt(s_me, a_me, &c, NULL);
		/* (an ACK counting no receive WQE: the target posts none,
		 * docs/transport.md "End-to-end credits") */
		expect_aeth("WRITE with the re-registered MR's new rkey (control)",
			    UROCE_AETH_ACK, c.psn);
	}

	/* ---- dropped silently, and counted ---- */
	{
		struct craft c = write_only(inf.w_addr, inf.w_rkey, 1);

		c.pad = 0;
		drop_case("PadCnt 3 with 1 byte after the headers", c, s_me,
			  a_me, pad_past_payload, false);
		c = write_only(inf.w_addr, inf.w_rkey, 16);
		drop_case("WRITE cut off inside its RETH", c, s_me, a_me,
			  truncate_to_reth, false);
		drop_case("6-byte datagram", c, s_me, a_me, too_short, false);
		drop_case("WRITE with a bad ICRC", c, s_me, a_me, flip_icrc,
			  false);
		drop_case("WRITE from an address that is not the QP's peer", c,
			  s_intruder, a_intruder, NULL, false);
		c.op = UROCE_OP_UC_WRITE_ONLY;
		drop_case("UC opcode to an RC QP", c, s_me, a_me, NULL, false);
		c.op = UROCE_OP_UD_SEND_ONLY;
		c.payload = evil;
		drop_case("UD opcode to an RC QP", c, s_me, a_me, NULL, false);
		c = write_only(inf.w_addr, inf.w_rkey, 16);
		c.op = 0x1e;
		drop_case("undefined opcode 0x1e", c, s_me, a_me, NULL, false);
		c = write_only(inf.w_addr, inf.w_rkey, 16);
		c.tver = 1;
		drop_case("transport header version 1", c, s_me, a_me, NULL,
			  false);
		c.tver = 0;
		c.pkey = 0x1234;
		drop_case("P_Key 0x1234", c, s_me, a_me, NULL, false);
		c.pkey = 0;
		/* (in the target's own owner slot, bits 23..16: another
		 * slot's QPN would be counted as drop_no_owner, see
		 * docs/shared.md "QPNs: `slot << 16 | n`") */
		c.qpn = (qpn_of(0) & 0xff0000) | 0xcdef;
		drop_case("unknown destination QP", c, s_me, a_me, NULL, true);
		/* duplicate region: far behind, no side effect, re-ACKed */
		c = write_only(inf.w_addr, inf.w_rkey, 16);
		c.qpn = qpn_of(0);
		c.psn = uroce_psn_add(epsn[0], UROCE_PSN_MASK - 0x3fffff);
		c.ackreq = true;
		send_pkt(s_me, a_me, &c, NULL);
		expect_aeth("WRITE 2^22 PSNs behind (a duplicate: re-ACKed, not "
			    "executed)",
			    UROCE_AETH_ACK,
			    uroce_psn_add(epsn[0], UROCE_PSN_MASK));
		probe(0, "after the old duplicate");
		/* far ahead: one PSN sequence error NAK, nothing executed */
		c.psn = uroce_psn_add(epsn[0], 0x400000);
		send_pkt(s_me, a_me, &c, NULL);
		expect_aeth("WRITE 2^22 PSNs ahead",
			    UROCE_AETH_NAK | UROCE_NAK_PSN_SEQ_ERR, epsn[0]);
		probe(0, "after the PSN sequence error");
	}

	/* ---- what the target saw ---- */
	target_stop(&tg);
	while (fgets(line, sizeof(line), out)) {
		long changed = get_num(line, "changed=");

		if (!strncmp(line, "region ", 7)) {
			bool re = !strncmp(line, "region RE ", 10);

			line[strcspn(line, "\n")] = 0;
			check(re ? changed == 16 : changed == 0,
			      "%s (expected %d)", line, re ? 16 : 0);
		} else if (!strncmp(line, "re_head ", 8)) {
			check(!strncmp(line + 8,
				       "deadbeefdeadbeefdeadbeefdeadbeef", 32),
			      "the legitimate WRITE landed in RE");
		}
	}
	target_wait(&tg);
	{
		static const struct want_counter want[] = {
			{ " tx_nak_access=", 9, 0 },
			{ " tx_nak_inv=", 3, 0 },
			{ " rem_access_err=", 8, 0 },
			{ " drop_bad_hdr=", 6, 0 },
			{ " drop_truncated=", 2, 0 },
			{ " drop_bad_icrc=", 1, 0 },
			{ " drop_bad_src=", 1, 0 },
			{ " drop_unknown_qp=", 1, 0 },
			{ " out_of_seq=", 1, 0 },
			{ " tx_nak_seq=", 1, 0 },
			{ " duplicates=", 1, 0 },
			{ " xrc_bad_srqn=", 2, 0 },
		};

		return target_verdict(&tg, "hostile_udp", want,
				      sizeof(want) / sizeof(want[0]));
	}
}
