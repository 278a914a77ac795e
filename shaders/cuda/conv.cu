// shaders/cuda/conv.cu: CONV, MAXPOOL, AVGPOOL and BATCHNORM (spec/numerics.md
// 12a). One thread per output element in a grid-stride loop of 64-bit
// indices, so any grid gives the same result; x is [N,C,H,W] (1-D runs as
// H = 1). The taps of each output run in (c, kh, kw) ascending order: for
// CONV one fma chain from +0 with a padding tap's input +0, for AVGPOOL a
// chain of adds over the taps inside the input then one correctly rounded
// divide, for MAXPOOL the order-key maximum of those taps.
//
// Arguments (two 32-bit words to a 64-bit n[], lo | hi << 32):
//   CONV:  n0 = (C/g, O/g), n1 = (H, W), n2 = (O, 0), n3 = (OH, OW),
//          n4 = (kh, kw), n5 = (sh, sw); u0..u3 = dh, dw, pt, pl; in1 = w;
//          scratch = output count.
//   pools: n0 = (C, pb), n1 = (H, W), n2 = (pr, 0), n3 = (OH, OW),
//          n4 = (kh, kw), n5 = (sh, sw); u0..u3 = dh, dw, pt, pl;
//          scratch = output count.
//   BATCHNORM: n0 = elements, n1 = C, n2 = elements per (n, c) plane,
//          u0 = eps bits; in1 = [4,C] scale, bias, mean, var.
#include "shaders/cuda/common.cuh"

using namespace bibcu;

namespace {

__device__ __forceinline__ int64_t lo32(uint64_t v) {
    return static_cast<int64_t>(v & 0xffffffffu);
}

__device__ __forceinline__ int64_t hi32(uint64_t v) {
    return static_cast<int64_t>(v >> 32);
}

enum { POOL_MAX, POOL_AVG, POOL_AVG_PAD };

template <int OP> __device__ __forceinline__ void pool_all(const bib_cu_args_t &a) {
    const float *x = f32(a.in0);
    float *y = f32(a.out);
    const int64_t H = lo32(a.n[1]), W = hi32(a.n[1]), OH = lo32(a.n[3]), OW = hi32(a.n[3]);
    const int64_t kh = lo32(a.n[4]), kw = hi32(a.n[4]), sh = lo32(a.n[5]), sw = hi32(a.n[5]);
    const int64_t dh = a.u[0], dw = a.u[1], pt = a.u[2], pl = a.u[3];
    const int64_t h_end = H + hi32(a.n[0]), w_end = W + lo32(a.n[2]);
    const uint64_t total = a.scratch;
    for (uint64_t idx = first_index(); idx < total; idx += grid_stride()) {
        const int64_t ow = static_cast<int64_t>(idx % OW), oh = static_cast<int64_t>(idx / OW % OH);
        const float *xp = x + idx / OW / OH * H * W;
        const int64_t h0 = oh * sh - pt, w0 = ow * sw - pl;
        float sum = 0.0f;
        int32_t best = order_key(neg_inf());
        bool nan = false;
        uint32_t count = 0;
        for (int64_t i = 0; i < kh; i++) {
            const int64_t ih = h0 + i * dh;
            const bool h_in = ih >= 0 && ih < H;
            for (int64_t j = 0; j < kw; j++) {
                const int64_t iw = w0 + j * dw;
                if (h_in && iw >= 0 && iw < W) {
                    const float v = xp[ih * W + iw];
                    if (OP != POOL_MAX) {
                        sum = __fadd_rn(sum, v);
                    } else if (isnan_(v)) {
                        nan = true;
                    } else {
                        const int32_t k = order_key(v);
                        best = k > best ? k : best;
                    }
                    count++;
                } else if (OP == POOL_AVG_PAD && ih >= -pt && ih < h_end && iw >= -pl &&
                           iw < w_end) {
                    count++;
                }
            }
        }
        float r;
        if (OP != POOL_MAX)
            r = __fdiv_rn(sum, static_cast<float>(count));
        else
            r = nan ? qnan() : from_order_key(best);
        y[idx] = canon(r);
    }
}

} // namespace

