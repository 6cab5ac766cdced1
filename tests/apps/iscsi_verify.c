// SPDX-License-Identifier: MIT
/*
 * A data-verifying iSCSI initiator on libiscsi: writes a pattern over a
 * region of a LUN in extents of varied sizes (one block to 256 KiB, DEPTH
 * commands outstanding, driven by poll() on libiscsi's fd as its own
 * tools are), reads the region back in other extents and checks every
 * byte.  The URL picks the transport: iser:// (RDMA) or iscsi:// (TCP).
 *
 *   iscsi_verify [-i INITIATOR] [-s SEED] [-m MiB] [-q DEPTH]
 *                [-w | -r] [-f FILE] URL
 *
 *   -w   write only, -r   read and check only (default: both), so that
 *        what one transport wrote another can read
 *   -f   also check the LUN's backing FILE (tgtd's, on tmpfs) after
 *        SYNCHRONIZE CACHE: the bytes reached the store, not a cache
 *
 * Byte o of the LUN (o < MiB MiB) holds byte o of the stream of 64-bit
 * words mix64(SEED + word).  Prints "iscsi_verify: OK ..." and exits 0,
 * or "iscsi_verify: FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "../lib/pattern.h"

/* libiscsi's iSER moves at most 256 KiB per command (DATA_BUFFER_SIZE) */
#define MAX_EXTENT (256u << 10)

struct extent {
	uint64_t off; /* bytes from the start of the LUN */
	uint32_t len;
};

struct io {
	struct verify *v;
	struct extent ext;
	unsigned char *buf; /* what a write sends */
};

struct verify {
	struct iscsi_context *iscsi;
	int lun;
	uint32_t block;
	uint64_t seed;
	uint64_t bytes; /* size of the region */
	unsigned int depth;
	unsigned int inflight;
	uint64_t moved, checked;
	bool failed;
};

static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("iscsi_verify: FAIL ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(1);
}

static uint8_t pattern_byte(uint64_t seed, uint64_t off)
{
	uint64_t w = mix64(seed + off / 8);

	return (uint8_t)(w >> (8 * (off % 8)));
}

static void fill(uint64_t seed, uint64_t off, unsigned char *p, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = pattern_byte(seed, off + i);
}

/* The first byte of p[0..len) that is not the pattern at off, or -1. */
static int64_t mismatch(uint64_t seed, uint64_t off, const unsigned char *p,
			uint32_t len)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, off + i))
			return i;
	return -1;
}

/* Extents covering [0, bytes) in whole blocks: sizes from one block to
 * MAX_EXTENT, mostly small, with powers of two among them. */
static size_t make_extents(struct extent **out, uint64_t bytes, uint32_t block,
			   uint64_t *rng)
{
	struct extent *e = NULL;
	size_t n = 0, cap = 0;
	uint64_t off = 0, len;

	while (off < bytes) {
		switch (rng_below(rng, 4)) {
		case 0:
			len = block * (1 + rng_below(rng, 8));
			break;
		case 1:
			len = (uint64_t)block << rng_below(rng, 10);
			break;
		default:
			len = block * (1 + rng_below(rng, MAX_EXTENT / block));
			break;
		}
		if (len > MAX_EXTENT)
			len = MAX_EXTENT;
		if (len > bytes - off)
			len = bytes - off;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			e = realloc(e, cap * sizeof(*e));
			if (!e)
				fail("out of memory");
		}
		e[n].off = off;
		e[n].len = (uint32_t)len;
		n++;
		off += len;
	}
	*out = e;
	return n;
}

