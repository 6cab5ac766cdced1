// SPDX-License-Identifier: MIT
/*
 * The shared device: any number of processes of one user use one IP
 * address (UDP 4791) at once, as processes share a RoCE NIC.
 * docs/shared.md has the why; in short:
 *
 * - every member binds its own UDP socket to (address, 4791) with
 *   SO_REUSEPORT; the group's classic-BPF program (no capability needed)
 *   reads the owner slot from the BTH destination QPN (bits 23..16) and
 *   returns the index of that member's socket in the kernel's reuseport
 *   array, so a datagram reaches its QP's process directly;
 * - the registry file (include/uroce_shm.h) hands out slots, keeps each
 *   slot's QPN counter across owners, mirrors the kernel's array order
 *   (append at bind; at close the last socket moves into the hole) and
 *   holds the CM listen table;
 * - what reaches the wrong member (QP1 MADs, which are steered by
 *   content; datagrams during a membership change) is forwarded to the
 *   owner over its abstract AF_UNIX datagram socket, or dropped and
 *   counted if no member owns it;
 * - members watch each other with pidfds: a dead member is taken out of
 *   the registry and the program by the first survivor that wakes, and
 *   probes (a private opcode the program answers with the index the
 *   probe names) let every member check where the kernel put it.
 *
 * Code: here the registry and the membership; share_rx.c what the
 * receive path asks (steering, forwarded packets, a member's death).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "share.h"
#include "uroce_share_gc.h"
#include "uroce_shm.h"

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

/* the group the device is in now, for the exit below */
static struct uroce_share *current;

/* ---- the registry ---- */

/*
 * A listen entry is changed under the registry lock and read without it
 * by the receive path (gsi_owner): sid is stored last with release and
 * loaded first with acquire, so a reader that sees a sid sees its slot.
 */
static void listen_set(struct uroce_share_listen *e, uint32_t slot, uint64_t sid)
{
	e->idle = 0;
	__atomic_store_n(&e->slot, slot, __ATOMIC_RELAXED);
	__atomic_store_n(&e->sid, sid, __ATOMIC_RELEASE);
}

static void listen_clear(struct uroce_share_listen *e)
{
	__atomic_store_n(&e->sid, 0, __ATOMIC_RELEASE);
}

int share_lock_seg(struct uroce_share *sh)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };

	pthread_mutex_lock(&sh->mu);
	while (fcntl(sh->fd, F_OFD_SETLKW, &fl))
		if (errno != EINTR) {
			pthread_mutex_unlock(&sh->mu);
			return -errno;
		}
	return 0;
}

void share_unlock_seg(struct uroce_share *sh)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_len = 1 };

	fcntl(sh->fd, F_OFD_SETLK, &fl);
	pthread_mutex_unlock(&sh->mu);
}

