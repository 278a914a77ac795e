/* backends/cpu/ops_avx512.c: the row functions for AVX-512 (16 lanes).
 *
 * Only the vector primitives live here; the functions themselves are
 * ops_simd.h, shared with AVX2, and give the scalar reference's bits.
 * Compiled with AVX-512 flags (Makefile); called only when cpufeatures says
 * the CPU has AVX-512F/DQ/BW/VL.
 */
#include <immintrin.h>
#include <math.h>

#include "backends/cpu/bmath.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/unary.h"

typedef __m512 VF;
typedef __mmask16 VM;
typedef __m512i VI;

#define V_WIDTH 16
#define V_SUFFIX avx512
#define V_NAME "avx512"
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_STREAM(p, v) _mm512_stream_ps((p), (v)) /* p 64-byte aligned */
#define V_SET1(x) _mm512_set1_ps(x)
#define V_ZERO() _mm512_setzero_ps()
#define V_ADD _mm512_add_ps
#define V_SUB _mm512_sub_ps
#define V_MUL _mm512_mul_ps
#define V_DIV _mm512_div_ps
#define V_FMA _mm512_fmadd_ps
#define V_FNMA _mm512_fnmadd_ps
#define V_FMS _mm512_fmsub_ps
#define V_MIN _mm512_min_ps
#define V_MAX _mm512_max_ps
#define V_GT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define V_LT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ)
#define V_GE(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GE_OQ)
#define V_EQ(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_EQ_OQ)
#define V_UNORD(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_UNORD_Q)
#define V_SELECT(m, a, b) _mm512_mask_blend_ps((m), (b), (a))
#define V_AND_BITS(a, bits)                                                                        \
    _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)(bits))))
#define V_OR_BITS(a, b)                                                                            \
    _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define V_AND_MASK(a, m)                                                                           \
    _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(m)))
#define V_TAILMASK(r)                                                                              \
    _mm512_castsi512_ps(_mm512_maskz_set1_epi32((__mmask16)((1u << (r)) - 1u), -1))
#define V_ORDER_KEY(x)                                                                             \
    _mm512_xor_si512(_mm512_castps_si512(x),                                                       \
                     _mm512_srli_epi32(_mm512_srai_epi32(_mm512_castps_si512(x), 31), 1))
#define V_IMAX _mm512_max_epi32
#define V_IMIN _mm512_min_epi32
#define V_ISET1 _mm512_set1_epi32
#define V_MASK_NONE() ((__mmask16)0)
#define V_MASK_OR(a, b) ((__mmask16)((a) | (b)))
#define V_MASK_AND(a, b) ((__mmask16)((a) & (b)))
#define V_MASK_XOR(a, b) ((__mmask16)((a) ^ (b)))
#define V_MASK_ANY(m) ((m) != 0)
#define V_MASK_ALL(m) ((m) == (__mmask16)0xFFFF)
#define V_ROUND_FLOOR(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define V_ROUND_CEIL(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
#define V_ROUND_EVEN(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* Integer lanes (32 bits each) for the steps that work on a float's bits. */
#define V_BITS(v) _mm512_castps_si512(v)
#define V_FROM_BITS(i) _mm512_castsi512_ps(i)
#define V_ILOAD(p) _mm512_loadu_si512((const void *)(p))
#define V_IADD _mm512_add_epi32
#define V_ISUB _mm512_sub_epi32
#define V_IAND _mm512_and_si512
#define V_IOR _mm512_or_si512
#define V_IXOR _mm512_xor_si512
#define V_ISLL _mm512_slli_epi32
#define V_ISRL _mm512_srli_epi32
#define V_ISRA _mm512_srai_epi32
#define V_ISLLV _mm512_sllv_epi32 /* a count of 32 or more gives 0 */
#define V_ISRLV _mm512_srlv_epi32
#define V_IMULLO _mm512_mullo_epi32
#define V_IMAXU _mm512_max_epu32
#define V_ICVT _mm512_cvtepi32_ps
#define V_FCVT_I _mm512_cvtps_epi32 /* exact for an integral float */
#define V_IEQ(a, b) _mm512_cmpeq_epi32_mask((a), (b))
#define V_IGT(a, b) _mm512_cmpgt_epi32_mask((a), (b))
#define V_IEQ01(a, b) _mm512_maskz_set1_epi32(_mm512_cmpeq_epi32_mask((a), (b)), 1)
#define V_ISELECT(m, a, b) _mm512_mask_blend_epi32((m), (b), (a))
#define V_ITABLE8(idx, table) _mm512_permutexvar_epi32((idx), (table))

