// shaders/cuda/matmul.cu: MATMUL, out[M,N] = in0[M,K] . in1[K,N] (+ in2[N]) then act,
// with the bits of backends/cpu/gemm.h:
//
//     acc = +0.0f; for p = 0 .. K-1 ascending: acc = fma(A[i][p], B[p][j], acc);
//     if (bias) acc = acc + bias[j];  acc = canon(acc);  acc = act(acc).
//
// A register-tiled SGEMM: a block computes a BM x BN tile of C with
// (BM/TM) x (BN/TN) threads, each thread a TM x TN block of accumulators in
// registers. K advances in slices of BK through STAGES shared-memory
// buffers filled by cp.async (sm_80 and newer; sm_75 copies through
// registers): while the block multiplies slice t, the copies of slices t+1
// .. t+STAGES-1 are in flight, and one barrier per slice both publishes
// slice t and frees the buffer the next copy overwrites. Tiles cut only M
// and N, and each accumulator stays in its register from k = 0 to K-1, so
// every output is the contract's one fma chain in k order.
//
// The last slice is padded past K with A = -0 and B = +0 (copied from the
// pad words below, never zero-filled, which would give +0 for A): their
// product is -0, and fma(-0, +0, acc) == acc for every acc (-0 is the exact
// additive identity: +0 + -0 == +0, -0 + -0 == -0, NaN and Inf pass), so
// padded steps change no bit and the inner loop needs no bound. Rows and
// columns past M and N compute values that are never stored.
//
// VEC kernels copy B and write C as float4 (N % 4 == 0, K % 4 == 0, 16-byte
// aligned bases); the others copy and write single floats. A is always
// copied in single floats, transposed into As[k][m] so the multiply reads
// float4 fragments along m.
// Parameters: in0 = A, in1 = B, in2 = bias or 0, out = C; n[0] = M,
// n[1] = N, n[2] = K; u[0] = 1 when there is a bias. Grid
// (ceil(N/BN), ceil(M/BM)), remapped so that groups of 8 block-rows sweep
// the columns together (better L2 reuse of B; no effect on any bit).
#include "shaders/cuda/common.cuh"

using namespace bibcu;

namespace {

enum { ACT_NONE, ACT_RELU, ACT_GELU, ACT_GELU_ERF };

// What padded slices copy: A's -0 and B's +0 (see the top of this file).
__device__ __align__(16) float bib_mm_pad_a[4] = {-0.0f, -0.0f, -0.0f, -0.0f};
__device__ __align__(16) float bib_mm_pad_b[4] = {0.0f, 0.0f, 0.0f, 0.0f};

// Global to shared copies that complete asynchronously on sm_80 and newer
// (cp.async, waited for by wait_copies), synchronously on sm_75. The host
// emulator (BIB_CU_EMULATE, backends/cuda/testing) models the sm_80 path.
__device__ __forceinline__ void copy4(float *dst, const float *src) {
#if defined(BIB_CU_EMULATE)
    bib_cu_emu_cp_async(dst, src, 4);
#elif __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
                 "l"(__cvta_generic_to_global(src)));
#else
    *dst = *src;
#endif
}

__device__ __forceinline__ void copy16(float *dst, const float *src) {
#if defined(BIB_CU_EMULATE)
    bib_cu_emu_cp_async(dst, src, 16);
#elif __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                     static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
                 "l"(__cvta_generic_to_global(src)));
#else
    *reinterpret_cast<float4 *>(dst) = *reinterpret_cast<const float4 *>(src);
#endif
}

