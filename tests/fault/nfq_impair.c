// SPDX-License-Identifier: MIT
/*
 * nfq_impair - the test bed's packet impairment program (this kernel has
 * no netem).  An iptables NFQUEUE rule hands it every RoCE v2 packet of a
 * network namespace; it holds packets (delay, jitter), releases some late
 * (reordering) and flips bits (corruption), then gives each verdict.
 *
 *   nfq_impair --queue N [--delay-ms D] [--jitter-ms J] [--reorder-jitter]
 *              [--reorder P]
 *              [--corrupt P] [--ce-mbps R [--ce-kbytes K]]
 *              [--seed S] [--ready FILE] [--stats FILE]
 *
 * Delay: each packet leaves D ms (+/- J ms, uniform) after it arrived,
 * but never before a packet that arrived earlier, as on a real link;
 * with --reorder-jitter in order of departure time (netem's behaviour),
 * so jitter reorders too.  Reorder: with
 * probability P a packet is held until REORDER_GAP later packets have
 * left (or REORDER_MAX_MS passed).  Corrupt: with probability P one bit of
 * the RoCE part (BTH .. ICRC) is flipped and the UDP checksum set to 0
 * ("none", as rxe sends), else the kernel would drop the packet as loss.
 * A flip the receiver's ICRC check cannot see (masked header bits, or one
 * of the 2^-15 syndromes the IPv4 ID/DF solving absorbs) is re-drawn, so
 * that every corrupted packet must be caught by uroce's ICRC check.
 *
 * ECN marking (--ce-mbps): a switch queue that marks instead of dropping,
 * as none of this kernel's qdiscs can: a phantom queue (HULL, NSDI 2012)
 * fills with every packet's length and drains at R Mbit/s; an
 * ECN-capable packet (ECT(0) or ECT(1)) that finds more than K KiB in it
 * (default 32) leaves marked CE, with its IP header checksum redone.  It
 * delays nothing: the marks are the only signal, as on a switch with a
 * low marking threshold.
 *
 * --ready FILE is written once the queue is bound; SIGTERM or SIGINT
 * writes the counters to --stats FILE ("name=value ..."), accepts every
 * held packet and exits 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>

#include "wire/wire.h"

#define MAX_HELD       16384
#define QUEUE_MAXLEN   16384
#define REORDER_GAP    3
#define REORDER_MAX_MS 20
#define PKT_MAX	       65536

struct held {
	uint32_t id;
	uint64_t due_ns;
	int gap;      /* reorder: later packets still to let past */
	bool reorder; /* leaves at gap 0 or at due_ns */
};

static struct {
	struct nfq_q_handle *qh;
	double delay_ms, jitter_ms, reorder, corrupt;
	double ce_bps, ce_k; /* phantom queue: drain rate, bytes */
	double pq_bytes;
	uint64_t pq_ns;
	bool jitter_reorders;
	uint64_t last_due;
	uint64_t rng;
	struct held held[MAX_HELD];
	unsigned int nheld;
	uint8_t buf[PKT_MAX];
	/* counters */
	uint64_t packets, delayed, reordered, corrupted, redrawn, overflow,
		not_roce, enobufs, ect, marked;
} g;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible for a given --seed */
	g.rng ^= g.rng >> 12;
	g.rng ^= g.rng << 25;
	g.rng ^= g.rng >> 27;
	return g.rng * 2685821657736338717ull;
}

