// SPDX-License-Identifier: MIT
/*
 * hostile_local - a hostile peer on the same-host path (net/local.c).
 *
 *   hostile_local TARGET_BINARY
 *
 * Starts hostile_target (tests/hostile/hostile_target.c) on its own
 * loopback address and plays both ends of the shared-memory path at it:
 *
 * - as a sender, it connects to the target's ring name, takes the ring
 *   and writes into it what no uroce process would: slot lengths past the
 *   slot, empty and garbage packets, a WRITE the rkey does not allow, and
 *   at last a head index far beyond the ring.  Its hello gives an
 *   eventfd, and it sets want_room to garbage: the target must ring that
 *   eventfd once it takes packets and clear want_room, nothing more.
 *   The target must drop and count each (drop_local_bad, drop_truncated, drop_bad_hdr, a NAK),
 *   keep answering real requests (READs answered over UDP to our
 *   address), close the ring it can no longer trust, change no byte of
 *   its memory, and exit cleanly;
 * - as a receiver, it listens on the ring name of our own address and
 *   answers the target's connection with a memfd that is not sealed (we
 *   could shrink it under the target: SIGBUS): the target must refuse it
 *   and keep sending by UDP; then with a sealed one, which it takes, and
 *   whose tail we set far past its head: the target must count it
 *   (drop_local_bad) rather than write past what we consumed.
 * It also checks that the ring it was given is sealed (ftruncate fails).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "craft.h"
#include "target.h"
#include "uroce_local.h"

#define NQP	  4
#define FIRST_QPN 0x500
#define EPSN0	  0x100

static struct in_addr a_target, a_me;
static int s_me;
static uint32_t qpn0, epsn[NQP];
static uint64_t w_addr, ro_addr;
static uint32_t w_rkey, ro_rkey;
static struct lr_shared *ring;
static uint32_t head;
static int bell = -1;
static int room = -1; /* our eventfd, given in the hello */

static socklen_t ring_name(struct sockaddr_un *un, struct in_addr a,
			   uint32_t slot)
{
	char ip[INET_ADDRSTRLEN];
	int n;

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1,
		     "uroce/local/%u/%s/%u", (unsigned)getuid(), ip, slot);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void hello_of(struct lr_hello *h, struct in_addr a)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&h->addr;

	memset(h, 0, sizeof(*h));
	h->magic = LR_MAGIC;
	in->sin_family = AF_INET;
	in->sin_port = htons(UROCE_UDP_PORT);
	in->sin_addr = a;
}

/* ---- as a sender: the target's ring ---- */

static int ring_take(int *memfd_out)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct lr_answer ans;
	struct iovec iov = { .iov_base = &ans, .iov_len = sizeof(ans) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	struct sockaddr_un un;
	struct lr_hello h;
	struct pollfd p = { .events = POLLIN };
	socklen_t len = ring_name(&un, a_target, qpn0 >> 16);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0), fds[2];
	struct cmsghdr *c;

	if (fd < 0 || connect(fd, (struct sockaddr *)&un, len)) {
		perror("hostile_local: connect to the target's ring");
		exit(1);
	}
	hello_of(&h, a_me);
	{
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} hc;
		struct iovec hi = { .iov_base = &h, .iov_len = sizeof(h) };
		struct msghdr hm = { .msg_iov = &hi,
				     .msg_iovlen = 1,
				     .msg_control = hc.buf,
				     .msg_controllen = sizeof(hc.buf) };

		c = CMSG_FIRSTHDR(&hm);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &room, sizeof(int));
		if (sendmsg(fd, &hm, 0) != sizeof(h))
			exit(1);
	}
	p.fd = fd;
	if (poll(&p, 1, 5000) != 1 || recvmsg(fd, &msg, 0) != sizeof(ans) ||
	    !(c = CMSG_FIRSTHDR(&msg)) || c->cmsg_type != SCM_RIGHTS) {
		fprintf(stderr, "hostile_local: no ring from the target\n");
		exit(1);
	}
	memcpy(fds, CMSG_DATA(c), sizeof(fds));
	ring = mmap(NULL, sizeof(*ring), PROT_READ | PROT_WRITE, MAP_SHARED,
		    fds[0], 0);
	if (ring == MAP_FAILED)
		exit(1);
	bell = fds[1];
	head = atomic_load(&ring->head);
	*memfd_out = fds[0];
	return fd;
}

