// dtypes.comp: CAST, COMPARE, WHERE, LOGIC and BINARY on i32 operands
// (spec/numerics.md "Dtypes"). Everything is integer arithmetic on the raw
// 32-bit words: the conversions are built from bits (no driver float<->int
// conversion is trusted), floats are compared through their order keys with
// NaN tested apart and -0 made +0, and i32 division divides magnitudes as
// unsigned (OpSDiv leaves INT32_MIN / -1 undefined). So every device gives
// the CPU reference's bits.
// Specialization constants: 1 = KIND (0 cast f32 -> i32, 1 cast i32 -> f32,
// 2 compare f32, 3 compare i32, 4 where, 5 logic, 6 binary i32, 7 copy,
// 8 unary i32),
// 2 = SUB (bib_compare_t or bib_logic_t, whose numbers vk_kernels.c
// asserts; for binary i32 0 add, 1 sub, 2 mul, 3 div, 4 min, 5 max; for
// unary i32 0 abs, 1 neg), 3 and 4 = the form
// of in1 and in2 against in0: 0 same shape | 1 a row [n1] | 2 one element.
// Push: n0 = element count, n1 = in0's last axis.
#version 450
#include "common.glsl"
layout(std430, binding = 3) buffer In2U { uint in2_u[]; };
layout(local_size_x = 256) in;
layout(constant_id = 1) const uint KIND = 0;
layout(constant_id = 2) const uint SUB = 0;
layout(constant_id = 3) const uint FORM1 = 0;
layout(constant_id = 4) const uint FORM2 = 0;

uint form_index(uint form, uint i) {
    return form == 0u ? i : (form == 1u ? i % pc.n1 : 0u);
}

// f32 -> i32: toward zero; NaN 0; |x| >= 2^31 saturates by sign.
uint cast_f2i(uint b) {
    uint mag = b & 0x7fffffffu;
    if (mag > 0x7f800000u)
        return 0u;
    int e = int(mag >> 23) - 127;
    if (e < 0)
        return 0u;
    if (e >= 31)
        return (b >> 31) != 0u ? 0x80000000u : 0x7fffffffu;
    uint m = (mag & 0x7fffffu) | 0x800000u;
    uint q = e >= 23 ? m << uint(e - 23) : m >> uint(23 - e);
    return (b >> 31) != 0u ? 0u - q : q;
}

// i32 -> f32, rounded to nearest even.
uint cast_i2f(uint w) {
    if (w == 0u)
        return 0u;
    uint sign = w & 0x80000000u;
    uint mag = sign != 0u ? 0u - w : w;
    int p = findMSB(mag);
    if (p <= 23)
        return sign | ((uint(p + 127) << 23) + ((mag << uint(23 - p)) & 0x7fffffu));
    uint sh = uint(p - 23);
    uint q = mag >> sh;
    uint rem = mag & ((1u << sh) - 1u);
    uint half_ = 1u << (sh - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u))
        q += 1u; // 2^24 carries into the exponent below
    return sign | ((uint(p + 127) << 23) + (q - 0x800000u));
}

bool is_nan(uint b) {
    return (b & 0x7fffffffu) > 0x7f800000u;
}

// The signed order -Inf < ... < +Inf with -0 and +0 one key.
int order_key(uint b) {
    if ((b & 0x7fffffffu) == 0u)
        b = 0u;
    int i = int(b);
    return i ^ int(uint(i >> 31) & 0x7fffffffu);
}

uint compare(int a, int b) {
    bool r;
    if (SUB == 0u)
        r = a == b;
    else if (SUB == 1u)
        r = a < b;
    else if (SUB == 2u)
        r = a <= b;
    else if (SUB == 3u)
        r = a > b;
    else
        r = a >= b;
    return r ? 1u : 0u;
}

uint binary_i32(uint a, uint b) {
    if (SUB == 0u)
        return a + b;
    if (SUB == 1u)
        return a - b;
    if (SUB == 2u)
        return a * b;
    if (SUB == 4u)
        return int(a) < int(b) ? a : b;
    if (SUB == 5u)
        return int(a) > int(b) ? a : b;
    if (SUB != 3u)
        return 0u;
    // Division toward zero on the magnitudes; the host has refused a zero
    // divisor before the dispatch.
    if (b == 0u)
        return 0u;
    bool neg = ((a ^ b) & 0x80000000u) != 0u;
    uint ma = (a & 0x80000000u) != 0u ? 0u - a : a;
    uint mb = (b & 0x80000000u) != 0u ? 0u - b : b;
    uint q = ma / mb;
    return neg ? 0u - q : q;
}

void main() {
    for (uint i = gl_GlobalInvocationID.x; i < pc.n0; i += gl_NumWorkGroups.x * 256u) {
        uint a = in0_u[pc.off_in0 + i];
        uint r;
        if (KIND == 0u) {
            r = cast_f2i(a);
        } else if (KIND == 1u) {
            r = cast_i2f(a);
        } else if (KIND == 2u) {
            uint b = in1_u[pc.off_in1 + form_index(FORM1, i)];
            r = is_nan(a) || is_nan(b) ? 0u : compare(order_key(a), order_key(b));
        } else if (KIND == 3u) {
            uint b = in1_u[pc.off_in1 + form_index(FORM1, i)];
            r = compare(int(a), int(b));
        } else if (KIND == 4u) {
            r = a != 0u ? in1_u[pc.off_in1 + form_index(FORM1, i)]
                        : in2_u[pc.off_in2 + form_index(FORM2, i)];
        } else if (KIND == 5u) {
            bool x = a != 0u;
            if (SUB == 0u) {
                r = x ? 0u : 1u;
            } else {
                bool y = in1_u[pc.off_in1 + form_index(FORM1, i)] != 0u;
                bool v = SUB == 1u ? x && y : (SUB == 2u ? x || y : x != y);
                r = v ? 1u : 0u;
            }
        } else if (KIND == 6u) {
            r = binary_i32(a, in1_u[pc.off_in1 + form_index(FORM1, i)]);
        } else if (KIND == 8u) {
            r = SUB == 1u || int(a) < 0 ? 0u - a : a;
        } else {
            r = a;
        }
        out_u[pc.off_out + i] = r;
    }
}
