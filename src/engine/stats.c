// SPDX-License-Identifier: MIT
/* Counter names, and the UROCE_STATS=1 summary printed at exit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <unistd.h>

#include "uroce.h"

const char *const uroce_counter_name[UROCE_CNT_NUM] = {
	[UROCE_CNT_TX_PKTS] = "tx_pkts",
	[UROCE_CNT_TX_BYTES] = "tx_bytes",
	[UROCE_CNT_RX_PKTS] = "rx_pkts",
	[UROCE_CNT_RX_BYTES] = "rx_bytes",
	[UROCE_CNT_TX_ACKS] = "tx_acks",
	[UROCE_CNT_RX_ACKS] = "rx_acks",
	[UROCE_CNT_TX_NAK_SEQ] = "tx_nak_seq",
	[UROCE_CNT_TX_NAK_INV] = "tx_nak_inv",
	[UROCE_CNT_TX_NAK_ACCESS] = "tx_nak_access",
	[UROCE_CNT_TX_NAK_OP] = "tx_nak_op",
	[UROCE_CNT_RX_NAK_SEQ] = "rx_nak_seq",
	[UROCE_CNT_RX_NAK_OTHER] = "rx_nak_other",
	[UROCE_CNT_RX_NAK_INV] = "rx_nak_inv",
	[UROCE_CNT_RX_NAK_ACCESS] = "rx_nak_access",
	[UROCE_CNT_RX_NAK_OP] = "rx_nak_op",
	[UROCE_CNT_TX_RNR_NAK] = "tx_rnr_nak",
	[UROCE_CNT_RX_RNR_NAK] = "rx_rnr_nak",
	[UROCE_CNT_RETRANSMITS] = "retransmits",
	[UROCE_CNT_TIMEOUTS] = "timeouts",
	[UROCE_CNT_DUPLICATES] = "duplicates",
	[UROCE_CNT_OUT_OF_SEQ] = "out_of_seq",
	[UROCE_CNT_DROP_BAD_ICRC] = "drop_bad_icrc",
	[UROCE_CNT_DROP_BAD_HDR] = "drop_bad_hdr",
	[UROCE_CNT_DROP_UNKNOWN_QP] = "drop_unknown_qp",
	[UROCE_CNT_DROP_BAD_STATE] = "drop_bad_state",
	[UROCE_CNT_DROP_BAD_SRC] = "drop_bad_src",
	[UROCE_CNT_DROP_TRUNCATED] = "drop_truncated",
	[UROCE_CNT_REM_ACCESS_ERR] = "rem_access_err",
	[UROCE_CNT_DROP_BAD_QKEY] = "drop_bad_qkey",
	[UROCE_CNT_DROP_NO_RECV] = "drop_no_recv_wqe",
	[UROCE_CNT_DROP_TOO_LONG] = "drop_too_long",
	[UROCE_CNT_UC_MSG_DROPS] = "uc_msg_drops",
	[UROCE_CNT_DUP_ATOMIC_LOST] = "dup_atomic_lost",
	[UROCE_CNT_XRC_BAD_SRQN] = "xrc_bad_srqn",
	[UROCE_CNT_FAULT_DROPS] = "fault_drops",
	[UROCE_CNT_FAULT_DUPS] = "fault_dups",
	[UROCE_CNT_FAULT_DELAYS] = "fault_delays",
	[UROCE_CNT_TX_GSO_SENDS] = "tx_gso_sends",
	[UROCE_CNT_TX_GSO_OFF] = "tx_gso_off",
	[UROCE_CNT_RX_GRO_BATCHES] = "rx_gro_batches",
	[UROCE_CNT_RX_MCAST_PKTS] = "rx_mcast_pkts",
	[UROCE_CNT_DROP_MCAST_NO_GROUP] = "drop_mcast_no_group",
	[UROCE_CNT_DROP_NO_OWNER] = "drop_no_owner",
	[UROCE_CNT_SHARE_FWD_OUT] = "share_fwd_out",
	[UROCE_CNT_SHARE_FWD_IN] = "share_fwd_in",
	[UROCE_CNT_SHARE_REORDERS] = "share_reorders",
	[UROCE_CNT_TX_SEND_PKTS] = "tx_send_pkts",
	[UROCE_CNT_TX_SEND_BYTES] = "tx_send_bytes",
	[UROCE_CNT_TX_WRITE_PKTS] = "tx_write_pkts",
	[UROCE_CNT_TX_WRITE_BYTES] = "tx_write_bytes",
	[UROCE_CNT_TX_READ_REQ_PKTS] = "tx_read_req_pkts",
	[UROCE_CNT_TX_READ_REQ_BYTES] = "tx_read_req_bytes",
	[UROCE_CNT_TX_READ_RESP_PKTS] = "tx_read_resp_pkts",
	[UROCE_CNT_TX_READ_RESP_BYTES] = "tx_read_resp_bytes",
	[UROCE_CNT_TX_ATOMIC_PKTS] = "tx_atomic_pkts",
	[UROCE_CNT_TX_ATOMIC_BYTES] = "tx_atomic_bytes",
	[UROCE_CNT_TX_ACK_PKTS] = "tx_ack_pkts",
	[UROCE_CNT_TX_ACK_BYTES] = "tx_ack_bytes",
	[UROCE_CNT_TX_CNP_PKTS] = "tx_cnp_pkts",
	[UROCE_CNT_TX_CNP_BYTES] = "tx_cnp_bytes",
	[UROCE_CNT_TX_OTHER_PKTS] = "tx_other_pkts",
	[UROCE_CNT_TX_OTHER_BYTES] = "tx_other_bytes",
	[UROCE_CNT_RX_SEND_PKTS] = "rx_send_pkts",
	[UROCE_CNT_RX_SEND_BYTES] = "rx_send_bytes",
	[UROCE_CNT_RX_WRITE_PKTS] = "rx_write_pkts",
	[UROCE_CNT_RX_WRITE_BYTES] = "rx_write_bytes",
	[UROCE_CNT_RX_READ_REQ_PKTS] = "rx_read_req_pkts",
	[UROCE_CNT_RX_READ_REQ_BYTES] = "rx_read_req_bytes",
	[UROCE_CNT_RX_READ_RESP_PKTS] = "rx_read_resp_pkts",
	[UROCE_CNT_RX_READ_RESP_BYTES] = "rx_read_resp_bytes",
	[UROCE_CNT_RX_ATOMIC_PKTS] = "rx_atomic_pkts",
	[UROCE_CNT_RX_ATOMIC_BYTES] = "rx_atomic_bytes",
	[UROCE_CNT_RX_ACK_PKTS] = "rx_ack_pkts",
	[UROCE_CNT_RX_ACK_BYTES] = "rx_ack_bytes",
	[UROCE_CNT_RX_CNP_PKTS] = "rx_cnp_pkts",
	[UROCE_CNT_RX_CNP_BYTES] = "rx_cnp_bytes",
	[UROCE_CNT_RX_OTHER_PKTS] = "rx_other_pkts",
	[UROCE_CNT_RX_OTHER_BYTES] = "rx_other_bytes",
};

__attribute__((destructor)) static void print_stats(void)
{
	const char *env = getenv("UROCE_STATS");
	struct uroce_dev *dev;
	char line[4096];
	size_t len;
	int i;

	if (!env || *env != '1')
		return;
	dev = uroce_dev_get();
	if (!dev || !dev->net_up)
		return;
	/* one write (within PIPE_BUF): processes that exit together, as MPI
	 * ranks do, share one stderr pipe and must not interleave */
	len = snprintf(line, sizeof(line), "uroce-stats:");
	for (i = 0; i < UROCE_CNT_NUM && len < sizeof(line); i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					" %s=%" PRIu64, uroce_counter_name[i],
					atomic_load(&dev->cnt[i]));
	if (len >= sizeof(line) - 1)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	if (write(STDERR_FILENO, line, len) < 0)
		return;
}
