/* SPDX-License-Identifier: MIT */
/*
 * The stats segment: what a uroce process publishes about itself, for the
 * `uroce` tool and anyone else on the host to read while it runs.
 *
 * One POSIX shared-memory object per process, /dev/shm/uroce.<pid>, mode
 * 0600, created when the device comes up and unlinked at exit.  Layout:
 *
 *	struct uroce_shm_hdr			at 0
 *	char names[ncounters][NAME_LEN]		at names_off
 *	_Atomic uint64_t counters[ncounters]	at cnt_off (the device's own
 *						counters: the datapath bumps
 *						them here, nothing is copied)
 *	struct uroce_shm_qp qps[qp_slots]	at qp_off
 *
 * Readers find everything through the offsets and sizes in the header, so
 * a newer library with more counters or longer QP entries stays readable
 * by an older tool of the same major version.  Everything is
 * little-endian/host order: the segment never leaves the host.
 *
 * The QP table is a snapshot taken on request, not kept up to date by the
 * datapath: a reader increments snap_req and FUTEX_WAKEs it; the process
 * fills the table under its engine lock, then stores snap_req's value in
 * snap_done and FUTEX_WAKEs that.  Nobody looking costs nothing.
 */
#ifndef UROCE_SHM_H
#define UROCE_SHM_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UROCE_SHM_PREFIX   "uroce." /* /dev/shm/uroce.<pid> */
#define UROCE_SHM_DIR	   "/dev/shm"
#define UROCE_SHM_MAGIC	   0x5441545345435255ull /* "URCESTAT" */
#define UROCE_SHM_VERSION  1
#define UROCE_SHM_NAME_LEN 32
#define UROCE_SHM_QP_SLOTS 4096

struct uroce_shm_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size; /* sizeof(struct uroce_shm_hdr) */
	uint64_t size;	   /* of the whole segment */
	uint32_t ncounters;
	uint32_t names_off;
	uint32_t cnt_off;
	uint32_t qp_off;
	uint32_t qp_slots;
	uint32_t qp_entry_size; /* sizeof(struct uroce_shm_qp) */

	/* who: a pid alone is not enough, pids are reused */
	int32_t pid;
	uint32_t reserved0;
	uint64_t start_time; /* /proc/<pid>/stat field 22 */
	char comm[64];	     /* argv[0]'s base name */

	/* the device */
	char dev_name[64];
	uint8_t gid[16];     /* RoCE v2 GID, index 0 */
	char addr[48];	     /* its IP address as text */
	uint64_t node_guid;  /* big-endian, as ibv_get_device_guid */
	uint32_t active_mtu; /* bytes */
	uint32_t netdev_mtu; /* bytes */
	char pcap[256];	     /* UROCE_PCAP file, "" when off */
	char fault[128];     /* UROCE_FAULT setting, "" when off */

	/* QP snapshot handshake (futex words) */
	uint32_t snap_req;
	uint32_t snap_done;
	uint32_t nqps;	       /* entries valid in the snapshot */
	uint32_t qp_overflow;  /* live QPs that did not fit */
	uint64_t snap_time_ns; /* CLOCK_REALTIME of the snapshot */

	uint32_t ready; /* 1 once everything above is set */
	uint32_t reserved1;

	/*
	 * The port's LID, unique among the uroce devices of this host: a
	 * GRH-less address naming it resolves to gid (src/engine/lid.c).
	 * rdma_bind_addr moves the device, so lid, gid and addr can change
	 * while others read them: addr_seq is odd while they are rewritten
	 * (a sequence lock; read it before and after, retry if it moved).
	 * Readers of an older segment (hdr_size too small) see no LID.
	 */
	uint32_t addr_seq;
	uint16_t lid;
	uint16_t reserved2;

	/*
	 * The shared device (src/net/share.c): the slot this process holds
	 * in its address's group, 0 if its socket is alone on the address
	 * (UROCE_SHARE=0).  Under addr_seq with the address.  Readers of an
	 * older segment (hdr_size too small) see 0.
	 */
	uint32_t share_slot;
	uint32_t reserved3;
};

/* Whether a segment whose header is hdr_size bytes long has share_slot. */
static inline int uroce_shm_has_share(uint32_t hdr_size)
{
	return hdr_size >=
	       offsetof(struct uroce_shm_hdr, share_slot) + sizeof(uint32_t);
}

