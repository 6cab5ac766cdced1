// SPDX-License-Identifier: MIT
/*
 * uroce: look inside the uroce devices of running programs.
 *
 *	uroce devices			which processes have a uroce device
 *	uroce stats [PID] [--watch]	their counters
 *	uroce qps [PID]			their queue pairs
 *
 * Every uroce process publishes a stats segment, /dev/shm/uroce.<pid>
 * (include/uroce_shm.h).  This tool only reads those (and asks the
 * process for a QP snapshot through a futex in it); it never loads the
 * library, whose internals are hidden by its version script.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "uroce_share_gc.h"
#include "uroce_shm.h"

#define EXIT_USAGE 2

/* A mapped stats segment. */
struct seg {
	int pid;
	const struct uroce_shm_hdr *h;
	size_t size;
	bool writable;
};

static bool opt_json, opt_all, opt_watch;
static double opt_interval = 1.0;
static long opt_count = -1; /* --count: refreshes, -1 = forever */
static const char *prog = "uroce";

static const char usage_text[] =
	"Usage: uroce [--json] COMMAND [ARGS]\n"
	"Look inside the uroce RDMA devices of programs running on this host.\n"
	"\n"
	"Commands:\n"
	"  devices              list the processes that have a uroce device, with\n"
	"                       the device's address, GID, port LID and MTU,\n"
	"                       and which processes share an address\n"
	"  stats [PID]          the device counters of process PID (of every uroce\n"
	"                       process if PID is left out): packets and bytes by\n"
	"                       opcode class, ACKs, NAKs by syndrome, retransmits,\n"
	"                       timeouts, RNR NAKs, duplicates, drops by reason\n"
	"  qps [PID]            the queue pairs of process PID (or of every one):\n"
	"                       state, PSNs, outstanding work requests\n"
	"  run [OPTS] -- PROG   run PROG on uroce, unprivileged, with the\n"
	"                       /dev/infiniband and /sys/class/infiniband entries\n"
	"                       RDMA programs look for (uroce run --help)\n"
	"  doctor               check this host's setup for uroce, one line each\n"
	"  help                 this text\n"
	"\n"
	"Options:\n"
	"  -j, --json           machine-readable output (one JSON value; with\n"
	"                       --watch, one JSON object per line per refresh)\n"
	"  -w, --watch          stats: refresh until the process exits or Ctrl-C,\n"
	"                       showing the rate of each counter per second\n"
	"  -i, --interval SECS  seconds between refreshes (default 1)\n"
	"  -n, --count N        stop after N refreshes\n"
	"  -a, --all            stats: show counters that are zero too\n"
	"  -h, --help           this text\n"
	"  -V, --version        the tool's and the stats format's versions\n"
	"\n"
	"A program is a uroce process once it opens an RDMA device through uroce's\n"
	"libibverbs.so.1; it then publishes its counters in /dev/shm/uroce.<pid>\n"
	"(readable by its user and root), removed when it exits.\n"
	"\n"
	"Related settings of the program itself (environment variables):\n"
	"  UROCE_PCAP=file.pcap  capture its RoCE packets (open in Wireshark)\n"
	"  UROCE_FAULT=...       inject packet loss, duplication, reordering\n"
	"  UROCE_LOG=LEVEL       log events to stderr: error, warn, info, debug\n"
	"See uroce(1).\n"
	"\n"
	"Exit status: 0 success, 1 no such process / not a uroce program / no\n"
	"permission, 2 usage error.\n";

static void die_usage(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	exit(EXIT_USAGE);
}

static long futex(uint32_t *uaddr, int op, uint32_t val,
		  const struct timespec *tmo)
{
	return syscall(SYS_futex, uaddr, op, val, tmo, NULL, 0);
}

