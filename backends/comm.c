/* backends/comm.c: the communicator, an MPI library loaded at run time (see
 * comm.h).
 *
 * Owns dlopen of libmpi, the table of the few MPI entry points used,
 * resolved by name, and the library's predefined handles, so that no mpi.h
 * is needed to build and no libmpi to run alone. Two ABIs exist among the
 * MPI libraries users have, and both are spoken here:
 *  - Open MPI (libmpi.so.40, 4.x and 5.x): handles are pointers to its
 *    structures, MPI_COMM_WORLD is &ompi_mpi_comm_world and MPI_BYTE
 *    &ompi_mpi_byte, MPI_IN_PLACE is (void *)1, MPI_STATUS_IGNORE NULL;
 *  - the MPICH ABI (libmpich.so.12: MPICH 3.1 and later, and the libraries
 *    of the MPICH ABI initiative, Intel MPI's libmpi.so.12, Cray MPICH,
 *    MVAPICH): handles are ints with fixed values, MPI_COMM_WORLD
 *    0x44000000, MPI_BYTE 0x4c00010d, MPI_IN_PLACE (void *)-1,
 *    MPI_STATUS_IGNORE (MPI_Status *)1.
 * The entry points are declared once per ABI from one list (BIB_MPI_API),
 * and each call site goes through a wrapper that passes that ABI's handles.
 * RTLD_GLOBAL, because Open MPI's own plugins resolve libmpi's symbols from
 * the global scope.
 */
#include "backends/comm.h"

#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BIB_MPI_OMPI_LIBRARY "libmpi.so.40"
#define BIB_MPI_MPICH_LIBRARY "libmpich.so.12"
/* Intel MPI's name for the same ABI. */
#define BIB_MPI_MPICH_LIBRARY_ALT "libmpi.so.12"

/* The MPICH ABI's fixed handles (mpi.h of MPICH 3.1 .. 4.x). */
#define BIB_MPICH_COMM_WORLD 0x44000000
#define BIB_MPICH_BYTE 0x4c00010d
#define BIB_MPICH_REQUEST_NULL 0x2c000000

/* H: the ABI's handle type (communicator, datatype, request). */
#define BIB_MPI_API(X, H)                                                                          \
    X(init, "MPI_Init", int, (int *, char ***))                                                    \
    X(initialized, "MPI_Initialized", int, (int *))                                                \
    X(finalize, "MPI_Finalize", int, (void))                                                       \
    X(comm_rank, "MPI_Comm_rank", int, (H, int *))                                                 \
    X(comm_size, "MPI_Comm_size", int, (H, int *))                                                 \
    X(iallgather, "MPI_Iallgather", int, (const void *, int, H, void *, int, H, H, H *))           \
    X(iallgatherv, "MPI_Iallgatherv", int,                                                         \
      (const void *, int, H, void *, const int *, const int *, H, H, H *))                         \
    X(ialltoallv, "MPI_Ialltoallv", int,                                                           \
      (const void *, const int *, const int *, H, void *, const int *, const int *, H, H, H *))    \
    X(ibcast, "MPI_Ibcast", int, (void *, int, H, int, H, H *))                                    \
    X(test, "MPI_Test", int, (H *, int *, void *))                                                 \
    X(abort, "MPI_Abort", int, (H, int))                                                           \
    X(error_string, "MPI_Error_string", int, (int, char *, int *))                                 \
    X(library_version, "MPI_Get_library_version", int, (char *, int *))

#define BIB_MPI_FIELD(field, symbol, ret, params) ret(*field) params;
typedef struct ompi_api {
    BIB_MPI_API(BIB_MPI_FIELD, void *)
    void *world, *byte; /* MPI_COMM_WORLD, MPI_BYTE */
} ompi_api_t;
typedef struct mpich_api {
    BIB_MPI_API(BIB_MPI_FIELD, int)
} mpich_api_t;
#undef BIB_MPI_FIELD

typedef enum { ABI_OMPI, ABI_MPICH } mpi_abi_t;

/* A request in either ABI. */
typedef struct mpi_request {
    void *ompi;
    int mpich;
} mpi_request_t;

