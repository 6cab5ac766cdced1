# SPDX-License-Identifier: MIT
"""Memory windows: type 1 (ibv_bind_mw) and type 2 (IBV_WR_BIND_MW and
ibv_wr_bind_mw), remote access through the window and only through it,
invalidation (rebind to zero length, LOCAL_INV, SEND_WITH_INV, dealloc),
and the bind errors of IBA 10.6.7."""

import errno
import unittest

import pyverbs.enums as e
from pyverbs.base import inc_rkey
from pyverbs.mr import MW, MWBind, MWBindInfo

import uroce_pv as u

MR_ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND
QP_ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | \
    e.IBV_ACCESS_REMOTE_READ
WIN_RW = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
WIN_OFF = 1024
WIN_LEN = 1024


class MWTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        # a: requester; b: owns the MR and the window.
        self.a, self.b = self.pair(b_kw=dict(access=MR_ACCESS),
                                   conn_b=dict(access=QP_ACCESS))
        self.b.mr.write(b'\0' * self.BUF, self.BUF)

    def mw(self, mw_type):
        try:
            return MW(self.pd, mw_type)
        except u.PyverbsRDMAError as ex:
            self.fail(f'ibv_alloc_mw(type {mw_type}): {ex}')

    def info(self, off=WIN_OFF, length=WIN_LEN, access=WIN_RW, mr=None):
        mr = mr or self.b.mr
        return MWBindInfo(mr, mr.buf + off, length, access)

    def bind1(self, mw, info=None, wr_id=55, qp=None):
        """Type 1 bind through b's send queue; returns the completion."""
        (qp or self.b.qp).bind_mw(mw, MWBind(info or self.info(),
                                             e.IBV_SEND_SIGNALED, wr_id=wr_id))
        wc, = u.poll_cq(self.b.scq)
        self.assertEqual(wc.wr_id, wr_id)
        return wc

    def bind2(self, mw, info=None, wr_id=66):
        wr = u.SendWR(wr_id=wr_id, opcode=e.IBV_WR_BIND_MW,
                      send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, info or self.info())
        self.b.qp.post_send(wr)
        wc, = u.poll_cq(self.b.scq)
        self.assertWC(wc, wr_id=wr_id, opcode=e.IBV_WC_BIND_MW)
        return wr.rkey

    def write(self, rkey, off, data, wr_id=1):
        return self.rdma_write(self.a, rkey, self.b.mr.buf + off, data, wr_id)

    def read_remote(self, rkey, off, n, wr_id=2):
        self.post_send(self.a.qp, self.a.mr, 2048, n, wr_id=wr_id,
                       opcode=e.IBV_WR_RDMA_READ, rkey=rkey,
                       raddr=self.b.mr.buf + off)
        wc, = u.poll_cq(self.a.scq)
        return wc

    def assert_write_ok(self, rkey, off, n=64, seed=0):
        data = u.pattern(n, seed)
        wc = self.write(rkey, off, data)
        self.assertWC(wc, opcode=e.IBV_WC_RDMA_WRITE)
        self.assertEqual(self.read(self.b.mr, n, off), data)

    def assert_write_rejected(self, rkey, off, n=64):
        before = self.read(self.b.mr, self.BUF)
        wc = self.write(rkey, off, b'Z' * n)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(self.read(self.b.mr, self.BUF), before,
                         'a rejected write changed the memory')

    # ---------------------------------------------------------------- type 1

    def test_type1_bind_write_read(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        old = mw.rkey
        wc = self.bind1(mw)
        self.assertWC(wc, opcode=e.IBV_WC_BIND_MW)
        self.assertNotEqual(mw.rkey, old, 'bind did not change the rkey')
        self.assertEqual(mw.rkey & ~0xff, old & ~0xff)
        self.assert_write_ok(mw.rkey, WIN_OFF)
        self.assert_write_ok(mw.rkey, WIN_OFF + WIN_LEN - 64, seed=1)
        data = self.read(self.b.mr, 64, WIN_OFF)
        wc = self.read_remote(mw.rkey, WIN_OFF, 64)
        self.assertWC(wc, opcode=e.IBV_WC_RDMA_READ)
        self.assertEqual(self.read(self.a.mr, 64, 2048), data)

    def test_type1_outside_window_rejected(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        self.bind1(mw)
        self.assert_write_rejected(mw.rkey, WIN_OFF + WIN_LEN - 32)  # crosses end
        self.assertEqual(self.qp_state(self.a.qp), e.IBV_QPS_ERR)

    def test_type1_before_window_rejected(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        self.bind1(mw)
        self.assert_write_rejected(mw.rkey, WIN_OFF - 8)

    def test_mr_rkey_has_no_remote_access(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        self.bind1(mw)
        self.assert_write_rejected(self.b.mr.rkey, WIN_OFF)

    def test_window_access_rights(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        self.bind1(mw, self.info(access=e.IBV_ACCESS_REMOTE_READ))
        self.assertWC(self.read_remote(mw.rkey, WIN_OFF, 16),
                      opcode=e.IBV_WC_RDMA_READ)
        self.assert_write_rejected(mw.rkey, WIN_OFF)

    def test_type1_rebind_changes_rkey(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        self.bind1(mw)
        first = mw.rkey
        self.bind1(mw, self.info(off=0, length=512), wr_id=56)
        self.assertNotEqual(mw.rkey, first)
        self.assert_write_ok(mw.rkey, 0)
        self.assert_write_rejected(first, WIN_OFF)

    def test_type1_invalidate_by_zero_length_bind(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        self.bind1(mw)
        rkey = mw.rkey
        self.assert_write_ok(rkey, WIN_OFF)
        wc = self.bind1(mw, MWBindInfo(self.b.mr, self.b.mr.buf, 0, 0),
                        wr_id=57)
        self.assertWC(wc, opcode=e.IBV_WC_BIND_MW)
        self.assert_write_rejected(rkey, WIN_OFF)

    def test_type1_dealloc_invalidates(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        self.bind1(mw)
        rkey = mw.rkey
        mw.close()
        self.assert_write_rejected(rkey, WIN_OFF)

    def test_bind_without_mw_bind_access_fails(self):
        plain = self.mr(access=e.IBV_ACCESS_LOCAL_WRITE)
        mw = self.mw(e.IBV_MW_TYPE_1)
        old = mw.rkey
        info = MWBindInfo(plain, plain.buf, 256, WIN_RW)
        # IBA 10.6.7.2.1 / ibv_bind_mw(3): the bind completes in error with
        # IBV_WC_MW_BIND_ERR (a provider may refuse at post time, EINVAL).
        try:
            self.b.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id=9))
        except u.PyverbsRDMAError as ex:
            self.assertEqual(ex.error_code, errno.EINVAL)
        else:
            wc, = u.poll_cq(self.b.scq)
            self.assertWC(wc, e.IBV_WC_MW_BIND_ERR, wr_id=9)
        self.assertEqual(mw.rkey, old, 'a failed bind changed the rkey')

    def test_type2_bind_without_mw_bind_access_fails(self):
        plain = self.mr(access=e.IBV_ACCESS_LOCAL_WRITE)
        mw = self.mw(e.IBV_MW_TYPE_2)
        wr = u.SendWR(wr_id=8, opcode=e.IBV_WR_BIND_MW,
                      send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(plain, plain.buf, 256, WIN_RW))
        try:
            self.b.qp.post_send(wr)
        except u.PyverbsRDMAError as ex:
            self.assertEqual(ex.error_code, errno.EINVAL)
            return
        wc, = u.poll_cq(self.b.scq)
        self.assertWC(wc, e.IBV_WC_MW_BIND_ERR, wr_id=8)

    def test_bind_remote_write_needs_local_write(self):
        # IBA 10.6.7.2.1: REMOTE_WRITE on a window over an MR without
        # LOCAL_WRITE is a bind error.
        ro = self.mr(access=e.IBV_ACCESS_MW_BIND)
        mw = self.mw(e.IBV_MW_TYPE_1)
        try:
            self.b.qp.bind_mw(mw, MWBind(MWBindInfo(ro, ro.buf, 64, WIN_RW),
                                         e.IBV_SEND_SIGNALED, wr_id=7))
        except u.PyverbsRDMAError as ex:
            self.assertEqual(ex.error_code, errno.EINVAL)
            return
        wc, = u.poll_cq(self.b.scq)
        self.assertWC(wc, e.IBV_WC_MW_BIND_ERR, wr_id=7)

    # ---------------------------------------------------------------- type 2

    def test_type2_bind_write_read(self):
        mw = self.mw(e.IBV_MW_TYPE_2)
        rkey = self.bind2(mw)
        self.assert_write_ok(rkey, WIN_OFF + 100, n=300)
        wc = self.read_remote(rkey, WIN_OFF + 100, 300)
        self.assertWC(wc, opcode=e.IBV_WC_RDMA_READ)
        self.assertEqual(self.read(self.a.mr, 300, 2048), u.pattern(300, 0))
        self.assert_write_rejected(rkey, WIN_OFF + WIN_LEN)

    def test_type2_only_through_its_qp(self):
        # A type 2 window is bound to b's QP: another QP of the same PD
        # (d, reached from c) must not accept its rkey.
        mw = self.mw(e.IBV_MW_TYPE_2)
        rkey = self.bind2(mw)
        c, d = self.pair(conn_b=dict(access=QP_ACCESS))
        c.mr.write(b'Q' * 32, 32)
        self.post_send(c.qp, c.mr, 0, 32, wr_id=3, opcode=e.IBV_WR_RDMA_WRITE,
                       rkey=rkey, raddr=self.b.mr.buf + WIN_OFF)
        wc, = u.poll_cq(c.scq)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR, wr_id=3)
        self.assertNotEqual(self.read(self.b.mr, 32, WIN_OFF), b'Q' * 32)
        self.assert_write_ok(rkey, WIN_OFF)

    def test_type2_local_inv(self):
        mw = self.mw(e.IBV_MW_TYPE_2)
        rkey = self.bind2(mw)
        self.assert_write_ok(rkey, WIN_OFF)
        inv = u.SendWR(wr_id=77, opcode=e.IBV_WR_LOCAL_INV,
                       send_flags=e.IBV_SEND_SIGNALED)
        inv.imm_data = rkey                 # the invalidate_rkey union member
        self.b.qp.post_send(inv)
        wc, = u.poll_cq(self.b.scq)
        self.assertWC(wc, wr_id=77, opcode=e.IBV_WC_LOCAL_INV)
        self.assert_write_rejected(rkey, WIN_OFF)

    def test_type2_rebind_after_invalidate(self):
        mw = self.mw(e.IBV_MW_TYPE_2)
        rkey = self.bind2(mw)
        inv = u.SendWR(wr_id=77, opcode=e.IBV_WR_LOCAL_INV,
                       send_flags=e.IBV_SEND_SIGNALED)
        inv.imm_data = rkey
        self.b.qp.post_send(inv)
        self.assertWC(u.poll_cq(self.b.scq)[0], wr_id=77)
        wr = u.SendWR(wr_id=78, opcode=e.IBV_WR_BIND_MW,
                      send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, self.info(off=0, length=256))   # next key
        self.assertNotEqual(wr.rkey, rkey)
        self.b.qp.post_send(wr)
        wc, = u.poll_cq(self.b.scq)
        self.assertWC(wc, wr_id=78, opcode=e.IBV_WC_BIND_MW)
        self.assert_write_ok(wr.rkey, 0)
        self.assert_write_rejected(rkey, 0)

    def test_send_with_inv(self):
        mw = self.mw(e.IBV_MW_TYPE_2)
        rkey = self.bind2(mw)
        self.assert_write_ok(rkey, WIN_OFF)
        self.post_recv(self.b.qp, self.b.mr, 3072, 256, wr_id=90)
        self.a.mr.write(b'bye, window', 11)
        wr = self.send_wr(self.a.mr, 0, 11, wr_id=91,
                          opcode=e.IBV_WR_SEND_WITH_INV)
        wr.imm_data = rkey
        self.a.qp.post_send(wr)
        wc, = u.poll_cq(self.a.scq)
        self.assertWC(wc, wr_id=91, opcode=e.IBV_WC_SEND)
        wc, = u.poll_cq(self.b.rcq)
        self.assertWC(wc, wr_id=90, opcode=e.IBV_WC_RECV, byte_len=11)
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_INV, 'IBV_WC_WITH_INV')
        self.assertFalse(wc.wc_flags & e.IBV_WC_WITH_IMM)
        self.assertEqual(wc.imm_data, rkey, 'invalidated_rkey')
        self.assertEqual(self.read(self.b.mr, 11, 3072), b'bye, window')
        self.assert_write_rejected(rkey, WIN_OFF)

    def test_type2_dealloc_invalidates(self):
        mw = self.mw(e.IBV_MW_TYPE_2)
        rkey = self.bind2(mw)
        mw.close()
        self.assert_write_rejected(rkey, WIN_OFF)

    def test_type2_via_ibv_bind_mw_rejected(self):
        # ibv_bind_mw(3) is for type 1 windows only.
        mw = self.mw(e.IBV_MW_TYPE_2)
        self.assertRDMAError(errno.EINVAL, self.b.qp.bind_mw, mw,
                             MWBind(self.info(), e.IBV_SEND_SIGNALED))

    def test_wr_bind_mw_extended_api(self):
        flags = (e.IBV_QP_EX_WITH_BIND_MW | e.IBV_QP_EX_WITH_LOCAL_INV |
                 e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_RDMA_WRITE)
        a = self.endpoint(e.IBV_QPT_RC)
        b = self.endpoint(e.IBV_QPT_RC, access=MR_ACCESS,
                          send_ops_flags=flags)
        self.connect(a.qp, b.qpn, u.PSN_A, u.PSN_B)
        self.connect(b.qp, a.qpn, u.PSN_B, u.PSN_A, access=QP_ACCESS)
        mw = self.mw(e.IBV_MW_TYPE_2)
        rkey = inc_rkey(mw.rkey)
        b.qp.wr_start()
        b.qp.wr_id = 123
        b.qp.wr_flags = e.IBV_SEND_SIGNALED
        b.qp.wr_bind_mw(mw, rkey, MWBindInfo(b.mr, b.mr.buf + 64, 128,
                                             e.IBV_ACCESS_REMOTE_WRITE))
        b.qp.wr_complete()
        wc, = u.poll_cq(b.scq)
        self.assertWC(wc, wr_id=123, opcode=e.IBV_WC_BIND_MW)
        a.mr.write(b'ex-window', 9)
        self.post_send(a.qp, a.mr, 0, 9, wr_id=4, opcode=e.IBV_WR_RDMA_WRITE,
                       rkey=rkey, raddr=b.mr.buf + 64)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=4)
        self.assertEqual(self.read(b.mr, 9, 64), b'ex-window')
        b.qp.wr_start()
        b.qp.wr_id = 124
        b.qp.wr_flags = e.IBV_SEND_SIGNALED
        b.qp.wr_local_inv(rkey)
        b.qp.wr_complete()
        self.assertWC(u.poll_cq(b.scq)[0], wr_id=124,
                      opcode=e.IBV_WC_LOCAL_INV)
        self.post_send(a.qp, a.mr, 0, 9, wr_id=5, opcode=e.IBV_WR_RDMA_WRITE,
                       rkey=rkey, raddr=b.mr.buf + 64)
        self.assertWC(u.poll_cq(a.scq)[0], e.IBV_WC_REM_ACCESS_ERR, wr_id=5)


if __name__ == '__main__':
    unittest.main()
