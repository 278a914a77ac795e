/* vm/tensor.h: tensors at run time (internal).
 *
 * The tensor register file, tensor storage and where its valid copies live,
 * the executors a VM uses, the named inputs and outputs, and the one entry
 * point the interpreter calls for every tensor opcode (bib_tensor_exec).
 * vm/tensor_internal.h names the four files that implement it (opcode
 * semantics, residency and placement, the public API, the GPU_* opcodes). The
 * kernels themselves belong to the executors (backends/); the module-side
 * declarations (.input/.output/.tensor) come from module/module.h.
 *
 * Residency. A tensor register holds a view: dtype, shape and a reference to
 * a storage. Storage is reference-counted (RESHAPE views share it; FREE drops
 * one reference) and records, per place, whether that place's copy is valid
 * and that place's buffer. Place p is executor bib_executor_at(p): place 0 is
 * the CPU executor, whose memory is the host; every GPU executor in use (CUDA
 * and Vulkan may both be) is a place of its own. A kernel runs on one place:
 * it first makes its inputs valid there (at most one copy each, only when
 * they are not valid there yet; a copy between two devices goes through the
 * host, which then stays valid too) and leaves its output valid there only.
 * Host reads (TGET, THASH, outputs, traces) download once and mark the host
 * valid; nothing moves when nothing changed.
 *
 * Which place runs a kernel: --backend=cpu the host; vulkan or cuda that
 * executor (the host for a call it declines); auto a cost model per call
 * (vm/placement.c): each candidate's measured time for the work plus the
 * transfers its inputs would need, so a tensor already on a GPU stays there.
 * GPU_* opcodes always run on the CUDA place, or on the host when there is no
 * CUDA device (a warning, or an error under options.strict_device).
 *
 * The host copy of every storage is allocated when the storage is made, from
 * the VM's block allocator, so every tensor counts against the memory cap
 * whichever executor runs it, and the same program runs out of memory at the
 * same instruction on every executor.
 *
 * Inputs and constants are not copied at run start: an input's tensor shares
 * the bytes the VM keeps for later runs, a constant's the module's, and each
 * is charged to the cap as its own copy would be. Every write to a host copy
 * (a kernel's output on the host, a download, TSET, a collective, a device
 * program on the cpu executor) first calls bib_storage_own_host, which gives a
 * shared storage a copy of its own; so a run never changes a kept input or
 * the module, and the next run sees them as they were given.
 */
#ifndef BIB_TENSOR_H
#define BIB_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "include/bib.h"

struct bib_vm;
struct bib_dinsn;

/* Places: place p is executor bib_executor_at(p); place 0 (the CPU
 * executor) is the host. */
#define BIB_MAX_PLACES 4
enum { BIB_PLACE_HOST = 0 };

/* Bytes that tensors of a run share instead of copying: a kept input's
 * (bib_vm_set_input) or a module constant's (.tensor data). Each holder (the
 * kept input, each storage sharing it) has a reference; nothing writes the
 * bytes while they are shared (bib_storage_own_host). */
typedef struct bib_hostbuf {
    uint32_t refs;
    bool owned; /* data is free()d with the last reference; false: a constant the module frees */
    uint8_t *data;
    uint64_t bytes;
} bib_hostbuf_t;

typedef struct bib_storage {
    uint32_t refs;             /* tensor registers viewing it */
    uint32_t valid;            /* bit per place whose copy holds the current value */
    uint64_t bytes;            /* element count * 4 */
    uint8_t *host;             /* always present and charged to the VM's blocks: its own
                                  buffer, or shared->data */
    bib_hostbuf_t *shared;     /* non-NULL: host is these shared bytes, read-only; the first
                                  write takes a copy of its own (copy-on-write) */
    void *buf[BIB_MAX_PLACES]; /* each GPU place's buffer; NULL until first needed there */
} bib_storage_t;

typedef struct bib_tensor {
    bib_storage_t *storage; /* NULL: the register is empty */
    uint32_t dtype;         /* bib_dtype_t */
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
    uint64_t count;    /* elements */
    uint32_t freed_at; /* pc + 1 of the FREE that emptied it; 0 when never freed */
} bib_tensor_t;

/* Counters that prove copies are lazy (tests read them). kernels[] counts by
 * kind of place: [BIB_STAT_HOST] the CPU executor, [BIB_STAT_DEVICE] any GPU
 * executor; place_kernels[] by place. */
enum { BIB_STAT_HOST = 0, BIB_STAT_DEVICE = 1 };
#define BIB_PLACE_DEVICE BIB_STAT_DEVICE /* the name the counters had with one device */
typedef struct bib_tensor_stats {
    uint64_t uploads, downloads;           /* host -> device, device -> host */
    uint64_t upload_bytes, download_bytes; /* their sizes */
    uint64_t kernels[2];                   /* kernel calls on the host, on any device */
    uint64_t place_kernels[BIB_MAX_PLACES];
    uint64_t fallbacks; /* calls the selected GPU executor declined, run on the CPU */
} bib_tensor_stats_t;

/* A measured cost model of one place (vm/placement.c): a kernel of w flops
 * takes overhead_s + w / flops_per_s; moving b bytes to or from the host takes
 * transfer_s + b / bytes_per_s (0 for the host itself). */
typedef struct bib_place_model {
    bool measured;
    bool cpu_device;    /* a GPU executor that runs on the CPU (lavapipe): never chosen by auto */
    double overhead_s;  /* per kernel call */
    double flops_per_s; /* sustained MATMUL rate */
    double transfer_s;  /* per copy */
    double bytes_per_s; /* copy bandwidth */
    char key[192];      /* executor + device, the cache key */
} bib_place_model_t;