static int pidfd_of(int pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* whether the member in slot s is still running (a zombie is not: its
 * sockets are closed before its pidfd turns readable) */
static bool member_alive(const struct uroce_share_slot *m)
{
	struct pollfd p = { .events = POLLIN };
	bool alive;

	if (m->pid <= 0 || uroce_proc_start_time(m->pid) != m->start_time)
		return false;
	p.fd = pidfd_of(m->pid);
	if (p.fd < 0)
		return errno != ESRCH;
	alive = poll(&p, 1, 0) == 0;
	close(p.fd);
	return alive;
}

/* the kernel's rule for a closed socket: the last one moves into its
 * place (net/core/sock_reuseport.c, __reuseport_detach_sock) */
static void remove_member(struct uroce_share_seg *seg, uint32_t s)
{
	uint32_t i = seg->slot[s].index, last = seg->nmembers - 1, k;

	if (seg->nmembers && i <= last && seg->order[i] == s) {
		seg->order[i] = seg->order[last];
		seg->slot[seg->order[i]].index = i;
		seg->nmembers--;
	}
	__atomic_store_n(&seg->slot[s].pid, 0, __ATOMIC_RELEASE);
	seg->slot[s].owner = 0;
	/* the member's further QPN ranges go with it */
	for (k = 1; k < UROCE_SHARE_SLOTS; k++)
		if (seg->slot[k].owner == s) {
			__atomic_store_n(&seg->slot[k].pid, 0, __ATOMIC_RELEASE);
			seg->slot[k].owner = 0;
		}
	for (k = 0; k < UROCE_SHARE_LISTENS; k++)
		if (seg->listen[k].sid && seg->listen[k].slot == s)
			listen_clear(&seg->listen[k]);
	share_seg_changed(seg);
}

/* takes dead members out; returns how many. Locked. */
int share_reap(struct uroce_share_seg *seg, uint32_t self)
{
	uint32_t s;
	int n = 0;

	for (s = 1; s < UROCE_SHARE_SLOTS; s++) {
		if (s == self || !seg->slot[s].pid ||
		    member_alive(&seg->slot[s]))
			continue;
		remove_member(seg, s);
		n++;
	}
	return n;
}

#define PROG_MAX 4096 /* BPF_MAXINSNS */

#define STMT(code, k)	      ((struct sock_filter)BPF_STMT(code, k))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP(code, k, jt, jf))

/*
 * While `without` leaves, the index to send the socket at index i's
 * datagrams to: its own, but for the last socket, which the kernel
 * moves into the leaver's place at the close.  Its index is out of range
 * after the close, and its new one is the leaver's before it, so until
 * the survivors attach the new order's program its datagrams go to a
 * member whose index the close does not change (stand_in), which
 * forwards them.  Without that they would be handed out by flow hash,
 * possibly to another member in the middle of leaving, whose socket
 * closes with them (a UC or UD datagram lost for good).
 */
static uint32_t prog_index(const struct uroce_share_seg *seg, uint32_t i,
			   uint32_t stand_in)
{
	return stand_in != UINT32_MAX && i == seg->nmembers - 1 ? stand_in : i;
}

/* A = a slot: the index of its member's socket; falls through if none */
static unsigned short prog_members(struct sock_filter *f, unsigned short k,
				   const struct uroce_share_seg *seg,
				   uint32_t without, uint32_t stand_in)
{
	uint32_t i;

	for (i = 0; i < seg->nmembers; i++) {
		if (seg->order[i] == without)
			continue;
		f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, seg->order[i], 0, 1);
		f[k++] = STMT(BPF_RET | BPF_K, prog_index(seg, i, stand_in));
	}
	return k;
}

/*
 * QP1 (A = 0, the QPN's top byte): a CM MAD goes to the member whose CM
 * it is for, as share_rx.c's gsi_slot finds it, so that no member has
 * to forward it: a REQ or SIDR_REQ by its service ID in the listen
 * table, any other MAD by the top byte of the comm or request ID our
 * side chose (its slot).  Every member's MADs share one 4-tuple (the
 * address's, port 4791), so the kernel's hash would hand all of them to
 * one member, which then forwards each over a queue of
 * net.unix.max_dgram_qlen (10) datagrams: a burst of connects lost most
 * of them there (docs/scale.md, "Many processes").  Jumps to fallback
 * for anything else.  Returns the next instruction.
 */
