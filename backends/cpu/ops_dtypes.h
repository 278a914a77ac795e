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
static inline int32_t bib_cast_f32_i32(float x) {
    /* Clamped into [-2^31, 2147483520] (NaN to 0) the conversion is exact
       truncation; 2^31 and above saturate after. No branch the compiler
       must keep, so the loop vectorizes. */
    float c = x == x ? x : 0.0f;
    c = c < -0x1p31f ? -0x1p31f : c;
    c = c > 0x1.fffffep30f ? 0x1.fffffep30f : c;
    int32_t r = (int32_t)c;
    return x >= 0x1p31f ? INT32_MAX : r;
}

static inline float bib_cast_i32_f32(int32_t x) {
    return (float)x; /* round to nearest even (the FPU's mode, never changed) */
}

/* Whether the call is one these kernels take (the GPU executors' rules). */
bool bib_cpu_dtypes_supports(const bib_call_t *call);
/* Runs a CAST, COMPARE, WHERE or LOGIC call, or a BINARY or UNARY call on
 * i32; an i32 division by zero returns BIB_E_TRAP with ctx->error set and
 * writes nothing. */
bib_status_t bib_cpu_dtypes_run(const bib_cpu_ctx_t *ctx, const bib_call_t *call);

#endif
