// SPDX-License-Identifier: MIT
/*
 * ce_marker: an ECN-marking queue for the incast benchmark (issue 24),
 * since none of this kernel's qdiscs marks (only pfifo and htb exist).
 * A tc classifier (eBPF, direct action) on the egress of the device whose
 * htb queue is the bottleneck: it runs before the packet is queued, and
 * keeps a phantom queue (HULL, NSDI 2012) that fills with every packet's
 * length and drains at the bottleneck's rate.  An ECN-capable IPv4 packet
 * (ECT(0) or ECT(1)) that finds more than CE_MARKER_KB KiB in it leaves
 * marked CE, with its IP header checksum redone; others pass unchanged.
 * Nothing is delayed or dropped: the marks are the only signal, as on a
 * switch with a step marking threshold (DCTCP's, and DCQCN's Kmin=Kmax).
 *
 * The benchmark used the fault tests' NFQUEUE marker (tests/fault/
 * nfq_impair) before: it copies every packet to a process, and on 2 cores
 * shared with 16 benchmark processes it carried 1.3 of the 2 Gbit/s (8
 * flows without congestion control, utilisation 0.64 with it in the path
 * against 0.90 without), so it measured itself; in front of the receiver,
 * behind the htb queue, it saw at most the link's rate and marked nothing
 * while the queue stood at 36 ms.  This one is in the kernel, where the
 * queue is.
 *
 *   clang -target bpf -O2 -g -DCE_MARKER_MBIT=1960 -DCE_MARKER_KB=64 -c
 *   tc qdisc add dev DEV clsact
 *   tc filter add dev DEV egress bpf direct-action obj ce_marker.o sec tc
 *
 * The drain rate is a little below the htb's (1960 of 2000 Mbit/s): htb
 * also counts the headers of each datagram of a GSO train, and a phantom
 * queue that drained faster than the real one would let it stand unmarked.
 * A GSO packet (a train of datagrams) counts its whole length and is
 * marked whole: its datagrams share its IP header.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <stddef.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef CE_MARKER_MBIT
#define CE_MARKER_MBIT 2000
#endif
#ifndef CE_MARKER_KB
#define CE_MARKER_KB 64
#endif

struct phantom {
	struct bpf_spin_lock lock;
	__u64 bytes; /* in the phantom queue */
	__u64 ns;    /* when it was last drained */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct phantom);
} ce_marker_queue SEC(".maps");

SEC("tc")
int ce_marker(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	__u64 now = bpf_ktime_get_ns(), drained;
	struct phantom *q;
	__u32 key = 0;
	__u16 old_word, new_word;
	__u8 tos;
	int mark;

	q = bpf_map_lookup_elem(&ce_marker_queue, &key);
	if (!q)
		return TC_ACT_OK;
	bpf_spin_lock(&q->lock);
	if (now > q->ns) { /* another CPU may have read a later clock */
		/* bytes drained since: ns * Mbit/s / 8000 */
		drained = (now - q->ns) * CE_MARKER_MBIT / 8000;
		q->bytes = q->bytes > drained ? q->bytes - drained : 0;
		q->ns = now;
	}
	q->bytes += skb->len;
	mark = q->bytes > CE_MARKER_KB * 1024ull;
	bpf_spin_unlock(&q->lock);

	if (!mark || (void *)(ip + 1) > end ||
	    eth->h_proto != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	tos = ip->tos;
	if (!(tos & 3) || (tos & 3) == 3) /* not ECN-capable, or marked */
		return TC_ACT_OK;
	old_word = *(__u16 *)ip;
	tos |= 3;
	bpf_skb_store_bytes(skb, sizeof(*eth) + offsetof(struct iphdr, tos),
			    &tos, 1, 0);
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	ip = data + sizeof(*eth);
	if ((void *)(ip + 1) > end)
		return TC_ACT_OK;
	new_word = *(__u16 *)ip;
	bpf_l3_csum_replace(skb, sizeof(*eth) + offsetof(struct iphdr, check),
			    old_word, new_word, 2);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
