/* tests/unit/test_tensor.c: tensors at run time (vm/tensor.c) through the VM:
 * every tensor opcode, shape and liveness traps and their messages, the
 * memory cap, named inputs and outputs, executor selection, lazy copies,
 * in-place aliasing and traces. Every behaviour that involves a kernel runs
 * on the CPU executor and again on Vulkan (a visible skip where there is no
 * Vulkan device). Modules are built in memory (bib_vm_load_module), so the
 * tests do not depend on the assembler's tensor directives. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/bib.h"
#include "vm/vm.h"

/* ---- building modules in memory --------------------------------------------- */

#define MAX_CODE 512
#define MAX_DECLS 16

typedef struct tb {
    bib_insn_t code[MAX_CODE];
    uint32_t n;
    uint32_t tregs;
    bib_tensor_decl_t decls[MAX_DECLS];
    uint32_t ndecls;
    const char *dim_names[BIB_MAX_RANK];
    uint32_t ndims;
} tb_t;

static void emit(tb_t *b, uint32_t op, uint32_t a, uint32_t bb, uint32_t c, uint32_t d) {
    cr_assert_lt(b->n, MAX_CODE);
    b->code[b->n++] = (bib_insn_t){op, a, bb, c, d};
}
#define E(b, OP, a, bb, c, d) emit((b), BIB_CODE_##OP, (a), (bb), (c), (d))

static uint32_t lo32(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return (uint32_t)u;
}
static uint32_t hi32(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return (uint32_t)(u >> 32);
}
/* r[reg] = the f64 v. */
static void ldf(tb_t *b, uint32_t reg, double v) {
    E(b, LDI64, reg, lo32(v), hi32(v), 0);
}

/* Scratch registers r20..r23 hold dimensions for ALLOC and RESHAPE. */
static void alloc(tb_t *b, uint32_t t, uint32_t dtype, uint32_t rank, uint32_t d0, uint32_t d1,
                  uint32_t d2) {
    uint32_t d[3] = {d0, d1, d2};
    for (uint32_t i = 0; i < rank; i++)
        E(b, LDI, 20 + i, d[i], 0, 0);
    E(b, ALLOC, t, dtype, 20, rank);
}
static void reshape(tb_t *b, uint32_t dst, uint32_t src, uint32_t rank, uint32_t d0, uint32_t d1,
                    uint32_t d2) {
    uint32_t d[3] = {d0, d1, d2};
    for (uint32_t i = 0; i < rank; i++)
        E(b, LDI, 20 + i, d[i], 0, 0);
    E(b, RESHAPE, dst, src, 20, rank);
}
/* THASH t into linear memory at 8 * slot (r30 stays 0). */
static void hash_store(tb_t *b, uint32_t t, uint32_t slot) {
    E(b, THASH, 29, t, 0, 0);
    E(b, STORE, 29, 30, 8 * slot, 0);
}

static void decl(tb_t *b, const char *name, uint32_t reg, uint32_t flags, uint32_t dtype,
                 uint32_t rank, const int64_t *dims, const void *init) {
    cr_assert_lt(b->ndecls, MAX_DECLS);
    bib_tensor_decl_t *d = &b->decls[b->ndecls++];
    memset(d, 0, sizeof *d);
    d->name = (char *)name;
    d->reg = reg;
    d->flags = flags;
    d->dtype = dtype;
    d->rank = rank;
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++) {
        d->dims[i] = dims[i];
        count *= dims[i] > 0 ? (uint64_t)dims[i] : 1;
    }
    if (init != NULL) {
        d->init = (uint8_t *)init;
        d->init_size = count * 4;
    }
}

static bib_module_t *finish(const tb_t *b, uint32_t nregs) {
    bib_module_t *m = calloc(1, sizeof *m);
    m->code = malloc(b->n * sizeof *m->code);
    memcpy(m->code, b->code, b->n * sizeof *m->code);
    m->code_count = b->n;
    m->funcs = calloc(1, sizeof *m->funcs);
    m->funcs[0] = (bib_function_t){strdup("main"), 0, b->n, 0, nregs};
    m->func_count = 1;
    m->memory_size = 4096;
    m->tensor_regs = b->tregs;
    m->tensor_count = b->ndecls;
    if (b->ndecls > 0) {
        m->tensors = calloc(b->ndecls, sizeof *m->tensors);
        for (uint32_t i = 0; i < b->ndecls; i++) {
            m->tensors[i] = b->decls[i];
            m->tensors[i].name = strdup(b->decls[i].name);
            if (b->decls[i].init != NULL) {
                m->tensors[i].init = malloc(b->decls[i].init_size);
                memcpy(m->tensors[i].init, b->decls[i].init, b->decls[i].init_size);
            }
        }
    }
    m->dim_name_count = b->ndims;
    if (b->ndims > 0) {
        m->dim_names = calloc(b->ndims, sizeof *m->dim_names);
        for (uint32_t i = 0; i < b->ndims; i++)
            m->dim_names[i] = strdup(b->dim_names[i]);
    }
    return m;
}

static bib_vm_t *vm_on(const char *backend, uint64_t max_memory) {
    bib_options_t opt;
    bib_options_init(&opt);
    opt.backend = backend;
    opt.max_memory = max_memory;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&opt, &vm), BIB_OK);
    return vm;
}

static void load(bib_vm_t *vm, const tb_t *b, uint32_t nregs) {
    bib_status_t st = bib_vm_load_module(vm, finish(b, nregs), "t");
    cr_assert_eq(st, BIB_OK, "load failed: %s", bib_vm_error(vm));
}

