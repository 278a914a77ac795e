/* tests/unit/test_cuda.c: the CUDA executor against the CPU executor.
 *
 * Suite cuda_init runs everywhere: start-up without a driver (a library
 * that is missing, one that is no CUDA driver, the toolkit's stub whose
 * cuInit fails) must return BIB_E_UNAVAILABLE with a reason and crash
 * nothing. Suite cuda needs a GPU: every kernel runs on both executors with
 * the same inputs (shapes 1, 7, 33, 1023, non-square and non-tile-multiple;
 * -0, +-Inf, NaN, denormals, exp arguments beyond +-100) and must give the
 * same bits; every device buffer carries guard words that must survive each
 * kernel; running out of device memory is a clean BIB_E_NOMEM. Without a
 * GPU (or in a build without nvcc) each of its tests prints "SKIP: <reason>"
 * and is skipped, never passed.
 *
 * User kernels (GPU_LAUNCH's program_create / program_dispatch /
 * program_destroy / submit, spec/device-code.md) are tested three ways:
 * cuda_init checks that they refuse a missing executor cleanly; cuda_mock
 * runs them against the mock driver (backends/cuda/testing, built next to
 * this binary as libcuda_mock.so), which records what cuLaunchKernel was
 * given, so the parameter marshalling, the JIT-log and entry messages and
 * the module life cycle are checked without a GPU; suite cuda runs PTX on
 * the real device (a kernel that writes back its scalar arguments, saxpy
 * against the CPU, bad PTX, a wrong entry, an invalid launch).
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#ifdef BIB_HAVE_CUDA
#include "backends/cuda/cuda.h"
#include "backends/cuda/testing/cu_mock_driver.h"
#endif

#ifndef BIB_HAVE_CUDA

static void skip_unbuilt(void) {
    printf("SKIP: built without nvcc: the CUDA executor is not compiled in\n");
    cr_skip_test("built without nvcc: the CUDA executor is not compiled in");
}

TestSuite(cuda_init, .init = skip_unbuilt);
TestSuite(cuda, .init = skip_unbuilt);

Test(cuda_init, executor_is_compiled_in) {}

Test(cuda, kernels_match_cpu) {}

#else

#define GUARD 64 /* guard words on each side of a device tensor */
#define SENTINEL 0xDEADBEEFu

/* ---- start-up without a driver (runs everywhere) ------------------------ */

TestSuite(cuda_init);

static bib_status_t init_with_library(const char *library, bib_executor_t **ex, char *why,
                                      size_t why_len) {
    if (library)
        setenv("BIB_CUDA_LIBRARY", library, 1);
    else
        unsetenv("BIB_CUDA_LIBRARY");
    bib_executor_config_t cfg = {0};
    bib_status_t st = bib_cuda_executor.init(&cfg, ex, why, why_len);
    unsetenv("BIB_CUDA_LIBRARY");
    return st;
}

Test(cuda_init, missing_driver_library_is_unavailable_with_reason) {
    bib_executor_t *ex = (bib_executor_t *)1;
    char why[256] = "";
    cr_assert_eq(init_with_library("libcuda-bib-test-absent.so.1", &ex, why, sizeof why),
                 BIB_E_UNAVAILABLE);
    cr_assert_null(ex);
    cr_assert_str_eq(why, "libcuda-bib-test-absent.so.1 not found: no NVIDIA driver");
}

Test(cuda_init, library_that_is_no_cuda_driver_is_unavailable_with_reason) {
    bib_executor_t *ex = (bib_executor_t *)1;
    char why[256] = "";
    cr_assert_eq(init_with_library("libz.so.1", &ex, why, sizeof why), BIB_E_UNAVAILABLE);
    cr_assert_null(ex);
    cr_assert(strstr(why, "libz.so.1 has no cuGetErrorName"), "%s", why);
}

Test(cuda_init, stub_driver_reports_cuinit_failure_by_name) {
    static const char *stubs[] = {"/usr/local/cuda/lib64/stubs/libcuda.so",
                                  "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so"};
    const char *stub = NULL;
    for (size_t i = 0; i < sizeof stubs / sizeof stubs[0] && !stub; i++)
        if (access(stubs[i], R_OK) == 0)
            stub = stubs[i];
    if (!stub) {
        printf("SKIP: no CUDA toolkit stub library here\n");
        cr_skip_test("no CUDA toolkit stub library here");
    }
    bib_executor_t *ex = (bib_executor_t *)1;
    char why[256] = "";
    cr_assert_eq(init_with_library(stub, &ex, why, sizeof why), BIB_E_UNAVAILABLE);
    cr_assert_null(ex);
    cr_assert_str_eq(why, "cuInit failed: CUDA_ERROR_STUB_LIBRARY");
}

Test(cuda_init, default_driver_is_available_or_says_why) {
    bib_executor_t *ex = NULL;
    char why[256] = "";
    bib_status_t st = init_with_library(NULL, &ex, why, sizeof why);
    if (st == BIB_OK) {
        cr_assert_not_null(ex);
        printf("cuda available: %s\n", bib_cuda_executor.describe(ex));
        bib_cuda_executor.shutdown(ex);
        return;
    }
    printf("cuda unavailable: %s\n", why);
    cr_assert_eq(st, BIB_E_UNAVAILABLE, "status %d (%s)", st, why);
    cr_assert_null(ex);
    cr_assert(strstr(why, "libcuda.so.1 not found: no NVIDIA driver") ||
                  strstr(why, "cuInit failed: CUDA_ERROR_") || strstr(why, "no CUDA device"),
              "unexpected reason: '%s'", why);
}

Test(cuda_init, init_survives_a_tiny_reason_buffer) {
    bib_executor_t *ex = NULL;
    char why[8] = "xxxxxxx";
    bib_status_t st = init_with_library("libcuda-bib-test-absent.so.1", &ex, why, sizeof why);
    cr_assert_eq(st, BIB_E_UNAVAILABLE);
    cr_assert_eq(strlen(why), 7u, "the reason is cut to the buffer: '%s'", why);
    cr_assert_eq(init_with_library("libcuda-bib-test-absent.so.1", &ex, NULL, 0),
                 BIB_E_UNAVAILABLE);
}

Test(cuda_init, ops_table_is_complete) {
    cr_assert_str_eq(bib_cuda_executor.name, "cuda");
    cr_assert(bib_cuda_executor.init && bib_cuda_executor.shutdown && bib_cuda_executor.error &&
              bib_cuda_executor.buffer_alloc && bib_cuda_executor.buffer_free &&
              bib_cuda_executor.upload && bib_cuda_executor.download &&
              bib_cuda_executor.synchronize && bib_cuda_executor.memory &&
              bib_cuda_executor.supports && bib_cuda_executor.describe);
    for (int k = 0; k < BIB_KERNEL__COUNT; k++)
        cr_assert_not_null(bib_cuda_executor.kernels[k], "kernel %d has no entry", k);
    bib_cuda_executor.shutdown(NULL);
    cr_assert_str_eq(bib_cuda_executor.error(NULL), "");
}

Test(cuda_init, timing_members_are_present) {
    cr_assert(bib_cuda_executor.timing && bib_cuda_executor.elapsed);
}

Test(cuda_init, program_members_are_present) {
    cr_assert(bib_cuda_executor.program_create && bib_cuda_executor.program_dispatch &&
              bib_cuda_executor.program_destroy && bib_cuda_executor.submit);
}

Test(cuda_init, program_members_refuse_a_missing_executor) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *prog = (void *)1;
    cr_assert_eq(
        ops->program_create(NULL, BIB_PROGRAM_PTX, ".version 7.0", 13, "k", 0, 0, "t", &prog),
        BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    uint32_t one[3] = {1, 1, 1};
    cr_assert_eq(ops->program_dispatch(NULL, NULL, NULL, NULL, 0, NULL, 0, one, one),
                 BIB_E_UNAVAILABLE);
    cr_assert_eq(ops->submit(NULL), BIB_E_UNAVAILABLE);
    ops->program_destroy(NULL, NULL);
}

/* ---- PTX used by the program tests ---------------------------------------- */

/* probe(i, out, l, f, d) writes its scalar arguments into out's bytes:
   i at 0, l at 8, f's bits at 16, d's bits at 24. */
