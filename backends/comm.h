/* backends/comm.h: the communicator between the ranks of an MPI run.
 *
 * Beside the executors, not one of them: the collective opcodes
 * (vm/collective.c) move host copies of tensors through it. The MPI library,
 * Open MPI's libmpi.so.40 or one of the MPICH ABI (libmpich.so.12), is
 * loaded at run time (dlopen, like the CUDA driver in backends/cuda), so one
 * bib binary runs alone on a machine without MPI and, started by `mpirun -np
 * N` (or MPICH's mpiexec), as one of N ranks. Nothing links against libmpi.
 *
 * MPI is one per process, so this is the one piece of process-wide state in
 * the library: started once (the `bib run` command does it when the
 * environment says mpirun launched it), never by a VM on its own. Until it
 * is started every VM is a world of one: rank 0 of 1, and the collectives are
 * local copies.
 *
 * Every exchange is non-blocking underneath and waited for with a deadline
 * (MPI's blocking collectives have none): past it the call returns
 * BIB_E_TIMEOUT, and the communicator is then lost (the exchange may still be
 * in flight), so the caller ends every rank with bib_comm_abort. MPI counts
 * bytes in ints: a broadcast over 2 GiB goes in pieces, an all-gather whose
 * parts or places pass 2 GiB as one broadcast per rank, and an all-to-all
 * whose parts lie past 2 GiB in the send buffer packs them first (its
 * counts themselves stay below 2 GiB).
 */
#ifndef BIB_COMM_H
#define BIB_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"

/* Whether an MPI launcher started this process: the environment holds
 * OMPI_COMM_WORLD_SIZE (Open MPI's mpirun) or PMI_SIZE (MPICH's Hydra:
 * mpiexec.mpich, Intel MPI's mpirun). */
bool bib_comm_launched(void);

/* Loads the MPI library (libmpi.so.40 under Open MPI's launcher,
 * libmpich.so.12 or libmpi.so.12 under Hydra; $BIB_MPI_LIBRARY names
 * another), finds which of the two ABIs it speaks, and initializes
 * MPI, unless the host program already has (it then also finalizes it, and
 * bib_comm_stop leaves MPI running). timeout_ms bounds every later exchange (0: none).
 * BIB_E_UNAVAILABLE with why set when the library is missing or MPI_Init fails. */
bib_status_t bib_comm_start(uint64_t timeout_ms, char *why, size_t cap);
/* MPI_Finalize, once; nothing after it. */
void bib_comm_stop(void);
/* Ends every rank now (MPI_Abort) with exit code; never returns. */
void bib_comm_abort(int code) __attribute__((noreturn));

/* An MPI library a run could load, found without starting MPI. */
typedef struct bib_comm_candidate {
    const char *abi;      /* "Open MPI" or "MPICH" (its ABI); NULL when it cannot be used */
    const char *launcher; /* what selects it: "mpirun (Open MPI)", "mpiexec (Hydra)",
                             "$BIB_MPI_LIBRARY" */
    char library[128];    /* the name it loaded by (or the first one tried) */
    char version[256];    /* the first line of its MPI_Get_library_version; "" if unusable */
    char absent[320];     /* why it cannot be used; "" when it can */
    bool selected;        /* this process's environment selects it (a launcher started it,
                             or $BIB_MPI_LIBRARY names it) */
} bib_comm_candidate_t;

/* The libraries a run under a launcher would load: $BIB_MPI_LIBRARY's
 * alone, else Open MPI's and the MPICH ABI's. Each is loaded (RTLD_LOCAL,
 * and kept) and asked its version, which MPI allows before MPI_Init;
 * nothing is initialized. Fills out[0 .. n) and returns n (1 or 2). */
uint32_t bib_comm_candidates(bib_comm_candidate_t out[2]);

bool bib_comm_started(void);
/* This process's rank and the number of ranks: 0 and 1 when not started. */
int bib_comm_rank(void);
int bib_comm_size(void);
/* The timeout, for messages. */
uint64_t bib_comm_timeout_ms(void);

/* recv[r * bytes ..] = rank r's send, bytes from every rank. */
bib_status_t bib_comm_allgather(const void *send, void *recv, size_t bytes, char *why, size_t cap);
/* recv gets every rank's send in rank order: rank r's counts[r] bytes at
 * displs[r]. send NULL: in place (MPI_IN_PLACE), this rank's counts[rank]
 * bytes are already at recv + displs[rank] and stay there (bytes unused). */
bib_status_t bib_comm_allgatherv(const void *send, size_t bytes, void *recv, const uint64_t *counts,
                                 const uint64_t *displs, char *why, size_t cap);
/* Rank r gets scounts[r] bytes from send + sdispls[r] of every rank s, at
 * recv + rdispls[s] (rcounts[s] bytes). */
bib_status_t bib_comm_alltoallv(const void *send, const uint64_t *scounts, const uint64_t *sdispls,
                                void *recv, const uint64_t *rcounts, const uint64_t *rdispls,
                                char *why, size_t cap);
/* buf (bytes) of rank root, on every rank. */
bib_status_t bib_comm_bcast(void *buf, size_t bytes, int root, char *why, size_t cap);

#endif
