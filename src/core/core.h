/* SPDX-License-Identifier: MIT */
/*
 * core: what every layer may use.
 *
 * Owns and exports: the device limits and identity constants, the counter
 * list (core/counters.h) and its name table (core/stats.c), the clock
 * (uroce_now_ns, core/clock.c), a thread's run delay (core/proc.c), the
 * log (core/log.c), the process's one
 * device (uroce_dev_get, core/dev.c; struct uroce_dev itself is in
 * src/dev.h) and the UROCE_* settings (core/config.c).
 *
 * Locking: none of its own beyond the log's rate limiter; the counters
 * are relaxed atomics, the config is written once before it is read.
 * The lock order of both libraries and uroce_assert_held: core/lock.h.
 * Includes nothing of ours but wire/.
 *
 * Error returns: one rule per layer, and the few exceptions with their
 * reasons, in docs/architecture.md "Error returns" (below the fronts:
 * 0 or a negative errno, a count or a negative errno, bool for a yes/no
 * question; checked by arch.errors).
 */
#ifndef UROCE_CORE_H
#define UROCE_CORE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wire/wire.h"

#define UROCE_EXPORT __attribute__((visibility("default")))

/*
 * Every socket of ours is made by the system call itself, never through
 * socket(): librspreload interposes socket() and would turn a datagram
 * socket of ours into a datagram rsocket (docs/rsocket.md).
 */
static inline int uroce_socket(int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}

/*
 * And every epoll instance of ours by the system calls: a librspreload of
 * rdma-core 2026 or later interposes epoll_create1, epoll_ctl and
 * epoll_wait and sends them to repoll_* (rdmacm/rs_epoll.c), which would
 * then carry the progress thread's sleep.  Not under ThreadSanitizer:
 * its interceptors of epoll_ctl and epoll_wait are how it sees that a
 * watcher written before its registration is read after the wait that
 * returns it (the progress thread's), and it runs no librspreload.
 */
#if defined(__SANITIZE_THREAD__)
#define UROCE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UROCE_TSAN 1
#endif
#endif

#ifdef UROCE_TSAN
#include <sys/epoll.h>

static inline int uroce_epoll_create1(int flags)
{
	return epoll_create1(flags);
}

static inline int uroce_epoll_ctl(int epfd, int op, int fd,
				  struct epoll_event *ev)
{
	return epoll_ctl(epfd, op, fd, ev);
}

static inline int uroce_epoll_wait(int epfd, struct epoll_event *ev, int max,
				   int ms)
{
	return epoll_wait(epfd, ev, max, ms);
}
#else
struct epoll_event;

static inline int uroce_epoll_create1(int flags)
{
	return (int)syscall(SYS_epoll_create1, flags);
}

static inline int uroce_epoll_ctl(int epfd, int op, int fd,
				  struct epoll_event *ev)
{
	return (int)syscall(SYS_epoll_ctl, epfd, op, fd, ev);
}

static inline int uroce_epoll_wait(int epfd, struct epoll_event *ev, int max,
				   int ms)
{
	return (int)syscall(SYS_epoll_pwait, epfd, ev, max, ms, NULL, 0);
}
#endif

/*
 * FLUSH (IBA 1.5, opcode 0x1C) came to libibverbs after the rdma-core 44
 * headers we build against; these are the values rdma-core 45 gave it, so
 * programs built against newer headers reach it.
 */
#define UROCE_WR_FLUSH		      14
#define UROCE_WC_FLUSH		      8
#define UROCE_ACCESS_FLUSH_GLOBAL     (1 << 8)
#define UROCE_ACCESS_FLUSH_PERSISTENT (1 << 9)
#define UROCE_QP_EX_WITH_FLUSH	      (1 << 11)
#define UROCE_FLUSH_GLOBAL	      1 /* placement type bits */
#define UROCE_FLUSH_PERSISTENT	      2
#define UROCE_FLUSH_RANGE	      0 /* selectivity level */
#define UROCE_FLUSH_MR		      1

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))

#define UROCE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- device limits (what query_device reports, and enforces) ---- */
/* QPs per process: the QP table's size, alone on an address (24-bit
 * QPNs); on a shared address the 16 bits below the slot bound it first
 * (docs/scale.md) */