static uint64_t now_ns(int clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- finding processes ---- */

static void proc_comm(int pid, char *out, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(out, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

static bool pid_alive(int pid)
{
	return !kill(pid, 0) || errno != ESRCH;
}

enum open_err {
	SEG_OK,
	SEG_NONE,   /* no segment for this pid */
	SEG_NOPROC, /* no such process */
	SEG_STALE,  /* segment of a process that is gone */
	SEG_PERM,
	SEG_BAD, /* not a segment we understand */
};

static char seg_err_detail[256];

static enum open_err seg_open(int pid, struct seg *s)
{
	char path[64];
	struct stat st;
	int fd;
	void *p;
	const struct uroce_shm_hdr *h;

	memset(s, 0, sizeof(*s));
	s->pid = pid;
	snprintf(path, sizeof(path), "%s/%s%d", UROCE_SHM_DIR, UROCE_SHM_PREFIX,
		 pid);
	s->writable = true;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == EACCES) {
		s->writable = false;
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	}
	if (fd < 0) {
		if (errno == EACCES) {
			struct stat pst;
			struct passwd *pw = NULL;

			if (!stat(path, &pst))
				pw = getpwuid(pst.st_uid);
			snprintf(seg_err_detail, sizeof(seg_err_detail),
				 "%s belongs to user %s", path,
				 pw ? pw->pw_name : "?");
			return SEG_PERM;
		}
		if (!pid_alive(pid))
			return SEG_NOPROC;
		return SEG_NONE;
	}
	/* a process killed before it could remove its segment */
	if (!pid_alive(pid)) {
		close(fd);
		unlink(path); /* best effort: the owner may be someone else */
		return SEG_STALE;
	}
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*h)) {
		close(fd);
		snprintf(seg_err_detail, sizeof(seg_err_detail),
			 "%s is too small", path);
		return SEG_BAD;
	}
	s->size = (size_t)st.st_size;
	p = mmap(NULL, s->size, PROT_READ | (s->writable ? PROT_WRITE : 0),
		 MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(seg_err_detail, sizeof(seg_err_detail),
			 "cannot map %s: %s", path, strerror(errno));
		return SEG_BAD;
	}
	h = p;
	s->h = h;
	if (h->magic != UROCE_SHM_MAGIC ||
	    !__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE)) {
		snprintf(seg_err_detail, sizeof(seg_err_detail),
			 "%s is not a (complete) uroce stats segment", path);
		goto bad;
	}
	if (h->version != UROCE_SHM_VERSION) {
		snprintf(seg_err_detail, sizeof(seg_err_detail),
			 "%s has stats format version %u, this tool reads %u",
			 path, h->version, UROCE_SHM_VERSION);
		goto bad;
	}
	if (h->size > s->size || h->pid != pid ||
	    (uint64_t)h->names_off + (uint64_t)h->ncounters * UROCE_SHM_NAME_LEN >
		    s->size ||
	    (uint64_t)h->cnt_off + (uint64_t)h->ncounters * 8 > s->size ||
	    (uint64_t)h->qp_off + (uint64_t)h->qp_slots * h->qp_entry_size >
		    s->size ||
	    h->qp_entry_size < offsetof(struct uroce_shm_qp, srtt_ns) ||
	    h->cnt_off % 8) {
		snprintf(seg_err_detail, sizeof(seg_err_detail),
			 "%s is inconsistent", path);
		goto bad;
	}
	/* its pid reused by another program since */
	if (uroce_proc_start_time(pid) != h->start_time) {
		munmap(p, s->size);
		s->h = NULL;
		unlink(path); /* best effort: the owner may be someone else */
		return SEG_STALE;
	}
	return SEG_OK;
bad:
	munmap(p, s->size);
	s->h = NULL;
	return SEG_BAD;
}

static void seg_close(struct seg *s)
{
	if (s->h)
		munmap((void *)s->h, s->size);
	s->h = NULL;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The pids that have a segment, sorted.  Returns how many. */
static int list_pids(int **out)
{
	DIR *d = opendir(UROCE_SHM_DIR);
	struct dirent *e;
	int n = 0, cap = 0, *pids = NULL;

	*out = NULL;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long pid = uroce_shm_name_pid(e->d_name);

		if (pid < 0)
			continue;
		if (n == cap) {
			int *np;

			cap = cap ? 2 * cap : 16;
			np = realloc(pids, (size_t)cap * sizeof(*pids));
			if (!np)
				break;
			pids = np;
		}
		pids[n++] = (int)pid;
	}
	closedir(d);
	qsort(pids, (size_t)n, sizeof(*pids), cmp_int);
	*out = pids;
	return n;
}

