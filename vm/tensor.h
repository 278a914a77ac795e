/* vm/tensor.h: tensors at run time (internal).
 *
 * Owns the tensor register file, tensor storage and where its valid copies
 * live, the executors a VM uses, the named inputs and outputs, and the one
 * entry point the interpreter calls for every tensor opcode
 * (bib_tensor_exec). The kernels themselves belong to the executors
 * (backends/); the module-side declarations (.input/.output/.tensor) come from
 * vm/module.h.
 *
 * Residency. A tensor register holds a view: dtype, shape and a reference to
 * a storage. Storage is reference-counted (RESHAPE views share it; FREE drops
 * one reference) and records, per place, whether that place's copy is valid.
 * There are two places: the host, which is also the CPU executor's memory
 * (its buffers are host pointers), and the device of the selected GPU
 * executor. A kernel that runs on a place first makes its inputs valid there
 * (one upload or download each, only if they are not valid yet) and leaves its
 * output valid there only. Host reads (TGET, THASH, outputs, traces) download
 * once and mark the host valid; nothing moves when nothing changed.
 *
 * The host copy of every storage is allocated when the storage is made, from
 * the VM's block allocator, so every tensor counts against the memory cap
 * whichever executor runs it, and the same program runs out of memory at the
 * same instruction on every executor.
 */
#ifndef BIB_TENSOR_H
#define BIB_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../backends/backend.h"
#include "../include/bib.h"

struct bib_vm;
struct bib_dinsn;

/* Places a storage's copy can live. */
enum {
    BIB_PLACE_HOST = 0,   /* host memory; the CPU executor's buffers are host pointers */
    BIB_PLACE_DEVICE = 1, /* the selected GPU executor's buffers */
    BIB_PLACES = 2,
};

typedef struct bib_storage {
    uint32_t refs;  /* tensor registers viewing it */
    uint32_t valid; /* bit per place whose copy holds the current value */
    uint64_t bytes; /* element count * 4 */
    uint8_t *host;  /* always allocated (charged to the VM's blocks) */
    void *device;   /* the device executor's buffer; NULL until first needed there */
} bib_storage_t;

typedef struct bib_tensor {
    bib_storage_t *storage; /* NULL: the register is empty */
    uint32_t dtype;         /* bib_dtype_t */
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
    uint64_t count;    /* elements */
    uint32_t freed_at; /* pc + 1 of the FREE that emptied it; 0 when never freed */
} bib_tensor_t;

/* Counters that prove copies are lazy (tests read them). */
typedef struct bib_tensor_stats {
    uint64_t uploads, downloads;           /* host -> device, device -> host */
    uint64_t upload_bytes, download_bytes; /* their sizes */
    uint64_t kernels[BIB_PLACES];          /* kernel calls per place */
    uint64_t fallbacks;                    /* calls the device executor declined, run on the CPU */
} bib_tensor_stats_t;

/* A value given with bib_vm_set_input, kept for the following runs. */
typedef struct bib_input {
    bool set;
    uint32_t dtype, rank;
    uint32_t dims[BIB_MAX_RANK];
    void *data; /* malloc'd copy, count * 4 bytes */
    uint64_t bytes;
} bib_input_t;

typedef struct bib_tensor_state {
    /* Executors: places[BIB_PLACE_HOST] is the CPU executor, started when
     * first needed; places[BIB_PLACE_DEVICE] the selected GPU executor (ops
     * NULL when the CPU is selected). */
    const bib_executor_ops_t *ops[BIB_PLACES];
    bib_executor_t *ex[BIB_PLACES];
    bool resolved; /* options.backend has been looked at and started */

    bib_tensor_t *regs; /* the register file of the current or last run (run arena) */
    uint32_t reg_count;

    bib_input_t *inputs; /* one per module tensor declaration; malloc'd at load */
    int64_t *symbols;    /* per symbolic dimension: its size in this run, or -1 */

    const char *last_place; /* executor (or "host", "view") of the last tensor opcode, for traces */
    bib_tensor_stats_t stats;
} bib_tensor_state_t;

/* Releases executors and everything held; the VM is being destroyed. */
void bib_tensor_destroy(struct bib_vm *vm);
/* A module was installed: makes room for its inputs. BIB_E_NOMEM on failure. */
bib_status_t bib_tensor_load(struct bib_vm *vm);
/* The module is going away: frees tensors and inputs. */
void bib_tensor_unload(struct bib_vm *vm);
/* Frees every tensor of the last run (storage and host memory); the register
 * file itself lives in the run arena. Call before that arena is reset. */
void bib_tensor_release(struct bib_vm *vm);
/* Starts a run: resolves the executor (first time), allocates the register
 * file from the run arena, binds inputs and constants. Fails with the VM
 * error set (BIB_E_USAGE for a missing or inconsistent input,
 * BIB_E_UNAVAILABLE for an executor that cannot start, BIB_E_NOMEM). */
bib_status_t bib_tensor_run_begin(struct bib_vm *vm);

/* Runs one tensor opcode; R is the current register window. Returns BIB_OK or
 * a trap status with the VM error set (bib_vm_trap_at). */
bib_status_t bib_tensor_exec(struct bib_vm *vm, const struct bib_dinsn *ip, uint64_t *R);

/* For traces: the tensor part of the line for the tensor instruction at pc,
 * written after it ran: operand and result shapes, the executor, the hash of
 * the result. json selects "\"executor\":...,\"shape\":...,\"hash\":..." members
 * instead of text. */
void bib_tensor_trace(struct bib_vm *vm, uint32_t pc, bool json, char *buf, size_t cap);

/* FNV-1a 64 of dtype, rank and dims (u32 little-endian each), then the
 * element bytes. */
uint64_t bib_tensor_hash(uint32_t dtype, uint32_t rank, const uint32_t *dims, const void *data,
                         uint64_t bytes);

#endif
