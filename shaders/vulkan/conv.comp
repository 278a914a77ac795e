// conv.comp: CONV, MAXPOOL, AVGPOOL and BATCHNORM (spec/numerics.md 12a), one
// invocation per output element in a grid-stride loop. x is [N,C,H,W] (1-D
// runs as H = 1); the taps of each output run in (c, kh, kw) ascending order:
// for CONV one fma chain from +0 with a padding tap's input +0, for AVGPOOL
// a chain of adds over the taps inside the input then one correctly rounded
// divide, for MAXPOOL the order-key maximum of those taps.
// Specialization constant 1: 0 conv | 1 maxpool | 2 avgpool | 3 avgpool
// counting the padding | 4 batchnorm | 5 batchnorm then relu.
// Push, CONV: n0 = C/g, n1 = H, n2 = W, n3 = O, n4 = OH, n5 = OW,
//   off_in2 = outputs, off_scratch = O/g; u0..u3 = (kh, kw), (sh, sw),
//   (dh, dw), (pt, pl), each pair lo | hi << 16. in1 = w.
// Push, pools: n0 = C, the rest as CONV's; off_scratch = pb | pr << 16.
// Push, BATCHNORM: n0 = elements, n1 = C, n2 = elements per (n, c) plane,
//   u0 = eps bits; in1 = [4,C] scale, bias, mean, var.
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 1) const uint OP = 0;

uint lo16(uint v) {
    return v & 0xffffu;
}
uint hi16(uint v) {
    return v >> 16;
}

void main() {
    uint step = gl_NumWorkGroups.x * 256u;
    if (OP >= 4u) {
        precise float eps = uintBitsToFloat(pc.u0);
        for (uint e = gl_GlobalInvocationID.x; e < pc.n0; e += step) {
            uint c = (e / pc.n2) % pc.n1;
            precise float scale = in1_f[pc.off_in1 + c];
            precise float bias = in1_f[pc.off_in1 + pc.n1 + c];
            precise float mean = in1_f[pc.off_in1 + 2u * pc.n1 + c];
            precise float ve = in1_f[pc.off_in1 + 3u * pc.n1 + c] + eps;
            precise float den = bib_sqrt(ve);
            precise float d = in0_f[pc.off_in0 + e] - mean;
            precise float q = bib_div(d, den);
            precise float g = q * scale;
            precise float y = g + bias;
            out_f[pc.off_out + e] = OP == 5u ? bib_relu(y) : bib_canon(y);
        }
        return;
    }
    uint H = pc.n1, W = pc.n2, OH = pc.n4, OW = pc.n5;
    int kh = int(lo16(pc.u0)), kw = int(hi16(pc.u0));
    int sh = int(lo16(pc.u1)), sw = int(hi16(pc.u1));
    int dh = int(lo16(pc.u2)), dw = int(hi16(pc.u2));
    int pt = int(lo16(pc.u3)), pl = int(hi16(pc.u3));
    for (uint idx = gl_GlobalInvocationID.x; idx < pc.off_in2; idx += step) {
        uint ow = idx % OW, t = idx / OW;
        uint oh = t % OH;
        t /= OH;
        int h0 = int(oh) * sh - pt, w0 = int(ow) * sw - pl;
        if (OP == 0u) {
            uint O = pc.n3, cg = pc.n0, og = pc.off_scratch;
            uint o = t % O, n = t / O;
            uint C = cg * (O / og), c0 = (o / og) * cg;
            precise float acc = 0.0;
            for (uint c = 0u; c < cg; c++) {
                uint xb = pc.off_in0 + (n * C + c0 + c) * H * W;
                uint wb = pc.off_in1 + (o * cg + c) * uint(kh * kw);
                for (int i = 0; i < kh; i++) {
                    int ih = h0 + i * dh;
                    bool h_in = ih >= 0 && ih < int(H);
                    for (int j = 0; j < kw; j++) {
                        int iw = w0 + j * dw;
                        precise float xv = 0.0; // a padding tap: fma(w, +0, acc)
                        if (h_in && iw >= 0 && iw < int(W))
                            xv = in0_f[xb + uint(ih) * W + uint(iw)];
                        acc = bib_fma(in1_f[wb + uint(i * kw + j)], xv, acc);
                    }
                }
            }
            out_f[pc.off_out + idx] = bib_canon(acc);
        } else {
            // t = n * C + c: the (n, c) plane.
            uint xb = pc.off_in0 + t * H * W;
            int h_end = int(H) + int(lo16(pc.off_scratch)),
                w_end = int(W) + int(hi16(pc.off_scratch));
            precise float sum = 0.0;
            int best = bib_order_key(uintBitsToFloat(0xff800000u));
            bool nan = false;
            uint count = 0u;
            for (int i = 0; i < kh; i++) {
                int ih = h0 + i * dh;
                bool h_in = ih >= 0 && ih < int(H);
                for (int j = 0; j < kw; j++) {
                    int iw = w0 + j * dw;
                    bool w_in = iw >= 0 && iw < int(W);
                    if (h_in && w_in) {
                        precise float v = in0_f[xb + uint(ih) * W + uint(iw)];
                        if (OP >= 2u) {
                            sum = sum + v;
                        } else if (bib_isnan(v)) {
                            nan = true;
                        } else {
                            best = max(best, bib_order_key(v));
                        }
                        count++;
                    } else if (OP == 3u && ih >= -pt && ih < h_end && iw >= -pl && iw < w_end) {
                        count++;
                    }
                }
            }
            precise float y;
            if (OP >= 2u)
                y = bib_div(sum, float(count));
            else
                y = nan ? uintBitsToFloat(BIB_QNAN) : bib_from_order_key(best);
            out_f[pc.off_out + idx] = bib_canon(y);
        }
    }
}