/* Open one process's segment for a command, or explain why not and exit. */
static void seg_open_or_die(int pid, struct seg *s)
{
	char comm[64];

	switch (seg_open(pid, s)) {
	case SEG_OK:
		return;
	case SEG_NOPROC:
		fprintf(stderr, "%s: no such process: %d\n", prog, pid);
		break;
	case SEG_NONE:
		proc_comm(pid, comm, sizeof(comm));
		fprintf(stderr,
			"%s: process %d (%s) is not a uroce program: "
			"it has no %s/%s%d (it has not opened an RDMA device "
			"through uroce's libibverbs.so.1)\n",
			prog, pid, comm, UROCE_SHM_DIR, UROCE_SHM_PREFIX, pid);
		break;
	case SEG_STALE:
		if (!pid_alive(pid))
			fprintf(stderr,
				"%s: no such process: %d (it left a "
				"stats segment behind, now removed)\n",
				prog, pid);
		else
			fprintf(stderr,
				"%s: process %d is not a uroce "
				"program: the uroce process that had this pid "
				"has exited (its stale stats segment was "
				"removed)\n",
				prog, pid);
		break;
	case SEG_PERM:
		fprintf(stderr,
			"%s: no permission to read process %d's "
			"counters (%s); run as that user or as root\n",
			prog, pid, seg_err_detail);
		break;
	case SEG_BAD:
		fprintf(stderr, "%s: process %d: %s\n", prog, pid,
			seg_err_detail);
		break;
	}
	exit(EXIT_FAILURE);
}

/* Open every live process's segment; stale ones are removed silently,
 * others that cannot be read are reported on stderr. */
static int seg_open_all(struct seg **out)
{
	int *pids, n = list_pids(&pids), i, k = 0;
	struct seg *segs = calloc((size_t)(n ? n : 1), sizeof(*segs));

	for (i = 0; segs && i < n; i++) {
		switch (seg_open(pids[i], &segs[k])) {
		case SEG_OK:
			k++;
			break;
		case SEG_PERM:
			fprintf(stderr,
				"%s: skipping process %d: no permission "
				"(%s)\n",
				prog, pids[i], seg_err_detail);
			break;
		case SEG_BAD:
			fprintf(stderr, "%s: skipping process %d: %s\n", prog,
				pids[i], seg_err_detail);
			break;
		default:
			break;
		}
	}
	free(pids);
	*out = segs;
	return k;
}

static int parse_pid(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > INT_MAX)
		die_usage("'%s' is not a process id", s);
	return (int)v;
}

/* ---- reading a segment ---- */

static const char *cnt_name(const struct seg *s, uint32_t i)
{
	return (const char *)s->h + s->h->names_off +
	       (size_t)i * UROCE_SHM_NAME_LEN;
}

static uint64_t cnt_value(const struct seg *s, uint32_t i)
{
	const uint64_t *c = (const uint64_t *)((const char *)s->h +
					       s->h->cnt_off);

	return __atomic_load_n(&c[i], __ATOMIC_RELAXED);
}

static void gid_text(const uint8_t *gid, char *out, size_t len)
{
	if (!inet_ntop(AF_INET6, gid, out, (socklen_t)len))
		snprintf(out, len, "?");
}

/* fixed-size strings from the segment, never trusted to be terminated */
static void seg_str(const char *field, size_t size, char *out)
{
	memcpy(out, field, size);
	out[size - 1] = '\0';
}

#define SEG_STR(s, f, buf) seg_str((s)->h->f, sizeof((s)->h->f), (buf))

/* ---- JSON ---- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_kv_str(const char *k, const char *v, bool comma)
{
	json_str(k);
	putchar(':');
	json_str(v);
	if (comma)
		putchar(',');
}

static void json_kv_u64(const char *k, uint64_t v, bool comma)
{
	json_str(k);
	printf(":%" PRIu64 "%s", v, comma ? "," : "");
}

/* The identity fields every JSON object about a process starts with. */
static void json_ident(const struct seg *s)
{
	char comm[sizeof(s->h->comm)], dev[sizeof(s->h->dev_name)];
	char addr[sizeof(s->h->addr)], gid[INET6_ADDRSTRLEN];

	SEG_STR(s, comm, comm);
	SEG_STR(s, dev_name, dev);
	SEG_STR(s, addr, addr);
	gid_text(s->h->gid, gid, sizeof(gid));
	json_kv_u64("pid", (uint64_t)s->pid, true);
	json_kv_str("program", comm, true);
	json_kv_str("device", dev, true);
	json_kv_str("address", addr, true);
	json_kv_str("gid", gid, true);
}

/* ---- devices ---- */

/* The slot of a process in its address's group, 0 if alone. */
static uint32_t seg_share_slot(const struct seg *s)
{
	if (!uroce_shm_has_share(s->h->hdr_size))
		return 0;
	return __atomic_load_n(&s->h->share_slot, __ATOMIC_RELAXED);
}

