/* isa/kernels.h: the tensor kernels as data.
 *
 * Expands isa/kernels.def into bib_kernel_t and bib_kernel_table, and the
 * KOP rows of isa/opcodes.def into the sub-operation enums whose members are
 * opcodes (bib_unary_t, bib_binary_t, bib_reduce_t). This header owns what a
 * kernel is (its operands' dtypes, its shape rule, its cost formula, the
 * executors that have it); it knows nothing of registers, residency or any
 * executor's code. Executors include it through backends/backend.h.
 */
#ifndef BIB_ISA_KERNELS_H
#define BIB_ISA_KERNELS_H

#include <stdint.h>

/* ---- the columns' values --------------------------------------------------- */

/* Operand dtypes (checked by the VM before a call; the result's dtype). */
typedef enum bib_dtype_rule {
    BIB_DTYPES_F32,        /* every operand and the result f32 */
    BIB_DTYPES_ANY,        /* any dtype; the result has in0's (or out's own) */
    BIB_DTYPES_F32_TO_I32, /* f32 operand, i32 result */
    BIB_DTYPES_GATHER,     /* in0 any, in1 i32 indices; the result has in0's dtype */
    BIB_DTYPES_F32_OR_I32, /* f32, or i32 for a sub with an i32 form (bib_sub_i32): one dtype */
    BIB_DTYPES_CAST,       /* any operand; the result has the opcode's DTYPE operand */
    BIB_DTYPES_COMPARE,    /* f32 or i32 operands of one dtype, i32 result (0 or 1) */
    BIB_DTYPES_WHERE,      /* in0 i32, in1 and in2 of one dtype, the result's */
    BIB_DTYPES_I32,        /* every operand and the result i32 */
    BIB_DTYPES__COUNT
} bib_dtype_rule_t;

/* Result shape from the operands' shapes, and the operands' constraints. */
typedef enum bib_shape_rule {
    BIB_SHAPE_SAME,      /* in0's shape, element by element */
    BIB_SHAPE_ROWS,      /* in0's shape, row by row along a last axis (rank >= 1) */
    BIB_SHAPE_BROADCAST, /* in0's shape; in1 has it, is a row of in0's last axis, or one element
                            (a call with in0 alone, TNOT's, is elementwise) */
    BIB_SHAPE_PRODUCT,   /* numpy matmul: [...,M,K] . [...,K,N] -> [...,M,N], the kernel sees
                            [M,K] . [K,N] per batch index; a third input is a bias row of N */
    BIB_SHAPE_TRANSPOSE, /* rank >= 2, the last two axes swapped */
    BIB_SHAPE_REDUCE,    /* rank >= 1, the last axis dropped */
    BIB_SHAPE_INDEX,     /* as REDUCE, and the last axis is not empty (an index into it) */
    BIB_SHAPE_NORM,      /* in0's shape (rank >= 1); further inputs are rows of its last axis */
    BIB_SHAPE_ATTENTION, /* q [S,H,D] (or [S,D]), k and v [T,H,D]: q's shape */
    BIB_SHAPE_GATHER,    /* indices' shape, then the table's axes after the first */
    BIB_SHAPE_IN_PLACE,  /* no inputs: the result is the modified operand a itself */
    BIB_SHAPE_TAKE,      /* elements picked along an axis by i32 indices (bib_take_t: AXIS as
                            numpy.take, ELEMENTS as ONNX GatherElements) */
    BIB_SHAPE_STRIDED,   /* a strided copy: the result's shape and the call's p[] by the sub
                            (bib_strided_t: PERMUTE, EXPAND, SLICE, CONCAT) */
    BIB_SHAPE_WHERE,     /* numpy's broadcast of in0, in1, in2; the call gets in0 with the
                            result's count, in1 and in2 each as BROADCAST's in1 */
    BIB_SHAPE_CONV,      /* x [N,C,H,W] or [N,C,L], w [O,C/g,...] of x's rank: [N,O,OH,OW] */
    BIB_SHAPE_POOL,      /* x [N,C,H,W] or [N,C,L]: [N,C,OH,OW] (the block's kernel and pads) */
    BIB_SHAPE_CHANNELS,  /* in0's shape (rank >= 2); in1 is [4,C], C = in0's axis 1 */
    BIB_SHAPE_FIRST,     /* in0's shape (rank >= 1) with the last axis cut to its first k: the
                            opcode's IMM operand c (0 <= k <= the axis), or all of it when the
                            opcode has no operand c */
    BIB_SHAPE_SCAN,      /* in0's shape, row by row along a last axis (rank >= 1); the call's
                            i[0] holds flags (bib_scan_flags_t), no other bits */
    BIB_SHAPE__COUNT
} bib_shape_rule_t;

