// SPDX-License-Identifier: MIT
/*
 * The opcode table: for every RoCE v2 opcode, which extension headers follow
 * the BTH, where they sit, and what class of packet it is.  IBA 9.2 and
 * 9.3 give the header sets; FLUSH and ATOMIC WRITE (IBA 1.5 / Memory
 * Placement Extensions) follow Linux rdma_rxe.  Engines test the mask bits,
 * never lists of opcodes.
 */
#include "wire/wire.h"

#define BTH    UROCE_BTH_LEN
#define RETH   UROCE_RETH_LEN
#define AETH   UROCE_AETH_LEN
#define ATMETH UROCE_ATMETH_LEN
#define ATMACK UROCE_ATMACK_LEN
#define IMMDT  UROCE_IMMDT_LEN
#define IETH   UROCE_IETH_LEN
#define DETH   UROCE_DETH_LEN
#define FETH   UROCE_FETH_LEN
#define XRCETH UROCE_XRCETH_LEN

#define M(x) UROCE_M_##x
#define H(x) UROCE_HDR_##x

const struct uroce_opcode_info uroce_opcode[256] = {
	/* ---- RC requests ---- */
	[UROCE_OP_RC_SEND_FIRST] = {
		.name	= "RC_SEND_FIRST",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(FIRST) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_RC_SEND_MIDDLE] = {
		.name	= "RC_SEND_MIDDLE",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(MIDDLE) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_RC_SEND_LAST] = {
		.name	= "RC_SEND_LAST",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(LAST) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_RC_SEND_LAST_IMM] = {
		.name	= "RC_SEND_LAST_IMM",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(LAST) | M(IMMDT) |
			  M(PAYLOAD),
		.length	= BTH + IMMDT,
		.offset	= { [H(IMMDT)] = BTH, [H(PAYLOAD)] = BTH + IMMDT },
	},
	[UROCE_OP_RC_SEND_ONLY] = {
		.name	= "RC_SEND_ONLY",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(ONLY) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_RC_SEND_ONLY_IMM] = {
		.name	= "RC_SEND_ONLY_IMM",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(ONLY) | M(IMMDT) |
			  M(PAYLOAD),
		.length	= BTH + IMMDT,
		.offset	= { [H(IMMDT)] = BTH, [H(PAYLOAD)] = BTH + IMMDT },
	},
	[UROCE_OP_RC_WRITE_FIRST] = {
		.name	= "RC_WRITE_FIRST",
		.mask	= M(RC) | M(REQ) | M(WRITE) | M(FIRST) | M(RETH) |
			  M(PAYLOAD),
		.length	= BTH + RETH,
		.offset	= { [H(RETH)] = BTH, [H(PAYLOAD)] = BTH + RETH },
	},
	[UROCE_OP_RC_WRITE_MIDDLE] = {
		.name	= "RC_WRITE_MIDDLE",
		.mask	= M(RC) | M(REQ) | M(WRITE) | M(MIDDLE) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_RC_WRITE_LAST] = {
		.name	= "RC_WRITE_LAST",
		.mask	= M(RC) | M(REQ) | M(WRITE) | M(LAST) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_RC_WRITE_LAST_IMM] = {
		.name	= "RC_WRITE_LAST_IMM",
		.mask	= M(RC) | M(REQ) | M(WRITE) | M(LAST) | M(IMMDT) |
			  M(PAYLOAD),
		.length	= BTH + IMMDT,
		.offset	= { [H(IMMDT)] = BTH, [H(PAYLOAD)] = BTH + IMMDT },
	},
	[UROCE_OP_RC_WRITE_ONLY] = {
		.name	= "RC_WRITE_ONLY",
		.mask	= M(RC) | M(REQ) | M(WRITE) | M(ONLY) | M(RETH) |
			  M(PAYLOAD),
		.length	= BTH + RETH,
		.offset	= { [H(RETH)] = BTH, [H(PAYLOAD)] = BTH + RETH },
	},
	[UROCE_OP_RC_WRITE_ONLY_IMM] = {
		.name	= "RC_WRITE_ONLY_IMM",
		.mask	= M(RC) | M(REQ) | M(WRITE) | M(ONLY) | M(RETH) |
			  M(IMMDT) | M(PAYLOAD),
		.length	= BTH + RETH + IMMDT,
		.offset	= { [H(RETH)] = BTH, [H(IMMDT)] = BTH + RETH,
			    [H(PAYLOAD)] = BTH + RETH + IMMDT },
	},
	[UROCE_OP_RC_READ_REQUEST] = {
		.name	= "RC_READ_REQUEST",
		.mask	= M(RC) | M(REQ) | M(READ) | M(ONLY) | M(RETH),
		.length	= BTH + RETH,
		.offset	= { [H(RETH)] = BTH, [H(PAYLOAD)] = BTH + RETH },
	},

	/* ---- RC responses ---- */
	/* IBA 9.3.5.1: a middle read response carries no AETH */
	[UROCE_OP_RC_READ_RESPONSE_FIRST] = {
		.name	= "RC_READ_RESPONSE_FIRST",
		.mask	= M(RC) | M(READ) | M(FIRST) | M(AETH) | M(PAYLOAD),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[UROCE_OP_RC_READ_RESPONSE_MIDDLE] = {
		.name	= "RC_READ_RESPONSE_MIDDLE",
		.mask	= M(RC) | M(READ) | M(MIDDLE) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_RC_READ_RESPONSE_LAST] = {
		.name	= "RC_READ_RESPONSE_LAST",
		.mask	= M(RC) | M(READ) | M(LAST) | M(AETH) | M(PAYLOAD),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[UROCE_OP_RC_READ_RESPONSE_ONLY] = {
		.name	= "RC_READ_RESPONSE_ONLY",
		.mask	= M(RC) | M(READ) | M(ONLY) | M(AETH) | M(PAYLOAD),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[UROCE_OP_RC_ACK] = {
		.name	= "RC_ACK",
		.mask	= M(RC) | M(ACK) | M(ONLY) | M(AETH),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[UROCE_OP_RC_ATOMIC_ACK] = {
		.name	= "RC_ATOMIC_ACK",
		.mask	= M(RC) | M(ATOMIC) | M(ONLY) | M(AETH) | M(ATMACK),
		.length	= BTH + AETH + ATMACK,
		.offset	= { [H(AETH)] = BTH, [H(ATMACK)] = BTH + AETH,
			    [H(PAYLOAD)] = BTH + AETH + ATMACK },
	},

	/* ---- RC requests, continued ---- */
	[UROCE_OP_RC_CMP_SWAP] = {
		.name	= "RC_CMP_SWAP",
		.mask	= M(RC) | M(REQ) | M(ATOMIC) | M(ONLY) | M(ATMETH),
		.length	= BTH + ATMETH,
		.offset	= { [H(ATMETH)] = BTH, [H(PAYLOAD)] = BTH + ATMETH },
	},
	[UROCE_OP_RC_FETCH_ADD] = {
		.name	= "RC_FETCH_ADD",
		.mask	= M(RC) | M(REQ) | M(ATOMIC) | M(ONLY) | M(ATMETH),
		.length	= BTH + ATMETH,
		.offset	= { [H(ATMETH)] = BTH, [H(PAYLOAD)] = BTH + ATMETH },
	},
	[UROCE_OP_RC_SEND_LAST_INV] = {
		.name	= "RC_SEND_LAST_INV",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(LAST) | M(INV) |
			  M(IETH) | M(PAYLOAD),
		.length	= BTH + IETH,
		.offset	= { [H(IETH)] = BTH, [H(PAYLOAD)] = BTH + IETH },
	},
	[UROCE_OP_RC_SEND_ONLY_INV] = {
		.name	= "RC_SEND_ONLY_INV",
		.mask	= M(RC) | M(REQ) | M(SEND) | M(ONLY) | M(INV) |
			  M(IETH) | M(PAYLOAD),
		.length	= BTH + IETH,
		.offset	= { [H(IETH)] = BTH, [H(PAYLOAD)] = BTH + IETH },
	},
	/* FETH (selectivity and placement type) precedes the RETH */
	[UROCE_OP_RC_FLUSH] = {
		.name	= "RC_FLUSH",
		.mask	= M(RC) | M(REQ) | M(FLUSH) | M(ONLY) | M(FETH) |
			  M(RETH),
		.length	= BTH + FETH + RETH,
		.offset	= { [H(FETH)] = BTH, [H(RETH)] = BTH + FETH,
			    [H(PAYLOAD)] = BTH + FETH + RETH },
	},
	/* the 8 bytes to write travel as payload after the RETH */
	[UROCE_OP_RC_ATOMIC_WRITE] = {
		.name	= "RC_ATOMIC_WRITE",
		.mask	= M(RC) | M(REQ) | M(ATOMIC_WRITE) | M(ONLY) | M(RETH) |
			  M(PAYLOAD),
		.length	= BTH + RETH,
		.offset	= { [H(RETH)] = BTH, [H(PAYLOAD)] = BTH + RETH },
	},

	/* ---- UC: sends and writes only, no responses ---- */
	[UROCE_OP_UC_SEND_FIRST] = {
		.name	= "UC_SEND_FIRST",
		.mask	= M(UC) | M(REQ) | M(SEND) | M(FIRST) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_UC_SEND_MIDDLE] = {
		.name	= "UC_SEND_MIDDLE",
		.mask	= M(UC) | M(REQ) | M(SEND) | M(MIDDLE) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_UC_SEND_LAST] = {
		.name	= "UC_SEND_LAST",
		.mask	= M(UC) | M(REQ) | M(SEND) | M(LAST) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_UC_SEND_LAST_IMM] = {
		.name	= "UC_SEND_LAST_IMM",
		.mask	= M(UC) | M(REQ) | M(SEND) | M(LAST) | M(IMMDT) |
			  M(PAYLOAD),
		.length	= BTH + IMMDT,
		.offset	= { [H(IMMDT)] = BTH, [H(PAYLOAD)] = BTH + IMMDT },
	},
	[UROCE_OP_UC_SEND_ONLY] = {
		.name	= "UC_SEND_ONLY",
		.mask	= M(UC) | M(REQ) | M(SEND) | M(ONLY) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_UC_SEND_ONLY_IMM] = {
		.name	= "UC_SEND_ONLY_IMM",
		.mask	= M(UC) | M(REQ) | M(SEND) | M(ONLY) | M(IMMDT) |
			  M(PAYLOAD),
		.length	= BTH + IMMDT,
		.offset	= { [H(IMMDT)] = BTH, [H(PAYLOAD)] = BTH + IMMDT },
	},
	[UROCE_OP_UC_WRITE_FIRST] = {
		.name	= "UC_WRITE_FIRST",
		.mask	= M(UC) | M(REQ) | M(WRITE) | M(FIRST) | M(RETH) |
			  M(PAYLOAD),
		.length	= BTH + RETH,
		.offset	= { [H(RETH)] = BTH, [H(PAYLOAD)] = BTH + RETH },
	},
	[UROCE_OP_UC_WRITE_MIDDLE] = {
		.name	= "UC_WRITE_MIDDLE",
		.mask	= M(UC) | M(REQ) | M(WRITE) | M(MIDDLE) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_UC_WRITE_LAST] = {
		.name	= "UC_WRITE_LAST",
		.mask	= M(UC) | M(REQ) | M(WRITE) | M(LAST) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[UROCE_OP_UC_WRITE_LAST_IMM] = {
		.name	= "UC_WRITE_LAST_IMM",
		.mask	= M(UC) | M(REQ) | M(WRITE) | M(LAST) | M(IMMDT) |
			  M(PAYLOAD),
		.length	= BTH + IMMDT,
		.offset	= { [H(IMMDT)] = BTH, [H(PAYLOAD)] = BTH + IMMDT },
	},
	[UROCE_OP_UC_WRITE_ONLY] = {
		.name	= "UC_WRITE_ONLY",
		.mask	= M(UC) | M(REQ) | M(WRITE) | M(ONLY) | M(RETH) |
			  M(PAYLOAD),
		.length	= BTH + RETH,
		.offset	= { [H(RETH)] = BTH, [H(PAYLOAD)] = BTH + RETH },
	},
	[UROCE_OP_UC_WRITE_ONLY_IMM] = {
		.name	= "UC_WRITE_ONLY_IMM",
		.mask	= M(UC) | M(REQ) | M(WRITE) | M(ONLY) | M(RETH) |
			  M(IMMDT) | M(PAYLOAD),
		.length	= BTH + RETH + IMMDT,
		.offset	= { [H(RETH)] = BTH, [H(IMMDT)] = BTH + RETH,
			    [H(PAYLOAD)] = BTH + RETH + IMMDT },
	},

	/* ---- UD: single-packet sends, addressed by the DETH ---- */
	[UROCE_OP_UD_SEND_ONLY] = {
		.name	= "UD_SEND_ONLY",
		.mask	= M(UD) | M(REQ) | M(SEND) | M(ONLY) | M(DETH) |
			  M(PAYLOAD),
		.length	= BTH + DETH,
		.offset	= { [H(DETH)] = BTH, [H(PAYLOAD)] = BTH + DETH },
	},
	[UROCE_OP_UD_SEND_ONLY_IMM] = {
		.name	= "UD_SEND_ONLY_IMM",
		.mask	= M(UD) | M(REQ) | M(SEND) | M(ONLY) | M(DETH) |
			  M(IMMDT) | M(PAYLOAD),
		.length	= BTH + DETH + IMMDT,
		.offset	= { [H(DETH)] = BTH, [H(IMMDT)] = BTH + DETH,
			    [H(PAYLOAD)] = BTH + DETH + IMMDT },
	},

	/* ---- XRC (IBA 9.2, 9.3.7): RC's opcodes | 0xa0; every request
	 * carries an XRCETH right after the BTH, responses are RC's ---- */
	[0xa0] = {
		.name	= "XRC_SEND_FIRST",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(FIRST) | M(XRCETH) |
			  M(PAYLOAD),
		.length	= BTH + XRCETH,
		.offset	= { [H(XRCETH)] = BTH, [H(PAYLOAD)] = BTH + XRCETH },
	},
	[0xa1] = {
		.name	= "XRC_SEND_MIDDLE",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(MIDDLE) | M(XRCETH) |
			  M(PAYLOAD),
		.length	= BTH + XRCETH,
		.offset	= { [H(XRCETH)] = BTH, [H(PAYLOAD)] = BTH + XRCETH },
	},
	[0xa2] = {
		.name	= "XRC_SEND_LAST",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(LAST) | M(XRCETH) |
			  M(PAYLOAD),
		.length	= BTH + XRCETH,
		.offset	= { [H(XRCETH)] = BTH, [H(PAYLOAD)] = BTH + XRCETH },
	},
	[0xa3] = {
		.name	= "XRC_SEND_LAST_IMM",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(LAST) | M(XRCETH) |
			  M(IMMDT) | M(PAYLOAD),
		.length	= BTH + XRCETH + IMMDT,
		.offset	= { [H(XRCETH)] = BTH, [H(IMMDT)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + IMMDT },
	},
	[0xa4] = {
		.name	= "XRC_SEND_ONLY",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(ONLY) | M(XRCETH) |
			  M(PAYLOAD),
		.length	= BTH + XRCETH,
		.offset	= { [H(XRCETH)] = BTH, [H(PAYLOAD)] = BTH + XRCETH },
	},
	[0xa5] = {
		.name	= "XRC_SEND_ONLY_IMM",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(ONLY) | M(XRCETH) |
			  M(IMMDT) | M(PAYLOAD),
		.length	= BTH + XRCETH + IMMDT,
		.offset	= { [H(XRCETH)] = BTH, [H(IMMDT)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + IMMDT },
	},
	[0xa6] = {
		.name	= "XRC_WRITE_FIRST",
		.mask	= M(XRC) | M(REQ) | M(WRITE) | M(FIRST) | M(XRCETH) |
			  M(RETH) | M(PAYLOAD),
		.length	= BTH + XRCETH + RETH,
		.offset	= { [H(XRCETH)] = BTH, [H(RETH)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + RETH },
	},
	[0xa7] = {
		.name	= "XRC_WRITE_MIDDLE",
		.mask	= M(XRC) | M(REQ) | M(WRITE) | M(MIDDLE) | M(XRCETH) |
			  M(PAYLOAD),
		.length	= BTH + XRCETH,
		.offset	= { [H(XRCETH)] = BTH, [H(PAYLOAD)] = BTH + XRCETH },
	},
	[0xa8] = {
		.name	= "XRC_WRITE_LAST",
		.mask	= M(XRC) | M(REQ) | M(WRITE) | M(LAST) | M(XRCETH) |
			  M(PAYLOAD),
		.length	= BTH + XRCETH,
		.offset	= { [H(XRCETH)] = BTH, [H(PAYLOAD)] = BTH + XRCETH },
	},
	[0xa9] = {
		.name	= "XRC_WRITE_LAST_IMM",
		.mask	= M(XRC) | M(REQ) | M(WRITE) | M(LAST) | M(XRCETH) |
			  M(IMMDT) | M(PAYLOAD),
		.length	= BTH + XRCETH + IMMDT,
		.offset	= { [H(XRCETH)] = BTH, [H(IMMDT)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + IMMDT },
	},
	[0xaa] = {
		.name	= "XRC_WRITE_ONLY",
		.mask	= M(XRC) | M(REQ) | M(WRITE) | M(ONLY) | M(XRCETH) |
			  M(RETH) | M(PAYLOAD),
		.length	= BTH + XRCETH + RETH,
		.offset	= { [H(XRCETH)] = BTH, [H(RETH)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + RETH },
	},
	[0xab] = {
		.name	= "XRC_WRITE_ONLY_IMM",
		.mask	= M(XRC) | M(REQ) | M(WRITE) | M(ONLY) | M(XRCETH) |
			  M(RETH) | M(IMMDT) | M(PAYLOAD),
		.length	= BTH + XRCETH + RETH + IMMDT,
		.offset	= { [H(XRCETH)] = BTH, [H(RETH)] = BTH + XRCETH,
			    [H(IMMDT)] = BTH + XRCETH + RETH,
			    [H(PAYLOAD)] = BTH + XRCETH + RETH + IMMDT },
	},
	[0xac] = {
		.name	= "XRC_READ_REQUEST",
		.mask	= M(XRC) | M(REQ) | M(READ) | M(ONLY) | M(XRCETH) |
			  M(RETH),
		.length	= BTH + XRCETH + RETH,
		.offset	= { [H(XRCETH)] = BTH, [H(RETH)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + RETH },
	},
	[0xad] = {
		.name	= "XRC_READ_RESPONSE_FIRST",
		.mask	= M(XRC) | M(READ) | M(FIRST) | M(AETH) | M(PAYLOAD),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[0xae] = {
		.name	= "XRC_READ_RESPONSE_MIDDLE",
		.mask	= M(XRC) | M(READ) | M(MIDDLE) | M(PAYLOAD),
		.length	= BTH,
		.offset	= { [H(PAYLOAD)] = BTH },
	},
	[0xaf] = {
		.name	= "XRC_READ_RESPONSE_LAST",
		.mask	= M(XRC) | M(READ) | M(LAST) | M(AETH) | M(PAYLOAD),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[0xb0] = {
		.name	= "XRC_READ_RESPONSE_ONLY",
		.mask	= M(XRC) | M(READ) | M(ONLY) | M(AETH) | M(PAYLOAD),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[0xb1] = {
		.name	= "XRC_ACK",
		.mask	= M(XRC) | M(ACK) | M(ONLY) | M(AETH),
		.length	= BTH + AETH,
		.offset	= { [H(AETH)] = BTH, [H(PAYLOAD)] = BTH + AETH },
	},
	[0xb2] = {
		.name	= "XRC_ATOMIC_ACK",
		.mask	= M(XRC) | M(ATOMIC) | M(ONLY) | M(AETH) | M(ATMACK),
		.length	= BTH + AETH + ATMACK,
		.offset	= { [H(AETH)] = BTH, [H(ATMACK)] = BTH + AETH,
			    [H(PAYLOAD)] = BTH + AETH + ATMACK },
	},
	[0xb3] = {
		.name	= "XRC_CMP_SWAP",
		.mask	= M(XRC) | M(REQ) | M(ATOMIC) | M(ONLY) | M(XRCETH) |
			  M(ATMETH),
		.length	= BTH + XRCETH + ATMETH,
		.offset	= { [H(XRCETH)] = BTH, [H(ATMETH)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + ATMETH },
	},
	[0xb4] = {
		.name	= "XRC_FETCH_ADD",
		.mask	= M(XRC) | M(REQ) | M(ATOMIC) | M(ONLY) | M(XRCETH) |
			  M(ATMETH),
		.length	= BTH + XRCETH + ATMETH,
		.offset	= { [H(XRCETH)] = BTH, [H(ATMETH)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + ATMETH },
	},
	[0xb6] = {
		.name	= "XRC_SEND_LAST_INV",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(LAST) | M(INV) |
			  M(XRCETH) | M(IETH) | M(PAYLOAD),
		.length	= BTH + XRCETH + IETH,
		.offset	= { [H(XRCETH)] = BTH, [H(IETH)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + IETH },
	},
	[0xb7] = {
		.name	= "XRC_SEND_ONLY_INV",
		.mask	= M(XRC) | M(REQ) | M(SEND) | M(ONLY) | M(INV) |
			  M(XRCETH) | M(IETH) | M(PAYLOAD),
		.length	= BTH + XRCETH + IETH,
		.offset	= { [H(XRCETH)] = BTH, [H(IETH)] = BTH + XRCETH,
			    [H(PAYLOAD)] = BTH + XRCETH + IETH },
	},

	/* RoCE v2 annex A17.9.3: BTH, 16 reserved bytes, ICRC */
	[UROCE_OP_CNP] = {
		.name	= "CNP",
		.mask	= M(CNP),
		.length	= BTH + UROCE_CNP_RSVD_LEN,
		.offset	= { [H(PAYLOAD)] = BTH + UROCE_CNP_RSVD_LEN },
	},
};

uint32_t uroce_mtu_bytes(int ibv_mtu)
{
	/* IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5 */
	if (ibv_mtu < 1 || ibv_mtu > 5)
		return 0;
	return 128u << ibv_mtu;
}
