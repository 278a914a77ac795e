// shaders/cuda/dtypes.cu: CAST, COMPARE, WHERE, LOGIC, and BINARY and UNARY
// on i32 operands (spec/numerics.md "Dtypes"), the CPU reference's
// (backends/cpu/ops_dtypes.c) element functions operation for operation.
// Each walks a grid-stride loop of 64-bit indices, one element per step,
// so any grid gives the same result; each element depends on its own
// inputs alone (in place is allowed). Every kernel takes n[0] = element
// count, n[1] = in0's last axis, u[0] = the sub-operation, u[1] and u[2] =
// the form of in1 and in2 against in0 (FORM_SAME, FORM_ROW, FORM_ONE).
#include "shaders/cuda/common.cuh"

using namespace bibcu;

namespace {

enum { FORM_SAME, FORM_ROW, FORM_ONE };

__device__ __forceinline__ uint64_t form_index(uint32_t form, uint64_t i, uint64_t row) {
    return form == FORM_SAME ? i : form == FORM_ROW ? i % row : 0;
}

// f32 -> i32: toward zero, NaN 0, saturating.
__device__ __forceinline__ int32_t cast_f2i(float x) {
    if (x != x)
        return 0;
    if (x >= 0x1p31f)
        return INT32_MAX;
    if (x <= -0x1p31f)
        return INT32_MIN;
    return __float2int_rz(x); // in range: exact truncation
}

template <typename T> __device__ __forceinline__ int32_t compare(uint32_t op, T a, T b) {
    switch (op) {
    case BIB_COMPARE_EQ:
        return a == b;
    case BIB_COMPARE_LT:
        return a < b;
    case BIB_COMPARE_LE:
        return a <= b;
    case BIB_COMPARE_GT:
        return a > b;
    default: // BIB_COMPARE_GE
        return a >= b;
    }
}

// bib_binary_t on i32 (the subs bib_binary_i32 names): ADD, SUB, MUL wrap;
// DIV toward zero (the host has refused a zero divisor; -1 negates, wrapping
// INT32_MIN to itself); MIN and MAX signed.
__device__ __forceinline__ int32_t binary_i32(uint32_t op, int32_t a, int32_t b) {
    uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
    switch (op) {
    case BIB_BINARY_ADD:
        return static_cast<int32_t>(ua + ub);
    case BIB_BINARY_SUB:
        return static_cast<int32_t>(ua - ub);
    case BIB_BINARY_MUL:
        return static_cast<int32_t>(ua * ub);
    case BIB_BINARY_DIV:
        if (b == 0)
            return 0;
        return b == -1 ? static_cast<int32_t>(0u - ua) : a / b;
    case BIB_BINARY_MIN:
        return a < b ? a : b;
    case BIB_BINARY_MAX:
        return a > b ? a : b;
    default:
        return 0;
    }
}

} // namespace

// CAST: u[0] = 0 f32 -> i32, 1 i32 -> f32, 2 the same dtype (bits copied).
extern "C" __global__ void __launch_bounds__(256) bib_cast(const bib_cu_args_t a) {
    const uint32_t *x = u32(a.in0);
    uint32_t *y = u32(a.out);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride()) {
        uint32_t w = x[i];
        if (a.u[0] == 0)
            w = static_cast<uint32_t>(cast_f2i(__uint_as_float(w)));
        else if (a.u[0] == 1)
            w = __float_as_uint(__int2float_rn(static_cast<int32_t>(w)));
        y[i] = w;
    }
}

// COMPARE: u[3] = 1 for i32 operands, 0 for f32 (IEEE compares: NaN false,
// -0 == +0).
extern "C" __global__ void __launch_bounds__(256) bib_compare(const bib_cu_args_t a) {
    const uint32_t *x = u32(a.in0), *b = u32(a.in1);
    int32_t *y = i32(a.out);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride()) {
        uint32_t u = x[i], v = b[form_index(a.u[1], i, a.n[1])];
        y[i] = a.u[3] ? compare(a.u[0], static_cast<int32_t>(u), static_cast<int32_t>(v))
                      : compare(a.u[0], __uint_as_float(u), __uint_as_float(v));
    }
}

// WHERE: out = in0 != 0 ? in1 : in2, raw words.
extern "C" __global__ void __launch_bounds__(256) bib_where(const bib_cu_args_t a) {
    const uint32_t *cond = u32(a.in0), *x = u32(a.in1), *z = u32(a.in2);
    uint32_t *y = u32(a.out);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride())
        y[i] = cond[i] != 0 ? x[form_index(a.u[1], i, a.n[1])] : z[form_index(a.u[2], i, a.n[1])];
}

// LOGIC: bib_logic_t NOT (in0 only), AND, OR, XOR on truth values.
extern "C" __global__ void __launch_bounds__(256) bib_logic(const bib_cu_args_t a) {
    const int32_t *x = i32(a.in0), *b = i32(a.in1);
    int32_t *y = i32(a.out);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride()) {
        bool p = x[i] != 0;
        if (a.u[0] == BIB_LOGIC_NOT) {
            y[i] = !p;
            continue;
        }
        bool q = b[form_index(a.u[1], i, a.n[1])] != 0;
        y[i] = a.u[0] == BIB_LOGIC_AND ? (p && q) : a.u[0] == BIB_LOGIC_OR ? (p || q) : (p != q);
    }
}

// BINARY on i32 operands.
extern "C" __global__ void __launch_bounds__(256) bib_binary_i32(const bib_cu_args_t a) {
    const int32_t *x = i32(a.in0), *b = i32(a.in1);
    int32_t *y = i32(a.out);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride())
        y[i] = binary_i32(a.u[0], x[i], b[form_index(a.u[1], i, a.n[1])]);
}

// UNARY on i32 operands: u[0] = BIB_UNARY_ABS or BIB_UNARY_NEG, wrapping
// (INT32_MIN stays INT32_MIN).
extern "C" __global__ void __launch_bounds__(256) bib_unary_i32(const bib_cu_args_t a) {
    const uint32_t *x = u32(a.in0);
    uint32_t *y = u32(a.out);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride()) {
        uint32_t w = x[i];
        y[i] = a.u[0] == BIB_UNARY_NEG || static_cast<int32_t>(w) < 0 ? 0u - w : w;
    }
}
