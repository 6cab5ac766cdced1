# SPDX-License-Identifier: MIT
"""Shared helpers for the pyverbs tests (issue 3: the rest of the verbs).

Every test runs inside one process, on the one device that process owns:
two QPs of the same device are connected to each other, with address
handles that are global (is_global=1, sgid_index 0, dgid = our own GID).

No sleeps: completions are busy-polled with a deadline (polling an empty CQ
also drives our engine's receive path), async events are waited for with
select() on the context's async_fd, also with a deadline.  When a test
needs to know that a packet has been *processed and dropped*, it sends a
"fence" packet after it on the same device and waits for that one: packets
leave one socket in order and the engine receives them in order.
"""

import ctypes
import ipaddress
import os
import select
import struct
import time
import unittest

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context, get_device_list
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr, QPInitAttrEx, QPEx
from pyverbs.wr import SGE, RecvWR, SendWR

TIMEOUT = float(os.environ.get('UROCE_PV_TIMEOUT', '10'))
PORT = 1
GRH_SIZE = 40
QKEY = 0x11111111
PSN_A = 0x123456
PSN_B = 0x0abcde

# The ABI offsets we read through ctypes (struct layouts are ABI, fixed by
# libibverbs' verbs.h; checked at run time against values pyverbs gives us).
CTX_CMD_FD_OFF = 264        # offsetof(struct ibv_context, cmd_fd)
CTX_ASYNC_FD_OFF = 268      # offsetof(struct ibv_context, async_fd)
QP_NUM_OFF = 52             # offsetof(struct ibv_qp, qp_num)
EV_TYPE_OFF = 8             # offsetof(struct ibv_async_event, event_type)

WC_STATUS_NAMES = {getattr(e, n): n for n in dir(e)
                   if n.startswith('IBV_WC_') and n.endswith('_ERR')}
WC_STATUS_NAMES[e.IBV_WC_SUCCESS] = 'IBV_WC_SUCCESS'
EVENT_NAMES = {getattr(e, n): n for n in dir(e) if n.startswith('IBV_EVENT_')}


def status_name(s):
    return WC_STATUS_NAMES.get(s, str(s))


def event_name(t):
    return EVENT_NAMES.get(t, str(t))


def device_name():
    devs = get_device_list()
    if not devs:
        raise unittest.SkipTest('no RDMA device')
    names = [d.name.decode() for d in devs]
    for n in names:
        if n.startswith('uroce'):
            return n
    return names[0]


# ---------------------------------------------------------------- memory peeks

_readable = None


def _readable_ranges():
    global _readable
    if _readable is None:
        rs = []
        with open('/proc/self/maps') as f:
            for line in f:
                parts = line.split()
                lo, hi = (int(x, 16) for x in parts[0].split('-'))
                if parts[1][0] == 'r':
                    rs.append((lo, hi))
        _readable = rs
    return _readable


def _is_readable(addr, n):
    for lo, hi in _readable_ranges():
        if lo <= addr and addr + n <= hi:
            return True
    return False


def _u32(addr):
    return ctypes.c_uint32.from_address(addr).value


def _find_ptr_in(obj, check, words=24):
    """Find a C pointer field of a Cython object by scanning its struct
    (starts at id(obj)) for a word that points at readable memory and passes
    check(ptr)."""
    global _readable
    base = id(obj)
    for refresh in (False, True):
        if refresh:
            _readable = None
        for i in range(2, words):
            if not _is_readable(base + 8 * i, 8):
                break
            p = ctypes.c_uint64.from_address(base + 8 * i).value
            if p and p % 8 == 0 and _is_readable(p, 512) and check(p):
                return p
    return None


def context_ptr(ctx):
    cmd_fd = ctx.cmd_fd
    p = _find_ptr_in(ctx, lambda p: ctypes.c_int32.from_address(
        p + CTX_CMD_FD_OFF).value == cmd_fd and ctypes.c_int32.from_address(
        p + CTX_ASYNC_FD_OFF).value >= 0)
    if p is None:
        raise RuntimeError('cannot locate struct ibv_context in pyverbs Context')
    return p


def async_fd(ctx):
    return ctypes.c_int32.from_address(context_ptr(ctx) + CTX_ASYNC_FD_OFF).value


def qp_ptr(qp):
    """The struct ibv_qp * (== struct ibv_qp_ex * for a QPEx) of a QP."""
    num = qp.qp_num
    p = _find_ptr_in(qp, lambda p: _u32(p + QP_NUM_OFF) == num)
    if p is None:
        raise RuntimeError('cannot locate struct ibv_qp in pyverbs QP')
    return p


