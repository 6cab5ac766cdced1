// SPDX-License-Identifier: MIT
/*
 * The non-default symbol versions Debian's libibverbs still exports:
 * the IBVERBS_1.0 entry points, which took the pre-1.1 object layouts
 * (struct ibv_context_1_0 and friends), and ibv_register_driver@IBVERBS_1.1,
 * the pre-PABI provider hook.
 *
 * Nothing built in the last fifteen years binds to them, but the dynamic
 * linker must find them.  uroce never hands out 1.0 objects, so each one
 * fails cleanly: pointers come back NULL with errno EOPNOTSUPP, int verbs
 * return EOPNOTSUPP (or -1 with errno, where the verb's contract is -1),
 * void ones do nothing.  The old structs are passed as void * because
 * nothing here looks inside them.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

/*
 * Declare and define uroce_compat_<sym> and bind it as sym@ver (one @: a
 * hidden, non-default version).  The implementation name itself is made
 * local by the version script.
 */
#define COMPAT_FN(ret, sym, ver, params) \
	ret uroce_compat_##sym params; \
	__asm__(".symver uroce_compat_" #sym ", " #sym "@" ver); \
	ret uroce_compat_##sym params

#define V1_0 "IBVERBS_1.0"

static void *fail_ptr(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int fail_minus_one(void)
{
	errno = EOPNOTSUPP;
	return -1;
}

/* ---- device list and context ---- */

COMPAT_FN(void **, ibv_get_device_list, V1_0, (int *num_devices))
{
	return fail_ptr();
}

COMPAT_FN(void, ibv_free_device_list, V1_0, (void **list))
{
}

COMPAT_FN(const char *, ibv_get_device_name, V1_0, (void *device))
{
	return fail_ptr();
}

COMPAT_FN(__be64, ibv_get_device_guid, V1_0, (void *device))
{
	errno = EOPNOTSUPP;
	return 0;
}

COMPAT_FN(void *, ibv_open_device, V1_0, (void *device))
{
	return fail_ptr();
}

COMPAT_FN(int, ibv_close_device, V1_0, (void *context))
{
	return EOPNOTSUPP;
}

/* ibv_get_async_event(3): 0 on success, -1 on error. */
COMPAT_FN(int, ibv_get_async_event, V1_0, (void *context, void *event))
{
	return fail_minus_one();
}

COMPAT_FN(void, ibv_ack_async_event, V1_0, (void *event))
{
}

COMPAT_FN(int, ibv_query_device, V1_0, (void *context, void *device_attr))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_query_port, V1_0,
	  (void *context, uint8_t port_num, void *port_attr))
{
	return EOPNOTSUPP;
}

/* ibv_query_gid(3) and ibv_query_pkey(3): 0 on success, -1 on error. */
COMPAT_FN(int, ibv_query_gid, V1_0,
	  (void *context, uint8_t port_num, int index, union ibv_gid *gid))
{
	return fail_minus_one();
}

COMPAT_FN(int, ibv_query_pkey, V1_0,
	  (void *context, uint8_t port_num, int index, __be16 *pkey))
{
	return fail_minus_one();
}

/* ---- PD and MR ---- */

COMPAT_FN(void *, ibv_alloc_pd, V1_0, (void *context))
{
	return fail_ptr();
}

COMPAT_FN(int, ibv_dealloc_pd, V1_0, (void *pd))
{
	return EOPNOTSUPP;
}

COMPAT_FN(void *, ibv_reg_mr, V1_0,
	  (void *pd, void *addr, size_t length, int access))
{
	return fail_ptr();
}

COMPAT_FN(int, ibv_dereg_mr, V1_0, (void *mr))
{
	return EOPNOTSUPP;
}

/* ---- CQ ---- */

COMPAT_FN(void *, ibv_create_cq, V1_0,
	  (void *context, int cqe, void *cq_context, void *channel,
	   int comp_vector))
{
	return fail_ptr();
}

COMPAT_FN(int, ibv_resize_cq, V1_0, (void *cq, int cqe))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_destroy_cq, V1_0, (void *cq))
{
	return EOPNOTSUPP;
}

/* ibv_get_cq_event(3): 0 on success, -1 on error. */
COMPAT_FN(int, ibv_get_cq_event, V1_0,
	  (void *channel, void **cq, void **cq_context))
{
	return fail_minus_one();
}

COMPAT_FN(void, ibv_ack_cq_events, V1_0, (void *cq, unsigned int nevents))
{
}

/* ---- SRQ ---- */

COMPAT_FN(void *, ibv_create_srq, V1_0, (void *pd, void *srq_init_attr))
{
	return fail_ptr();
}

COMPAT_FN(int, ibv_modify_srq, V1_0,
	  (void *srq, void *srq_attr, int srq_attr_mask))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_query_srq, V1_0, (void *srq, void *srq_attr))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_destroy_srq, V1_0, (void *srq))
{
	return EOPNOTSUPP;
}

/* ---- QP ---- */

COMPAT_FN(void *, ibv_create_qp, V1_0, (void *pd, void *qp_init_attr))
{
	return fail_ptr();
}

COMPAT_FN(int, ibv_query_qp, V1_0,
	  (void *qp, void *attr, int attr_mask, void *init_attr))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_modify_qp, V1_0, (void *qp, void *attr, int attr_mask))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_destroy_qp, V1_0, (void *qp))
{
	return EOPNOTSUPP;
}

/* ---- AH and multicast ---- */

COMPAT_FN(void *, ibv_create_ah, V1_0, (void *pd, void *attr))
{
	return fail_ptr();
}

COMPAT_FN(int, ibv_destroy_ah, V1_0, (void *ah))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_attach_mcast, V1_0,
	  (void *qp, const union ibv_gid *gid, uint16_t lid))
{
	return EOPNOTSUPP;
}

COMPAT_FN(int, ibv_detach_mcast, V1_0,
	  (void *qp, const union ibv_gid *gid, uint16_t lid))
{
	return EOPNOTSUPP;
}

/*
 * The 1.1-era provider registration.  uroce loads no providers; a provider
 * built for it would find nothing to talk to, so the call is accepted and
 * ignored, as libibverbs itself does for drivers it cannot use.
 */
COMPAT_FN(void, ibv_register_driver, "IBVERBS_1.1",
	  (const char *name, void *init_func))
{
}
