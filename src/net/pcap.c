// SPDX-License-Identifier: MIT
/*
 * The wire tap: every datagram the socket sends or receives passes here.
 * It is counted by opcode class, and with UROCE_PCAP=<file> written to a
 * pcap file as a whole Ethernet frame, so Wireshark dissects it as RoCE v2
 * (InfiniBand over UDP port 4791).
 *
 * The headers are rebuilt, since a UDP socket never sees them: fake
 * locally administered MACs (02:00 and the low 4 address bytes), then IP
 * and UDP as Linux puts them on our packets.  IPv4: ID 0, DF, TTL 64 (an
 * unconnected socket with IP_PMTUDISC_DO; the ICRC covers ID and DF, see
 * docs/transport.md "The ICRC and the IPv4 identification"); a received
 * packet's real ID is unknown to us
 * and written as 0, which is right for packets from uroce peers (and any
 * Linux UDP socket) but not for peers that vary it, such as rdma_rxe.
 * The UDP checksum is computed, as the kernel does for our socket.
 *
 * Settings:
 *	UROCE_PCAP=<file>	capture; "%p" in the name becomes the pid
 *	UROCE_PCAP_MAX=<n>[k|M|G]  rotate at this file size (default 1G):
 *				the file moves to <file>.1 (replacing an
 *				older one) and a new file starts, so at most
 *				twice this much disk is used
 *
 * The pcap format is simple enough to write here (no libpcap in the
 * library's dependencies): a 24-byte file header, then a 16-byte record
 * header before each frame.  Nanosecond timestamps.  Records are buffered
 * and written when the buffer fills, after a second, and at exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dev.h"

#define PCAP_MAGIC_NS	  0xa1b23c4du
#define LINKTYPE_ETHERNET 1
#define SNAPLEN		  65535
#define ETH_LEN		  14
#define IP4_LEN		  20
#define IP6_LEN		  40
#define UDP_HDR_LEN	  8
#define FRAME_HDR_MAX	  (ETH_LEN + IP6_LEN + UDP_HDR_LEN)
#define BUF_SIZE	  (256 << 10)
#define DEFAULT_MAX	  (1ull << 30)
#define MIN_MAX		  (64ull << 10)

static struct {
	pthread_mutex_t lock;
	int fd; /* -1: not capturing */
	char path[PATH_MAX];
	uint64_t max;	    /* rotate at this file size */
	uint64_t file_size; /* written + buffered */
	uint64_t last_flush_ns;
	size_t used;
	uint8_t *buf;
	_Atomic bool on; /* the hooks' unlocked test */
} cap = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* ---- counting by opcode class ---- */

static enum uroce_pkt_class class_of(uint8_t opcode)
{
	uint32_t m = uroce_opcode[opcode].mask;

	if (!uroce_opcode[opcode].name)
		return UROCE_CLASS_OTHER;
	if (m & UROCE_M_CNP)
		return UROCE_CLASS_CNP;
	if (m & UROCE_M_ACK || (m & UROCE_M_ATOMIC && !(m & UROCE_M_REQ)))
		return UROCE_CLASS_ACK;
	if (m & UROCE_M_READ)
		return m & UROCE_M_REQ ? UROCE_CLASS_READ_REQ :
					 UROCE_CLASS_READ_RESP;
	if (m & UROCE_M_ATOMIC)
		return UROCE_CLASS_ATOMIC;
	if (m & UROCE_M_WRITE)
		return UROCE_CLASS_WRITE;
	if (m & UROCE_M_SEND)
		return UROCE_CLASS_SEND;
	return UROCE_CLASS_OTHER;
}

static void count_class(struct uroce_dev *dev, enum uroce_counter base,
			uint8_t opcode, size_t len)
{
	enum uroce_counter c = base + 2 * class_of(opcode);

	uroce_count(dev, c, 1);
	uroce_count(dev, c + 1, len);
}

/* ---- frame headers ---- */

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void wr32(uint8_t *p, uint32_t v)
{
	wr16(p, (uint16_t)(v >> 16));
	wr16(p + 2, (uint16_t)v);
}

