/* backends/cpu/threadpool.c: persistent pthreads behind parallel_for.
 *
 * A job is published by bumping the generation in `claim` (high 32 bits; the
 * low 32 bits count chunks handed out). Every pool thread, the caller
 * included, claims chunks with a compare-and-swap that also checks the
 * generation, so a thread that wakes late can never touch a newer job; the
 * chunk boundaries stay fixed, only who runs a chunk varies. Claiming instead
 * of fixed chunk->thread assignment matters when the scheduler puts two pool
 * threads on one CPU: the other thread simply runs the chunk.
 *
 * Idle threads poll briefly (kernel calls usually follow each other within
 * microseconds), yielding now and then so a poller never starves a thread it
 * shares a CPU with, and then sleep on `wake`. */
#include "backends/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <mimalloc.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Polling rounds before a thread sleeps (tens of microseconds), and how often
 * a polling thread yields. */
#define SPIN_ROUNDS 20000
#define YIELD_EVERY 64

/* A worker's stack. The default is the stack ulimit (8 MiB, reserved whole),
 * so under an address-space limit (ulimit -v) 255 workers took 2 GiB and
 * the pool could not start. Kernels keep their large buffers on the heap: a
 * worker's deepest frame holds about 32 KiB. 2 MiB is glibc's default when
 * the stack is unlimited. */
#define WORKER_STACK_BYTES ((size_t)2 << 20)

typedef struct worker {
    bib_threadpool_t *pool;
    pthread_t thread;
} worker_t;

struct bib_threadpool {
    uint32_t threads;
    worker_t *workers; /* threads - 1 of them */

    pthread_mutex_t submit; /* one parallel_for at a time */
    pthread_t submitter;    /* valid while in_job */
    atomic_bool in_job;

    pthread_mutex_t lock; /* guards sleeping on wake, and stop */
    pthread_cond_t wake;
    bool stop;

    /* generation << 32 | chunks claimed so far */
    _Atomic uint64_t claim;

    /* The current job; written before its generation is published. */
    bib_parallel_fn fn;
    void *ctx;
    size_t n, grain;
    uint32_t chunks;

    atomic_uint remaining; /* chunks not yet finished */
    pthread_mutex_t done_lock;
    pthread_cond_t done;
};

uint32_t bib_threadpool_chunk(size_t n, size_t grain, uint32_t threads, uint32_t index,
                              size_t *begin, size_t *end) {
    if (grain == 0)
        grain = 1;
    if (threads == 0)
        threads = 1;
    size_t units = n / grain + (n % grain != 0);
    uint32_t chunks = units < threads ? (uint32_t)units : threads;
    if (chunks == 0 || index >= chunks) {
        *begin = *end = n;
        return chunks;
    }
    size_t u0 = units * index / chunks, u1 = units * (index + 1) / chunks;
    *begin = u0 * grain;
    *end = u1 * grain < n ? u1 * grain : n;
    return chunks;
}

static void spin_pause(int round) {
    if (round % YIELD_EVERY == YIELD_EVERY - 1)
        sched_yield();
    else
        cpu_relax();
}

/* Runs chunks of generation `gen` until none is left to claim. */
static void claim_and_run(bib_threadpool_t *pool, uint32_t gen) {
    uint64_t v = atomic_load_explicit(&pool->claim, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(v >> 32) != gen)
            return;
        /* chunks is stable while any chunk of gen is unfinished, and a
         * successful claim below proves one is. */
        uint32_t index = (uint32_t)v;
        if (index >= pool->chunks)
            return;
        if (!atomic_compare_exchange_weak_explicit(&pool->claim, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        size_t begin, end;
        bib_threadpool_chunk(pool->n, pool->grain, pool->threads, index, &begin, &end);
        pool->fn(pool->ctx, begin, end, index);
        if (atomic_fetch_sub_explicit(&pool->remaining, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->done_lock);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->done_lock);
        }
        v = atomic_load_explicit(&pool->claim, memory_order_acquire);
    }
}

static uint32_t generation(bib_threadpool_t *pool) {
    return (uint32_t)(atomic_load_explicit(&pool->claim, memory_order_acquire) >> 32);
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    bib_threadpool_t *pool = w->pool;
    /* Generation 0 is "no job yet"; a job may be published before this
     * thread first runs, so it must not start from the current value. */
    uint32_t seen = 0;
    for (;;) {
        uint32_t gen;
        int round = 0;
        while ((gen = generation(pool)) == seen && round < SPIN_ROUNDS)
            spin_pause(round++);
        if (gen == seen) {
            pthread_mutex_lock(&pool->lock);
            while ((gen = generation(pool)) == seen && !pool->stop)
                pthread_cond_wait(&pool->wake, &pool->lock);
            bool stop = pool->stop;
            pthread_mutex_unlock(&pool->lock);
            if (stop)
                return NULL;
        }
        seen = gen;
        claim_and_run(pool, gen);
    }
}

