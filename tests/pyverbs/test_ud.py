# SPDX-License-Identifier: MIT
"""UD: send/recv with the GRH checked byte by byte, and the packets a UD QP
must drop silently (wrong Q_Key, QP not ready to receive, message larger
than the posted buffer): no completion, the receive WQE stays posted, and
the buffer is untouched."""

import unittest

import pyverbs.enums as e

import uroce_pv as u
from uroce_pv import GRH_SIZE, QKEY

FILL = b'\xee'


def ud_ip_total_length(payload):
    # IPv4 20 + UDP 8 + BTH 12 + DETH 8 + payload + pad + ICRC 4
    return 20 + 8 + 12 + 8 + ((payload + 3) & ~3) + 4


class UDTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.r = self.ud_qp()
        self.s = self.ud_qp()
        self.r.mr.write(FILL * self.BUF, self.BUF)
        self.ah_obj = self.ah()
        self.my_ip = u.gid_ipv4(self.gid)

    def send(self, payload, qkey=QKEY, dst=None, wr_id=0):
        self.s.mr.write(payload, len(payload), 0)
        dst = dst or self.r
        self.post_send(self.s.qp, self.s.mr, 0, len(payload), wr_id=wr_id,
                       ud=(self.ah_obj, dst.qpn, qkey))
        wc, = u.poll_cq(self.s.scq)
        self.assertWC(wc, wr_id=wr_id, opcode=e.IBV_WC_SEND)

    def check_grh(self, grh, payload_len):
        self.assertEqual(grh[:20], bytes(20), 'GRH: first 20 bytes not zero')
        ip = u.unpack_ipv4(grh[20:40])
        self.assertEqual(ip['vihl'], 0x45)
        self.assertEqual(ip['tot_len'], ud_ip_total_length(payload_len))
        self.assertEqual(ip['frag'] & 0xbfff, 0, 'fragment bits set')
        self.assertEqual(ip['frag'] & 0x4000, 0x4000, 'DF not set')
        self.assertEqual(ip['ttl'], 64)
        self.assertEqual(ip['proto'], 17)
        self.assertEqual(ip['src'], self.my_ip)
        self.assertEqual(ip['dst'], self.my_ip)
        self.assertEqual(u.ip_checksum(grh[20:40]), 0xffff,
                         'IPv4 header checksum invalid')

    def test_send_recv_grh(self):
        for i, n in enumerate((100, 37, 1, 0, 2048)):
            self.r.mr.write(FILL * self.BUF, self.BUF)
            off = 8 * i          # the buffer need not start the MR
            self.post_recv(self.r.qp, self.r.mr, off, self.BUF - off,
                           wr_id=10 + i)
            data = u.pattern(n, seed=i)
            self.send(data, wr_id=i)
            wc, = u.poll_cq(self.r.rcq)
            self.assertWC(wc, wr_id=10 + i, opcode=e.IBV_WC_RECV,
                          byte_len=GRH_SIZE + n)
            self.assertEqual(wc.src_qp, self.s.qpn)
            self.assertEqual(wc.qp_num, self.r.qpn)
            self.assertTrue(wc.wc_flags & e.IBV_WC_GRH, 'IBV_WC_GRH not set')
            # SL as ConnectX reports RoCE: UDP header (8) | IPv4 (2)
            self.assertEqual(wc.sl, 0xa, 'SL does not say RoCE v2 IPv4')
            buf = self.read(self.r.mr, GRH_SIZE + n + 16, off)
            self.check_grh(buf[:GRH_SIZE], n)
            self.assertEqual(buf[GRH_SIZE:GRH_SIZE + n], data)
            self.assertEqual(buf[GRH_SIZE + n:], FILL * 16,
                             'bytes written past the message')

    def test_send_with_imm(self):
        self.post_recv(self.r.qp, self.r.mr, 0, 512, wr_id=7)
        self.s.mr.write(b'hello', 5)
        self.post_send(self.s.qp, self.s.mr, 0, 5, wr_id=1,
                       opcode=e.IBV_WR_SEND_WITH_IMM, imm=0x01020304,
                       ud=(self.ah_obj, self.r.qpn, QKEY))
        u.poll_cq(self.s.scq)
        wc, = u.poll_cq(self.r.rcq)
        self.assertWC(wc, wr_id=7, opcode=e.IBV_WC_RECV, byte_len=GRH_SIZE + 5)
        self.assertTrue(wc.wc_flags & e.IBV_WC_WITH_IMM)
        self.assertEqual(wc.imm_data, 0x01020304)
        self.assertEqual(self.read(self.r.mr, 5, GRH_SIZE), b'hello')

    def assert_first_recv_gets(self, data, wr_id, off, length):
        """The next message lands in the first WQE, which was left posted."""
        self.send(data)
        wc, = u.poll_cq(self.r.rcq)
        self.assertWC(wc, wr_id=wr_id, byte_len=GRH_SIZE + len(data))
        self.assertEqual(self.read(self.r.mr, len(data), off + GRH_SIZE), data)
        rest = self.read(self.r.mr, self.BUF - off - GRH_SIZE - len(data),
                         off + GRH_SIZE + len(data))
        self.assertEqual(rest, FILL * len(rest),
                         'the dropped message left bytes in the buffer')

    def test_wrong_qkey_dropped(self):
        self.post_recv(self.r.qp, self.r.mr, 0, 1024, wr_id=1)
        self.post_recv(self.r.qp, self.r.mr, 2048, 1024, wr_id=2)
        self.send(b'W' * 64, qkey=QKEY ^ 0x5a5a)      # sender: still SUCCESS
        good = u.pattern(64, seed=3)
        self.assert_first_recv_gets(good, 1, 0, 1024)
        self.assertTrue(u.poll_empty(self.r.rcq))
        self.send(b'second')
        wc, = u.poll_cq(self.r.rcq)
        self.assertWC(wc, wr_id=2)

    def test_qkey_from_qp_when_high_bit_set(self):
        # IBA 10.2.5: a WR Q_Key with the high-order bit set means "use the
        # QP's own Q_Key" -- here also QKEY, so the message is accepted.
        if QKEY & 0x80000000:
            self.skipTest('QKEY has the high bit set')
        self.post_recv(self.r.qp, self.r.mr, 0, 1024, wr_id=1)
        self.send(b'x' * 8, qkey=0x80000000 | 0x1234)
        wc, = u.poll_cq(self.r.rcq)
        self.assertWC(wc, wr_id=1, byte_len=GRH_SIZE + 8)

    def test_qp_not_ready_dropped(self):
        # A third QP, in INIT (receives may be posted, nothing is received).
        t = self.endpoint(e.IBV_QPT_UD)
        t.mr.write(FILL * self.BUF, self.BUF)
        self.ud_to_init(t.qp)
        self.post_recv(t.qp, t.mr, 0, 1024, wr_id=5)
        self.send(b'I' * 100, dst=t)
        # Fence: a later packet to r arrives, so t's packet was processed.
        self.post_recv(self.r.qp, self.r.mr, 0, 1024, wr_id=1)
        self.send(b'fence', dst=self.r)
        wc, = u.poll_cq(self.r.rcq)
        self.assertWC(wc, wr_id=1)
        self.assertTrue(u.poll_empty(t.rcq), 'an INIT QP completed a receive')
        self.assertEqual(self.read(t.mr, 1024), FILL * 1024,
                         'an INIT QP wrote into its buffer')
        # Now bring t up: the WQE is still there, and gets the next message.
        a = u.QPAttr(port_num=u.PORT)
        a.sq_psn = 0
        t.qp.to_rts(a)
        data = u.pattern(80, seed=9)
        self.send(data, dst=t)
        wc, = u.poll_cq(t.rcq)
        self.assertWC(wc, wr_id=5, byte_len=GRH_SIZE + 80)
        self.assertEqual(self.read(t.mr, 80, GRH_SIZE), data)
        rest = self.read(t.mr, self.BUF - GRH_SIZE - 80, GRH_SIZE + 80)
        self.assertEqual(rest, FILL * len(rest))

    def test_larger_than_buffer_dropped(self):
        length = GRH_SIZE + 64
        self.post_recv(self.r.qp, self.r.mr, 0, length, wr_id=1)
        self.send(b'L' * 200)                         # 240 > 104: dropped
        self.send(b'M' * 65)                          # 105 > 104: dropped
        good = u.pattern(64, seed=5)                  # exactly fits
        self.assert_first_recv_gets(good, 1, 0, length)


if __name__ == '__main__':
    unittest.main()
