// SPDX-License-Identifier: MIT
/*
 * uroce run [OPTIONS] [--] PROGRAM [ARGS...]: run an unmodified RDMA
 * program on uroce.
 *
 * In order, so that bad input fails before anything is made: the options
 * (each sets the UROCE_* variable the README documents), the program, our
 * libraries (next to this uroce, installed or in the build tree), then a
 * namespace of the process's own (run_ns.c), the device opened once here
 * to learn what it will be and its address held for the program
 * (run_probe.c, uroce_host.h), /sys/class/infiniband and /dev/infiniband made
 * from it, and exec: the program takes this process's place, so its pid,
 * its signals and its exit status are the program's own, and nothing
 * outlives it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

#define EXIT_FAIL     1
#define EXIT_USAGE    2
#define EXIT_NOEXEC   126
#define EXIT_NOTFOUND 127

/* The UROCE_ADDR we gave the program, so that a uroce run it starts
 * knows the address is not meant for it. */
#define RUN_ADDR_ENV "UROCE_RUN_ADDR"

enum {
	OPT_NO_NS = 256,
	OPT_HELP
};

/* The options that pass a setting on: each is one UROCE_* variable. */
static const struct run_setting {
	const char *name;
	const char *env;
	const char *flag_value; /* NULL: the option takes a value */
	const char *help;
} settings[] = {
	{ "addr", "UROCE_ADDR", NULL, "IP       the address the device owns" },
	{ "ifname", "UROCE_IFNAME", NULL,
	  "IF     the device takes IF's address" },
	{ "pcap", "UROCE_PCAP", NULL, "FILE     capture every packet (%p: pid)" },
	{ "pcap-max", "UROCE_PCAP_MAX", NULL, "SIZE rotate the capture at SIZE" },
	{ "fault", "UROCE_FAULT", NULL, "SPEC    inject faults (drop=0.05,...)" },
	{ "log", "UROCE_LOG", NULL, "LEVEL     error, warn, info or debug" },
	{ "stats", "UROCE_STATS", "1", "         print the counters at exit" },
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static void usage(FILE *f)
{
	size_t i;

	fputs("usage: uroce run [OPTIONS] [--] PROGRAM [ARGS...]\n"
	      "Runs PROGRAM on uroce: our libibverbs and librdmacm, and the\n"
	      "/dev/infiniband and /sys/class/infiniband entries of its device.\n",
	      f);
	for (i = 0; i < NSETTINGS; i++)
		fprintf(f, "  --%s %s (%s)\n", settings[i].name,
			settings[i].help, settings[i].env);
	fputs("  --no-namespace  only set the library path\n"
	      "  -h, --help      this text\n",
	      f);
}

static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "uroce run: %s%s%s (uroce run --help)\n", what,
		arg ? " " : "", arg ? arg : "");
	return EXIT_USAGE;
}

/* PROGRAM as execvp would find it; -errno if it would not. */
static int find_program(const char *prog, char *out, size_t len)
{
	const char *path = getenv("PATH"), *p, *end;
	int err = -ENOENT;
	struct stat st;

	if (strchr(prog, '/')) {
		snprintf(out, len, "%s", prog);
		return access(out, X_OK) ? -errno : 0;
	}
	for (p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p; p = end) {
		end = strchrnul(p, ':');
		snprintf(out, len, "%.*s/%s", end > p ? (int)(end - p) : 1,
			 end > p ? p : ".", prog);
		if (!access(out, X_OK))
			return 0;
		/* as execvp: EACCES if one was found but may not be run */
		if (errno == EACCES && !stat(out, &st) && S_ISREG(st.st_mode))
			err = -EACCES;
		if (*end)
			end++;
	}
	return err;
}

static int prepend_path(const char *var, const char *dir)
{
	const char *old = getenv(var);
	char *v;
	int ret;

	if (old && *old) {
		if (asprintf(&v, "%s:%s", dir, old) < 0)
			return -ENOMEM;
		ret = setenv(var, v, 1);
		free(v);
		return ret ? -errno : 0;
	}
	return setenv(var, dir, 1) ? -errno : 0;
}

/* Parses the options into the environment; the index of PROGRAM, or
 * -exit status. */