/* The scalars of a call, from the instruction. */
typedef enum bib_args_rule {
    BIB_ARGS_NONE,
    BIB_ARGS_SCALAR_C,  /* f[0] = the f64 r[c] rounded to f32 */
    BIB_ARGS_EPS_1E5,   /* f[0] = 1e-5, or the f64 of the opcode's RS operand rounded to f32 */
    BIB_ARGS_EPS_1E6,   /* f[0] = 1e-6 */
    BIB_ARGS_ATTENTION, /* f[0] = 1 / sqrt(D) */
    BIB_ARGS_FILL,      /* f[0] = r[b] rounded to f32, or i[0] = its low 32 bits (i32) */
    BIB_ARGS_SEED,      /* i[0] = r[b] (seed), i[1] = immediate c (stream) */
    BIB_ARGS_BLOCK,     /* p[0..12) = r[x..x+12), x the last RS operand (checked by the verifier) */
    BIB_ARGS_SCALAR_D,  /* f[0] = the f64 r[d] rounded to f32 */
    BIB_ARGS_FLAGS,     /* i[0] = the opcode's last IMM operand (CUMSUM's c, CUMSUM_AXIS's d) */
    BIB_ARGS__COUNT
} bib_args_rule_t;

/* The formulas of a call's cost (vm/tensor_ops.c bib_tensor_cost). */
typedef enum bib_cost_form {
    BIB_COST_ELEMENTS,  /* work: inputs + result elements; ops: per_element x result */
    BIB_COST_ROWS,      /* work: as ELEMENTS; ops: per_element x in0's elements */
    BIB_COST_PRODUCT,   /* work: M*N*(K+1); flops: 2*M*N*K */
    BIB_COST_ATTENTION, /* work: S*H*D*(2T+1); flops: 4*S*H*D*T */
    BIB_COST_GATHER,    /* work: indices + 2 x result elements */
    BIB_COST_CONV,      /* work: out x (taps + 1), taps = in1's elements / O; flops: 2 out taps */
    BIB_COST_POOL,      /* work: out x (window + 1), window = p[0] x p[1]; ops: out x window */
    BIB_COST__COUNT
} bib_cost_form_t;

/* The executors a descriptor can name; backends/backend.h gives each
 * executor its id. */
typedef enum bib_executor_id {
    BIB_EXECUTOR_CPU,
    BIB_EXECUTOR_VULKAN,
    BIB_EXECUTOR_CUDA,
    BIB_EXECUTOR_NULL, /* backends/null: the template, never one of a build's executors */
    BIB_EXECUTOR__COUNT
} bib_executor_id_t;

#define BIB_RUNS_ON_CPU (1u << BIB_EXECUTOR_CPU)
#define BIB_RUNS_ON_VULKAN (1u << BIB_EXECUTOR_VULKAN)
#define BIB_RUNS_ON_CUDA (1u << BIB_EXECUTOR_CUDA)
#define BIB_RUNS_ON_NULL (1u << BIB_EXECUTOR_NULL)
#define BIB_RUNS_ON_ALL (BIB_RUNS_ON_CPU | BIB_RUNS_ON_VULKAN | BIB_RUNS_ON_CUDA | BIB_RUNS_ON_NULL)

/* The registers of a BIB_ARGS_BLOCK parameter block (CONV and the pools). */
#define BIB_PARAM_BLOCK 12

/* ---- sub-operations ----------------------------------------------------------- */

