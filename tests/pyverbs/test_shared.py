# SPDX-License-Identifier: MIT
"""The shared device: several processes on one IP address.

This process and its children (fresh pythons running this file as a
script) all set the same UROCE_ADDR, so their devices share one address
and one QP-number space (docs/shared.md).  A
second address stands for a remote host.  Children talk to the parent
over stdin/stdout in JSON lines; no sleeps: every wait is for a line or a
completion, with a deadline.
"""

import ipaddress
import json
import os
import subprocess
import sys
import unittest

import pyverbs.enums as e

import uroce_pv as u
from uroce_pv import GRH_SIZE, QKEY
import test_mcast as mc

# every run its own addresses, so that parallel runs never share one
_x, _y = (os.getpid() // 250) % 250 + 1, os.getpid() % 250 + 1
ADDR = f'127.93.{_x}.{_y}'          # shared by this process and children
REMOTE = f'127.94.{_x}.{_y}'        # another "host"
# The library reads UROCE_ADDR once, when it is loaded (before this
# module): run this process again with it set.  A child is told its own.
if sys.argv[1:2] != ['child'] and \
        not os.environ.get('UROCE_ADDR', '').startswith('127.93.'):
    os.environ['UROCE_ADDR'] = ADDR
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)
ADDR = os.environ.get('UROCE_ADDR', ADDR)
_x, _y = ADDR.split('.')[2:4]
REMOTE = f'127.94.{_x}.{_y}'
os.environ.pop('UROCE_SHARE', None)


def gid_of_ip(ip):
    from pyverbs.addr import GID
    return GID(mc.gid_str(ipaddress.IPv4Address(ip)))


def ah_to(pd, ip):
    from pyverbs.addr import AH, AHAttr, GlobalRoute
    gr = GlobalRoute(dgid=gid_of_ip(ip), sgid_index=0, hop_limit=64)
    return AH(pd, attr=AHAttr(is_global=1, port_num=u.PORT, gr=gr))


class Child:
    """A process of this file in child mode, on addr."""

    def __init__(self, addr, *args):
        env = dict(os.environ, UROCE_ADDR=addr)
        self.p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), 'child'] +
            [str(a) for a in args], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError(f'child exited: {self.p.wait()}')
        return json.loads(line)

    def say(self, obj):
        self.p.stdin.write(json.dumps(obj) + '\n')
        self.p.stdin.flush()

    def finish(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=u.TIMEOUT + 5)
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class SharedTest(u.VerbsTestCase):

    def setUp(self):
        super().setUp()
        self.children = []
        self.assertEqual(str(u.gid_ipv4(self.gid)), ADDR)

    def tearDown(self):
        for c in self.children:
            c.kill()
        super().tearDown()

    def child(self, addr, *args):
        c = Child(addr, *args)
        self.children.append(c)
        return c

    def test_qpns_unique_across_processes(self):
        """Three more processes on the address: 4 x 8 QPNs, no two alike,
        each process's under its own owner slot (bits 23..16)."""
        kids = [self.child(ADDR, 'qpns', 8) for _ in range(3)]
        mine = [self.ud_qp().qpn for _ in range(8)]
        sets = [mine] + [c.read()['qpns'] for c in kids]
        allq = [q for s in sets for q in s]
        self.assertEqual(len(set(allq)), 32, sets)
        slots = [{q >> 16 for q in s} for s in sets]
        for s in slots:
            self.assertEqual(len(s), 1, slots)
        self.assertEqual(len({next(iter(s)) for s in slots}), 4, slots)
        for c in kids:
            self.assertEqual(c.finish(), 0)

    def test_ud_between_processes_and_remote(self):
        """A UD QP here, one in a second process on this address and one on
        a remote address: each sends to both others and receives both."""
        here = self.ud_qp()
        near = self.child(ADDR, 'ud')
        far = self.child(REMOTE, 'ud')
        peers = {'near': near.read()['qpn'], 'far': far.read()['qpn']}
        for i in range(2):
            self.post_recv(here.qp, here.mr, 1024 * i, 1024, wr_id=i)
        near.say({'peers': [[ADDR, here.qpn], [REMOTE, peers['far']]]})
        far.say({'peers': [[ADDR, here.qpn], [ADDR, peers['near']]]})
        got = set()
        for wc in u.poll_cq(here.rcq, 2):
            self.assertWC(wc, byte_len=GRH_SIZE + 32)
            got.add(self.read(here.mr, 32, 1024 * wc.wr_id + GRH_SIZE))
        self.assertEqual(got, {f'from {peers["near"]:06x} ud'.ljust(32).encode(),
                               f'from {peers["far"]:06x} ud'.ljust(32).encode()})
        ah_near, ah_far = self.ah(), ah_to(self.pd, REMOTE)
        for ah, qpn in ((ah_near, peers['near']), (ah_far, peers['far'])):
            msg = f'from {here.qpn:06x} ud'.ljust(32).encode()
            here.mr.write(msg, 32, 2048)
            self.post_send(here.qp, here.mr, 2048, 32, ud=(ah, qpn, QKEY))
            u.poll_cq(here.scq)
        for c in (near, far):
            self.assertEqual(c.read()['got'], 2)
            self.assertEqual(c.finish(), 0)

    def test_mcast_two_processes_one_address(self):
        """Two processes on this address join one group; a send from a
        third (this one) reaches each of them."""
        group = mc.GROUP_BASE + 7
        kids = [self.child(ADDR, 'mcast', group) for _ in range(2)]
        for c in kids:
            self.assertEqual(c.read(), {'ready': True})
        s = self.ud_qp()
        ah = mc.mcast_ah(self.pd, group)
        for i in range(3):
            s.mr.write(u.pattern(64, seed=i), 64, 0)
            self.post_send(s.qp, s.mr, 0, 64, ud=(ah, mc.MCAST_QPN, QKEY))
            u.poll_cq(s.scq)
        for c in kids:
            self.assertEqual(c.read(), {'got': 3, 'src': ADDR})
            self.assertEqual(c.finish(), 0)

    def test_unowned_qpn_dropped_and_counted(self):
        """A datagram to a QPN whose owner slot nobody on the address holds
        is dropped and counted (drop_no_owner), one to a free QPN of our
        own slot too (drop_unknown_qp); nothing reaches a QP."""
        r = self.ud_qp()
        s = self.ud_qp()
        slot = r.qpn >> 16
        self.assertNotEqual(slot, 0)
        stray = ((slot + 128) % 255 + 1) << 16 | 0x42
        free = slot << 16 | ((r.qpn + 0x7000) & 0xffff)
        self.post_recv(r.qp, r.mr, 0, 1024, wr_id=1)
        before = mc.counters()
        ah = self.ah()
        s.mr.write(b'stray', 5, 0)
        for qpn in (stray, free):
            self.post_send(s.qp, s.mr, 0, 5, ud=(ah, qpn, QKEY))
            u.poll_cq(s.scq)
        # the fence: the only member of our slot receives in order
        s.mr.write(b'fence', 5, 0)
        self.post_send(s.qp, s.mr, 0, 5, ud=(ah, r.qpn, QKEY))
        u.poll_cq(s.scq)
        wc, = u.poll_cq(r.rcq)
        self.assertWC(wc, wr_id=1, byte_len=GRH_SIZE + 5)
        self.assertEqual(self.read(r.mr, 5, GRH_SIZE), b'fence')
        after = mc.counters()
        self.assertEqual(after['drop_no_owner'] - before['drop_no_owner'], 1)
        self.assertEqual(after['drop_unknown_qp'] - before['drop_unknown_qp'], 1)