static void ring_raw(const void *p, uint32_t len, uint32_t claimed)
{
	struct lr_slot *s = &ring->slot[head & (LR_SLOTS - 1)];
	uint64_t one = 1;

	while (head - atomic_load(&ring->tail) >= LR_SLOTS)
		usleep(100);
	memcpy(s->data, p, len < LR_DATA ? len : LR_DATA);
	s->len = claimed;
	s->ip_id = 0;
	atomic_store(&ring->head, ++head);
	if (write(bell, &one, sizeof(one)) < 0)
		perror("hostile_local: doorbell");
}

static void ring_pkt(const struct craft *c)
{
	uint8_t p[CRAFT_MAX + UROCE_ICRC_LEN];
	size_t len = craft_build(c, p, a_me, a_target);

	ring_raw(p, (uint32_t)len, (uint32_t)len);
}

/* the ring is drained: the target read everything we wrote */
static bool drained(void)
{
	int i;

	for (i = 0; i < 500; i++) {
		if (atomic_load(&ring->tail) == head)
			return true;
		usleep(10000);
	}
	return false;
}

static size_t recv_resp(uint8_t *p, size_t max)
{
	struct pollfd pfd = { .fd = s_me, .events = POLLIN };
	ssize_t n;

	if (poll(&pfd, 1, 3000) != 1)
		return 0;
	n = recv(s_me, p, max, 0);
	return n > 0 ? (size_t)n : 0;
}

/* an 8-byte READ of W by QP i through the ring, answered by UDP */
static void probe(int i, const char *after)
{
	uint8_t r[CRAFT_MAX];
	struct craft c = { .op = UROCE_OP_RC_READ_REQUEST,
			   .qpn = qpn0 + (uint32_t)i,
			   .psn = epsn[i],
			   .ackreq = true,
			   .pad = 0,
			   .va = w_addr + 64,
			   .rkey = w_rkey,
			   .dmalen = 8 };
	size_t n;

	ring_pkt(&c);
	n = recv_resp(r, sizeof(r));
	check(n && bth_opcode(r) == UROCE_OP_RC_READ_RESPONSE_ONLY &&
		      bth_psn(r) == epsn[i],
	      "%s: the target answers a READ sent through its ring", after);
	epsn[i] = uroce_psn_add(epsn[i], 1);
}

/* ---- as a receiver: a ring offered to the target, not sealed ---- */

static int fake_listen;
/* phase 2: the ring offered is sealed and kept, for us to lie through */
static _Atomic int fake_sealed;
static struct lr_shared *_Atomic fake_ring;

static void *fake_receiver(void *arg)
{
	(void)arg;
	for (;;) {
		union {
			char buf[CMSG_SPACE(2 * sizeof(int))];
			struct cmsghdr align;
		} ctl;
		struct lr_answer ans = { .magic = LR_MAGIC,
					 .alone = 1,
					 .size = sizeof(struct lr_shared) };
		struct iovec iov = { .iov_base = &ans, .iov_len = sizeof(ans) };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = ctl.buf,
				      .msg_controllen = sizeof(ctl.buf) };
		struct lr_hello h;
		struct cmsghdr *c;
		int fd = accept(fake_listen, NULL, NULL), fds[2];

		if (fd < 0)
			return NULL;
		bool sealed = atomic_load(&fake_sealed);

		fds[0] = memfd_create(sealed ? "sealed" : "not-sealed",
				      sealed ? MFD_ALLOW_SEALING : 0);
		fds[1] = eventfd(0, 0);
		if (recv(fd, &h, sizeof(h), 0) == sizeof(h) && fds[0] >= 0 &&
		    !ftruncate(fds[0], sizeof(struct lr_shared)) &&
		    (!sealed || !fcntl(fds[0], F_ADD_SEALS,
				       F_SEAL_SHRINK | F_SEAL_SEAL))) {
			if (sealed) {
				void *m = mmap(NULL, sizeof(struct lr_shared),
					       PROT_READ | PROT_WRITE,
					       MAP_SHARED, fds[0], 0);

				if (m != MAP_FAILED)
					atomic_store(&fake_ring, m);
			}
			c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(fds));
			memcpy(CMSG_DATA(c), fds, sizeof(fds));
			if (sendmsg(fd, &msg, MSG_NOSIGNAL) < 0)
				perror("hostile_local: answer");
		}
		close(fds[0]);
		close(fds[1]);
		/* (kept open: the target sees no close, only a bad ring) */
	}
}