static unsigned short prog_gsi(struct sock_filter *f, unsigned short k,
			       const struct uroce_share_seg *seg,
			       uint32_t without, uint32_t stand_in,
			       unsigned short *fb, unsigned int *nfb)
{
	unsigned short by_id[2];
	uint32_t n, s;

#define FALLBACK() \
	do { \
		fb[(*nfb)++] = k; \
		f[k++] = STMT(BPF_JMP | BPF_JA, 0); \
	} while (0)

	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
	FALLBACK();
	f[k++] = STMT(BPF_LD | BPF_H | BPF_ABS, 6);
	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 1, 0);
	FALLBACK();
	f[k++] = STMT(BPF_LD | BPF_W | BPF_LEN, 0);
	f[k++] = JUMP(BPF_JMP | BPF_JGE | BPF_K, MAD_OFF + MAD_DATA + 16, 1, 0);
	FALLBACK();
	f[k++] = STMT(BPF_LD | BPF_B | BPF_ABS, MAD_OFF + 1);
	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, CM_CLASS, 1, 0);
	FALLBACK();
	f[k++] = STMT(BPF_LD | BPF_H | BPF_ABS, MAD_OFF + 16);
	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, CM_REQ, 6, 0);
	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, CM_SIDR_REQ, 5, 0);
	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, CM_SIDR_REP, 0, 2);
	f[k++] = STMT(BPF_LD | BPF_B | BPF_ABS,
		      MAD_OFF + MAD_DATA); /* request ID */
	by_id[0] = k;
	f[k++] = STMT(BPF_JMP | BPF_JA, 0);
	f[k++] = STMT(BPF_LD | BPF_B | BPF_ABS,
		      MAD_OFF + MAD_DATA + 4); /* remote ID */
	by_id[1] = k;
	f[k++] = STMT(BPF_JMP | BPF_JA, 0);
	/* a request: its service ID (an rdma_cm one: the high word 0) */
	f[k++] = STMT(BPF_LD | BPF_W | BPF_ABS, MAD_OFF + MAD_DATA + 8);
	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
	FALLBACK();
	f[k++] = STMT(BPF_LD | BPF_W | BPF_ABS, MAD_OFF + MAD_DATA + 12);
	for (n = 0; n < UROCE_SHARE_LISTENS; n++) {
		const struct uroce_share_listen *e = &seg->listen[n];
		uint64_t sid = __atomic_load_n(&e->sid, __ATOMIC_ACQUIRE);

		s = e->slot;
		if (!sid || sid >> 32 || s >= UROCE_SHARE_SLOTS ||
		    s == without || !seg->slot[s].pid || seg->slot[s].owner ||
		    seg->slot[s].index >= seg->nmembers ||
		    seg->order[seg->slot[s].index] != s)
			continue;
		f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)sid, 0, 1);
		f[k++] = STMT(BPF_RET | BPF_K,
			      prog_index(seg, seg->slot[s].index, stand_in));
	}
	FALLBACK();
	/* an ID's top byte: the member of that slot */
	f[by_id[0]].k = (uint32_t)(k - by_id[0] - 1);
	f[by_id[1]].k = (uint32_t)(k - by_id[1] - 1);
	k = prog_members(f, k, seg, without, stand_in);
	FALLBACK();
#undef FALLBACK
	return k;
}

/*
 * The group's program, for the order the registry holds, with slot
 * `without` (0: none) left out as if it had no socket. Locked.
 *   probe:  return the index the probe names
 *   else:   A = destination QPN bits 23..16 (the owner slot); the index
 *           of that slot's socket, or of its owner's for a further QPN
 *           range of a member; QP1: the CM's member (prog_gsi); none
 *           (a free slot, a MAD nobody's): an index out of range, which
 *           makes the kernel pick one by flow hash (while `without`
 *           leaves: the first other member's index)
 * While `without` leaves, the last socket's datagrams go to a stand-in
 * (prog_index): the program holds before and after the leaver's close.
 * For UDP the kernel runs the program on the datagram past the UDP
 * header (reuseport_select_sock pulls sizeof(struct udphdr)), so offsets
 * are from the BTH.
 */
int share_attach_prog(struct uroce_share_seg *seg, int sock, uint32_t without)
{
	struct sock_filter *f = malloc(PROG_MAX * sizeof(*f));
	struct sock_fprog prog = { .filter = f };
	unsigned short k = 0, fb[8];
	unsigned int nfb = 0, j;
	uint32_t s, o, i, stand_in = UINT32_MAX;
	int err = 0;

	if (!f)
		return -ENOMEM;
	/* leaving, not last: the first member neither leaving nor last */
	if (without && seg->nmembers > 1 &&
	    seg->order[seg->nmembers - 1] != without)
		for (i = 0; i + 1 < seg->nmembers; i++)
			if (seg->order[i] != without) {
				stand_in = i;
				break;
			}
	f[k++] = STMT(BPF_LD | BPF_B | BPF_ABS, 0);
	f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROBE_OPCODE, 0, 2);
	f[k++] = STMT(BPF_LD | BPF_W | BPF_ABS, 8);
	f[k++] = STMT(BPF_RET | BPF_A, 0);
	f[k++] = STMT(BPF_LD | BPF_B | BPF_ABS, 5);
	k = prog_members(f, k, seg, without, stand_in);
	for (s = 1; s < UROCE_SHARE_SLOTS; s++) {
		o = seg->slot[s].owner;
		if (!o || o == without || !seg->slot[s].pid ||
		    o >= UROCE_SHARE_SLOTS ||
		    seg->slot[o].index >= seg->nmembers)
			continue;
		f[k++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, s, 0, 1);
		f[k++] = STMT(BPF_RET | BPF_K,
			      prog_index(seg, seg->slot[o].index, stand_in));
	}
	k = prog_gsi(f, k, seg, without, stand_in, fb, &nfb);
	/* none: the kernel picks by hash, among every socket it has; a
	 * leaving member's is still among them until it closes, so while
	 * one leaves the first other member takes what has no owner */
	for (j = 0; j < nfb; j++)
		f[fb[j]].k = (uint32_t)(k - fb[j] - 1);
	for (i = 0, o = 0xffffffffu; without && i < seg->nmembers; i++)
		if (seg->order[i] != without) {
			o = prog_index(seg, i, stand_in);
			break;
		}
	f[k++] = STMT(BPF_RET | BPF_K, o);
	prog.len = k;
	if (setsockopt(sock, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
		       sizeof(prog)))
		err = -errno;
	else if (!without)
		__atomic_store_n(&seg->prog_epoch, seg->epoch, __ATOMIC_RELEASE);
	free(f);
	return err;
}