static const char probe_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry probe(.param .u32 pi, .param .u64 pout, .param .u64 pl, .param .f32 pf, "
    ".param .f64 pd)\n"
    "{\n"
    "    .reg .b32 %r<3>;\n"
    "    .reg .b64 %rd<4>;\n"
    "    ld.param.u32 %r1, [pi];\n"
    "    ld.param.u64 %rd1, [pout];\n"
    "    ld.param.u64 %rd2, [pl];\n"
    "    ld.param.b32 %r2, [pf];\n"
    "    ld.param.b64 %rd3, [pd];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    st.global.u32 [%rd1], %r1;\n"
    "    st.global.u64 [%rd1+8], %rd2;\n"
    "    st.global.u32 [%rd1+16], %r2;\n"
    "    st.global.u64 [%rd1+24], %rd3;\n"
    "    ret;\n"
    "}\n";

/* saxpy(x, y, a, n): y[i] = a*x[i] + y[i], rounded after each operation. */
static const char saxpy_ptx[] = ".version 7.0\n"
                                ".target sm_75\n"
                                ".address_size 64\n"
                                ".visible .entry saxpy(.param .u64 px, .param .u64 py, "
                                ".param .f32 pa, .param .u32 pn)\n"
                                "{\n"
                                "    .reg .pred %p<2>;\n"
                                "    .reg .f32 %f<5>;\n"
                                "    .reg .b32 %r<6>;\n"
                                "    .reg .b64 %rd<6>;\n"
                                "    ld.param.u64 %rd1, [px];\n"
                                "    ld.param.u64 %rd2, [py];\n"
                                "    ld.param.f32 %f1, [pa];\n"
                                "    ld.param.u32 %r1, [pn];\n"
                                "    mov.u32 %r2, %ctaid.x;\n"
                                "    mov.u32 %r3, %ntid.x;\n"
                                "    mov.u32 %r4, %tid.x;\n"
                                "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
                                "    setp.ge.u32 %p1, %r5, %r1;\n"
                                "    @%p1 bra DONE;\n"
                                "    cvta.to.global.u64 %rd1, %rd1;\n"
                                "    cvta.to.global.u64 %rd2, %rd2;\n"
                                "    mul.wide.u32 %rd3, %r5, 4;\n"
                                "    add.s64 %rd4, %rd1, %rd3;\n"
                                "    add.s64 %rd5, %rd2, %rd3;\n"
                                "    ld.global.f32 %f2, [%rd4];\n"
                                "    ld.global.f32 %f3, [%rd5];\n"
                                "    mul.rn.f32 %f4, %f1, %f2;\n"
                                "    add.rn.f32 %f4, %f4, %f3;\n"
                                "    st.global.f32 [%rd5], %f4;\n"
                                "DONE:\n"
                                "    ret;\n"
                                "}\n";

/* Line 6 is an instruction no PTX has. */
static const char bad_ptx[] = ".version 7.0\n"
                              ".target sm_75\n"
                              ".address_size 64\n"
                              ".visible .entry k(.param .u64 p)\n"
                              "{\n"
                              "    bogus.u32 %r1;\n"
                              "    ret;\n"
                              "}\n";

/* The probe's scalar slots: i (high bytes must be ignored), l, f, d. */
typedef struct probe_args {
    uint8_t slots[4 * 8];
    uint32_t i, f_bits;
    uint64_t l, d_bits;
} probe_args_t;

static probe_args_t probe_args(void) {
    probe_args_t a;
    a.i = 0x11223344u;
    a.l = 0x0102030405060708ull;
    float f = -3.25f;
    double d = 1.0 / 3.0;
    memcpy(&a.f_bits, &f, 4);
    memcpy(&a.d_bits, &d, 8);
    uint64_t slot[4] = {0xAABBCCDD00000000ull | a.i, a.l, 0x5555555500000000ull | a.f_bits,
                        a.d_bits};
    memcpy(a.slots, slot, sizeof slot);
    return a;
}

/* ---- user kernels against the mock driver (runs everywhere) ---------------- */

static bib_executor_t *mock_ex;
static bib_mock_cuda_t *mock;
static char mock_path[4096];

static void mock_init(void) {
    char *exe = mock_path;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof mock_path - 64);
    cr_assert_gt(n, 0);
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    strcpy(slash ? slash + 1 : exe, "libcuda_mock.so");
    if (access(exe, R_OK) != 0) {
        printf("SKIP: no mock driver at %s (make builds it with test_cuda)\n", exe);
        cr_skip_test("no mock driver at %s", exe);
    }
    char why[256] = "";
    cr_assert_eq(init_with_library(exe, &mock_ex, why, sizeof why), BIB_OK, "%s", why);
    void *h = dlopen(exe, RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(h, "the executor has not loaded %s", exe);
    mock = dlsym(h, "bib_mock_cuda");
    cr_assert_not_null(mock);
    dlclose(h);
}

static void mock_fini(void) {
    if (mock_ex)
        bib_cuda_executor.shutdown(mock_ex);
    mock_ex = NULL;
    mock = NULL;
}

TestSuite(cuda_mock, .init = mock_init, .fini = mock_fini);

static bib_status_t create(bib_executor_t *ex, const char *ptx, const char *entry,
                           const char *signature, void **prog) {
    return bib_cuda_executor.program_create(ex, BIB_PROGRAM_PTX, ptx, strlen(ptx) + 1, entry, 0, 0,
                                            signature, prog);
}

Test(cuda_mock, program_create_loads_ptx_and_destroy_unloads_it_after_the_stream) {
    int live = mock->modules_live;
    void *prog = NULL;
    cr_assert_eq(create(mock_ex, saxpy_ptx, "saxpy", "ttfi", &prog), BIB_OK, "%s",
                 bib_cuda_executor.error(mock_ex));
    cr_assert_not_null(prog);
    cr_assert_eq(mock->modules_live, live + 1);
    int syncs = mock->stream_syncs;
    bib_cuda_executor.program_destroy(mock_ex, prog);
    cr_assert_eq(mock->modules_live, live);
    cr_assert_gt(mock->stream_syncs, syncs, "the module was unloaded without waiting");
}

Test(cuda_mock, dispatch_passes_each_parameter_as_its_signature_says) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *prog = NULL, *buf = NULL;
    cr_assert_eq(create(mock_ex, probe_ptx, "probe", "itlfd", &prog), BIB_OK, "%s",
                 ops->error(mock_ex));
    cr_assert_eq(ops->buffer_alloc(mock_ex, 32, &buf), BIB_OK);
    uint32_t marker[8] = {0xFEEDF00Du, 1, 2, 3, 4, 5, 6, 7};
    cr_assert_eq(ops->upload(mock_ex, buf, 0, marker, sizeof marker), BIB_OK);
    probe_args_t a = probe_args();
    uint64_t size = 32;
    uint32_t grid[3] = {3, 2, 1}, block[3] = {32, 4, 1};
    int launches = mock->launches, syncs = mock->stream_syncs;
    cr_assert_eq(
        ops->program_dispatch(mock_ex, prog, &buf, &size, 1, a.slots, sizeof a.slots, grid, block),
        BIB_OK, "%s", ops->error(mock_ex));
    cr_assert_eq(mock->launches, launches + 1);
    cr_assert_eq(mock->stream_syncs, syncs, "a launch must not wait");
    cr_assert_str_eq(mock->last_entry, "probe");
    cr_assert(mock->grid[0] == 3 && mock->grid[1] == 2 && mock->grid[2] == 1);
    cr_assert(mock->block[0] == 32 && mock->block[1] == 4 && mock->block[2] == 1);
    cr_assert_eq(mock->shared, 0u);
    cr_assert_not_null(mock->stream, "launched on the executor's stream, not the default one");
    cr_assert_eq(mock->nparams, 5u);
    uint32_t i, f;
    uint64_t out, l, d;
    memcpy(&i, mock->param[0], 4);
    memcpy(&out, mock->param[1], 8);
    memcpy(&l, mock->param[2], 8);
    memcpy(&f, mock->param[3], 4);
    memcpy(&d, mock->param[4], 8);
    cr_expect_eq(i, a.i, "i: %08x", i);
    cr_expect_eq(l, a.l);
    cr_expect_eq(f, a.f_bits, "f: %08x", f);
    cr_expect_eq(d, a.d_bits);
    /* The mock's device memory is host memory: the pointer leads to the tensor. */
    cr_assert_neq(out, 0);
    cr_expect_eq(memcmp((const void *)(uintptr_t)out, marker, sizeof marker), 0,
                 "the t parameter is not the buffer's device address");
    ops->buffer_free(mock_ex, buf);
    ops->program_destroy(mock_ex, prog);
}