int main(int argc, char **argv)
{
	static struct target tg;
	int i, conn, memfd;
	char addr[2][32], line[4096];
	unsigned int net = (unsigned int)getpid() % 200 + 20;
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(UROCE_UDP_PORT) };
	struct sockaddr_un un;
	pthread_t th;
	FILE *out;

	if (argc != 2) {
		fprintf(stderr, "usage: hostile_local TARGET_BINARY\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < 2; i++)
		snprintf(addr[i], sizeof(addr[i]), "127.79.%u.%d", net, i + 1);
	inet_pton(AF_INET, addr[0], &a_target);
	inet_pton(AF_INET, addr[1], &a_me);
	sin.sin_addr = a_me;
	s_me = socket(AF_INET, SOCK_DGRAM, 0);
	room = eventfd(0, EFD_NONBLOCK);
	if (s_me < 0 || room < 0 ||
	    bind(s_me, (struct sockaddr *)&sin, sizeof(sin))) {
		perror("hostile_local: bind");
		return 1;
	}
	/* our ring name, for the target's answers */
	fake_listen = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (bind(fake_listen, (struct sockaddr *)&un, ring_name(&un, a_me, 0)) ||
	    listen(fake_listen, 8) ||
	    pthread_create(&th, NULL, fake_receiver, NULL)) {
		perror("hostile_local: listen");
		return 1;
	}

	if (target_start(&tg, argv[1], addr[0], addr[1], FIRST_QPN, NQP))
		return 1;
	out = tg.out;
	if (!fgets(line, sizeof(line), out) || strncmp(line, "info ", 5)) {
		fprintf(stderr, "hostile_local: no info line from the target\n");
		return 1;
	}
	qpn0 = (uint32_t)get_num(line, "qpn=");
	w_addr = get_u64(line, "w_addr=");
	w_rkey = (uint32_t)get_u64(line, "w_rkey=");
	ro_addr = get_u64(line, "ro_addr=");
	ro_rkey = (uint32_t)get_u64(line, "ro_rkey=");
	if (!fgets(line, sizeof(line), out)) /* the xrc line */
		return 1;
	for (i = 0; i < NQP; i++)
		epsn[i] = EPSN0;

	conn = ring_take(&memfd);
	check(ftruncate(memfd, 0) && errno == EPERM,
	      "the ring the target gave us cannot be shrunk (sealed)");
	probe(0, "first packet");

	/* slot lengths past the slot: dropped, counted, ring kept */
	{
		uint8_t junk[64];

		memset(junk, 0xa5, sizeof(junk));
		junk[0] = 0x1e;			 /* an undefined opcode */
		junk[5] = (uint8_t)(qpn0 >> 16); /* to the target's QP 0 */
		junk[6] = (uint8_t)(qpn0 >> 8);
		junk[7] = (uint8_t)qpn0;
		ring_raw(junk, sizeof(junk), 0xffffffffu);
		ring_raw(junk, sizeof(junk), LR_DATA + 1);
		ring_raw(junk, 0, 0); /* empty */
		ring_raw(junk, 5, 5); /* shorter than a BTH */
		ring_raw(junk, sizeof(junk), sizeof(junk)); /* garbage */
		check(drained(), "the target read the bad slots");
		probe(1, "after bad slot lengths and garbage");
	}
	/* a WRITE to a read-only MR through the ring: NAKed as from the
	 * wire, nothing written */
	{
		static const uint8_t evil[16] = { 0xee };
		struct craft c = { .op = UROCE_OP_RC_WRITE_ONLY,
				   .qpn = qpn0 + 2,
				   .psn = epsn[2],
				   .ackreq = true,
				   .pad = -1,
				   .va = ro_addr,
				   .rkey = ro_rkey,
				   .dmalen = 16,
				   .payload = evil,
				   .paylen = 16 };
		uint8_t r[CRAFT_MAX];
		size_t n;

		ring_pkt(&c);
		n = recv_resp(r, sizeof(r));
		check(n >= UROCE_BTH_LEN + UROCE_AETH_LEN &&
			      aeth_syn(r + UROCE_BTH_LEN) ==
				      (UROCE_AETH_NAK | UROCE_NAK_REM_ACCESS),
		      "WRITE to a read-only MR through the ring: remote "
		      "access NAK");
	}
	/* want_room (ours to write) set to garbage: the target takes the
	 * next packet, clears it and rings the eventfd of our hello, once */
	{
		uint64_t v = 0;

		atomic_store(&ring->want_room, 0xdeadbeefu);
		probe(0, "want_room set");
		struct pollfd pr = { .fd = room, .events = POLLIN };
		/* (the target clears want_room before it rings) */
		bool rung = poll(&pr, 1, 5000) == 1;
		uint32_t w = atomic_load(&ring->want_room);
		ssize_t n = read(room, &v, sizeof(v));

		check(rung && w == 0 && n == sizeof(v) && v == 1,
		      "want_room: the target cleared it (%#x) and rang our "
		      "eventfd once (%zd: %llu)",
		      w, n, (unsigned long long)v);
	}
	/* a head index no ring can have: the target closes the ring */
	{
		struct pollfd p = { .fd = conn, .events = POLLIN | POLLRDHUP };
		uint64_t one = 1;
		char b;

		atomic_store(&ring->head, head + 100000);
		if (write(bell, &one, sizeof(one)) < 0)
			perror("hostile_local: doorbell");
		check(poll(&p, 1, 5000) == 1 && recv(conn, &b, 1, 0) <= 0,
		      "a head 100000 slots ahead: the target closed the ring");
	}

	/* ---- as a receiver: a sealed ring, then a tail that lies ---- */
	{
		struct lr_shared *fr = NULL;
		uint8_t r[CRAFT_MAX];
		int k;

		close(conn);
		conn = ring_take(&memfd); /* a new ring to send on */
		atomic_store(&fake_sealed, 1);
		/* the target asks again for a ring to us a second after the
		 * refusal: until then its answers come by UDP */
		for (k = 0; k < 5000 && !fr; k++) {
			struct craft c = { .op = UROCE_OP_RC_READ_REQUEST,
					   .qpn = qpn0 + 3,
					   .psn = epsn[3],
					   .ackreq = true,
					   .pad = 0,
					   .va = w_addr + 64,
					   .rkey = w_rkey,
					   .dmalen = 8 };
			struct pollfd pfd = { .fd = s_me, .events = POLLIN };

			ring_pkt(&c);
			epsn[3] = uroce_psn_add(epsn[3], 1);
			/* (an answer by UDP, or none: it went to a ring) */
			if (poll(&pfd, 1, 200) == 1)
				(void)!recv(s_me, r, sizeof(r), 0);
			fr = atomic_load(&fake_ring);
			if (!fr)
				usleep(1000); /* (bounded: 5000 x) */
		}
		check(fr != NULL, "the target took the sealed ring we offered");
		for (k = 0; fr && k < 300 && !atomic_load(&fr->head); k++)
			usleep(10000);
		check(fr && atomic_load(&fr->head) &&
			      bth_opcode(fr->slot[0].data) ==
				      UROCE_OP_RC_READ_RESPONSE_ONLY,
		      "the target answered a READ through our ring");
		if (fr) {
			/* a tail far past the head: the target must not
			 * believe the ring has room */
			struct craft c = { .op = UROCE_OP_RC_READ_REQUEST,
					   .qpn = qpn0 + 3,
					   .psn = epsn[3],
					   .ackreq = true,
					   .pad = 0,
					   .va = w_addr + 64,
					   .rkey = w_rkey,
					   .dmalen = 8 };

			atomic_store(&fr->tail, atomic_load(&fr->head) + 5000);
			ring_pkt(&c);
			check(drained(), "the target read our READ after the "
					 "tail lie");
		}
	}

	/* ---- what the target saw ---- */
	target_stop(&tg);
	while (fgets(line, sizeof(line), out)) {
		if (!strncmp(line, "region ", 7)) {
			line[strcspn(line, "\n")] = 0;
			check(get_num(line, "changed=") == 0, "%s (expected 0)",
			      line);
		}
	}
	target_wait(&tg);
	{
		static const struct want_counter want[] = {
			{ " rx_local_pkts=", 6, 1000 },
			{ " drop_local_bad=", 4, 1000 },
			{ " drop_truncated=", 2, 1000 },
			{ " drop_bad_hdr=", 1, 1000 },
			{ " tx_nak_access=", 1, 1000 },
			/* the unsealed ring we offered was refused, the
			 * sealed one taken */
			{ " local_connects=", 1, 1000 },
			{ " local_room_bells=", 1, 1000 },
		};

		return target_verdict(&tg, "hostile_local", want,
				      sizeof(want) / sizeof(want[0]));
	}
}
