// SPDX-License-Identifier: MIT
/*
 * Fault injection on transmit (UROCE_FAULT=drop=P,dup=P,delay=P,seed=N,
 * rnr=N,access=N,nomem=N; docs/testing.md): a deterministic generator
 * decides per datagram whether it is dropped, sent twice or held back
 * until the next one has left.  udp.c's send goes through here only when
 * the variable is set.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"

static uint64_t rng_next(struct uroce_fault *f)
{
	/* xorshift64*: deterministic for a given seed */
	f->rng ^= f->rng >> 12;
	f->rng ^= f->rng << 25;
	f->rng ^= f->rng >> 27;
	return f->rng * 2685821657736338717ull;
}

static bool chance(struct uroce_fault *f, uint32_t p)
{
	return p && (uint32_t)(rng_next(f) >> 32) < p;
}

static uint32_t prob(const char *v)
{
	double d = strtod(v, NULL);

	if (d <= 0)
		return 0;
	if (d >= 1)
		return UINT32_MAX;
	return (uint32_t)(d * 4294967296.0);
}

void uroce_net_fault_init(struct uroce_dev *dev)
{
	const char *env = uroce_config()->fault;
	struct uroce_fault *f = &dev->net.fault;
	char *copy, *tok, *save = NULL;
	uint64_t seed = 1;

	if (!env || !*env)
		return;
	copy = strdup(env);
	if (!copy)
		return;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq) {
			fprintf(stderr, "uroce: UROCE_FAULT: ignoring '%s'\n",
				tok);
			continue;
		}
		*eq++ = '\0';
		if (!strcmp(tok, "drop"))
			f->drop = prob(eq);
		else if (!strcmp(tok, "dup"))
			f->dup = prob(eq);
		else if (!strcmp(tok, "delay"))
			f->delay = prob(eq);
		else if (!strcmp(tok, "seed"))
			seed = strtoull(eq, NULL, 0);
		else if (!strcmp(tok, "rnr"))
			atomic_store(&f->rnr_left, atoi(eq));
		else if (!strcmp(tok, "access"))
			atomic_store(&f->access_left, atoi(eq));
		else if (!strcmp(tok, "nomem"))
			atomic_store(&f->nomem_left, atoi(eq));
		else
			fprintf(stderr, "uroce: UROCE_FAULT: unknown '%s'\n",
				tok);
	}
	free(copy);
	f->rng = seed ? seed : 1;
	f->held = malloc(UROCE_DGRAM_MAX);
	f->on = f->held != NULL;
	fprintf(stderr, "uroce: FAULT INJECTION ON: UROCE_FAULT=%s\n", env);
}

/* UROCE_FAULT=nomem=N: the next N allocations that ask here fail (the
 * verbs that must undo nothing on ENOMEM, e.g. ibv_modify_qp). */
bool uroce_fault_nomem(struct uroce_dev *dev)
{
	struct uroce_fault *f = &dev->net.fault;
	int left = atomic_load(&f->nomem_left);

	while (left > 0)
		if (atomic_compare_exchange_weak(&f->nomem_left, &left, left - 1))
			return true;
	return false;
}

int uroce_net_fault_send(struct uroce_dev *dev,
			 const struct sockaddr_storage *dst,
			 struct uroce_ipopt ip, const struct iovec *iov,
			 int iovcnt)
{
	struct uroce_fault *f = &dev->net.fault;
	bool had_held = f->held_len != 0;
	int i, err;

	if (chance(f, f->drop)) {
		uroce_count(dev, UROCE_CNT_FAULT_DROPS, 1);
		return 0;
	}
	if (!had_held && chance(f, f->delay)) {
		/* hold this one back; it goes out after the next packet */
		size_t off = 0;

		for (i = 0; i < iovcnt; i++) {
			if (off + iov[i].iov_len > UROCE_DGRAM_MAX)
				return uroce_net_raw_send(dev, dst, ip, iov,
							  iovcnt);
			memcpy(f->held + off, iov[i].iov_base, iov[i].iov_len);
			off += iov[i].iov_len;
		}
		f->held_len = off;
		f->held_dst = *dst;
		f->held_ip = ip;
		uroce_count(dev, UROCE_CNT_FAULT_DELAYS, 1);
		return 0;
	}
	err = uroce_net_raw_send(dev, dst, ip, iov, iovcnt);
	if (chance(f, f->dup)) {
		uroce_count(dev, UROCE_CNT_FAULT_DUPS, 1);
		uroce_net_raw_send(dev, dst, ip, iov, iovcnt);
	}
	if (had_held) {
		struct iovec h = { .iov_base = f->held, .iov_len = f->held_len };

		f->held_len = 0;
		uroce_net_raw_send(dev, &f->held_dst, f->held_ip, &h, 1);
	}
	return err;
}