/* How many of the n processes share s's address with it (s included). */
static int share_count(const struct seg *segs, int n, const struct seg *s)
{
	int i, count = 0;

	if (!seg_share_slot(s))
		return 0;
	for (i = 0; i < n; i++)
		if (seg_share_slot(&segs[i]) &&
		    !strncmp(segs[i].h->addr, s->h->addr, sizeof(s->h->addr)))
			count++;
	return count;
}

/* The port LID, 0 if the segment is from a library without LIDs. */
static uint16_t seg_lid(const struct seg *s)
{
	if (!uroce_shm_has_lid(s->h->hdr_size))
		return 0;
	return __atomic_load_n(&s->h->lid, __ATOMIC_RELAXED);
}

static const char *mtu_text(uint32_t m, char *buf, size_t len)
{
	snprintf(buf, len, "%u", m);
	return buf;
}

static int cmd_devices(int argc, char **argv)
{
	struct seg *segs;
	int n, i;

	if (argc > 0)
		die_usage("devices takes no arguments");
	n = seg_open_all(&segs);
	/* as the stale stats segments: the registries of addresses whose
	 * members all died (uroce_share_gc.h) */
	uroce_share_gc();
	if (opt_json) {
		printf("[");
		for (i = 0; i < n; i++) {
			const struct seg *s = &segs[i];
			char pcap[sizeof(s->h->pcap)],
				fault[sizeof(s->h->fault)];

			SEG_STR(s, pcap, pcap);
			SEG_STR(s, fault, fault);
			printf("%s{", i ? "," : "");
			json_ident(s);
			json_kv_u64("lid", seg_lid(s), true);
			json_kv_u64("share_slot", seg_share_slot(s), true);
			json_kv_u64("sharing",
				    (uint64_t)share_count(segs, n, s), true);
			json_kv_u64("node_guid", be64toh(s->h->node_guid), true);
			json_kv_u64("active_mtu", s->h->active_mtu, true);
			json_kv_u64("netdev_mtu", s->h->netdev_mtu, true);
			json_kv_str("pcap", pcap, true);
			json_kv_str("fault", fault, false);
			printf("}");
		}
		printf("]\n");
	} else if (!n) {
		printf("no uroce processes on this host\n");
	} else {
		printf("%-8s %-16s %-8s %-16s %-24s %-6s %5s  %s\n", "PID",
		       "PROGRAM", "DEVICE", "ADDRESS", "GID[0] (RoCE v2)",
		       "LID", "MTU", "NOTES");
		for (i = 0; i < n; i++) {
			const struct seg *s = &segs[i];
			char comm[sizeof(s->h->comm)],
				dev[sizeof(s->h->dev_name)];
			char addr[sizeof(s->h->addr)], gid[INET6_ADDRSTRLEN];
			char pcap[sizeof(s->h->pcap)],
				fault[sizeof(s->h->fault)];
			char mtu[16], lid[8] = "-";

			SEG_STR(s, comm, comm);
			SEG_STR(s, dev_name, dev);
			SEG_STR(s, addr, addr);
			SEG_STR(s, pcap, pcap);
			SEG_STR(s, fault, fault);
			gid_text(s->h->gid, gid, sizeof(gid));
			if (seg_lid(s))
				snprintf(lid, sizeof(lid), "0x%04x",
					 (unsigned int)seg_lid(s));
			printf("%-8d %-16s %-8s %-16s %-24s %-6s %5s ", s->pid,
			       comm, dev, addr, gid, lid,
			       mtu_text(s->h->active_mtu, mtu, sizeof(mtu)));
			if (seg_share_slot(s))
				printf(" shared(slot %u, %d processes)",
				       seg_share_slot(s),
				       share_count(segs, n, s));
			if (pcap[0])
				printf(" capture=%s", pcap);
			if (fault[0])
				printf(" fault=%s", fault);
			printf("\n");
		}
	}
	for (i = 0; i < n; i++)
		seg_close(&segs[i]);
	free(segs);
	return 0;
}

/* ---- stats ---- */

