# SPDX-License-Identifier: MIT
"""Conformance with the reference devices (issue 13) and three verbs-front
bugs of issue 12, each written the way a program for kernel rxe or mlx5
would be: one access mask for the MR and the QP, keys kept across
ibv_rereg_mr, ibv_wr_* with other verbs inside, ODP atomics, a CQ that is
too small, an ibv_modify_qp that runs out of memory."""

import ctypes
import errno
import os
import struct
import subprocess
import sys
import unittest

import pyverbs.enums as e
from pyverbs.base import inc_rkey
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.qp import QPAttr

import uroce_pv as u

HERE = os.path.dirname(os.path.abspath(__file__))

# One mask for everything, as many programs write it.
REMOTE = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | \
    e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC
ONE_MASK = REMOTE | e.IBV_ACCESS_MW_BIND
ODP_MASK = REMOTE | e.IBV_ACCESS_ON_DEMAND


class IdentityTest(u.VerbsTestCase):
    """1: a device with vendor_id 0 reads as "no device" to test suites."""

    def check(self, attr):
        self.assertNotEqual(attr.vendor_id, 0, 'vendor_id 0')
        self.assertLessEqual(attr.vendor_id, 0xffffff, 'an OUI has 24 bits')
        self.assertNotEqual(attr.vendor_part_id, 0, 'vendor_part_id 0')
        self.assertNotEqual(attr.hw_ver, 0, 'hw_ver 0')
        fw = attr.fw_version.decode() if isinstance(attr.fw_version, bytes) \
            else attr.fw_version
        self.assertTrue(fw and fw.strip('0.'), f'fw_ver {fw!r}')

    def test_query_device(self):
        self.check(self.ctx.query_device())

    def test_query_device_ex(self):
        ex = self.ctx.query_device_ex()
        self.check(ex.orig_attr)
        attr = self.ctx.query_device()
        for f in ('vendor_id', 'vendor_part_id', 'hw_ver', 'fw_version'):
            self.assertEqual(getattr(ex.orig_attr, f), getattr(attr, f), f)


class OneAccessMaskTest(u.VerbsTestCase):
    """2: MR access bits in qp_access_flags are accepted and ignored."""

    def test_mr_bits_in_qp_access(self):
        mask = ONE_MASK | e.IBV_ACCESS_ON_DEMAND | e.IBV_ACCESS_ZERO_BASED
        a, b = self.pair(a_kw=dict(access=ODP_MASK),
                         b_kw=dict(access=ODP_MASK),
                         conn_a=dict(access=mask), conn_b=dict(access=mask))
        a.mr.write(b'one mask', 8)
        self.post_send(a.qp, a.mr, 0, 8, wr_id=1, opcode=e.IBV_WR_RDMA_WRITE,
                       rkey=b.mr.rkey, raddr=b.mr.buf + 100)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=1)
        self.assertEqual(self.read(b.mr, 8, 100), b'one mask')
        # and the QP's own bits still count: no remote write here (an
        # invalid request to rxe, IBA 9.7.5.1.1)
        c, d = self.pair(conn_b=dict(access=e.IBV_ACCESS_LOCAL_WRITE |
                                      e.IBV_ACCESS_ON_DEMAND |
                                      e.IBV_ACCESS_MW_BIND),
                         b_kw=dict(access=REMOTE))
        self.post_send(c.qp, c.mr, 0, 8, wr_id=2, opcode=e.IBV_WR_RDMA_WRITE,
                       rkey=d.mr.rkey, raddr=d.mr.buf)
        self.assertWC(u.poll_cq(c.scq)[0], e.IBV_WC_REM_INV_REQ_ERR, wr_id=2)

    def test_unknown_bits_still_refused(self):
        cq = self.cq()
        qp = self.qp(e.IBV_QPT_RC, cq, cq)
        a = QPAttr(port_num=u.PORT)
        a.pkey_index = 0
        a.qp_access_flags = REMOTE | (1 << 30)
        self.assertRDMAError(errno.EINVAL, qp.to_init, a)


