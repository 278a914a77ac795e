/* vm/collective.h: the collective opcodes and the ranks' agreement (internal).
 *
 * Family 0x0004 (RANK, WORLD, BARRIER, BROADCAST, ALLGATHER, ALLREDUCE,
 * REDUCE_SCATTER and their _MAX forms) runs here, on host copies of tensors,
 * through the communicator (backends/comm.h). Without a started communicator
 * a VM is a world of one and every collective is a local copy with the same
 * numerics.
 *
 * Every exchange between ranks starts with the same fixed-size message, a
 * header, gathered from every rank: what the rank is doing (a collective, with
 * its opcode and shapes; starting the run; finished; failed, with its error
 * line). Because every rank sees every header, every rank reaches the same
 * verdict at once: go on, or stop, naming the rank that failed or the two
 * ranks that disagree. A rank that fails anywhere (a trap outside any
 * collective, a bad input file) sends its header at the end of its run
 * (bib_collective_agree), which meets the others' next exchange, so no rank
 * waits forever for it. The state of that agreement is per process, as MPI
 * is (spec/scale-out.md).
 */
#ifndef BIB_COLLECTIVE_H
#define BIB_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"

struct bib_vm;
struct bib_dinsn;

/* Runs one collective-family opcode; R is the current register window.
 * Returns BIB_OK or a trap status with the VM error set. A timeout or a
 * failed exchange ends every rank (bib_comm_abort) after one error line. */
bib_status_t bib_collective_exec(struct bib_vm *vm, const struct bib_dinsn *ip, uint64_t *R);

/* For the `bib run` command under mpirun: one agreement of every rank.
 * finished 0 means "starting the run" (after loading, before the inputs are
 * shared), 1 "the run has ended". failure is this rank's error line (NULL
 * when it has none) and failure_code its exit code. Returns 0 when every
 * rank is where this one is and none failed; otherwise the exit code and
 * verdict (one line: "rank 1: trap at pc 4 ...", or which ranks disagree).
 * Once a verdict has stopped the run (here or in a collective) it is
 * returned again without another exchange. */
int bib_collective_agree(int finished, const char *failure, int failure_code, char *verdict,
                         size_t cap);

#endif