/* The member's forwarding socket.  The registry's nonce is in the name:
 * only processes that can read the registry (its user's, mode 0600) can
 * find it, so no other user's process can take a free slot's name and
 * receive what is forwarded there, nor send us datagrams. */
void share_fwd_name(const struct uroce_share *sh, uint32_t slot,
		    struct sockaddr_un *un, socklen_t *len)
{
	int n;

	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	n = snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1,
		     "uroce/fwd/%s/%016llx/%u", sh->addr,
		     (unsigned long long)sh->seg->nonce, slot);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void send_ctl(struct uroce_share *sh, uint32_t slot, uint32_t kind)
{
	struct fwd_hdr h = { .kind = kind };
	struct sockaddr_un un;
	socklen_t len;

	share_fwd_name(sh, slot, &un, &len);
	sendto(sh->fwd_fd, &h, sizeof(h), MSG_DONTWAIT, (struct sockaddr *)&un,
	       len);
}

/* Stop watching the member in slot s, if we did. */
void share_unwatch(struct uroce_share *sh, uint32_t s)
{
	if (sh->pidfd[s] < 0)
		return;
	if (sh->epfd >= 0)
		uroce_epoll_ctl(sh->epfd, EPOLL_CTL_DEL, sh->pidfd[s], NULL);
	close(sh->pidfd[s]);
	sh->pidfd[s] = -1;
}

/* Watch every other live member's pidfd, forget the gone. */
void share_rescan(struct uroce_share *sh)
{
	uint32_t s;

	for (s = 1; s < UROCE_SHARE_SLOTS; s++) {
		bool live = s != sh->slot &&
			    sh->seg->slot[s].owner != sh->slot &&
			    __atomic_load_n(&sh->seg->slot[s].pid,
					    __ATOMIC_ACQUIRE);

		if (live && sh->pidfd[s] < 0) {
			sh->pidfd[s] = pidfd_of(sh->seg->slot[s].pid);
			if (sh->pidfd[s] >= 0 && sh->epfd >= 0)
				uroce_watcher_add_shared(sh->epfd, sh->member_w,
							 sh->pidfd[s], EPOLLIN);
		} else if (!live) {
			share_unwatch(sh, s);
		}
	}
}