/* Skips the test, visibly, when the backend cannot run here. */
static void need(const char *backend) {
    if (strcmp(backend, "cpu") == 0)
        return;
    tb_t b = {.tregs = 1};
    alloc(&b, 0, BIB_DTYPE_F32, 1, 4, 0, 0);
    E(&b, RELU, 0, 0, 0, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    bib_status_t st = bib_vm_run(vm, NULL);
    char why[512];
    snprintf(why, sizeof why, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    if (st == BIB_E_UNAVAILABLE) {
        printf("SKIP: %s\n", why);
        cr_skip_test("SKIP: %s", why);
    }
    cr_assert_eq(st, BIB_OK, "probe run on %s failed: %s", backend, why);
}

/* One behaviour, tested on each executor. */
#define ON_EVERY_EXECUTOR(name)                                                                    \
    static void name(const char *backend);                                                         \
    Test(cpu, name) {                                                                              \
        name("cpu");                                                                               \
    }                                                                                              \
    Test(vulkan, name) {                                                                           \
        need("vulkan");                                                                            \
        name("vulkan");                                                                            \
    }                                                                                              \
    static void name(const char *backend)

static double get_f(bib_vm_t *vm, const char *name, uint64_t i) {
    bib_dtype_t dt;
    uint32_t rank, dims[BIB_MAX_RANK];
    const void *data;
    cr_assert_eq(bib_vm_get_output(vm, name, &dt, &rank, dims, &data), BIB_OK, "%s",
                 bib_vm_error(vm));
    if (dt == BIB_DTYPE_I32)
        return ((const int32_t *)data)[i];
    return ((const float *)data)[i];
}

static bib_status_t run(bib_vm_t *vm, int64_t *exit_value) {
    return bib_vm_run(vm, exit_value);
}

static void expect_trap(bib_vm_t *vm, bib_status_t want, const char *text) {
    bib_status_t st = run(vm, NULL);
    cr_assert_eq(st, want, "status %s, want %s: %s", bib_status_name(st), bib_status_name(want),
                 bib_vm_error(vm));
    cr_assert(strstr(bib_vm_error(vm), text) != NULL, "message '%s' lacks '%s'", bib_vm_error(vm),
              text);
}

static const int64_t D2x3[2] = {2, 3}, D3x2[2] = {3, 2}, D3x3[2] = {3, 3};

/* ---- kernels: values ----------------------------------------------------------- */

ON_EVERY_EXECUTOR(matmul_and_linear_give_exact_small_integer_results) {
    static const float a[6] = {1, 2, 3, 4, 5, 6}, bm[6] = {1, 0, -1, 2, 3, 1}, bias[2] = {10, -100};
    tb_t b = {.tregs = 8};
    decl(&b, "a", 0, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, D2x3, a);
    decl(&b, "b", 1, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, D3x2, bm);
    decl(&b, "bias", 2, BIB_TENSOR_CONST, BIB_DTYPE_F32, 1, (int64_t[]){2}, bias);
    decl(&b, "c", 3, BIB_TENSOR_OUTPUT, BIB_DTYPE_F32, 2, (int64_t[]){2, 2}, NULL);
    decl(&b, "l", 4, BIB_TENSOR_OUTPUT, BIB_DTYPE_F32, 2, (int64_t[]){2, 2}, NULL);
    decl(&b, "r", 5, BIB_TENSOR_OUTPUT, BIB_DTYPE_F32, 2, (int64_t[]){2, 2}, NULL);
    E(&b, MATMUL, 3, 0, 1, 0);
    E(&b, LINEAR, 4, 0, 1, 2);
    E(&b, LINEAR_RELU, 5, 0, 1, 2);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    /* [1 2 3; 4 5 6] . [1 0; -1 2; 3 1] = [8 7; 17 16] */
    const double c[4] = {8, 7, 17, 16};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(get_f(vm, "c", i), c[i], "c[%d]", i);
        cr_expect_eq(get_f(vm, "l", i), c[i] + bias[i % 2], "l[%d]", i);
        cr_expect_eq(get_f(vm, "r", i), fmax(c[i] + bias[i % 2], 0), "r[%d]", i);
    }
    bib_vm_destroy(vm);
}

ON_EVERY_EXECUTOR(elementwise_broadcast_reduce_and_argmax_values) {
    static const float x[6] = {1, -2, 3, -4, 5, 6}, row[3] = {1, 2, 3}, one[1] = {2};
    tb_t b = {.tregs = 16};
    decl(&b, "x", 0, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, D2x3, x);
    decl(&b, "row", 1, BIB_TENSOR_CONST, BIB_DTYPE_F32, 1, (int64_t[]){3}, row);
    decl(&b, "one", 2, BIB_TENSOR_CONST, BIB_DTYPE_F32, 1, (int64_t[]){1}, one);
    decl(&b, "relu", 3, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "addrow", 4, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "divone", 5, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "mulself", 6, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "scaled", 7, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "sum", 8, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "max", 9, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "mean", 10, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "argmax", 11, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "sub", 12, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    E(&b, RELU, 3, 0, 0, 0);
    E(&b, TADD, 4, 0, 1, 0);
    E(&b, TDIV, 5, 0, 2, 0);
    E(&b, TMUL, 6, 0, 0, 0);
    ldf(&b, 1, 0.5);
    E(&b, SCALE, 7, 0, 1, 0);
    E(&b, SUM, 8, 0, 0, 0);
    E(&b, MAX, 9, 0, 0, 0);
    E(&b, MEAN, 10, 0, 0, 0);
    E(&b, ARGMAX, 11, 0, 0, 0);
    E(&b, TSUB, 12, 0, 1, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    for (int i = 0; i < 6; i++) {
        cr_expect_eq(get_f(vm, "relu", i), x[i] > 0 ? x[i] : 0);
        cr_expect_eq(get_f(vm, "addrow", i), x[i] + row[i % 3]);
        cr_expect_eq(get_f(vm, "sub", i), x[i] - row[i % 3]);
        cr_expect_eq(get_f(vm, "divone", i), x[i] / 2);
        cr_expect_eq(get_f(vm, "mulself", i), x[i] * x[i]);
        cr_expect_eq(get_f(vm, "scaled", i), x[i] * 0.5);
    }
    cr_expect_eq(get_f(vm, "sum", 0), 2);
    cr_expect_eq(get_f(vm, "sum", 1), 7);
    cr_expect_eq(get_f(vm, "max", 0), 3);
    cr_expect_eq(get_f(vm, "max", 1), 6);
    cr_expect_float_eq(get_f(vm, "mean", 1), 7.0 / 3, 1e-6);
    cr_expect_eq(get_f(vm, "argmax", 0), 2);
    cr_expect_eq(get_f(vm, "argmax", 1), 2);
    bib_dtype_t dt;
    uint32_t rank, dims[BIB_MAX_RANK];
    const void *data;
    cr_assert_eq(bib_vm_get_output(vm, "argmax", &dt, &rank, dims, &data), BIB_OK);
    cr_expect_eq(dt, BIB_DTYPE_I32);
    cr_expect_eq(rank, 1);
    cr_expect_eq(dims[0], 2);
    bib_vm_destroy(vm);
}

ON_EVERY_EXECUTOR(fill_copy_reshape_tget_tset_dim_and_thash) {
    tb_t b = {.tregs = 8};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 2, 3, 0);
    ldf(&b, 1, 1.5);
    E(&b, FILL, 0, 1, 0, 0);
    E(&b, COPY, 1, 0, 0, 0);
    reshape(&b, 2, 1, 1, 6, 0, 0); /* t2 views t1's storage */
    E(&b, LDI, 2, 4, 0, 0);
    ldf(&b, 3, -7.25);
    E(&b, TSET, 2, 2, 3, 0); /* t2[4] = -7.25, so t1[1][1] too */
    E(&b, LDI, 4, 4, 0, 0);
    E(&b, TGET, 5, 1, 4, 0); /* r5 = t1 flat[4] */
    E(&b, TGET, 6, 0, 4, 0); /* r6 = t0 flat[4]: the copy is independent */
    E(&b, DIM, 7, 1, -1, 0); /* 3 */
    E(&b, DIM, 8, 2, 0, 0);  /* 6 */
    E(&b, THASH, 9, 2, 0, 0);
    alloc(&b, 3, BIB_DTYPE_I32, 1, 4, 0, 0);
    E(&b, LDI, 10, -9, 0, 0);
    E(&b, FILL, 3, 10, 0, 0);
    E(&b, LDI, 11, 3, 0, 0);
    E(&b, TGET, 12, 3, 11, 0); /* -9 */
    E(&b, STORE, 5, 30, 0, 0);
    E(&b, STORE, 6, 30, 8, 0);
    E(&b, STORE, 7, 30, 16, 0);
    E(&b, STORE, 8, 30, 24, 0);
    E(&b, STORE, 9, 30, 32, 0);
    E(&b, STORE, 12, 30, 40, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    uint64_t size;
    const uint8_t *mem = bib_vm_memory(vm, &size);
    uint64_t v[6];
    memcpy(v, mem, sizeof v);
    double d5, d6;
    memcpy(&d5, &v[0], 8);
    memcpy(&d6, &v[1], 8);
    cr_expect_eq(d5, -7.25);
    cr_expect_eq(d6, 1.5);
    cr_expect_eq(v[2], 3);
    cr_expect_eq(v[3], 6);
    cr_expect_eq((int64_t)v[5], -9);
    /* THASH of f32[6] = {1.5,1.5,1.5,1.5,-7.25,1.5}, computed here. */
    float e[6] = {1.5f, 1.5f, 1.5f, 1.5f, -7.25f, 1.5f};
    uint32_t dims[1] = {6};
    cr_expect_eq(v[4], bib_tensor_hash(BIB_DTYPE_F32, 1, dims, e, sizeof e));
    bib_vm_destroy(vm);
}

Test(cpu, thash_is_fnv1a_over_dtype_rank_dims_and_bytes) {
    /* FNV-1a 64 of the 12 bytes 01000000 01000000 02000000 (f32, rank 1, [2])
     * followed by 8 zero bytes, computed independently. */
    uint8_t bytes[20] = {1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0};
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 20; i++)
        h = (h ^ bytes[i]) * 0x100000001b3ull;
    float z[2] = {0, 0};
    uint32_t dims[1] = {2};
    cr_assert_eq(bib_tensor_hash(BIB_DTYPE_F32, 1, dims, z, 8), h);
}

ON_EVERY_EXECUTOR(gather_picks_rows_and_traps_on_a_bad_index) {
    static const float table[8] = {0, 1, 10, 11, 20, 21, 30, 31};
    static const int32_t idx[3] = {3, 0, 2}, bad[2] = {1, 4};
    tb_t b = {.tregs = 6};
    decl(&b, "table", 0, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, (int64_t[]){4, 2}, table);
    decl(&b, "idx", 1, BIB_TENSOR_INPUT, BIB_DTYPE_I32, 1, (int64_t[]){BIB_DIM_ANY}, NULL);
    decl(&b, "rows", 2, BIB_TENSOR_OUTPUT, BIB_DTYPE_F32, 2, (int64_t[]){BIB_DIM_ANY, 2}, NULL);
    E(&b, GATHER, 2, 0, 1, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    cr_assert_eq(bib_vm_set_input(vm, "idx", BIB_DTYPE_I32, 1, (uint32_t[]){3}, idx), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    const double want[6] = {30, 31, 0, 1, 20, 21};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(get_f(vm, "rows", i), want[i], "rows[%d]", i);
    cr_assert_eq(bib_vm_set_input(vm, "idx", BIB_DTYPE_I32, 1, (uint32_t[]){2}, bad), BIB_OK);
    expect_trap(vm, BIB_E_TRAP, "index 4 at position 1 is outside the table's 4 rows");
    cr_expect(strstr(bib_vm_error(vm), "pc 0 (GATHER t2, t0, t1)") != NULL, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

ON_EVERY_EXECUTOR(attention_rank2_is_one_head_and_matches_a_double_reference) {
    enum { S = 5, T = 7, D = 4 };
    float q[S * D], k[T * D], v[T * D];
    for (int i = 0; i < S * D; i++)
        q[i] = (float)sin(i * 0.7);
    for (int i = 0; i < T * D; i++) {
        k[i] = (float)cos(i * 0.3);
        v[i] = (float)(i % 5) - 2;
    }
    tb_t b = {.tregs = 8};
    decl(&b, "q", 0, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, (int64_t[]){S, D}, q);
    decl(&b, "k", 1, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, (int64_t[]){T, D}, k);
    decl(&b, "v", 2, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, (int64_t[]){T, D}, v);
    decl(&b, "o", 3, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    decl(&b, "oc", 4, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    E(&b, ATTENTION, 3, 0, 1, 2);
    E(&b, ATTENTION_CAUSAL, 4, 0, 1, 2);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    for (int causal = 0; causal < 2; causal++) {
        for (int i = 0; i < S; i++) {
            int n = causal ? i + (T - S) + 1 : T;
            double s[T], mx = -INFINITY, z = 0;
            for (int j = 0; j < n; j++) {
                s[j] = 0;
                for (int d = 0; d < D; d++)
                    s[j] += (double)q[i * D + d] * k[j * D + d];
                s[j] /= sqrt((double)D);
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j < n; j++)
                z += s[j] = exp(s[j] - mx);
            for (int d = 0; d < D; d++) {
                double o = 0;
                for (int j = 0; j < n; j++)
                    o += s[j] / z * v[j * D + d];
                double got = get_f(vm, causal ? "oc" : "o", (uint64_t)(i * D + d));
                cr_expect(fabs(got - o) <= 1e-5 * (1 + fabs(o)), "%s[%d][%d]: %g, want %g",
                          causal ? "oc" : "o", i, d, got, o);
            }
        }
    }
    bib_vm_destroy(vm);
}

/* Every kernel on RNG data; the THASH of each result goes to linear memory. */
static int all_kernels(tb_t *b) {
    int slot = 0;
    alloc(b, 0, BIB_DTYPE_F32, 2, 7, 33, 0);
    E(b, RNG, 0, 1, 0, 0);
    alloc(b, 1, BIB_DTYPE_F32, 2, 33, 5, 0);
    E(b, LDI, 2, 2, 0, 0);
    E(b, RNG, 1, 2, 1, 0);
    alloc(b, 2, BIB_DTYPE_F32, 1, 5, 0, 0);
    E(b, LDI, 2, 3, 0, 0);
    E(b, RNG, 2, 2, 2, 0);
    alloc(b, 3, BIB_DTYPE_F32, 1, 1, 0, 0);
    ldf(b, 3, 0.5);
    E(b, FILL, 3, 3, 0, 0);
    E(b, TSUB, 4, 0, 3, 0); /* t4 = x - 0.5: signed values */
    alloc(b, 5, BIB_DTYPE_F32, 1, 33, 0, 0);
    E(b, LDI, 2, 4, 0, 0);
    E(b, RNG, 5, 2, 3, 0);
    static const uint32_t unary[] = {BIB_CODE_RELU,   BIB_CODE_SIGMOID,   BIB_CODE_TANH,
                                     BIB_CODE_GELU,   BIB_CODE_EXP,       BIB_CODE_SOFTMAX,
                                     BIB_CODE_SUM,    BIB_CODE_MAX,       BIB_CODE_MEAN,
                                     BIB_CODE_ARGMAX, BIB_CODE_TRANSPOSE, BIB_CODE_COPY};
    uint32_t t = 10;
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++, t++) {
        emit(b, unary[i], t, 4, 0, 0);
        hash_store(b, t, (uint32_t)slot++);
    }
    static const uint32_t binary[] = {BIB_CODE_TADD, BIB_CODE_TSUB, BIB_CODE_TMUL, BIB_CODE_TDIV};
    for (size_t i = 0; i < 4; i++) {
        emit(b, binary[i], t, 4, 5, 0); /* row */
        hash_store(b, t++, (uint32_t)slot++);
        emit(b, binary[i], t, 4, 0, 0); /* same shape */
        hash_store(b, t++, (uint32_t)slot++);
        emit(b, binary[i], t, 4, 3, 0); /* one element */
        hash_store(b, t++, (uint32_t)slot++);
    }
    ldf(b, 3, 1.0 / 3);
    E(b, SCALE, t, 4, 3, 0);
    hash_store(b, t++, (uint32_t)slot++);
    E(b, MATMUL, t, 4, 1, 0);
    hash_store(b, t++, (uint32_t)slot++);
    E(b, LINEAR, t, 4, 1, 2);
    hash_store(b, t++, (uint32_t)slot++);
    E(b, LINEAR_RELU, t, 4, 1, 2);
    hash_store(b, t++, (uint32_t)slot++);
    E(b, LINEAR_GELU, t, 4, 1, 2);
    hash_store(b, t++, (uint32_t)slot++);
    E(b, LAYERNORM, t, 4, 5, 5);
    hash_store(b, t++, (uint32_t)slot++);
    E(b, RMSNORM, t, 4, 5, 0);
    hash_store(b, t++, (uint32_t)slot++);
    /* Attention: q [6,2,8], k and v [9,2,8]. */
    alloc(b, 6, BIB_DTYPE_F32, 3, 6, 2, 8);
    E(b, RNG, 6, 2, 4, 0);
    alloc(b, 7, BIB_DTYPE_F32, 3, 9, 2, 8);
    E(b, RNG, 7, 2, 5, 0);
    alloc(b, 8, BIB_DTYPE_F32, 3, 9, 2, 8);
    E(b, RNG, 8, 2, 6, 0);
    E(b, ATTENTION, t, 6, 7, 8);
    hash_store(b, t++, (uint32_t)slot++);
    E(b, ATTENTION_CAUSAL, t, 6, 7, 8);
    hash_store(b, t++, (uint32_t)slot++);
    /* Gather rows 4, 0, 6 of t4. */
    alloc(b, 9, BIB_DTYPE_I32, 1, 3, 0, 0);
    E(b, LDI, 2, 0, 0, 0);
    E(b, LDI, 3, 4, 0, 0);
    E(b, TSET, 9, 2, 3, 0);
    E(b, LDI, 2, 2, 0, 0);
    E(b, LDI, 3, 6, 0, 0);
    E(b, TSET, 9, 2, 3, 0);
    E(b, GATHER, t, 4, 9, 0);
    hash_store(b, t++, (uint32_t)slot++);
    hash_store(b, 0, (uint32_t)slot++); /* RNG itself */
    E(b, HALT, 0, 0, 0, 0);
    b->tregs = t;
    return slot;
}

Test(vulkan, every_kernel_gives_the_cpu_bits) {
    need("vulkan");
    tb_t b = {0};
    int slots = all_kernels(&b);
    uint64_t got[2][64];
    const char *backends[2] = {"cpu", "vulkan"};
    for (int e = 0; e < 2; e++) {
        bib_vm_t *vm = vm_on(backends[e], 0);
        load(vm, &b, 32);
        cr_assert_eq(run(vm, NULL), BIB_OK, "%s: %s", backends[e], bib_vm_error(vm));
        memcpy(got[e], bib_vm_memory(vm, NULL), (size_t)slots * 8);
        if (e == 1) {
            printf("vulkan ran %" PRIu64 " kernels, the cpu %" PRIu64 " (fallbacks)\n",
                   vm->tensor.stats.kernels[BIB_PLACE_DEVICE],
                   vm->tensor.stats.kernels[BIB_PLACE_HOST]);
            cr_expect_gt(vm->tensor.stats.kernels[BIB_PLACE_DEVICE], 30);
        }
        bib_vm_destroy(vm);
    }
    for (int i = 0; i < slots; i++)
        cr_expect_eq(got[0][i], got[1][i], "result %d: cpu hash %016" PRIx64 ", vulkan %016" PRIx64,
                     i, got[0][i], got[1][i]);
}

Test(cpu, every_kernel_runs_and_results_are_repeatable) {
    tb_t b = {0};
    int slots = all_kernels(&b);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    uint64_t first[64];
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    memcpy(first, bib_vm_memory(vm, NULL), (size_t)slots * 8);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(memcmp(first, bib_vm_memory(vm, NULL), (size_t)slots * 8), 0);
    for (int i = 0; i < slots; i++)
        cr_expect_neq(first[i], 0);
    bib_vm_destroy(vm);
}

/* ---- in place --------------------------------------------------------------------- */

ON_EVERY_EXECUTOR(in_place_results_equal_out_of_place_results) {
    tb_t b = {.tregs = 13};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 9, 9, 0);
    E(&b, LDI, 1, 7, 0, 0);
    E(&b, RNG, 0, 1, 0, 0);
    alloc(&b, 1, BIB_DTYPE_F32, 2, 9, 9, 0);
    E(&b, RNG, 1, 1, 1, 0);
    alloc(&b, 12, BIB_DTYPE_F32, 1, 9, 0, 0);
    E(&b, RNG, 12, 1, 2, 0);
    /* out of place */
    E(&b, MATMUL, 2, 0, 1, 0);
    E(&b, SOFTMAX, 3, 0, 0, 0);
    E(&b, TRANSPOSE, 4, 0, 0, 0);
    E(&b, LAYERNORM, 5, 0, 12, 12);
    E(&b, TADD, 6, 0, 0, 0);
    /* in place, each on a fresh copy of t0 */
    const uint32_t ops[5] = {BIB_CODE_MATMUL, BIB_CODE_SOFTMAX, BIB_CODE_TRANSPOSE,
                             BIB_CODE_LAYERNORM, BIB_CODE_TADD};
    for (uint32_t i = 0; i < 5; i++) {
        E(&b, COPY, 7 + i, 0, 0, 0);
        uint32_t second = ops[i] == BIB_CODE_MATMUL      ? 1
                          : ops[i] == BIB_CODE_LAYERNORM ? 12
                          : ops[i] == BIB_CODE_TADD      ? 7 + i
                                                         : 0;
        emit(&b, ops[i], 7 + i, 7 + i, second, ops[i] == BIB_CODE_LAYERNORM ? 12 : 0);
        hash_store(&b, 2 + i, 2 * i);
        hash_store(&b, 7 + i, 2 * i + 1);
    }
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    const uint64_t *h = (const uint64_t *)bib_vm_memory(vm, NULL);
    const char *names[5] = {"MATMUL", "SOFTMAX", "TRANSPOSE", "LAYERNORM", "TADD"};
    for (int i = 0; i < 5; i++)
        cr_expect_eq(h[2 * i], h[2 * i + 1], "%s in place differs from out of place", names[i]);
    bib_vm_destroy(vm);
}

/* ---- shape and liveness traps ------------------------------------------------------- */

ON_EVERY_EXECUTOR(matmul_with_different_inner_dimensions_traps_with_both_shapes) {
    tb_t b = {.tregs = 3};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 3, 4, 0);
    alloc(&b, 1, BIB_DTYPE_F32, 2, 5, 2, 0);
    E(&b, MATMUL, 2, 0, 1, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP,
                "pc 6 (MATMUL t2, t0, t1): inner dimensions differ: t0 is [3,4], t1 is [5,2]");
    bib_vm_destroy(vm);
}

ON_EVERY_EXECUTOR(a_live_destination_of_another_shape_traps_with_both_shapes) {
    tb_t b = {.tregs = 3};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 2, 3, 0);
    alloc(&b, 1, BIB_DTYPE_F32, 2, 3, 2, 0);
    E(&b, RELU, 1, 0, 0, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "shape mismatch: t1 holds f32[3,2] but the result is f32[2,3]");
    bib_vm_destroy(vm);
}

ON_EVERY_EXECUTOR(binary_operands_that_do_not_broadcast_trap) {
    tb_t b = {.tregs = 3};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 2, 3, 0);
    alloc(&b, 1, BIB_DTYPE_F32, 1, 2, 0, 0);
    E(&b, TADD, 2, 0, 1, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "t0 is [2,3], t1 is [2]");
    bib_vm_destroy(vm);
}

Test(cpu, reshape_to_another_element_count_traps) {
    tb_t b = {.tregs = 2};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 2, 3, 0);
    reshape(&b, 1, 0, 2, 4, 2, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "t0 is [2,3] (6 elements), the new shape [4,2]");
    bib_vm_destroy(vm);
}

Test(cpu, dim_of_a_bad_axis_and_tget_out_of_range_trap) {
    tb_t b = {.tregs = 1};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 2, 3, 0);
    E(&b, DIM, 1, 0, -3, 0);
    E(&b, HALT, 1, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "axis -3 is outside t0 [2,3] (rank 2)");
    bib_vm_destroy(vm);

    tb_t c = {.tregs = 1};
    alloc(&c, 0, BIB_DTYPE_F32, 2, 2, 3, 0);
    E(&c, LDI, 1, 6, 0, 0);
    E(&c, TGET, 2, 0, 1, 0);
    E(&c, HALT, 2, 0, 0, 0);
    vm = vm_on("cpu", 0);
    load(vm, &c, 32);
    expect_trap(vm, BIB_E_TRAP, "index 6 is outside t0 f32[2,3] (6 elements)");
    bib_vm_destroy(vm);
}

Test(cpu, alloc_dimensions_outside_the_range_trap) {
    tb_t b = {.tregs = 1};
    E(&b, LDI, 20, -1, 0, 0);
    E(&b, ALLOC, 0, BIB_DTYPE_F32, 20, 1);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "dimension 0 (r20 = -1) is outside 0..2147483647");
    bib_vm_destroy(vm);
}

