/* backends/comm.c: the communicator, Open MPI loaded at run time (see comm.h).
 *
 * Owns dlopen of libmpi.so.40, the table of the few MPI entry points used,
 * resolved by name, and Open MPI's predefined handles, which are the
 * addresses of its exported globals (mpi.h's MPI_COMM_WORLD is
 * &ompi_mpi_comm_world, MPI_BYTE &ompi_mpi_byte): so no mpi.h is needed to
 * build and no libmpi to run alone. RTLD_GLOBAL, because Open MPI's own
 * plugins resolve libmpi's symbols from the global scope.
 */
#include "backends/comm.h"

#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIB_MPI_DEFAULT_LIBRARY "libmpi.so.40"

/* mpi.h's MPI_IN_PLACE in Open MPI 4.x and 5.x. */
#define BIB_MPI_IN_PLACE ((const void *)1)

/* Open MPI's handles are pointers to its structures; opaque here. */
typedef void *mpi_handle_t;

#define BIB_MPI_API(X)                                                                             \
    X(init, "MPI_Init", int, (int *, char ***))                                                    \
    X(initialized, "MPI_Initialized", int, (int *))                                                \
    X(finalize, "MPI_Finalize", int, (void))                                                       \
    X(comm_rank, "MPI_Comm_rank", int, (mpi_handle_t, int *))                                      \
    X(comm_size, "MPI_Comm_size", int, (mpi_handle_t, int *))                                      \
    X(iallgather, "MPI_Iallgather", int,                                                           \
      (const void *, int, mpi_handle_t, void *, int, mpi_handle_t, mpi_handle_t, mpi_handle_t *))  \
    X(iallgatherv, "MPI_Iallgatherv", int,                                                         \
      (const void *, int, mpi_handle_t, void *, const int *, const int *, mpi_handle_t,            \
       mpi_handle_t, mpi_handle_t *))                                                              \
    X(ialltoallv, "MPI_Ialltoallv", int,                                                           \
      (const void *, const int *, const int *, mpi_handle_t, void *, const int *, const int *,     \
       mpi_handle_t, mpi_handle_t, mpi_handle_t *))                                                \
    X(ibcast, "MPI_Ibcast", int, (void *, int, mpi_handle_t, int, mpi_handle_t, mpi_handle_t *))   \
    X(test, "MPI_Test", int, (mpi_handle_t *, int *, void *))                                      \
    X(abort, "MPI_Abort", int, (mpi_handle_t, int))                                                \
    X(error_string, "MPI_Error_string", int, (int, char *, int *))

typedef struct mpi_api {
    void *library;
#define BIB_MPI_FIELD(field, symbol, ret, params) ret(*field) params;
    BIB_MPI_API(BIB_MPI_FIELD)
#undef BIB_MPI_FIELD
    mpi_handle_t world, byte; /* MPI_COMM_WORLD, MPI_BYTE */
} mpi_api_t;

static struct {
    bool started, stopped;
    bool host_init; /* the host program called MPI_Init: it also finalizes */
    int rank, size;
    uint64_t timeout_ms;
    mpi_api_t mpi;
} comm = {.rank = 0, .size = 1};

bool bib_comm_launched(void) {
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    return size != NULL && size[0] != '\0';
}

bool bib_comm_started(void) {
    return comm.started;
}

int bib_comm_rank(void) {
    return comm.rank;
}

int bib_comm_size(void) {
    return comm.size;
}

uint64_t bib_comm_timeout_ms(void) {
    return comm.timeout_ms;
}