/* MATMUL's activation (the LINEAR* opcodes); BATCHNORM's (NONE, RELU). */
typedef enum bib_act {
    BIB_ACT_NONE,
    BIB_ACT_RELU,
    BIB_ACT_GELU,
    BIB_ACT_GELU_ERF,
    BIB_ACT__COUNT
} bib_act_t;
/* SOFTMAX's form: softmax, or log-softmax (LOGSOFTMAX). */
typedef enum bib_softmax { BIB_SOFTMAX_NONE, BIB_SOFTMAX_LOG, BIB_SOFTMAX__COUNT } bib_softmax_t;
/* LAYERNORM's operands: gamma in1 and beta in2 with eps 1e-5 (NONE), or
 * gamma and beta as the rows of in1 [2,N] with eps from the instruction. */
typedef enum bib_layernorm {
    BIB_LAYERNORM_NONE,
    BIB_LAYERNORM_PACKED,
    BIB_LAYERNORM__COUNT
} bib_layernorm_t;
/* ATTENTION's mask. */
typedef enum bib_attention {
    BIB_ATTENTION_PLAIN,
    BIB_ATTENTION_CAUSAL,
    BIB_ATTENTION__COUNT
} bib_attention_t;

/* BIB_KOP_IS(UNARY, k) is 1 when the token k is UNARY, else 0 (for the
 * kernels that have a BIB_KOP_SAME_ line below); BIB_KOP_WHEN(c)(x) is x when
 * c is 1, nothing when 0. They pick the KOP rows of one kernel out of
 * isa/opcodes.def. */
#define BIB_KOP_CAT_(a, b) a##b
#define BIB_KOP_CAT(a, b) BIB_KOP_CAT_(a, b)
#define BIB_KOP_SECOND_(a, b, ...) b
#define BIB_KOP_CHECK_(...) BIB_KOP_SECOND_(__VA_ARGS__, 0, ~)
#define BIB_KOP_IS(want, k) BIB_KOP_CHECK_(BIB_KOP_CAT(BIB_KOP_SAME_##want##_, k))
#define BIB_KOP_WHEN(c) BIB_KOP_CAT(BIB_KOP_WHEN_, c)
#define BIB_KOP_WHEN_0(...)
#define BIB_KOP_WHEN_1(...) __VA_ARGS__
#define BIB_KOP_SAME_MATMUL_MATMUL ~, 1
#define BIB_KOP_SAME_UNARY_UNARY ~, 1
#define BIB_KOP_SAME_BINARY_BINARY ~, 1
#define BIB_KOP_SAME_REDUCE_REDUCE ~, 1
#define BIB_KOP_SAME_ATTENTION_ATTENTION ~, 1
#define BIB_KOP_SAME_COMPARE_COMPARE ~, 1
#define BIB_KOP_SAME_LOGIC_LOGIC ~, 1
#define BIB_KOP_SAME_SOFTMAX_SOFTMAX ~, 1
#define BIB_KOP_SAME_LAYERNORM_LAYERNORM ~, 1
#define BIB_KOP_SAME_STRIDED_STRIDED ~, 1
#define BIB_KOP_SAME_TAKE_TAKE ~, 1
#define BIB_KOP_SAME_ARGMAX_ARGMAX ~, 1
#define BIB_KOP_SAME_POOL_POOL ~, 1
#define BIB_KOP_SAME_BATCHNORM_BATCHNORM ~, 1
#define BIB_KOP_SAME_ARGSORT_ARGSORT ~, 1
/* BIB_KOP_ADDS(sub) is 0 for a sub spelled USE(x), which reuses the member
 * x that another row added, else 1. */
#define BIB_KOP_USE_PROBE_USE(x) ~, 1
#define BIB_KOP_NOT_0 1
#define BIB_KOP_NOT_1 0
#define BIB_KOP_ADDS(sub) BIB_KOP_CAT(BIB_KOP_NOT_, BIB_KOP_CHECK_(BIB_KOP_USE_PROBE_##sub))
#define BIB_KOP_ADDS_IN(want, kernel, sub) BIB_KOP_AND(BIB_KOP_IS(want, kernel), BIB_KOP_ADDS(sub))
#define BIB_KOP_AND(a, b) BIB_KOP_CAT(BIB_KOP_AND_, BIB_KOP_CAT(a, b))
#define BIB_KOP_AND_00 0
#define BIB_KOP_AND_01 0
#define BIB_KOP_AND_10 0
#define BIB_KOP_AND_11 1
#define BIB_UNARY_USE(x) BIB_UNARY_##x
#define BIB_BINARY_USE(x) BIB_BINARY_##x
#define BIB_REDUCE_USE(x) BIB_REDUCE_##x
#define BIB_STRIDED_USE(x) BIB_STRIDED_##x
#define BIB_TAKE_USE(x) BIB_TAKE_##x
#define BIB_ARGMAX_USE(x) BIB_ARGMAX_##x