__device__ __forceinline__ void commit_copies() {
#if defined(BIB_CU_EMULATE)
    bib_cu_emu_cp_commit();
#elif __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most PENDING of this thread's committed groups are in flight.
template <int PENDING> __device__ __forceinline__ void wait_copies() {
#if defined(BIB_CU_EMULATE)
    bib_cu_emu_cp_wait(PENDING);
#elif __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
#endif
}

template <int BM, int BN, int BK, int TM, int TN, int STAGES, bool VEC, int ACT>
__device__ __forceinline__ void matmul_tile(const bib_cu_args_t &a) {
    constexpr int TX = BN / TN, TY = BM / TM, NT = TX * TY;
    constexpr int GM = TM / 4, GN = TN / 4;     // float4 groups per thread
    constexpr int SM_ = BM / GM, SN_ = BN / GN; // stride between a thread's groups
    constexpr int AP = BM + 4;                  // padded row of As (see the store)
    constexpr int A_LOADS = BM * BK / 4 / NT;   // 4-float groups of A per thread per slice
    constexpr int B_LOADS = BK * BN / 4 / NT;   // 4-float groups of B per thread per slice
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are float4 groups");
    static_assert(A_LOADS >= 1 && A_LOADS * 4 * NT == BM * BK, "A slice splits evenly");
    static_assert(B_LOADS >= 1 && B_LOADS * 4 * NT == BK * BN, "B slice splits evenly");
    static_assert(TY * 4 == SM_ && TX * 4 == SN_, "groups tile the block");
    static_assert(STAGES >= 2, "one slice in flight while another is multiplied");

    // Static shared memory up to the 48 KiB every kernel gets; past it the
    // launch's dynamic shared memory, which the host opts the kernel into
    // (cuFuncSetAttribute) and sizes as STAGES * BK * (BM + 4 + BN) floats.
    constexpr bool DYNAMIC = STAGES * BK * (AP + BN) * 4 > 48 * 1024;
    float(*As)[BK][AP];
    float(*Bs)[BK][BN];
    if constexpr (DYNAMIC) {
        BIB_CU_DYNAMIC_SHARED(float, mm_smem);
        As = reinterpret_cast<float(*)[BK][AP]>(mm_smem);
        Bs = reinterpret_cast<float(*)[BK][BN]>(mm_smem + STAGES * BK * AP);
    } else {
        __shared__ __align__(16) float as_[STAGES][BK][AP];
        __shared__ __align__(16) float bs_[STAGES][BK][BN];
        As = as_;
        Bs = bs_;
    }

    // 32-bit sizes (bib_cu_supports bounds them) keep registers for the tile.
    const uint32_t M = static_cast<uint32_t>(a.n[0]), N = static_cast<uint32_t>(a.n[1]),
                   K = static_cast<uint32_t>(a.n[2]);
    const float *__restrict__ A = f32(a.in0);
    const float *__restrict__ B = f32(a.in1);
    const float *__restrict__ bias = a.u[0] ? f32(a.in2) : nullptr;
    float *__restrict__ C = f32(a.out);

    // Grouped block order.
    const uint64_t grid_n = gridDim.x, grid_m = gridDim.y;
    const uint64_t pid = static_cast<uint64_t>(blockIdx.y) * grid_n + blockIdx.x;
    const uint64_t group = pid / (8 * grid_n), first_m = group * 8;
    const uint64_t gsize = grid_m - first_m < 8 ? grid_m - first_m : 8;
    const uint64_t local = pid - group * 8 * grid_n;
    const uint32_t m0 = static_cast<uint32_t>((first_m + local % gsize) * BM),
                   n0 = static_cast<uint32_t>((local / gsize) * BN);

    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;

    // This thread's share of each slice: A rows (a_row[q]) at k offsets
    // a_k[q], B rows b_row[q] at column offsets b_col[q].
    int a_row[A_LOADS], a_k[A_LOADS], b_row[B_LOADS], b_col[B_LOADS];
#pragma unroll
    for (int q = 0; q < A_LOADS; q++) {
        int f = tid + q * NT;
        a_row[q] = f / (BK / 4);
        a_k[q] = (f % (BK / 4)) * 4;
    }
#pragma unroll
    for (int q = 0; q < B_LOADS; q++) {
        int f = tid + q * NT;
        b_row[q] = f / (BN / 4);
        b_col[q] = (f % (BN / 4)) * 4;
    }

    // Copies slice k0 into buffer buf: A transposed (As[k][m], rows padded
    // by 4 so the two k groups of a warp's transposing copies use different
    // banks), B as it is.
    auto copy_slice = [&](uint32_t k0, int buf) {
#pragma unroll
        for (int q = 0; q < A_LOADS; q++) {
            const uint32_t gm = m0 + a_row[q], gk = k0 + a_k[q];
            const float *src = A + static_cast<uint64_t>(gm) * K + gk;
            float *dst = &As[buf][a_k[q]][a_row[q]];
            if (VEC) {
                // K % 4 == 0: the group of 4 is all inside K or all past it.
                const float *from = gm < M && gk < K ? src : bib_mm_pad_a;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    copy4(dst + e * AP, from + e);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    copy4(dst + e * AP, gm < M && gk + e < K ? src + e : bib_mm_pad_a);
            }
        }
#pragma unroll
        for (int q = 0; q < B_LOADS; q++) {
            const uint32_t gk = k0 + b_row[q], gn = n0 + b_col[q];
            const float *src = B + static_cast<uint64_t>(gk) * N + gn;
            float *dst = &Bs[buf][b_row[q]][b_col[q]];
            if (VEC) {
                copy16(dst, gk < K && gn < N ? src : bib_mm_pad_b);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    copy4(dst + e, gk < K && gn + e < N ? src + e : bib_mm_pad_b);
            }
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.0f;

    // One commit group per slice index, empty past the last slice, so that
    // before slice t is waited for exactly t + STAGES - 1 groups exist and
    // "at most STAGES - 2 pending" means slice t has landed.
    const uint32_t slices = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (static_cast<uint32_t>(s) < slices)
            copy_slice(s * BK, s);
        commit_copies();
    }
    int buf = 0;
    for (uint32_t t = 0; t < slices; t++) {
        wait_copies<STAGES - 2>();
        // Publishes slice t to every thread, and every thread has finished
        // slice t-1, whose buffer the copy below overwrites.
        __syncthreads();
        const uint32_t next = t + STAGES - 1;
        if (next < slices)
            copy_slice(next * BK, buf == 0 ? STAGES - 1 : buf - 1);
        commit_copies();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float fa[TM], fb[TN];
#pragma unroll
            for (int g = 0; g < GM; g++) {
                float4 v = *reinterpret_cast<const float4 *>(&As[buf][kk][g * SM_ + ty * 4]);
                fa[g * 4 + 0] = v.x, fa[g * 4 + 1] = v.y, fa[g * 4 + 2] = v.z, fa[g * 4 + 3] = v.w;
            }
#pragma unroll
            for (int g = 0; g < GN; g++) {
                float4 v = *reinterpret_cast<const float4 *>(&Bs[buf][kk][g * SN_ + tx * 4]);
                fb[g * 4 + 0] = v.x, fb[g * 4 + 1] = v.y, fb[g * 4 + 2] = v.z, fb[g * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] = __fmaf_rn(fa[i], fb[j], acc[i][j]);
        }
        buf = buf == STAGES - 1 ? 0 : buf + 1;
    }
    wait_copies<0>();

    // Epilogue: bias (one add), canon, act; then store.
#pragma unroll
    for (int gi = 0; gi < GM; gi++) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t row = m0 + gi * SM_ + ty * 4 + i;
            if (row >= M)
                continue;
            float *crow = C + static_cast<uint64_t>(row) * N;
#pragma unroll
            for (int gj = 0; gj < GN; gj++) {
                const uint32_t col = n0 + gj * SN_ + tx * 4;
                float v[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float x = acc[gi * 4 + i][gj * 4 + j];
                    if (bias != nullptr && col + j < N)
                        x = __fadd_rn(x, bias[col + j]);
                    x = canon(x);
                    if (ACT == ACT_RELU)
                        x = relu_(x);
                    else if (ACT == ACT_GELU)
                        x = gelu_(x);
                    else if (ACT == ACT_GELU_ERF)
                        x = gelu_erf_(x);
                    v[j] = x;
                }
                if (VEC) {
                    if (col < N)
                        *reinterpret_cast<float4 *>(crow + col) =
                            make_float4(v[0], v[1], v[2], v[3]);
                } else {
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        if (col + j < N)
                            crow[col + j] = v[j];
                }
            }
        }
    }
}

} // namespace

