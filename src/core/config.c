// SPDX-License-Identifier: MIT
/* The UROCE_* settings, read once (core/config.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "uroce_host.h"

#define DEFAULT_UNRELIABLE_MBPS 4000
#define DEFAULT_SPIN_US		50
#define DEFAULT_CNP_US		50
#define DEFAULT_CC_TARGET_US	200

static struct uroce_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

/* the variable's value, or NULL if it is unset or empty */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static void config_read(void)
{
	struct uroce_config *c = &config;
	const char *v;

	c->addr = env("UROCE_ADDR");
	c->ifname = env("UROCE_IFNAME");
	v = getenv("UROCE_GSO");
	c->gso = !v || strcmp(v, "0");
	v = getenv("UROCE_SHARE");
	c->share = !v || strcmp(v, "0");
	v = getenv("UROCE_LOCAL");
	c->local = !v || strcmp(v, "0");
	v = env("UROCE_UNRELIABLE_MBPS");
	c->unreliable_mbps = v ? strtoull(v, NULL, 0) : DEFAULT_UNRELIABLE_MBPS;
	v = env("UROCE_CC");
	c->cc = v && (!strcmp(v, "dcqcn") || !strcmp(v, "1"));
	c->cc_delay = v && !strcmp(v, "delay");
	v = env("UROCE_CC_TARGET_US");
	c->cc_target_us = v ? strtoull(v, NULL, 0) : DEFAULT_CC_TARGET_US;
	v = env("UROCE_CNP_US");
	c->cnp_us = v ? strtoull(v, NULL, 0) : DEFAULT_CNP_US;
	c->sndbuf_kb = uroce_sndbuf_kb(env("UROCE_SNDBUF_KB"));
	v = env("UROCE_SPIN_US");
	c->spin_ns = v ? strtoull(v, NULL, 0) * 1000 : DEFAULT_SPIN_US * 1000;
	c->fault = env("UROCE_FAULT");
	c->log = env("UROCE_LOG");
	c->pcap = env("UROCE_PCAP");
	c->pcap_max = env("UROCE_PCAP_MAX");
	v = env("UROCE_STATS");
	c->stats = v && *v == '1';
	c->cm_hold_ms = env("UROCE_CM_HOLD_MS");
	c->cm_disc_hold_ms = env("UROCE_CM_DISC_HOLD_MS");
	c->cm_listen_file = env("UROCE_CM_LISTEN_FILE");
}

const struct uroce_config *uroce_config(void)
{
	pthread_once(&config_once, config_read);
	return &config;
}
