/* tests/unit/test_placement.c: tensor placement across several executors
 * (vm/tensor.c) and auto's measured models (vm/placement.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/bib.h"
#include "vm/placement.h"
#include "vm/vm.h"

static bib_vm_t *vm_with(const char *backend, const char *src) {
    bib_options_t o;
    bib_options_init(&o);
    o.backend = backend;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_OK);
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag), BIB_OK, "%s",
                 diag ? diag : "");
    cr_assert_eq(bib_vm_load(vm, bytes, size, "t"), BIB_OK, "%s", bib_vm_error(vm));
    bib_free(bytes);
    bib_free(diag);
    return vm;
}

static const char *const program = ".tensor A t0 f32[2,2] = 1.0, 2.0, 3.0, 4.0\n"
                                   ".func main regs=2\n    MATMUL t1, A, A\n    LDI r0, 0\n"
                                   "    HALT r0\n.end\n";

static bool have(const char *executor) {
    const bib_executor_ops_t *ops = bib_executor_find(executor);
    if (ops == NULL)
        return false;
    bib_executor_t *ex = NULL;
    char why[256];
    if (ops->init(NULL, &ex, why, sizeof why) != BIB_OK)
        return false;
    ops->shutdown(ex);
    return true;
}

Test(placement, buffer_on_the_host_returns_the_host_copy) {
    bib_vm_t *vm = vm_with("cpu", program);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    bib_executor_t *ex;
    void *buf;
    cr_assert_eq(bib_tensor_buffer_on(vm, 1, "cpu", &ex, &buf, false), BIB_OK, "%s",
                 bib_vm_error(vm));
    cr_expect_eq(buf, vm->tensor.regs[1].storage->host);
    cr_expect_eq(((float *)buf)[0], 7.0f);
    cr_expect_eq(vm->tensor.stats.uploads + vm->tensor.stats.downloads, 0);
    bib_vm_destroy(vm);
}

Test(placement, buffer_on_an_unknown_executor_is_unavailable) {
    bib_vm_t *vm = vm_with("cpu", program);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
    bib_executor_t *ex;
    void *buf;
    cr_expect_eq(bib_tensor_buffer_on(vm, 1, "tpu", &ex, &buf, false), BIB_E_UNAVAILABLE);
    cr_expect(strstr(bib_vm_error(vm), "'tpu'") != NULL, "%s", bib_vm_error(vm));
    cr_expect_eq(bib_tensor_buffer_on(vm, 5, "cpu", &ex, &buf, false), BIB_E_TRAP);
    bib_vm_destroy(vm);
}

Test(placement, buffer_on_a_second_executor_copies_once_and_write_invalidates_the_rest) {
    if (!have("vulkan"))
        cr_skip_test("no Vulkan device here");
    /* The run leaves t1 on the host (cpu); the device program wants it on Vulkan. */
    bib_vm_t *vm = vm_with("cpu", program);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
    bib_executor_t *ex;
    void *buf;
    cr_assert_eq(bib_tensor_buffer_on(vm, 1, "vulkan", &ex, &buf, false), BIB_OK, "%s",
                 bib_vm_error(vm));
    cr_expect_eq(vm->tensor.stats.uploads, 1);
    cr_assert_eq(bib_tensor_buffer_on(vm, 1, "vulkan", &ex, &buf, true), BIB_OK);
    cr_expect_eq(vm->tensor.stats.uploads, 1, "valid already: no second copy");
    bib_storage_t *s = vm->tensor.regs[1].storage;
    cr_expect_eq(s->valid,
                 1u << (uint32_t)(bib_executor_find("vulkan") == bib_executor_at(1) ? 1 : 2),
                 "after a write only Vulkan's copy is valid (valid %#x)", s->valid);
    /* Reading on the host downloads once. */
    cr_assert_eq(bib_tensor_buffer_on(vm, 1, "cpu", &ex, &buf, false), BIB_OK);
    cr_assert_eq(bib_tensor_buffer_on(vm, 1, "cpu", &ex, &buf, false), BIB_OK);
    cr_expect_eq(vm->tensor.stats.downloads, 1);
    cr_expect_eq(((float *)buf)[3], 22.0f);
    bib_vm_destroy(vm);
}