/* Loops make the second ALLOC/FREE/use reachable only at run time, where the
 * verifier cannot call it definite. */
static void loop_twice(tb_t *b, void (*body)(tb_t *)) {
    E(b, LDI, 9, 2, 0, 0);
    uint32_t top = b->n;
    body(b);
    E(b, ADDI, 9, 9, -1, 0);
    E(b, JNZ, 9, top, 0, 0);
    E(b, HALT, 0, 0, 0, 0);
}
static void body_alloc(tb_t *b) {
    alloc(b, 0, BIB_DTYPE_F32, 1, 4, 0, 0);
}
static void body_free(tb_t *b) {
    E(b, FREE, 0, 0, 0, 0);
}
static void body_use_free(tb_t *b) {
    E(b, RELU, 1, 0, 0, 0);
    E(b, FREE, 0, 0, 0, 0);
}

Test(cpu, allocating_a_live_tensor_traps) {
    tb_t b = {.tregs = 1};
    loop_twice(&b, body_alloc);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "t0 is already live (f32[4]): FREE it before ALLOC");
    bib_vm_destroy(vm);
}

Test(cpu, freeing_twice_traps) {
    tb_t b = {.tregs = 1};
    alloc(&b, 0, BIB_DTYPE_F32, 1, 4, 0, 0);
    loop_twice(&b, body_free);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "double FREE: t0 was already freed at pc 3");
    bib_vm_destroy(vm);
}