static int open_seg(struct uroce_share *sh, const struct sockaddr_storage *ss)
{
	struct stat st;
	void *p;
	int err;

	if (stat("/proc/self/ns/net", &st))
		st.st_ino = 0;
	uroce_addr_ntop(ss, sh->addr, sizeof(sh->addr));
	/* per user: another user's file (a root program SIGKILLed on this
	 * address, say) would refuse us with EACCES for good */
	snprintf(sh->path, sizeof(sh->path), "%s/%s%lu.%s.%u", UROCE_SHM_DIR,
		 UROCE_SHARE_PREFIX, (unsigned long)st.st_ino, sh->addr,
		 (unsigned int)geteuid());
again:
	sh->fd = open(sh->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (sh->fd < 0)
		return -errno;
	err = share_lock_seg(sh);
	if (err)
		goto fail;
	if (fstat(sh->fd, &st)) {
		err = -errno;
		goto unlock;
	}
	if (!st.st_nlink) {
		/* the last member left and removed it while we opened it */
		share_unlock_seg(sh);
		close(sh->fd);
		goto again;
	}
	if (st.st_size < (off_t)sizeof(*sh->seg) &&
	    ftruncate(sh->fd, sizeof(*sh->seg))) {
		err = -errno;
		goto unlock;
	}
	p = mmap(NULL, sizeof(*sh->seg), PROT_READ | PROT_WRITE, MAP_SHARED,
		 sh->fd, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		goto unlock;
	}
	sh->seg = p;
	if (sh->seg->magic != UROCE_SHARE_MAGIC ||
	    sh->seg->version != UROCE_SHARE_VERSION) {
		memset(sh->seg, 0, sizeof(*sh->seg));
		sh->seg->magic = UROCE_SHARE_MAGIC;
		sh->seg->version = UROCE_SHARE_VERSION;
		sh->seg->size = sizeof(*sh->seg);
		snprintf(sh->seg->addr, sizeof(sh->seg->addr), "%s", sh->addr);
	}
	return 0; /* locked */
unlock:
	share_unlock_seg(sh);
fail:
	close(sh->fd);
	return err;
}

/* A slot nobody holds whose forwarding name we can bind. Locked. */
static int take_slot(struct uroce_share *sh)
{
	struct uroce_share_seg *seg = sh->seg;
	struct sockaddr_un un;
	socklen_t len;
	uint32_t k, s;

	uroce_assert_held(&sh->mu);
	sh->fwd_fd = uroce_socket(AF_UNIX,
				  SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sh->fwd_fd < 0)
		return -errno;
	/* round robin from the last one handed out: a slot (and so its
	 * QPNs) is reused as late as possible */
	for (k = 1; k < UROCE_SHARE_SLOTS; k++) {
		s = (seg->next_slot + k) % UROCE_SHARE_SLOTS;
		if (!s || seg->slot[s].pid)
			continue;
		share_fwd_name(sh, s, &un, &len);
		if (bind(sh->fwd_fd, (struct sockaddr *)&un, len))
			continue;
		seg->next_slot = s;
		sh->slot = s;
		return 0;
	}
	close(sh->fwd_fd);
	sh->fwd_fd = -1;
	return -EADDRINUSE;
}

int uroce_share_bind(struct uroce_dev *dev, int sock,
		     const struct sockaddr_storage *ss, bool join,
		     struct uroce_share **out)
{
	struct uroce_share *sh = calloc(1, sizeof(*sh));
	struct uroce_share_slot *m;
	int one = 1, err, bufsz = 8 << 20, dead;
	bool created;
	uint32_t s;

	if (!sh)
		return -ENOMEM;
	pthread_mutex_init(&sh->mu, NULL);
	pthread_mutex_init(&sh->held_mu, NULL);
	TAILQ_INIT(&sh->held);
	/* (none: what waits is tried again with the next forward only) */
	sh->retry_fd = timerfd_create(CLOCK_MONOTONIC,
				      TFD_NONBLOCK | TFD_CLOEXEC);
	sh->epfd = dev->prog.epfd;
	sh->member_w = &dev->net.share_member_w;
	sh->fwd_fd = -1;
	for (s = 0; s < UROCE_SHARE_SLOTS; s++)
		sh->pidfd[s] = -1;
	err = open_seg(sh, ss);
	if (err) {
		/* (no registry here: the default tries the next address) */
		if (!join)
			err = -EADDRINUSE;
		goto free;
	}
	dead = share_reap(sh->seg, 0);
	/* the zero-configuration default takes an address nobody uses */
	err = -EADDRINUSE;
	if (!join && sh->seg->nmembers)
		goto unlock;
	if (sh->seg->nmembers >= UROCE_SHARE_SLOTS - 1)
		goto full;
	if (setsockopt(sock, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(sock, (const struct sockaddr *)ss, uroce_sa_len(ss))) {
		err = -errno;
		goto unlock;
	}
	sh->local = *ss;
	if (!sh->seg->nonce &&
	    getrandom(&sh->seg->nonce, sizeof(sh->seg->nonce), 0) < 0)
		sh->seg->nonce = (uint64_t)uroce_now_ns();
	err = take_slot(sh);
	if (err == -EADDRINUSE)
		goto full;
	if (err)
		goto unlock;
	setsockopt(sh->fwd_fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof(bufsz));
	setsockopt(sh->fwd_fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz));
	m = &sh->seg->slot[sh->slot];
	m->start_time = uroce_proc_start_time(getpid());
	m->index = sh->seg->nmembers;
	m->owner = 0;
	sh->seg->order[sh->seg->nmembers++] = (uint8_t)sh->slot;
	__atomic_store_n(&m->pid, getpid(), __ATOMIC_RELEASE);
	if (m->next_qpn < UROCE_QPN_FIRST || m->next_qpn > 0xffff)
		m->next_qpn = UROCE_QPN_FIRST;
	share_seg_changed(sh->seg);
	err = share_attach_prog(sh->seg, sock, 0);
	if (err) {
		remove_member(sh->seg, sh->slot);
		goto unlock;
	}
	for (s = 1; s < UROCE_SHARE_SLOTS; s++)
		if (s != sh->slot && sh->seg->slot[s].pid)
			send_ctl(sh, s, FWD_HELLO);
	/* several gone unnoticed: the order of their closes is unknown */
	if (dead > 1)
		share_send_probes(sh, sock, ss);
	share_rescan(sh);
	created = sh->seg->nmembers == 1;
	share_unlock_seg(sh);
	sh->sock = sock;
	current = sh;
	*out = sh;
	/* a new group: registries whose members all died (SIGKILL) go */
	if (created)
		uroce_share_gc();
	return 0;
full:
	/* every slot is a member or another member's QPN range: the
	 * address's limit (docs/scale.md); the default just tries the next */
	err = -EADDRINUSE;
	if (join) {
		err = -ENOSPC;
		fprintf(stderr,
			"uroce: %s: ENOSPC, its %d slots are taken "
			"(processes and their QPN ranges; docs/scale.md)\n",
			sh->addr, UROCE_SHARE_SLOTS - 1);
	}
unlock:
	/* a group nobody is in (an address this host does not have, one
	 * another user's group holds): its file goes, as the last leaver's */
	if (!sh->seg->nmembers)
		unlink(sh->path);
	/* bound, so in the kernel's group: its caller's close has the
	 * leave's window (share_unmatch) */
	if (sh->local.ss_family)
		share_unmatch(sh, sock);
	share_unlock_seg(sh);
	if (sh->fwd_fd >= 0)
		close(sh->fwd_fd);
	munmap(sh->seg, sizeof(*sh->seg));
	close(sh->fd);
free:
	if (sh->retry_fd >= 0)
		close(sh->retry_fd);
	free(sh);
	return err;
}

/*
 * At exit: the group's socket goes now, not when the process is gone,
 * while the progress thread may still use the descriptor: it becomes a
 * socket that receives nothing and sends nowhere.
 */
static void drop_sock(int sock)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	dup3(fd, sock, O_CLOEXEC);
	close(fd);
}