def verbs_ptr(obj, ctx):
    """The C object (struct ibv_cq / ibv_srq / ibv_qp ...) a pyverbs object
    wraps: the first pointer field of the object that points at a struct
    whose first member is our struct ibv_context *."""
    cp = context_ptr(ctx)
    p = _find_ptr_in(obj, lambda p: ctypes.c_uint64.from_address(p).value == cp)
    if p is None:
        raise RuntimeError(f'cannot locate the C object of {type(obj)}')
    return p


def code_in_libibverbs(addr):
    """Whether addr lies in an executable mapping of libibverbs.so."""
    with open('/proc/self/maps') as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6 or 'x' not in parts[1]:
                continue
            if not os.path.basename(parts[5]).startswith('libibverbs.so'):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split('-'))
            if lo <= addr < hi:
                return True
    return False


def event_element(ev):
    """(event_type, element pointer) read from pyverbs' AsyncEvent, whose
    struct ibv_async_event is stored inline in the object."""
    global _readable
    base = id(ev)
    t = ev.event_type
    # the object may lie in memory mapped since the maps were read
    for refresh in (False, True):
        if refresh:
            _readable = None
        for i in range(2, 12):
            off = base + 8 * i
            if not _is_readable(off, 16):
                break
            if ctypes.c_int32.from_address(off + EV_TYPE_OFF).value == t:
                return ctypes.c_uint64.from_address(off).value
    raise RuntimeError('cannot locate ibv_async_event in AsyncEvent')


# ---------------------------------------------------------------- polling

class PollError(AssertionError):
    pass


def poll_cq(cq, n=1, timeout=TIMEOUT):
    """Poll exactly n completions (or fail after timeout seconds)."""
    wcs = []
    deadline = time.monotonic() + timeout
    while len(wcs) < n:
        got, lst = cq.poll(n - len(wcs))
        if got:
            wcs.extend(lst[:got])
            continue
        if time.monotonic() > deadline:
            raise PollError(f'timeout: {len(wcs)} of {n} completions after '
                            f'{timeout}s: ' + ', '.join(
                                f'(wr_id={w.wr_id} {status_name(w.status)})'
                                for w in wcs))
    return wcs


def poll_empty(cq):
    got, _ = cq.poll(1)
    return got == 0


