// shaders/cuda/elementwise.cu: UNARY, SCALE, BINARY (with in1 broadcast),
// TRANSPOSE, GATHER and RNG. Elementwise kernels walk a grid-stride loop of
// 64-bit indices, one element per step, so any grid size gives the same
// result; each element depends on that element alone (in place is allowed).
// FILL and COPY are driver memset/memcpy calls (cu_kernels.c): they move bits.
#include "shaders/cuda/common.cuh"

using namespace bibcu;

namespace {

// UNARY: out[i] = op(in0[i]); n[0] = element count. Every op returns its
// NaN canonical already (bmath.h), so no canon here, as on the CPU.
template <int OP> __device__ __forceinline__ void unary_all(const bib_cu_args_t &a) {
    const float *x = f32(a.in0);
    float *y = f32(a.out);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride())
        y[i] = unary<OP>(x[i]);
}

// SCALE: out[i] = canon(in0[i] * s); u[0] = s bits.
__device__ __forceinline__ void scale_all(const bib_cu_args_t &a) {
    const float *x = f32(a.in0);
    float *y = f32(a.out);
    const float s = __uint_as_float(a.u[0]);
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride())
        y[i] = canon(__fmul_rn(x[i], s));
}

enum { BINARY_ADD, BINARY_SUB, BINARY_MUL, BINARY_DIV, BINARY_POW, BINARY_MIN, BINARY_MAX };
// in1's form: the same shape, a row over in0's last axis, one element.
enum { FORM_SAME, FORM_ROW, FORM_ONE };

// BINARY: out[i] = canon(in0[i] op in1[j]); n[0] = element count, n[1] = row
// length (FORM_ROW: j = i % n[1]).
template <int OP, int FORM> __device__ __forceinline__ void binary_all(const bib_cu_args_t &a) {
    const float *x = f32(a.in0), *b = f32(a.in1);
    float *y = f32(a.out);
    const uint64_t row = a.n[1];
    for (uint64_t i = first_index(); i < a.n[0]; i += grid_stride()) {
        uint64_t j = FORM == FORM_SAME ? i : FORM == FORM_ROW ? i % row : 0;
        float u = x[i], v = b[j], r;
        if (OP == BINARY_ADD)
            r = __fadd_rn(u, v);
        else if (OP == BINARY_SUB)
            r = __fsub_rn(u, v);
        else if (OP == BINARY_MUL)
            r = __fmul_rn(u, v);
        else if (OP == BINARY_DIV)
            r = __fdiv_rn(u, v);
        else if (OP == BINARY_POW)
            r = pow_(u, v);
        else if (OP == BINARY_MIN)
            r = min2_(u, v);
        else
            r = max2_(u, v);
        y[i] = canon(r);
    }
}

// STRIDED: a copy of raw 32-bit words. Output element e, at index
// (i0..i5) of the output padded to rank 6 in front (n[0..5]), is
// in0[s[0] + sum i_k s[1+k]], or where i_{s[14]} >= s[15]
// in1[s[7] + sum i_k s[8+k]] (backends/callcheck.c checked every index).
// I is the index type of the decomposition: 32-bit when the output has
// fewer than 2^32 elements (64-bit division is slow on the device).
template <typename I> __device__ __forceinline__ void strided_all(const bib_cu_args_t &a) {
    const uint32_t *x0 = u32(a.in0), *x1 = u32(a.in1);
    uint32_t *y = u32(a.out);
    uint64_t total = 1;
#pragma unroll
    for (int k = 0; k < 6; k++)
        total *= a.n[k];
    for (uint64_t e = first_index(); e < total; e += grid_stride()) {
        int64_t i[6];
        I rem = static_cast<I>(e);
#pragma unroll
        for (int k = 5; k >= 0; k--) {
            const I d = static_cast<I>(a.n[k]);
            i[k] = static_cast<int64_t>(rem % d);
            rem /= d;
        }
        const bool second = i[a.s[14]] >= a.s[15];
        const int64_t *p = second ? a.s + 7 : a.s;
        int64_t at = p[0];
#pragma unroll
        for (int k = 0; k < 6; k++)
            at += i[k] * p[1 + k];
        y[e] = second ? x1[at] : x0[at];
    }
}

// TAKE (GATHER_AXIS, GATHER_ELEMENTS): output element e, at index (i0..i5)
// of the output padded to rank 6 (n[0..5]), is in0[sum i_k s[k] + j s[12]]
// with j = in1[sum i_k s[6+k]] (i32), plus s[13] when negative. The VM
// checked every index; the clamp only keeps a bad direct call in the buffer.
template <typename I> __device__ __forceinline__ void take_all(const bib_cu_args_t &a) {
    const uint32_t *x = u32(a.in0);
    const int32_t *idx = i32(a.in1);
    uint32_t *y = u32(a.out);
    uint64_t total = 1;
#pragma unroll
    for (int k = 0; k < 6; k++)
        total *= a.n[k];
    for (uint64_t e = first_index(); e < total; e += grid_stride()) {
        I rem = static_cast<I>(e);
        int64_t at0 = 0, at1 = 0;
#pragma unroll
        for (int k = 5; k >= 0; k--) {
            const I d = static_cast<I>(a.n[k]);
            const int64_t i = static_cast<int64_t>(rem % d);
            rem /= d;
            at0 += i * a.s[k];
            at1 += i * a.s[6 + k];
        }
        int64_t j = idx[at1];
        if (j < 0)
            j += a.s[13];
        j = j < 0 ? 0 : j >= a.s[13] ? a.s[13] - 1 : j;
        y[e] = x[at0 + j * a.s[12]];
    }
}

} // namespace

