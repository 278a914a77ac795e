/* backends/cpu/threadpool.h: the CPU executor's persistent worker threads.
 *
 * One primitive: parallel_for over [0, n) cut into fixed contiguous chunks.
 * The cut depends only on (n, grain, pool size), never on timing, so a kernel
 * that computes each output from its own chunk gives the same bits whichever
 * thread runs which chunk. Threads are created once by create and joined by
 * destroy; no call creates a thread.
 *
 * Not owned here: what a chunk computes, and any reduction order (kernels
 * must not let a result depend on the chunk count).
 */
#ifndef BIB_CPU_THREADPOOL_H
#define BIB_CPU_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"

typedef struct bib_threadpool bib_threadpool_t;

/* Runs the elements [begin, end) of the range. `chunk` is the chunk's index,
 * in [0, bib_threadpool_size(pool)): two chunks with different indices may run
 * at the same time, so per-chunk scratch indexed by `chunk` is safe. */
typedef void (*bib_parallel_fn)(void *ctx, size_t begin, size_t end, uint32_t chunk);

/* Starts a pool of `threads` (>= 1) threads in all: the caller of
 * parallel_for is one of them, so threads - 1 workers are created. The caller
 * owns *out and ends it with bib_threadpool_destroy. On failure writes why. */
bib_status_t bib_threadpool_create(uint32_t threads, bib_threadpool_t **out, char *why,
                                   size_t why_len);

/* Joins the workers and frees the pool. NULL is a no-op. Must not be called
 * while a parallel_for on this pool is running. */
void bib_threadpool_destroy(bib_threadpool_t *pool);

/* Threads in the pool, counting the caller; 1 for a NULL pool. */
uint32_t bib_threadpool_size(const bib_threadpool_t *pool);

/* The fixed cut: [0, n) is split into units of `grain` elements (the last
 * one may be shorter); the units are spread over min(threads, units) chunks
 * as evenly as possible, in order. Returns the chunk count and writes chunk
 * `index`'s range to *begin and *end. */
uint32_t bib_threadpool_chunk(size_t n, size_t grain, uint32_t threads, uint32_t index,
                              size_t *begin, size_t *end);

/* Calls fn once per chunk of the fixed cut of [0, n) (see bib_threadpool_chunk)
 * and returns when every chunk has finished. The caller runs chunk 0. With a
 * NULL pool, one chunk, or when called from inside one of this pool's own
 * chunks (nesting), the chunks run one after another on the calling thread,
 * with the same boundaries and indices. Calls from different threads on one
 * pool are serialised. grain 0 counts as 1. */
void bib_threadpool_parallel_for(bib_threadpool_t *pool, size_t n, size_t grain, bib_parallel_fn fn,
                                 void *ctx);

#endif
