#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Cross-check uroce's ICRC against scapy's RoCE layer.

Usage: test_icrc_scapy.py PATH_TO_ICRC_TOOL

scapy computes the ICRC only for IPv4; for IPv6 we use a small reference
built here with zlib, from the same masking rules (IBA annex A17.8, as
rdma_rxe applies them), which is itself checked against scapy on IPv4.
"""
import random
import subprocess
import sys
import zlib

try:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw
    from scapy.compat import raw
    from scapy.contrib.roce import BTH
except ImportError:
    print("scapy not available, skipping")
    sys.exit(77)

# Extension header bytes after the BTH for each opcode (IBA 9.2), written
# independently of src/wire/opcode.c.
EXT = {
    0x00: 0, 0x01: 0, 0x02: 0, 0x03: 4, 0x04: 0, 0x05: 4,
    0x06: 16, 0x07: 0, 0x08: 0, 0x09: 4, 0x0a: 16, 0x0b: 20,
    0x0c: 16, 0x0d: 4, 0x0e: 0, 0x0f: 4, 0x10: 4, 0x11: 4,
    0x12: 12, 0x13: 28, 0x14: 28, 0x16: 4, 0x17: 4, 0x1c: 20, 0x1d: 16,
    0x20: 0, 0x21: 0, 0x22: 0, 0x23: 4, 0x24: 0, 0x25: 4,
    0x26: 16, 0x27: 0, 0x28: 0, 0x29: 4, 0x2a: 16, 0x2b: 20,
    0x64: 8, 0x65: 12, 0x81: 16,
}
NO_PAYLOAD = {0x0c, 0x11, 0x12, 0x13, 0x14, 0x1c, 0x81}


def ref_icrc(ipraw):
    """ICRC of a whole IPv4/IPv6 packet, as 4 wire bytes."""
    if ipraw[0] >> 4 == 4:
        iph = bytearray(ipraw[:20])
        iph[1] = 0xff                       # TOS
        iph[8] = 0xff                       # TTL
        iph[10:12] = b'\xff\xff'            # header checksum
        rest = ipraw[20:]
    else:
        iph = bytearray(ipraw[:40])
        iph[0:4] = b'\x6f\xff\xff\xff'      # traffic class, flow label
        iph[7] = 0xff                       # hop limit
        rest = ipraw[40:]
    udp = bytearray(rest[:8])
    udp[6:8] = b'\xff\xff'
    bth = bytearray(rest[8:20])
    bth[4] = 0xff
    crc = zlib.crc32(b'\xff' * 8 + bytes(iph) + bytes(udp) + bytes(bth) +
                     rest[20:-4])
    return crc.to_bytes(4, 'little')


def build(rng, v6):
    op = rng.choice(sorted(EXT))
    if op in NO_PAYLOAD:
        plen = 8 if op == 0x1d else 0
    else:
        plen = rng.choice([0, 1, 2, 3, 4, 5, 7, 64, 255, 256, 1023, 1024,
                           2047, 4093, 4095, 4096, rng.randrange(4097)])
    if op == 0x1d:
        plen = 8
    pad = -plen & 3
    bth = BTH(opcode=op, solicited=rng.randrange(2),
              migreq=rng.randrange(2), padcount=pad,
              pkey=rng.choice([0xffff, 0x8001]), fecn=rng.randrange(2),
              becn=rng.randrange(2), dqpn=rng.randrange(1 << 24),
              ackreq=rng.randrange(2), psn=rng.randrange(1 << 24))
    body = bytes(rng.randrange(256) for _ in range(EXT[op] + plen))
    roce = bth / Raw(body + b'\0' * pad + b'\0\0\0\0')
    udp = UDP(sport=rng.randrange(0xc000, 0x10000), dport=4791)
    if v6:
        pkt = IPv6(src='fd00::%x' % rng.randrange(1, 0xffff),
                   dst='2001:db8::%x' % rng.randrange(1, 0xffff),
                   tc=rng.randrange(256), fl=rng.randrange(1 << 20),
                   hlim=rng.randrange(1, 256)) / udp / roce
        b = bytearray(raw(pkt))
        b[-4:] = ref_icrc(bytes(b))         # scapy leaves IPv6 ICRC zero
        return bytes(b)
    pkt = IP(src='10.%d.%d.%d' % tuple(rng.randrange(256) for _ in range(3)),
             dst='192.168.%d.%d' % (rng.randrange(256), rng.randrange(256)),
             id=rng.randrange(1 << 16), flags=rng.choice([0, 'DF']),
             tos=rng.randrange(256), ttl=rng.randrange(1, 256)) / udp / roce
    b = raw(pkt)
    # our reference must agree with scapy before we trust it on IPv6
    assert ref_icrc(b) == b[-4:], "reference disagrees with scapy"
    return b


def run(tool, pkts):
    out = subprocess.run([tool], input='\n'.join(p.hex() for p in pkts),
                         capture_output=True, text=True, check=True).stdout
    res = [line.split() for line in out.splitlines()]
    assert len(res) == len(pkts), out
    return res


def main():
    tool = sys.argv[1]
    rng = random.Random(4791)
    pkts = [build(rng, v6=(i % 4 == 3)) for i in range(600)]
    fails = 0
    for p, (icrc, ok) in zip(pkts, run(tool, pkts)):
        if icrc != p[-4:].hex() or ok != '1':
            fails += 1
            print('MISMATCH ours=%s check=%s want=%s pkt=%s' %
                  (icrc, ok, p[-4:].hex(), p.hex()[:160]))

    # Corrupt one bit past the UDP header: the check must fail.  BTH byte 4
    # (FECN, BECN, resv6) is masked out of the ICRC, so leave it alone.
    bad = []
    for p in pkts[:200]:
        b = bytearray(p)
        hdr = 20 if b[0] >> 4 == 4 else 40
        bit = rng.randrange((len(b) - hdr - 8) * 8)
        while bit // 8 == 4:
            bit = rng.randrange((len(b) - hdr - 8) * 8)
        b[hdr + 8 + bit // 8] ^= 1 << (bit % 8)
        bad.append(bytes(b))
    for p, (_, ok) in zip(bad, run(tool, bad)):
        if ok != '0':
            fails += 1
            print('CORRUPTION NOT DETECTED pkt=%s' % p.hex()[:160])

    print('%d packets, %d failures' % (len(pkts) + len(bad), fails))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