/* The high 32 bits of each lane's 64-bit product a * b, unsigned. */
static inline __m512i avx512_imulhi_u32(__m512i a, __m512i b) {
    __m512i even = _mm512_mul_epu32(a, b);
    __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));
    return _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(even, 32), odd);
}
#define V_IMULHI_U32 avx512_imulhi_u32

/* vscalefps rounds p * 2^kf once, as the contract's (p * 2^k1) * 2^k2 does:
 * p * 2^k1 is exact, so the second multiply is the only rounding, overflow
 * and denormal results included (MXCSR keeps FTZ/DAZ off). */
#define V_SCALE2K(p, kf) _mm512_scalef_ps((p), (kf))
#define V_SCALE2K_DETOUR bib_cpu_scalef_detour

/* The tree's steps 8, 4, 2, 1: p[i] + p[i + s], left operand the lower lane. */
static inline float avx512_hsum_tree(__m512 v) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

/* Masked moves: lanes at and beyond r are neither read nor written, so a
 * tail never touches memory past the row. */
static inline __m512 avx512_load_tail(const float *p, size_t r, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), (__mmask16)((1u << r) - 1u), p);
}

static inline void avx512_store_tail(float *p, size_t r, __m512 v) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << r) - 1u), v);
}

/* Every lane the greatest of v's lanes by x86's max (which of +-0, and
 * whether a NaN survives, depends on the lanes' order). */
static inline __m512 avx512_hmax_all(__m512 v) {
    v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* Four short rows at a time (ops_simd.h's row groups): r[g] is row g's
 * tree lanes folded into one register (p[0 .. 16)). The tree's steps 8, 4,
 * 2, 1 run on the four rows together, p[i] + p[i + s] with the lower lane
 * on the left as in avx512_hsum_tree; row g's sum ends in lane 4 g. */
#define V_GROUP 4
#define V_EXP_LOCK 8 /* two rows of a group: 8 x 3 live vectors and exp's constants */
static inline __m512 avx512_tree_group(const __m512 r[4]) {
    __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(r[2], r[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(r[2], r[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* ab: a's p[0..8) then b's; step 4 takes blocks 0 and 2 against 1 and 3 */
    __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 1, 1, 1)));
}

/* The same shape with max: row g's greatest lane (as V_HMAX_ALL) in lane 4 g. */
static inline __m512 avx512_max_group(const __m512 r[4]) {
    __m512 ab = _mm512_max_ps(_mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 cd = _mm512_max_ps(_mm512_shuffle_f32x4(r[2], r[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(r[2], r[3], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 s = _mm512_max_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
    s = _mm512_max_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_max_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 1, 1, 1)));
}

#define V_TREE_GROUP avx512_tree_group
#define V_MAX_GROUP avx512_max_group
#define V_BCAST_ROW(v, g) _mm512_permutexvar_ps(_mm512_set1_epi32(4 * (g)), (v))
#define V_SQRT _mm512_sqrt_ps
#define V_HMAX_ALL avx512_hmax_all
#define V_IMAX_REDUCE _mm512_reduce_max_epi32
#define V_HSUM_TREE avx512_hsum_tree
#define V_LOAD_TAIL avx512_load_tail
#define V_LOAD_MASKZ(p, m) _mm512_maskz_loadu_ps((m), (p))
#define V_EVEN_LANES(a, b)                                                                         \
    _mm512_permutex2var_ps(                                                                        \
        (a), _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), (b))
#define V_GATHER_MASKZ(p, idx, m) _mm512_mask_i32gather_ps(_mm512_setzero_ps(), (m), (idx), (p), 4)
#define V_STORE_TAIL avx512_store_tail

#include "backends/cpu/ops_simd.h"
