# SPDX-License-Identifier: MIT
"""Extended QP API: ATOMIC_WRITE (ibv_wr_atomic_write, opcode 0x1D) and
FLUSH (ibv_wr_flush, opcode 0x1C), plus the classic ops through ibv_wr_*.

Debian's pyverbs (rdma-core 44) has no binding for ibv_wr_flush and its
verbs.h has no wr_flush member; the FLUSH tests call the function pointer
that follows wr_atomic_write in struct ibv_qp_ex (its place in rdma-core
45+'s ABI) through ctypes, after checking that it points into
libibverbs.so's code."""

import ctypes
import struct
import unittest

import pyverbs.enums as e

import uroce_pv as u

# Values from rdma-core >= 45's verbs.h (absent from Debian's 44 headers).
IBV_QP_EX_WITH_FLUSH = 1 << 11
IBV_ACCESS_FLUSH_GLOBAL = 1 << 8
IBV_ACCESS_FLUSH_PERSISTENT = 1 << 9
IBV_WC_FLUSH = 8
IBV_FLUSH_GLOBAL = 1
IBV_FLUSH_PERSISTENT = 2
IBV_FLUSH_RANGE = 0
IBV_FLUSH_MR = 1
QPEX_WR_START_OFF = 320       # offsetof(struct ibv_qp_ex, wr_start)
QPEX_WR_FLUSH_OFF = 352       # offsetof(struct ibv_qp_ex, wr_flush), rdma-core 45+

IBV_WC_ATOMIC_WRITE = getattr(e, 'IBV_WC_ATOMIC_WRITE', 9)

WR_FLUSH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32,
                            ctypes.c_uint64, ctypes.c_size_t, ctypes.c_uint8,
                            ctypes.c_uint8)

REMOTE = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | \
    e.IBV_ACCESS_REMOTE_READ