/* One loaded MPI library: its handle, the name it was opened by, its ABI and
 * that ABI's table of entry points. */
typedef struct mpi_lib {
    void *handle;
    const char *name;
    mpi_abi_t abi;
    union {
        ompi_api_t ompi;
        mpich_api_t mpich;
    } mpi;
} mpi_lib_t;

static struct {
    bool started, stopped;
    bool host_init; /* the host program called MPI_Init: it also finalizes */
    int rank, size;
    uint64_t timeout_ms;
    mpi_lib_t lib;
} comm = {.rank = 0, .size = 1};

/* Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH's Hydra (mpiexec.mpich,
 * Intel MPI's mpirun) PMI_SIZE. */
static bool env_set(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0';
}

bool bib_comm_launched(void) {
    return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE");
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

/* Resolves every entry point of `api` (one ABI's table) from `library`. */
#define BIB_MPI_RESOLVE_ALL(api, H)                                                                \
    do {                                                                                           \
        BIB_MPI_API(BIB_MPI_RESOLVE, H)                                                            \
    } while (0)
#define BIB_MPI_RESOLVE(field, symbol, ret, params)                                                \
    *(void **)&(api)->field = dlsym(library, symbol);                                              \
    if ((api)->field == NULL) {                                                                    \
        snprintf(why, cap, "%s has no %s: not an MPI library", name, symbol);                      \
        return BIB_E_UNAVAILABLE;                                                                  \
    }

static bib_status_t resolve_ompi(void *library, const char *name, ompi_api_t *api, char *why,
                                 size_t cap) {
    BIB_MPI_RESOLVE_ALL(api, void *);
    api->world = dlsym(library, "ompi_mpi_comm_world");
    api->byte = dlsym(library, "ompi_mpi_byte");
    if (api->world == NULL || api->byte == NULL) {
        snprintf(why, cap, "%s has no ompi_mpi_byte: not an Open MPI library", name);
        return BIB_E_UNAVAILABLE;
    }
    return BIB_OK;
}

/* The MPICH ABI has no symbol of its own to check, so the library's own
 * account of itself (callable before MPI_Init) must name an implementation
 * of that ABI: integer handles with other values would be passed to the
 * wrong objects. */
static bib_status_t resolve_mpich(void *library, const char *name, mpich_api_t *api, char *why,
                                  size_t cap) {
    BIB_MPI_RESOLVE_ALL(api, int);
    char version[8192] = "";
    int len = 0;
    if (api->library_version(version, &len) != 0)
        version[0] = '\0';
    version[sizeof version - 1] = '\0';
    static const char *const known[] = {"MPICH", "Intel(R) MPI", "MVAPICH", "CRAY MPICH"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(version, known[i]) != NULL)
            return BIB_OK;
    char *nl = strchr(version, '\n');
    if (nl != NULL)
        *nl = '\0';
    snprintf(why, cap,
             "%s is neither Open MPI nor of the MPICH ABI (it says \"%.200s\"); "
             "$BIB_MPI_LIBRARY names the MPI library to load",
             name, version);
    return BIB_E_UNAVAILABLE;
}
#undef BIB_MPI_RESOLVE
#undef BIB_MPI_RESOLVE_ALL

/* Opens the first of names[0 .. count) that loads, with dlopen's flags,
 * finds its ABI and resolves that ABI's entry points into *lib. On failure
 * lib->handle stays open only when it loaded (the caller closes it). */
static bib_status_t open_lib(const char *const *names, size_t count, int flags, mpi_lib_t *lib,
                             char *why, size_t cap) {
    const char *err = NULL;
    for (size_t i = 0; i < count && lib->handle == NULL; i++) {
        dlerror();
        lib->handle = dlopen(names[i], flags);
        lib->name = names[i];
        if (lib->handle == NULL)
            err = dlerror();
    }
    if (lib->handle == NULL) {
        snprintf(why, cap,
                 "%s%s%s could not be loaded (%s): install Open MPI (openmpi-bin) or MPICH",
                 names[0], count > 1 ? " or " : "", count > 1 ? names[1] : "",
                 err != NULL ? err : "not found");
        return BIB_E_UNAVAILABLE;
    }
    if (dlsym(lib->handle, "ompi_mpi_comm_world") != NULL) {
        lib->abi = ABI_OMPI;
        return resolve_ompi(lib->handle, lib->name, &lib->mpi.ompi, why, cap);
    }
    lib->abi = ABI_MPICH;
    return resolve_mpich(lib->handle, lib->name, &lib->mpi.mpich, why, cap);
}

/* The libraries the MPICH ABI goes by: MPICH's, then Intel MPI's. */
static const char *const mpich_names[] = {BIB_MPI_MPICH_LIBRARY, BIB_MPI_MPICH_LIBRARY_ALT};

/* Which library: $BIB_MPI_LIBRARY, else the one of the launcher that
 * started this process (Hydra's PMI_SIZE without Open MPI's variable: the
 * MPICH ABI, under either of its names), else Open MPI's. RTLD_GLOBAL:
 * Open MPI's plugins resolve libmpi's symbols from the global scope. */
static bib_status_t load(char *why, size_t cap) {
    const char *own = getenv("BIB_MPI_LIBRARY");
    static const char *const ompi_names[] = {BIB_MPI_OMPI_LIBRARY};
    const char *const *names = ompi_names;
    size_t count = 1;
    if (own != NULL && own[0] != '\0') {
        names = &own;
    } else if (!env_set("OMPI_COMM_WORLD_SIZE") && env_set("PMI_SIZE")) {
        names = mpich_names;
        count = 2;
    }
    return open_lib(names, count, RTLD_NOW | RTLD_GLOBAL, &comm.lib, why, cap);
}

/* The first line of lib's MPI_Get_library_version (callable before
 * MPI_Init), tabs as spaces, into out. */
static void version_line(const mpi_lib_t *lib, char *out, size_t cap) {
    char text[8192] = "";
    int len = 0;
    int rc = lib->abi == ABI_OMPI ? lib->mpi.ompi.library_version(text, &len)
                                  : lib->mpi.mpich.library_version(text, &len);
    text[sizeof text - 1] = '\0';
    if (rc != 0)
        text[0] = '\0';
    size_t n = strcspn(text, "\n");
    while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\r'))
        n--;
    text[n] = '\0';
    for (char *c = text; *c != '\0'; c++)
        if (*c == '\t')
            *c = ' ';
    snprintf(out, cap, "%s", text);
}

/* Fills c for the library names[0 .. count) without starting MPI: opened
 * RTLD_LOCAL (a probe of both ABIs must not put either's symbols in the
 * global scope) and asked its version. */
static void probe(const char *const *names, size_t count, const char *launcher, bool selected,
                  bib_comm_candidate_t *c) {
    memset(c, 0, sizeof *c);
    c->launcher = launcher;
    c->selected = selected;
    mpi_lib_t lib = {0};
    bib_status_t st =
        open_lib(names, count, RTLD_NOW | RTLD_LOCAL, &lib, c->absent, sizeof c->absent);
    snprintf(c->library, sizeof c->library, "%s", lib.name != NULL ? lib.name : names[0]);
    if (st == BIB_OK) {
        c->abi = lib.abi == ABI_OMPI ? "Open MPI" : "MPICH";
        version_line(&lib, c->version, sizeof c->version);
        c->absent[0] = '\0';
    }
    /* Not closed: an MPI library's own libraries (Open MPI's libopen-pal,
       hwloc) may not survive being unloaded, and a run that loads it later
       finds it already mapped. */
}

uint32_t bib_comm_candidates(bib_comm_candidate_t out[2]) {
    const char *own = getenv("BIB_MPI_LIBRARY");
    if (own != NULL && own[0] != '\0') {
        probe(&own, 1, "$BIB_MPI_LIBRARY", true, &out[0]);
        return 1;
    }
    static const char *const ompi_names[] = {BIB_MPI_OMPI_LIBRARY};
    bool ompi = env_set("OMPI_COMM_WORLD_SIZE"), hydra = !ompi && env_set("PMI_SIZE");
    probe(ompi_names, 1, "mpirun (Open MPI)", ompi, &out[0]);
    probe(mpich_names, 2, "mpiexec (Hydra)", hydra, &out[1]);
    return 2;
}

/* ---- the calls, each with its ABI's handles ------------------------------ */

#define CALL(fn, ...)                                                                              \
    (comm.lib.abi == ABI_OMPI ? comm.lib.mpi.ompi.fn(__VA_ARGS__)                                  \
                              : comm.lib.mpi.mpich.fn(__VA_ARGS__))
#define WORLD_OMPI comm.lib.mpi.ompi.world
#define BYTE_OMPI comm.lib.mpi.ompi.byte

static int mpi_comm_rank(int *rank) {
    return comm.lib.abi == ABI_OMPI ? comm.lib.mpi.ompi.comm_rank(WORLD_OMPI, rank)
                                    : comm.lib.mpi.mpich.comm_rank(BIB_MPICH_COMM_WORLD, rank);
}

static int mpi_comm_size(int *size) {
    return comm.lib.abi == ABI_OMPI ? comm.lib.mpi.ompi.comm_size(WORLD_OMPI, size)
                                    : comm.lib.mpi.mpich.comm_size(BIB_MPICH_COMM_WORLD, size);
}

static void mpi_finalize(void) {
    (void)(comm.lib.abi == ABI_OMPI ? comm.lib.mpi.ompi.finalize() : comm.lib.mpi.mpich.finalize());
}

static void mpi_abort(int code) {
    if (comm.lib.abi == ABI_OMPI)
        comm.lib.mpi.ompi.abort(WORLD_OMPI, code);
    else
        comm.lib.mpi.mpich.abort(BIB_MPICH_COMM_WORLD, code);
}

static const void *mpi_in_place(void) {
    return comm.lib.abi == ABI_OMPI ? (const void *)1 : (const void *)-1;
}

static int mpi_test(mpi_request_t *req, int *done) {
    return comm.lib.abi == ABI_OMPI ? comm.lib.mpi.ompi.test(&req->ompi, done, NULL)
                                    : comm.lib.mpi.mpich.test(&req->mpich, done, (void *)1);
}

static int mpi_iallgather(const void *send, int bytes, void *recv, mpi_request_t *req) {
    if (comm.lib.abi == ABI_OMPI)
        return comm.lib.mpi.ompi.iallgather(send, bytes, BYTE_OMPI, recv, bytes, BYTE_OMPI,
                                            WORLD_OMPI, &req->ompi);
    return comm.lib.mpi.mpich.iallgather(send, bytes, BIB_MPICH_BYTE, recv, bytes, BIB_MPICH_BYTE,
                                         BIB_MPICH_COMM_WORLD, &req->mpich);
}

static int mpi_iallgatherv(const void *send, int bytes, void *recv, const int *counts,
                           const int *displs, mpi_request_t *req) {
    if (comm.lib.abi == ABI_OMPI)
        return comm.lib.mpi.ompi.iallgatherv(send, bytes, BYTE_OMPI, recv, counts, displs,
                                             BYTE_OMPI, WORLD_OMPI, &req->ompi);
    return comm.lib.mpi.mpich.iallgatherv(send, bytes, BIB_MPICH_BYTE, recv, counts, displs,
                                          BIB_MPICH_BYTE, BIB_MPICH_COMM_WORLD, &req->mpich);
}

static int mpi_ialltoallv(const void *send, const int *scounts, const int *sdispls, void *recv,
                          const int *rcounts, const int *rdispls, mpi_request_t *req) {
    if (comm.lib.abi == ABI_OMPI)
        return comm.lib.mpi.ompi.ialltoallv(send, scounts, sdispls, BYTE_OMPI, recv, rcounts,
                                            rdispls, BYTE_OMPI, WORLD_OMPI, &req->ompi);
    return comm.lib.mpi.mpich.ialltoallv(send, scounts, sdispls, BIB_MPICH_BYTE, recv, rcounts,
                                         rdispls, BIB_MPICH_BYTE, BIB_MPICH_COMM_WORLD,
                                         &req->mpich);
}

static int mpi_ibcast(void *buf, int bytes, int root, mpi_request_t *req) {
    if (comm.lib.abi == ABI_OMPI)
        return comm.lib.mpi.ompi.ibcast(buf, bytes, BYTE_OMPI, root, WORLD_OMPI, &req->ompi);
    return comm.lib.mpi.mpich.ibcast(buf, bytes, BIB_MPICH_BYTE, root, BIB_MPICH_COMM_WORLD,
                                     &req->mpich);
}

static mpi_request_t request_null(void) {
    return (mpi_request_t){.ompi = NULL, .mpich = BIB_MPICH_REQUEST_NULL};
}

static void mpi_error(int code, const char *what, char *why, size_t cap) {
    char text[512] = "";
    int len = 0;
    if (CALL(error_string, code, text, &len) != 0)
        snprintf(text, sizeof text, "error %d", code);
    snprintf(why, cap, "%s: %s", what, text);
}

/* The rank and size the launcher's environment gives this process (Open
   MPI's variables before Hydra's, as load() chooses), with the size's
   variable; false when it names no size above 0. */
static bool launcher_world(const char **size_var, long *rank, long *size) {
    static const char *const vars[][2] = {{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                          {"PMI_SIZE", "PMI_RANK"}};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if (!env_set(vars[i][0]))
            continue;
        char *end;
        *size_var = vars[i][0];
        *size = strtol(getenv(vars[i][0]), &end, 10);
        const char *r = getenv(vars[i][1]);
        *rank = r != NULL ? strtol(r, NULL, 10) : -1;
        return *end == '\0' && *size > 0;
    }
    return false;
}

bib_status_t bib_comm_start(uint64_t timeout_ms, char *why, size_t cap) {
    if (comm.started)
        return BIB_OK;
    bib_status_t st = load(why, cap);
    if (st != BIB_OK)
        return st;
    int already = 0, rc = CALL(initialized, &already);
    if (rc == 0 && !already)
        rc = CALL(init, NULL, NULL);
    comm.host_init = already != 0;
    if (rc != 0) {
        mpi_error(rc, "MPI_Init", why, cap);
        return BIB_E_UNAVAILABLE;
    }
    mpi_comm_rank(&comm.rank);
    mpi_comm_size(&comm.size);
    /* A library that does not speak to the launcher (another MPI's, named
       by $BIB_MPI_LIBRARY, or a variable left over from another job) starts
       a world of one in each process: N runs that each think they are
       alone, all writing the outputs. */
    const char *size_var = NULL;
    long launched_rank = -1, launched = 0;
    if (launcher_world(&size_var, &launched_rank, &launched) && launched != comm.size) {
        char which[48] = "";
        if (launched_rank >= 0)
            snprintf(which, sizeof which, " (this one rank %ld)", launched_rank);
        snprintf(why, cap,
                 "%s says %ld ranks%s while %s (%s) counts %d: it is not the launcher's MPI "
                 "library, or the variable is left from another job ($BIB_MPI_LIBRARY names "
                 "the library to load)",
                 size_var, launched, which, comm.lib.name,
                 comm.lib.abi == ABI_OMPI ? "Open MPI" : "MPICH", comm.size);
        if (!comm.host_init)
            mpi_finalize();
        comm.rank = 0;
        comm.size = 1;
        return BIB_E_UNAVAILABLE;
    }
    comm.timeout_ms = timeout_ms;
    comm.started = true;
    return BIB_OK;
}

void bib_comm_stop(void) {
    if (comm.started && !comm.stopped && !comm.host_init)
        mpi_finalize();
    comm.stopped = !comm.host_init;
}

/* Waits, up to a second, until the launcher has read what this rank wrote
 * to fd when fd is a pipe (as mpiexec's stdio is). MPI_Abort tears every
 * rank down at once, and MPICH's launcher can drop what is still in the
 * pipe: a rank stuck past --comm-timeout once ended with exit 70 and
 * nothing printed, in a CI run and in one of fifteen runs by hand. */
static void drain_pipe(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
        return;
    for (int waited = 0; waited < 1000; waited++) {
        int unread = 0;
        if (ioctl(fd, FIONREAD, &unread) != 0 || unread <= 0)
            return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

void bib_comm_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (comm.started && !comm.stopped) {
        drain_pipe(STDOUT_FILENO);
        drain_pipe(STDERR_FILENO);
        mpi_abort(code);
    }
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
static bib_status_t wait_for(mpi_request_t *req, const char *what, char *why, size_t cap) {
    const uint64_t start = now_ms();
    for (uint32_t polls = 0;; polls++) {
        int done = 0;
        int rc = mpi_test(req, &done);
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
static bib_status_t finish(int rc, mpi_request_t *req, const char *call, int *ints, char *why,
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

/* The most bytes one broadcast moves: MPI's counts are int. */
#define BIB_COMM_PIECE ((size_t)1 << 30)

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
    mpi_request_t req = request_null();
    int rc = mpi_iallgather(send, (int)bytes, recv, &req);
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
    if (!fits_int(bytes) || !to_ints(counts, ints, comm.size) ||
        !to_ints(displs, ints + comm.size, comm.size)) {
        /* Past MPI's int counts and displacements: each rank's part from
           that rank, one broadcast (in pieces) after another. Every rank
           has the same counts, so every rank makes the same calls. */
        free(ints);
        if (send != NULL)
            memcpy((char *)recv + displs[comm.rank], send, bytes);
        for (int r = 0; r < comm.size && st == BIB_OK; r++)
            st = bib_comm_bcast((char *)recv + displs[r], counts[r], r, why, cap);
        return st;
    }
    if (send == NULL) {
        send = mpi_in_place();
        bytes = 0;
    }
    mpi_request_t req = request_null();
    int rc = mpi_iallgatherv(send, (int)bytes, recv, ints, ints + comm.size, &req);
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
    /* Parts sent from afar in a large buffer (a reduction's step of a
       tensor over 2 GiB) are packed first, when they fit MPI's ints then. */
    char *packed = NULL;
    uint64_t total = 0;
    for (int r = 0; r < n; r++)
        total += scounts[r];
    if (!to_ints(sdispls, ints + n, n) && fits_int(total)) {
        packed = malloc(total ? (size_t)total : 1);
        if (packed == NULL) {
            free(ints);
            snprintf(why, cap, "alltoallv: host out of memory");
            return BIB_E_NOMEM;
        }
        for (int r = 0, at = 0; r < n; at += (int)scounts[r], r++) {
            memcpy(packed + at, (const char *)send + sdispls[r], (size_t)scounts[r]);
            ints[n + r] = at;
        }
        send = packed;
    }
    if (!to_ints(scounts, ints, n) || (packed == NULL && !to_ints(sdispls, ints + n, n)) ||
        !to_ints(rcounts, ints + 2 * n, n) || !to_ints(rdispls, ints + 3 * n, n)) {
        free(packed);
        free(ints);
        return too_large("alltoallv", why, cap);
    }
    mpi_request_t req = request_null();
    int rc = mpi_ialltoallv(send, ints, ints + n, recv, ints + 2 * n, ints + 3 * n, &req);
    st = finish(rc, &req, "MPI_Ialltoallv", ints, why, cap);
    if (st != BIB_E_TIMEOUT)
        free(packed);
    return st;
}

bib_status_t bib_comm_bcast(void *buf, size_t bytes, int root, char *why, size_t cap) {
    bib_status_t st = started_or_fail("bcast", why, cap);
    if (st != BIB_OK)
        return st;
    /* In pieces under MPI's int count, one exchange each (an empty buffer
       is one empty exchange): every rank splits the same count the same
       way. */
    size_t done = 0;
    do {
        const size_t n = bytes - done < BIB_COMM_PIECE ? bytes - done : BIB_COMM_PIECE;
        mpi_request_t req = request_null();
        int rc = mpi_ibcast((char *)buf + done, (int)n, root, &req);
        st = finish(rc, &req, "MPI_Ibcast", NULL, why, cap);
        done += n;
    } while (st == BIB_OK && done < bytes);
    return st;
}
