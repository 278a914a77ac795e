/* vm/placement.h: measured cost models of executors, for --backend=auto.
 *
 * Owns the short calibration of an executor (MATMUL at a few sizes, copies
 * to and from the host), its cache under $XDG_CACHE_HOME/bib (default
 * ~/.cache/bib) keyed by executor and device, and the arithmetic of the
 * decision: the estimated seconds of a call on a place and the work at which
 * a device overtakes the CPU. Which place a VM's call runs on is decided in
 * vm/tensor.c with these numbers; nothing here knows a VM.
 */
#ifndef BIB_PLACEMENT_H
#define BIB_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "vm/tensor.h"

/* The cache key of a started executor: its name and its describe() line
 * (the CPU executor's also names the CPU model). */
void bib_placement_key(const bib_executor_ops_t *ops, bib_executor_t *ex, char *key, size_t cap);

/* Whether a started GPU executor runs on the CPU (lavapipe and the like):
 * auto never picks it for speed. */
bool bib_placement_cpu_device(const bib_executor_ops_t *ops, bib_executor_t *ex);

/* The model of a started executor: read from the cache when a valid entry
 * for its key exists, else measured (about a second) and written to the
 * cache. A corrupt or foreign cache entry is ignored and re-measured; a cache
 * that cannot be written is not an error. cached (may be NULL) says which.
 * Fails only when the executor fails (why says how). */
bib_status_t bib_placement_model(const bib_executor_ops_t *ops, bib_executor_t *ex,
                                 bib_place_model_t *out, bool *cached, char *why, size_t why_len);

/* Seconds for a kernel of flops on the place m models (flops: the call's
 * estimated operations, bib_tensor_cost in vm/tensor_ops.h). */
double bib_placement_run_cost(const bib_place_model_t *m, double flops);
/* Seconds to copy bytes between the host and the device m models (0 for the host). */
double bib_placement_copy_cost(const bib_place_model_t *m, uint64_t bytes);

/* The MATMUL work (flops) above which dev is faster than host, counting
 * copies of the operands from the host when from_host; INFINITY when dev
 * is never faster at any size. */
double bib_placement_crossover(const bib_place_model_t *host, const bib_place_model_t *dev,
                               bool from_host);

#endif