class ReregTest(u.VerbsTestCase):
    """3: ibv_rereg_mr keeps lkey and rkey, as rxe and mlx5 do."""

    def test_change_access(self):
        a, b = self.pair()
        mr = self.mr(access=e.IBV_ACCESS_LOCAL_WRITE)
        keys = (mr.lkey, mr.rkey)
        mr.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0, REMOTE)
        self.assertEqual((mr.lkey, mr.rkey), keys, 'rereg changed the keys')
        wc = self.rdma_write(a, keys[1], mr.buf + 64, b'new access', 2)
        self.assertWC(wc, wr_id=2)
        self.assertEqual(self.read(mr, 10, 64), b'new access')
        # and back: the same rkey no longer grants remote write
        mr.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0,
                 e.IBV_ACCESS_LOCAL_WRITE)
        self.assertEqual((mr.lkey, mr.rkey), keys)
        self.assertWC(self.rdma_write(a, keys[1], mr.buf, b'x' * 8, 3),
                      e.IBV_WC_REM_ACCESS_ERR, wr_id=3)

    def test_change_translation(self):
        a, b = self.pair(b_kw=dict(access=REMOTE))
        mr = self.mr(access=REMOTE)
        keys = (mr.lkey, mr.rkey)
        buf = ctypes.create_string_buffer(8192)
        addr = ctypes.addressof(buf)
        mr.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, None, addr, 8192, 0)
        self.assertEqual((mr.lkey, mr.rkey), keys, 'rereg changed the keys')
        wc = self.rdma_write(a, keys[1], addr + 5000, b'moved', 1)
        self.assertWC(wc, wr_id=1)
        self.assertEqual(buf.raw[5000:5005], b'moved')
        # the lkey serves the new range locally too: a READ lands in it
        b.mr.write(b'READ!', 5)
        wr = u.SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                      sg=[u.SGE(addr + 6000, 5, keys[0])],
                      send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(b.mr.rkey, b.mr.buf)
        a.qp.post_send(wr)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=2)
        self.assertEqual(buf.raw[6000:6005], b'READ!')

    def test_change_pd(self):
        pd2 = PD(self.ctx)
        a, b = self.pair()
        mr = self.mr(access=REMOTE)
        keys = (mr.lkey, mr.rkey)
        mr.rereg(e.IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0)
        self.assertEqual((mr.lkey, mr.rkey), keys, 'rereg changed the keys')
        # b's QP is in the old PD: the MR is no longer its to serve
        wc = self.rdma_write(a, keys[1], mr.buf, b'wrong pd', 1)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR, wr_id=1)
        # locally too: the lkey in a WR of a QP of the old PD
        c, d = self.pair()
        self.post_send(c.qp, mr, 0, 8, wr_id=2)
        self.assertWC(u.poll_cq(c.scq)[0], e.IBV_WC_LOC_PROT_ERR, wr_id=2)
        # and back to the first PD: the same rkey works again
        mr.rereg(e.IBV_REREG_MR_CHANGE_PD, self.pd, 0, 0, 0)
        self.assertEqual((mr.lkey, mr.rkey), keys)
        f, g = self.pair()
        self.assertWC(self.rdma_write(f, keys[1], mr.buf, b'right pd', 3),
                      wr_id=3)
        self.assertEqual(self.read(mr, 8), b'right pd')


