// SPDX-License-Identifier: MIT
/*
 * Enum-to-text and rate conversion helpers.  The wording of the strings is
 * ABI in practice: programs print them and scripts grep for them, so they
 * match libibverbs word for word.
 */
#include <infiniband/verbs.h>

#include "uroce.h"

static const char *const node_type_names[] = {
	[IBV_NODE_CA] = "InfiniBand channel adapter",
	[IBV_NODE_SWITCH] = "InfiniBand switch",
	[IBV_NODE_ROUTER] = "InfiniBand router",
	[IBV_NODE_RNIC] = "iWARP NIC",
	[IBV_NODE_USNIC] = "usNIC",
	[IBV_NODE_USNIC_UDP] = "usNIC UDP",
	[IBV_NODE_UNSPECIFIED] = "unspecified",
};

static const char *const port_state_names[] = {
	[IBV_PORT_NOP] = "no state change (NOP)",
	[IBV_PORT_DOWN] = "down",
	[IBV_PORT_INIT] = "init",
	[IBV_PORT_ARMED] = "armed",
	[IBV_PORT_ACTIVE] = "active",
	[IBV_PORT_ACTIVE_DEFER] = "active defer",
};

static const char *const event_type_names[] = {
	[IBV_EVENT_CQ_ERR] = "CQ error",
	[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
	[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
	[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
	[IBV_EVENT_COMM_EST] = "communication established",
	[IBV_EVENT_SQ_DRAINED] = "send queue drained",
	[IBV_EVENT_PATH_MIG] = "path migrated",
	[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
	[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
	[IBV_EVENT_PORT_ACTIVE] = "port active",
	[IBV_EVENT_PORT_ERR] = "port error",
	[IBV_EVENT_LID_CHANGE] = "LID change",
	[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
	[IBV_EVENT_SM_CHANGE] = "SM change",
	[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
	[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
	[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
	[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
	[IBV_EVENT_GID_CHANGE] = "GID table change",
	[IBV_EVENT_WQ_FATAL] = "WQ fatal",
};

static const char *const wc_status_names[] = {
	[IBV_WC_SUCCESS] = "success",
	[IBV_WC_LOC_LEN_ERR] = "local length error",
	[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
	[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
	[IBV_WC_LOC_PROT_ERR] = "local protection error",
	[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
	[IBV_WC_MW_BIND_ERR] = "memory management operation error",
	[IBV_WC_BAD_RESP_ERR] = "bad response error",
	[IBV_WC_LOC_ACCESS_ERR] = "local access error",
	[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
	[IBV_WC_REM_ACCESS_ERR] = "remote access error",
	[IBV_WC_REM_OP_ERR] = "remote operation error",
	[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
	[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
	[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
	[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
	[IBV_WC_REM_ABORT_ERR] = "aborted error",
	[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
	[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
	[IBV_WC_FATAL_ERR] = "fatal error",
	[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
	[IBV_WC_GENERAL_ERR] = "general error",
	[IBV_WC_TM_ERR] = "TM error",
	[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
};

/* Out-of-range values (and holes) read "unknown", as in libibverbs. */
static const char *lookup(const char *const *names, size_t n, long v)
{
	if (v < 0 || (size_t)v >= n || !names[v])
		return "unknown";
	return names[v];
}

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	return lookup(node_type_names, UROCE_ARRAY_SIZE(node_type_names),
		      node_type);
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	return lookup(port_state_names, UROCE_ARRAY_SIZE(port_state_names),
		      port_state);
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	return lookup(event_type_names, UROCE_ARRAY_SIZE(event_type_names),
		      event);
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	return lookup(wc_status_names, UROCE_ARRAY_SIZE(wc_status_names),
		      status);
}

/*
 * One row per IB static rate: its multiple of the 2.5 Gb/s 1x SDR lane
 * (0: not a whole multiple, so ibv_rate_to_mult() says -1) and its data
 * rate in Mb/s as libibverbs reports it (FDR and EDR rows carry their
 * 64b/66b encoding, hence 14062, 25781, 103125 ...).
 */
static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} rate_table[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },
	{ IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },
	{ IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },
	{ IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },
	{ IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },
	{ IBV_RATE_14_GBPS, 0, 14062 },
	{ IBV_RATE_56_GBPS, 0, 56250 },
	{ IBV_RATE_112_GBPS, 0, 112500 },
	{ IBV_RATE_168_GBPS, 0, 168750 },
	{ IBV_RATE_25_GBPS, 0, 25781 },
	{ IBV_RATE_100_GBPS, 0, 103125 },
	{ IBV_RATE_200_GBPS, 0, 206250 },
	{ IBV_RATE_300_GBPS, 0, 309375 },
	{ IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },
	{ IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },
	{ IBV_RATE_800_GBPS, 320, 850000 },
	{ IBV_RATE_1200_GBPS, 480, 1275000 },
};

int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < UROCE_ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].rate == rate)
			return rate_table[i].mult ? rate_table[i].mult : -1;
	return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	if (mult <= 0)
		return IBV_RATE_MAX;
	for (size_t i = 0; i < UROCE_ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].mult == mult)
			return rate_table[i].rate;
	return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < UROCE_ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].rate == rate)
			return rate_table[i].mbps;
	return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	if (mbps <= 0)
		return IBV_RATE_MAX;
	for (size_t i = 0; i < UROCE_ARRAY_SIZE(rate_table); i++)
		if (rate_table[i].mbps == mbps)
			return rate_table[i].rate;
	return IBV_RATE_MAX;
}
