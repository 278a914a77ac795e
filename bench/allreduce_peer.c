/* bench/allreduce_peer.c: BIB's ALLREDUCE beside MPI_Allreduce, in one run.
 *
 *   mpirun -np 2 build/allreduce_peer [ITER_1MB ITER_64MB]
 *
 * Each rank holds a tensor of 1 MB and of 64 MB of f32. The peer is
 * MPI_Allreduce(MPI_FLOAT, MPI_SUM) on the same buffer; BIB's is a VM
 * running bench/allreduce.basm, whose loop runs ALLREDUCE on its input k
 * times, so the VM's own cost per call (host copy checks, the header
 * exchange) is counted too. Both are timed between barriers, best of three
 * rounds; rank 0 prints one line per size: milliseconds per call, the
 * algorithm bandwidth (bytes / time) of each, and BIB's share of MPI's.
 * Every rank then checks BIB's result against the rank-order left fold of
 * every rank's values, computed here, bit for bit (a fast wrong answer
 * would not count), and the run fails if one differs. This
 * program links libmpi (mpicc) and calls MPI_Init itself; libbib's
 * communicator finds MPI initialized and uses it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "include/bib.h"

static double mpi_ms(float *buf, int count, int iters) {
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double ms = (MPI_Wtime() - t0) * 1e3 / iters;
        MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        best = ms < best ? ms : best;
    }
    return best;
}

/* Rank r's value at element i. */
static float value_of(uint32_t i, int r) {
    return (float)((i * 7u + (uint32_t)r * 13u) % 1000u) * 0.001f;
}

/* Whether t2 (the last ALLREDUCE's result) holds ((x0 + x1) + x2) + ... */
static int bib_result_ok(bib_vm_t *vm, uint32_t count, int size) {
    float *got = malloc((size_t)count * 4);
    if (got == NULL || bib_vm_tensor_read(vm, 2, 0, count, got) != BIB_OK) {
        free(got);
        return 0;
    }
    int ok = 1;
    for (uint32_t i = 0; i < count && ok; i++) {
        float acc = value_of(i, 0);
        for (int r = 1; r < size; r++)
            acc = acc + value_of(i, r);
        ok = memcmp(&acc, &got[i], 4) == 0;
    }
    free(got);
    return ok;
}

static double bib_ms(bib_vm_t *vm, const float *buf, uint32_t count, int iters) {
    int32_t k = iters;
    if (bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 1, &count, buf) != BIB_OK ||
        bib_vm_set_input(vm, "k", BIB_DTYPE_I32, 1, (uint32_t[]){1}, &k) != BIB_OK) {
        fprintf(stderr, "allreduce_peer: %s\n", bib_vm_error(vm));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        int64_t exit_value;
        if (bib_vm_run(vm, &exit_value) != BIB_OK) {
            fprintf(stderr, "allreduce_peer: %s\n", bib_vm_error(vm));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double ms = (MPI_Wtime() - t0) * 1e3 / iters;
        MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        best = ms < best ? ms : best;
    }
    return best;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char why[600];
    if (bib_comm_start(0, why, sizeof why) != BIB_OK) {
        fprintf(stderr, "allreduce_peer: %s\n", why);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const int iters[2] = {argc > 1 ? atoi(argv[1]) : 200, argc > 2 ? atoi(argv[2]) : 10};
    const uint32_t counts[2] = {(1u << 20) / 4, (64u << 20) / 4};
    bib_options_t options;
    bib_options_init(&options);
    options.max_memory = (uint64_t)1 << 30;
    bib_vm_t *vm = NULL;
    if (bib_vm_create(&options, &vm) != BIB_OK || bib_vm_load_file(vm, "bench/allreduce.basm")) {
        fprintf(stderr, "allreduce_peer: %s\n", vm ? bib_vm_error(vm) : "no VM");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        printf("ALLREDUCE (sum, f32) on %d ranks: BIB's rank-ordered fold beside MPI_Allreduce\n"
               "%-8s %12s %12s %12s %12s %8s\n",
               size, "size", "mpi ms", "mpi GB/s", "bib ms", "bib GB/s", "bib/mpi");
    for (int s = 0; s < 2; s++) {
        float *buf = malloc((size_t)counts[s] * 4);
        for (uint32_t i = 0; i < counts[s]; i++)
            buf[i] = value_of(i, rank);
        float *copy = malloc((size_t)counts[s] * 4);
        memcpy(copy, buf, (size_t)counts[s] * 4);
        double m = mpi_ms(copy, (int)counts[s], iters[s]);
        double b = bib_ms(vm, buf, counts[s], iters[s]);
        if (!bib_result_ok(vm, counts[s], size)) {
            fprintf(stderr, "allreduce_peer: rank %d: BIB's ALLREDUCE is not the rank-order fold\n",
                    rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double bytes = (double)counts[s] * 4;
        if (rank == 0)
            printf("%-8s %12.3f %12.2f %12.3f %12.2f %7.2fx\n", s == 0 ? "1 MB" : "64 MB", m,
                   bytes / m / 1e6, b, bytes / b / 1e6, m / b);
        free(copy);
        free(buf);
    }
    bib_vm_destroy(vm);
    MPI_Finalize();
    return 0;
}