class WindowTest(u.VerbsTestCase):
    """4: memory window binds that rxe accepts."""

    def setUp(self):
        super().setUp()
        self.a, self.b = self.pair(b_kw=dict(access=ONE_MASK),
                                   conn_a=dict(access=ONE_MASK),
                                   conn_b=dict(access=ONE_MASK))

    def write(self, rkey, off, data, wr_id=1):
        return self.rdma_write(self.a, rkey, self.b.mr.buf + off, data, wr_id)

    def test_type1_one_mask(self):
        # the window's access given as the MR's whole mask: its local and
        # MW_BIND bits mean nothing for a window and are ignored
        mw = MW(self.pd, e.IBV_MW_TYPE_1)
        info = MWBindInfo(self.b.mr, self.b.mr.buf, self.b.mr.length,
                          ONE_MASK)
        self.b.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id=5))
        self.assertWC(u.poll_cq(self.b.scq)[0], wr_id=5,
                      opcode=e.IBV_WC_BIND_MW)
        self.assertWC(self.write(mw.rkey, 128, b'window'), wr_id=1)
        self.assertEqual(self.read(self.b.mr, 6, 128), b'window')

    def test_type1_bound_through_a_qp_of_another_pd(self):
        # a type 1 window belongs to its PD, not to the QP that binds it
        # (rxe checks the QP's PD for type 2 only, C10-72)
        pd2 = PD(self.ctx)
        cq = self.cq()
        qp2 = u.QP(pd2, u.QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                     cap=u.QPCap(max_send_wr=4,
                                                 max_recv_wr=4)))
        self.connect(qp2, self.a.qpn, u.PSN_B, u.PSN_A)
        mw = MW(self.pd, e.IBV_MW_TYPE_1)
        info = MWBindInfo(self.b.mr, self.b.mr.buf, 1024,
                          e.IBV_ACCESS_REMOTE_WRITE)
        qp2.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id=6))
        self.assertWC(u.poll_cq(cq)[0], wr_id=6, opcode=e.IBV_WC_BIND_MW)
        self.assertWC(self.write(mw.rkey, 0, b'via pd2'), wr_id=1)
        self.assertEqual(self.read(self.b.mr, 7), b'via pd2')

    def test_type2_one_mask_via_post_send(self):
        mw = MW(self.pd, e.IBV_MW_TYPE_2)
        wr = u.SendWR(wr_id=7, opcode=e.IBV_WR_BIND_MW,
                      send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(self.b.mr, self.b.mr.buf, 2048,
                                      ONE_MASK))
        self.b.qp.post_send(wr)
        self.assertWC(u.poll_cq(self.b.scq)[0], wr_id=7,
                      opcode=e.IBV_WC_BIND_MW)
        self.assertWC(self.write(wr.rkey, 2000, b'type2'), wr_id=1)
        self.assertEqual(self.read(self.b.mr, 5, 2000), b'type2')

    def test_type2_invalidate_unbound(self):
        # rxe invalidates a type 2 window that is not bound (FREE) without
        # complaint; a program that invalidates before every rebind does it
        mw = MW(self.pd, e.IBV_MW_TYPE_2)
        inv = u.SendWR(wr_id=8, opcode=e.IBV_WR_LOCAL_INV,
                       send_flags=e.IBV_SEND_SIGNALED)
        inv.imm_data = mw.rkey
        self.b.qp.post_send(inv)
        self.assertWC(u.poll_cq(self.b.scq)[0], wr_id=8,
                      opcode=e.IBV_WC_LOCAL_INV)
        wr = u.SendWR(wr_id=9, opcode=e.IBV_WR_BIND_MW,
                      send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(self.b.mr, self.b.mr.buf, 64,
                                      e.IBV_ACCESS_REMOTE_WRITE))
        self.b.qp.post_send(wr)
        self.assertWC(u.poll_cq(self.b.scq)[0], wr_id=9)
        self.assertWC(self.write(wr.rkey, 0, b'rebound'), wr_id=1)

    def test_zero_based_type1_still_refused(self):
        mw = MW(self.pd, e.IBV_MW_TYPE_1)
        info = MWBindInfo(self.b.mr, self.b.mr.buf, 64,
                          e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_ZERO_BASED)
        try:
            self.b.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id=4))
        except u.PyverbsRDMAError as ex:
            self.assertEqual(ex.error_code, errno.EINVAL)
            return
        self.assertWC(u.poll_cq(self.b.scq)[0], e.IBV_WC_MW_BIND_ERR,
                      wr_id=4)


