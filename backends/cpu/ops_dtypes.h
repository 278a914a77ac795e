/* backends/cpu/ops_dtypes.h: the CPU executor's dtype kernels (internal
 * header): CAST, COMPARE, WHERE, LOGIC and BINARY on i32 operands, one
 * scalar reference for every SIMD level (ops_dtypes.c). */
#ifndef BIB_CPU_OPS_DTYPES_H
#define BIB_CPU_OPS_DTYPES_H

#include <stdint.h>

#include "backends/cpu/bmath.h"
#include "backends/cpu/ops.h"

/* CAST's conversions (spec/numerics.md "Dtypes"): f32 -> i32 toward zero,
 * NaN 0, saturating at the i32 limits; i32 -> f32 nearest even. */
int32_t bib_cast_f32_i32(float x);
float bib_cast_i32_f32(int32_t x);

/* Whether the call is one these kernels take (the GPU executors' rules). */
bool bib_cpu_dtypes_supports(const bib_call_t *call);
/* Runs a CAST, COMPARE, WHERE or LOGIC call, or a BINARY call on i32; an i32
 * division by zero returns BIB_E_TRAP with ctx->error set and writes
 * nothing. */
bib_status_t bib_cpu_dtypes_run(const bib_cpu_ctx_t *ctx, const bib_call_t *call);

#endif
