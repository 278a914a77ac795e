/* vm/tensor_internal.h: what the rooms of the VM's tensor half share (internal).
 *
 * The tensor half is four files, one job each:
 *   vm/tensor.c      residency and placement: the executors of a VM (started
 *                    on first use), storage and its per-place validity, the
 *                    choice of place for a call and the run of the call
 *                    (bib_tensor_run_kernel), traces, device-program buffers
 *   vm/tensor_ops.c  what each tensor opcode means: its operand checks, shape,
 *                    cost and fuel (the rules of isa/kernels.def), messages
 *   vm/tensor_layout.c  the strided copies, gathers and broadcasts, and the
 *                    opcodes run on any axes (several calls each)
 *   vm/tensor_api.c  the public tensor API (inputs, outputs, declarations)
 *                    and the binding of inputs and constants at run start
 *   vm/tensor_gpu.c  the GPU_* opcodes: the CUDA executor driven by the program
 * This header is their common vocabulary; nothing outside vm/tensor*.c
 * includes it.
 */
#ifndef BIB_TENSOR_INTERNAL_H
#define BIB_TENSOR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "vm/tensor.h"
#include "vm/vm.h"

/* Room for the longest shape text: "f32[" and BIB_MAX_RANK dimensions of up to
   10 digits with their commas, "]" and the NUL. */
#define BIB_SHAPE_TEXT (sizeof "f32[]" + BIB_MAX_RANK * sizeof "4294967295,")
#define BIB_TENSOR_MAX_BYTES ((uint64_t)1 << 62)

/* ---- shapes and numbers ------------------------------------------------------- */

/* Element count, or false when it would exceed BIB_TENSOR_MAX_BYTES / 4. */
static inline bool bib_tensor_count_of(uint32_t rank, const uint32_t *dims, uint64_t *out) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (__builtin_mul_overflow(n, (uint64_t)dims[i], &n) || n > BIB_TENSOR_MAX_BYTES / 4)
            return false;
    }
    *out = n;
    return true;
}

static inline bool bib_tensor_same_shape(const bib_tensor_t *t, uint32_t rank,
                                         const uint32_t *dims) {
    if (t->rank != rank)
        return false;
    for (uint32_t i = 0; i < rank; i++)
        if (t->dims[i] != dims[i])
            return false;
    return true;
}

static inline uint32_t bib_tensor_last_dim(const bib_tensor_t *t) {
    return t->rank ? t->dims[t->rank - 1] : 1;
}

/* Makes register t a view of storage s (whose reference it takes over) as a
 * tensor of dtype and the rank dims, count elements. */
static inline void bib_tensor_bind(bib_tensor_t *t, bib_storage_t *s, uint32_t dtype, uint32_t rank,
                                   const uint32_t *dims, uint64_t count) {
    t->storage = s;
    t->dtype = dtype;
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    for (uint32_t i = 0; i < rank && i < BIB_MAX_RANK; i++)
        t->dims[i] = dims[i];
    t->count = count;
    t->freed_at = 0;
}

static inline uint64_t bib_sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t bib_sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* ---- messages (vm/tensor_ops.c) ------------------------------------------------ */

const char *bib_tensor_dtype_name(uint32_t dtype);
/* "[3,4]" (dtype 0) or "f32[3,4]" into buf (BIB_SHAPE_TEXT bytes). */
const char *bib_tensor_shape_text(char *buf, uint32_t dtype, uint32_t rank, const uint32_t *dims);
const char *bib_tensor_shape(char *buf, const bib_tensor_t *t);
const char *bib_tensor_shape_typed(char *buf, const bib_tensor_t *t);
/* "t3" or "t3 (x)", with the register's declared name: bib_tensor_reg_text,
   in vm/tensor.h (the collectives use it too). */
/* A trap at ip's pc with a formatted cause. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
bib_status_t
bib_tensor_trap(bib_vm_t *vm, const bib_dinsn_t *ip, bib_status_t status, const char *format, ...);

/* ---- operands and fuel (vm/tensor_ops.c) ---------------------------------------- */

