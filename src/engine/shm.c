// SPDX-License-Identifier: MIT
/*
 * The stats segment (include/uroce_shm.h): the device's counters live in
 * /dev/shm/uroce.<pid>, where `uroce stats` reads them while we run, and a
 * small thread answers `uroce qps` with a snapshot of the QP table.
 *
 * Lifetime: created when the device comes up; removed when it goes down
 * at the last ibv_close_device (uroce_shm_close: the counters move back
 * to the device first), or unlinked by a destructor at exit (the mapping
 * itself then stays until the process is gone, so late counter updates
 * from threads still running land somewhere).  A
 * process killed by a signal leaves its file behind; the next uroce
 * process and the tool remove files whose process is gone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/thread.h"
#include "dev.h"
#include "uroce_shm.h"

static struct uroce_shm_hdr *shm;
static char shm_name[64]; /* "/uroce.<pid>" */
static pid_t shm_pid;
static pthread_t snap_thread;
static bool snap_running;
static _Atomic bool snap_stop; /* uroce_shm_close asked */

static void own_comm(char *out, size_t len)
{
	char buf[256] = "";
	ssize_t n = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	const char *base;

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	base = strrchr(buf, '/');
	snprintf(out, len, "%s", base ? base + 1 : buf);
}

/* Remove the segments of processes that died without unlinking theirs. */
static void remove_stale(void)
{
	DIR *d = opendir(UROCE_SHM_DIR);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		long pid = uroce_shm_name_pid(e->d_name);

		if (pid < 0)
			continue;
		if (kill((pid_t)pid, 0) && errno == ESRCH &&
		    !unlinkat(dirfd(d), e->d_name, 0))
			uroce_log(UROCE_LOG_DEBUG,
				  "removed stale stats segment of pid %ld", pid);
	}
	closedir(d);
}

/*
 * One segment's header as its writer last published it: the address
 * fields read between two equal, even values of addr_seq; false if the
 * file is no segment of a live uroce process with a LID.
 */
static bool read_live_hdr(int dir, const char *name, int pid,
			  struct uroce_shm_hdr *h)
{
	const off_t seq_off = offsetof(struct uroce_shm_hdr, addr_seq);
	uint32_t seq0, seq1;
	bool ok = false;
	int fd, tries;

	fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	for (tries = 0; tries < 1000; tries++) {
		if (pread(fd, &seq0, sizeof(seq0), seq_off) != sizeof(seq0) ||
		    pread(fd, h, sizeof(*h), 0) != sizeof(*h) ||
		    pread(fd, &seq1, sizeof(seq1), seq_off) != sizeof(seq1))
			break;
		if (!(seq0 & 1) && seq0 == seq1) {
			ok = true;
			break;
		}
		sched_yield(); /* the writer is between two stores */
	}
	close(fd);
	if (!ok || h->magic != UROCE_SHM_MAGIC ||
	    h->version != UROCE_SHM_VERSION || !h->ready || h->pid != pid ||
	    !uroce_shm_has_lid(h->hdr_size) || !h->lid)
		return false;
	/* a dead process's segment, or its pid reused since */
	if ((kill(pid, 0) && errno != EPERM) ||
	    uroce_proc_start_time(pid) != h->start_time)
		return false;
	return true;
}

/*
 * fn(header, arg) for the segment of every other live uroce process with
 * a LID, until fn returns non-zero; returns that, 0 after the last, or
 * -ENOENT without /dev/shm.
 */
static int each_live(int (*fn)(const struct uroce_shm_hdr *h, void *arg),
		     void *arg)
{
	DIR *d = opendir(UROCE_SHM_DIR);
	struct uroce_shm_hdr h;
	struct dirent *e;
	int r = 0;

	if (!d)
		return -ENOENT;
	while (!r && (e = readdir(d))) {
		long pid = uroce_shm_name_pid(e->d_name);

		if (pid >= 0 && pid != getpid() &&
		    read_live_hdr(dirfd(d), e->d_name, (int)pid, &h))
			r = fn(&h, arg);
	}
	closedir(d);
	return r;
}