class AsyncEvents:
    """Reads async events with a deadline and acks every one it reads."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.fd = async_fd(ctx)
        self.seen = []

    def get(self, timeout=TIMEOUT):
        """Next event as (event_type, element pointer), or None on timeout."""
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return None
        ev = self.ctx.get_async_event()
        t = ev.event_type
        try:
            elem = event_element(ev)
        finally:
            # acked whatever happens: an unacked event keeps its QP's
            # destroy waiting forever, as libibverbs' does
            ev.ack()
        self.seen.append((t, elem))
        return t, elem

    def wait_for(self, event_type, qp=None, obj=None, timeout=TIMEOUT):
        """Wait for an event of that type (for that QP, or that CQ/SRQ
        object, if given); other events seen meanwhile are recorded in
        self.seen."""
        deadline = time.monotonic() + timeout
        want_qpn = qp.qp_num if qp is not None else None
        want_ptr = verbs_ptr(obj, self.ctx) if obj is not None else None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            got = self.get(left)
            if got is None:
                break
            t, elem = got
            if t != event_type:
                continue
            if want_qpn is not None and _u32(elem + QP_NUM_OFF) != want_qpn:
                continue
            if want_ptr is not None and elem != want_ptr:
                continue
            return elem
        raise AssertionError(
            f'no {event_name(event_type)} within {timeout}s; saw '
            f'{[event_name(t) for t, _ in self.seen]}')

    def drain(self):
        while self.get(0) is not None:
            pass

    def pending(self):
        r, _, _ = select.select([self.fd], [], [], 0)
        return bool(r)


# ---------------------------------------------------------------- fixtures

def gid_ipv4(gid):
    """The IPv4 address in an IPv4-mapped GID (pyverbs GID object)."""
    ip = ipaddress.IPv6Address(str(gid.gid) if hasattr(gid, 'gid') else str(gid))
    if ip.ipv4_mapped is None:
        raise unittest.SkipTest(f'GID {ip} is not IPv4-mapped')
    return ip.ipv4_mapped


def ah_attr(gid):
    gr = GlobalRoute(dgid=gid, sgid_index=0, hop_limit=64)
    return AHAttr(is_global=1, port_num=PORT, gr=gr)


class Endpoint:
    """A QP with its own CQs and a registered buffer."""

    def __init__(self, qp, scq, rcq, mr):
        self.qp = qp
        self.scq = scq
        self.rcq = rcq
        self.mr = mr

    @property
    def qpn(self):
        return self.qp.qp_num


class VerbsTestCase(unittest.TestCase):
    """One context and PD per test; helpers to build connected QP pairs."""

    BUF = 4096

    def setUp(self):
        self.ctx = Context(name=device_name())
        self.pd = PD(self.ctx)
        self.gid = self.ctx.query_gid(PORT, 0)
        self.events = AsyncEvents(self.ctx)

    def tearDown(self):
        # Unacknowledged async events would keep a QP's destroy waiting.
        self.events.drain()
        self.ctx.close()

    # -- resources
    def cq(self, cqe=64):
        return CQ(self.ctx, cqe, None, None, 0)

    def mr(self, length=None, access=e.IBV_ACCESS_LOCAL_WRITE, fill=None):
        mr = MR(self.pd, length or self.BUF, access)
        if fill is not None:
            mr.write(fill * (mr.length // len(fill)), mr.length)
        return mr

    def read(self, mr, length, offset=0):
        return bytes(mr.read(length, offset))

    def qp(self, qp_type, scq, rcq, srq=None, max_send_wr=64, max_recv_wr=64,
           max_inline=0, sq_sig_all=0):
        cap = QPCap(max_send_wr=max_send_wr,
                    max_recv_wr=0 if srq is not None else max_recv_wr,
                    max_send_sge=2, max_recv_sge=2, max_inline_data=max_inline)
        attr = QPInitAttr(qp_type=qp_type, scq=scq, rcq=rcq, srq=srq, cap=cap,
                          sq_sig_all=sq_sig_all)
        return QP(self.pd, attr)

    def qp_ex(self, qp_type, scq, rcq, send_ops_flags):
        cap = QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=2,
                    max_recv_sge=2)
        attr = QPInitAttrEx(qp_type=qp_type, scq=scq, rcq=rcq, cap=cap,
                            pd=self.pd, send_ops_flags=send_ops_flags,
                            comp_mask=e.IBV_QP_INIT_ATTR_PD |
                            e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
        # Issue 3 requires these ops: a refusal is a failure, not a skip.
        try:
            return QPEx(self.ctx, attr)
        except PyverbsRDMAError as ex:
            raise AssertionError(f'ibv_create_qp_ex(send_ops_flags='
                                 f'{send_ops_flags:#x}) failed: {ex}')

    def endpoint(self, qp_type, access=e.IBV_ACCESS_LOCAL_WRITE, srq=None,
                 send_ops_flags=None, rcq=None, **kw):
        scq = self.cq()
        rcq = rcq or self.cq()
        if send_ops_flags is not None:
            qp = self.qp_ex(qp_type, scq, rcq, send_ops_flags)
        else:
            qp = self.qp(qp_type, scq, rcq, srq=srq, **kw)
        return Endpoint(qp, scq, rcq, self.mr(access=access))

    # -- state transitions
    def connect(self, qp, dest_qpn, sq_psn, rq_psn,
                access=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
                e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC,
                rnr_retry=7, retry_cnt=7, timeout=14, min_rnr_timer=1,
                to_rts=True):
        """RESET -> INIT -> RTR (-> RTS) for an RC or UC QP."""
        a = QPAttr(port_num=PORT)
        a.pkey_index = 0
        a.qp_access_flags = access
        qp.to_init(a)
        a = QPAttr(port_num=PORT)
        a.path_mtu = e.IBV_MTU_1024
        a.dest_qp_num = dest_qpn
        a.rq_psn = rq_psn
        a.max_dest_rd_atomic = 4
        a.min_rnr_timer = min_rnr_timer
        a.ah_attr = ah_attr(self.gid)
        qp.to_rtr(a)
        if to_rts:
            a.sq_psn = sq_psn
            a.timeout = timeout
            a.retry_cnt = retry_cnt
            a.rnr_retry = rnr_retry
            a.max_rd_atomic = 4
            qp.to_rts(a)

    def pair(self, qp_type=e.IBV_QPT_RC, a_kw=None, b_kw=None, conn_a=None,
             conn_b=None):
        """Two endpoints connected to each other (A requester, B responder)."""
        a = self.endpoint(qp_type, **(a_kw or {}))
        b = self.endpoint(qp_type, **(b_kw or {}))
        self.connect(a.qp, b.qpn, PSN_A, PSN_B, **(conn_a or {}))
        self.connect(b.qp, a.qpn, PSN_B, PSN_A, **(conn_b or {}))
        return a, b

    def ud_qp(self, ep_kw=None, qkey=QKEY, to_rts=True):
        ep = self.endpoint(e.IBV_QPT_UD, **(ep_kw or {}))
        if to_rts:
            self.ud_to_rts(ep.qp, qkey)
        return ep

    def ud_to_init(self, qp, qkey=QKEY):
        a = QPAttr(port_num=PORT)
        a.pkey_index = 0
        a.qkey = qkey
        qp.to_init(a)

    def ud_to_rts(self, qp, qkey=QKEY):
        a = QPAttr(port_num=PORT)
        a.pkey_index = 0
        a.qkey = qkey
        a.sq_psn = 0
        qp.to_rts(a)

    def ah(self):
        return AH(self.pd, attr=ah_attr(self.gid))

    def qp_state(self, qp):
        attr, _ = qp.query(e.IBV_QP_STATE)
        return attr.qp_state

    # -- work requests
    @staticmethod
    def sge(mr, offset, length):
        return SGE(mr.buf + offset, length, mr.lkey)

    def post_recv(self, qp_or_srq, mr, offset, length, wr_id):
        wr = RecvWR(wr_id=wr_id, num_sge=1, sg=[self.sge(mr, offset, length)])
        qp_or_srq.post_recv(wr)

    def send_wr(self, mr, offset, length, wr_id=0, opcode=e.IBV_WR_SEND,
                flags=e.IBV_SEND_SIGNALED, imm=0):
        # pyverbs insists on one SGE; a zero-length one is a 0-byte message.
        return SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                      sg=[self.sge(mr, offset, length)], send_flags=flags,
                      imm_data=imm)

    def post_send(self, qp, mr, offset, length, wr_id=0,
                  opcode=e.IBV_WR_SEND, flags=e.IBV_SEND_SIGNALED, imm=0,
                  rkey=None, raddr=None, ud=None):
        wr = self.send_wr(mr, offset, length, wr_id, opcode, flags, imm)
        if rkey is not None:
            wr.set_wr_rdma(rkey, raddr)
        if ud is not None:
            ah, qpn, qkey = ud
            wr.set_wr_ud(ah, qpn, qkey)
        qp.post_send(wr)
        return wr

    def rdma_write(self, side, rkey, raddr, data, wr_id=1):
        """WRITE data, from the start of side's MR, to raddr under rkey;
        returns its completion."""
        side.mr.write(data, len(data))
        self.post_send(side.qp, side.mr, 0, len(data), wr_id=wr_id,
                       opcode=e.IBV_WR_RDMA_WRITE, rkey=rkey, raddr=raddr)
        wc, = poll_cq(side.scq)
        return wc

    def assertWC(self, wc, status=e.IBV_WC_SUCCESS, wr_id=None, opcode=None,
                 byte_len=None):
        self.assertEqual(wc.status, status,
                         f'status {status_name(wc.status)}, expected '
                         f'{status_name(status)} (wr_id {wc.wr_id})')
        if wr_id is not None:
            self.assertEqual(wc.wr_id, wr_id)
        if opcode is not None and status == e.IBV_WC_SUCCESS:
            self.assertEqual(wc.opcode, opcode)
        if byte_len is not None:
            self.assertEqual(wc.byte_len, byte_len)

    def assertRDMAError(self, errnos, fn, *args, **kw):
        """fn must raise PyverbsRDMAError with one of errnos."""
        if isinstance(errnos, int):
            errnos = (errnos,)
        with self.assertRaises(PyverbsRDMAError) as cm:
            fn(*args, **kw)
        self.assertIn(cm.exception.error_code, errnos,
                      f'errno {cm.exception.error_code} '
                      f'({os.strerror(cm.exception.error_code or 0)}), '
                      f'expected one of {errnos}: {cm.exception}')
        return cm.exception


def pattern(n, seed=0):
    return bytes((i * 7 + seed) & 0xff for i in range(n))


def ip_checksum(hdr):
    s = 0
    for i in range(0, len(hdr), 2):
        s += (hdr[i] << 8) | hdr[i + 1]
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s


def unpack_ipv4(hdr):
    (vihl, tos, tot_len, ident, frag, ttl, proto, csum,
     src, dst) = struct.unpack('!BBHHHBBH4s4s', hdr)
    return dict(vihl=vihl, tos=tos, tot_len=tot_len, ident=ident, frag=frag,
                ttl=ttl, proto=proto, csum=csum,
                src=ipaddress.IPv4Address(src), dst=ipaddress.IPv4Address(dst))