static int parse(int argc, char **argv, bool *no_ns)
{
	struct option opts[NSETTINGS + 3] = { { 0 } };
	size_t i;
	int c;

	for (i = 0; i < NSETTINGS; i++) {
		opts[i].name = settings[i].name;
		opts[i].has_arg = settings[i].flag_value ? no_argument :
							   required_argument;
		opts[i].val = (int)i;
	}
	opts[i++] = (struct option){ "no-namespace", no_argument, NULL,
				     OPT_NO_NS };
	opts[i] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		if (c >= 0 && c < (int)NSETTINGS) {
			setenv(settings[c].env,
			       settings[c].flag_value ? settings[c].flag_value :
							optarg,
			       1);
			continue;
		}
		switch (c) {
		case OPT_NO_NS:
			*no_ns = true;
			break;
		case 'h':
		case OPT_HELP:
			usage(stdout);
			return 0; /* exit 0, nothing to run */
		case ':':
			return -usage_error("a value is missing after",
					    argv[optind - 1]);
		default:
			return -usage_error("unknown option", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return -usage_error("no program given", NULL);
	return optind;
}

int uroce_cmd_run(int argc, char **argv)
{
	char prog[PATH_MAX], libdir[PATH_MAX], why[512] = "", err[512] = "";
	struct run_dev d;
	bool no_ns = false;
	int first, ret, keep, ns_err = -EPERM;

	/* An outer uroce run's address is its program's, not ours: a script
	 * run through uroce run may start more programs through it. */
	if (getenv(RUN_ADDR_ENV) && getenv("UROCE_ADDR") &&
	    !strcmp(getenv(RUN_ADDR_ENV), getenv("UROCE_ADDR")))
		unsetenv("UROCE_ADDR");
	unsetenv(RUN_ADDR_ENV);
	first = parse(argc, argv, &no_ns);
	if (first <= 0)
		return -first;
	ret = find_program(argv[first], prog, sizeof(prog));
	if (ret) {
		fprintf(stderr, "uroce run: %s: %s\n", argv[first],
			ret == -ENOENT ? "command not found" : strerror(-ret));
		return ret == -ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC;
	}
	if (run_find_libdir(libdir, sizeof(libdir))) {
		fprintf(stderr, "uroce run: no libibverbs.so.1 of ours next to "
				"this uroce (../lib/uroce or ../lib)\n");
		return EXIT_FAIL;
	}
	if (no_ns)
		snprintf(why, sizeof(why), "--no-namespace");
	else
		ns_err = run_ns_check(why, sizeof(why));
	if (!ns_err) {
		ns_err = run_ns_enter(why, sizeof(why));
		if (ns_err) { /* it worked in the check: not here */
			fprintf(stderr, "uroce run: %s\n", why);
			return EXIT_FAIL;
		}
	}
	/* the address is held (keep) by the program until it dies */
	if (run_probe(libdir, &d, &keep, err, sizeof(err))) {
		fprintf(stderr, "uroce run: %s\n", err);
		return EXIT_FAIL;
	}
	if (!ns_err && (run_sysfs_write(&d, err, sizeof(err)) ||
			run_ns_dev(&d, err, sizeof(err)) ||
			run_ns_seal(err, sizeof(err)))) {
		fprintf(stderr, "uroce run: %s\n", err);
		return EXIT_FAIL;
	}
	if (ns_err)
		fprintf(stderr,
			"uroce run: %s gets no /dev/infiniband or "
			"/sys/class/infiniband (UCX, NCCL and others will not "
			"see %s): %s\n",
			argv[first], d.name, why);
	if (setenv("UROCE_ADDR", d.addr, 1) || setenv(RUN_ADDR_ENV, d.addr, 1) ||
	    prepend_path("LD_LIBRARY_PATH", libdir)) {
		fprintf(stderr, "uroce run: cannot set the environment: %s\n",
			strerror(errno));
		return EXIT_FAIL;
	}
	run_probe_drop_segment();
	execv(prog, argv + first);
	fprintf(stderr, "uroce run: cannot run %s: %s\n", prog, strerror(errno));
	return errno == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC;
}
