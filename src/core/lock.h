/* SPDX-License-Identifier: MIT */
/*
 * core/lock.h: the order locks are taken in, and uroce_assert_held.
 *
 * The one lock-order table of both libraries.  A thread that holds a lock
 * of a row takes only locks of rows below it; a lock marked "leaf" is
 * taken with others held but takes none itself.  Module headers say what
 * each lock protects; this table says how they nest.
 *
 *   lock                      owner              nests inside / why
 *   ------------------------  -----------------  -------------------------
 *   rs_table_lock             rdmacm/rsocket.c   table changes only (leaf)
 *   rs->lock                  rdmacm/rs.h        then cm.lock (rdma_* calls)
 *   cm.lock                   rdmacm/cm.h        then any libibverbs lock
 *                                                (it never calls back up)
 *   dev_up_lock               verbs/device.c     device up/down: then all
 *                                                of the device's below
 *   qp->lock (wr_ex staging)  obj/qp.h           wr_start..wr_complete:
 *                                                then dev->lock
 *   dev->prog.rx_lock         engine/engine.h    one receiver at a time
 *   dev->lock                 dev.h              the engine lock
 *   sh->mu, then the          net/share.c        the registry (after
 *     registry's file lock                       dev->lock or rx_lock)
 *   dev->tx.tx_lock           engine/engine.h    one sender at a time
 *   L->acc_lock               net/local.c        the same-host listeners
 *                                                and rings (after tx_lock)
 *   dev->tx.txq_lock          engine/engine.h    the sealed batches (leaf)
 *   cq->lock                  obj/cq.h           a CQ's ring (after
 *                                                dev->lock), then chan->lock
 *   chan->lock                verbs/cq.c         a channel's queue (leaf)
 *   uctx->async_lock          obj/cq.h           async events (leaf: any
 *                                                lock may be held)
 *   doms_lock                 verbs/xrc.c        XRC domains (leaf)
 *   cap.lock                  net/pcap.c         the capture file (leaf)
 *   limit_lock                core/log.c         log rate limit (leaf)
 *
 * So the engine's chains are rx_lock, dev->lock, cq->lock, chan->lock and
 * dev->lock, tx_lock, acc_lock, txq_lock.
 *
 * uroce_assert_held(&lock): where a comment says "X held", the function
 * says it too, as the kernel's lockdep_assert_held.  With
 * UROCE_LOCK_CHECKS (CMake option, on in the sanitizer builds) it aborts
 * unless the calling thread holds the mutex; otherwise it compiles to
 * nothing.  It reads the owner glibc records in every mutex (the thread
 * id in __data.__owner, set by lock, trylock, timedlock and the relock
 * of a condition wait, for every mutex kind).  Chosen over
 * error-checking mutexes, which would change how every lock behaves and
 * still offer no "do I hold it" query, and over an owner field of our
 * own, which would wrap every lock and unlock call of both libraries:
 * this needs neither, and costs nothing where it is off.
 */
#ifndef UROCE_CORE_LOCK_H
#define UROCE_CORE_LOCK_H

#include <pthread.h>

/*
 * uroce_lock_spin(m): lock m on the data path (an application's posts,
 * the receive path).  The engine's threads hold these locks for
 * microseconds (a receive burst, the sendmmsg of an ACK); a thread that
 * found one taken and slept on the futex then waited for a core to wake
 * on, and on a host whose cores run spinning applications that took a
 * scheduler tick (4 ms: qperf's rc_rdma_write_poll_lat, whose post met
 * the progress thread's ACK on tx_lock in most round trips;
 * docs/datapath.md, "A wait that spins first").  So it tries the lock for
 * up to UROCE_LOCK_SPIN_NS first, where the process may run on more than
 * one CPU, then sleeps on it.
 */
#define UROCE_LOCK_SPIN_NS 20000
void uroce_lock_spin(pthread_mutex_t *m);

#ifdef UROCE_LOCK_CHECKS
#ifndef __GLIBC__
#error "UROCE_LOCK_CHECKS reads glibc's mutex owner"
#endif
/* core/lock.c: abort with the lock's name and place unless this thread
 * holds m */
void uroce_lock_check_held(const pthread_mutex_t *m, const char *name,
			   const char *file, int line);
#define uroce_assert_held(m) uroce_lock_check_held((m), #m, __FILE__, __LINE__)
/* ... unless it holds a or b (a reader that either lock keeps safe) */
void uroce_lock_check_either(const pthread_mutex_t *a, const pthread_mutex_t *b,
			     const char *names, const char *file, int line);
#define uroce_assert_held_either(a, b) \
	uroce_lock_check_either((a), (b), #a " or " #b, __FILE__, __LINE__)
#else
#define uroce_assert_held(m)	       ((void)sizeof(m))
#define uroce_assert_held_either(a, b) ((void)sizeof(a), (void)sizeof(b))
#endif

#endif