static void print_stats_text(const struct seg *s, const uint64_t *prev,
			     double secs)
{
	char comm[sizeof(s->h->comm)], dev[sizeof(s->h->dev_name)];
	char addr[sizeof(s->h->addr)];
	uint32_t i, shown = 0;

	SEG_STR(s, comm, comm);
	SEG_STR(s, dev_name, dev);
	SEG_STR(s, addr, addr);
	printf("pid %d (%s): %s %s\n", s->pid, comm, dev, addr);
	if (prev)
		printf("  %-24s %20s %14s\n", "COUNTER", "VALUE", "PER SECOND");
	for (i = 0; i < s->h->ncounters; i++) {
		uint64_t v = cnt_value(s, i);
		char name[UROCE_SHM_NAME_LEN];

		if (!v && !opt_all)
			continue;
		memcpy(name, cnt_name(s, i), sizeof(name));
		name[sizeof(name) - 1] = '\0';
		printf("  %-24s %20" PRIu64, name, v);
		if (prev && secs > 0)
			printf(" %14.0f", (double)(v - prev[i]) / secs);
		printf("\n");
		shown++;
	}
	if (!shown)
		printf("  (all counters are zero; --all shows them)\n");
}

static void print_stats_json(const struct seg *s)
{
	uint32_t i;

	printf("{");
	json_ident(s);
	json_kv_u64("time_ns", now_ns(CLOCK_REALTIME), true);
	json_str("counters");
	printf(":{");
	for (i = 0; i < s->h->ncounters; i++) {
		char name[UROCE_SHM_NAME_LEN];

		memcpy(name, cnt_name(s, i), sizeof(name));
		name[sizeof(name) - 1] = '\0';
		json_kv_u64(name, cnt_value(s, i), i + 1 < s->h->ncounters);
	}
	printf("}}");
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	interrupted = 1;
}

static void sleep_secs(double secs)
{
	struct timespec ts = {
		.tv_sec = (time_t)secs,
		.tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9),
	};

	while (nanosleep(&ts, &ts) && errno == EINTR && !interrupted)
		;
}

static int watch(struct seg *segs, int n)
{
	uint64_t **prev = calloc((size_t)n, sizeof(*prev));
	uint64_t t_prev = now_ns(CLOCK_MONOTONIC);
	bool tty = isatty(STDOUT_FILENO);
	long round;
	int i;

	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	for (i = 0; prev && i < n; i++)
		prev[i] = calloc(segs[i].h->ncounters, sizeof(uint64_t));
	for (round = 0; !interrupted && (opt_count < 0 || round < opt_count);
	     round++) {
		uint64_t t = now_ns(CLOCK_MONOTONIC);
		double secs = (double)(t - t_prev) / 1e9;
		int alive = 0;

		if (tty && !opt_json)
			printf("\033[H\033[2J");
		for (i = 0; i < n; i++) {
			struct seg *s = &segs[i];
			uint32_t k;

			if (!s->h)
				continue;
			if (!pid_alive(s->pid)) {
				fprintf(stderr, "%s: process %d exited\n", prog,
					s->pid);
				seg_close(s);
				continue;
			}
			alive++;
			if (opt_json) {
				print_stats_json(s);
				printf("\n");
			} else {
				print_stats_text(s,
						 round && prev && prev[i] ?
							 prev[i] :
							 NULL,
						 secs);
			}
			for (k = 0; prev && prev[i] && k < s->h->ncounters; k++)
				prev[i][k] = cnt_value(s, k);
		}
		fflush(stdout);
		if (!alive)
			break;
		t_prev = t;
		if (opt_count < 0 || round + 1 < opt_count)
			sleep_secs(opt_interval);
	}
	for (i = 0; prev && i < n; i++)
		free(prev[i]);
	free(prev);
	return 0;
}

static int cmd_stats(int argc, char **argv)
{
	struct seg one, *segs = &one;
	bool all = argc == 0;
	int n = 1, i, ret = 0;

	if (argc > 1)
		die_usage("stats takes at most one PID");
	if (all) {
		n = seg_open_all(&segs);
		if (!n) {
			fprintf(stderr, "%s: no uroce processes on this host\n",
				prog);
			free(segs);
			return EXIT_FAILURE;
		}
	} else {
		seg_open_or_die(parse_pid(argv[0]), &one);
	}
	if (opt_watch || opt_count > 0) {
		ret = watch(segs, n);
	} else if (opt_json) {
		/* one PID: an object; every process: an array of them */
		if (all)
			printf("[");
		for (i = 0; i < n; i++) {
			if (i)
				printf(",");
			print_stats_json(&segs[i]);
		}
		printf(all ? "]\n" : "\n");
	} else {
		for (i = 0; i < n; i++)
			print_stats_text(&segs[i], NULL, 0);
	}
	for (i = 0; i < n; i++)
		seg_close(&segs[i]);
	if (all)
		free(segs);
	return ret;
}

