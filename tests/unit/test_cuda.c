/* tests/unit/test_cuda.c: the CUDA executor.
 *
 * Suite cuda is the executor conformance suite (executor_cts.h): every
 * kernel against the CPU executor's bits over awkward shapes and special
 * values, guard words around every device buffer, pooled memory, a clean
 * BIB_E_NOMEM, device selection; plus what only CUDA has there: pool blocks
 * and user PTX kernels on the device (a kernel that writes back its scalar
 * arguments, saxpy against the CPU, bad PTX, a wrong entry, an invalid
 * launch). Without a GPU (or in a build without nvcc) each of its tests
 * prints "SKIP: <reason>" and is skipped, never passed.
 *
 * Suite cuda_init runs everywhere: start-up without a driver (a library
 * that is missing, one that is no CUDA driver, the toolkit's stub whose
 * cuInit fails) must return BIB_E_UNAVAILABLE with a reason and crash
 * nothing, and the ops table must be complete. Suite cuda_mock runs user
 * kernels (program_create / program_dispatch / program_destroy / submit,
 * spec/device-code.md) and the device timer against the mock driver
 * (backends/cuda/testing, built next to this binary as libcuda_mock.so),
 * which records what cuLaunchKernel and the event calls were given, so the
 * parameter marshalling, the JIT-log and entry messages, the module life
 * cycle and the timing arithmetic are checked without a GPU.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"

#ifdef BIB_HAVE_CUDA
#include "backends/cuda/cuda.h"
#include "backends/cuda/testing/cu_mock_driver.h"

static uint64_t cuda_bytes_in_use(const bib_executor_t *ex) {
    uint32_t blocks;
    uint64_t used;
    bib_cuda_pool_stats(ex, &blocks, &used);
    return used;
}

#define CTS_EXECUTOR (&bib_cuda_executor)
#define CTS_WAITS(ex) bib_cuda_waits(ex)
#define CTS_BYTES_IN_USE(ex) cuda_bytes_in_use(ex)
#define CTS_MATMUL_TILES_ENV "BIB_CUDA_MATMUL_TILES"
#define CTS_MATMUL_TILES "64", "128", "bk8", "m256", "k16s3", "k32", "m256k16"
#define CTS_NOMEM_WORDS "cuMemAlloc_v2(", "bytes): CUDA_ERROR_OUT_OF_MEMORY"
#else
#define CTS_EXECUTOR NULL
#define CTS_UNAVAILABLE "built without nvcc: the CUDA executor is not compiled in"
#endif
#define CTS_SUITE cuda
#define CTS_DEVICE_NOUN "CUDA"
#define CTS_DESCRIBE_WORDS "compute capability", "GiB", "driver", "SMs"
#include "tests/unit/executor_cts.h"

#ifndef BIB_HAVE_CUDA

static void skip_unbuilt(void) {
    printf("SKIP: %s\n", CTS_UNAVAILABLE);
    cr_skip_test("%s", CTS_UNAVAILABLE);
}

TestSuite(cuda_init, .init = skip_unbuilt);

Test(cuda_init, executor_is_compiled_in) {}

#else

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

/* Checks the probe's scalars where they arrived: i, l, f's bits, d's bits. */
static void probe_expect(const probe_args_t *a, const void *i, const void *l, const void *f,
                         const void *d) {
    uint32_t iv, fv;
    uint64_t lv, dv;
    memcpy(&iv, i, 4);
    memcpy(&lv, l, 8);
    memcpy(&fv, f, 4);
    memcpy(&dv, d, 8);
    cr_expect_eq(iv, a->i, "i: %08x", iv);
    cr_expect_eq(lv, a->l, "l: %016llx", (unsigned long long)lv);
    cr_expect_eq(fv, a->f_bits, "f: %08x", fv);
    cr_expect_eq(dv, a->d_bits, "d: %016llx", (unsigned long long)dv);
}

/* The probe loaded on one executor, with a 32-byte buffer to write into. */
typedef struct probe_run {
    bib_executor_t *ex;
    void *prog, *buf;
    uint64_t size;
    probe_args_t a;
} probe_run_t;