bib_status_t bib_threadpool_create(uint32_t threads, bib_threadpool_t **out, char *why,
                                   size_t why_len) {
    *out = NULL;
    if (threads == 0) {
        snprintf(why, why_len, "thread pool: thread count must be at least 1");
        return BIB_E_USAGE;
    }
    bib_threadpool_t *pool = mi_zalloc(sizeof *pool);
    if (pool == NULL) {
        snprintf(why, why_len, "thread pool: out of memory");
        return BIB_E_NOMEM;
    }
    pool->threads = 1; /* raised as workers start, so destroy joins only those */
    pthread_mutex_init(&pool->submit, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_mutex_init(&pool->done_lock, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->claim, 0);
    atomic_init(&pool->remaining, 0);
    atomic_init(&pool->in_job, false);
    if (threads > 1) {
        pool->workers = mi_calloc(threads - 1, sizeof *pool->workers);
        if (pool->workers == NULL) {
            snprintf(why, why_len, "thread pool: out of memory");
            bib_threadpool_destroy(pool);
            return BIB_E_NOMEM;
        }
    }
    pthread_attr_t attr;
    bool sized = threads > 1 && pthread_attr_init(&attr) == 0;
    if (sized && pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES) != 0) {
        pthread_attr_destroy(&attr);
        sized = false;
    }
    for (uint32_t i = 0; i + 1 < threads; i++) {
        worker_t *w = &pool->workers[i];
        w->pool = pool;
        int err = pthread_create(&w->thread, sized ? &attr : NULL, worker_main, w);
        if (err != 0) {
            if (sized)
                pthread_attr_destroy(&attr);
            snprintf(why, why_len, "thread pool: cannot start worker %u of %u: %s", i + 1,
                     threads - 1, strerror(err));
            bib_threadpool_destroy(pool);
            return BIB_E_UNAVAILABLE;
        }
        pool->threads = i + 2;
    }
    if (sized)
        pthread_attr_destroy(&attr);
    *out = pool;
    return BIB_OK;
}

void bib_threadpool_destroy(bib_threadpool_t *pool) {
    if (pool == NULL)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stop = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (uint32_t i = 0; i + 1 < pool->threads; i++)
        pthread_join(pool->workers[i].thread, NULL);
    pthread_mutex_destroy(&pool->submit);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->done_lock);
    pthread_cond_destroy(&pool->done);
    mi_free(pool->workers);
    mi_free(pool);
}

uint32_t bib_threadpool_size(const bib_threadpool_t *pool) {
    return pool == NULL ? 1 : pool->threads;
}

static void run_inline(size_t n, size_t grain, uint32_t threads, uint32_t chunks,
                       bib_parallel_fn fn, void *ctx) {
    for (uint32_t i = 0; i < chunks; i++) {
        size_t begin, end;
        bib_threadpool_chunk(n, grain, threads, i, &begin, &end);
        fn(ctx, begin, end, i);
    }
}

/* True when the calling thread is already running a chunk of this pool. */
static bool called_from_inside(bib_threadpool_t *pool) {
    pthread_t self = pthread_self();
    for (uint32_t i = 0; i + 1 < pool->threads; i++)
        if (pthread_equal(self, pool->workers[i].thread))
            return true;
    return atomic_load_explicit(&pool->in_job, memory_order_acquire) &&
           pthread_equal(self, pool->submitter);
}

void bib_threadpool_parallel_for(bib_threadpool_t *pool, size_t n, size_t grain, bib_parallel_fn fn,
                                 void *ctx) {
    if (grain == 0)
        grain = 1;
    size_t begin, end;
    uint32_t threads = bib_threadpool_size(pool);
    uint32_t chunks = bib_threadpool_chunk(n, grain, threads, 0, &begin, &end);
    if (chunks == 0)
        return;
    if (pool == NULL || chunks == 1 || called_from_inside(pool)) {
        run_inline(n, grain, threads, chunks, fn, ctx);
        return;
    }

    pthread_mutex_lock(&pool->submit);
    pool->submitter = pthread_self();
    atomic_store_explicit(&pool->in_job, true, memory_order_release);
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->grain = grain;
    pool->chunks = chunks;
    atomic_store_explicit(&pool->remaining, chunks, memory_order_relaxed);
    uint32_t gen = generation(pool) + 1;
    if (gen == 0) /* 0 means "no job yet" to a worker that has not started */
        gen = 1;
    pthread_mutex_lock(&pool->lock);
    atomic_store_explicit(&pool->claim, (uint64_t)gen << 32, memory_order_release);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    claim_and_run(pool, gen);

    int round = 0;
    while (atomic_load_explicit(&pool->remaining, memory_order_acquire) != 0 && round < SPIN_ROUNDS)
        spin_pause(round++);
    if (atomic_load_explicit(&pool->remaining, memory_order_acquire) != 0) {
        pthread_mutex_lock(&pool->done_lock);
        while (atomic_load_explicit(&pool->remaining, memory_order_acquire) != 0)
            pthread_cond_wait(&pool->done, &pool->done_lock);
        pthread_mutex_unlock(&pool->done_lock);
    }
    atomic_store_explicit(&pool->in_job, false, memory_order_release);
    pthread_mutex_unlock(&pool->submit);
}