#define UROCE_MAX_QP (1u << 18)
/* QPN ranges (registry slots) one process may hold on a shared address */
#define UROCE_QPN_RANGES (UROCE_MAX_QP >> 16)
/* a destroyed QP's number is not handed out again for this long */
#define UROCE_QPN_QUARANTINE_MS 2000
#define UROCE_MAX_QP_WR		16384
#define UROCE_MAX_SGE		32
#define UROCE_MAX_INLINE	512
#define UROCE_MAX_CQ		(1u << 16)
#define UROCE_MAX_CQE		(1 << 20)
#define UROCE_MAX_MR		(1u << 16)
#define UROCE_MAX_MR_SIZE	(1ull << 40)
#define UROCE_MAX_PD		(1u << 16)
#define UROCE_MAX_RD_ATOMIC	128
#define UROCE_MAX_SRQ		(1u << 16)
#define UROCE_MAX_MSG_SIZE	(1u << 31)
/*
 * Identity (docs/verbs.md, "Identity"):
 * we own no IEEE OUI, so vendor_id is "UR" in the locally administered
 * AAI quadrant (first octet 0x02), which IEEE assigns to nobody; 0 reads
 * as "no device" to test suites.  hw_ver 1: the first revision.
 */
#define UROCE_VENDOR_ID	     0x025552
#define UROCE_HW_VER	     1
#define UROCE_VENDOR_PART_ID 0x5552 /* "UR" */
#define UROCE_FW_VER	     "0.1.0"
#define UROCE_DEV_NAME	     "uroce0"
/* multicast (verbs/mcast.c): each group a process joins costs a socket */
#define UROCE_MAX_MCAST_GRP	  256
#define UROCE_MAX_MCAST_QP_ATTACH 64
#define UROCE_MAX_TOTAL_MCAST_QP_ATTACH \
	(UROCE_MAX_MCAST_GRP * UROCE_MAX_MCAST_QP_ATTACH)
#define UROCE_MCAST_QPN 0xffffff /* DQPN of multicast (IBA 10.5.2.3) */

/* Requester pacing: what a QP may have in flight (docs/transport.md,
 * "Flow control"), and AckReq spacing. */
#define UROCE_TX_WINDOW_BYTES (1u << 20)
#define UROCE_TX_WINDOW_MIN   8
#define UROCE_READ_WINDOW     256
#define UROCE_DEV_WINDOW_MIN  256
#define UROCE_ACK_EVERY	      16
#define UROCE_ACK_CREDITS_LOW 4 /* receive credits left: ask */

/* QPNs: 0 and 1 are special (SMI/GSI); ours start above them. */
#define UROCE_QPN_FIRST 0x11

/* ---- counters: enum uroce_counter from the one list in core/counters.h ---- */
#include "core/counters.h"

enum uroce_counter {
#define UROCE_CNT_ENUM(id, name) UROCE_CNT_##id,
	UROCE_COUNTERS(UROCE_CNT_ENUM)
#undef UROCE_CNT_ENUM
	UROCE_CNT_NUM,
};

/* Opcode classes of the per-class counters (ACK includes atomic ACK). */
enum uroce_pkt_class {
	UROCE_CLASS_SEND,
	UROCE_CLASS_WRITE,
	UROCE_CLASS_READ_REQ,
	UROCE_CLASS_READ_RESP,
	UROCE_CLASS_ATOMIC,
	UROCE_CLASS_ACK,
	UROCE_CLASS_CNP,
	UROCE_CLASS_OTHER,
	UROCE_CLASS_NUM,
};

#include "core/config.h"
#include "core/lock.h"

/*
 * What a datagram's IP header takes from the GRH (IBA annex A17.4.5.1, as
 * rdma_rxe does): the traffic class as the IPv4 TOS / IPv6 traffic class
 * (DSCP and ECN bits), the hop limit as TTL / hop limit.  0 leaves the
 * socket's own (TOS 0, TTL 64), so the default costs nothing on the wire
 * or in the system call (docs/congestion.md, "The IP header").
 */
