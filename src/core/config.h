/* SPDX-License-Identifier: MIT */
/*
 * core/config: every UROCE_* environment setting, read once (at the first
 * uroce_config call, from any thread) into one struct that is never
 * written again, so it is read without a lock.  Strings are NULL when
 * the variable is unset or empty; specs with a grammar of their own
 * (UROCE_FAULT, UROCE_LOG, UROCE_PCAP_MAX) are parsed where they are
 * used.  Built into both libraries (librdmacm reads its UROCE_CM_* and
 * the address settings here too).  Includes nothing of ours.
 */
#ifndef UROCE_CORE_CONFIG_H
#define UROCE_CORE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

struct uroce_config {
	/* the device's address (net/udp.c; librdmacm: the address is pinned) */
	const char *addr;	  /* UROCE_ADDR: an IP address */
	const char *ifname;	  /* UROCE_IFNAME: the interface's first */
	bool gso;		  /* UROCE_GSO: not "0" (UDP GSO/GRO) */
	bool share;		  /* UROCE_SHARE: not "0" (net/share.c:
					 * an address may be shared) */
	bool local;		  /* UROCE_LOCAL: not "0" (net/local.c:
					 * the same-host path) */
	uint64_t unreliable_mbps; /* UROCE_UNRELIABLE_MBPS: UC/UD pacing,
					 * Mbit/s, 0 = off (default 4000) */
	bool cc;		  /* UROCE_CC=dcqcn: ECN congestion
					 * control (engine/cc.c; default off) */
	bool cc_delay;		  /* UROCE_CC=delay: delay-based
					 * congestion control (engine/cc.c) */
	uint64_t cc_target_us;	  /* UROCE_CC_TARGET_US: its queueing
					 * delay target (default 200) */
	uint64_t cnp_us;	  /* UROCE_CNP_US: the least time between
					 * two CNPs of a QP (default 50) */
	uint64_t sndbuf_kb;	  /* UROCE_SNDBUF_KB: the UDP socket's
					 * send buffer, KiB (default 128;
					 * docs/transport.md, "A full send
					 * buffer") */
	uint64_t spin_ns;	  /* UROCE_SPIN_US: how long the progress
					 * thread spins, ns (default 50 us) */
	const char *fault;	  /* UROCE_FAULT: net/udp.c's spec */
	const char *log;	  /* UROCE_LOG: a level (core/log.c) */
	const char *pcap;	  /* UROCE_PCAP: capture file */
	const char *pcap_max;	  /* UROCE_PCAP_MAX: its size limit */
	bool stats;		  /* UROCE_STATS=1: summaries at exit */
	/* librdmacm */
	const char *cm_hold_ms;	     /* UROCE_CM_HOLD_MS (rdmacm/gsi.c) */
	const char *cm_disc_hold_ms; /* UROCE_CM_DISC_HOLD_MS (rdmacm/gsi.c) */
	const char *cm_listen_file;  /* UROCE_CM_LISTEN_FILE (tests) */
};

const struct uroce_config *uroce_config(void);

#endif /* UROCE_CORE_CONFIG_H */