static void io_done(struct iscsi_context *iscsi, int status, void *command_data,
		    void *private_data)
{
	struct scsi_task *task = command_data;
	struct io *io = private_data;
	struct verify *v = io->v;
	int64_t bad;

	v->inflight--;
	if (status != SCSI_STATUS_GOOD) {
		printf("iscsi_verify: FAIL %s of %u bytes at %llu: status %d: %s\n",
		       io->buf ? "write" : "read", io->ext.len,
		       (unsigned long long)io->ext.off, status,
		       iscsi_get_error(iscsi));
		v->failed = true;
		goto out;
	}
	v->moved += io->ext.len;
	if (io->buf)
		goto out;
	if (task->datain.size != (int)io->ext.len) {
		printf("iscsi_verify: FAIL read of %u bytes at %llu returned %d\n",
		       io->ext.len, (unsigned long long)io->ext.off,
		       task->datain.size);
		v->failed = true;
		goto out;
	}
	bad = mismatch(v->seed, io->ext.off, task->datain.data, io->ext.len);
	if (bad >= 0) {
		printf("iscsi_verify: FAIL byte %llu of the LUN: 0x%02x, want 0x%02x\n",
		       (unsigned long long)(io->ext.off + bad),
		       task->datain.data[bad],
		       pattern_byte(v->seed, io->ext.off + bad));
		v->failed = true;
		goto out;
	}
	v->checked += io->ext.len;
out:
	scsi_free_scsi_task(task);
	free(io->buf);
	free(io);
}

/*
 * Waits for libiscsi's fd and lets it work; false once it failed.  Only
 * when the fd is ready: libiscsi's iSER takes a call with no events for
 * a broken connection.  A command that never completes is the test's
 * timeout to catch.
 */
static bool service(struct verify *v)
{
	struct pollfd pfd = {
		.fd = iscsi_get_fd(v->iscsi),
		.events = (short)iscsi_which_events(v->iscsi),
	};
	int n;

	n = poll(&pfd, 1, 1000);
	if (n < 0 && errno != EINTR)
		fail("poll: %s", strerror(errno));
	if (n <= 0)
		return true;
	if (iscsi_service(v->iscsi, pfd.revents) < 0) {
		printf("iscsi_verify: FAIL iscsi_service: %s\n",
		       iscsi_get_error(v->iscsi));
		return false;
	}
	return true;
}

static void run_pass(struct verify *v, const struct extent *e, size_t n,
		     bool write)
{
	struct scsi_task *task;
	struct io *io;
	size_t i = 0;

	while ((i < n || v->inflight) && !v->failed) {
		while (i < n && v->inflight < v->depth) {
			io = calloc(1, sizeof(*io));
			if (!io)
				fail("out of memory");
			io->v = v;
			io->ext = e[i];
			if (write) {
				io->buf = malloc(e[i].len);
				if (!io->buf)
					fail("out of memory");
				fill(v->seed, e[i].off, io->buf, e[i].len);
				task = iscsi_write16_task(v->iscsi, v->lun,
							  e[i].off / v->block,
							  io->buf, e[i].len,
							  (int)v->block, 0, 0,
							  0, 0, 0, io_done, io);
			} else {
				task = iscsi_read16_task(v->iscsi, v->lun,
							 e[i].off / v->block,
							 e[i].len,
							 (int)v->block, 0, 0, 0,
							 0, 0, io_done, io);
			}
			if (!task)
				fail("cannot queue a %s: %s",
				     write ? "write" : "read",
				     iscsi_get_error(v->iscsi));
			v->inflight++;
			i++;
		}
		if (!service(v))
			v->failed = true;
	}
	if (v->failed)
		exit(1);
}

/* The backing store itself, read beside tgtd: the bytes are there. */
static void check_file(struct verify *v, const char *path)
{
	unsigned char *buf;
	uint64_t off;
	int64_t bad;
	ssize_t got;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("open %s: %s", path, strerror(errno));
	buf = malloc(MAX_EXTENT);
	if (!buf)
		fail("out of memory");
	for (off = 0; off < v->bytes; off += (uint64_t)got) {
		got = pread(fd, buf, MAX_EXTENT, (off_t)off);
		if (got <= 0)
			fail("read %s at %llu: %s", path,
			     (unsigned long long)off,
			     got ? strerror(errno) : "end of file");
		if ((uint64_t)got > v->bytes - off)
			got = (ssize_t)(v->bytes - off);
		bad = mismatch(v->seed, off, buf, (uint32_t)got);
		if (bad >= 0)
			fail("byte %llu of %s: 0x%02x, want 0x%02x",
			     (unsigned long long)(off + bad), path, buf[bad],
			     pattern_byte(v->seed, off + bad));
	}
	free(buf);
	close(fd);
}