Test(cuda_mock, bad_ptx_reports_the_jit_log_on_one_line) {
    void *prog = (void *)1;
    int live = mock->modules_live;
    cr_assert_eq(create(mock_ex, bad_ptx, "k", "t", &prog), BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    cr_assert_eq(mock->modules_live, live);
    cr_assert_str_eq(bib_cuda_executor.error(mock_ex),
                     "the driver rejected its PTX (cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX): "
                     "ptxas application ptx input, line 6; error : Unknown instruction 'bogus'; "
                     "ptxas fatal : Ptx assembly aborted due to errors");
}

Test(cuda_mock, missing_entry_is_named_and_unloads_the_module) {
    void *prog = (void *)1;
    int live = mock->modules_live;
    cr_assert_eq(create(mock_ex, saxpy_ptx, "nope", "ttfi", &prog), BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    cr_assert_eq(mock->modules_live, live);
    cr_assert_str_eq(bib_cuda_executor.error(mock_ex),
                     "no entry 'nope' in its PTX (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND)");
}

Test(cuda_mock, create_refuses_spirv_ptx_without_its_nul_and_bad_signatures) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *prog = (void *)1;
    uint32_t words[5] = {0x07230203u, 0x00010000u, 0, 1, 0};
    cr_assert_eq(ops->program_create(mock_ex, BIB_PROGRAM_SPIRV, words, sizeof words, "main", 1, 0,
                                     NULL, &prog),
                 BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    cr_assert(strstr(ops->error(mock_ex), "PTX kernels only"), "%s", ops->error(mock_ex));
    cr_assert_eq(ops->program_create(mock_ex, BIB_PROGRAM_PTX, saxpy_ptx, strlen(saxpy_ptx),
                                     "saxpy", 0, 0, "ttfi", &prog),
                 BIB_E_USAGE);
    cr_assert(strstr(ops->error(mock_ex), "ending in its one NUL"), "%s", ops->error(mock_ex));
    cr_assert_eq(create(mock_ex, saxpy_ptx, "saxpy", "ttfx", &prog), BIB_E_USAGE);
    cr_assert(strstr(ops->error(mock_ex), "parameter 3 has type 'x'"), "%s", ops->error(mock_ex));
}

Test(cuda_mock, dispatch_with_the_wrong_argument_counts_is_refused) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *prog = NULL, *buf = NULL;
    cr_assert_eq(create(mock_ex, probe_ptx, "probe", "itlfd", &prog), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(mock_ex, 32, &buf), BIB_OK);
    probe_args_t a = probe_args();
    uint64_t size = 32;
    uint32_t one[3] = {1, 1, 1};
    int launches = mock->launches;
    cr_assert_eq(ops->program_dispatch(mock_ex, prog, &buf, &size, 1, a.slots, 24, one, one),
                 BIB_E_USAGE);
    cr_assert(strstr(ops->error(mock_ex), "takes 1 tensors and 4 other parameters"), "%s",
              ops->error(mock_ex));
    cr_assert_eq(mock->launches, launches);
    ops->buffer_free(mock_ex, buf);
    ops->program_destroy(mock_ex, prog);
}

Test(cuda_mock, launch_error_names_the_kernel_grid_block_and_cuda_error) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *prog = NULL, *buf = NULL;
    cr_assert_eq(create(mock_ex, probe_ptx, "probe", "itlfd", &prog), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(mock_ex, 32, &buf), BIB_OK);
    probe_args_t a = probe_args();
    uint64_t size = 32;
    uint32_t grid[3] = {4, 1, 1}, block[3] = {2048, 1, 1};
    cr_assert_eq(
        ops->program_dispatch(mock_ex, prog, &buf, &size, 1, a.slots, sizeof a.slots, grid, block),
        BIB_E_UNAVAILABLE);
    cr_assert_str_eq(ops->error(mock_ex), "cuLaunchKernel(kernel 'probe', grid 4x1x1, block "
                                          "2048x1x1): CUDA_ERROR_INVALID_VALUE");
    ops->buffer_free(mock_ex, buf);
    ops->program_destroy(mock_ex, prog);
}

Test(cuda_mock, submit_asks_the_stream_without_waiting) {
    int syncs = mock->stream_syncs, queries = mock->stream_queries;
    cr_assert_eq(bib_cuda_executor.submit(mock_ex), BIB_OK, "%s", bib_cuda_executor.error(mock_ex));
    cr_assert_eq(mock->stream_queries, queries + 1);
    cr_assert_eq(mock->stream_syncs, syncs);
}

/* ---- the device timer against the mock driver ------------------------------ */

/* A view of n floats over buf. */
static bib_view_t mock_view(void *buf, uint32_t n) {
    bib_view_t v = {.buf = buf, .dtype = BIB_DTYPE_F32, .rank = 1, .dims = {n}};
    return v;
}

Test(cuda_mock, timing_measures_kernels_and_programs_between_events_not_copies) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *x = NULL, *y = NULL, *prog = NULL;
    cr_assert_eq(ops->buffer_alloc(mock_ex, 64, &x), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(mock_ex, 64, &y), BIB_OK);
    cr_assert_eq(create(mock_ex, saxpy_ptx, "saxpy", "ttfi", &prog), BIB_OK, "%s",
                 ops->error(mock_ex));
    cr_assert_eq(ops->timing(mock_ex, true), BIB_OK, "%s", ops->error(mock_ex));
    int records = mock->event_records;
    float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    /* The upload moves the mock clock by 0.5 ms outside any pair. */
    cr_assert_eq(ops->upload(mock_ex, x, 0, ones, sizeof ones), BIB_OK);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .out = mock_view(y, 16), .f = {2.0f}};
    cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](mock_ex, &fill), BIB_OK, "%s",
                 ops->error(mock_ex)); /* a memset: 0.5 ms */
    bib_call_t relu = {.kernel = BIB_KERNEL_UNARY,
                       .sub = BIB_UNARY_RELU,
                       .out = mock_view(y, 16),
                       .in = {mock_view(x, 16)}};
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](mock_ex, &relu), BIB_OK, "%s",
                 ops->error(mock_ex)); /* a launch: 1 ms */
    uint8_t slots[16] = {0};
    float a = 3.0f;
    int32_t n = 16;
    memcpy(slots, &a, 4);
    memcpy(slots + 8, &n, 4);
    void *bufs[2] = {x, y};
    uint64_t sizes[2] = {64, 64};
    uint32_t grid[3] = {1, 1, 1}, block[3] = {16, 1, 1};
    cr_assert_eq(
        ops->program_dispatch(mock_ex, prog, bufs, sizes, 2, slots, sizeof slots, grid, block),
        BIB_OK, "%s", ops->error(mock_ex)); /* a launch: 1 ms */
    cr_assert_eq(mock->event_records, records + 6, "one pair of events per timed command");
    cr_assert_eq(ops->synchronize(mock_ex), BIB_OK);
    double ms = -1;
    cr_assert_eq(ops->elapsed(mock_ex, &ms), BIB_OK, "%s", ops->error(mock_ex));
    cr_expect_eq(ms, 2.5, "elapsed %.17g ms, want 0.5 + 1 + 1", ms);
    cr_assert_eq(ops->elapsed(mock_ex, &ms), BIB_OK);
    cr_expect_eq(ms, 0.0, "elapsed counts from its last call: %.17g ms", ms);
    cr_assert_eq(ops->timing(mock_ex, false), BIB_OK);
    ops->program_destroy(mock_ex, prog);
    ops->buffer_free(mock_ex, x);
    ops->buffer_free(mock_ex, y);
}

Test(cuda_mock, timing_off_records_no_events_and_keeps_the_time_so_far) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *y = NULL;
    cr_assert_eq(ops->buffer_alloc(mock_ex, 64, &y), BIB_OK);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .out = mock_view(y, 16), .f = {1.0f}};
    int records = mock->event_records;
    cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](mock_ex, &fill), BIB_OK);
    cr_assert_eq(mock->event_records, records, "timing is off by default");
    cr_assert_eq(ops->timing(mock_ex, true), BIB_OK, "%s", ops->error(mock_ex));
    cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](mock_ex, &fill), BIB_OK);
    cr_assert_eq(ops->timing(mock_ex, false), BIB_OK, "%s", ops->error(mock_ex));
    records = mock->event_records;
    cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](mock_ex, &fill), BIB_OK);
    cr_assert_eq(mock->event_records, records, "events recorded after timing(false)");
    double ms = -1;
    cr_assert_eq(ops->elapsed(mock_ex, &ms), BIB_OK, "%s", ops->error(mock_ex));
    cr_expect_eq(ms, 0.5, "the fill timed before timing(false): %.17g ms", ms);
    ops->buffer_free(mock_ex, y);
}

Test(cuda_mock, event_record_failure_fails_the_command_with_the_call_named) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *y = NULL;
    cr_assert_eq(ops->buffer_alloc(mock_ex, 64, &y), BIB_OK);
    cr_assert_eq(ops->timing(mock_ex, true), BIB_OK, "%s", ops->error(mock_ex));
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .out = mock_view(y, 16), .f = {1.0f}};
    mock->fail_event_record = 700;
    bib_status_t st = ops->kernels[BIB_KERNEL_FILL](mock_ex, &fill);
    mock->fail_event_record = 0;
    cr_assert_eq(st, BIB_E_UNAVAILABLE);
    cr_assert_str_eq(ops->error(mock_ex), "cuEventRecord: CUDA_ERROR_ILLEGAL_ADDRESS");
    double ms = -1;
    cr_assert_eq(ops->elapsed(mock_ex, &ms), BIB_OK, "%s", ops->error(mock_ex));
    cr_expect_eq(ms, 0.0);
    ops->timing(mock_ex, false);
    ops->buffer_free(mock_ex, y);
}