static bib_status_t create(bib_executor_t *ex, const char *ptx, const char *entry,
                           const char *signature, void **prog) {
    return bib_cuda_executor.program_create(ex, BIB_PROGRAM_PTX, ptx, strlen(ptx) + 1, entry, 0, 0,
                                            signature, prog);
}

static probe_run_t probe_open(bib_executor_t *ex) {
    probe_run_t p = {.ex = ex, .size = 32, .a = probe_args()};
    cr_assert_eq(create(ex, probe_ptx, "probe", "itlfd", &p.prog), BIB_OK, "%s",
                 bib_cuda_executor.error(ex));
    cr_assert_eq(bib_cuda_executor.buffer_alloc(ex, p.size, &p.buf), BIB_OK, "%s",
                 bib_cuda_executor.error(ex));
    return p;
}

/* Runs the probe with its first slot_bytes of scalar slots. */
static bib_status_t probe_dispatch(probe_run_t *p, uint32_t slot_bytes, const uint32_t grid[3],
                                   const uint32_t block[3]) {
    return bib_cuda_executor.program_dispatch(p->ex, p->prog, &p->buf, &p->size, 1, p->a.slots,
                                              slot_bytes, grid, block);
}

static void probe_close(probe_run_t *p) {
    bib_cuda_executor.buffer_free(p->ex, p->buf);
    bib_cuda_executor.program_destroy(p->ex, p->prog);
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
    probe_run_t p = probe_open(mock_ex);
    uint32_t marker[8] = {0xFEEDF00Du, 1, 2, 3, 4, 5, 6, 7};
    cr_assert_eq(ops->upload(mock_ex, p.buf, 0, marker, sizeof marker), BIB_OK);
    uint32_t grid[3] = {3, 2, 1}, block[3] = {32, 4, 1};
    int launches = mock->launches, syncs = mock->stream_syncs;
    cr_assert_eq(probe_dispatch(&p, sizeof p.a.slots, grid, block), BIB_OK, "%s",
                 ops->error(mock_ex));
    cr_assert_eq(mock->launches, launches + 1);
    cr_assert_eq(mock->stream_syncs, syncs, "a launch must not wait");
    cr_assert_str_eq(mock->last_entry, "probe");
    cr_assert(mock->grid[0] == 3 && mock->grid[1] == 2 && mock->grid[2] == 1);
    cr_assert(mock->block[0] == 32 && mock->block[1] == 4 && mock->block[2] == 1);
    cr_assert_eq(mock->shared, 0u);
    cr_assert_not_null(mock->stream, "launched on the executor's stream, not the default one");
    cr_assert_eq(mock->nparams, 5u);
    probe_expect(&p.a, mock->param[0], mock->param[2], mock->param[3], mock->param[4]);
    /* The mock's device memory is host memory: the pointer leads to the tensor. */
    uint64_t out;
    memcpy(&out, mock->param[1], 8);
    cr_assert_neq(out, 0);
    cr_expect_eq(memcmp((const void *)(uintptr_t)out, marker, sizeof marker), 0,
                 "the t parameter is not the buffer's device address");
    probe_close(&p);
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
    probe_run_t p = probe_open(mock_ex);
    uint32_t one[3] = {1, 1, 1};
    int launches = mock->launches;
    cr_assert_eq(probe_dispatch(&p, 24, one, one), BIB_E_USAGE);
    cr_assert(strstr(ops->error(mock_ex), "takes 1 tensors and 4 other parameters"), "%s",
              ops->error(mock_ex));
    cr_assert_eq(mock->launches, launches);
    probe_close(&p);
}