static bib_status_t load(mpi_api_t *api, char *why, size_t cap) {
    const char *name = getenv("BIB_MPI_LIBRARY");
    if (name == NULL || name[0] == '\0')
        name = BIB_MPI_DEFAULT_LIBRARY;
    dlerror();
    api->library = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (api->library == NULL) {
        const char *err = dlerror();
        snprintf(why, cap, "%s could not be loaded (%s): install Open MPI (openmpi-bin)", name,
                 err != NULL ? err : "not found");
        return BIB_E_UNAVAILABLE;
    }
#define BIB_MPI_RESOLVE(field, symbol, ret, params)                                                \
    *(void **)&api->field = dlsym(api->library, symbol);                                           \
    if (api->field == NULL) {                                                                      \
        snprintf(why, cap, "%s has no %s: not an Open MPI library", name, symbol);                 \
        return BIB_E_UNAVAILABLE;                                                                  \
    }
    BIB_MPI_API(BIB_MPI_RESOLVE)
#undef BIB_MPI_RESOLVE
    api->world = dlsym(api->library, "ompi_mpi_comm_world");
    api->byte = dlsym(api->library, "ompi_mpi_byte");
    if (api->world == NULL || api->byte == NULL) {
        snprintf(why, cap, "%s has no ompi_mpi_comm_world: not an Open MPI library", name);
        return BIB_E_UNAVAILABLE;
    }
    return BIB_OK;
}

static void mpi_error(int code, const char *what, char *why, size_t cap) {
    char text[512] = "";
    int len = 0;
    if (comm.mpi.error_string(code, text, &len) != 0)
        snprintf(text, sizeof text, "error %d", code);
    snprintf(why, cap, "%s: %s", what, text);
}

bib_status_t bib_comm_start(uint64_t timeout_ms, char *why, size_t cap) {
    if (comm.started)
        return BIB_OK;
    bib_status_t st = load(&comm.mpi, why, cap);
    if (st != BIB_OK)
        return st;
    int already = 0, rc = comm.mpi.initialized(&already);
    if (rc == 0 && !already)
        rc = comm.mpi.init(NULL, NULL);
    comm.host_init = already != 0;
    if (rc != 0) {
        mpi_error(rc, "MPI_Init", why, cap);
        return BIB_E_UNAVAILABLE;
    }
    comm.mpi.comm_rank(comm.mpi.world, &comm.rank);
    comm.mpi.comm_size(comm.mpi.world, &comm.size);
    comm.timeout_ms = timeout_ms;
    comm.started = true;
    return BIB_OK;
}

void bib_comm_stop(void) {
    if (comm.started && !comm.stopped && !comm.host_init)
        comm.mpi.finalize();
    comm.stopped = !comm.host_init;
}

void bib_comm_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (comm.started && !comm.stopped)
        comm.mpi.abort(comm.mpi.world, code);
    _Exit(code);
}

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Drives req to completion, or to the deadline. MPI progresses only inside
   its calls, so this polls; after a few thousand polls it yields the core
   (ranks may share cores: --oversubscribe). */
static bib_status_t wait_for(mpi_handle_t *req, const char *what, char *why, size_t cap) {
    const uint64_t start = now_ms();
    for (uint32_t polls = 0;; polls++) {
        int done = 0;
        int rc = comm.mpi.test(req, &done, NULL);
        if (rc != 0) {
            mpi_error(rc, what, why, cap);
            return BIB_E_IO;
        }
        if (done)
            return BIB_OK;
        if (polls < 4096)
            continue;
        sched_yield();
        if (comm.timeout_ms != 0 && (polls & 255) == 0 && now_ms() - start > comm.timeout_ms) {
            snprintf(why, cap,
                     "%s: no answer from every rank within %llu ms (--comm-timeout): a rank is "
                     "still computing, stuck, or gone",
                     what, (unsigned long long)comm.timeout_ms);
            return BIB_E_TIMEOUT;
        }
    }
}

/* The end of every exchange: the error of the call that started it (rc),
   else its wait. ints, the counts MPI reads until the exchange completes
   (NULL when none), are freed, but not after a timeout: MPI may still read
   them. */
static bib_status_t finish(int rc, mpi_handle_t *req, const char *call, int *ints, char *why,
                           size_t cap) {
    bib_status_t st = BIB_E_IO;
    if (rc != 0)
        mpi_error(rc, call, why, cap);
    else
        st = wait_for(req, call, why, cap);
    if (st != BIB_E_TIMEOUT)
        free(ints);
    return st;
}

static bool fits_int(uint64_t n) {
    return n <= (uint64_t)INT_MAX;
}

static bib_status_t too_large(const char *what, char *why, size_t cap) {
    snprintf(why, cap, "%s: over 2 GiB in one exchange (MPI counts are int)", what);
    return BIB_E_NOMEM;
}