Test(cuda_mock, shutdown_destroys_every_timing_event) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    int live = mock->events_live;
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(init_with_library(mock_path, &ex, why, sizeof why), BIB_OK, "%s", why);
    void *y = NULL;
    cr_assert_eq(ops->buffer_alloc(ex, 64, &y), BIB_OK);
    cr_assert_eq(ops->timing(ex, true), BIB_OK, "%s", ops->error(ex));
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .out = mock_view(y, 16), .f = {1.0f}};
    for (int i = 0; i < 40; i++)
        cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](ex, &fill), BIB_OK, "%s", ops->error(ex));
    cr_assert_eq(mock->events_live, live + 80);
    double ms = -1;
    cr_assert_eq(ops->elapsed(ex, &ms), BIB_OK, "%s", ops->error(ex));
    cr_expect_eq(ms, 20.0, "%.17g", ms);
    /* Read events are reused, not made again. */
    cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](ex, &fill), BIB_OK);
    cr_assert_eq(mock->events_live, live + 80);
    ops->buffer_free(ex, y);
    ops->shutdown(ex);
    cr_assert_eq(mock->events_live, live);
}

/* ---- the suite that needs a GPU ------------------------------------------- */

static bib_executor_t *cu, *cpu;

static void suite_init(void) {
    bib_executor_config_t cfg = {.threads = 1, .device = NULL, .validation = true};
    char why[512] = "";
    if (bib_cuda_executor.init(&cfg, &cu, why, sizeof why) != BIB_OK) {
        cu = NULL;
        printf("SKIP: %s\n", why);
        cr_skip_test("no CUDA: %s", why);
    }
    cr_assert_eq(bib_cpu_executor.init(&cfg, &cpu, why, sizeof why), BIB_OK, "cpu init: %s", why);
}

static void suite_fini(void) {
    if (cu)
        bib_cuda_executor.shutdown(cu);
    if (cpu)
        bib_cpu_executor.shutdown(cpu);
    cu = cpu = NULL;
}

TestSuite(cuda, .init = suite_init, .fini = suite_fini);

/* ---- data ---------------------------------------------------------------- */

static uint64_t rng_state = 0x1234567;

static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Uniform in [lo, hi) with a few special values mixed in when special. */
static void fill_data(float *x, size_t n, float lo, float hi, bool special) {
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x00000001u,
        0x807fffffu, 0x00400000u, 0x7f7fffffu, 0xff7fffffu, 0x42b20001u, 0xc2d00001u, 0x3f800000u,
        0xbf800000u, 0x42ca0000u, 0xc2ca0000u, 0x42c80001u, 0xc2c80001u};
    for (size_t i = 0; i < n; i++) {
        float u = (float)(rnd() >> 8) * 0x1p-24f;
        x[i] = lo + (hi - lo) * u;
        if (special && rnd() % 13 == 0)
            x[i] = bits_f(specials[rnd() % (sizeof specials / sizeof specials[0])]);
    }
}

/* ---- running one call on both executors --------------------------------- */

typedef struct tensor {
    const void *data; /* NULL for the output */
    uint32_t dtype;
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
} tensor_t;

static size_t tcount(const tensor_t *t) {
    size_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

/* Words before each tensor: GUARD, plus `shift` to misalign the views. */
static size_t lead_words = GUARD;

/* Runs the call on one executor; returns the status and the output words
 * (with guards) in *words. Inputs and output get sentinel words on each
 * side, checked after the kernel. */
static bib_status_t run_on(const bib_executor_ops_t *ops, bib_executor_t *ex, bib_call_t call,
                           const tensor_t *in, int nin, const tensor_t *out, uint32_t *words,
                           char *err, size_t err_len) {
    void *bufs[4] = {0};
    size_t counts[4];
    const tensor_t *ts[4] = {out, nin > 0 ? &in[0] : NULL, nin > 1 ? &in[1] : NULL,
                             nin > 2 ? &in[2] : NULL};
    const size_t lead = lead_words;
    for (int t = 0; t < 1 + nin; t++) {
        size_t n = tcount(ts[t]);
        counts[t] = n;
        size_t total = n + lead + GUARD;
        uint32_t *host = malloc(total * 4);
        cr_assert(host);
        for (size_t i = 0; i < total; i++)
            host[i] = SENTINEL;
        if (ts[t]->data)
            memcpy(host + lead, ts[t]->data, n * 4);
        cr_assert_eq(ops->buffer_alloc(ex, total * 4, &bufs[t]), BIB_OK, "%s", ops->error(ex));
        cr_assert_eq(ops->upload(ex, bufs[t], 0, host, total * 4), BIB_OK, "%s", ops->error(ex));
        free(host);
        bib_view_t *v = t == 0 ? &call.out : &call.in[t - 1];
        v->buf = bufs[t];
        v->offset = lead;
        v->dtype = ts[t]->dtype;
        v->rank = ts[t]->rank;
        memcpy(v->dims, ts[t]->dims, sizeof v->dims);
    }
    cr_assert(ops->supports(ex, &call), "%s does not support kernel %d", ops->name, call.kernel);
    bib_status_t st = ops->kernels[call.kernel](ex, &call);
    if (st != BIB_OK)
        snprintf(err, err_len, "%s", ops->error(ex));
    cr_assert_eq(ops->synchronize(ex), BIB_OK, "%s", ops->error(ex));
    for (int t = 0; t < 1 + nin; t++) {
        size_t total = counts[t] + lead + GUARD;
        uint32_t *host = t == 0 ? words : malloc(total * 4);
        cr_assert(host);
        cr_assert_eq(ops->download(ex, bufs[t], 0, host, total * 4), BIB_OK, "%s", ops->error(ex));
        for (size_t g = 0; g < lead; g++)
            cr_assert_eq(host[g], SENTINEL, "%s: guard word %zu before tensor %d overwritten",
                         ops->name, g, t);
        for (size_t g = 0; g < GUARD; g++)
            cr_assert_eq(host[lead + counts[t] + g], SENTINEL,
                         "%s: guard word %zu after tensor %d overwritten", ops->name, g, t);
        if (t != 0) {
            cr_assert(memcmp(host + lead, ts[t]->data, counts[t] * 4) == 0,
                      "%s: input %d was modified", ops->name, t - 1);
            free(host);
        }
        ops->buffer_free(ex, bufs[t]);
    }
    return st;
}

/* Runs on both; asserts the same status and, on success, identical bits. */
static void compare(bib_call_t call, const tensor_t *in, int nin, tensor_t out, const char *what) {
    size_t n = tcount(&out), total = n + lead_words + GUARD;
    uint32_t *a = malloc(total * 4), *b = malloc(total * 4);
    cr_assert(a && b);
    char ea[512] = "", eb[512] = "";
    bib_status_t sa = run_on(&bib_cpu_executor, cpu, call, in, nin, &out, a, ea, sizeof ea);
    bib_status_t sb = run_on(&bib_cuda_executor, cu, call, in, nin, &out, b, eb, sizeof eb);
    cr_assert_eq(sa, sb, "%s: cpu status %d (%s), cuda status %d (%s)", what, sa, ea, sb, eb);
    if (sa == BIB_OK) {
        for (size_t i = 0; i < n; i++) {
            uint32_t x = a[lead_words + i], y = b[lead_words + i];
            cr_assert_eq(x, y, "%s: element %zu of %zu: cpu 0x%08x (%g), cuda 0x%08x (%g)", what, i,
                         n, x, (double)bits_f(x), y, (double)bits_f(y));
        }
    } else {
        cr_assert_str_eq(ea, eb, "%s: the executors' messages differ", what);
    }
    free(a);
    free(b);
}

static tensor_t tf(const float *d, uint32_t rank, uint32_t d0, uint32_t d1, uint32_t d2,
                   uint32_t d3) {
    tensor_t t = {d, BIB_DTYPE_F32, rank, {d0, d1, d2, d3}};
    return t;
}

/* ---- the device ------------------------------------------------------------ */

Test(cuda, describe_names_device_capability_memory_and_driver) {
    const char *d = bib_cuda_executor.describe(cu);
    printf("%s\n", d);
    cr_assert(strstr(d, "compute capability") && strstr(d, "GiB") && strstr(d, "driver") &&
                  strstr(d, "SMs"),
              "%s", d);
}

Test(cuda, device_selector_that_matches_nothing_is_unavailable_with_reason) {
    bib_executor_config_t cfg = {.device = "no-such-device-anywhere"};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(bib_cuda_executor.init(&cfg, &ex, why, sizeof why), BIB_E_UNAVAILABLE);
    cr_assert_null(ex);
    cr_assert(strstr(why, "no CUDA device matches 'no-such-device-anywhere'"), "%s", why);
}

Test(cuda, two_executors_live_side_by_side) {
    bib_executor_config_t cfg = {.device = "0"};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(bib_cuda_executor.init(&cfg, &ex, why, sizeof why), BIB_OK, "%s", why);
    void *a, *b;
    uint32_t w = 0x3f800000u, r1 = 0, r2 = 0;
    cr_assert_eq(bib_cuda_executor.buffer_alloc(ex, 4, &a), BIB_OK);
    cr_assert_eq(bib_cuda_executor.buffer_alloc(cu, 4, &b), BIB_OK);
    cr_assert_eq(bib_cuda_executor.upload(ex, a, 0, &w, 4), BIB_OK);
    cr_assert_eq(bib_cuda_executor.upload(cu, b, 0, &w, 4), BIB_OK);
    cr_assert_eq(bib_cuda_executor.download(ex, a, 0, &r1, 4), BIB_OK);
    cr_assert_eq(bib_cuda_executor.download(cu, b, 0, &r2, 4), BIB_OK);
    cr_assert(r1 == w && r2 == w);
    bib_cuda_executor.buffer_free(ex, a);
    bib_cuda_executor.buffer_free(cu, b);
    bib_cuda_executor.shutdown(ex);
}

/* ---- MATMUL -------------------------------------------------------------- */

static void matmul_case(uint32_t m, uint32_t k, uint32_t n, bool bias, bib_act_t act,
                        bool special) {
    float *a = malloc((size_t)m * k * 4 + 4), *b = malloc((size_t)k * n * 4 + 4),
          *c = malloc((size_t)n * 4 + 4);
    cr_assert(a && b && c);
    fill_data(a, (size_t)m * k, -2, 2, special);
    fill_data(b, (size_t)k * n, -2, 2, special);
    fill_data(c, n, -1, 1, special);
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL, .sub = act};
    tensor_t in[3] = {tf(a, 2, m, k, 0, 0), tf(b, 2, k, n, 0, 0), tf(c, 1, n, 0, 0, 0)};
    char what[128];
    snprintf(what, sizeof what, "matmul %ux%ux%u bias=%d act=%d special=%d lead=%zu", m, k, n, bias,
             act, special, lead_words);
    compare(call, in, bias ? 3 : 2, tf(NULL, 2, m, n, 0, 0), what);
    free(a), free(b), free(c);
}