Test(cpu, using_a_freed_tensor_traps) {
    tb_t b = {.tregs = 2};
    alloc(&b, 0, BIB_DTYPE_F32, 1, 4, 0, 0);
    loop_twice(&b, body_use_free);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "t0 is not live: used after it was freed at pc 4");
    bib_vm_destroy(vm);
}

Test(cpu, freeing_a_view_keeps_the_storage_for_the_other_view) {
    tb_t b = {.tregs = 2};
    alloc(&b, 0, BIB_DTYPE_F32, 1, 4, 0, 0);
    ldf(&b, 1, 2.5);
    E(&b, FILL, 0, 1, 0, 0);
    reshape(&b, 1, 0, 2, 2, 2, 0);
    E(&b, FREE, 0, 0, 0, 0);
    E(&b, LDI, 2, 3, 0, 0);
    E(&b, TGET, 3, 1, 2, 0);
    E(&b, FTOI, 4, 3, 0, 0);
    E(&b, HALT, 4, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    int64_t v = 0;
    cr_assert_eq(run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_expect_eq(v, 2);
    bib_vm_destroy(vm);
}

/* ---- fuel ---------------------------------------------------------------------------- */

/* Kernels of each fuel rule (spec/cli.md, --fuel) on shapes where the work
 * beyond the first unit is known: 594 units in all. */
static void fuel_module(tb_t *b) {
    b->tregs = 9;
    alloc(b, 0, BIB_DTYPE_F32, 2, 64, 128, 0); /* 8192 zeroes: 8 */
    E(b, RNG, 0, 1, 0, 0);                     /* 8 */
    alloc(b, 1, BIB_DTYPE_F32, 2, 128, 32, 0); /* 4 */
    E(b, RNG, 1, 1, 1, 0);                     /* 4 */
    E(b, MATMUL, 2, 0, 1, 0);                  /* 64*32*(128+1) = 264192: 258 */
    alloc(b, 3, BIB_DTYPE_F32, 3, 16, 4, 32);  /* 2 */
    E(b, RNG, 3, 1, 2, 0);                     /* 2 */
    alloc(b, 4, BIB_DTYPE_F32, 3, 64, 4, 32);  /* 8 */
    E(b, RNG, 4, 1, 3, 0);                     /* 8 */
    alloc(b, 5, BIB_DTYPE_F32, 3, 64, 4, 32);  /* 8 */
    E(b, RNG, 5, 1, 4, 0);                     /* 8 */
    E(b, ATTENTION, 6, 3, 4, 5);               /* 16*4*32*(2*64+1) = 264192: 258 */
    alloc(b, 7, BIB_DTYPE_I32, 1, 16, 0, 0);   /* 0 */
    E(b, GATHER, 8, 0, 7, 0);                  /* 16 + 2*16*128 = 4112: 4 */
    E(b, TADD, 2, 2, 2, 0);                    /* 3*2048: 6 */
    E(b, THASH, 29, 0, 0, 0);                  /* 8 */
    E(b, HALT, 29, 0, 0, 0);
}

ON_EVERY_EXECUTOR(fuel_charges_tensor_work_from_shapes_alike_on_every_executor) {
    tb_t b = {0};
    fuel_module(&b);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 32);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    bib_run_stats_t stats;
    bib_vm_stats(vm, &stats);
    cr_expect_eq(stats.instructions, b.n, "every instruction counts once");
    cr_expect_eq(stats.fuel - stats.instructions, 594, "fuel %" PRIu64 ", instructions %" PRIu64,
                 stats.fuel, stats.instructions);
    bib_vm_destroy(vm);
}

ON_EVERY_EXECUTOR(fuel_short_of_a_kernel_traps_before_it_changes_its_result) {
    tb_t b = {.tregs = 2};
    decl(&b, "y", 0, BIB_TENSOR_OUTPUT, BIB_DTYPE_F32, 2, (int64_t[]){64, 128}, NULL);
    alloc(&b, 0, BIB_DTYPE_F32, 2, 64, 128, 0); /* 2 LDIs, ALLOC: 3 + 8 */
    ldf(&b, 1, 2.0);
    E(&b, FILL, 0, 1, 0, 0); /* 9: runs */
    E(&b, EXP, 0, 0, 0, 0);  /* 1 + 16384/1024 = 17: left 16 of 37 */
    E(&b, HALT, 0, 0, 0, 0);
    bib_options_t opt;
    bib_options_init(&opt);
    opt.backend = backend;
    opt.fuel = 3 + 8 + 1 + 9 + 16;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&opt, &vm), BIB_OK);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_TRAP, "trap at pc 5 (EXP t0, t0): fuel exhausted (EXP costs 17");
    bib_run_stats_t stats;
    bib_vm_stats(vm, &stats);
    cr_expect_eq(stats.instructions, 5);
    cr_expect_eq(stats.fuel, 5 + 8 + 8);
    cr_expect_eq(get_f(vm, "y", 0), 2.0, "EXP did not run");
    bib_vm_destroy(vm);
}

