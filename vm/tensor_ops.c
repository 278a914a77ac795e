/* vm/tensor_ops.c: what a tensor opcode means (vm/tensor_ops.h). */
#include "vm/tensor_ops.h"

#include "backends/callcheck.h"

static uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

_Static_assert(BIB_COST__COUNT == 5, "bib_tensor_cost has a case for every bib_cost_form_t");

bib_tensor_cost_t bib_tensor_cost(const bib_call_t *call) {
    const bib_kernel_info_t *k = &bib_kernel_table[call->kernel];
    const uint64_t out = bib_view_count(&call->out);
    const double out_d = (double)out;
    bib_tensor_cost_t c = {0, 0, 0};
    switch (k->cost) {
    case BIB_COST_PRODUCT: {
        /* [M,K] . [K,N]: a multiply-add per k for each output, then the
           output itself; the estimate adds the bias and activation. */
        const uint64_t depth = call->in[0].dims[1];
        c.work = sat_mul(out, depth + 1);
        c.flops = sat_mul(sat_mul(out, depth), 2);
        c.ops = 2.0 * out_d * (double)depth + 2 * out_d;
        return c;
    }
    case BIB_COST_ATTENTION: {
        /* q [S,H,D], k and v [T,H,D]: q.k^T and p.v, a multiply-add per key
           and element each, then the result; the estimate adds about 20
           operations of softmax per score. */
        const uint64_t keys = call->in[1].dims[0];
        c.work = sat_mul(out, 2 * keys + 1);
        c.flops = sat_mul(sat_mul(out, keys), 4);
        const double sh = (double)call->in[0].dims[0] * call->in[0].dims[1];
        c.ops = sh * (double)keys * (4 * (double)call->in[0].dims[2] + 20);
        return c;
    }
    case BIB_COST_GATHER:
        /* The indices, the rows they pick and the result. */
        c.work = sat_add(bib_view_count(&call->in[1]), sat_mul(out, 2));
        c.ops = out_d;
        return c;
    case BIB_COST_ELEMENTS:
    case BIB_COST_ROWS:
    case BIB_COST__COUNT:
        break;
    }
    /* Every input's elements and the result's. */
    c.work = out;
    for (int i = 0; i < 3; i++)
        if (call->in[i].buf != NULL)
            c.work = sat_add(c.work, bib_view_count(&call->in[i]));
    if (k->cost == BIB_COST_ROWS)
        c.ops = (double)k->per_element * (double)bib_view_count(&call->in[0]);
    else
        c.ops = (double)k->per_element * out_d;
    return c;
}
