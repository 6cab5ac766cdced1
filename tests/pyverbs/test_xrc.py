# SPDX-License-Identifier: MIT
"""XRC: domains, XRC SRQs, INI (XRC_SEND) and TGT (XRC_RECV) QPs.

Each INI QP is connected to a TGT QP of the same device; every request
names the XRC SRQ it goes to (wr.qp_type.xrc.remote_srqn), and the
receive completes on that SRQ's CQ with the TGT QP's number.
"""

import ctypes
import errno
import os
import tempfile
import unittest

import pyverbs.enums as e
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttrEx, QPEx
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr, SrqInitAttrEx
from pyverbs.xrcd import XRCD, XRCDInitAttr

import uroce_pv as u

# struct verbs_context sits before struct ibv_context (its last member):
# close_xrcd is 24 bytes before the context, get_srq_num 48 (verbs.h of
# rdma-core 44; ibv_close_xrcd is an inline that calls through it).
VCTX_CLOSE_XRCD_BACK = 24
XRCD_FLAGS = e.IBV_XRCD_INIT_ATTR_FD | e.IBV_XRCD_INIT_ATTR_OFLAGS
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)


class XRCTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.xrcd = self.open_xrcd()
        self.srq_cq = self.cq()
        self.srq = self.xrc_srq(self.xrcd, self.srq_cq)
        self.rmr = self.mr(access=ACCESS)

    # -- objects
    def open_xrcd(self, fd=-1, oflags=os.O_CREAT):
        return XRCD(self.ctx, XRCDInitAttr(XRCD_FLAGS, oflags, fd))

    def xrc_srq_attr(self, xrcd, cq, max_wr=16):
        attr = SrqInitAttrEx(max_wr=max_wr, max_sge=1)
        attr.srq_type = e.IBV_SRQT_XRC
        attr.pd = self.pd
        attr.xrcd = xrcd
        attr.cq = cq
        attr.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                          e.IBV_SRQ_INIT_ATTR_XRCD | e.IBV_SRQ_INIT_ATTR_CQ)
        return attr

    def xrc_srq(self, xrcd, cq):
        return SRQ(self.ctx, self.xrc_srq_attr(xrcd, cq))

    def tgt_qp(self, xrcd):
        return QP(self.ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV,
                                         comp_mask=e.IBV_QP_INIT_ATTR_XRCD,
                                         xrcd=xrcd))

    def ini_qp(self, scq, ex=False):
        cap = QPCap(max_send_wr=64, max_recv_wr=0, max_send_sge=1,
                    max_recv_sge=0)
        mask = e.IBV_QP_INIT_ATTR_PD
        kw = {}
        if ex:
            mask |= e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
            kw['send_ops_flags'] = (e.IBV_QP_EX_WITH_SEND |
                                    e.IBV_QP_EX_WITH_RDMA_WRITE)
        attr = QPInitAttrEx(qp_type=e.IBV_QPT_XRC_SEND, scq=scq, cap=cap,
                            pd=self.pd, comp_mask=mask, **kw)
        return QPEx(self.ctx, attr) if ex else QP(self.ctx, attr)

    def connect_pair(self, ini, tgt):
        """INI -> TGT, both to RTS, with the attribute masks the kernel
        asks of each type (pyverbs' to_* use exactly those)."""
        a = QPAttr(port_num=u.PORT)
        a.pkey_index = 0
        a.qp_access_flags = ACCESS
        tgt.to_init(a)
        ini.to_init(a)
        a = QPAttr(port_num=u.PORT)
        a.path_mtu = e.IBV_MTU_1024
        a.ah_attr = u.ah_attr(self.gid)
        a.min_rnr_timer = 1
        a.max_dest_rd_atomic = 4
        a.timeout = 14
        a.retry_cnt = 7
        a.rnr_retry = 7
        a.max_rd_atomic = 4
        a.dest_qp_num = ini.qp_num
        a.rq_psn = u.PSN_A
        a.sq_psn = u.PSN_B
        tgt.to_rts(a)
        a.dest_qp_num = tgt.qp_num
        a.rq_psn = u.PSN_B
        a.sq_psn = u.PSN_A
        ini.to_rts(a)

    def pair(self, xrcd=None, ex=False):
        scq = self.cq()
        ini = self.ini_qp(scq, ex=ex)
        tgt = self.tgt_qp(xrcd or self.xrcd)
        self.connect_pair(ini, tgt)
        return ini, tgt, scq, self.mr(access=ACCESS)

    def xrc_send(self, ini, mr, length, srqn, wr_id=0, offset=0,
                 opcode=e.IBV_WR_SEND, rkey=None, raddr=None):
        wr = self.send_wr(mr, offset, length, wr_id, opcode)
        wr.set_qp_type_xrc(srqn)
        if rkey is not None:
            wr.set_wr_rdma(rkey, raddr)
        ini.post_send(wr)

    def close_xrcd_raw(self, xrcd):
        """ibv_close_xrcd without pyverbs (which closes the objects on the
        domain first): the errno our close_xrcd returns."""
        cp = u.context_ptr(self.ctx)
        fn = ctypes.c_uint64.from_address(cp - VCTX_CLOSE_XRCD_BACK).value
        self.assertTrue(u.code_in_libibverbs(fn), 'close_xrcd not found')
        close = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(fn)
        return close(u.verbs_ptr(xrcd, self.ctx))

    # -- tests
    def test_srq_numbers(self):
        srq2 = self.xrc_srq(self.xrcd, self.srq_cq)
        n1, n2 = self.srq.get_srq_num(), srq2.get_srq_num()
        self.assertNotEqual(n1, 0)
        self.assertNotEqual(n1, n2)
        self.assertLess(n2, 1 << 24)

    def test_two_ini_into_one_srq(self):
        p1 = self.pair()
        p2 = self.pair()
        srqn = self.srq.get_srq_num()
        for i in range(4):
            self.post_recv(self.srq, self.rmr, 256 * i, 256, wr_id=100 + i)
        for i, (ini, tgt, scq, mr) in enumerate((p1, p2, p1, p2)):
            data = u.pattern(200, seed=i)
            mr.write(data, 200)
            self.xrc_send(ini, mr, 200, srqn, wr_id=i)
            wc, = u.poll_cq(scq)
            self.assertWC(wc, wr_id=i, opcode=e.IBV_WC_SEND)
            # the receive completes on the SRQ's CQ, for the TGT QP
            wc, = u.poll_cq(self.srq_cq)
            self.assertWC(wc, wr_id=100 + i, opcode=e.IBV_WC_RECV,
                          byte_len=200)
            self.assertEqual(wc.qp_num, tgt.qp_num)
            self.assertEqual(self.read(self.rmr, 200, 256 * i), data)

    def test_srqn_picks_srq_and_cq(self):
        cq2 = self.cq()
        srq2 = self.xrc_srq(self.xrcd, cq2)
        ini, tgt, scq, mr = self.pair()
        self.post_recv(self.srq, self.rmr, 0, 64, wr_id=1)
        self.post_recv(srq2, self.rmr, 1024, 64, wr_id=2)
        mr.write(b'to-two', 6)
        self.xrc_send(ini, mr, 6, srq2.get_srq_num(), wr_id=20)
        u.poll_cq(scq)
        wc, = u.poll_cq(cq2)
        self.assertWC(wc, wr_id=2, byte_len=6)
        u.poll_empty(self.srq_cq)
        mr.write(b'to-one', 6)
        self.xrc_send(ini, mr, 6, self.srq.get_srq_num(), wr_id=10)
        u.poll_cq(scq)
        wc, = u.poll_cq(self.srq_cq)
        self.assertWC(wc, wr_id=1, byte_len=6)
        self.assertEqual(self.read(self.rmr, 6, 1024), b'to-two')
        self.assertEqual(self.read(self.rmr, 6, 0), b'to-one')

    def test_multi_packet_write_read(self):
        ini, tgt, scq, mr = self.pair()
        srqn = self.srq.get_srq_num()
        data = u.pattern(3000, seed=5)
        # a 3-packet SEND (MTU 1024)
        self.post_recv(self.srq, self.rmr, 0, 4096, wr_id=7)
        mr.write(data, 3000)
        self.xrc_send(ini, mr, 3000, srqn, wr_id=1)
        self.assertWC(u.poll_cq(scq)[0], wr_id=1)
        wc, = u.poll_cq(self.srq_cq)
        self.assertWC(wc, wr_id=7, byte_len=3000)
        self.assertEqual(self.read(self.rmr, 3000), data)
        # RDMA WRITE and READ: keys of the SRQ's PD
        dst = self.mr(access=ACCESS)
        self.xrc_send(ini, mr, 3000, srqn, wr_id=2,
                      opcode=e.IBV_WR_RDMA_WRITE, rkey=dst.rkey,
                      raddr=dst.buf)
        self.assertWC(u.poll_cq(scq)[0], wr_id=2)
        self.assertEqual(self.read(dst, 3000), data)
        dst.write(u.pattern(3000, seed=9), 3000)
        self.xrc_send(ini, mr, 3000, srqn, wr_id=3,
                      opcode=e.IBV_WR_RDMA_READ, rkey=dst.rkey,
                      raddr=dst.buf)
        self.assertWC(u.poll_cq(scq)[0], wr_id=3)
        self.assertEqual(self.read(mr, 3000), u.pattern(3000, seed=9))
        u.poll_empty(self.srq_cq)

    def test_wr_set_xrc_srqn(self):
        ini, tgt, scq, mr = self.pair(ex=True)
        self.post_recv(self.srq, self.rmr, 0, 64, wr_id=5)
        mr.write(b'wr-api', 6)
        ini.wr_start()
        ini.wr_id = 9
        ini.wr_flags = e.IBV_SEND_SIGNALED
        ini.wr_send()
        ini.wr_set_xrc_srqn(self.srq.get_srq_num())
        ini.wr_set_sge(u.SGE(mr.buf, 6, mr.lkey))
        ini.wr_complete()
        self.assertWC(u.poll_cq(scq)[0], wr_id=9)
        wc, = u.poll_cq(self.srq_cq)
        self.assertWC(wc, wr_id=5, byte_len=6)
        self.assertEqual(self.read(self.rmr, 6), b'wr-api')

    def assert_rejected(self, srqn):
        """A request naming srqn: invalid request NAK, so the sender sees
        REM_INV_REQ_ERR and the TGT QP is in the error state."""
        ini, tgt, scq, mr = self.pair()
        self.post_recv(self.srq, self.rmr, 0, 64, wr_id=1)
        self.xrc_send(ini, mr, 8, srqn, wr_id=3)
        wc, = u.poll_cq(scq)
        self.assertWC(wc, status=e.IBV_WC_REM_INV_REQ_ERR, wr_id=3)
        self.assertEqual(self.qp_state(tgt), e.IBV_QPS_ERR)
        self.assertEqual(self.qp_state(ini), e.IBV_QPS_ERR)
        u.poll_empty(self.srq_cq)
        # the SRQ's receive was not consumed: a sound pair still gets it
        ini2, tgt2, scq2, mr2 = self.pair()
        mr2.write(b'after', 5)
        self.xrc_send(ini2, mr2, 5, self.srq.get_srq_num(), wr_id=4)
        self.assertWC(u.poll_cq(scq2)[0], wr_id=4)
        wc, = u.poll_cq(self.srq_cq)
        self.assertWC(wc, wr_id=1, byte_len=5)

    def test_wrong_srqn_naked(self):
        self.assert_rejected(self.srq.get_srq_num() ^ 0x5a5a5)

    def test_srq_of_other_domain_naked(self):
        # (pyverbs closes an SRQ with its domain: keep the domain alive)
        self.other_xrcd = self.open_xrcd()
        other = self.xrc_srq(self.other_xrcd, self.cq())
        self.assert_rejected(other.get_srq_num())

    def test_basic_srq_number_naked(self):
        # a basic SRQ has a number too, but no XRC request reaches it
        basic = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
        self.post_recv(basic, self.rmr, 0, 64, wr_id=77)
        self.assert_rejected(basic.get_srq_num())

    def test_close_xrcd_busy(self):
        xrcd = self.open_xrcd()
        srq = self.xrc_srq(xrcd, self.srq_cq)
        self.assertEqual(self.close_xrcd_raw(xrcd), errno.EBUSY)
        srq.close()
        tgt = self.tgt_qp(xrcd)
        self.assertEqual(self.close_xrcd_raw(xrcd), errno.EBUSY)
        tgt.close()
        xrcd.close()    # through pyverbs, which raises on failure

    def test_xrcd_on_file_shared(self):
        with tempfile.NamedTemporaryFile() as f:
            fd = f.fileno()
            # no domain on the file yet, and no O_CREAT: the kernel's EAGAIN
            self.assertRDMAError(errno.EAGAIN, self.open_xrcd, fd, 0)
            a = self.open_xrcd(fd, os.O_CREAT)
            self.assertRDMAError(errno.EINVAL, self.open_xrcd, fd,
                                 os.O_CREAT | os.O_EXCL)
            b = self.open_xrcd(fd, 0)
            # one domain: a TGT QP on a reaches an SRQ made on b
            srq = self.xrc_srq(b, self.srq_cq)
            ini, tgt, scq, mr = self.pair(xrcd=a)
            self.post_recv(srq, self.rmr, 0, 64, wr_id=6)
            self.xrc_send(ini, mr, 4, srq.get_srq_num(), wr_id=1)
            self.assertWC(u.poll_cq(scq)[0], wr_id=1)
            self.assertWC(u.poll_cq(self.srq_cq)[0], wr_id=6, byte_len=4)
            tgt.close()
            srq.close()
            b.close()
            a.close()
        self.assertRDMAError(errno.EBADF, self.open_xrcd, 1 << 20)

    def test_create_errors(self):
        # TGT QP without a domain
        self.assertRDMAError(errno.EINVAL, QP, self.ctx,
                             QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV,
                                          comp_mask=0))
        # INI QP without a PD
        self.assertRDMAError(errno.EINVAL, QP, self.ctx,
                             QPInitAttrEx(qp_type=e.IBV_QPT_XRC_SEND,
                                          scq=self.cq(), comp_mask=0))
        # XRC SRQ without its CQ
        attr = self.xrc_srq_attr(self.xrcd, self.srq_cq)
        attr.comp_mask &= ~e.IBV_SRQ_INIT_ATTR_CQ
        self.assertRDMAError(errno.EINVAL, SRQ, self.ctx, attr)

    def test_modify_rules(self):
        scq = self.cq()
        ini, tgt = self.ini_qp(scq), self.tgt_qp(self.xrcd)
        a = QPAttr(port_num=u.PORT)
        a.pkey_index = 0
        a.qp_access_flags = ACCESS
        ini.to_init(a)
        tgt.to_init(a)
        a.qp_state = e.IBV_QPS_RTR
        a.path_mtu = e.IBV_MTU_1024
        a.ah_attr = u.ah_attr(self.gid)
        a.dest_qp_num = tgt.qp_num
        base = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
                e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN)
        # an INI QP has no responder: MAX_DEST_RD_ATOMIC is not its
        self.assertRDMAError(errno.EINVAL, ini.modify, a,
                             base | e.IBV_QP_MAX_DEST_RD_ATOMIC)
        ini.modify(a, base)
        # a TGT QP needs the responder's attributes for RTR
        self.assertRDMAError(errno.EINVAL, tgt.modify, a, base)
        tgt.modify(a, base | e.IBV_QP_MAX_DEST_RD_ATOMIC |
                   e.IBV_QP_MIN_RNR_TIMER)
        # ... and for RTS no requester's: RETRY_CNT is not its
        a.qp_state = e.IBV_QPS_RTS
        rts = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT
        self.assertRDMAError(errno.EINVAL, tgt.modify, a,
                             rts | e.IBV_QP_RETRY_CNT)
        tgt.modify(a, rts)
        # a TGT QP takes no WRs of its own
        self.assertRDMAError((errno.EINVAL, errno.EOPNOTSUPP),
                             self.post_recv, tgt, self.rmr, 0, 16, 1)

    def test_device_advertises_xrc(self):
        self.assertTrue(self.ctx.query_device().device_cap_flags &
                        e.IBV_DEVICE_XRC)


if __name__ == '__main__':
    unittest.main()