class QPExTest(u.VerbsTestCase):

    def ex_pair(self, send_ops, b_access=REMOTE, qp_access=None):
        a = self.endpoint(e.IBV_QPT_RC, send_ops_flags=send_ops)
        b = self.endpoint(e.IBV_QPT_RC, access=b_access)
        qa = qp_access if qp_access is not None else \
            REMOTE | e.IBV_ACCESS_REMOTE_ATOMIC
        self.connect(a.qp, b.qpn, u.PSN_A, u.PSN_B)
        self.connect(b.qp, a.qpn, u.PSN_B, u.PSN_A, access=qa)
        b.mr.write(b'\xcc' * self.BUF, self.BUF)
        return a, b

    def post_ex(self, qp, wr_id, fn):
        qp.wr_start()
        qp.wr_id = wr_id
        qp.wr_flags = e.IBV_SEND_SIGNALED
        fn()
        qp.wr_complete()

    # ------------------------------------------------------------ atomic write

    def atomic_write(self, a, rkey, addr, value, wr_id=1):
        self.post_ex(a.qp, wr_id,
                     lambda: a.qp.wr_atomic_write(rkey, addr, value))
        wc, = u.poll_cq(a.scq)
        return wc

    def test_atomic_write(self):
        a, b = self.ex_pair(e.IBV_QP_EX_WITH_ATOMIC_WRITE |
                            e.IBV_QP_EX_WITH_SEND)
        for i, off in enumerate((0, 8, 512, self.BUF - 8)):
            value = struct.pack('<Q', 0x0102030405060708 * (i + 1) & (2**64 - 1))
            wc = self.atomic_write(a, b.mr.rkey, b.mr.buf + off, value, i)
            self.assertWC(wc, wr_id=i, opcode=IBV_WC_ATOMIC_WRITE)
            self.assertEqual(self.read(b.mr, 8, off), value)
        # Nothing around the targets was touched.
        self.assertEqual(self.read(b.mr, 8, 16), b'\xcc' * 8)
        self.assertEqual(self.read(b.mr, 8, self.BUF - 16), b'\xcc' * 8)
        # No receive WQE is consumed on the responder.
        self.assertTrue(u.poll_empty(b.rcq))

    def test_atomic_write_bad_rkey(self):
        a, b = self.ex_pair(e.IBV_QP_EX_WITH_ATOMIC_WRITE)
        wc = self.atomic_write(a, b.mr.rkey ^ 0x00ff0000, b.mr.buf,
                               b'\x11' * 8)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(self.read(b.mr, 8), b'\xcc' * 8)

    def test_atomic_write_needs_remote_write_on_mr(self):
        a, b = self.ex_pair(e.IBV_QP_EX_WITH_ATOMIC_WRITE,
                            b_access=e.IBV_ACCESS_LOCAL_WRITE |
                            e.IBV_ACCESS_REMOTE_READ)
        wc = self.atomic_write(a, b.mr.rkey, b.mr.buf, b'\x22' * 8)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(self.read(b.mr, 8), b'\xcc' * 8)

    def test_atomic_write_misaligned(self):
        a, b = self.ex_pair(e.IBV_QP_EX_WITH_ATOMIC_WRITE)
        wc = self.atomic_write(a, b.mr.rkey, b.mr.buf + 4, b'\x33' * 8)
        self.assertNotEqual(wc.status, e.IBV_WC_SUCCESS,
                            'misaligned ATOMIC_WRITE accepted')
        self.assertEqual(self.read(b.mr, 16), b'\xcc' * 16)

    # ------------------------------------------------------------ classic ops

    def test_wr_write_send_read_atomics(self):
        ops = (e.IBV_QP_EX_WITH_RDMA_WRITE | e.IBV_QP_EX_WITH_SEND |
               e.IBV_QP_EX_WITH_RDMA_READ | e.IBV_QP_EX_WITH_SEND_WITH_IMM |
               e.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
               e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
        a, b = self.ex_pair(ops, b_access=REMOTE | e.IBV_ACCESS_REMOTE_ATOMIC)
        a.mr.write(u.pattern(256), 256)

        def write():
            a.qp.wr_rdma_write(b.mr.rkey, b.mr.buf + 256)
            a.qp.wr_set_sge(self.sge(a.mr, 0, 256))
        self.post_ex(a.qp, 1, write)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=1,
                      opcode=e.IBV_WC_RDMA_WRITE)
        self.assertEqual(self.read(b.mr, 256, 256), u.pattern(256))

        self.post_recv(b.qp, b.mr, 2048, 64, wr_id=7)

        def send():
            a.qp.wr_send_imm(0x55667788)
            a.qp.wr_set_sge(self.sge(a.mr, 0, 10))
        self.post_ex(a.qp, 2, send)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=2, opcode=e.IBV_WC_SEND)
        wc, = u.poll_cq(b.rcq)
        self.assertWC(wc, wr_id=7, byte_len=10)
        # pyverbs' wr_send_imm applies htobe32; WC.imm_data is the raw
        # (network order) field.
        self.assertEqual(wc.imm_data, struct.unpack('<I', struct.pack(
            '>I', 0x55667788))[0])
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_IMM)

        b.mr.write(struct.pack('<Q', 40), 8, 1024)

        def faa():
            a.qp.wr_atomic_fetch_add(b.mr.rkey, b.mr.buf + 1024, 2)
            a.qp.wr_set_sge(self.sge(a.mr, 512, 8))
        self.post_ex(a.qp, 3, faa)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=3, opcode=e.IBV_WC_FETCH_ADD)
        self.assertEqual(self.read(a.mr, 8, 512), struct.pack('<Q', 40))
        self.assertEqual(self.read(b.mr, 8, 1024), struct.pack('<Q', 42))

        def cas():
            a.qp.wr_atomic_cmp_swp(b.mr.rkey, b.mr.buf + 1024, 42, 7)
            a.qp.wr_set_sge(self.sge(a.mr, 520, 8))
        self.post_ex(a.qp, 4, cas)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=4, opcode=e.IBV_WC_COMP_SWAP)
        self.assertEqual(self.read(a.mr, 8, 520), struct.pack('<Q', 42))
        self.assertEqual(self.read(b.mr, 8, 1024), struct.pack('<Q', 7))

        def read():
            a.qp.wr_rdma_read(b.mr.rkey, b.mr.buf + 256)
            a.qp.wr_set_sge(self.sge(a.mr, 1024, 256))
        self.post_ex(a.qp, 5, read)
        self.assertWC(u.poll_cq(a.scq)[0], wr_id=5, opcode=e.IBV_WC_RDMA_READ)
        self.assertEqual(self.read(a.mr, 256, 1024), u.pattern(256))

    # ------------------------------------------------------------ flush

    def flush(self, a, rkey, addr, length, ftype=IBV_FLUSH_GLOBAL,
              level=IBV_FLUSH_RANGE, wr_id=1):
        qpx = u.qp_ptr(a.qp)
        start = ctypes.c_uint64.from_address(qpx + QPEX_WR_START_OFF).value
        self.assertTrue(u.code_in_libibverbs(start),
                        'located struct ibv_qp_ex looks wrong (wr_start)')
        fp = ctypes.c_uint64.from_address(qpx + QPEX_WR_FLUSH_OFF).value
        if not fp or not u.code_in_libibverbs(fp):
            self.fail('struct ibv_qp_ex has no wr_flush after wr_atomic_write '
                      f'(found {fp:#x}); ibv_wr_flush is not implemented')
        self.post_ex(a.qp, wr_id, lambda: WR_FLUSH(fp)(
            qpx, rkey, addr, length, ftype, level))
        wc, = u.poll_cq(a.scq)
        return wc

    def flush_pair(self, mr_flush_access):
        # as rxe does, the responder QP must allow FLUSH too
        return self.ex_pair(IBV_QP_EX_WITH_FLUSH | e.IBV_QP_EX_WITH_RDMA_WRITE,
                            b_access=REMOTE | mr_flush_access,
                            qp_access=REMOTE | e.IBV_ACCESS_REMOTE_ATOMIC |
                            IBV_ACCESS_FLUSH_GLOBAL |
                            IBV_ACCESS_FLUSH_PERSISTENT)

    def test_flush_after_write(self):
        a, b = self.flush_pair(IBV_ACCESS_FLUSH_GLOBAL)
        a.mr.write(u.pattern(512, 3), 512)

        def write():
            a.qp.wr_rdma_write(b.mr.rkey, b.mr.buf + 64)
            a.qp.wr_set_sge(self.sge(a.mr, 0, 512))
        a.qp.wr_start()
        a.qp.wr_id = 1
        a.qp.wr_flags = 0                   # unsignaled: the flush reports
        write()
        a.qp.wr_complete()
        wc = self.flush(a, b.mr.rkey, b.mr.buf + 64, 512, wr_id=2)
        self.assertWC(wc, wr_id=2, opcode=IBV_WC_FLUSH)
        # FLUSH completes after the write before it is placed.
        self.assertEqual(self.read(b.mr, 512, 64), u.pattern(512, 3))
        self.assertTrue(u.poll_empty(a.scq))

    def test_flush_whole_mr(self):
        a, b = self.flush_pair(IBV_ACCESS_FLUSH_GLOBAL)
        wc = self.flush(a, b.mr.rkey, b.mr.buf, 0, level=IBV_FLUSH_MR)
        self.assertWC(wc, opcode=IBV_WC_FLUSH)

    def test_flush_persistent(self):
        a, b = self.flush_pair(IBV_ACCESS_FLUSH_PERSISTENT |
                               IBV_ACCESS_FLUSH_GLOBAL)
        wc = self.flush(a, b.mr.rkey, b.mr.buf, 64,
                        ftype=IBV_FLUSH_PERSISTENT)
        self.assertWC(wc, opcode=IBV_WC_FLUSH)

    def test_flush_without_flush_access(self):
        a, b = self.flush_pair(0)
        wc = self.flush(a, b.mr.rkey, b.mr.buf, 64)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR)

    def test_flush_bad_rkey(self):
        a, b = self.flush_pair(IBV_ACCESS_FLUSH_GLOBAL)
        wc = self.flush(a, b.mr.rkey ^ 0x00ff0000, b.mr.buf, 64)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR)

    def test_flush_out_of_bounds(self):
        a, b = self.flush_pair(IBV_ACCESS_FLUSH_GLOBAL)
        wc = self.flush(a, b.mr.rkey, b.mr.buf + self.BUF - 32, 64)
        self.assertWC(wc, e.IBV_WC_REM_ACCESS_ERR)


if __name__ == '__main__':
    unittest.main()
