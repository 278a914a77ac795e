// tree.glsl: THE reduction tree of spec/numerics.md for one workgroup of 64
// invocations per row (included by row kernels after common.glsl).
// Lane l owns elements l, l+64, l+128, ... and accumulates them in ascending
// order from +0; then p[i] += p[i+32], p[i] += p[i+16], ..., p[i] += p[i+1].
// MAX is order-free once NaN and -0 < +0 are pinned (order keys).

shared float bib_tree_p[64];
shared int bib_tree_k[64];
shared uint bib_tree_i[64];

// Every lane passes its partial; every lane gets the sum.
float bib_tree_sum(float partial) {
    uint l = gl_LocalInvocationID.x;
    bib_tree_p[l] = partial;
    barrier();
    for (uint s = 32u; s >= 1u; s >>= 1) {
        if (l < s) {
            precise float v = bib_tree_p[l] + bib_tree_p[l + s];
            bib_tree_p[l] = v;
        }
        barrier();
    }
    float r = bib_tree_p[0];
    barrier();
    return r;
}

// Every lane passes its best order key (or nan); every lane gets the
// maximum: the canonical NaN if any lane saw one, -Inf for an empty row.
float bib_tree_max(int key, bool nan) {
    uint l = gl_LocalInvocationID.x;
    bib_tree_k[l] = key;
    bib_tree_i[l] = nan ? 1u : 0u;
    barrier();
    for (uint s = 32u; s >= 1u; s >>= 1) {
        if (l < s) {
            bib_tree_k[l] = max(bib_tree_k[l], bib_tree_k[l + s]);
            bib_tree_i[l] |= bib_tree_i[l + s];
        }
        barrier();
    }
    float r = bib_tree_i[0] != 0u ? uintBitsToFloat(BIB_QNAN) : bib_from_order_key(bib_tree_k[0]);
    barrier();
    return r;
}

// PROD: THE tree with * for +: every lane passes its partial product (lanes
// start at 1); every lane gets the product.
float bib_tree_prod(float partial) {
    uint l = gl_LocalInvocationID.x;
    bib_tree_p[l] = partial;
    barrier();
    for (uint s = 32u; s >= 1u; s >>= 1) {
        if (l < s) {
            precise float v = bib_tree_p[l] * bib_tree_p[l + s];
            bib_tree_p[l] = v;
        }
        barrier();
    }
    float r = bib_tree_p[0];
    barrier();
    return r;
}

// MIN as bib_tree_max with the least key: +Inf for an empty row.
float bib_tree_min(int key, bool nan) {
    uint l = gl_LocalInvocationID.x;
    bib_tree_k[l] = key;
    bib_tree_i[l] = nan ? 1u : 0u;
    barrier();
    for (uint s = 32u; s >= 1u; s >>= 1) {
        if (l < s) {
            bib_tree_k[l] = min(bib_tree_k[l], bib_tree_k[l + s]);
            bib_tree_i[l] |= bib_tree_i[l + s];
        }
        barrier();
    }
    float r = bib_tree_i[0] != 0u ? uintBitsToFloat(BIB_QNAN) : bib_from_order_key(bib_tree_k[0]);
    barrier();
    return r;
}