/* ---- memory cap --------------------------------------------------------------------- */

ON_EVERY_EXECUTOR(running_out_of_memory_traps_naming_the_tensor_and_the_vm_stays_usable) {
    tb_t b = {.tregs = 3};
    decl(&b, "n", 0, BIB_TENSOR_INPUT, BIB_DTYPE_I32, 1, (int64_t[]){1}, NULL);
    E(&b, LDI, 1, 0, 0, 0);
    E(&b, TGET, 20, 0, 1, 0);
    E(&b, MOV, 21, 20, 0, 0);
    E(&b, ALLOC, 1, BIB_DTYPE_F32, 20, 2);
    E(&b, RELU, 2, 1, 0, 0);
    E(&b, DIM, 3, 2, 0, 0);
    E(&b, HALT, 3, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 6u << 20);
    load(vm, &b, 32);
    int32_t n = 4000; /* 64 MB */
    cr_assert_eq(bib_vm_set_input(vm, "n", BIB_DTYPE_I32, 1, (uint32_t[]){1}, &n), BIB_OK);
    expect_trap(vm, BIB_E_NOMEM, "out of memory allocating t1 (f32[4000,4000], 64000000 bytes)");
    n = 1000; /* 4 MB: the ALLOC fits, its RELU result does not */
    cr_assert_eq(bib_vm_set_input(vm, "n", BIB_DTYPE_I32, 1, (uint32_t[]){1}, &n), BIB_OK);
    expect_trap(vm, BIB_E_NOMEM, "out of memory allocating t2 (f32[1000,1000], 4000000 bytes)");
    n = 100;
    cr_assert_eq(bib_vm_set_input(vm, "n", BIB_DTYPE_I32, 1, (uint32_t[]){1}, &n), BIB_OK);
    int64_t v = 0;
    cr_assert_eq(run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_expect_eq(v, 100);
    bib_run_stats_t stats;
    bib_vm_stats(vm, &stats);
    cr_expect_geq(stats.peak_memory, 2 * 100 * 100 * 4);
    bib_vm_destroy(vm);
}

Test(cpu, a_shape_too_large_to_hold_is_named_whole_at_the_largest_rank_and_sizes) {
    tb_t b = {.tregs = 1};
    for (uint32_t i = 0; i < BIB_MAX_RANK; i++)
        E(&b, LDI, 20 + i, 2147483647u, 0, 0);
    E(&b, ALLOC, 0, BIB_DTYPE_F32, 20, BIB_MAX_RANK);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    expect_trap(vm, BIB_E_NOMEM,
                "t0 would be f32[2147483647,2147483647,2147483647,2147483647,2147483647,"
                "2147483647], over 2^62 bytes");
    bib_vm_destroy(vm);
}

/* ---- inputs, outputs, constants ---------------------------------------------------- */

static void io_module(tb_t *b) {
    b->tregs = 4;
    b->dim_names[0] = "n";
    b->ndims = 1;
    decl(b, "x", 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 2, (int64_t[]){BIB_DIM_SYMBOL(0), 3}, NULL);
    decl(b, "w", 1, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 1, (int64_t[]){BIB_DIM_SYMBOL(0)}, NULL);
    decl(b, "y", 2, BIB_TENSOR_OUTPUT, BIB_DTYPE_F32, 2, (int64_t[]){BIB_DIM_SYMBOL(0), 3}, NULL);
    decl(b, "never", 3, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    E(b, RELU, 2, 0, 0, 0);
    E(b, HALT, 0, 0, 0, 0);
}

Test(cpu, set_input_rejects_wrong_names_dtypes_and_shapes_naming_both_shapes) {
    tb_t b = {0};
    io_module(&b);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 8);
    float data[12] = {0};
    cr_expect_eq(bib_vm_set_input(vm, "z", BIB_DTYPE_F32, 1, (uint32_t[]){3}, data), BIB_E_USAGE);
    cr_expect(strstr(bib_vm_error(vm), "no input 'z' (its inputs: x, w)") != NULL, "%s",
              bib_vm_error(vm));
    cr_expect_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_I32, 2, (uint32_t[]){2, 3}, data),
                 BIB_E_USAGE);
    cr_expect(strstr(bib_vm_error(vm), "input 'x': expected f32[n,3], given i32[2,3]") != NULL,
              "%s", bib_vm_error(vm));
    cr_expect_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){2, 4}, data),
                 BIB_E_USAGE);
    cr_expect(strstr(bib_vm_error(vm), "expected f32[n,3], given f32[2,4]") != NULL, "%s",
              bib_vm_error(vm));
    cr_expect_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 1, (uint32_t[]){3}, data), BIB_E_USAGE);
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){4, 3}, data), BIB_OK);
    cr_expect_eq(bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, (uint32_t[]){5}, data), BIB_E_USAGE);
    cr_expect(strstr(bib_vm_error(vm), "input 'w': expected f32[n] where n = 4, given f32[5]") !=
                  NULL,
              "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(cpu, inputs_sharing_a_dimension_take_a_new_size_on_a_kept_vm) {
    tb_t b = {0};
    io_module(&b);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 8);
    float data[12] = {0};
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){2, 3}, data), BIB_OK);
    cr_assert_eq(bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, (uint32_t[]){2}, data), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    /* n = 4 now, in either order: the inputs of the last run do not hold
       n at 2. */
    cr_assert_eq(bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, (uint32_t[]){4}, data), BIB_OK, "%s",
                 bib_vm_error(vm));
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){4, 3}, data), BIB_OK,
                 "%s", bib_vm_error(vm));
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    uint32_t rank, dims[BIB_MAX_RANK];
    bib_dtype_t dt;
    const void *y;
    cr_assert_eq(bib_vm_get_output(vm, "y", &dt, &rank, dims, &y), BIB_OK);
    cr_expect_eq(dims[0], 4);
    /* Given together, they are still checked together. */
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){3, 3}, data), BIB_OK);
    cr_expect_eq(bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, (uint32_t[]){2}, data), BIB_E_USAGE);
    cr_expect(strstr(bib_vm_error(vm), "input 'w': expected f32[n] where n = 3, given f32[2]") !=
                  NULL,
              "%s", bib_vm_error(vm));
    /* Only x given anew: the run names w, kept from the run before. */
    cr_expect_eq(run(vm, NULL), BIB_E_USAGE);
    cr_expect_str_eq(bib_vm_error(vm), "input 'w' (kept from an earlier run: give it again): "
                                       "expected f32[n] where n = 3, given f32[4]");
    cr_assert_eq(bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, (uint32_t[]){3}, data), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    /* A NULL dims is named as such. */
    cr_expect_eq(bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, NULL, data), BIB_E_USAGE);
    cr_expect_str_eq(bib_vm_error(vm), "input 'w': dims is NULL for rank 1");
    bib_vm_destroy(vm);
}

