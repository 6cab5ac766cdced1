/* SPDX-License-Identifier: MIT */
/*
 * The device counters, one list: X(ID, "name") gives enum uroce_counter's
 * UROCE_CNT_<ID> (core/core.h) and the name `uroce stats` and UROCE_STATS=1
 * print (core/stats.c, published in the stats segment, include/uroce_shm.h).
 * The order is the enum's and the segment's: append new counters at the
 * end of their group and keep names stable (tools read them by name).
 */
#ifndef UROCE_CORE_COUNTERS_H
#define UROCE_CORE_COUNTERS_H

#define UROCE_COUNTERS(X) \
	X(TX_PKTS, "tx_pkts") \
	X(TX_BYTES, "tx_bytes") \
	X(RX_PKTS, "rx_pkts") \
	X(RX_BYTES, "rx_bytes") \
	X(TX_ACKS, "tx_acks") \
	X(RX_ACKS, "rx_acks") \
	X(TX_NAK_SEQ, "tx_nak_seq") \
	X(TX_NAK_INV, "tx_nak_inv") \
	X(TX_NAK_ACCESS, "tx_nak_access") \
	X(TX_NAK_OP, "tx_nak_op") \
	X(RX_NAK_SEQ, "rx_nak_seq") \
	X(RX_NAK_OTHER, "rx_nak_other") \
	X(RX_NAK_INV, "rx_nak_inv") \
	X(RX_NAK_ACCESS, "rx_nak_access") \
	X(RX_NAK_OP, "rx_nak_op") \
	X(TX_RNR_NAK, "tx_rnr_nak") \
	X(RX_RNR_NAK, "rx_rnr_nak") \
	X(RETRANSMITS, "retransmits") \
	X(TIMEOUTS, "timeouts") \
	X(DUPLICATES, "duplicates") \
	X(OUT_OF_SEQ, "out_of_seq") \
	X(DROP_BAD_ICRC, "drop_bad_icrc") \
	X(DROP_BAD_HDR, "drop_bad_hdr") \
	X(DROP_UNKNOWN_QP, "drop_unknown_qp") \
	X(DROP_BAD_STATE, "drop_bad_state") \
	X(DROP_BAD_SRC, "drop_bad_src") \
	X(DROP_TRUNCATED, "drop_truncated") \
	X(REM_ACCESS_ERR, "rem_access_err") \
	X(DROP_BAD_QKEY, "drop_bad_qkey") \
	X(DROP_NO_RECV, "drop_no_recv_wqe") \
	X(DROP_TOO_LONG, "drop_too_long") \
	X(UC_MSG_DROPS, "uc_msg_drops") \
	X(DUP_ATOMIC_LOST, "dup_atomic_lost") \
	X(XRC_BAD_SRQN, "xrc_bad_srqn") \
	X(FAULT_DROPS, "fault_drops") \
	X(FAULT_DUPS, "fault_dups") \
	X(FAULT_DELAYS, "fault_delays") \
	X(TX_GSO_SENDS, "tx_gso_sends") /* sends that carried several packets */ \
	X(TX_GSO_OFF, "tx_gso_off") /* the kernel refused GSO: off since */ \
	X(TX_SEND_FAILED, "tx_send_failed") /* UC/UD WQEs: no route */ \
	X(TX_FILTERED, \
	  "tx_filtered") /* GSO runs a firewall refused (EPERM): lost */ \
	X(TX_SNDBUF_FULL, \
	  "tx_sndbuf_full") /* sends a full send buffer held back */ \
	X(RX_GRO_BATCHES, "rx_gro_batches") /* receives that carried several */ \
	X(RX_MCAST_PKTS, "rx_mcast_pkts")   /* to a group with QPs attached */ \
	X(DROP_MCAST_NO_GROUP, \
	  "drop_mcast_no_group") /* to a group no QP is attached to */ \
	/* docs/transport.md, "Loss recovery at RTT scale" */ \
	X(TLP_PROBES, "tlp_probes") /* tail-loss probes sent */ \
	X(EARLY_RETRANSMITS, \
	  "early_retransmits") /* go-back rounds a NAK or the PSNs started */ \
	X(TX_NAK_SEQ_RESENT, "tx_nak_seq_resent") /* sequence NAKs sent again */ \
	X(TIMEOUT_RETRIES, \
	  "timeout_retries") /* ACK timeouts that consumed a retry */ \
	X(TX_FAREWELL_ACKS, \
	  "tx_farewell_acks") /* last ACKs again, from a QP being destroyed */ \
	X(TX_UNACKED_LEFT, \
	  "tx_unacked_left") /* sent, never ACKed: the QP left RTS first */ \
	X(TX_UNANSWERED, \
	  "tx_unanswered") /* a gauge: connected QPs' packets since their peer's last, live QPs' and gone ones' */ \
	X(TX_RESENT_BYTES, \
	  "tx_resent_bytes") /* payload sent again (READ: asked again) */ \
	X(TX_DELIVERED_BYTES, \
	  "tx_delivered_bytes") /* of RC WQEs completed successfully */ \
	/* docs/transport.md, "End-to-end credits" */ \
	X(TX_CREDIT_ACKS, \
	  "tx_credit_acks") /* ACKs sent to say receives were posted */ \
	X(CREDIT_WAITS, \
	  "credit_waits") /* a SEND waited: the peer had no receive WQE */ \
	X(CREDIT_PROBES, \
	  "credit_probes") /* one went without room, no word having come */ \
	/* net/share.c: the shared device */ \
	X(DROP_NO_OWNER, \
	  "drop_no_owner") /* for a QPN no member of the address has */ \
	X(SHARE_FWD_OUT, "share_fwd_out") /* came here, sent on to its owner */ \
	X(SHARE_FWD_IN, "share_fwd_in")	  /* came from another member */ \
	X(SHARE_FWD_HELD, \
	  "share_fwd_held") /* waited for room in the owner's queue */ \
	X(SHARE_FWD_LOST, \
	  "share_fwd_lost") /* the owner's queue stayed full: dropped */ \
	X(SHARE_REORDERS, \
	  "share_reorders") /* a probe moved us in the registry */ \
	/* net/local.c: the same-host path */ \
	X(TX_LOCAL_PKTS, \
	  "tx_local_pkts") /* sent through a shared-memory ring */ \
	X(RX_LOCAL_PKTS, "rx_local_pkts") /* received from one */ \
	X(DROP_LOCAL_BAD, \
	  "drop_local_bad") /* a ring's index or length was impossible */ \
	X(LOCAL_FULL_DROPS, \
	  "local_full_drops") /* a peer's ring and our queue for it were full: lost */ \
	X(LOCAL_CONNECTS, "local_connects") /* rings we got to send on */ \
	X(LOCAL_MISSES, \
	  "local_misses") /* ring names asked for and not found: UDP */ \
	X(LOCAL_ACCEPTS, "local_accepts") /* rings we made for a sender */ \
	X(LOCAL_DOORBELLS, \
	  "local_doorbells") /* wake-ups we wrote to a sleeping peer */ \
	X(LOCAL_WAKEUPS, "local_wakeups") /* a peer woke us */ \
	X(LOCAL_QUEUED, \
	  "local_queued") /* waited in a full ring's overflow queue */ \
	X(LOCAL_ROOM_BELLS, \
	  "local_room_bells") /* wake-ups we wrote to a sender waiting for room */ \
	/* net/udp.c, net/local.c: ICRCs packet IO computed (uroce_net_icrc) */ \
	X(ICRC_FILLS, "icrc_fills") /* for the socket, a capture, a member */ \
	/* engine/cc.c: ECN and congestion control (docs/congestion.md) */ \
	X(RX_ECN_CE, "rx_ecn_ce") /* packets that arrived marked CE */ \
	X(CNP_LIMITED, \
	  "cnp_limited")		/* CE marks answered by no CNP: the QP sent one less than UROCE_CNP_US before */ \
	X(CC_RATE_CUTS, "cc_rate_cuts") /* CNPs that cut a QP's rate */ \
	X(CC_RECOVERED, \
	  "cc_recovered") /* cut QPs back to their rate before the first cut: unpaced */ \
	X(CC_DELAY_CUTS, \
	  "cc_delay_cuts") /* RTT samples above the delay target that cut a rate */ \
	X(CC_DELAY_FALLBACKS, \
	  "cc_delay_fallbacks") /* delay control left to loss-based: cuts did not drain the queue */ \
	/* what went on and came off the wire, by opcode class (net/pcap.c): \
	 * per class a packet and a byte counter, in enum uroce_pkt_class \
	 * order; bytes are BTH through ICRC */ \
	X(TX_SEND_PKTS, "tx_send_pkts") \
	X(TX_SEND_BYTES, "tx_send_bytes") \
	X(TX_WRITE_PKTS, "tx_write_pkts") \
	X(TX_WRITE_BYTES, "tx_write_bytes") \
	X(TX_READ_REQ_PKTS, "tx_read_req_pkts") \
	X(TX_READ_REQ_BYTES, "tx_read_req_bytes") \
	X(TX_READ_RESP_PKTS, "tx_read_resp_pkts") \
	X(TX_READ_RESP_BYTES, "tx_read_resp_bytes") \
	X(TX_ATOMIC_PKTS, "tx_atomic_pkts") \
	X(TX_ATOMIC_BYTES, "tx_atomic_bytes") \
	X(TX_ACK_PKTS, "tx_ack_pkts") \
	X(TX_ACK_BYTES, "tx_ack_bytes") \
	X(TX_CNP_PKTS, "tx_cnp_pkts") \
	X(TX_CNP_BYTES, "tx_cnp_bytes") \
	X(TX_OTHER_PKTS, "tx_other_pkts") \
	X(TX_OTHER_BYTES, "tx_other_bytes") \
	X(RX_SEND_PKTS, "rx_send_pkts") \
	X(RX_SEND_BYTES, "rx_send_bytes") \
	X(RX_WRITE_PKTS, "rx_write_pkts") \
	X(RX_WRITE_BYTES, "rx_write_bytes") \
	X(RX_READ_REQ_PKTS, "rx_read_req_pkts") \
	X(RX_READ_REQ_BYTES, "rx_read_req_bytes") \
	X(RX_READ_RESP_PKTS, "rx_read_resp_pkts") \
	X(RX_READ_RESP_BYTES, "rx_read_resp_bytes") \
	X(RX_ATOMIC_PKTS, "rx_atomic_pkts") \
	X(RX_ATOMIC_BYTES, "rx_atomic_bytes") \
	X(RX_ACK_PKTS, "rx_ack_pkts") \
	X(RX_ACK_BYTES, "rx_ack_bytes") \
	X(RX_CNP_PKTS, "rx_cnp_pkts") \
	X(RX_CNP_BYTES, "rx_cnp_bytes") \
	X(RX_OTHER_PKTS, "rx_other_pkts") \
	X(RX_OTHER_BYTES, "rx_other_bytes") \
	/* engine/progress.c: who woke for packets (docs/events.md) */ \
	X(PROG_WAKEUPS, \
	  "prog_wakeups") /* the progress thread woke to packets */ \
	X(APP_TAKEOVERS, \
	  "app_takeovers") /* a spinning poll took the socket from it */ \
	X(WAIT_SLEEPS, "wait_sleeps") /* a thread in ibv_get_cq_event slept */ \
	X(WAIT_RX, "wait_rx")	      /* ... woke to packets and took them */ \
	X(WAIT_SPIN_RX, \
	  "wait_spin_rx") /* ... found its event spinning, before it slept */ \
	/* ... did not spin: its last wait was long, the governor said no \
	 * (engine/spin.h); its spin stopped: preempted, or its length \
	 * over; a look of it received but found no event */ \
	X(WAIT_SPIN_SKIP_LONG, "wait_spin_skip_long") \
	X(WAIT_SPIN_SKIP_GOV, "wait_spin_skip_gov") \
	X(WAIT_SPIN_PREEMPT, "wait_spin_preempt") \
	X(WAIT_SPIN_TIMEOUT, "wait_spin_timeout") \
	X(WAIT_SPIN_PKTS, "wait_spin_pkts") \
	/* engine/progress.c: the engine's timer passes, those that \
	 * found no held ACK, no deadline due, and those an application's \
	 * poll ran (app_timers) */ \
	X(TIMER_PASSES, "timer_passes") \
	X(TIMER_IDLE_PASSES, "timer_idle_passes") \
	X(TIMER_APP_PASSES, "timer_app_passes")

#endif /* UROCE_CORE_COUNTERS_H */