/* ---- qps ---- */

static const char *const qp_state_name[] = {
	"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
};

static const char *state_text(uint8_t st)
{
	return st < sizeof(qp_state_name) / sizeof(qp_state_name[0]) ?
		       qp_state_name[st] :
		       "?";
}

static const char *type_text(uint8_t t)
{
	switch (t) {
	case 2:
		return "RC";
	case 3:
		return "UC";
	case 4:
		return "UD";
	default:
		return "?";
	}
}

/* Ask the process for a fresh QP table; false if it did not answer (or
 * we may not ask: the table is then the last one taken). */
static bool snapshot(struct seg *s)
{
	uint32_t *req = (uint32_t *)&s->h->snap_req;
	uint32_t *done = (uint32_t *)&s->h->snap_done;
	uint64_t deadline = now_ns(CLOCK_MONOTONIC) + 2000000000ull;
	uint32_t want;

	if (!s->writable)
		return false;
	want = __atomic_add_fetch(req, 1, __ATOMIC_ACQ_REL);
	futex(req, FUTEX_WAKE, 1, NULL);
	for (;;) {
		uint32_t d = __atomic_load_n(done, __ATOMIC_ACQUIRE);
		struct timespec tmo = { .tv_nsec = 100000000 };

		if ((int32_t)(d - want) >= 0)
			return true;
		if (now_ns(CLOCK_MONOTONIC) > deadline)
			return false;
		futex(done, FUTEX_WAIT, d, &tmo);
	}
}

static const struct uroce_shm_qp *qp_entry(const struct seg *s, uint32_t i)
{
	return (const struct uroce_shm_qp *)((const char *)s->h + s->h->qp_off +
					     (size_t)i * s->h->qp_entry_size);
}

/* "SRTT/RTTVAR" in microseconds, "-" before a sample or from an older
 * library whose entries have no RTT */
static void rtt_text(const struct seg *s, const struct uroce_shm_qp *q,
		     char *buf, size_t len)
{
	if (!uroce_shm_qp_has_rtt(s->h->qp_entry_size) || !q->srtt_ns)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f/%.1f", q->srtt_ns / 1e3,
			 q->rttvar_ns / 1e3);
}

/* the rate ECN congestion control paces the QP at, Mbit/s, "-" when not
 * paced; and its CNPs sent/received ("-" from an older library) */
static void cc_text(const struct seg *s, const struct uroce_shm_qp *q,
		    char *rate, size_t rlen, char *cnp, size_t clen)
{
	if (!uroce_shm_qp_has_cc(s->h->qp_entry_size)) {
		snprintf(rate, rlen, "-");
		snprintf(cnp, clen, "-");
		return;
	}
	if (q->cc_rate)
		snprintf(rate, rlen, "%.1f", q->cc_rate * 8 / 1e6);
	else
		snprintf(rate, rlen, "-");
	snprintf(cnp, clen, "%" PRIu64 "/%" PRIu64, q->cc_cnp_sent,
		 q->cc_cnp_rx);
}

/* the delay control's last RTT sample and base RTT, microseconds, "-"
 * before a sample (or with it off, or from an older library) */
static void delay_text(const struct seg *s, const struct uroce_shm_qp *q,
		       char *buf, size_t len)
{
	if (!uroce_shm_qp_has_delay(s->h->qp_entry_size) || !q->cc_rtt_ns)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f/%.1f", q->cc_rtt_ns / 1e3,
			 q->cc_base_rtt_ns / 1e3);
}

/* which packet IO a QP's packets take (include/uroce_shm.h) */
static const char *path_text(uint8_t path)
{
	static const char *const name[] = {
		[UROCE_SHM_PATH_NONE] = "-",
		[UROCE_SHM_PATH_UDP] = "udp",
		[UROCE_SHM_PATH_LOCAL] = "local",
	};

	return path < sizeof(name) / sizeof(name[0]) ? name[path] : "?";
}