Test(cpu, a_missing_input_fails_the_run_naming_it) {
    tb_t b = {0};
    io_module(&b);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 8);
    float data[12] = {0};
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){4, 3}, data), BIB_OK);
    cr_expect_eq(run(vm, NULL), BIB_E_USAGE);
    cr_expect_str_eq(bib_vm_error(vm), "input 'w' was not given");
    bib_vm_destroy(vm);
}

Test(cpu, outputs_are_readable_after_the_run_and_checked) {
    tb_t b = {0};
    io_module(&b);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 8);
    float x[6] = {-1, 2, -3, 4, -5, 6}, w[2] = {0};
    const void *data;
    bib_dtype_t dt;
    uint32_t rank, dims[BIB_MAX_RANK];
    cr_expect_eq(bib_vm_get_output(vm, "y", &dt, &rank, dims, &data), BIB_E_STATE);
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){2, 3}, x), BIB_OK);
    cr_assert_eq(bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, (uint32_t[]){2}, w), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(bib_vm_get_output(vm, "y", &dt, &rank, dims, &data), BIB_OK, "%s",
                 bib_vm_error(vm));
    cr_expect_eq(dt, BIB_DTYPE_F32);
    cr_expect_eq(rank, 2);
    cr_expect_eq(dims[0], 2);
    cr_expect_eq(dims[1], 3);
    cr_expect_eq(((const float *)data)[3], 4);
    cr_expect_eq(((const float *)data)[2], 0);
    cr_expect_eq(bib_vm_get_output(vm, "never", &dt, &rank, dims, &data), BIB_E_STATE);
    cr_expect(strstr(bib_vm_error(vm), "output 'never': t3 is empty after the run") != NULL, "%s",
              bib_vm_error(vm));
    cr_expect_eq(bib_vm_get_output(vm, "x", &dt, &rank, dims, &data), BIB_E_USAGE);
    /* tensor_info describes the declarations. */
    cr_assert_eq(bib_vm_tensor_count(vm), 4);
    bib_tensor_info_t info;
    cr_assert_eq(bib_vm_tensor_info(vm, 0, &info), BIB_OK);
    cr_expect_str_eq(info.name, "x");
    cr_expect(info.is_input && !info.is_output);
    cr_expect_eq(info.dims[0], -1);
    cr_expect_eq(info.dims[1], 3);
    bib_vm_destroy(vm);
}