Test(cuda_mock, launch_error_names_the_kernel_grid_block_and_cuda_error) {
    probe_run_t p = probe_open(mock_ex);
    uint32_t grid[3] = {4, 1, 1}, block[3] = {2048, 1, 1};
    cr_assert_eq(probe_dispatch(&p, sizeof p.a.slots, grid, block), BIB_E_UNAVAILABLE);
    cr_assert_str_eq(bib_cuda_executor.error(mock_ex),
                     "cuLaunchKernel(kernel 'probe', grid 4x1x1, block "
                     "2048x1x1): CUDA_ERROR_INVALID_VALUE");
    probe_close(&p);
}

Test(cuda_mock, submit_asks_the_stream_without_waiting) {
    int syncs = mock->stream_syncs, queries = mock->stream_queries;
    cr_assert_eq(bib_cuda_executor.submit(mock_ex), BIB_OK, "%s", bib_cuda_executor.error(mock_ex));
    cr_assert_eq(mock->stream_queries, queries + 1);
    cr_assert_eq(mock->stream_syncs, syncs);
}

/* ---- the device timeout against the mock driver ---------------------------- */

static double mock_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

Test(cuda_mock, a_stream_that_never_finishes_times_out_and_the_executor_stays_unusable) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    setenv("BIB_CUDA_LIBRARY", mock_path, 1);
    bib_executor_config_t cfg = {.timeout_ms = 100};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(ops->init(&cfg, &ex, why, sizeof why), BIB_OK, "%s", why);
    unsetenv("BIB_CUDA_LIBRARY");
    void *buf = NULL;
    cr_assert_eq(ops->buffer_alloc(ex, 64, &buf), BIB_OK, "%s", ops->error(ex));
    float v[16] = {0};
    mock->stream_busy = -1;
    int syncs = mock->stream_syncs, queries = mock->stream_queries;
    double t0 = mock_now_s();
    cr_assert_eq(ops->synchronize(ex), BIB_E_TIMEOUT, "%s", ops->error(ex));
    double waited = mock_now_s() - t0;
    cr_assert_str_eq(ops->error(ex), "cuda: device work ran past the device timeout (100 ms); the "
                                     "executor is unusable from now on");
    cr_assert(waited >= 0.1 && waited < 5, "waited %.3f s", waited);
    cr_assert_eq(mock->stream_syncs, syncs, "a blocking cuStreamSynchronize would never return");
    cr_assert_gt(mock->stream_queries, queries + 1, "the stream was not polled");

    /* Nothing that touches the device runs any more, even once it is idle. */
    mock->stream_busy = 0;
    int launches = mock->launches;
    bib_call_t fill = {.kernel = BIB_KERNEL_FILL,
                       .out = {.buf = buf, .dtype = BIB_DTYPE_F32, .rank = 1, .dims = {16}}};
    cr_assert_eq(ops->kernels[BIB_KERNEL_FILL](ex, &fill), BIB_E_STATE);
    cr_assert_str_eq(ops->error(ex),
                     "cuda: unusable after device work ran past the device timeout (100 ms)");
    cr_assert_eq(ops->download(ex, buf, 0, v, sizeof v), BIB_E_STATE);
    cr_assert_eq(ops->upload(ex, buf, 0, v, sizeof v), BIB_E_STATE);
    cr_assert_eq(ops->synchronize(ex), BIB_E_STATE);
    cr_assert_eq(mock->launches, launches);

    /* Shutting down does not wait for the stream either. */
    mock->stream_busy = -1;
    syncs = mock->stream_syncs;
    ops->buffer_free(ex, buf);
    ops->shutdown(ex);
    cr_assert_eq(mock->stream_syncs, syncs, "shutdown waited for a stream that timed out");
    mock->stream_busy = 0;
}