/* how long a leaver waits between its program and its last drain */
#define LEAVE_SETTLE_NS 1000000

/* Leave the group: the program is set for the group without us before
 * our socket goes, which the kernel fills with its last one. */
static void leave(struct uroce_share *sh, int sock, bool do_close)
{
	uint32_t i;

	if (sh->left || share_lock_seg(sh)) {
		if (do_close)
			close(sock);
		return;
	}
	/* once: at exit, and when the device goes down (a second time the
	 * slot may already be someone else's) */
	sh->left = true;
	/*
	 * Until our socket is closed the kernel's order is the one the
	 * registry holds now: the program for it without us, so that no
	 * other member's datagram goes to a socket nobody reads any more.
	 * (A program for the order after the close would send the member
	 * the kernel then moves into our place to us until the close.)
	 * After it that member is found by hash and forwarded to, until
	 * the survivors, told FWD_LEFT, attach the new order's program.
	 * A member killed meanwhile and not yet taken out would make it
	 * otherwise: the kernel closed its socket and moved the last one
	 * into its place, and a program from the stale order would send
	 * that last member's datagrams to an index now out of range, where
	 * the kernel's hash may pick our socket, about to close with them.
	 * So the dead go first.
	 */
	share_reap(sh->seg, sh->slot);
	share_attach_prog(sh->seg, sock, sh->slot);
	share_unmatch(sh, sock);
	/*
	 * A datagram the old program sent to us (we were another member's
	 * stand-in, or its hash picked us) may be between the kernel's
	 * choice and our queue on another CPU as the new program goes in:
	 * it lands after a drain made at once, and goes down with the
	 * close.  The receive path that chose us finishes within
	 * microseconds; the drain waits for it.
	 */
	nanosleep(&(struct timespec){ .tv_nsec = LEAVE_SETTLE_NS }, NULL);
	share_forward_queued(sh, sock);
	remove_member(sh->seg, sh->slot);
	if (do_close)
		close(sock);
	else
		drop_sock(sock);
	for (i = 0; i < sh->seg->nmembers; i++)
		send_ctl(sh, sh->seg->order[i], FWD_LEFT);
	/* the last one out removes the file (open_seg checks for that) */
	if (!sh->seg->nmembers && !share_reap(sh->seg, 0))
		unlink(sh->path);
	share_unlock_seg(sh);
}

