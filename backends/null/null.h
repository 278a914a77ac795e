/* backends/null/null.h: the null executor, the one to copy.
 *
 * bib_null_executor fills every slot of bib_executor_ops_t the way a GPU
 * executor must (a device chosen by selector, buffers from a pool with a
 * fixed capacity, transfers and views checked against their buffers, a clean
 * BIB_E_NOMEM past the capacity), on host memory, and runs every kernel with
 * the CPU executor's scalar reference, so its bits are the reference's. It
 * is not one of the build's executors (backends/executors.c): no run ever
 * uses it. It exists to be copied when someone adds an executor, and to keep
 * the shared conformance suite honest (tests/unit/test_null.c runs
 * tests/unit/executor_cts.h on it, as IREE's drivers/null does).
 */
#ifndef BIB_NULL_H
#define BIB_NULL_H

#include "backends/backend.h"

extern const bib_executor_ops_t bib_null_executor;

/* The capacity of the null device's pool, in bytes. */
#define BIB_NULL_CAPACITY ((uint64_t)1 << 30)

#endif