static void usage(void)
{
	fprintf(stderr, "usage: iscsi_verify [-i INITIATOR] [-s SEED] [-m MiB] "
			"[-q DEPTH] [-w | -r] [-f FILE] URL\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *initiator = "iqn.2026-01.org.uroce:verify", *file = NULL;
	struct verify v = { .seed = 1, .depth = 8 };
	struct scsi_readcapacity16 *rc16;
	struct extent *wext, *rext;
	struct iscsi_url *url;
	struct scsi_task *task;
	bool do_write = true, do_read = true;
	uint64_t mib = 16, rng;
	size_t nw, nr;
	int c;

	while ((c = getopt(argc, argv, "i:s:m:q:wrf:")) != -1) {
		switch (c) {
		case 'i':
			initiator = optarg;
			break;
		case 's':
			v.seed = strtoull(optarg, NULL, 0);
			break;
		case 'm':
			mib = strtoull(optarg, NULL, 0);
			break;
		case 'q':
			v.depth = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			do_read = false;
			break;
		case 'r':
			do_write = false;
			break;
		case 'f':
			file = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc - 1 || !mib || !v.depth || (!do_write && !do_read))
		usage();

	v.iscsi = iscsi_create_context(initiator);
	if (!v.iscsi)
		fail("iscsi_create_context");
	url = iscsi_parse_full_url(v.iscsi, argv[optind]);
	if (!url)
		fail("bad URL %s: %s", argv[optind], iscsi_get_error(v.iscsi));
	iscsi_set_session_type(v.iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(v.iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	if (iscsi_full_connect_sync(v.iscsi, url->portal, url->lun))
		fail("login to %s: %s", argv[optind], iscsi_get_error(v.iscsi));
	v.lun = url->lun;

	task = iscsi_readcapacity16_sync(v.iscsi, v.lun);
	if (!task || task->status != SCSI_STATUS_GOOD)
		fail("READ CAPACITY(16): %s", iscsi_get_error(v.iscsi));
	rc16 = scsi_datain_unmarshall(task);
	if (!rc16)
		fail("READ CAPACITY(16): cannot parse the answer");
	v.block = rc16->block_length;
	v.bytes = mib << 20;
	if (!v.block || v.bytes % v.block ||
	    v.bytes / v.block > rc16->returned_lba + 1)
		fail("the LUN (%llu blocks of %u) is smaller than %llu MiB",
		     (unsigned long long)rc16->returned_lba + 1, v.block,
		     (unsigned long long)mib);
	scsi_free_scsi_task(task);

	/* writes and reads in different extents: a misplaced one shows */
	rng = v.seed;
	nw = make_extents(&wext, v.bytes, v.block, &rng);
	nr = make_extents(&rext, v.bytes, v.block, &rng);
	if (do_write) {
		run_pass(&v, wext, nw, true);
		task = iscsi_synchronizecache16_sync(v.iscsi, v.lun, 0, 0, 0, 0);
		if (!task || task->status != SCSI_STATUS_GOOD)
			fail("SYNCHRONIZE CACHE(16): %s",
			     iscsi_get_error(v.iscsi));
		scsi_free_scsi_task(task);
	}
	if (do_read)
		run_pass(&v, rext, nr, false);
	if (file)
		check_file(&v, file);

	iscsi_logout_sync(v.iscsi);
	iscsi_destroy_url(url);
	iscsi_destroy_context(v.iscsi);
	printf("iscsi_verify: OK %s bytes_moved=%llu bytes_verified=%llu "
	       "writes=%zu reads=%zu%s\n",
	       argv[optind], (unsigned long long)v.moved,
	       (unsigned long long)v.checked, do_write ? nw : 0,
	       do_read ? nr : 0, file ? " file=checked" : "");
	free(wext);
	free(rext);
	return 0;
}