/* The tensor at operand reg, which must be live; traps otherwise. */
bib_status_t bib_tensor_need_live(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                                  bib_tensor_t **out);

#define LIVE(var, reg)                                                                             \
    bib_tensor_t *var;                                                                             \
    do {                                                                                           \
        bib_status_t st_ = bib_tensor_need_live(vm, ip, (reg), &var);                              \
        if (st_ != BIB_OK)                                                                         \
            return st_;                                                                            \
    } while (0)

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        bib_status_t st_ = (expr);                                                                 \
        if (st_ != BIB_OK)                                                                         \
            return st_;                                                                            \
    } while (0)

/* The fuel of work elements of tensor work: bib_tensor_charge_fuel, in
   vm/tensor.h (the collectives charge theirs too). */
/* Brings t (operand reg) to the host for the host's own access; traps on failure. */
bib_status_t bib_tensor_to_host(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                                const bib_tensor_t *t);
/* Dimensions r[first..first+n) as tensor dims, each 0..2^31-1; traps otherwise. */
bib_status_t bib_tensor_dims_from_regs(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                       uint32_t first, uint32_t n, uint32_t *dims);
/* ALLOC's semantics: t[a] of dtype b and the dims r[c..c+d), zero-filled on the host. */
bib_status_t bib_tensor_op_alloc(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R);
/* An opcode of a KOP or GKOP row (forced_place >= 0: run there). */
bib_status_t bib_tensor_op_kernel(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                  int forced_place);
/* A GPU_* opcode (vm/tensor_gpu.c). */
bib_status_t bib_tensor_op_gpu(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R);

/* ---- residency and placement (vm/tensor.c) --------------------------------------- */

/* What one kernel call needs, before residency is decided. */
typedef struct kspec {
    bib_kernel_t kernel;
    uint32_t sub;
    uint32_t in_regs[3];
    int nin;
    float f0;
    int64_t i0, i1;
    bool elementwise;  /* out may alias an input without a temporary */
    bool attention_2d; /* rank-2 q/k/v: run as [S,1,D] */
    /* MATMUL on numpy matmul shapes: the call sees the matrices ([M,K], [K,N],
       [M,N]; the bias row as it is), and runs once per batch index, each
       operand at its offset. batches is 1 when the batch folds into M. */
    bool matrices;
    uint32_t mdims[3][2]; /* out, in0, in1 */
    uint32_t nbatch;      /* batch axes of the result, 0..BIB_MAX_RANK-2 */
    uint32_t batch_dims[BIB_MAX_RANK];
    uint64_t batch_stride[3][BIB_MAX_RANK]; /* elements; 0 where an input broadcasts */
    uint64_t batches;
    bool forced; /* run on place, whatever the backend (GPU_* opcodes) */
    int place;
    bool charged;               /* the opcode's fuel is already taken (GPU_ALLOC's zeroes) */
    int64_t p[BIB_CALL_PARAMS]; /* the call's p[] */
    /* A step of an opcode made of several calls: the tensors themselves
     * instead of the registers' (a temporary, or a register's storage seen
     * with other dims); NULL: the register's. */
    bib_tensor_t *out_t;
    bib_tensor_t *in_t[3];
} bib_kspec_t;

/* Runs a kernel writing register out_reg with the given result dtype and
 * shape: charges its fuel, allocates the output when the register is empty
 * (checks it otherwise), chooses the place, moves the inputs there and calls
 * the executor. */
bib_status_t bib_tensor_run_kernel(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t out_reg,
                                   uint32_t dtype, uint32_t rank, const uint32_t *dims,
                                   const bib_kspec_t *k);

/* Checks options.backend and, when needed, starts what it selects. */
bib_status_t bib_tensor_resolve_backend(bib_vm_t *vm, bool needed);
/* The place of the executor called name, or -1 when this build has none. */
int bib_tensor_place_of(const char *name);
const char *bib_tensor_place_name(int place);
/* Starts the executor of place if it is not running yet (ts->why says why not). */
bib_status_t bib_tensor_start_place(bib_vm_t *vm, int place);
/* The last error of place's executor, or "no reason given". */
const char *bib_tensor_executor_error(const bib_vm_t *vm, int place);