Test(placement, a_kernel_on_the_host_moves_a_vulkan_result_once) {
    if (!have("vulkan"))
        cr_skip_test("no Vulkan device here");
    bib_vm_t *vm =
        vm_with("vulkan", ".tensor A t0 f32[2,2] = 1.0, 2.0, 3.0, 4.0\n"
                          ".func main regs=2\n    MATMUL t1, A, A\n    GPU_MATMUL t2, t1, t1\n"
                          "    GPU_MATMUL t3, t1, t1\n    MATMUL t4, t2, t3\n    LDI r0, 0\n"
                          "    HALT r0\n.end\n");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    /* A and t1 go up to Vulkan; GPU_* run where CUDA is (or the host): t1 comes
       down once for both GPU_MATMULs; t4 runs on Vulkan: t2, t3 go up. */
    const bib_tensor_stats_t *s = &vm->tensor.stats;
    if (vm->tensor.gpu_place == BIB_PLACE_HOST) {
        cr_expect_eq(s->downloads, 1, "downloads %llu", (unsigned long long)s->downloads);
        cr_expect_eq(s->uploads, 3, "uploads %llu", (unsigned long long)s->uploads);
        cr_expect_eq(s->kernels[BIB_STAT_HOST], 2);
        cr_expect_eq(s->kernels[BIB_STAT_DEVICE], 2);
    }
    bib_vm_destroy(vm);
}

Test(placement, crossover_is_where_the_device_overtakes_the_cpu) {
    bib_place_model_t host = {.measured = true, .overhead_s = 1e-6, .flops_per_s = 1e11};
    bib_place_model_t dev = {.measured = true,
                             .overhead_s = 20e-6,
                             .flops_per_s = 1e13,
                             .transfer_s = 10e-6,
                             .bytes_per_s = 1e10};
    double resident = bib_placement_crossover(&host, &dev, false);
    double from_host = bib_placement_crossover(&host, &dev, true);
    cr_expect(isfinite(resident) && resident > 0, "%g", resident);
    cr_expect_gt(from_host, resident, "copies push the threshold up");
    /* At the threshold both cost the same (19 us / (1e-11 - 1e-13) s per flop). */
    cr_expect(fabs(resident - 19e-6 / (1e-11 - 1e-13)) / resident < 0.01, "%g", resident);
    bib_place_model_t slow = dev;
    slow.flops_per_s = 1e10;
    cr_expect(isinf(bib_placement_crossover(&host, &slow, false)));
}

Test(placement, the_cpu_model_is_measured_then_cached_and_a_corrupt_entry_is_remeasured) {
    char dir[] = "/tmp/bib-placement-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    setenv("XDG_CACHE_HOME", dir, 1);
    bib_executor_t *ex = NULL;
    char why[256];
    cr_assert_eq(bib_cpu_executor.init(NULL, &ex, why, sizeof why), BIB_OK, "%s", why);
    bib_place_model_t m;
    bool cached = true;
    cr_assert_eq(bib_placement_model(&bib_cpu_executor, ex, &m, &cached, why, sizeof why), BIB_OK);
    cr_expect(!cached);
    cr_expect(m.measured && m.flops_per_s > 1e6 && m.overhead_s >= 0);
    bib_place_model_t again;
    cr_assert_eq(bib_placement_model(&bib_cpu_executor, ex, &again, &cached, why, sizeof why),
                 BIB_OK);
    cr_expect(cached);
    cr_expect_eq(again.flops_per_s, m.flops_per_s);
    /* Change the value of every entry (to one no measurement gives; setting
       its first digit to 9 changed nothing when it already was 9): its check
       line no longer matches. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sed -i 's/^flops_per_s .*/flops_per_s 1e30/' %s/bib/placement-*.txt",
             dir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(bib_placement_model(&bib_cpu_executor, ex, &again, &cached, why, sizeof why),
                 BIB_OK);
    cr_expect(!cached, "a corrupt entry must be measured again");
    bib_cpu_executor.shutdown(ex);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}