static const uint32_t matmul_shapes[][3] = {
    {1, 1, 1},      {7, 7, 7},      {33, 33, 33},    {1023, 7, 33},  {7, 1023, 33},
    {33, 7, 1023},  {65, 130, 129}, {128, 64, 256},  {3, 0, 5},      {129, 17, 257},
    {256, 32, 128}, {4, 4100, 12},  {130, 259, 131}, {300, 72, 200}, {1, 64, 1024}};

static void matmul_all_shapes(void) {
    for (size_t s = 0; s < sizeof matmul_shapes / sizeof matmul_shapes[0]; s++)
        matmul_case(matmul_shapes[s][0], matmul_shapes[s][1], matmul_shapes[s][2], false,
                    BIB_ACT_NONE, false);
}

Test(cuda, matmul_matches_cpu_over_odd_shapes) {
    matmul_all_shapes();
}

Test(cuda, matmul_matches_cpu_on_misaligned_views) {
    /* An odd lead moves every base off 16 bytes: the float4 kernels step aside. */
    lead_words = GUARD + 1;
    matmul_all_shapes();
    matmul_case(64, 64, 64, true, BIB_ACT_GELU, true);
    lead_words = GUARD;
}

Test(cuda, matmul_with_bias_and_activations_matches_cpu) {
    matmul_case(33, 65, 31, true, BIB_ACT_NONE, false);
    matmul_case(33, 65, 31, true, BIB_ACT_RELU, false);
    matmul_case(70, 17, 66, true, BIB_ACT_GELU, false);
    matmul_case(1, 1023, 7, false, BIB_ACT_GELU, false);
    matmul_case(128, 64, 128, true, BIB_ACT_RELU, false);
    matmul_case(3, 0, 5, true, BIB_ACT_GELU, false);
}

Test(cuda, matmul_special_values_match_cpu) {
    matmul_case(33, 33, 33, true, BIB_ACT_NONE, true);
    matmul_case(17, 9, 65, true, BIB_ACT_RELU, true);
    matmul_case(17, 9, 65, false, BIB_ACT_GELU, true);
    matmul_case(64, 36, 64, true, BIB_ACT_NONE, true);
}

Test(cuda, matmul_keeps_negative_zero_chains_through_padded_k) {
    /* Products that underflow to -0 leave acc == -0; K = 5 pads the last
     * slice, and the padding must leave -0 alone (bias off, act none). */
    enum { M = 5, K = 5, N = 7 };
    float a[M * K], b[K * N];
    for (int i = 0; i < M * K; i++)
        a[i] = -0x1p-80f;
    for (int i = 0; i < K * N; i++)
        b[i] = 0x1p-80f;
    bib_call_t call = {.kernel = BIB_KERNEL_MATMUL, .sub = BIB_ACT_NONE};
    tensor_t in[2] = {tf(a, 2, M, K, 0, 0), tf(b, 2, K, N, 0, 0)};
    compare(call, in, 2, tf(NULL, 2, M, N, 0, 0), "matmul -0 chains");
}

static bib_executor_t *init_with_tiles(const char *tiles) {
    setenv("BIB_CUDA_MATMUL_TILES", tiles, 1);
    bib_executor_config_t cfg = {0};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(bib_cuda_executor.init(&cfg, &ex, why, sizeof why), BIB_OK, "%s", why);
    unsetenv("BIB_CUDA_MATMUL_TILES");
    return ex;
}

Test(cuda, matmul_both_tile_configurations_match_cpu) {
    static const char *tiles[] = {"64", "128"};
    bib_executor_t *saved = cu;
    for (int t = 0; t < 2; t++) {
        cu = init_with_tiles(tiles[t]);
        matmul_case(1, 1, 1, false, BIB_ACT_NONE, false);
        matmul_case(129, 33, 257, true, BIB_ACT_NONE, false);
        matmul_case(300, 70, 130, true, BIB_ACT_RELU, true);
        matmul_case(257, 12, 260, true, BIB_ACT_GELU, true);
        lead_words = GUARD + 3;
        matmul_case(131, 19, 133, true, BIB_ACT_GELU, true);
        lead_words = GUARD;
        bib_cuda_executor.shutdown(cu);
    }
    cu = saved;
}

Test(cuda, matmul_large_matches_cpu) {
    matmul_case(512, 384, 640, true, BIB_ACT_NONE, false);
    matmul_case(1023, 257, 1025, false, BIB_ACT_NONE, false);
}

/* ---- elementwise --------------------------------------------------------- */

static const uint32_t sizes[] = {1, 7, 33, 1023, 70001};

Test(cuda, unary_ops_match_cpu) {
    for (uint32_t op = BIB_UNARY_RELU; op <= BIB_UNARY_EXP; op++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            uint32_t n = sizes[s];
            float *x = malloc(n * 4);
            fill_data(x, n, op == BIB_UNARY_EXP ? -110 : -12, op == BIB_UNARY_EXP ? 110 : 12, true);
            bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = op};
            tensor_t in = tf(x, 1, n, 0, 0, 0);
            char what[64];
            snprintf(what, sizeof what, "unary op %u n=%u", op, n);
            compare(call, &in, 1, tf(NULL, 1, n, 0, 0, 0), what);
            free(x);
        }
}

Test(cuda, unary_ops_match_cpu_on_small_and_tie_inputs) {
    /* Around tanh's polynomial switch, sigmoid's sign switch, denormals. */
    enum { N = 4096 };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = bits_f((i % 2 ? 0x80000000u : 0) | (uint32_t)(0x3f1f0000u + (uint32_t)i * 37));
    x[0] = bits_f(0x00000001u), x[1] = bits_f(0x80000001u), x[2] = 0x1p-30f;
    for (uint32_t op = BIB_UNARY_RELU; op <= BIB_UNARY_EXP; op++) {
        bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = op};
        tensor_t in = tf(x, 1, N, 0, 0, 0);
        compare(call, &in, 1, tf(NULL, 1, N, 0, 0, 0), "unary near switch points");
    }
}