static uint32_t sum16(uint32_t sum, const uint8_t *p, size_t len, bool *odd)
{
	size_t i = 0;

	/* a byte left over from the previous piece pairs with our first */
	if (*odd && len) {
		sum += p[0];
		i = 1;
		*odd = false;
	}
	for (; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (i < len) {
		sum += (uint32_t)p[i] << 8;
		*odd = true;
	}
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static const uint8_t *addr_bytes(const struct sockaddr_storage *ss, size_t *len)
{
	if (ss->ss_family == AF_INET) {
		*len = 4;
		return (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
	}
	*len = 16;
	return (const uint8_t *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	return ntohs(ss->ss_family == AF_INET ?
			     ((const struct sockaddr_in *)ss)->sin_port :
			     ((const struct sockaddr_in6 *)ss)->sin6_port);
}

static void fake_mac(uint8_t *mac, const struct sockaddr_storage *ss)
{
	size_t alen;
	const uint8_t *a = addr_bytes(ss, &alen);

	mac[0] = 0x02; /* locally administered, unicast */
	mac[1] = 0x00;
	memcpy(mac + 2, a + alen - 4, 4);
}

size_t uroce_ip_hdr(uint8_t *ip, const struct sockaddr_storage *src,
		    const struct sockaddr_storage *dst, uint16_t udp_len,
		    struct uroce_ipopt ipo)
{
	uint8_t ttl = ipo.ttl ? ipo.ttl : 64;
	const uint8_t *sa, *da;
	bool odd = false;
	size_t alen;

	sa = addr_bytes(src, &alen);
	da = addr_bytes(dst, &alen);
	if (src->ss_family == AF_INET) {
		memset(ip, 0, IP4_LEN);
		ip[0] = 0x45;
		ip[1] = ipo.tos;
		wr16(ip + 2, (uint16_t)(IP4_LEN + udp_len));
		wr16(ip + 4, 0);      /* identification */
		wr16(ip + 6, 0x4000); /* DF */
		ip[8] = ttl;
		ip[9] = IPPROTO_UDP;
		memcpy(ip + 12, sa, 4);
		memcpy(ip + 16, da, 4);
		wr16(ip + 10, fold(sum16(0, ip, IP4_LEN, &odd)));
		return IP4_LEN;
	}
	memset(ip, 0, IP6_LEN);
	wr32(ip, 0x60000000u | (uint32_t)ipo.tos << 20);
	wr16(ip + 4, udp_len);
	ip[6] = IPPROTO_UDP;
	ip[7] = ttl;
	memcpy(ip + 8, sa, 16);
	memcpy(ip + 24, da, 16);
	return IP6_LEN;
}

/*
 * Ethernet + IP + UDP in front of a RoCE datagram of roce_len bytes whose
 * pieces are iov[0..n).  Returns the header length.
 */
static size_t build_frame_hdr(uint8_t *h, const struct sockaddr_storage *src,
			      const struct sockaddr_storage *dst,
			      struct uroce_ipopt ipo, const struct iovec *iov,
			      int n, size_t roce_len)
{
	uint16_t udp_len = (uint16_t)(UDP_HDR_LEN + roce_len);
	const uint8_t *sa, *da;
	size_t alen, iplen;
	uint8_t *ip = h + ETH_LEN, *udp;
	uint32_t sum = 0;
	bool odd = false;
	uint16_t csum;
	int i;

	fake_mac(h, dst);
	fake_mac(h + 6, src);
	sa = addr_bytes(src, &alen);
	da = addr_bytes(dst, &alen);
	wr16(h + 12, src->ss_family == AF_INET ? 0x0800 : 0x86dd);
	iplen = uroce_ip_hdr(ip, src, dst, udp_len, ipo);
	udp = ip + iplen;
	wr16(udp, port_of(src));
	wr16(udp + 2, port_of(dst));
	wr16(udp + 4, udp_len);
	wr16(udp + 6, 0);

	/* UDP checksum over the pseudo header, the UDP header and data */
	odd = false;
	sum = sum16(0, sa, alen, &odd);
	sum = sum16(sum, da, alen, &odd);
	sum += IPPROTO_UDP + udp_len;
	sum = sum16(sum, udp, UDP_HDR_LEN, &odd);
	for (i = 0; i < n; i++)
		sum = sum16(sum, iov[i].iov_base, iov[i].iov_len, &odd);
	csum = fold(sum);
	wr16(udp + 6, csum ? csum : 0xffff);
	return ETH_LEN + iplen + UDP_HDR_LEN;
}

/* ---- the file ---- */

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void stop_capture(const char *why)
{
	uroce_log(UROCE_LOG_ERROR, "capture to %s stopped: %s", cap.path, why);
	close(cap.fd);
	cap.fd = -1;
	atomic_store_explicit(&cap.on, false, memory_order_relaxed);
}

/* cap.lock held */
static void flush_buf(void)
{
	uroce_assert_held(&cap.lock);
	if (cap.fd >= 0 && cap.used && write_all(cap.fd, cap.buf, cap.used))
		stop_capture(strerror(errno));
	cap.used = 0;
	cap.last_flush_ns = uroce_now_ns();
}

/* Start a new file at cap.path with its header; cap.lock held or single
 * threaded.  Returns 0 or -errno. */
static int start_file(void)
{
	uint8_t h[24];
	int fd;

	fd = open(cap.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	memset(h, 0, sizeof(h));
	/* host order, as the magic tells the reader */
	{
		uint32_t magic = PCAP_MAGIC_NS, snap = SNAPLEN,
			 link = LINKTYPE_ETHERNET;
		uint16_t major = 2, minor = 4;

		memcpy(h, &magic, 4);
		memcpy(h + 4, &major, 2);
		memcpy(h + 6, &minor, 2);
		memcpy(h + 16, &snap, 4);
		memcpy(h + 20, &link, 4);
	}
	if (write_all(fd, h, sizeof(h))) {
		int err = -errno;

		close(fd);
		return err;
	}
	cap.fd = fd;
	cap.file_size = sizeof(h);
	return 0;
}

/* cap.lock held */
static void rotate(void)
{
	char old[PATH_MAX + 3];
	int err;

	uroce_assert_held(&cap.lock);
	flush_buf();
	if (cap.fd < 0)
		return;
	close(cap.fd);
	cap.fd = -1;
	snprintf(old, sizeof(old), "%s.1", cap.path);
	if (rename(cap.path, old))
		uroce_log(UROCE_LOG_WARN, "capture: cannot rename %s to %s: %s",
			  cap.path, old, strerror(errno));
	err = start_file();
	if (err) {
		uroce_log(UROCE_LOG_ERROR, "capture to %s stopped: %s",
			  cap.path, strerror(-err));
		atomic_store_explicit(&cap.on, false, memory_order_relaxed);
	} else
		uroce_log(UROCE_LOG_INFO,
			  "capture: %s full, older packets in %s", cap.path,
			  old);
}

static void capture(const struct sockaddr_storage *src,
		    const struct sockaddr_storage *dst, struct uroce_ipopt ipo,
		    const struct iovec *iov, int n, size_t roce_len,
		    uint16_t ip_id)
{
	uint8_t rec[16 + FRAME_HDR_MAX];
	uint32_t caplen, v;
	struct timespec ts;
	size_t hlen, need;
	int i;

	if (src->ss_family != dst->ss_family)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	hlen = build_frame_hdr(rec + 16, src, dst, ipo, iov, n, roce_len);
	if (ip_id && src->ss_family == AF_INET) {
		/* the k-th datagram of a GSO send: ID k, checksum redone */
		uint8_t *ip = rec + 16 + ETH_LEN;
		bool odd = false;

		wr16(ip + 4, ip_id);
		wr16(ip + 10, 0);
		wr16(ip + 10, fold(sum16(0, ip, IP4_LEN, &odd)));
	}
	caplen = (uint32_t)(hlen + roce_len);
	v = (uint32_t)ts.tv_sec;
	memcpy(rec, &v, 4);
	v = (uint32_t)ts.tv_nsec;
	memcpy(rec + 4, &v, 4);
	memcpy(rec + 8, &caplen, 4);
	memcpy(rec + 12, &caplen, 4);
	need = 16 + caplen;

	pthread_mutex_lock(&cap.lock);
	if (cap.fd < 0)
		goto out;
	if (cap.file_size + need > cap.max && cap.file_size > 24)
		rotate();
	if (cap.used + need > BUF_SIZE ||
	    uroce_now_ns() - cap.last_flush_ns > 1000000000ull)
		flush_buf();
	if (cap.fd < 0 || need > BUF_SIZE)
		goto out;
	memcpy(cap.buf + cap.used, rec, 16 + hlen);
	cap.used += 16 + hlen;
	for (i = 0; i < n; i++) {
		memcpy(cap.buf + cap.used, iov[i].iov_base, iov[i].iov_len);
		cap.used += iov[i].iov_len;
	}
	cap.file_size += need;
out:
	pthread_mutex_unlock(&cap.lock);
}

__attribute__((destructor)) static void pcap_close_at_exit(void)
{
	pthread_mutex_lock(&cap.lock);
	if (cap.fd >= 0) {
		flush_buf();
		if (cap.fd >= 0)
			close(cap.fd);
		cap.fd = -1;
		atomic_store_explicit(&cap.on, false, memory_order_relaxed);
	}
	pthread_mutex_unlock(&cap.lock);
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		break;
	default:
		break;
	}
	return v;
}

/* The file name, with %p replaced by the pid and %% by %. */
static int expand_path(const char *tmpl, char *out, size_t len)
{
	size_t n = 0;

	for (; *tmpl; tmpl++) {
		int w;

		if (tmpl[0] == '%' && tmpl[1] == 'p') {
			w = snprintf(out + n, len - n, "%d", (int)getpid());
			tmpl++;
		} else if (tmpl[0] == '%' && tmpl[1] == '%') {
			w = snprintf(out + n, len - n, "%%");
			tmpl++;
		} else {
			w = snprintf(out + n, len - n, "%c", *tmpl);
		}
		if (w < 0 || (size_t)w >= len - n)
			return -ENAMETOOLONG;
		n += (size_t)w;
	}
	return 0;
}

void uroce_pcap_open(struct uroce_dev *dev)
{
	const char *env = uroce_config()->pcap;
	const char *max = uroce_config()->pcap_max;
	int err;

	if (!env || !*env || atomic_load(&cap.on))
		return;
	err = expand_path(env, cap.path, sizeof(cap.path));
	cap.max = max && *max ? parse_size(max) : DEFAULT_MAX;
	if (cap.max < MIN_MAX)
		cap.max = MIN_MAX;
	cap.buf = malloc(BUF_SIZE);
	if (!err && !cap.buf)
		err = -ENOMEM;
	if (!err)
		err = start_file();
	if (err) {
		fprintf(stderr, "uroce: UROCE_PCAP=%s: cannot capture: %s\n",
			env, strerror(-err));
		free(cap.buf);
		cap.buf = NULL;
		cap.path[0] = '\0';
		return;
	}
	cap.last_flush_ns = uroce_now_ns();
	atomic_store(&cap.on, true);
	fprintf(stderr, "uroce: capturing RoCE packets to %s (UROCE_PCAP)\n",
		cap.path);
}

const char *uroce_pcap_path(void)
{
	return atomic_load(&cap.on) ? cap.path : "";
}

/* ---- the hooks ---- */

void uroce_tap_tx(struct uroce_dev *dev, const struct sockaddr_storage *dst,
		  struct uroce_ipopt ip, const struct iovec *iov, int iovcnt,
		  uint16_t ip_id)
{
	size_t len = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (!iovcnt || !iov[0].iov_len)
		return;
	count_class(dev, UROCE_CNT_TX_SEND_PKTS,
		    *(const uint8_t *)iov[0].iov_base, len);
	if (atomic_load_explicit(&cap.on, memory_order_relaxed))
		capture(&dev->net.local, dst, ip, iov, iovcnt, len, ip_id);
}

void uroce_tap_rx(struct uroce_dev *dev, const uint8_t *buf, size_t len,
		  const struct sockaddr_storage *src,
		  const struct sockaddr_storage *dst, uint16_t ip_id)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	if (!len)
		return;
	count_class(dev, UROCE_CNT_RX_SEND_PKTS, buf[0], len);
	if (atomic_load_explicit(&cap.on, memory_order_relaxed))
		capture(src, dst, dev->net.rx_ip, &iov, 1, len, ip_id);
}