static double rnd01(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static void accept_pkt(uint32_t id)
{
	nfq_set_verdict(g.qh, id, NF_ACCEPT, 0, NULL);
}

static void passed_one(void);

/* Release every held packet that is due, oldest deadline first. */
static void release_due(uint64_t now)
{
	for (;;) {
		unsigned int i, best = g.nheld;

		for (i = 0; i < g.nheld; i++) {
			bool due = g.held[i].due_ns <= now ||
				   (g.held[i].reorder && g.held[i].gap <= 0);

			if (!due)
				continue;
			if (best == g.nheld ||
			    g.held[i].due_ns < g.held[best].due_ns)
				best = i;
		}
		if (best == g.nheld)
			return;
		accept_pkt(g.held[best].id);
		g.held[best] = g.held[--g.nheld];
		passed_one();
	}
}

/* A packet left: reorder-held ones count it. */
static void passed_one(void)
{
	unsigned int i;

	for (i = 0; i < g.nheld; i++)
		if (g.held[i].gap > 0)
			g.held[i].gap--;
}

static void hold(uint32_t id, uint64_t due, int gap, bool reorder)
{
	if (g.nheld == MAX_HELD) {
		g.overflow++;
		accept_pkt(id);
		return;
	}
	g.held[g.nheld].id = id;
	g.held[g.nheld].due_ns = due;
	g.held[g.nheld].gap = gap;
	g.held[g.nheld].reorder = reorder;
	g.nheld++;
}

/*
 * Flip one bit of the RoCE part of the IPv4/UDP packet p and clear the
 * UDP checksum.  Returns false if p is not a RoCE v2 IPv4 packet.
 */
static bool corrupt(uint8_t *p, size_t len)
{
	struct uroce_icrc_ip ip;
	size_t ihl, roce_len;
	uint8_t *roce;
	int tries;

	if (len < 20 || (p[0] >> 4) != 4 || p[9] != IPPROTO_UDP)
		return false;
	ihl = (size_t)(p[0] & 0xf) * 4;
	if (len < ihl + 8 + UROCE_BTH_LEN + UROCE_ICRC_LEN)
		return false;
	if (((p[ihl + 2] << 8) | p[ihl + 3]) != UROCE_UDP_PORT)
		return false;
	roce = p + ihl + 8;
	roce_len = len - ihl - 8;
	memset(&ip, 0, sizeof(ip));
	ip.family = AF_INET;
	memcpy(&ip.src.v4, p + 12, 4);
	memcpy(&ip.dst.v4, p + 16, 4);
	ip.sport = (uint16_t)((p[ihl] << 8) | p[ihl + 1]);
	ip.dport = UROCE_UDP_PORT;
	for (tries = 0; tries < 64; tries++) {
		size_t bit = rnd() % (roce_len * 8);

		roce[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		if (!uroce_icrc_check(&ip, roce, roce_len))
			break;
		/* the receiver could not tell: undo and draw again */
		roce[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		g.redrawn++;
	}
	p[ihl + 6] = 0;
	p[ihl + 7] = 0;
	return tries < 64;
}

/*
 * The phantom queue: p (an IPv4 packet) joins it; if it is ECN-capable and
 * the queue is above the threshold, mark it CE.  Returns whether p changed.
 */
static bool ce_mark(uint8_t *p, size_t len, uint64_t now)
{
	uint32_t sum = 0;
	size_t ihl, i;

	if (g.pq_ns)
		g.pq_bytes -= (double)(now - g.pq_ns) * g.ce_bps / 8e9;
	g.pq_ns = now;
	if (g.pq_bytes < 0)
		g.pq_bytes = 0;
	g.pq_bytes += (double)len;
	if (len < 20 || (p[0] >> 4) != 4 || !(p[1] & 3))
		return false;
	g.ect++;
	if ((p[1] & 3) == 3 || g.pq_bytes <= g.ce_k)
		return false;
	p[1] |= 3;
	ihl = (size_t)(p[0] & 0xf) * 4;
	p[10] = p[11] = 0;
	for (i = 0; i + 1 < ihl && i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	p[10] = (uint8_t)(~sum >> 8);
	p[11] = (uint8_t)~sum;
	g.marked++;
	return true;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg,
		     struct nfq_data *nfa, void *data)
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	unsigned char *payload;
	uint64_t now = now_ns();
	uint32_t id;
	int len;

	(void)msg;
	(void)data;
	if (!ph)
		return 0;
	id = ntohl(ph->packet_id);
	g.packets++;
	len = nfq_get_payload(nfa, &payload);

	if (g.ce_bps > 0 && len > 0 && (size_t)len <= sizeof(g.buf)) {
		memcpy(g.buf, payload, (size_t)len);
		if (ce_mark(g.buf, (size_t)len, now)) {
			nfq_set_verdict(qh, id, NF_ACCEPT, (uint32_t)len, g.buf);
			passed_one();
			return 0;
		}
	}
	if (g.corrupt > 0 && len > 0 && (size_t)len <= sizeof(g.buf) &&
	    rnd01() < g.corrupt) {
		memcpy(g.buf, payload, (size_t)len);
		if (corrupt(g.buf, (size_t)len)) {
			g.corrupted++;
			nfq_set_verdict(qh, id, NF_ACCEPT, (uint32_t)len, g.buf);
			passed_one();
			return 0;
		}
		g.not_roce++;
	}
	if (g.reorder > 0 && rnd01() < g.reorder) {
		g.reordered++;
		hold(id, now + REORDER_MAX_MS * 1000000ull, REORDER_GAP, true);
		return 0;
	}
	if (g.delay_ms > 0 || g.jitter_ms > 0) {
		double d = g.delay_ms + g.jitter_ms * (2 * rnd01() - 1);
		uint64_t due;

		if (d < 0)
			d = 0;
		due = now + (uint64_t)(d * 1e6);
		/* a link's delay varies, its order does not (unless
		 * --reorder-jitter): never leave before an earlier packet */
		if (!g.jitter_reorders && due < g.last_due)
			due = g.last_due;
		g.last_due = due;
		g.delayed++;
		hold(id, due, 0, false);
		return 0;
	}
	accept_pkt(id);
	passed_one();
	return 0;
}

static int write_file(const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	return rename(tmp, path);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: nfq_impair --queue N [--delay-ms D] [--jitter-ms J]\n"
		"                  [--reorder-jitter]\n"
		"                  [--reorder P] [--corrupt P] [--seed S]\n"
		"                  [--ce-mbps R [--ce-kbytes K]]\n"
		"                  [--ready FILE] [--stats FILE]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "queue", required_argument, NULL, 'q' },
		{ "delay-ms", required_argument, NULL, 'd' },
		{ "jitter-ms", required_argument, NULL, 'j' },
		{ "reorder", required_argument, NULL, 'r' },
		{ "corrupt", required_argument, NULL, 'c' },
		{ "reorder-jitter", no_argument, NULL, 'J' },
		{ "seed", required_argument, NULL, 's' },
		{ "ce-mbps", required_argument, NULL, 'm' },
		{ "ce-kbytes", required_argument, NULL, 'k' },
		{ "ready", required_argument, NULL, 'R' },
		{ "stats", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ready = NULL, *stats = NULL;
	static char rxbuf[PKT_MAX + 4096];
	struct nfq_handle *h;
	struct sigaction sa;
	char text[1024];
	int queue = -1, ch, fd;
	uint32_t flags;

	g.rng = 1;
	g.ce_k = 32 * 1024;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'q':
			queue = atoi(optarg);
			break;
		case 'd':
			g.delay_ms = atof(optarg);
			break;
		case 'j':
			g.jitter_ms = atof(optarg);
			break;
		case 'r':
			g.reorder = atof(optarg);
			break;
		case 'c':
			g.corrupt = atof(optarg);
			break;
		case 'J':
			g.jitter_reorders = true;
			break;
		case 's':
			g.rng = strtoull(optarg, NULL, 0) | 1;
			break;
		case 'm':
			g.ce_bps = atof(optarg) * 1e6;
			break;
		case 'k':
			g.ce_k = atof(optarg) * 1024;
			break;
		case 'R':
			ready = optarg;
			break;
		case 'S':
			stats = optarg;
			break;
		default:
			usage();
			return 2;
		}
	}
	if (queue < 0 || queue > 65535 || optind != argc) {
		usage();
		return 2;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	h = nfq_open();
	if (!h) {
		perror("nfq_impair: nfq_open");
		return 1;
	}
	g.qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
	if (!g.qh) {
		perror("nfq_impair: nfq_create_queue");
		return 1;
	}
	if (nfq_set_mode(g.qh, NFQNL_COPY_PACKET, 0xffff) < 0 ||
	    nfq_set_queue_maxlen(g.qh, QUEUE_MAXLEN) < 0) {
		perror("nfq_impair: queue setup");
		return 1;
	}
	/* a full queue lets packets pass rather than dropping them: loss
	 * is the iptables rule's business, not ours */
	flags = NFQA_CFG_F_FAIL_OPEN;
	nfq_set_queue_flags(g.qh, flags, flags);
	nfnl_rcvbufsiz(nfq_nfnlh(h), 16 << 20);
	fd = nfq_fd(h);
	if (ready && write_file(ready, "ready\n")) {
		perror("nfq_impair: --ready");
		return 1;
	}

	while (!stop) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ns(), next = UINT64_MAX;
		unsigned int i;
		int tmo = 100, n;

		release_due(now);
		for (i = 0; i < g.nheld; i++)
			if (g.held[i].due_ns < next)
				next = g.held[i].due_ns;
		if (next != UINT64_MAX)
			tmo = next <= now ? 0 :
					    (int)((next - now) / 1000000 + 1);
		n = poll(&pfd, 1, tmo);
		if (n <= 0)
			continue;
		for (;;) {
			ssize_t r = recv(fd, rxbuf, sizeof(rxbuf), MSG_DONTWAIT);

			if (r < 0) {
				if (errno == ENOBUFS) {
					g.enobufs++;
					continue;
				}
				break;
			}
			nfq_handle_packet(h, rxbuf, (int)r);
			release_due(now_ns());
		}
	}

	while (g.nheld)
		accept_pkt(g.held[--g.nheld].id);
	snprintf(text, sizeof(text),
		 "packets=%" PRIu64 " delayed=%" PRIu64 " reordered=%" PRIu64
		 " corrupted=%" PRIu64 " redrawn=%" PRIu64 " overflow=%" PRIu64
		 " not_roce=%" PRIu64 " enobufs=%" PRIu64 " ect=%" PRIu64
		 " marked=%" PRIu64 "\n",
		 g.packets, g.delayed, g.reordered, g.corrupted, g.redrawn,
		 g.overflow, g.not_roce, g.enobufs, g.ect, g.marked);
	fputs(text, stderr);
	if (stats && write_file(stats, text))
		perror("nfq_impair: --stats");
	nfq_destroy_queue(g.qh);
	nfq_close(h);
	return 0;
}