struct find_lid {
	uint16_t lid;
	int found;
	union ibv_gid *gid;
};

static int find_lid_one(const struct uroce_shm_hdr *h, void *arg)
{
	struct find_lid *f = arg;

	if (h->lid != f->lid)
		return 0;
	if (f->found++)
		return 1; /* a second holder: no need to look further */
	memcpy(f->gid->raw, h->gid, 16);
	return 0;
}

int uroce_shm_find_lid(uint16_t lid, union ibv_gid *gid)
{
	struct find_lid f = { .lid = lid, .gid = gid };

	if (each_live(find_lid_one, &f) < 0 || !f.found)
		return -ENOENT;
	return f.found > 1 ? -ENOTUNIQ : 0;
}

struct lid_map {
	uint8_t *named;
	size_t nlids;
};

static int lid_map_one(const struct uroce_shm_hdr *h, void *arg)
{
	struct lid_map *m = arg;

	if (h->lid < m->nlids)
		m->named[h->lid / 8] |= (uint8_t)(1u << (h->lid % 8));
	return 0;
}

void uroce_shm_lids(uint8_t *named, size_t nlids)
{
	struct lid_map m = { named, nlids };

	memset(named, 0, (nlids + 7) / 8);
	(void)each_live(lid_map_one, &m);
}