// Big: 128 x 128 tiles, BK 16, 8 x 8 per thread, 256 threads, 2 stages
// (on the H100 at 4096: 43 TFLOP/s, against 37 for BK 8 in 3 stages, the
// former big configuration: half the barriers and copy waits per k).
// Small: 64 x 64, BK 16, 4 x 4 per thread, 256 threads, 2 stages, for
// problems that would leave most SMs idle with big tiles. Tile shapes
// change speed, never bits.
#define BIB_MATMUL_KERNEL_LB(name, bm, bn, bk, tm, tn, stages, vec, act, blocks)                   \
    extern "C" __global__ void __launch_bounds__(256, blocks) name(const bib_cu_args_t a) {        \
        matmul_tile<bm, bn, bk, tm, tn, stages, vec, act>(a);                                      \
    }
#define BIB_MATMUL_KERNEL(name, bm, bn, bk, tm, tn, stages, vec, act)                              \
    BIB_MATMUL_KERNEL_LB(name, bm, bn, bk, tm, tn, stages, vec, act, 2)

#define BIB_MATMUL_ACTS(prefix, bm, bn, bk, tm, tn, stages, vec)                                   \
    BIB_MATMUL_KERNEL(prefix##_none, bm, bn, bk, tm, tn, stages, vec, ACT_NONE)                    \
    BIB_MATMUL_KERNEL(prefix##_relu, bm, bn, bk, tm, tn, stages, vec, ACT_RELU)                    \
    BIB_MATMUL_KERNEL(prefix##_gelu, bm, bn, bk, tm, tn, stages, vec, ACT_GELU)                    \
    BIB_MATMUL_KERNEL(prefix##_gelu_erf, bm, bn, bk, tm, tn, stages, vec, ACT_GELU_ERF)

BIB_MATMUL_ACTS(bib_matmul_big_vec, 128, 128, 16, 8, 8, 2, true)
BIB_MATMUL_ACTS(bib_matmul_big_any, 128, 128, 16, 8, 8, 2, false)
BIB_MATMUL_ACTS(bib_matmul_small_vec, 64, 64, 16, 4, 4, 2, true)
BIB_MATMUL_ACTS(bib_matmul_small_any, 64, 64, 16, 4, 4, 2, false)

// Candidates for the big configuration, float4 paths without an activation
// only, chosen by BIB_CUDA_MATMUL_TILES=<name> (backends/cuda/cu_kernels.c
// lists them with their shared memory) so that one GPU run can time them
// beside the big kernel (`make gpu-check`'s cuda_tiles step). bk8: BK 8 in
// 3 stages, the former big configuration. m256: 256 x 128 tiles of 16 x 8
// per thread, one block per SM (registers past 128), BK 8 in 3 stages.
// Past 48 KiB of shared memory, untimed yet: k16s3, BK 16 in 3 stages;
// k32, BK 32 in 2 stages; m256k16, the 256 x 128 tile with BK 16 in 2
// stages. Same chains, same bits.
BIB_MATMUL_KERNEL(bib_matmul_tune_bk8_vec_none, 128, 128, 8, 8, 8, 3, true, ACT_NONE)
BIB_MATMUL_KERNEL_LB(bib_matmul_tune_m256_vec_none, 256, 128, 8, 16, 8, 3, true, ACT_NONE, 1)
BIB_MATMUL_KERNEL(bib_matmul_tune_k16s3_vec_none, 128, 128, 16, 8, 8, 3, true, ACT_NONE)
BIB_MATMUL_KERNEL(bib_matmul_tune_k32_vec_none, 128, 128, 32, 8, 8, 2, true, ACT_NONE)
BIB_MATMUL_KERNEL_LB(bib_matmul_tune_m256k16_vec_none, 256, 128, 16, 16, 8, 2, true, ACT_NONE, 1)