/* The sub-operation of a KOP row as a number: its member of the kernel's
 * enum (bib_act_t, bib_unary_t, ...), 0 for kernels without one. */
#define BIB_KOP_SUB(kernel, sub)                                                                   \
    (0 BIB_KOP_WHEN(BIB_KOP_IS(MATMUL, kernel))(+BIB_ACT_##sub) BIB_KOP_WHEN(                      \
        BIB_KOP_IS(UNARY, kernel))(                                                                \
        +BIB_UNARY_##sub) BIB_KOP_WHEN(BIB_KOP_IS(BINARY, kernel))(+BIB_BINARY_##sub)              \
         BIB_KOP_WHEN(BIB_KOP_IS(REDUCE, kernel))(+BIB_REDUCE_##sub) BIB_KOP_WHEN(                 \
             BIB_KOP_IS(ATTENTION, kernel))(                                                       \
             +BIB_ATTENTION_##sub) BIB_KOP_WHEN(BIB_KOP_IS(STRIDED, kernel))(+BIB_STRIDED_##sub)   \
             BIB_KOP_WHEN(BIB_KOP_IS(TAKE, kernel))(+BIB_TAKE_##sub) BIB_KOP_WHEN(                 \
                 BIB_KOP_IS(ARGMAX, kernel))(+BIB_ARGMAX_##sub)                                    \
                 BIB_KOP_WHEN(BIB_KOP_IS(SOFTMAX, kernel))(+BIB_SOFTMAX_##sub) BIB_KOP_WHEN(       \
                     BIB_KOP_IS(LAYERNORM, kernel))(+BIB_LAYERNORM_##sub)                          \
                     BIB_KOP_WHEN(BIB_KOP_IS(COMPARE, kernel))(+BIB_COMPARE_##sub)                 \
                         BIB_KOP_WHEN(BIB_KOP_IS(LOGIC, kernel))(+BIB_LOGIC_##sub)                 \
                             BIB_KOP_WHEN(BIB_KOP_IS(POOL, kernel))(+BIB_POOL_##sub)               \
                                 BIB_KOP_WHEN(BIB_KOP_IS(BATCHNORM, kernel))(+BIB_ACT_##sub)       \
                                     BIB_KOP_WHEN(BIB_KOP_IS(ARGSORT, kernel))(+BIB_ARGMAX_##sub))

/* Elementwise unary opcodes, in row order: the GLSL (shaders/vulkan/
 * common.glsl bib_unary) and CUDA (shaders/cuda/common.cuh) kernels number
 * them so. */
typedef enum bib_unary {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_ADDS_IN(UNARY, kernel, sub))(BIB_UNARY_##sub, )
#include "isa/opcodes.def"
    BIB_UNARY__COUNT
} bib_unary_t;

/* Elementwise binary opcodes (with in1 broadcast), in row order. */
typedef enum bib_binary {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_ADDS_IN(BINARY, kernel, sub))(BIB_BINARY_##sub, )
#include "isa/opcodes.def"
    BIB_BINARY__COUNT
} bib_binary_t;

/* Reductions along the last axis, in row order. */
typedef enum bib_reduce {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_ADDS_IN(REDUCE, kernel, sub))(BIB_REDUCE_##sub, )
#include "isa/opcodes.def"
    BIB_REDUCE__COUNT
} bib_reduce_t;

/* The strided copies (STRIDED's sub): the VM's rule for the result's shape
 * and the call's p[]; the kernel runs them all alike. */
typedef enum bib_strided {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_ADDS_IN(STRIDED, kernel, sub))(BIB_STRIDED_##sub, )
#include "isa/opcodes.def"
    BIB_STRIDED__COUNT
} bib_strided_t;

/* The index rules of TAKE's opcodes: the VM's shape rule and p[]. */
typedef enum bib_take {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_ADDS_IN(TAKE, kernel, sub))(BIB_TAKE_##sub, )
#include "isa/opcodes.def"
    BIB_TAKE__COUNT
} bib_take_t;

/* ARGMAX's comparison: the first maximum or the first minimum. */
typedef enum bib_argmax {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_ADDS_IN(ARGMAX, kernel, sub))(BIB_ARGMAX_##sub, )
#include "isa/opcodes.def"
    BIB_ARGMAX__COUNT
} bib_argmax_t;

/* Elementwise comparisons (i32 0/1 results, in1 broadcast), in row order. */
typedef enum bib_compare {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_IS(COMPARE, kernel))(BIB_COMPARE_##sub, )
#include "isa/opcodes.def"
    BIB_COMPARE__COUNT
} bib_compare_t;

/* Logic on i32 truth values (x != 0), in row order: NOT takes one input. */
typedef enum bib_logic {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_IS(LOGIC, kernel))(BIB_LOGIC_##sub, )
#include "isa/opcodes.def"
    BIB_LOGIC__COUNT
} bib_logic_t;

/* Pooling windows (POOL), in row order. */
typedef enum bib_pool {
#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_IS(POOL, kernel))(BIB_POOL_##sub, )
#include "isa/opcodes.def"
    BIB_POOL__COUNT
} bib_pool_t;

/* CUMSUM's flags, the opcode's IMM c (BIB_SHAPE_SCAN). */
typedef enum bib_scan_flags {
    BIB_SCAN_EXCLUSIVE = 1, /* each sum leaves out its own element: the first is +0 (0) */
    BIB_SCAN_REVERSE = 2,   /* from the last element back to the first */
    BIB_SCAN__ALL = 3
} bib_scan_flags_t;

/* Whether BINARY's sub op has an i32 form (wrapping add, sub and mul;
 * division truncated toward zero that traps on a zero divisor; signed min
 * and max). The other subs take f32 only. */
static inline int bib_binary_i32(uint32_t op) {
    switch ((bib_binary_t)op) {
    case BIB_BINARY_ADD:
    case BIB_BINARY_SUB:
    case BIB_BINARY_MUL:
    case BIB_BINARY_DIV:
    case BIB_BINARY_MIN:
    case BIB_BINARY_MAX:
        return 1;
    case BIB_BINARY_POW:
    case BIB_BINARY__COUNT: /* not an op; -Wswitch names a binary op left out */
        break;
    }
    return 0;
}

/* Whether UNARY's sub op has an i32 form (abs and neg, wrapping: INT32_MIN
 * stays INT32_MIN). The other subs take f32 only. */
static inline int bib_unary_i32(uint32_t op) {
    return op == BIB_UNARY_ABS || op == BIB_UNARY_NEG;
}

/* ---- the kernels ------------------------------------------------------------- */

typedef enum bib_kernel {
#define KERNEL(name, dtype, shape, args, cost, per_element, subs, executors, contract)             \
    BIB_KERNEL_##name,
#include "isa/kernels.def"
#undef KERNEL
    BIB_KERNEL__COUNT
} bib_kernel_t;

typedef struct bib_kernel_info {
    const char *name;
    bib_dtype_rule_t dtype;
    bib_shape_rule_t shape;
    bib_args_rule_t args;
    bib_cost_form_t cost;
    uint32_t per_element;
    uint32_t subs;
    uint32_t executors; /* BIB_RUNS_ON_* */
    const char *contract;
} bib_kernel_info_t;

extern const bib_kernel_info_t bib_kernel_table[BIB_KERNEL__COUNT];

/* Whether executor id has kernel k (the descriptor's word, which the build
 * checks against every executor's table). */
/* Whether sub op of kernel k has an i32 form (BIB_DTYPES_F32_OR_I32). */
static inline int bib_sub_i32(bib_kernel_t k, uint32_t op) {
    return k == BIB_KERNEL_BINARY  ? bib_binary_i32(op)
           : k == BIB_KERNEL_UNARY ? bib_unary_i32(op)
                                   : k == BIB_KERNEL_CUMSUM;
}

static inline int bib_kernel_runs_on(bib_kernel_t k, bib_executor_id_t id) {
    return (unsigned)k < BIB_KERNEL__COUNT && (bib_kernel_table[k].executors >> id) & 1u;
}

#endif