/* A new storage of bytes, its host copy charged to the VM's blocks; valid
 * nowhere (zero: zero-filled and valid on the host). */
bib_status_t bib_storage_new(bib_vm_t *vm, uint64_t bytes, bool zero, bib_storage_t **out);
/* Shared bytes with one reference (the caller's); NULL when the host is out
 * of memory. owned: free(data) with the last reference. */
bib_hostbuf_t *bib_hostbuf_new(uint8_t *data, uint64_t bytes, bool owned);
/* A new storage whose host copy is h's bytes (one more reference to h),
 * valid on the host and charged to the VM's blocks as a copy would be. On
 * failure the blocks' error says why. */
bib_status_t bib_storage_share(bib_vm_t *vm, bib_hostbuf_t *h, bib_storage_t **out);
/* The one way to a writable host copy: every write to s->host comes after
 * it. A storage that shares bytes (a kept input's, a constant's) gets a
 * buffer of its own, holding the current value when the host copy is valid;
 * the charge to the cap stays as it is. BIB_E_NOMEM (the host is out of
 * memory) with why set. */
bib_status_t bib_storage_own_host(bib_vm_t *vm, bib_storage_t *s, char *why, size_t why_len);
/* Makes s's copy at place valid (the executor of place is running). */
bib_status_t bib_storage_make_valid(bib_vm_t *vm, bib_storage_t *s, int place, char *why,
                                    size_t why_len);
/* Brings tensor t to the host for reading. */
bib_status_t bib_tensor_host_read(bib_vm_t *vm, const bib_tensor_t *t, char *why, size_t why_len);
/* The executor a tensor is read back from, for messages. */
const char *bib_tensor_holder_name(const bib_tensor_t *t);
/* Drops t's storage reference; the register becomes empty. */
void bib_tensor_clear(bib_vm_t *vm, bib_tensor_t *t);

/* The result of a rule: the result's dtype and shape, filled into k. */
typedef struct bib_kresult {
    uint32_t dtype, rank;
    uint32_t dims[BIB_MAX_RANK];
} bib_kresult_t;

/* ---- layouts: strided copies, gathers, broadcasts, axes (vm/tensor_layout.c) ---- */

/* The shape rule of a STRIDED row (PERMUTE, EXPAND, SLICE, CONCAT): writes
 * the result's shape and the call's p[]. */
bib_status_t bib_tensor_strided_rule(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                     bib_kspec_t *k, bib_tensor_t *const *t, bib_kresult_t *r);
/* numpy's broadcast of the operands' shapes (two, or WHERE's three) into r. */
bib_status_t bib_tensor_broadcast_shape(bib_vm_t *vm, const bib_dinsn_t *ip, const bib_kspec_t *k,
                                        bib_tensor_t *const *t, bib_kresult_t *r);
/* The shape rule of GATHER_AXIS and GATHER_ELEMENTS (the indices checked). */
bib_status_t bib_tensor_take_rule(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                  bib_tensor_t *const *t, bib_kresult_t *r);
/* CUMSUM's flags, the call's i[0]: traps on a bit other than bib_scan_flags_t's. */
bib_status_t bib_tensor_scan_flags(bib_vm_t *vm, const bib_dinsn_t *ip, const bib_kspec_t *k);
/* A BIB_F_AXES row: its kernel along the last axis, on the axes IMM c names. */
bib_status_t bib_tensor_op_axes(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                bib_tensor_t *a, const bib_kresult_t *dt);
/* An elementwise call on the broadcast shape r, operands expanded as needed. */
bib_status_t bib_tensor_op_broadcast(bib_vm_t *vm, const bib_dinsn_t *ip, bib_kspec_t *k,
                                     bib_tensor_t *const *t, const bib_kresult_t *r);

/* ---- inputs (vm/tensor_api.c) ---------------------------------------------------- */

void bib_tensor_free_inputs(bib_vm_t *vm);

#endif