Test(cuda_mock, with_work_in_flight_program_destroy_and_shutdown_wait_at_most_the_timeout) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    setenv("BIB_CUDA_LIBRARY", mock_path, 1);
    bib_executor_config_t cfg = {.timeout_ms = 100};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(ops->init(&cfg, &ex, why, sizeof why), BIB_OK, "%s", why);
    unsetenv("BIB_CUDA_LIBRARY");
    void *prog = NULL;
    cr_assert_eq(create(ex, saxpy_ptx, "saxpy", "ttfi", &prog), BIB_OK, "%s", ops->error(ex));
    int live = mock->modules_live, syncs = mock->stream_syncs;
    mock->stream_busy = -1;
    double t0 = mock_now_s();
    ops->program_destroy(ex, prog);
    cr_assert_eq(mock->modules_live, live, "a module the running work may use was unloaded");
    ops->shutdown(ex);
    cr_assert_lt(mock_now_s() - t0, 5.0);
    cr_assert_eq(mock->stream_syncs, syncs, "a blocking cuStreamSynchronize would never return");
    mock->stream_busy = 0;
}

Test(cuda_mock, with_a_timeout_work_that_finishes_is_waited_for_by_polling) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    setenv("BIB_CUDA_LIBRARY", mock_path, 1);
    bib_executor_config_t cfg = {.timeout_ms = 1000};
    bib_executor_t *ex = NULL;
    char why[256] = "";
    cr_assert_eq(ops->init(&cfg, &ex, why, sizeof why), BIB_OK, "%s", why);
    unsetenv("BIB_CUDA_LIBRARY");
    mock->stream_busy = 3; /* busy for the next three queries */
    cr_assert_eq(ops->synchronize(ex), BIB_OK, "%s", ops->error(ex));
    cr_assert_eq(mock->stream_busy, 0);
    cr_assert_eq(ops->synchronize(ex), BIB_OK, "%s", ops->error(ex));
    ops->shutdown(ex);
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

/* ---- the device: what only CUDA has ----------------------------------------- */

CTS_TEST(small_buffers_share_one_device_block) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    void *bufs[300];
    uint32_t blocks0, blocks1;
    uint64_t used0, used1;
    bib_cuda_pool_stats(cts_ex, &blocks0, &used0);
    for (int i = 0; i < 300; i++)
        cr_assert_eq(ops->buffer_alloc(cts_ex, 4096 + (size_t)i * 4, &bufs[i]), BIB_OK);
    bib_cuda_pool_stats(cts_ex, &blocks1, &used1);
    cr_assert_leq(blocks1, blocks0 + 1, "300 small buffers took %u new device blocks",
                  blocks1 - blocks0);
    for (int i = 0; i < 300; i++)
        ops->buffer_free(cts_ex, bufs[i]);
}

/* ---- user kernels on the device ---------------------------------------------- */

CTS_TEST(user_kernel_receives_each_parameter_as_its_signature_says) {
    probe_run_t p = probe_open(cts_ex);
    uint32_t one[3] = {1, 1, 1};
    cr_assert_eq(probe_dispatch(&p, sizeof p.a.slots, one, one), BIB_OK, "%s",
                 bib_cuda_executor.error(cts_ex));
    uint8_t out[32];
    cr_assert_eq(bib_cuda_executor.download(cts_ex, p.buf, 0, out, sizeof out), BIB_OK, "%s",
                 bib_cuda_executor.error(cts_ex));
    probe_expect(&p.a, out, out + 8, out + 16, out + 24);
    probe_close(&p);
}