/*
 * At exit the group is left at once, if the device could not come down
 * and leave it in its bound (dev_down_at_exit).  The progress thread may
 * still run (nothing is freed, the descriptor stays valid), in a receive
 * with other members' datagrams: the leave waits for it (up to 1 s).
 */
__attribute__((destructor)) static void share_leave_at_exit(void)
{
	struct uroce_dev *dev = uroce_dev_get();
	struct timespec until;
	bool paused = false;

	if (!current)
		return;
	if (dev && dev->net.share == current) {
		uroce_deadline_after(&until, 1000000000ull);
		paused = !pthread_mutex_timedlock(&dev->prog.rx_lock, &until);
	}
	leave(current, current->sock, false);
	if (paused)
		pthread_mutex_unlock(&dev->prog.rx_lock);
	current = NULL;
}

void uroce_share_release(struct uroce_share *sh, int sock)
{
	uint32_t s;

	if (!sh)
		return;
	if (current == sh)
		current = NULL;
	leave(sh, sock, true);
	for (s = 0; s < UROCE_SHARE_SLOTS; s++)
		share_unwatch(sh, s);
	if (sh->epfd >= 0) {
		uroce_epoll_ctl(sh->epfd, EPOLL_CTL_DEL, sh->fwd_fd, NULL);
		if (sh->retry_fd >= 0)
			uroce_epoll_ctl(sh->epfd, EPOLL_CTL_DEL, sh->retry_fd,
					NULL);
	}
	close(sh->fwd_fd);
	if (sh->retry_fd >= 0)
		close(sh->retry_fd);
	share_held_free(sh);
	munmap(sh->seg, sizeof(*sh->seg));
	close(sh->fd);
	free(sh);
}

void uroce_share_watch(struct uroce_dev *dev)
{
	struct uroce_share *sh = dev->net.share;

	if (!sh)
		return;
	/* once: a rebind watches the new share while the progress thread
	 * may still dispatch these watchers for the old one (a store of the
	 * same callbacks would race with its read of them) */
	if (!dev->net.share_fwd_w.fn) {
		dev->net.share_fwd_w.fn = uroce_share_fwd_ready;
		dev->net.share_retry_w.fn = uroce_share_retry_ready;
		dev->net.share_member_w.fn = uroce_share_member_ready;
	}
	pthread_mutex_lock(&sh->mu);
	sh->epfd = dev->prog.epfd;
	uroce_watcher_add(sh->epfd, &dev->net.share_fwd_w, sh->fwd_fd, EPOLLIN);
	if (sh->retry_fd >= 0)
		uroce_watcher_add(sh->epfd, &dev->net.share_retry_w,
				  sh->retry_fd, EPOLLIN);
	for (uint32_t s = 0; s < UROCE_SHARE_SLOTS; s++)
		if (sh->pidfd[s] >= 0)
			uroce_watcher_add_shared(sh->epfd, sh->member_w,
						 sh->pidfd[s], EPOLLIN);
	pthread_mutex_unlock(&sh->mu);
}

uint32_t uroce_share_slot(const struct uroce_dev *dev)
{
	return dev->net.share ? dev->net.share->slot : 0;
}

bool uroce_share_slot_held(const struct uroce_dev *dev, uint32_t s)
{
	const struct uroce_share *sh = dev->net.share;

	return sh && s > 0 && s < UROCE_SHARE_SLOTS &&
	       __atomic_load_n(&sh->seg->slot[s].pid, __ATOMIC_RELAXED) != 0;
}