Test(cpu, an_input_changed_by_the_program_is_fresh_again_on_the_next_run) {
    static const float c[2] = {1, 2};
    tb_t b = {.tregs = 2};
    decl(&b, "x", 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 1, (int64_t[]){2}, NULL);
    decl(&b, "k", 1, BIB_TENSOR_CONST, BIB_DTYPE_F32, 1, (int64_t[]){2}, c);
    E(&b, LDI, 1, 0, 0, 0);
    E(&b, TGET, 2, 0, 1, 0);
    E(&b, TGET, 3, 1, 1, 0);
    E(&b, FADD, 4, 2, 3, 0);
    ldf(&b, 5, 100);
    E(&b, FILL, 0, 5, 0, 0);
    E(&b, FILL, 1, 5, 0, 0);
    E(&b, FTOI, 6, 4, 0, 0);
    E(&b, HALT, 6, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 8);
    float x[2] = {5, 6};
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 1, (uint32_t[]){2}, x), BIB_OK);
    for (int i = 0; i < 2; i++) {
        int64_t v = 0;
        cr_assert_eq(run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
        cr_expect_eq(v, 6, "run %d", i);
    }
    bib_vm_destroy(vm);
}

/* Inputs and constants are shared, not copied, at run start (vm/tensor.h):
   the run's tensor is the kept input's bytes, or the module's, until a write
   gives it a copy of its own. */
Test(cpu, a_run_shares_the_kept_inputs_and_the_module_constants_bytes) {
    static const float c[4] = {1, 2, 3, 4};
    tb_t b = {.tregs = 2};
    decl(&b, "x", 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 1, (int64_t[]){1024}, NULL);
    decl(&b, "k", 1, BIB_TENSOR_CONST, BIB_DTYPE_F32, 1, (int64_t[]){4}, c);
    hash_store(&b, 0, 0);
    hash_store(&b, 1, 1);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    static float x[1024];
    for (int i = 0; i < 1024; i++)
        x[i] = (float)i;
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 1, (uint32_t[]){1024}, x), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    const bib_tensor_state_t *ts = &vm->tensor;
    cr_expect_eq(ts->regs[0].storage->host, ts->inputs[0].kept->data,
                 "the run copied the input instead of sharing the kept bytes");
    cr_expect_eq(ts->regs[1].storage->host, vm->module->tensors[1].init,
                 "the run copied the constant instead of sharing the module's bytes");
    /* Charged to the cap as copies would be. */
    bib_run_stats_t stats;
    bib_vm_stats(vm, &stats);
    cr_expect_geq(stats.peak_memory, sizeof x + sizeof c);
    bib_vm_destroy(vm);
}

/* Each way a program writes a tensor, as the first write to an input's
   register and to a constant's: the run sees the write, and the next run
   starts again from the value given and the module's bytes. */
enum { WRITE_RELU, WRITE_SOFTMAX, WRITE_MATMUL, WRITE_COPY, WRITE_FILL, WRITE_TSET, WRITE__COUNT };

static void write_in_place(tb_t *b, int kind, uint32_t t) {
    switch (kind) {
    case WRITE_RELU: /* elementwise: the result written where the operand is */
        E(b, RELU, t, t, 0, 0);
        break;
    case WRITE_SOFTMAX: /* through a temporary that replaces the buffer */
        E(b, SOFTMAX, t, t, 0, 0);
        break;
    case WRITE_MATMUL:
        E(b, MATMUL, t, t, t, 0);
        break;
    case WRITE_COPY: /* a live destination that no operand shares */
        E(b, COPY, t, 3, 0, 0);
        break;
    case WRITE_FILL:
        ldf(b, 6, -0.5);
        E(b, FILL, t, 6, 0, 0);
        break;
    default: /* one element, on the host */
        E(b, LDI, 5, 4, 0, 0);
        ldf(b, 6, 9.5);
        E(b, TSET, t, 5, 6, 0);
        break;
    }
}

ON_EVERY_EXECUTOR(writing_an_input_or_a_constant_in_place_leaves_them_for_the_next_run) {
    static const float c[9] = {1, -2, 3, -4, 5, -6, 7, -8, 9};
    const float x[9] = {-1, 2, -3, 4, -5, 6, -7, 8, -9};
    const uint32_t dims[2] = {3, 3};
    const uint64_t hx = bib_tensor_hash(BIB_DTYPE_F32, 2, dims, x, sizeof x);
    const uint64_t hc = bib_tensor_hash(BIB_DTYPE_F32, 2, dims, c, sizeof c);
    for (int kind = 0; kind < WRITE__COUNT; kind++) {
        tb_t b = {.tregs = 4};
        decl(&b, "x", 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 2, D3x3, NULL);
        decl(&b, "k", 1, BIB_TENSOR_CONST, BIB_DTYPE_F32, 2, D3x3, c);
        decl(&b, "y", 2, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
        alloc(&b, 3, BIB_DTYPE_F32, 2, 3, 3, 0); /* t3: 0.25 everywhere, COPY's source */
        ldf(&b, 7, 0.25);
        E(&b, FILL, 3, 7, 0, 0);
        hash_store(&b, 0, 0); /* what the run starts from */
        hash_store(&b, 1, 1);
        write_in_place(&b, kind, 0);
        write_in_place(&b, kind, 1);
        hash_store(&b, 0, 2); /* what it wrote */
        hash_store(&b, 1, 3);
        E(&b, COPY, 2, 0, 0, 0);
        E(&b, HALT, 0, 0, 0, 0);
        bib_vm_t *vm = vm_on(backend, 0);
        load(vm, &b, 32);
        cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, dims, x), BIB_OK);
        uint64_t written[2] = {0, 0};
        for (int r = 0; r < 2; r++) {
            cr_assert_eq(run(vm, NULL), BIB_OK, "write %d, run %d: %s", kind, r, bib_vm_error(vm));
            const uint64_t *h = (const uint64_t *)bib_vm_memory(vm, NULL);
            cr_expect_eq(h[0], hx, "write %d: run %d did not start from the input given", kind, r);
            cr_expect_eq(h[1], hc, "write %d: run %d did not start from the module's constant",
                         kind, r);
            cr_expect_neq(h[2], hx, "write %d changed nothing", kind);
            cr_expect_neq(h[3], hc, "write %d changed nothing", kind);
            if (r == 0) {
                written[0] = h[2];
                written[1] = h[3];
            }
            cr_expect(h[2] == written[0] && h[3] == written[1],
                      "write %d gave other bits on the second run", kind);
            if (kind == WRITE_COPY)
                cr_expect_eq(get_f(vm, "y", 0), 0.25);
            cr_expect_eq(memcmp(vm->tensor.inputs[0].kept->data, x, sizeof x), 0,
                         "write %d: run %d changed the kept input", kind, r);
            cr_expect_eq(memcmp(vm->module->tensors[1].init, c, sizeof c), 0,
                         "write %d: run %d changed the module's constant", kind, r);
        }
        bib_vm_destroy(vm);
    }
}

/* Collectives write their destination on the host; alone, in place, they
   leave the value as it is, and the kept input too. */
Test(cpu, collectives_in_place_on_an_input_take_a_copy_of_its_own) {
    tb_t b = {.tregs = 1};
    decl(&b, "x", 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 2, D2x3, NULL);
    E(&b, ALLREDUCE, 0, 0, 0, 0);
    E(&b, ALLGATHER, 0, 0, 0, 0);
    E(&b, LDI, 1, 0, 0, 0);
    E(&b, BROADCAST, 0, 1, 0, 0);
    hash_store(&b, 0, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 32);
    const float x[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){2, 3}, x), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    const uint64_t *h = (const uint64_t *)bib_vm_memory(vm, NULL);
    cr_expect_eq(h[0], bib_tensor_hash(BIB_DTYPE_F32, 2, (uint32_t[]){2, 3}, x, sizeof x));
    cr_expect_null(vm->tensor.regs[0].storage->shared, "t0 was written while shared");
    cr_expect_neq(vm->tensor.regs[0].storage->host, vm->tensor.inputs[0].kept->data);
    cr_expect_eq(memcmp(vm->tensor.inputs[0].kept->data, x, sizeof x), 0);
    bib_vm_destroy(vm);
}

/* An output read after its input is given anew (bib_vm_get_output's data
   lives until the next run) is the run's value, not the new one. */
