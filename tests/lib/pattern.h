/* SPDX-License-Identifier: MIT */
/*
 * Deterministic pseudo-random numbers (splitmix64) and the data patterns
 * the C test programs write and verify: byte off of pattern key is the
 * same on both sides of a connection, at any alignment, so a receiver
 * checks what arrived without being sent a copy.
 */
#ifndef UROCE_TEST_PATTERN_H
#define UROCE_TEST_PATTERN_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/*
 * The program's own reads and writes of MR contents, which the library
 * writes and reads as a NIC's DMA would, under ThreadSanitizer.  The
 * program orders them through the peer process (a completion there, then
 * a message on the out-of-band socket), which TSan cannot see when the
 * peer is on the same-host path: over UDP its model of sockets (one
 * synchronisation object for all of them) happens to give it an edge
 * from the library's send of the ACK to our receive of the message, over
 * shared memory nothing does.  Each such "race" is then reported with the
 * library's stack long gone ("failed to restore the stack", so no
 * suppression can match it), at a cost per address that starved the
 * peer of the core for seconds (its ACK timeouts ran out: issue 15).  So
 * these accesses are not instrumented; the library's still are.
 */
#ifdef __SANITIZE_THREAD__
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define MR_ACCESS_BEGIN() __tsan_ignore_thread_begin()
#define MR_ACCESS_END()	  __tsan_ignore_thread_end()
#else
#define MR_ACCESS_BEGIN() \
	do { \
	} while (0)
#define MR_ACCESS_END() \
	do { \
	} while (0)
#endif

static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rng_next(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	return mix64(*s);
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

static inline uint64_t key_of(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	return mix64(seed + mix64(a + mix64(b + mix64(c + 0x5eed))));
}

static inline uint64_t pat_word(uint64_t key, uint64_t idx)
{
	return mix64(key ^ (idx * 0x9e3779b97f4a7c15ull));
}

/* Byte @off of the pattern @key: the same on both sides, any alignment. */
static inline uint8_t pat_byte(uint64_t key, uint64_t off)
{
	return (uint8_t)(pat_word(key, off >> 3) >> ((off & 7) * 8));
}

static inline void pat_fill(uint8_t *p, uint64_t len, uint64_t key, uint64_t off)
{
	uint64_t w;

	for (; len && (off & 7); len--)
		*p++ = pat_byte(key, off++);
	for (; len >= 8; len -= 8, p += 8, off += 8) {
		w = htole64(pat_word(key, off >> 3));
		memcpy(p, &w, 8);
	}
	for (; len; len--)
		*p++ = pat_byte(key, off++);
}

/* Returns the index of the first byte that differs, or UINT64_MAX. */
static inline uint64_t pat_check(const uint8_t *p, uint64_t len, uint64_t key,
				 uint64_t off)
{
	uint64_t i = 0, w, v;

	for (; i < len && ((off + i) & 7); i++)
		if (p[i] != pat_byte(key, off + i))
			return i;
	for (; i + 8 <= len; i += 8) {
		w = htole64(pat_word(key, (off + i) >> 3));
		memcpy(&v, p + i, 8);
		if (v != w)
			break;
	}
	for (; i < len; i++)
		if (p[i] != pat_byte(key, off + i))
			return i;
	return UINT64_MAX;
}

#endif