Test(cuda, exp_matches_cpu_at_its_range_edges) {
    enum { N = 2048 };
    float x[N];
    for (int i = 0; i < N; i++) {
        /* Walk the bits around exp's overflow (89), underflow (-104) and
         * denormal-result region, and around +-100. */
        static const float centers[] = {89.0f, -104.0f, -87.3f, 88.72f, 100.0f, -100.0f};
        float c = centers[i % 6];
        x[i] = bits_f(f_bits_of(c) + (uint32_t)(i / 6) - 170u);
    }
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_EXP};
    tensor_t in = tf(x, 1, N, 0, 0, 0);
    compare(call, &in, 1, tf(NULL, 1, N, 0, 0, 0), "exp range edges");
}

Test(cuda, binary_ops_and_broadcasts_match_cpu) {
    for (uint32_t op = BIB_BINARY_ADD; op <= BIB_BINARY_DIV; op++)
        for (int mode = 0; mode < 3; mode++) {
            uint32_t rows = 37, cols = 33;
            float *a = malloc(rows * cols * 4), *b = malloc(rows * cols * 4);
            fill_data(a, rows * cols, -1e3f, 1e3f, true);
            fill_data(b, rows * cols, -10, 10, true);
            bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = op};
            tensor_t in[2] = {tf(a, 2, rows, cols, 0, 0), mode == 0   ? tf(b, 2, rows, cols, 0, 0)
                                                          : mode == 1 ? tf(b, 1, cols, 0, 0, 0)
                                                                      : tf(b, 1, 1, 0, 0, 0)};
            char what[64];
            snprintf(what, sizeof what, "binary op %u broadcast %d", op, mode);
            compare(call, in, 2, tf(NULL, 2, rows, cols, 0, 0), what);
            free(a), free(b);
        }
}

Test(cuda, binary_division_handles_denormals_and_zeros) {
    enum { N = 1024 };
    float a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = bits_f(rnd() & 0x80ffffffu); /* denormals and tiny normals */
        b[i] = bits_f((rnd() & 0x807fffffu) | (i % 3 == 0 ? 0 : 0x3f000000u));
    }
    a[0] = 0.0f, b[0] = 0.0f, a[1] = -0.0f, b[1] = 0.0f, a[2] = 1.0f, b[2] = -0.0f;
    bib_call_t call = {.kernel = BIB_KERNEL_BINARY, .sub = BIB_BINARY_DIV};
    tensor_t in[2] = {tf(a, 1, N, 0, 0, 0), tf(b, 1, N, 0, 0, 0)};
    compare(call, in, 2, tf(NULL, 1, N, 0, 0, 0), "division with denormals");
}

Test(cuda, scale_matches_cpu) {
    float x[1023];
    fill_data(x, 1023, -1e30f, 1e30f, true);
    static const float factors[] = {0.125f, -3.0f, 1e30f, 0x1p-140f, 0.0f};
    for (size_t i = 0; i < sizeof factors / sizeof factors[0]; i++) {
        bib_call_t call = {.kernel = BIB_KERNEL_SCALE, .f = {factors[i], 0}};
        tensor_t in = tf(x, 1, 1023, 0, 0, 0);
        compare(call, &in, 1, tf(NULL, 1, 1023, 0, 0, 0), "scale");
    }
}

/* ---- layout and transfers ------------------------------------------------ */

Test(cuda, transpose_matches_cpu) {
    static const uint32_t shapes[][3] = {{1, 1, 1},   {1, 7, 33},   {3, 33, 1023},
                                         {2, 64, 32}, {5, 1023, 1}, {70, 3, 40}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t b = shapes[s][0], r = shapes[s][1], c = shapes[s][2];
        float *x = malloc((size_t)b * r * c * 4);
        fill_data(x, (size_t)b * r * c, -1, 1, true);
        bib_call_t call = {.kernel = BIB_KERNEL_TRANSPOSE};
        tensor_t in = tf(x, 3, b, r, c, 0);
        compare(call, &in, 1, tf(NULL, 3, b, c, r, 0), "transpose");
        free(x);
    }
}

Test(cuda, fill_and_copy_match_cpu) {
    float x[1023];
    fill_data(x, 1023, -1, 1, true);
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL, .f = {bits_f(0xffc00123u), 0}};
    compare(fill, NULL, 0, tf(NULL, 1, 1023, 0, 0, 0), "fill f32 NaN payload");
    bib_call_t filli = {.kernel = BIB_KERNEL_FILL, .i = {-7, 0}};
    tensor_t ti = {NULL, BIB_DTYPE_I32, 1, {33}};
    compare(filli, NULL, 0, ti, "fill i32");
    bib_call_t copy = {.kernel = BIB_KERNEL_COPY};
    tensor_t in = tf(x, 2, 31, 33, 0, 0);
    compare(copy, &in, 1, tf(NULL, 1, 1023, 0, 0, 0), "copy");
}

Test(cuda, copy_between_overlapping_ranges_moves_like_memmove) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    enum { N = 1000 };
    uint32_t w[N], r[N], expect[N];
    for (uint32_t i = 0; i < N; i++)
        w[i] = i * 2654435761u;
    void *b;
    cr_assert_eq(ops->buffer_alloc(cu, N * 4, &b), BIB_OK);
    for (int dir = 0; dir < 2; dir++) {
        cr_assert_eq(ops->upload(cu, b, 0, w, sizeof w), BIB_OK);
        bib_call_t call = {.kernel = BIB_KERNEL_COPY};
        size_t from = dir ? 100 : 0, to = dir ? 0 : 100;
        call.in[0] = (bib_view_t){b, from, BIB_DTYPE_I32, 1, {800}};
        call.out = (bib_view_t){b, to, BIB_DTYPE_I32, 1, {800}};
        cr_assert_eq(ops->kernels[BIB_KERNEL_COPY](cu, &call), BIB_OK, "%s", ops->error(cu));
        cr_assert_eq(ops->download(cu, b, 0, r, sizeof r), BIB_OK);
        memcpy(expect, w, sizeof w);
        memmove(expect + to, expect + from, 800 * 4);
        cr_assert(memcmp(r, expect, sizeof r) == 0, "overlapping copy, direction %d", dir);
    }
    ops->buffer_free(cu, b);
}

/* ---- row kernels --------------------------------------------------------- */

static const uint32_t row_shapes[][2] = {{1, 1},   {7, 7},    {3, 33},   {2, 1023},
                                         {5, 64},  {4, 65},   {1, 5000}, {3, 4096},
                                         {2, 128}, {70, 257}, {2, 2048}, {1, 9000}};

Test(cuda, softmax_matches_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
            uint32_t r = row_shapes[s][0], n = row_shapes[s][1];
            float *x = malloc((size_t)r * n * 4);
            fill_data(x, (size_t)r * n, -30, 30, special);
            bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX};
            tensor_t in = tf(x, 2, r, n, 0, 0);
            char what[64];
            snprintf(what, sizeof what, "softmax %ux%u special=%d", r, n, special);
            compare(call, &in, 1, tf(NULL, 2, r, n, 0, 0), what);
            free(x);
        }
}

Test(cuda, softmax_handles_rows_of_infinities_and_huge_spreads) {
    enum { R = 4, N = 100 };
    float x[R * N];
    for (int i = 0; i < R * N; i++)
        x[i] = (float)(i % 7) * 40.0f - 120.0f; /* exp arguments far below -100 */
    for (int i = 0; i < N; i++)
        x[N + i] = -INFINITY;           /* row 1: all -Inf -> NaN */
    x[2 * N + 5] = INFINITY;            /* row 2: one +Inf */
    x[3 * N + 9] = bits_f(0x80000000u); /* row 3: -0 among the rest */
    bib_call_t call = {.kernel = BIB_KERNEL_SOFTMAX};
    tensor_t in = tf(x, 2, R, N, 0, 0);
    compare(call, &in, 1, tf(NULL, 2, R, N, 0, 0), "softmax infinities");
}

Test(cuda, reduce_and_argmax_match_cpu) {
    for (int special = 0; special < 2; special++)
        for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
            uint32_t r = row_shapes[s][0], n = row_shapes[s][1];
            float *x = malloc((size_t)r * n * 4);
            fill_data(x, (size_t)r * n, -30, 30, special);
            tensor_t in = tf(x, 2, r, n, 0, 0);
            for (uint32_t op = BIB_REDUCE_SUM; op <= BIB_REDUCE_MEAN; op++) {
                bib_call_t call = {.kernel = BIB_KERNEL_REDUCE, .sub = op};
                compare(call, &in, 1, tf(NULL, 1, r, 0, 0, 0), "reduce");
            }
            bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX};
            tensor_t out = {NULL, BIB_DTYPE_I32, 1, {r}};
            compare(am, &in, 1, out, "argmax");
            free(x);
        }
}