# 5: ibv_wr_start ... ibv_wr_complete with other verbs in between.  A child
# process, so that a deadlock is a failed test, not a hung suite.
WR_CHILD = r'''
import sys, threading
sys.path.insert(0, sys.argv[1])
import pyverbs.enums as e
from pyverbs.mr import MW, MWBind, MWBindInfo
import uroce_pv as u

t = u.VerbsTestCase()
t.setUp()
ops = e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_RDMA_WRITE | \
    e.IBV_QP_EX_WITH_BIND_MW
mask = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | \
    e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_MW_BIND
a = t.endpoint(e.IBV_QPT_RC, send_ops_flags=ops, access=mask)
b = t.endpoint(e.IBV_QPT_RC, access=mask)
t.connect(a.qp, b.qpn, u.PSN_A, u.PSN_B, access=mask)
t.connect(b.qp, a.qpn, u.PSN_B, u.PSN_A, access=mask)
c, d = t.pair()
a.mr.write(b'staged', 6)

a.qp.wr_start()
a.qp.wr_id = 1
a.qp.wr_flags = e.IBV_SEND_SIGNALED
a.qp.wr_send()
a.qp.wr_set_sge(t.sge(a.mr, 0, 6))
# other verbs while the WRs are staged: a receive on the same QP and on
# the peer, a window allocated and bound on another QP, a CQ polled
t.post_recv(b.qp, b.mr, 0, 64, wr_id=10)
t.post_recv(a.qp, a.mr, 1024, 64, wr_id=11)
mw = MW(t.pd, e.IBV_MW_TYPE_1)
b.qp.bind_mw(mw, MWBind(MWBindInfo(b.mr, b.mr.buf, 512,
                                   e.IBV_ACCESS_REMOTE_WRITE),
                        e.IBV_SEND_SIGNALED, wr_id=12))
wc, = u.poll_cq(b.scq)
assert wc.status == e.IBV_WC_SUCCESS, u.status_name(wc.status)
# another thread's traffic on another QP goes on meanwhile
out = []
def other():
    t.post_recv(d.qp, d.mr, 0, 64, wr_id=20)
    t.post_send(c.qp, c.mr, 0, 8, wr_id=21)
    out.append(u.poll_cq(c.scq)[0].status)
th = threading.Thread(target=other)
th.start()
th.join(20)
assert out == [e.IBV_WC_SUCCESS], out
a.qp.wr_id = 2
a.qp.wr_rdma_write(mw.rkey, b.mr.buf + 100)
a.qp.wr_set_sge(t.sge(a.mr, 0, 6))
a.qp.wr_complete()
wcs = u.poll_cq(a.scq, 2)
assert [w.wr_id for w in wcs] == [1, 2], [w.wr_id for w in wcs]
assert all(w.status == e.IBV_WC_SUCCESS for w in wcs)
wc, = u.poll_cq(b.rcq)
assert wc.wr_id == 10 and wc.byte_len == 6, (wc.wr_id, wc.byte_len)
assert t.read(b.mr, 6) == b'staged'
assert t.read(b.mr, 6, 100) == b'staged'

# wr_abort discards what was staged, and nothing of it is sent
a.qp.wr_start()
a.qp.wr_id = 3
a.qp.wr_flags = e.IBV_SEND_SIGNALED
a.qp.wr_send()
a.qp.wr_set_sge(t.sge(a.mr, 0, 6))
t.post_recv(b.qp, b.mr, 0, 64, wr_id=13)
a.qp.wr_abort()
a.qp.wr_start()
a.qp.wr_id = 4
a.qp.wr_flags = e.IBV_SEND_SIGNALED
a.qp.wr_send()
a.qp.wr_set_sge(t.sge(a.mr, 0, 3))
a.qp.wr_complete()
wc, = u.poll_cq(a.scq)
assert wc.wr_id == 4 and wc.status == e.IBV_WC_SUCCESS, wc.wr_id
wc, = u.poll_cq(b.rcq)
assert wc.wr_id == 13 and wc.byte_len == 3, (wc.wr_id, wc.byte_len)
t.tearDown()
print('ok')
'''


class WrBetweenTest(unittest.TestCase):

    def test_verbs_between_wr_start_and_complete(self):
        try:
            r = subprocess.run([sys.executable, '-c', WR_CHILD, HERE],
                               capture_output=True, text=True,
                               timeout=4 * u.TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail('deadlock: verbs between ibv_wr_start and '
                      'ibv_wr_complete did not return')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.strip(), 'ok', r.stderr)