extern "C" __global__ void __launch_bounds__(256) bib_conv(const bib_cu_args_t a) {
    const float *x = f32(a.in0), *w = f32(a.in1);
    float *y = f32(a.out);
    const int64_t cg = lo32(a.n[0]), og = hi32(a.n[0]), H = lo32(a.n[1]), W = hi32(a.n[1]);
    const int64_t O = lo32(a.n[2]), OH = lo32(a.n[3]), OW = hi32(a.n[3]);
    const int64_t kh = lo32(a.n[4]), kw = hi32(a.n[4]), sh = lo32(a.n[5]), sw = hi32(a.n[5]);
    const int64_t dh = a.u[0], dw = a.u[1], pt = a.u[2], pl = a.u[3];
    const int64_t C = cg * (O / og);
    const uint64_t total = a.scratch;
    for (uint64_t idx = first_index(); idx < total; idx += grid_stride()) {
        const int64_t ow = static_cast<int64_t>(idx % OW), oh = static_cast<int64_t>(idx / OW % OH);
        const uint64_t t = idx / OW / OH;
        const int64_t o = static_cast<int64_t>(t % O), n = static_cast<int64_t>(t / O);
        const int64_t c0 = o / og * cg, h0 = oh * sh - pt, w0 = ow * sw - pl;
        float acc = 0.0f;
        for (int64_t c = 0; c < cg; c++) {
            const float *xc = x + (n * C + c0 + c) * H * W;
            const float *wc = w + (o * cg + c) * kh * kw;
            for (int64_t i = 0; i < kh; i++) {
                const int64_t ih = h0 + i * dh;
                const bool h_in = ih >= 0 && ih < H;
                for (int64_t j = 0; j < kw; j++) {
                    const int64_t iw = w0 + j * dw;
                    // A padding tap: fma(w, +0, acc).
                    const float xv = h_in && iw >= 0 && iw < W ? xc[ih * W + iw] : 0.0f;
                    acc = __fmaf_rn(wc[i * kw + j], xv, acc);
                }
            }
        }
        y[idx] = canon(acc);
    }
}

extern "C" __global__ void __launch_bounds__(256) bib_pool_max(const bib_cu_args_t a) {
    pool_all<POOL_MAX>(a);
}

extern "C" __global__ void __launch_bounds__(256) bib_pool_avg(const bib_cu_args_t a) {
    pool_all<POOL_AVG>(a);
}

extern "C" __global__ void __launch_bounds__(256) bib_pool_avg_pad(const bib_cu_args_t a) {
    pool_all<POOL_AVG_PAD>(a);
}

// BATCHNORM: den = sqrt(var + eps); out = canon(((x - mean) / den) * scale + bias),
// each step one rounding; RELU then applies relu to it.
template <bool RELU> __device__ __forceinline__ void batchnorm_all(const bib_cu_args_t &a) {
    const float *x = f32(a.in0), *st = f32(a.in1);
    float *y = f32(a.out);
    const uint64_t channels = a.n[1], plane = a.n[2];
    const float eps = __uint_as_float(a.u[0]);
    for (uint64_t e = first_index(); e < a.n[0]; e += grid_stride()) {
        const uint64_t c = e / plane % channels;
        const float den = __fsqrt_rn(__fadd_rn(st[3 * channels + c], eps));
        const float q = __fdiv_rn(__fsub_rn(x[e], st[2 * channels + c]), den);
        const float r = __fadd_rn(__fmul_rn(q, st[c]), st[channels + c]);
        y[e] = RELU ? relu_(r) : canon(r);
    }
}

extern "C" __global__ void __launch_bounds__(256) bib_batchnorm(const bib_cu_args_t a) {
    batchnorm_all<false>(a);
}

extern "C" __global__ void __launch_bounds__(256) bib_batchnorm_relu(const bib_cu_args_t a) {
    batchnorm_all<true>(a);
}