Test(cpu, an_output_of_an_input_register_outlives_the_input_given_anew) {
    tb_t b = {.tregs = 1};
    decl(&b, "x", 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 1, (int64_t[]){4}, NULL);
    decl(&b, "y", 0, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on("cpu", 0);
    load(vm, &b, 8);
    const float x[4] = {1, 2, 3, 4}, x2[4] = {5, 6, 7, 8};
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 1, (uint32_t[]){4}, x), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    const void *before;
    cr_assert_eq(bib_vm_get_output(vm, "y", NULL, NULL, NULL, &before), BIB_OK);
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 1, (uint32_t[]){4}, x2), BIB_OK);
    cr_expect_eq(memcmp(before, x, sizeof x), 0, "the last run's output changed");
    const void *after;
    cr_assert_eq(bib_vm_get_output(vm, "y", NULL, NULL, NULL, &after), BIB_OK);
    cr_expect_eq(memcmp(after, x, sizeof x), 0);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(bib_vm_get_output(vm, "y", NULL, NULL, NULL, &after), BIB_OK);
    cr_expect_eq(memcmp(after, x2, sizeof x2), 0);
    bib_vm_destroy(vm);
}

/* ---- executors --------------------------------------------------------------------- */

Test(cpu, unknown_and_absent_executors_are_refused_with_a_reason) {
    tb_t b = {0};
    io_module(&b);
    /* An unknown name is a mistake in the options, refused at load. */
    bib_vm_t *vm = vm_on("tpu", 0);
    cr_expect_eq(bib_vm_load_module(vm, finish(&b, 8), "t"), BIB_E_USAGE);
    cr_expect(strstr(bib_vm_error(vm), "unknown executor 'tpu'") != NULL, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    /* A known executor this machine lacks is refused when the run needs it;
       where the CUDA executor runs, there is nothing to refuse. */
    vm = vm_on("cuda", 0);
    load(vm, &b, 8);
    float x[3] = {0}, w[1] = {0};
    bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){1, 3}, x);
    bib_vm_set_input(vm, "w", BIB_DTYPE_F32, 1, (uint32_t[]){1}, w);
    bib_status_t st = run(vm, NULL);
    char why[512];
    snprintf(why, sizeof why, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    if (st == BIB_OK) {
        printf("SKIP: the CUDA executor runs here, so its absence cannot be tested\n");
        cr_skip_test("SKIP: the CUDA executor runs here");
    }
    cr_expect_eq(st, BIB_E_UNAVAILABLE, "%s", why);
    cr_expect(strstr(why, "executor 'cuda' is not available") != NULL, "%s", why);
}

Test(cpu, a_program_without_tensors_runs_whatever_gpu_executor_is_named) {
    tb_t b = {0};
    E(&b, LDI, 0, 42, 0, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on("cuda", 0);
    load(vm, &b, 8);
    int64_t v = 0;
    cr_expect_eq(run(vm, &v), BIB_OK, "%s", bib_vm_error(vm));
    cr_expect_eq(v, 42);
    bib_vm_destroy(vm);
}

/* A chain of kernels on an input: with a GPU executor, the input goes up
 * once, nothing comes back until the host reads the output, and reading it
 * twice downloads once. On the CPU nothing is ever copied. */
ON_EVERY_EXECUTOR(copies_are_lazy_no_round_trip_per_opcode) {
    tb_t b = {.tregs = 3};
    decl(&b, "x", 0, BIB_TENSOR_INPUT, BIB_DTYPE_F32, 2, (int64_t[]){BIB_DIM_ANY, 16}, NULL);
    decl(&b, "y", 1, BIB_TENSOR_OUTPUT, 0, 0, NULL, NULL);
    E(&b, RELU, 1, 0, 0, 0);
    E(&b, LDI, 9, 10, 0, 0);
    uint32_t top = b.n;
    E(&b, TADD, 2, 1, 0, 0);
    E(&b, SIGMOID, 1, 2, 0, 0);
    E(&b, ADDI, 9, 9, -1, 0);
    E(&b, JNZ, 9, top, 0, 0);
    E(&b, HALT, 0, 0, 0, 0);
    bib_vm_t *vm = vm_on(backend, 0);
    load(vm, &b, 16);
    float x[64 * 16];
    for (int i = 0; i < 64 * 16; i++)
        x[i] = (float)(i % 7) - 3;
    cr_assert_eq(bib_vm_set_input(vm, "x", BIB_DTYPE_F32, 2, (uint32_t[]){64, 16}, x), BIB_OK);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    const bib_tensor_stats_t *s = &vm->tensor.stats;
    bool gpu = strcmp(backend, "cpu") != 0;
    cr_expect_eq(s->kernels[gpu ? BIB_PLACE_DEVICE : BIB_PLACE_HOST], 21);
    cr_expect_eq(s->uploads, gpu ? 1 : 0, "uploads %" PRIu64, s->uploads);
    cr_expect_eq(s->downloads, 0, "downloads %" PRIu64, s->downloads);
    get_f(vm, "y", 0);
    get_f(vm, "y", 1);
    cr_expect_eq(s->downloads, gpu ? 1 : 0, "downloads after two reads %" PRIu64, s->downloads);
    cr_expect_eq(s->download_bytes, gpu ? 64 * 16 * 4 : 0);
    bib_vm_destroy(vm);
}

/* ---- traces ------------------------------------------------------------------------- */

static char *trace_of(const char *backend, bib_trace_format_t format) {
    tb_t b = {.tregs = 3};
    alloc(&b, 0, BIB_DTYPE_F32, 2, 3, 4, 0);
    E(&b, RNG, 0, 1, 0, 0);
    alloc(&b, 1, BIB_DTYPE_F32, 2, 4, 2, 0);
    E(&b, RNG, 1, 1, 1, 0);
    E(&b, MATMUL, 2, 0, 1, 0);
    E(&b, THASH, 3, 2, 0, 0);
    E(&b, HALT, 0, 0, 0, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bib_options_t opt;
    bib_options_init(&opt);
    opt.backend = backend;
    opt.trace_format = format;
    opt.trace = f;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&opt, &vm), BIB_OK);
    load(vm, &b, 32);
    cr_assert_eq(run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
    fclose(f);
    return text;
}

Test(cpu, trace_lines_show_shapes_executor_and_result_hash) {
    char *text = trace_of("cpu", BIB_TRACE_TEXT);
    cr_expect(strstr(text, "MATMUL t2, t0, t1") != NULL, "%s", text);
    cr_expect(strstr(text, "t2=f32[3,2] t0=f32[3,4] t1=f32[4,2] on cpu hash=") != NULL, "%s", text);
    cr_expect(strstr(text, "ALLOC t0, f32, r20, 2") != NULL, "%s", text);
    free(text);
    text = trace_of("cpu", BIB_TRACE_JSON);
    cr_expect(strstr(text, "\"executor\":\"cpu\",\"shapes\":{\"t2\":\"f32[3,2]\",\"t0\":"
                           "\"f32[3,4]\",\"t1\":\"f32[4,2]\"},\"shape\":[3,2],\"hash\":\"") != NULL,
              "%s", text);
    free(text);
}

static void replace_all(char *s, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to);
    for (char *p = strstr(s, from); p != NULL; p = strstr(p + nt, from)) {
        memmove(p + nt, p + nf, strlen(p + nf) + 1);
        memcpy(p, to, nt);
    }
}

Test(vulkan, traces_on_two_executors_differ_only_in_executor_names) {
    need("vulkan");
    char *a = trace_of("cpu", BIB_TRACE_TEXT);
    char *b = trace_of("vulkan", BIB_TRACE_TEXT);
    cr_expect(strstr(b, " on vulkan hash=") != NULL, "%s", b);
    replace_all(b, " on vulkan ", " on cpu ");
    cr_expect_str_eq(a, b);
    free(a);
    free(b);
}