/* One QP as the snapshot saw it. */
/* struct uroce_shm_qp's path: 0 from a library that does not say */
enum uroce_shm_path {
	UROCE_SHM_PATH_NONE,  /* no peer (UD, or not connected) */
	UROCE_SHM_PATH_UDP,   /* the network */
	UROCE_SHM_PATH_LOCAL, /* a same-host ring (net/local.c) */
};

struct uroce_shm_qp {
	uint32_t qpn;
	uint32_t dest_qpn;
	uint8_t state;	 /* enum ibv_qp_state */
	uint8_t type;	 /* enum ibv_qp_type */
	uint16_t mtu;	 /* path MTU, bytes */
	uint8_t timeout; /* local ACK timeout exponent */
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t path; /* enum uroce_shm_path: how it sends */
	uint8_t peer_gid[16];
	uint32_t sq_psn;      /* next PSN the requester sends */
	uint32_t unacked_psn; /* oldest PSN not yet acknowledged */
	uint32_t epsn;	      /* responder: next PSN expected */
	uint32_t sq_posted;   /* send WRs posted, not completed */
	uint32_t sq_unsent;   /* ... of which not started on the wire */
	uint32_t sq_max_wr;
	uint32_t rq_posted; /* receive WRs waiting for a SEND */
	uint32_t rq_max_wr;
	uint32_t cwnd; /* packets the requester may have in flight */
	uint32_t retry_left;
	uint32_t rnr_retry_left;
	uint32_t reserved2;
	uint64_t tx_pkts;
	uint64_t rx_pkts;
	uint64_t retransmits;
	/* the requester's RTT estimate (RFC 6298), 0 before the first sample;
	 * entries of an older library end before these (qp_entry_size) */
	uint64_t srtt_ns;
	uint64_t rttvar_ns;
	/* ECN congestion control (docs/congestion.md); entries of an older
	 * library end before these */
	uint64_t cc_rate;     /* bytes/s the requester is paced at,
					 * 0: not paced */
	uint64_t cc_ce_seen;  /* packets that arrived marked CE */
	uint64_t cc_cnp_sent; /* CNPs it answered them with */
	uint64_t cc_cnp_rx;   /* CNPs from its peer */
	uint64_t cc_cuts;     /* rate cuts they made (CNPs', or the
					 * delay control's) */
	/* delay-based congestion control (UROCE_CC=delay); entries of an
	 * older library end before these */
	uint64_t cc_rtt_ns;	 /* its last RTT sample, 0: none */
	uint64_t cc_base_rtt_ns; /* its base RTT */
	uint64_t cc_fallbacks;	 /* times it left the QP to loss-based
					  * control: cuts the delay ignored */
};

/* Whether QP entries of entry_size bytes carry the RTT estimate. */
static inline int uroce_shm_qp_has_rtt(uint32_t entry_size)
{
	return entry_size >=
	       offsetof(struct uroce_shm_qp, rttvar_ns) + sizeof(uint64_t);
}

/* Whether QP entries of entry_size bytes carry the ECN counters. */
static inline int uroce_shm_qp_has_cc(uint32_t entry_size)
{
	return entry_size >=
	       offsetof(struct uroce_shm_qp, cc_cuts) + sizeof(uint64_t);
}

/* Whether QP entries of entry_size bytes carry the delay control's. */
static inline int uroce_shm_qp_has_delay(uint32_t entry_size)
{
	return entry_size >=
	       offsetof(struct uroce_shm_qp, cc_fallbacks) + sizeof(uint64_t);
}

/* Whether a segment whose header is hdr_size bytes long carries a LID. */
static inline int uroce_shm_has_lid(uint32_t hdr_size)
{
	return hdr_size >=
	       offsetof(struct uroce_shm_hdr, lid) + sizeof(uint16_t);
}

/* The pid a file name in UROCE_SHM_DIR belongs to, or -1 if the name is
 * not one of our segments'. */