class ODPTest(u.VerbsTestCase):
    """6: RC atomics, READ and WRITE on ODP MRs, with ODP in the QP's mask."""

    def test_odp_atomics_read_write(self):
        a, b = self.pair(a_kw=dict(access=ODP_MASK),
                         b_kw=dict(access=ODP_MASK),
                         conn_a=dict(access=ODP_MASK),
                         conn_b=dict(access=ODP_MASK))
        b.mr.write(struct.pack('<Q', 100), 8, 0)
        wr = self.send_wr(a.mr, 0, 8, wr_id=1,
                          opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD)
        wr.set_wr_atomic(b.mr.rkey, b.mr.buf, 5, 0)
        a.qp.post_send(wr)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=1,
                      opcode=e.IBV_WC_FETCH_ADD)
        self.assertEqual(self.read(a.mr, 8), struct.pack('<Q', 100))
        self.assertEqual(self.read(b.mr, 8), struct.pack('<Q', 105))
        wr = self.send_wr(a.mr, 8, 8, wr_id=2,
                          opcode=e.IBV_WR_ATOMIC_CMP_AND_SWP)
        wr.set_wr_atomic(b.mr.rkey, b.mr.buf, 105, 7)
        a.qp.post_send(wr)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=2,
                      opcode=e.IBV_WC_COMP_SWAP)
        self.assertEqual(self.read(a.mr, 8, 8), struct.pack('<Q', 105))
        self.assertEqual(self.read(b.mr, 8), struct.pack('<Q', 7))
        a.mr.write(u.pattern(1500), 1500, 16)
        self.post_send(a.qp, a.mr, 16, 1500, wr_id=3,
                       opcode=e.IBV_WR_RDMA_WRITE, rkey=b.mr.rkey,
                       raddr=b.mr.buf + 2000)
        self.post_send(a.qp, a.mr, 2000, 1500, wr_id=4,
                       opcode=e.IBV_WR_RDMA_READ, rkey=b.mr.rkey,
                       raddr=b.mr.buf + 2000)
        wcs = u.poll_cq(a.scq, 2)
        for wc, wr_id in zip(wcs, (3, 4)):
            self.assertWC(wc, wr_id=wr_id)
        self.assertEqual(self.read(b.mr, 1500, 2000), u.pattern(1500))
        self.assertEqual(self.read(a.mr, 1500, 2000), u.pattern(1500))


class CQOverrunTest(u.VerbsTestCase):
    """Issue 12: an overrun CQ puts its QPs in the error state (rxe: the
    responder's class G error) with IBV_EVENT_CQ_ERR on the CQ and
    IBV_EVENT_QP_FATAL on each QP."""

    def test_send_cq_overrun(self):
        scq = self.cq(1)
        a = u.Endpoint(self.qp(e.IBV_QPT_RC, scq, self.cq()), scq, None,
                       self.mr())
        b = self.endpoint(e.IBV_QPT_RC)
        self.connect(a.qp, b.qpn, u.PSN_A, u.PSN_B)
        self.connect(b.qp, a.qpn, u.PSN_B, u.PSN_A)
        n = scq.cqe + 3
        for i in range(n):
            self.post_recv(b.qp, b.mr, 0, 64, wr_id=i)
        for i in range(n):
            self.post_send(a.qp, a.mr, 0, 8, wr_id=i)
        self.events.wait_for(e.IBV_EVENT_CQ_ERR, obj=scq)
        self.events.wait_for(e.IBV_EVENT_QP_FATAL, qp=a.qp)
        self.assertEqual(self.qp_state(a.qp), e.IBV_QPS_ERR)

    def test_recv_cq_overrun(self):
        rcq = self.cq(1)
        a = self.endpoint(e.IBV_QPT_RC)
        b = u.Endpoint(self.qp(e.IBV_QPT_RC, self.cq(), rcq), None, rcq,
                       self.mr())
        self.connect(a.qp, b.qpn, u.PSN_A, u.PSN_B)
        self.connect(b.qp, a.qpn, u.PSN_B, u.PSN_A)
        n = rcq.cqe + 3
        for i in range(n):
            self.post_recv(b.qp, b.mr, 0, 64, wr_id=i)
        for i in range(n):
            self.post_send(a.qp, a.mr, 0, 8, wr_id=i,
                           flags=e.IBV_SEND_SIGNALED if i == n - 1 else 0)
        self.events.wait_for(e.IBV_EVENT_CQ_ERR, obj=rcq)
        self.events.wait_for(e.IBV_EVENT_QP_FATAL, qp=b.qp)
        self.assertEqual(self.qp_state(b.qp), e.IBV_QPS_ERR)
        # the sender hears of it: the SEND whose completion was lost is
        # not acknowledged (errors complete even unsignaled WRs), as rxe
        wc, = u.poll_cq(a.scq)
        self.assertEqual(wc.wr_id, rcq.cqe, 'the first SEND lost was '
                         'acknowledged' if wc.wr_id > rcq.cqe else '')
        self.assertNotEqual(wc.status, e.IBV_WC_SUCCESS)

    def test_other_qps_of_the_cq_too(self):
        # a QP that shares the overrun CQ but sent nothing goes too
        scq = self.cq(1)
        idle = self.qp(e.IBV_QPT_RC, scq, self.cq())
        a = u.Endpoint(self.qp(e.IBV_QPT_RC, scq, self.cq()), scq, None,
                       self.mr())
        b = self.endpoint(e.IBV_QPT_RC)
        self.connect(a.qp, b.qpn, u.PSN_A, u.PSN_B)
        self.connect(b.qp, a.qpn, u.PSN_B, u.PSN_A)
        c, d = self.pair()
        self.connect(idle, d.qpn, u.PSN_A, u.PSN_B)
        for i in range(scq.cqe + 2):
            self.post_recv(b.qp, b.mr, 0, 64, wr_id=i)
            self.post_send(a.qp, a.mr, 0, 8, wr_id=i)
        self.events.wait_for(e.IBV_EVENT_CQ_ERR, obj=scq)
        self.events.wait_for(e.IBV_EVENT_QP_FATAL, qp=idle)
        self.assertEqual(self.qp_state(idle), e.IBV_QPS_ERR)
        self.assertEqual(self.qp_state(a.qp), e.IBV_QPS_ERR)
        # a QP on other CQs is untouched
        self.assertEqual(self.qp_state(c.qp), e.IBV_QPS_RTS)