static bib_status_t started_or_fail(const char *what, char *why, size_t cap) {
    if (comm.started && !comm.stopped)
        return BIB_OK;
    snprintf(why, cap, "%s: the communicator is not running", what);
    return BIB_E_STATE;
}

bib_status_t bib_comm_allgather(const void *send, void *recv, size_t bytes, char *why, size_t cap) {
    bib_status_t st = started_or_fail("allgather", why, cap);
    if (st != BIB_OK)
        return st;
    if (!fits_int(bytes))
        return too_large("allgather", why, cap);
    mpi_handle_t req = NULL;
    int rc = comm.mpi.iallgather(send, (int)bytes, comm.mpi.byte, recv, (int)bytes, comm.mpi.byte,
                                 comm.mpi.world, &req);
    return finish(rc, &req, "MPI_Iallgather", NULL, why, cap);
}

/* counts and displacements as MPI's ints; false when one does not fit. */
static bool to_ints(const uint64_t *in, int *out, int n) {
    for (int i = 0; i < n; i++) {
        if (!fits_int(in[i]))
            return false;
        out[i] = (int)in[i];
    }
    return true;
}

bib_status_t bib_comm_allgatherv(const void *send, size_t bytes, void *recv, const uint64_t *counts,
                                 const uint64_t *displs, char *why, size_t cap) {
    bib_status_t st = started_or_fail("allgatherv", why, cap);
    if (st != BIB_OK)
        return st;
    int *ints = malloc(2 * (size_t)comm.size * sizeof *ints);
    if (ints == NULL) {
        snprintf(why, cap, "allgatherv: host out of memory");
        return BIB_E_NOMEM;
    }
    if (send == NULL) {
        send = BIB_MPI_IN_PLACE;
        bytes = 0;
    }
    if (!fits_int(bytes) || !to_ints(counts, ints, comm.size) ||
        !to_ints(displs, ints + comm.size, comm.size)) {
        free(ints);
        return too_large("allgatherv", why, cap);
    }
    mpi_handle_t req = NULL;
    int rc = comm.mpi.iallgatherv(send, (int)bytes, comm.mpi.byte, recv, ints, ints + comm.size,
                                  comm.mpi.byte, comm.mpi.world, &req);
    return finish(rc, &req, "MPI_Iallgatherv", ints, why, cap);
}

bib_status_t bib_comm_alltoallv(const void *send, const uint64_t *scounts, const uint64_t *sdispls,
                                void *recv, const uint64_t *rcounts, const uint64_t *rdispls,
                                char *why, size_t cap) {
    bib_status_t st = started_or_fail("alltoallv", why, cap);
    if (st != BIB_OK)
        return st;
    const int n = comm.size;
    int *ints = malloc(4 * (size_t)n * sizeof *ints);
    if (ints == NULL) {
        snprintf(why, cap, "alltoallv: host out of memory");
        return BIB_E_NOMEM;
    }
    if (!to_ints(scounts, ints, n) || !to_ints(sdispls, ints + n, n) ||
        !to_ints(rcounts, ints + 2 * n, n) || !to_ints(rdispls, ints + 3 * n, n)) {
        free(ints);
        return too_large("alltoallv", why, cap);
    }
    mpi_handle_t req = NULL;
    int rc = comm.mpi.ialltoallv(send, ints, ints + n, comm.mpi.byte, recv, ints + 2 * n,
                                 ints + 3 * n, comm.mpi.byte, comm.mpi.world, &req);
    return finish(rc, &req, "MPI_Ialltoallv", ints, why, cap);
}

bib_status_t bib_comm_bcast(void *buf, size_t bytes, int root, char *why, size_t cap) {
    bib_status_t st = started_or_fail("bcast", why, cap);
    if (st != BIB_OK)
        return st;
    if (!fits_int(bytes))
        return too_large("bcast", why, cap);
    mpi_handle_t req = NULL;
    int rc = comm.mpi.ibcast(buf, (int)bytes, comm.mpi.byte, root, comm.mpi.world, &req);
    return finish(rc, &req, "MPI_Ibcast", NULL, why, cap);
}
