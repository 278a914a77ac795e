/* vm/tensor_ops.h: the cost of a tensor kernel call (internal).
 *
 * vm/tensor_ops.c owns what each tensor opcode means: for the opcodes that
 * run a kernel (the KOP and GKOP rows of isa/opcodes.def) the operand checks
 * by the kernel's dtype rule, the result's shape by its shape rule, the
 * call's scalars by its args rule, and the one cost model of a call: work for
 * fuel, flops for --profile, estimated operations for --backend=auto. This
 * header is that cost model, for the places that read it (vm/tensor.c,
 * vm/placement.c through it). It does not own residency, the choice of
 * executor or the run of the call (vm/tensor.c).
 */
#ifndef BIB_TENSOR_OPS_H
#define BIB_TENSOR_OPS_H

#include <stdint.h>

#include "backends/backend.h"

/* The cost of one call, from its shapes only (the same on every executor). */
typedef struct bib_tensor_cost {
    uint64_t work;  /* elements of work, for fuel (spec/isa.md "Fuel"): saturates */
    uint64_t flops; /* arithmetic of MATMUL and ATTENTION (2MNK, 4SHDT), 0 for the rest */
    double ops;     /* estimated operations, for --backend=auto's time model */
} bib_tensor_cost_t;

/* The cost of call by its kernel's cost form (isa/kernels.def). Reads the
 * views' shapes, and of their buffers only whether they are NULL (an unused
 * input). */
bib_tensor_cost_t bib_tensor_cost(const bib_call_t *call);

#endif