void uroce_share_note_qpn(struct uroce_dev *dev, uint32_t r)
{
	const struct uroce_qpn_range *q = &dev->obj.qpn_range[r];

	if (dev->net.share)
		__atomic_store_n(&dev->net.share->seg->slot[q->base >> 16].next_qpn,
				 q->next, __ATOMIC_RELAXED);
}

/*
 * One more QPN range for a member whose own 65 519 QPNs are in use: a
 * free slot of the address, marked as the member's (owner), which the
 * group's program steers to the member's socket.  Each range taken is
 * a process fewer that can join the address.  dev->lock held.
 */
int uroce_share_add_range(struct uroce_dev *dev)
{
	struct uroce_share *sh = dev->net.share;
	struct uroce_share_seg *seg;
	struct uroce_share_slot *m;
	uint32_t k, s, r;
	int err;

	uroce_assert_held(&dev->lock);
	if (!sh || dev->obj.nranges >= UROCE_QPN_RANGES)
		return -ENOSPC;
	err = share_lock_seg(sh);
	if (err)
		return err;
	seg = sh->seg;
	share_reap(seg, sh->slot);
	for (k = 1; k < UROCE_SHARE_SLOTS; k++) {
		s = (seg->next_slot + k) % UROCE_SHARE_SLOTS;
		if (s && !seg->slot[s].pid)
			break;
	}
	if (k == UROCE_SHARE_SLOTS) {
		share_unlock_seg(sh);
		return -ENOSPC;
	}
	seg->next_slot = s;
	m = &seg->slot[s];
	m->start_time = seg->slot[sh->slot].start_time;
	m->index = UINT32_MAX;
	m->owner = sh->slot;
	if (m->next_qpn < UROCE_QPN_FIRST || m->next_qpn > 0xffff)
		m->next_qpn = UROCE_QPN_FIRST;
	__atomic_store_n(&m->pid, getpid(), __ATOMIC_RELEASE);
	r = dev->obj.nranges;
	dev->obj.qpn_range[r].base = s << 16;
	dev->obj.qpn_range[r].next = m->next_qpn;
	dev->obj.qpn_range[r].n = 0;
	dev->obj.range_of_slot[s] = (uint8_t)r;
	dev->obj.nranges = r + 1;
	share_seg_changed(seg);
	share_attach_prog(seg, dev->net.sock, 0);
	share_unlock_seg(sh);
	return 0;
}

uint32_t uroce_share_first_qpn(const struct uroce_dev *dev)
{
	return dev->net.share ?
		       dev->net.share->seg->slot[dev->net.share->slot].next_qpn :
		       UROCE_QPN_FIRST;
}

/*
 * The CM listen table.  on: sid taken by this member, or EADDRINUSE if a
 * live other member listens on it.  !on: this member's last listener on
 * sid is gone; the entry stays its own (a REQ between two listens of one
 * program must reach the CM that holds it, docs/rdmacm.md "Early
 * requests") but is idle, and another member's listen takes it over (a
 * server that forks a listening child per connection, docs/rsocket.md).
 */
int uroce_share_listen(struct uroce_dev *dev, uint64_t sid, bool on)
{
	struct uroce_share *sh = dev->net.share;
	struct uroce_share_listen *free_e = NULL, *e;
	int err, k;

	if (!sh || !sid)
		return 0;
	err = share_lock_seg(sh);
	if (err)
		return err;
	for (k = 0; k < UROCE_SHARE_LISTENS; k++) {
		e = &sh->seg->listen[k];
		if (e->sid == sid) {
			if (e->slot == sh->slot) {
				e->idle = !on;
				goto out;
			}
			if (!on)
				goto out;
			if (!e->idle && member_alive(&sh->seg->slot[e->slot])) {
				err = -EADDRINUSE;
				goto out;
			}
			listen_clear(e);
		}
		if (!e->sid && !free_e)
			free_e = e;
	}
	if (on) {
		if (!free_e) {
			err = -ENOSPC;
			goto out;
		}
		listen_set(free_e, sh->slot, sid);
	}
out:
	if (!err) {
		share_seg_changed(sh->seg);
		/* the program steers REQs by the table (prog_gsi) */
		if (!sh->left)
			share_attach_prog(sh->seg, sh->sock, 0);
	}
	share_unlock_seg(sh);
	return err;
}