static inline long uroce_shm_name_pid(const char *name)
{
	size_t plen = strlen(UROCE_SHM_PREFIX);
	char *end;
	long pid;

	if (strncmp(name, UROCE_SHM_PREFIX, plen))
		return -1;
	pid = strtol(name + plen, &end, 10);
	if (end == name + plen || *end || pid <= 0 || pid > INT_MAX)
		return -1;
	return pid;
}

/*
 * A small file of /proc, read whole into buf (size - 1 bytes at most,
 * NUL-terminated) through fd, which the caller may keep open (a pread
 * from the start: /proc answers each read afresh); or by path, opened
 * for this read.  The bytes read, or a negative errno.
 */
static inline ssize_t uroce_proc_read_fd(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size - 1, 0);

	if (n < 0)
		n = -errno;
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

static inline ssize_t uroce_proc_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = uroce_proc_read_fd(fd, buf, size);
	close(fd);
	return n;
}

/*
 * A process's start time (field 22 of /proc/PID/stat, in clock ticks), or
 * 0: the segment records its writer's, so the tool can tell a reused pid
 * from the process that wrote it.  Both sides read it the same way.
 */
static inline uint64_t uroce_proc_start_time(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (uroce_proc_read(path, buf, sizeof(buf)) <= 0)
		return 0;
	/* the command name may hold spaces and ')': skip to the last ')' */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* field 3 (state) starts at p + 2; the start time is field 22 */
	for (i = 3, p += 2; i < 22 && p; i++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (p)
		st = strtoull(p, NULL, 10);
	return st;
}

/*
 * The shared-address registry (src/net/share.c, docs/shared.md "The
 * registry"): one file per (network namespace, IP address, user),
 * /dev/shm/uroce-addr.<netns inode>.<address>.<euid>, mode 0600, shared by
 * every process of that user whose device uses that address (the kernel
 * joins only one user's sockets in a SO_REUSEPORT group, so a user's
 * group never meets another's registry).  Changed only under an OFD
 * write lock on its first byte; the datapath never reads it.
 *
 * Slot s (1 .. UROCE_SHARE_SLOTS-1) is one member, or one more QPN range
 * of a member that has used up its own (owner; docs/scale.md): its QPNs are
 * s << 16 | n, its CM comm IDs s << 24 | random, its forwarding socket
 * the abstract name "\0uroce/fwd/<address>/<nonce>/<s>".  order[] mirrors the
 * kernel's SO_REUSEPORT socket array (order[i] is the slot at index i).
 */
#define UROCE_SHARE_PREFIX  "uroce-addr."
#define UROCE_SHARE_MAGIC   0x4552414853435255ull /* "URCSHARE" */
#define UROCE_SHARE_VERSION 1
#define UROCE_SHARE_SLOTS   256
#define UROCE_SHARE_LISTENS 1024

struct uroce_share_slot {
	int32_t pid;	     /* 0: free */
	uint32_t index;	     /* in the reuseport array */
	uint64_t start_time; /* /proc/<pid>/stat field 22 */
	uint32_t next_qpn;   /* low 16 bits: kept across owners */
	uint32_t owner;	     /* 0: a member; else a further QPN
					 * range of the member in that slot
					 * (index then UINT32_MAX) */
};

struct uroce_share_listen {
	uint64_t sid; /* CM service ID, 0: free */
	uint32_t slot;
	uint32_t idle; /* 1: the holder no longer listens on it; REQs still
			* go to it, and another member's listen takes it */
};

struct uroce_share_seg {
	uint64_t magic;
	uint32_t version;
	uint32_t size;
	char addr[48];
	uint64_t nonce; /* authenticates index probes */
	uint32_t epoch; /* bumped at every change */
	uint32_t nmembers;
	uint32_t next_slot;  /* allocation cursor */
	uint32_t prog_epoch; /* the epoch the group's program was made for */
	uint64_t fwd_drops;  /* packets for a slot nobody holds */
	uint8_t order[UROCE_SHARE_SLOTS];
	struct uroce_share_slot slot[UROCE_SHARE_SLOTS];
	struct uroce_share_listen listen[UROCE_SHARE_LISTENS];
};

/* tests/shared/run_shared.sh reads nmembers at this offset */
_Static_assert(offsetof(struct uroce_share_seg, nmembers) == 76,
	       "uroce_share_seg.nmembers moved");

#endif /* UROCE_SHM_H */