static void print_qps_text(const struct seg *s, bool fresh)
{
	char comm[sizeof(s->h->comm)], dev[sizeof(s->h->dev_name)];
	char addr[sizeof(s->h->addr)];
	uint32_t i, n = s->h->nqps;

	SEG_STR(s, comm, comm);
	SEG_STR(s, dev_name, dev);
	SEG_STR(s, addr, addr);
	printf("pid %d (%s): %s %s: %u QP%s%s\n", s->pid, comm, dev, addr, n,
	       n == 1 ? "" : "s",
	       fresh ? "" : " (last snapshot: the process did not answer)");
	if (!n)
		return;
	printf("  %-8s %-5s %-4s %-8s %-18s %4s %-8s %-8s %-8s %13s %11s "
	       "%10s %10s %7s %15s %5s %10s %15s %13s %s\n",
	       "QPN", "STATE", "TYPE", "DEST", "PEER", "MTU", "SQ_PSN",
	       "UNACKED", "EPSN", "SQ POST/UNS", "RQ POSTED", "TX_PKTS",
	       "RX_PKTS", "RETRANS", "RTT_US/VAR", "CWND", "RATE_MBPS",
	       "DRTT_US/BASE", "CNP_TX/RX", "PATH");
	for (i = 0; i < n && i < s->h->qp_slots; i++) {
		const struct uroce_shm_qp *q = qp_entry(s, i);
		char gid[INET6_ADDRSTRLEN], sq[32], rq[32], rtt[40];
		char rate[32], cnp[48], drtt[48];

		gid_text(q->peer_gid, gid, sizeof(gid));
		snprintf(sq, sizeof(sq), "%u/%u", q->sq_posted, q->sq_unsent);
		snprintf(rq, sizeof(rq), "%u", q->rq_posted);
		rtt_text(s, q, rtt, sizeof(rtt));
		cc_text(s, q, rate, sizeof(rate), cnp, sizeof(cnp));
		delay_text(s, q, drtt, sizeof(drtt));
		printf("  0x%06x %-5s %-4s 0x%06x %-18s %4u 0x%06x 0x%06x "
		       "0x%06x %13s %11s %10" PRIu64 " %10" PRIu64 " %7" PRIu64
		       " %15s %5u %10s %15s %13s %s\n",
		       q->qpn, state_text(q->state), type_text(q->type),
		       q->dest_qpn, gid, q->mtu, q->sq_psn, q->unacked_psn,
		       q->epsn, sq, rq, q->tx_pkts, q->rx_pkts, q->retransmits,
		       rtt, q->cwnd, rate, drtt, cnp, path_text(q->path));
	}
	if (s->h->qp_overflow)
		printf("  ... and %u more QPs that do not fit the table\n",
		       s->h->qp_overflow);
}

static void print_qps_json(const struct seg *s, bool fresh)
{
	uint32_t i, n = s->h->nqps;

	printf("{");
	json_ident(s);
	printf("\"fresh\":%s,", fresh ? "true" : "false");
	json_kv_u64("snapshot_time_ns", s->h->snap_time_ns, true);
	json_kv_u64("qp_overflow", s->h->qp_overflow, true);
	printf("\"qps\":[");
	for (i = 0; i < n && i < s->h->qp_slots; i++) {
		const struct uroce_shm_qp *q = qp_entry(s, i);
		char gid[INET6_ADDRSTRLEN];

		gid_text(q->peer_gid, gid, sizeof(gid));
		printf("%s{", i ? "," : "");
		json_kv_u64("qpn", q->qpn, true);
		json_kv_str("state", state_text(q->state), true);
		json_kv_str("type", type_text(q->type), true);
		json_kv_u64("dest_qpn", q->dest_qpn, true);
		json_kv_str("peer_gid", gid, true);
		json_kv_str("path", path_text(q->path), true);
		json_kv_u64("mtu", q->mtu, true);
		json_kv_u64("timeout", q->timeout, true);
		json_kv_u64("retry_cnt", q->retry_cnt, true);
		json_kv_u64("rnr_retry", q->rnr_retry, true);
		json_kv_u64("sq_psn", q->sq_psn, true);
		json_kv_u64("unacked_psn", q->unacked_psn, true);
		json_kv_u64("epsn", q->epsn, true);
		json_kv_u64("sq_posted", q->sq_posted, true);
		json_kv_u64("sq_unsent", q->sq_unsent, true);
		json_kv_u64("sq_max_wr", q->sq_max_wr, true);
		json_kv_u64("rq_posted", q->rq_posted, true);
		json_kv_u64("rq_max_wr", q->rq_max_wr, true);
		json_kv_u64("cwnd", q->cwnd, true);
		json_kv_u64("retry_left", q->retry_left, true);
		json_kv_u64("rnr_retry_left", q->rnr_retry_left, true);
		json_kv_u64("tx_pkts", q->tx_pkts, true);
		json_kv_u64("rx_pkts", q->rx_pkts, true);
		if (uroce_shm_qp_has_cc(s->h->qp_entry_size)) {
			json_kv_u64("retransmits", q->retransmits, true);
			json_kv_u64("srtt_ns", q->srtt_ns, true);
			json_kv_u64("rttvar_ns", q->rttvar_ns, true);
			/* bytes/s; 0: not paced */
			json_kv_u64("cc_rate", q->cc_rate, true);
			json_kv_u64("ce_seen", q->cc_ce_seen, true);
			json_kv_u64("cnp_sent", q->cc_cnp_sent, true);
			json_kv_u64("cnp_received", q->cc_cnp_rx, true);
			json_kv_u64("rate_cuts", q->cc_cuts,
				    uroce_shm_qp_has_delay(s->h->qp_entry_size));
			if (uroce_shm_qp_has_delay(s->h->qp_entry_size)) {
				json_kv_u64("cc_rtt_ns", q->cc_rtt_ns, true);
				json_kv_u64("cc_base_rtt_ns", q->cc_base_rtt_ns,
					    true);
				json_kv_u64("cc_fallbacks", q->cc_fallbacks,
					    false);
			}
		} else if (uroce_shm_qp_has_rtt(s->h->qp_entry_size)) {
			json_kv_u64("retransmits", q->retransmits, true);
			json_kv_u64("srtt_ns", q->srtt_ns, true);
			json_kv_u64("rttvar_ns", q->rttvar_ns, false);
		} else {
			json_kv_u64("retransmits", q->retransmits, false);
		}
		printf("}");
	}
	printf("]}");
}