/* A value given with bib_vm_set_input, kept for the following runs. Each
 * run's input tensor shares its bytes (bib_storage_t.shared). */
typedef struct bib_input {
    bool set;
    bool fresh; /* given since the last run began (set checks only against these) */
    uint32_t dtype, rank;
    uint32_t dims[BIB_MAX_RANK];
    bib_hostbuf_t *kept; /* count * 4 bytes, owned; NULL when not set */
} bib_input_t;

typedef struct bib_tensor_state {
    /* Executors by place (ops[p] == bib_executor_at(p)); ex[p] is started on
     * first use. why[p] says why place p could not start (tried[p] set). */
    const bib_executor_ops_t *ops[BIB_MAX_PLACES];
    bib_executor_t *ex[BIB_MAX_PLACES];
    bool tried[BIB_MAX_PLACES];
    char why[BIB_MAX_PLACES][200];
    bool resolved;  /* options.backend has been looked at and started */
    int selected;   /* the place --backend names (host for cpu); -1 for auto */
    bool automatic; /* --backend=auto */
    bib_place_model_t models[BIB_MAX_PLACES]; /* auto: per started place */
    bool gpu_resolved;                        /* gpu_place is known */
    int gpu_place; /* GPU_* opcodes' place: CUDA's, or the host when there is no CUDA device */

    bib_tensor_t *regs; /* the register file of the current or last run (run arena) */
    uint32_t reg_count;

    bib_input_t *inputs; /* one per module tensor declaration; malloc'd at load */
    int64_t *symbols;    /* per symbolic dimension: its size in this run, or -1 */

    const char *last_place; /* executor (or "host", "view") of the last tensor opcode, for traces */
    uint64_t last_flops;    /* flops of the last tensor opcode's kernel call (--profile), or 0 */
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

/* Runs one tensor opcode; R is the current register window. It first charges
 * the opcode's fuel (spec/cli.md) from vm->fuel, which the interpreter hands
 * over around the call (vm/vm.h), and traps when too little is left. Returns BIB_OK or
 * a trap status with the VM error set (bib_vm_trap_at). */
bib_status_t bib_tensor_exec(struct bib_vm *vm, const struct bib_dinsn *ip, uint64_t *R);

/* For traces: the tensor part of the line for the tensor instruction at pc,
 * written after it ran: operand and result shapes, the executor, the hash of
 * the result. json selects "\"executor\":...,\"shape\":...,\"hash\":..." members
 * instead of text. */
void bib_tensor_trace(struct bib_vm *vm, uint32_t pc, bool json, char *buf, size_t cap);

/* For device programs (vm/devprog.c): starts the executor called executor
 * ("cuda", "vulkan", "cpu") if it is not running, makes t[reg] valid on it
 * (one copy at most) and returns the executor and t[reg]'s buffer there (the
 * host pointer for "cpu"). With write set, the other places' copies become
 * invalid: the caller is about to change the buffer. t[reg] must be live.
 * Fails with the VM error set: BIB_E_UNAVAILABLE (no such executor, or it
 * cannot start here), BIB_E_TRAP (t[reg] not live), BIB_E_NOMEM. */
bib_status_t bib_tensor_buffer_on(struct bib_vm *vm, uint32_t reg, const char *executor,
                                  bib_executor_t **ex, void **buf, bool write);

/* For the collectives (vm/collective.c), which work on host copies:
 * bib_tensor_host_in makes live t[reg]'s host copy valid (one download at
 * most) and returns it; bib_tensor_host_out returns t[reg]'s host buffer for
 * a result of dtype and shape, allocating it when t[reg] is empty and
 * trapping when a live t[reg] has another shape, and marks the host the only
 * valid place (the caller writes every element). Each traps with the VM
 * error set. bib_tensor_charge_fuel takes the fuel of work elements of
 * tensor work (vm/tensor_ops.c), bib_tensor_reg_text writes "t3" or
 * "t3 (x)". */
bib_status_t bib_tensor_host_in(struct bib_vm *vm, const struct bib_dinsn *ip, uint32_t reg,
                                const bib_tensor_t **out);
bib_status_t bib_tensor_host_out(struct bib_vm *vm, const struct bib_dinsn *ip, uint32_t reg,
                                 uint32_t dtype, uint32_t rank, const uint32_t *dims,
                                 uint8_t **host);
bib_status_t bib_tensor_charge_fuel(struct bib_vm *vm, const struct bib_dinsn *ip, uint64_t work);
const char *bib_tensor_reg_text(const struct bib_vm *vm, char *buf, size_t cap, uint32_t reg);

/* Whether place's executor is running and runs call (vm/placement.c asks). */
bool bib_tensor_place_runs(struct bib_vm *vm, int place, const bib_call_t *call);

/* Drops a reference to h; the last frees it (and its bytes, when owned). */
void bib_hostbuf_unref(bib_hostbuf_t *h);
/* The loaded module is about to be freed while the tensor registers stay
 * (bib_vm_reload): the constants' bytes that tensors share move from the
 * module to those tensors (its declarations lose them). */
void bib_tensor_keep_constants(struct bib_vm *vm);
/* For readers outside the tensor half (vm/debug.c): makes live t[reg]'s host
 * copy valid (one download at most). Fails with the VM error set, naming reg
 * and the executor it is read back from. */
bib_status_t bib_tensor_reg_to_host(struct bib_vm *vm, uint32_t reg);

/* FNV-1a 64 of dtype, rank and dims (u32 little-endian each), then the
 * element bytes. */
uint64_t bib_tensor_hash(uint32_t dtype, uint32_t rank, const uint32_t *dims, const void *data,
                         uint64_t bytes);

#endif