CTS_TEST(user_saxpy_matches_the_cpu_and_runs_in_order_with_built_in_kernels) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    enum { N = 1000 };
    float x[N], y[N], want[N], got[N];
    cts_fill_data(x, N, -4, 4, false);
    cts_fill_data(y, N, -4, 4, false);
    float a = 1.7f;
    for (int i = 0; i < N; i++) {
        float p = a * x[i];
        float s = p + y[i];
        want[i] = s > 0 ? s : 0; /* then RELU, the built-in kernel */
    }
    void *prog = NULL, *bx = NULL, *by = NULL;
    cr_assert_eq(create(cts_ex, saxpy_ptx, "saxpy", "ttfi", &prog), BIB_OK, "%s",
                 ops->error(cts_ex));
    cr_assert_eq(ops->buffer_alloc(cts_ex, sizeof x, &bx), BIB_OK);
    cr_assert_eq(ops->buffer_alloc(cts_ex, sizeof y, &by), BIB_OK);
    cr_assert_eq(ops->upload(cts_ex, bx, 0, x, sizeof x), BIB_OK);
    cr_assert_eq(ops->upload(cts_ex, by, 0, y, sizeof y), BIB_OK);
    void *bufs[2] = {bx, by};
    uint64_t sizes[2] = {sizeof x, sizeof y};
    uint64_t slots[2] = {0, N};
    uint32_t abits;
    memcpy(&abits, &a, 4);
    slots[0] = abits;
    uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    cr_assert_eq(
        ops->program_dispatch(cts_ex, prog, bufs, sizes, 2, slots, sizeof slots, grid, block),
        BIB_OK, "%s", ops->error(cts_ex));
    bib_call_t call = {.kernel = BIB_KERNEL_UNARY, .sub = BIB_UNARY_RELU};
    call.out = (bib_view_t){by, 0, BIB_DTYPE_F32, 1, {N}};
    call.in[0] = (bib_view_t){by, 0, BIB_DTYPE_F32, 1, {N}};
    cr_assert_eq(ops->kernels[BIB_KERNEL_UNARY](cts_ex, &call), BIB_OK, "%s", ops->error(cts_ex));
    cr_assert_eq(ops->submit(cts_ex), BIB_OK, "%s", ops->error(cts_ex));
    cr_assert_eq(ops->download(cts_ex, by, 0, got, sizeof got), BIB_OK, "%s", ops->error(cts_ex));
    for (int i = 0; i < N; i++)
        cr_assert_eq(bib_f32_bits(got[i]), bib_f32_bits(want[i]), "y[%d]: %a, the CPU says %a", i,
                     (double)got[i], (double)want[i]);
    ops->buffer_free(cts_ex, bx);
    ops->buffer_free(cts_ex, by);
    ops->program_destroy(cts_ex, prog);
}

CTS_TEST(user_kernel_with_bad_ptx_reports_the_jit_log) {
    void *prog = (void *)1;
    cr_assert_eq(create(cts_ex, bad_ptx, "k", "t", &prog), BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    const char *e = bib_cuda_executor.error(cts_ex);
    printf("%s\n", e);
    cr_assert(strstr(e, "the driver rejected its PTX (cuModuleLoadDataEx: CUDA_ERROR_"), "%s", e);
    cr_assert(strstr(e, "line 6") && strstr(e, "bogus"), "no JIT log in: %s", e);
    cr_assert_null(strchr(e, '\n'), "not one line: %s", e);
}

CTS_TEST(user_kernel_with_a_missing_entry_is_named) {
    void *prog = (void *)1;
    cr_assert_eq(create(cts_ex, saxpy_ptx, "nope", "ttfi", &prog), BIB_E_UNAVAILABLE);
    cr_assert_null(prog);
    cr_assert_str_eq(bib_cuda_executor.error(cts_ex),
                     "no entry 'nope' in its PTX (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND)");
}

CTS_TEST(user_kernel_launch_too_large_is_a_driver_error_and_the_executor_goes_on) {
    const bib_executor_ops_t *ops = &bib_cuda_executor;
    probe_run_t p = probe_open(cts_ex);
    uint32_t grid[3] = {4, 1, 1}, block[3] = {2048, 1, 1}, one[3] = {1, 1, 1};
    cr_assert_eq(probe_dispatch(&p, sizeof p.a.slots, grid, block), BIB_E_UNAVAILABLE);
    cr_assert_str_eq(ops->error(cts_ex), "cuLaunchKernel(kernel 'probe', grid 4x1x1, block "
                                         "2048x1x1): CUDA_ERROR_INVALID_VALUE");
    cr_assert_eq(probe_dispatch(&p, sizeof p.a.slots, one, one), BIB_OK, "%s", ops->error(cts_ex));
    uint32_t i = 0;
    cr_assert_eq(ops->download(cts_ex, p.buf, 0, &i, 4), BIB_OK, "%s", ops->error(cts_ex));
    cr_assert_eq(i, p.a.i);
    probe_close(&p);
}

#endif