static int cmd_qps(int argc, char **argv)
{
	struct seg one, *segs = &one;
	bool all = argc == 0;
	int n = 1, i;

	if (argc > 1)
		die_usage("qps takes at most one PID");
	if (all) {
		n = seg_open_all(&segs);
		if (!n) {
			fprintf(stderr, "%s: no uroce processes on this host\n",
				prog);
			free(segs);
			return EXIT_FAILURE;
		}
	} else {
		seg_open_or_die(parse_pid(argv[0]), &one);
	}
	if (opt_json && all)
		printf("[");
	for (i = 0; i < n; i++) {
		bool fresh = snapshot(&segs[i]);

		if (opt_json) {
			if (i)
				printf(",");
			print_qps_json(&segs[i], fresh);
		} else {
			print_qps_text(&segs[i], fresh);
		}
		seg_close(&segs[i]);
	}
	if (opt_json)
		printf(all ? "]\n" : "\n");
	if (all)
		free(segs);
	return 0;
}

/* Commands that parse their own options (run's belong to its program). */
static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} own_option_cmds[] = {
	{ "run", uroce_cmd_run },
	{ "doctor", uroce_cmd_doctor },
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "watch", no_argument, NULL, 'w' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd;
	char *end;
	int c;

	for (size_t i = 0;
	     argc > 1 && i < sizeof(own_option_cmds) / sizeof(own_option_cmds[0]);
	     i++)
		if (!strcmp(argv[1], own_option_cmds[i].name))
			return own_option_cmds[i].fn(argc - 1, argv + 1);
	/* options may come before or after the command */
	while ((c = getopt_long(argc, argv, "jwi:n:ahV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			opt_json = true;
			break;
		case 'w':
			opt_watch = true;
			break;
		case 'a':
			opt_all = true;
			break;
		case 'i':
			opt_interval = strtod(optarg, &end);
			if (*end || opt_interval < 0.01 || opt_interval > 86400)
				die_usage("--interval wants seconds, e.g. 0.5");
			break;
		case 'n':
			opt_count = strtol(optarg, &end, 10);
			if (*end || opt_count < 1)
				die_usage("--count wants a number >= 1");
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("uroce %s (stats format %u)\n", UROCE_VERSION,
			       UROCE_SHM_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try '%s --help'.\n", prog);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		die_usage("no command given (devices, stats or qps)");
	cmd = argv[optind++];
	argc -= optind;
	argv += optind;
	if (!strcmp(cmd, "devices"))
		return cmd_devices(argc, argv);
	if (!strcmp(cmd, "stats"))
		return cmd_stats(argc, argv);
	if (!strcmp(cmd, "qps"))
		return cmd_qps(argc, argv);
	if (!strcmp(cmd, "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	die_usage("unknown command '%s' (devices, stats or qps)", cmd);
	return EXIT_USAGE;
}