Test(cuda, argmax_takes_first_maximum_and_first_nan) {
    float x[130];
    for (int i = 0; i < 130; i++)
        x[i] = (float)(i % 5);
    x[3] = -0.0f;
    tensor_t in = tf(x, 1, 130, 0, 0, 0);
    tensor_t out = {NULL, BIB_DTYPE_I32, 0, {0}};
    bib_call_t am = {.kernel = BIB_KERNEL_ARGMAX};
    compare(am, &in, 1, out, "argmax ties");
    x[100] = NAN, x[77] = NAN;
    compare(am, &in, 1, out, "argmax NaN");
    for (int i = 0; i < 130; i++)
        x[i] = i % 2 ? -0.0f : 0.0f;
    compare(am, &in, 1, out, "argmax zeros of both signs");
}

Test(cuda, max_orders_negative_zero_below_positive_zero) {
    float x[2 * 70];
    for (int i = 0; i < 140; i++)
        x[i] = i < 70 ? -0.0f : (i % 3 ? -0.0f : 0.0f);
    tensor_t in = tf(x, 2, 2, 70, 0, 0);
    bib_call_t call = {.kernel = BIB_KERNEL_REDUCE, .sub = BIB_REDUCE_MAX};
    compare(call, &in, 1, tf(NULL, 1, 2, 0, 0, 0), "max of signed zeros");
}

Test(cuda, layernorm_and_rmsnorm_match_cpu) {
    for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
        uint32_t r = row_shapes[s][0], n = row_shapes[s][1];
        float *x = malloc((size_t)r * n * 4), *g = malloc(n * 4), *b = malloc(n * 4);
        fill_data(x, (size_t)r * n, -5, 7, s == 3);
        fill_data(g, n, 0.5f, 1.5f, false);
        fill_data(b, n, -1, 1, false);
        tensor_t in[3] = {tf(x, 2, r, n, 0, 0), tf(g, 1, n, 0, 0, 0), tf(b, 1, n, 0, 0, 0)};
        bib_call_t ln = {.kernel = BIB_KERNEL_LAYERNORM, .f = {1e-5f, 0}};
        compare(ln, in, 3, tf(NULL, 2, r, n, 0, 0), "layernorm");
        bib_call_t rms = {.kernel = BIB_KERNEL_RMSNORM, .f = {1e-6f, 0}};
        compare(rms, in, 2, tf(NULL, 2, r, n, 0, 0), "rmsnorm");
        free(x), free(g), free(b);
    }
}

/* ---- attention, gather, rng ---------------------------------------------- */

static void attention_case(uint32_t S, uint32_t H, uint32_t D, uint32_t T, bool special) {
    for (uint32_t causal = 0; causal < 2; causal++) {
        float *q = malloc((size_t)S * H * D * 4), *k = malloc((size_t)T * H * D * 4 + 4),
              *v = malloc((size_t)T * H * D * 4 + 4);
        cr_assert(q && k && v);
        fill_data(q, (size_t)S * H * D, -2, 2, false);
        fill_data(k, (size_t)T * H * D, -2, 2, false);
        fill_data(v, (size_t)T * H * D, -3, 3, special);
        bib_call_t call = {
            .kernel = BIB_KERNEL_ATTENTION, .sub = causal, .f = {1.0f / sqrtf((float)D), 0}};
        tensor_t in[3] = {tf(q, 3, S, H, D, 0), tf(k, 3, T, H, D, 0), tf(v, 3, T, H, D, 0)};
        char what[80];
        snprintf(what, sizeof what, "attention S=%u H=%u D=%u T=%u causal=%u", S, H, D, T, causal);
        compare(call, in, 3, tf(NULL, 3, S, H, D, 0), what);
        free(q), free(k), free(v);
    }
}

Test(cuda, attention_matches_cpu) {
    static const uint32_t shapes[][4] = {{1, 1, 1, 1},    {7, 2, 33, 7},   {33, 3, 16, 40},
                                         {5, 1, 65, 130}, {16, 4, 64, 16}, {40, 2, 8, 7},
                                         {3, 2, 130, 70}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        attention_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], s == 1);
}

Test(cuda, attention_with_long_rows_uses_scratch_and_matches_cpu) {
    /* More keys than fit in shared memory: probabilities go through the
     * executor's global scratch. */
    attention_case(3, 2, 8, 9000, false);
}

Test(cuda, gather_matches_cpu_and_traps_out_of_range) {
    float table[40 * 33];
    fill_data(table, 40 * 33, -1, 1, true);
    int32_t idx[7] = {0, 39, 5, 5, 17, 1, 38};
    tensor_t in[2] = {tf(table, 2, 40, 33, 0, 0), {idx, BIB_DTYPE_I32, 1, {7}}};
    bib_call_t call = {.kernel = BIB_KERNEL_GATHER};
    compare(call, in, 2, tf(NULL, 2, 7, 33, 0, 0), "gather");
    idx[4] = 40;
    compare(call, in, 2, tf(NULL, 2, 7, 33, 0, 0), "gather out of range");
    idx[4] = -1;
    compare(call, in, 2, tf(NULL, 2, 7, 33, 0, 0), "gather negative");
}

Test(cuda, rng_matches_cpu) {
    static const uint32_t counts[] = {1, 7, 33, 1023, 70001};
    for (size_t s = 0; s < sizeof counts / sizeof counts[0]; s++) {
        bib_call_t call = {.kernel = BIB_KERNEL_RNG, .i = {0x123456789abcdefll, 42 + (int64_t)s}};
        compare(call, NULL, 0, tf(NULL, 1, counts[s], 0, 0, 0), "rng");
    }
    bib_call_t call = {.kernel = BIB_KERNEL_RNG, .i = {-1, (int64_t)0x8000000000000001ull}};
    compare(call, NULL, 0, tf(NULL, 1, 4099, 0, 0, 0), "rng, high seed and stream words");
}

/* ---- the executor's machinery -------------------------------------------- */

Test(cuda, a_run_of_kernels_costs_one_wait) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    enum { N = 4096 };
    float x[N], y[N];
    fill_data(x, N, -1, 1, false);
    void *a, *b;
    cr_assert_eq(ops->buffer_alloc(cu, N * 4, &a), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(cu, N * 4, &b), BIB_OK);
    cr_assert_eq(ops->synchronize(cu), BIB_OK);
    uint64_t before = bib_cuda_waits(cu);
    cr_assert_eq(ops->upload(cu, a, 0, x, sizeof x), BIB_OK);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_TANH};
    call.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {N}};
    call.in[0] = (bib_view_t){a, 0, BIB_DTYPE_F32, 1, {N}};
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](cu, &call), BIB_OK);
        bib_view_t t = call.out;
        call.out = call.in[0];
        call.in[0] = t;
    }
    cr_assert_eq(ops->download(cu, a, 0, y, sizeof y), BIB_OK);
    cr_assert_eq(bib_cuda_waits(cu) - before, 1, "upload + 10 kernels + download took %llu waits",
                 (unsigned long long)(bib_cuda_waits(cu) - before));
    ops->buffer_free(cu, a);
    ops->buffer_free(cu, b);
}

Test(cuda, many_buffers_share_pooled_blocks_and_reuse_freed_ranges) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *bufs[300];
    uint32_t blocks0, blocks1;
    uint64_t used0, used1;
    bib_cuda_pool_stats(cu, &blocks0, &used0);
    for (int i = 0; i < 300; i++)
        cr_assert_eq(ops->buffer_alloc(cu, 4096 + (size_t)i * 4, &bufs[i]), BIB_OK);
    bib_cuda_pool_stats(cu, &blocks1, &used1);
    cr_assert_leq(blocks1, blocks0 + 1, "300 small buffers took %u new device blocks",
                  blocks1 - blocks0);
    for (int i = 0; i < 300; i += 2)
        ops->buffer_free(cu, bufs[i]);
    for (int i = 0; i < 300; i += 2)
        cr_assert_eq(ops->buffer_alloc(cu, 4096, &bufs[i]), BIB_OK);
    uint32_t w = 0x12345678u, r = 0;
    cr_assert_eq(ops->upload(cu, bufs[299], 4, &w, 4), BIB_OK);
    cr_assert_eq(ops->download(cu, bufs[299], 4, &r, 4), BIB_OK);
    cr_assert_eq(r, w);
    for (int i = 0; i < 300; i++)
        ops->buffer_free(cu, bufs[i]);
    bib_cuda_pool_stats(cu, &blocks1, &used1);
    cr_assert_eq(used1, used0, "every byte handed out came back");
}

Test(cuda, transfer_outside_a_buffer_is_refused) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *b;
    uint32_t w[8] = {0};
    cr_assert_eq(ops->buffer_alloc(cu, 16, &b), BIB_OK);
    /* Buffers are rounded up to the pool's alignment; beyond that is refused. */
    cr_assert_eq(ops->upload(cu, b, 1u << 20, w, 4), BIB_E_USAGE);
    cr_assert(strstr(ops->error(cu), "overruns"), "%s", ops->error(cu));
    cr_assert_eq(ops->download(cu, b, 256, w, 4), BIB_E_USAGE);
    ops->buffer_free(cu, b);
}

