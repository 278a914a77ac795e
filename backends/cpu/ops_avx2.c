/* backends/cpu/ops_avx2.c: the row functions for AVX2 + FMA (8 lanes).
 *
 * Only the vector primitives live here; the functions themselves are
 * ops_simd.h, shared with AVX-512, and give the scalar reference's bits.
 * Compiled with -mavx2 -mfma (Makefile); called only when cpufeatures says
 * the CPU has AVX2 and FMA.
 */
#include <immintrin.h>
#include <math.h>

#include "backends/cpu/bmath.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/unary.h"

typedef __m256 VF;
typedef __m256 VM;
typedef __m256i VI;

#define V_WIDTH 8
#define V_SUFFIX avx2
#define V_NAME "avx2"
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_STREAM(p, v) _mm256_stream_ps((p), (v)) /* p 32-byte aligned */
#define V_SET1(x) _mm256_set1_ps(x)
#define V_ZERO() _mm256_setzero_ps()
#define V_ADD _mm256_add_ps
#define V_SUB _mm256_sub_ps
#define V_MUL _mm256_mul_ps
#define V_DIV _mm256_div_ps
#define V_FMA _mm256_fmadd_ps
#define V_FNMA _mm256_fnmadd_ps
#define V_FMS _mm256_fmsub_ps
#define V_MIN _mm256_min_ps
#define V_MAX _mm256_max_ps
#define V_GT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OQ)
#define V_LT(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OQ)
#define V_GE(a, b) _mm256_cmp_ps((a), (b), _CMP_GE_OQ)
#define V_EQ(a, b) _mm256_cmp_ps((a), (b), _CMP_EQ_OQ)
#define V_UNORD(a, b) _mm256_cmp_ps((a), (b), _CMP_UNORD_Q)
#define V_SELECT(m, a, b) _mm256_blendv_ps((b), (a), (m))
#define V_AND_BITS(a, bits)                                                                        \
    _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32((int)(bits))))
#define V_OR_BITS(a, b) _mm256_or_ps((a), (b))
#define V_AND_MASK(a, m) _mm256_and_ps((a), (m))
#define V_TAILMASK(r)                                                                              \
    _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(r)),                            \
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))
#define V_ORDER_KEY(x)                                                                             \
    _mm256_xor_si256(_mm256_castps_si256(x),                                                       \
                     _mm256_srli_epi32(_mm256_srai_epi32(_mm256_castps_si256(x), 31), 1))
#define V_IMAX _mm256_max_epi32
#define V_IMIN _mm256_min_epi32
#define V_ISET1 _mm256_set1_epi32
#define V_MASK_NONE() _mm256_setzero_ps()
#define V_MASK_OR(a, b) _mm256_or_ps((a), (b))
#define V_MASK_AND(a, b) _mm256_and_ps((a), (b))
#define V_MASK_XOR(a, b) _mm256_xor_ps((a), (b))
#define V_MASK_ANY(m) (_mm256_movemask_ps(m) != 0)
#define V_MASK_ALL(m) (_mm256_movemask_ps(m) == 0xFF)
#define V_ROUND_FLOOR(x) _mm256_round_ps((x), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define V_ROUND_CEIL(x) _mm256_round_ps((x), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
#define V_ROUND_EVEN(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* Integer lanes (32 bits each) for the steps that work on a float's bits. */
#define V_BITS(v) _mm256_castps_si256(v)
#define V_FROM_BITS(i) _mm256_castsi256_ps(i)
#define V_ILOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_IADD _mm256_add_epi32
#define V_ISUB _mm256_sub_epi32
#define V_IAND _mm256_and_si256
#define V_IOR _mm256_or_si256
#define V_IXOR _mm256_xor_si256
#define V_ISLL _mm256_slli_epi32
#define V_ISRL _mm256_srli_epi32
#define V_ISRA _mm256_srai_epi32
#define V_ISLLV _mm256_sllv_epi32 /* a count of 32 or more gives 0 */
#define V_ISRLV _mm256_srlv_epi32
#define V_IMULLO _mm256_mullo_epi32
#define V_IMAXU _mm256_max_epu32
#define V_ICVT _mm256_cvtepi32_ps
#define V_FCVT_I _mm256_cvtps_epi32 /* exact for an integral float */
#define V_IEQ(a, b) _mm256_castsi256_ps(_mm256_cmpeq_epi32((a), (b)))
#define V_IGT(a, b) _mm256_castsi256_ps(_mm256_cmpgt_epi32((a), (b)))
#define V_IEQ01(a, b) _mm256_srli_epi32(_mm256_cmpeq_epi32((a), (b)), 31)
#define V_ISELECT(m, a, b)                                                                         \
    _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(b), _mm256_castsi256_ps(a), (m)))