struct uroce_ipopt {
	uint8_t tos;
	uint8_t ttl;
};

#define UROCE_ECN_MASK 0x03
#define UROCE_ECN_ECT0 0x02
#define UROCE_ECN_CE   0x03

static inline bool uroce_ipopt_eq(struct uroce_ipopt a, struct uroce_ipopt b)
{
	return a.tos == b.tos && a.ttl == b.ttl;
}

/* An address's IP header fields: its GRH's traffic class and hop limit
 * (none without a GRH); with ect (congestion control on) the ECN bits
 * say ECT(0), as a RoCE NIC's do, whatever the traffic class had. */
static inline struct uroce_ipopt uroce_ipopt_of(const struct ibv_ah_attr *ah,
						bool ect)
{
	struct uroce_ipopt ip = { 0, 0 };

	if (ah->is_global) {
		ip.tos = ah->grh.traffic_class;
		ip.ttl = ah->grh.hop_limit;
	}
	if (ect)
		ip.tos = (uint8_t)((ip.tos & ~UROCE_ECN_MASK) | UROCE_ECN_ECT0);
	return ip;
}

/* core/stats.c: the counters' names, generated from the same list */
extern const char *const uroce_counter_name[UROCE_CNT_NUM];

/* core/dev.c: the process's device, or NULL with errno set */
struct uroce_dev;
struct uroce_dev *uroce_dev_get(void);

/* core/clock.c: CLOCK_MONOTONIC in nanoseconds */
uint64_t uroce_now_ns(void); /* CLOCK_MONOTONIC, or the fake clock */
/* the same a few ms coarse, cheaper (CLOCK_MONOTONIC_COARSE): for
 * checks made every so many ms, not for timers or RTTs */
uint64_t uroce_coarse_ns(void);
/* CLOCK_REALTIME (or the fake clock), the clock of the kernel's socket
 * timestamps; a timespec in ns */
uint64_t uroce_real_ns(void);
struct timespec;
uint64_t uroce_timespec_ns(const struct timespec *ts);
/* the calling thread's run delay so far, in ns, in *slices the times it
 * was put on a core and in *ran its time on one, ns (the fields of its
 * schedstat; 0 where the kernel keeps none): core/proc.c */
uint64_t uroce_run_delay(uint64_t *slices, uint64_t *ran);
/* the times the calling thread was switched out for another task so far
 * (its involuntary context switches; where they cannot be read, a count
 * that goes up at every call): core/proc.c */
uint64_t uroce_involuntary_switches(void);
/* the idle time so far of the CPUs this process may use, summed, in ns
 * (false where it cannot be read): core/proc.c */
bool uroce_cpus_idle_ns(uint64_t *idle);
/* set the fake clock (engine tests), 0 for the real one again */
void uroce_clock_set(uint64_t ns);
/* ns from now on CLOCK_REALTIME, for pthread_mutex_timedlock and
 * pthread_timedjoin_np */
void uroce_deadline_after(struct timespec *ts, uint64_t ns);

/* core/log.c: UROCE_LOG=error|warn|info|debug, off by default.  One
 * line per event on stderr; uroce_log_qp lines are rate-limited, for the
 * datapath.  psn < 0: no PSN. */
enum uroce_log_level {
	UROCE_LOG_OFF,
	UROCE_LOG_ERROR,
	UROCE_LOG_WARN,
	UROCE_LOG_INFO,
	UROCE_LOG_DEBUG,
};
extern int uroce_log_level;
void uroce_log_emit(int level, bool limited, int64_t qpn, int64_t psn,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define uroce_log(level, ...) \
	do { \
		if (__builtin_expect(uroce_log_level >= (level), 0)) \
			uroce_log_emit(level, false, -1, -1, __VA_ARGS__); \
	} while (0)
#define uroce_log_qp(level, qp, psn, ...) \
	do { \
		if (__builtin_expect(uroce_log_level >= (level), 0)) \
			uroce_log_emit(level, true, (qp)->ex.qp_base.qp_num, \
				       (int64_t)(psn), __VA_ARGS__); \
	} while (0)

#endif /* UROCE_CORE_H */