Test(cuda, upload_larger_than_staging_round_trips) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    size_t n = (80u << 20) / 4 + 123; /* more than twice the pinned staging area */
    uint32_t *w = malloc(n * 4), *r = malloc(n * 4);
    cr_assert(w && r);
    for (size_t i = 0; i < n; i++)
        w[i] = (uint32_t)(i * 2654435761u);
    void *b;
    cr_assert_eq(ops->buffer_alloc(cu, n * 4, &b), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(ops->upload(cu, b, 0, w, n * 4), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(ops->download(cu, b, 0, r, n * 4), BIB_OK, "%s", ops->error(cu));
    cr_assert(memcmp(w, r, n * 4) == 0);
    ops->buffer_free(cu, b);
    free(w), free(r);
}

Test(cuda, out_of_device_memory_is_a_clean_error_and_the_executor_goes_on) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    uint64_t free_bytes, total;
    cr_assert_eq(ops->memory(cu, &free_bytes, &total), BIB_OK, "%s", ops->error(cu));
    cr_assert_gt(total, 0);
    void *huge = NULL;
    bib_status_t st = ops->buffer_alloc(cu, (size_t)(total + (1ull << 30)), &huge);
    cr_assert_eq(st, BIB_E_NOMEM, "status %d: %s", st, ops->error(cu));
    cr_assert_null(huge);
    printf("%s\n", ops->error(cu));
    cr_assert(strstr(ops->error(cu), "cuMemAlloc_v2(") &&
                  strstr(ops->error(cu), "bytes): CUDA_ERROR_OUT_OF_MEMORY"),
              "%s", ops->error(cu));
    /* Still usable: a kernel on fresh buffers gives the CPU's bits. */
    float x[33];
    fill_data(x, 33, -3, 3, false);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_GELU};
    tensor_t in = tf(x, 1, 33, 0, 0, 0);
    compare(call, &in, 1, tf(NULL, 1, 33, 0, 0, 0), "gelu after out of memory");
}

Test(cuda, view_past_its_buffer_is_refused) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *b;
    cr_assert_eq(ops->buffer_alloc(cu, 256, &b), BIB_OK);
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_RELU};
    call.out = (bib_view_t){b, 0, BIB_DTYPE_F32, 1, {64}};
    call.in[0] = (bib_view_t){b, 32, BIB_DTYPE_F32, 1, {64}};
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](cu, &call), BIB_E_USAGE);
    cr_assert(strstr(ops->error(cu), "overruns its buffer"), "%s", ops->error(cu));
    ops->buffer_free(cu, b);
}

/* ---- user kernels on the device ---------------------------------------------- */

Test(cuda, user_kernel_receives_each_parameter_as_its_signature_says) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *prog = NULL, *buf = NULL;
    cr_assert_eq(create(cu, probe_ptx, "probe", "itlfd", &prog), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(ops->buffer_alloc(cu, 32, &buf), BIB_OK);
    probe_args_t a = probe_args();
    uint64_t size = 32;
    uint32_t one[3] = {1, 1, 1};
    cr_assert_eq(ops->program_dispatch(cu, prog, &buf, &size, 1, a.slots, sizeof a.slots, one, one),
                 BIB_OK, "%s", ops->error(cu));
    uint8_t out[32];
    cr_assert_eq(ops->download(cu, buf, 0, out, sizeof out), BIB_OK, "%s", ops->error(cu));
    uint32_t i, f;
    uint64_t l, d;
    memcpy(&i, out, 4);
    memcpy(&l, out + 8, 8);
    memcpy(&f, out + 16, 4);
    memcpy(&d, out + 24, 8);
    cr_expect_eq(i, a.i, "i: %08x", i);
    cr_expect_eq(l, a.l, "l: %016llx", (unsigned long long)l);
    cr_expect_eq(f, a.f_bits, "f: %08x", f);
    cr_expect_eq(d, a.d_bits, "d: %016llx", (unsigned long long)d);
    ops->buffer_free(cu, buf);
    ops->program_destroy(cu, prog);
}

Test(cuda, user_saxpy_matches_the_cpu_and_runs_in_order_with_built_in_kernels) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    enum { N = 1000 };
    float x[N], y[N], want[N], got[N];
    fill_data(x, N, -4, 4, false);
    fill_data(y, N, -4, 4, false);
    float a = 1.7f;
    for (int i = 0; i < N; i++) {
        float p = a * x[i];
        float s = p + y[i];
        want[i] = s > 0 ? s : 0; /* then RELU, the built-in kernel */
    }
    void *prog = NULL, *bx = NULL, *by = NULL;
    cr_assert_eq(create(cu, saxpy_ptx, "saxpy", "ttfi", &prog), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(ops->buffer_alloc(cu, sizeof x, &bx), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(cu, sizeof y, &by), BIB_OK);
    cr_assert_eq(ops->upload(cu, bx, 0, x, sizeof x), BIB_OK);
    cr_assert_eq(ops->upload(cu, by, 0, y, sizeof y), BIB_OK);
    void *bufs[2] = {bx, by};
    uint64_t sizes[2] = {sizeof x, sizeof y};
    uint64_t slots[2] = {0, N};
    uint32_t abits;
    memcpy(&abits, &a, 4);
    slots[0] = abits;
    uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    cr_assert_eq(ops->program_dispatch(cu, prog, bufs, sizes, 2, slots, sizeof slots, grid, block),
                 BIB_OK, "%s", ops->error(cu));
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_RELU};
    call.out = (bib_view_t){by, 0, BIB_DTYPE_F32, 1, {N}};
    call.in[0] = (bib_view_t){by, 0, BIB_DTYPE_F32, 1, {N}};
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](cu, &call), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(ops->submit(cu), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(ops->download(cu, by, 0, got, sizeof got), BIB_OK, "%s", ops->error(cu));
    for (int i = 0; i < N; i++)
        cr_assert_eq(f_bits_of(got[i]), f_bits_of(want[i]), "y[%d]: %a, the CPU says %a", i,
                     (double)got[i], (double)want[i]);
    ops->buffer_free(cu, bx);
    ops->buffer_free(cu, by);
    ops->program_destroy(cu, prog);
}

Test(cuda, user_kernel_with_bad_ptx_reports_the_jit_log) {
    void *prog = (void *)1;
    cr_assert_eq(create(cu, bad_ptx, "k", "t", &prog), BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    const char *e = bib_cuda_executor.error(cu);
    printf("%s\n", e);
    cr_assert(strstr(e, "the driver rejected its PTX (cuModuleLoadDataEx: CUDA_ERROR_"), "%s", e);
    cr_assert(strstr(e, "line 6") && strstr(e, "bogus"), "no JIT log in: %s", e);
    cr_assert_null(strchr(e, '\n'), "not one line: %s", e);
}

Test(cuda, user_kernel_with_a_missing_entry_is_named) {
    void *prog = (void *)1;
    cr_assert_eq(create(cu, saxpy_ptx, "nope", "ttfi", &prog), BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    cr_assert_str_eq(bib_cuda_executor.error(cu),
                     "no entry 'nope' in its PTX (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND)");
}

Test(cuda, user_kernel_launch_too_large_is_a_driver_error_and_the_executor_goes_on) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *prog = NULL, *buf = NULL;
    cr_assert_eq(create(cu, probe_ptx, "probe", "itlfd", &prog), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(ops->buffer_alloc(cu, 32, &buf), BIB_OK);
    probe_args_t a = probe_args();
    uint64_t size = 32;
    uint32_t grid[3] = {4, 1, 1}, block[3] = {2048, 1, 1}, one[3] = {1, 1, 1};
    cr_assert_eq(
        ops->program_dispatch(cu, prog, &buf, &size, 1, a.slots, sizeof a.slots, grid, block),
        BIB_E_UNAVAILABLE);
    cr_assert_str_eq(ops->error(cu), "cuLaunchKernel(kernel 'probe', grid 4x1x1, block "
                                     "2048x1x1): CUDA_ERROR_INVALID_VALUE");
    cr_assert_eq(ops->program_dispatch(cu, prog, &buf, &size, 1, a.slots, sizeof a.slots, one, one),
                 BIB_OK, "%s", ops->error(cu));
    uint32_t i = 0;
    cr_assert_eq(ops->download(cu, buf, 0, &i, 4), BIB_OK, "%s", ops->error(cu));
    cr_assert_eq(i, a.i);
    ops->buffer_free(cu, buf);
    ops->program_destroy(cu, prog);
}

#endif