#define V_ITABLE8(idx, table) _mm256_permutevar8x32_epi32((table), (idx))

/* The high 32 bits of each lane's 64-bit product a * b, unsigned. */
static inline __m256i avx2_imulhi_u32(__m256i a, __m256i b) {
    __m256i even = _mm256_mul_epu32(a, b);
    __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
    return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}
#define V_IMULHI_U32 avx2_imulhi_u32

/* exp's two exact power-of-two factors, built from the exponent bits. */
static inline __m256 avx2_scale2k(__m256 p, __m256 kf) {
    __m256i k = _mm256_cvtps_epi32(kf);
    __m256i k1 = _mm256_srai_epi32(k, 1);
    __m256i k2 = _mm256_sub_epi32(k, k1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* The tree's steps 4, 2, 1: p[i] + p[i + s], left operand the lower lane. */
static inline float avx2_hsum_tree(__m256 v) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

/* Partial rows use masked moves: masked-off lanes are neither read nor
 * written (and cannot fault), so a tail never touches memory past the row,
 * and no library call clobbers the accumulators held in registers. */
static inline __m256i avx2_lanes_below(size_t r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256 avx2_load_tail(const float *p, size_t r, float fill) {
    __m256i m = avx2_lanes_below(r);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}

static inline void avx2_store_tail(float *p, size_t r, __m256 v) {
    _mm256_maskstore_ps(p, avx2_lanes_below(r), v);
}

static inline int32_t avx2_imax_reduce(__m256i v) {
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(m);
}

/* Every lane the greatest of v's lanes by x86's max (which of +-0, and
 * whether a NaN survives, depends on the lanes' order). */
static inline __m256 avx2_hmax_all(__m256 v) {
    v = _mm256_max_ps(v, _mm256_permute2f128_ps(v, v, 0x01));
    v = _mm256_max_ps(v, _mm256_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm256_max_ps(v, _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Two short rows at a time (ops_simd.h's row groups): r[g] is row g's tree
 * lanes folded into one register (p[0 .. 8)). The tree's steps 4, 2, 1 run
 * on both rows together, p[i] + p[i + s] with the lower lane on the left as
 * in avx2_hsum_tree; row g's sum ends in lane 4 g. */
#define V_GROUP 2
#define V_EXP_LOCK 4 /* in step: half a row of 8 vectors (16 registers: some spill) */
static inline __m256 avx2_tree_group(const __m256 r[2]) {
    __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(r[0], r[1], 0x20),
                             _mm256_permute2f128_ps(r[0], r[1], 0x31));
    s = _mm256_add_ps(s, _mm256_permute_ps(s, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(s, _mm256_permute_ps(s, _MM_SHUFFLE(1, 1, 1, 1)));
}

/* The same shape with max: row g's greatest lane (as V_HMAX_ALL) in lane 4 g. */
static inline __m256 avx2_max_group(const __m256 r[2]) {
    __m256 s = _mm256_max_ps(_mm256_permute2f128_ps(r[0], r[1], 0x20),
                             _mm256_permute2f128_ps(r[0], r[1], 0x31));
    s = _mm256_max_ps(s, _mm256_permute_ps(s, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_max_ps(s, _mm256_permute_ps(s, _MM_SHUFFLE(1, 1, 1, 1)));
}

#define V_TREE_GROUP avx2_tree_group
#define V_MAX_GROUP avx2_max_group
#define V_BCAST_ROW(v, g) _mm256_permutevar8x32_ps((v), _mm256_set1_epi32(4 * (g)))
#define V_SQRT _mm256_sqrt_ps
#define V_HMAX_ALL avx2_hmax_all
#define V_SCALE2K avx2_scale2k
#define V_SCALE2K_DETOUR 1
#define V_IMAX_REDUCE avx2_imax_reduce
#define V_HSUM_TREE avx2_hsum_tree
#define V_LOAD_TAIL avx2_load_tail
#define V_LOAD_MASKZ(p, m) _mm256_maskload_ps((p), _mm256_castps_si256(m))
#define V_EVEN_LANES(a, b)                                                                         \
    _mm256_castpd_ps(_mm256_permute4x64_pd(                                                        \
        _mm256_castps_pd(_mm256_shuffle_ps((a), (b), _MM_SHUFFLE(2, 0, 2, 0))),                    \
        _MM_SHUFFLE(3, 1, 2, 0)))
#define V_GATHER_MASKZ(p, idx, m) _mm256_mask_i32gather_ps(_mm256_setzero_ps(), (p), (idx), (m), 4)
#define V_STORE_TAIL avx2_store_tail

#include "backends/cpu/ops_simd.h"