#define BIB_EW_KERNEL(name, body)                                                                  \
    extern "C" __global__ void __launch_bounds__(256) name(const bib_cu_args_t a) {                \
        body;                                                                                      \
    }

// One kernel per elementwise unary opcode (its KOP row, isa/opcodes.def).
#define BIB_CU_UNARY_ROW(id, symbol) BIB_EW_KERNEL(symbol, unary_all<BIB_##id>(a))
#include "backends/cuda/cu_unary_rows.h"
#undef BIB_CU_UNARY_ROW
BIB_EW_KERNEL(bib_scale, scale_all(a))

#define BIB_BINARY_KERNELS(opname, op)                                                             \
    BIB_EW_KERNEL(bib_binary_##opname##_same, (binary_all<op, FORM_SAME>(a)))                      \
    BIB_EW_KERNEL(bib_binary_##opname##_row, (binary_all<op, FORM_ROW>(a)))                        \
    BIB_EW_KERNEL(bib_binary_##opname##_one, (binary_all<op, FORM_ONE>(a)))

BIB_BINARY_KERNELS(add, BINARY_ADD)
BIB_BINARY_KERNELS(sub, BINARY_SUB)
BIB_BINARY_KERNELS(mul, BINARY_MUL)
BIB_BINARY_KERNELS(div, BINARY_DIV)
BIB_BINARY_KERNELS(pow, BINARY_POW)
BIB_BINARY_KERNELS(min, BINARY_MIN)
BIB_BINARY_KERNELS(max, BINARY_MAX)

// TRANSPOSE: out[b][c][r] = in0[b][r][c] as raw 32-bit words through a
// 32 x 33 shared tile, so reads and writes are both coalesced.
// n[0] = batch, n[1] = rows, n[2] = cols. Block (32, 8); grid
// (ceil(cols/32), ceil(rows/32), min(batch, 65535)), batches strided by gridDim.z.
extern "C" __global__ void __launch_bounds__(256) bib_transpose(const bib_cu_args_t a) {
    __shared__ uint32_t tile[32][33];
    const uint64_t batch = a.n[0], rows = a.n[1], cols = a.n[2];
    const uint32_t *x = u32(a.in0);
    uint32_t *y = u32(a.out);
    const uint64_t c0 = static_cast<uint64_t>(blockIdx.x) * 32,
                   r0 = static_cast<uint64_t>(blockIdx.y) * 32;
    const uint32_t tx = threadIdx.x, ty = threadIdx.y;
    for (uint64_t b = blockIdx.z; b < batch; b += gridDim.z) {
        const uint64_t base = b * rows * cols;
        for (uint32_t k = ty; k < 32; k += 8) {
            uint64_t r = r0 + k, c = c0 + tx;
            if (r < rows && c < cols)
                tile[k][tx] = x[base + r * cols + c];
        }
        __syncthreads();
        for (uint32_t k = ty; k < 32; k += 8) {
            uint64_t c = c0 + k, r = r0 + tx;
            if (r < rows && c < cols)
                y[base + c * rows + r] = tile[tx][k];
        }
        __syncthreads();
    }
}

// GATHER: out[r][w] = in0[in1[r]][w] as raw words; n[0] = index count,
// n[1] = row width (words). The host has checked every index (the error
// must come back from this very call), so none is out of range here.
extern "C" __global__ void __launch_bounds__(256) bib_gather(const bib_cu_args_t a) {
    const uint32_t *table = u32(a.in0);
    const int32_t *idx = i32(a.in1);
    uint32_t *y = u32(a.out);
    const uint64_t width = a.n[1], total = a.n[0] * width;
    for (uint64_t e = first_index(); e < total; e += grid_stride()) {
        uint64_t r = e / width, w = e % width;
        y[e] = table[static_cast<uint64_t>(idx[r]) * width + w];
    }
}

// RNG: Philox4x32-10 (bib_cpu_philox4x32_10). Element e takes word e % 4 of
// the block for counter (e / 4 as 64 bits, stream as 64 bits) and key seed;
// value = float(word >> 8) * 2^-24, both steps exact. One thread per block
// of four; n[0] = element count, u[0..1] = seed low/high, u[2..3] = stream.
extern "C" __global__ void __launch_bounds__(256) bib_rng(const bib_cu_args_t a) {
    float *y = f32(a.out);
    const uint64_t n = a.n[0], blocks = (n + 3) / 4;
    for (uint64_t blk = first_index(); blk < blocks; blk += grid_stride()) {
        uint32_t c0 = static_cast<uint32_t>(blk), c1 = static_cast<uint32_t>(blk >> 32);
        uint32_t c2 = a.u[2], c3 = a.u[3];
        uint32_t k0 = a.u[0], k1 = a.u[1];
#pragma unroll
        for (int round = 0; round < 10; round++) {
            uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
            uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
            uint32_t n0 = hi1 ^ c1 ^ k0;
            uint32_t n2 = hi0 ^ c3 ^ k1;
            c0 = n0;
            c1 = lo1;
            c2 = n2;
            c3 = lo0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const uint32_t w[4] = {c0, c1, c2, c3};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint64_t e = 4 * blk + j;
            if (e < n)
                y[e] = __fmul_rn(static_cast<float>(w[j] >> 8), 0x1p-24f);
        }
    }
}
BIB_EW_KERNEL(bib_strided, if (a.u[0]) strided_all<uint64_t>(a); else strided_all<uint32_t>(a))
BIB_EW_KERNEL(bib_take, if (a.u[0]) take_all<uint64_t>(a); else take_all<uint32_t>(a))