# Issue 12: ibv_modify_qp that runs out of memory leaves the QP as it was.
# UROCE_FAULT=nomem=1 fails the next allocation ibv_modify_qp makes.
NOMEM_CHILD = r'''
import errno, sys
sys.path.insert(0, sys.argv[1])
import pyverbs.enums as e
from pyverbs.qp import QPAttr
import uroce_pv as u

t = u.VerbsTestCase()
t.setUp()
a = t.endpoint(e.IBV_QPT_RC)
b = t.endpoint(e.IBV_QPT_RC)
at = QPAttr(port_num=u.PORT)
at.pkey_index = 0
at.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
a.qp.to_init(at)
before, _ = a.qp.query(0x1fffff)
at = QPAttr(port_num=u.PORT)
at.path_mtu = e.IBV_MTU_512
at.dest_qp_num = b.qpn
at.rq_psn = u.PSN_B
at.max_dest_rd_atomic = 16
at.min_rnr_timer = 5
at.ah_attr = u.ah_attr(t.gid)
try:
    a.qp.to_rtr(at)
except u.PyverbsRDMAError as ex:
    assert ex.error_code == errno.ENOMEM, ex
else:
    sys.exit('modify_qp did not fail under UROCE_FAULT=nomem=1')
after, _ = a.qp.query(0x1fffff)
for f in ('qp_state', 'path_mtu', 'dest_qp_num', 'rq_psn',
          'max_dest_rd_atomic', 'min_rnr_timer'):
    assert getattr(after, f) == getattr(before, f), \
        f'{f}: {getattr(before, f)} -> {getattr(after, f)} on ENOMEM'
# with memory, the same call succeeds
a.qp.to_rtr(at)
after, _ = a.qp.query(0x1fffff)
assert after.qp_state == e.IBV_QPS_RTR and after.dest_qp_num == b.qpn
assert after.max_dest_rd_atomic == 16 and after.path_mtu == e.IBV_MTU_512
t.tearDown()
print('ok')
'''


class ModifyQPNoMemTest(unittest.TestCase):

    def test_enomem_leaves_qp_unchanged(self):
        env = dict(os.environ, UROCE_FAULT='nomem=1')
        r = subprocess.run([sys.executable, '-c', NOMEM_CHILD, HERE],
                           capture_output=True, text=True,
                           timeout=4 * u.TIMEOUT, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.strip(), 'ok', r.stderr)


if __name__ == '__main__':
    unittest.main()