static long futex(uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

static uint8_t qp_state_of(const struct uroce_qp *qp)
{
	return (uint8_t)qp->attr.qp_state;
}

/* Fill the QP table; dev->lock held. */
static void snapshot(struct uroce_dev *dev)
{
	struct uroce_shm_qp *tbl = (struct uroce_shm_qp *)((char *)shm +
							   shm->qp_off);
	uint32_t n = 0, over = 0, i;
	struct timespec ts;

	uroce_assert_held(&dev->lock);
	for (i = 0; i < dev->obj.nqps; i++) {
		const struct uroce_qp *qp = dev->obj.live[i];
		struct uroce_shm_qp *e;

		if (n == shm->qp_slots) {
			over++;
			continue;
		}
		e = &tbl[n++];
		memset(e, 0, sizeof(*e));
		e->qpn = qp->ex.qp_base.qp_num;
		e->dest_qpn = qp->attr.dest_qp_num;
		e->state = qp_state_of(qp);
		e->type = (uint8_t)qp->type;
		e->mtu = (uint16_t)qp->mtu;
		e->timeout = qp->attr.timeout;
		e->retry_cnt = qp->attr.retry_cnt;
		e->rnr_retry = qp->attr.rnr_retry;
		/* the address the QP sends to, however it was given
		 * (a GRH-less ah_attr names a LID, not a GID) */
		if (qp->peer.ss_family) {
			union ibv_gid peer;

			uroce_gid_from_addr(&qp->peer, &peer);
			memcpy(e->peer_gid, peer.raw, 16);
			e->path = uroce_local_peer(dev, &qp->peer,
						   qp->attr.dest_qp_num) ?
					  UROCE_SHM_PATH_LOCAL :
					  UROCE_SHM_PATH_UDP;
		}
		e->sq_psn = qp->req.psn;
		e->unacked_psn = qp->comp.psn;
		e->epsn = qp->resp.epsn;
		e->sq_posted = qp->sq.head - qp->sq.tail;
		e->sq_unsent = qp->sq.head - qp->sq.next;
		e->sq_max_wr = qp->sq.max_wr;
		e->rq_posted = qp->rq.head - qp->rq.tail;
		e->rq_max_wr = qp->rq.max_wr;
		e->cwnd = qp->req.cwnd;
		e->retry_left = qp->req.retry_left;
		e->rnr_retry_left = qp->req.rnr_retry_left;
		e->tx_pkts = qp->cnt_tx_pkts;
		e->rx_pkts = qp->cnt_rx_pkts;
		e->retransmits = qp->cnt_retrans;
		e->srtt_ns = qp->req.srtt_ns;
		e->rttvar_ns = qp->req.rttvar_ns;
		e->cc_rate = qp->cc.rate;
		e->cc_ce_seen = qp->cc.ce_seen;
		e->cc_cnp_sent = qp->cc.cnp_sent;
		e->cc_cnp_rx = qp->cc.cnp_rx;
		e->cc_cuts = qp->cc.cuts;
		e->cc_rtt_ns = qp->cc.rtt_ns;
		e->cc_base_rtt_ns = qp->cc.base_ns;
		e->cc_fallbacks = qp->cc.fallbacks;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	shm->snap_time_ns = (uint64_t)ts.tv_sec * 1000000000ull +
			    (uint64_t)ts.tv_nsec;
	shm->nqps = n;
	shm->qp_overflow = over;
}

/* Sleeps on snap_req until a reader asks for a QP snapshot. */
static void *snap_main(void *arg)
{
	struct uroce_dev *dev = arg;

	while (!atomic_load(&snap_stop)) {
		uint32_t done = __atomic_load_n(&shm->snap_done,
						__ATOMIC_ACQUIRE);
		uint32_t req = __atomic_load_n(&shm->snap_req, __ATOMIC_ACQUIRE);

		if (req == done) {
			futex(&shm->snap_req, FUTEX_WAIT, done);
			continue;
		}
		pthread_mutex_lock(&dev->lock);
		snapshot(dev);
		uroce_dev_unlock(dev);
		/* release: the table is written before snap_done says so */
		__atomic_store_n(&shm->snap_done, req, __ATOMIC_RELEASE);
		futex(&shm->snap_done, FUTEX_WAKE, INT_MAX);
	}
	return NULL;
}

__attribute__((destructor)) static void shm_unlink_at_exit(void)
{
	/* a forked child shares the mapping but not the name */
	if (shm && shm_pid == getpid())
		shm_unlink(shm_name);
}

/* The device's address and LID, as one change for readers (addr_seq). */
static void put_addr(struct uroce_dev *dev)
{
	uint32_t seq = __atomic_load_n(&shm->addr_seq, __ATOMIC_RELAXED);

	__atomic_store_n(&shm->addr_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(shm->gid, dev->net.gid.raw, 16);
	uroce_addr_ntop(&dev->net.local, shm->addr, sizeof(shm->addr));
	shm->lid = dev->port.lid;
	shm->share_slot = uroce_share_slot(dev);
	shm->active_mtu = (uint32_t)uroce_mtu_bytes(dev->net.active_mtu);
	shm->netdev_mtu = dev->net.netdev_mtu;
	__atomic_store_n(&shm->addr_seq, seq + 2, __ATOMIC_RELEASE);
}

void uroce_shm_set_addr(struct uroce_dev *dev)
{
	if (!shm)
		return;
	pthread_mutex_lock(&dev->lock);
	put_addr(dev);
	uroce_dev_unlock(dev);
}

static void fill_hdr(struct uroce_dev *dev, size_t size, uint32_t names_off,
		     uint32_t cnt_off, uint32_t qp_off)
{
	const char *fault = uroce_config()->fault;
	char *names = (char *)shm + names_off;
	int i;

	shm->magic = UROCE_SHM_MAGIC;
	shm->version = UROCE_SHM_VERSION;
	shm->hdr_size = sizeof(*shm);
	shm->size = size;
	shm->ncounters = UROCE_CNT_NUM;
	shm->names_off = names_off;
	shm->cnt_off = cnt_off;
	shm->qp_off = qp_off;
	shm->qp_slots = UROCE_SHM_QP_SLOTS;
	shm->qp_entry_size = sizeof(struct uroce_shm_qp);
	shm->pid = (int32_t)shm_pid;
	shm->start_time = uroce_proc_start_time(shm_pid);
	own_comm(shm->comm, sizeof(shm->comm));
	snprintf(shm->dev_name, sizeof(shm->dev_name), "%s", dev->ibdev.name);
	put_addr(dev);
	shm->node_guid = dev->guid;
	snprintf(shm->pcap, sizeof(shm->pcap), "%s", uroce_pcap_path());
	snprintf(shm->fault, sizeof(shm->fault), "%s", fault ? fault : "");
	for (i = 0; i < UROCE_CNT_NUM; i++)
		snprintf(names + (size_t)i * UROCE_SHM_NAME_LEN,
			 UROCE_SHM_NAME_LEN, "%s", uroce_counter_name[i]);
}

void uroce_shm_open(struct uroce_dev *dev)
{
	uint32_t names_off = sizeof(struct uroce_shm_hdr);
	uint32_t cnt_off = names_off + UROCE_CNT_NUM * UROCE_SHM_NAME_LEN;
	uint32_t qp_off = cnt_off + UROCE_CNT_NUM * sizeof(uint64_t);
	size_t size = qp_off + UROCE_SHM_QP_SLOTS * sizeof(struct uroce_shm_qp);
	_Atomic uint64_t *cnt;
	void *p;
	int fd, i, err;

	if (shm)
		return;
	remove_stale();
	shm_pid = getpid();
	snprintf(shm_name, sizeof(shm_name), "/%s%d", UROCE_SHM_PREFIX,
		 (int)shm_pid);
	/* one left by an earlier program of this pid (exec) is not ours */
	shm_unlink(shm_name);
	fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	/* 0600 whatever the umask: the owner and root may look */
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)size))
		goto fail_unlink;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail_unlink;
	close(fd);
	shm = p;
	fill_hdr(dev, size, names_off, cnt_off, qp_off);

	/* move the counters in: whatever was counted so far comes along */
	cnt = (_Atomic uint64_t *)((char *)shm + cnt_off);
	for (i = 0; i < UROCE_CNT_NUM; i++)
		atomic_store(&cnt[i], atomic_load(&dev->stats.cnt_private[i]));
	dev->stats.cnt = cnt;

	atomic_store(&snap_stop, false);
	err = uroce_thread_create(&snap_thread, 64 << 10, snap_main, dev);
	if (err)
		uroce_log(UROCE_LOG_WARN, "no QP snapshot thread: %s",
			  strerror(err));
	snap_running = !err;

	__atomic_store_n(&shm->ready, 1, __ATOMIC_RELEASE);
	uroce_log(UROCE_LOG_INFO, "stats segment %s%s (uroce stats %d)",
		  UROCE_SHM_DIR, shm_name, (int)shm_pid);
	return;

fail_unlink:
	err = errno;
	shm_unlink(shm_name);
	close(fd);
	errno = err;
fail:
	uroce_log(UROCE_LOG_WARN,
		  "no stats segment %s%s: %s; uroce stats "
		  "cannot see this process",
		  UROCE_SHM_DIR, shm_name, strerror(errno));
}

void uroce_shm_close(struct uroce_dev *dev)
{
	int i;

	if (!shm)
		return;
	if (snap_running) {
		/* snap_req moves, so a FUTEX_WAIT about to sleep does not */
		atomic_store(&snap_stop, true);
		__atomic_add_fetch(&shm->snap_req, 1, __ATOMIC_RELEASE);
		futex(&shm->snap_req, FUTEX_WAKE, INT_MAX);
		pthread_join(snap_thread, NULL);
		snap_running = false;
	}
	/* the counters go on in the device: a later open brings them back */
	for (i = 0; i < UROCE_CNT_NUM; i++)
		atomic_store(&dev->stats.cnt_private[i],
			     atomic_load(&dev->stats.cnt[i]));
	dev->stats.cnt = dev->stats.cnt_private;
	if (shm_pid == getpid())
		shm_unlink(shm_name);
	munmap(shm, shm->size);
	shm = NULL;
}