# ---------------------------------------------------------------- children

def child_main(mode, arg):
    ctx = u.Context(name=u.device_name())
    pd = u.PD(ctx)
    tc = u.VerbsTestCase()
    tc.ctx, tc.pd = ctx, pd
    tc.gid = ctx.query_gid(u.PORT, 0)

    def say(obj):
        print(json.dumps(obj), flush=True)

    if mode == 'qpns':
        eps = [tc.ud_qp() for _ in range(int(arg))]
        say({'qpns': [ep.qpn for ep in eps]})
        sys.stdin.read()        # alive until the parent has compared
        return 0
    if mode == 'ud':
        ep = tc.ud_qp()
        for i in range(2):
            tc.post_recv(ep.qp, ep.mr, 1024 * i, 1024, wr_id=i)
        say({'qpn': ep.qpn})
        peers = json.loads(sys.stdin.readline())['peers']
        msg = f'from {ep.qpn:06x} ud'.ljust(32).encode()
        ep.mr.write(msg, 32, 2048)
        for ip, qpn in peers:
            tc.post_send(ep.qp, ep.mr, 2048, 32,
                         ud=(ah_to(pd, ip), qpn, QKEY))
            u.poll_cq(ep.scq)
        # one from the parent, one from the other child
        wcs = u.poll_cq(ep.rcq, 2)
        if any(w.status != e.IBV_WC_SUCCESS for w in wcs):
            return 1
        say({'got': len(wcs)})
        sys.stdin.read()
        return 0
    if mode == 'mcast':
        group = ipaddress.IPv4Address(arg)
        ep = tc.ud_qp()
        if mc.attach(ep.qp, group):
            return 1
        for i in range(3):
            tc.post_recv(ep.qp, ep.mr, 0, 1024, wr_id=i)
        say({'ready': True})
        wcs = u.poll_cq(ep.rcq, 3)
        if any(w.status != e.IBV_WC_SUCCESS for w in wcs):
            return 1
        ip = u.unpack_ipv4(tc.read(ep.mr, GRH_SIZE)[20:40])
        mc.detach(ep.qp, group)
        say({'got': len(wcs), 'src': str(ip['src'])})
        sys.stdin.read()
        return 0
    return 2


if __name__ == '__main__':
    if len(sys.argv) >= 3 and sys.argv[1] == 'child':
        sys.exit(child_main(sys.argv[2], sys.argv[3] if len(sys.argv) > 3
                            else None))
    unittest.main()
