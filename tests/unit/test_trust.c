/* tests/unit/test_trust.c: running modules BIB did not write (spec/security.md).
 *
 * The load policy of bib_options_t: deny BIB_DENY_DEVICE_CODE refuses, at
 * load and at reload, a module that carries a Vulkan shader (section 17) or a
 * CUDA kernel (section 18), naming the section and the program; allow_hosts
 * refuses an import outside its list before imports are bound; the options
 * are copied at bib_vm_create. The device timeout: a user shader looping far
 * past device_timeout_ms makes the run trap with BIB_E_TIMEOUT at the
 * instruction that waited; the VM's Vulkan executor is unusable afterwards
 * (the next run traps saying so) and bib_vm_destroy returns at once instead
 * of waiting for the shader. Without a Vulkan device those tests print
 * "SKIP: <reason>" and are skipped.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "include/bib.h"

static const char shader_module[] = ".tensors 1\n"
                                    ".shader fill glsl\n"
                                    "#version 450\n"
                                    "layout(local_size_x = 1) in;\n"
                                    "layout(std430, binding = 0) buffer V { uint v[]; };\n"
                                    "void main() { v[gl_GlobalInvocationID.x] = 7u; }\n"
                                    ".endshader\n"
                                    ".func main regs=4\n"
                                    "    LDI r0, 0\n"
                                    "    HALT r0\n"
                                    ".end\n";

static const char kernel_module[] = ".tensors 1\n"
                                    ".kernel k ptx-text params=t entry=k\n"
                                    ".version 7.0\n"
                                    ".target sm_75\n"
                                    ".address_size 64\n"
                                    ".visible .entry k(.param .u64 p) { ret; }\n"
                                    ".endkernel\n"
                                    ".func main regs=4\n"
                                    "    LDI r0, 0\n"
                                    "    HALT r0\n"
                                    ".end\n";

static const char hosts_module[] = ".func main regs=2\n"
                                   "    LDI r0, 5\n"
                                   "    HOSTCALL r1, print_i64, r0, 1\n"
                                   "    HOSTCALL r1, report, r0, 1\n"
                                   "    HALT r0\n"
                                   ".end\n";

/* The .bib bytes of source; the caller frees them with bib_free. */
static uint8_t *assemble(const char *source, size_t *size) {
    uint8_t *bytes = NULL;
    char *diag = NULL;
    bib_status_t st = bib_assemble(source, strlen(source), "policy.basm", &bytes, size, &diag);
    cr_assert_eq(st, BIB_OK, "assembly failed: %s", diag ? diag : "");
    bib_free(diag);
    return bytes;
}

static bib_vm_t *vm_with(uint32_t deny, const char *allow_hosts) {
    bib_options_t o;
    bib_options_init(&o);
    o.deny = deny;
    o.allow_hosts = allow_hosts;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_OK);
    return vm;
}

/* Loads source into vm; returns the status, the VM keeps the message. */
static bib_status_t load(bib_vm_t *vm, const char *source) {
    size_t size = 0;
    uint8_t *bytes = assemble(source, &size);
    bib_status_t st = bib_vm_load(vm, bytes, size, "policy.bib");
    bib_free(bytes);
    return st;
}

static bib_status_t report(bib_vm_t *vm, void *user, const bib_value_t *args, uint32_t nargs,
                           bib_value_t *result) {
    (void)vm, (void)user, (void)args, (void)nargs;
    result->i = 0;
    return BIB_OK;
}

TestSuite(policy);

Test(policy, options_init_denies_nothing_and_sets_no_timeout) {
    bib_options_t o;
    memset(&o, 0xAB, sizeof o);
    bib_options_init(&o);
    cr_assert_eq(o.deny, 0u);
    cr_assert_null(o.allow_hosts);
    cr_assert_eq(o.device_timeout_ms, 0u);
}

Test(policy, device_code_denied_refuses_a_shader_naming_section_17_and_the_shader) {
    bib_vm_t *vm = vm_with(BIB_DENY_DEVICE_CODE, NULL);
    cr_assert_eq(load(vm, shader_module), BIB_E_VERIFY);
    cr_assert_str_eq(bib_vm_error(vm),
                     "policy.bib: section 17 (shaders): shader 'fill' is user device code, which "
                     "the load policy denies (--deny=device-code)");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_STATE, "a refused module must not be runnable");
    bib_vm_destroy(vm);
}

Test(policy, device_code_denied_refuses_a_kernel_naming_section_18_and_the_kernel) {
    bib_vm_t *vm = vm_with(BIB_DENY_DEVICE_CODE, NULL);
    cr_assert_eq(load(vm, kernel_module), BIB_E_VERIFY);
    cr_assert_str_eq(bib_vm_error(vm),
                     "policy.bib: section 18 (kernels): kernel 'k' is user device code, which the "
                     "load policy denies (--deny=device-code)");
    bib_vm_destroy(vm);
}

Test(policy, device_code_denied_assembles_no_file_a_directive_names) {
    char path[] = "/tmp/bib-policy-XXXXXX.basm";
    int fd = mkstemps(path, 5);
    cr_assert_geq(fd, 0);
    const char *text = ".tensors 1\n"
                       ".shader s file \"/etc/passwd\"\n"
                       ".func main regs=4\n"
                       "    HALT r0\n"
                       ".end\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    bib_vm_t *vm = vm_with(BIB_DENY_DEVICE_CODE, NULL);
    bib_status_t st = bib_vm_load_file(vm, path);
    unlink(path);
    cr_assert_eq(st, BIB_E_ASM, "%s", bib_vm_error(vm));
    cr_assert(strstr(bib_vm_error(vm), ":2:1: error: shader 's' is user device code, which the "
                                       "load policy denies (--deny=device-code); nothing it names "
                                       "was read or compiled"),
              "%s", bib_vm_error(vm));
    cr_assert_null(strstr(bib_vm_error(vm), "root:"), "the file was read: %s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(policy, without_a_policy_device_code_loads) {
    bib_vm_t *vm = vm_with(0, NULL);
    cr_assert_eq(load(vm, shader_module), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(load(vm, kernel_module), BIB_OK, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(policy, a_refused_load_keeps_the_module_loaded_before) {
    bib_vm_t *vm = vm_with(BIB_DENY_DEVICE_CODE, NULL);
    cr_assert_eq(load(vm, hosts_module), BIB_E_LINK); /* nothing registered yet */
    bib_vm_register_stdio(vm, stdout);
    bib_vm_register_host(vm, "report", report, NULL);
    cr_assert_eq(load(vm, hosts_module), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(load(vm, kernel_module), BIB_E_VERIFY);
    int64_t exit_value = -1;
    cr_assert_eq(bib_vm_run(vm, &exit_value), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(exit_value, 5);
    bib_vm_destroy(vm);
}

Test(policy, allow_hosts_refuses_an_import_outside_the_list_before_linking) {
    bib_vm_t *vm = vm_with(0, "print_i64,print_str");
    /* report is not registered either: the policy speaks first. */
    cr_assert_eq(load(vm, hosts_module), BIB_E_VERIFY);
    cr_assert_str_eq(bib_vm_error(vm),
                     "policy.bib: section 4 (symbols): import 'report' is not an allowed host "
                     "function (allowed: print_i64, print_str)");
    bib_vm_destroy(vm);
}

Test(policy, allow_hosts_empty_allows_none) {
    bib_vm_t *vm = vm_with(0, "");
    bib_vm_register_stdio(vm, stdout);
    cr_assert_eq(load(vm, hosts_module), BIB_E_VERIFY);
    cr_assert_str_eq(bib_vm_error(vm),
                     "policy.bib: section 4 (symbols): import 'print_i64' is not an allowed host "
                     "function (allowed: none)");
    bib_vm_destroy(vm);
}

Test(policy, allow_hosts_matches_whole_names_only) {
    bib_vm_t *vm = vm_with(0, "print_i6,report,print_i645");
    bib_vm_register_stdio(vm, stdout);
    bib_vm_register_host(vm, "report", report, NULL);
    cr_assert_eq(load(vm, hosts_module), BIB_E_VERIFY);
    cr_assert(strstr(bib_vm_error(vm), "import 'print_i64' is not an allowed host function"), "%s",
              bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(policy, allow_hosts_listing_every_import_loads_and_runs) {
    bib_vm_t *vm = vm_with(BIB_DENY_DEVICE_CODE, "report,print_i64");
    bib_vm_register_stdio(vm, stdout);
    bib_vm_register_host(vm, "report", report, NULL);
    cr_assert_eq(load(vm, hosts_module), BIB_OK, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(policy, the_allow_list_is_copied_at_create) {
    char *list = strdup("print_i64,report");
    bib_vm_t *vm = vm_with(0, list);
    memset(list, 'x', strlen(list));
    free(list);
    bib_vm_register_stdio(vm, stdout);
    bib_vm_register_host(vm, "report", report, NULL);
    cr_assert_eq(load(vm, hosts_module), BIB_OK, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(policy, reload_obeys_the_policy_too) {
    bib_vm_t *vm = vm_with(BIB_DENY_DEVICE_CODE, NULL);
    const char *plain = ".tensors 1\n.func main regs=4\n    LDI r0, 0\n    HALT r0\n.end\n";
    cr_assert_eq(load(vm, plain), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(bib_vm_start(vm), BIB_OK, "%s", bib_vm_error(vm));
    size_t size = 0;
    uint8_t *bytes = assemble(shader_module, &size);
    cr_assert_eq(bib_vm_reload(vm, bytes, size, "policy.bib", 0), BIB_E_VERIFY);
    cr_assert(strstr(bib_vm_error(vm), "section 17 (shaders): shader 'fill'"), "%s",
              bib_vm_error(vm));
    bib_free(bytes);
    bib_vm_destroy(vm);
}

Test(policy, unknown_deny_bits_are_a_usage_error) {
    bib_options_t o;
    bib_options_init(&o);
    o.deny = 0x80u;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_E_USAGE);
    cr_assert_null(vm);
}

Test(policy, timeout_status_has_a_name) {
    cr_assert_str_eq(bib_status_name(BIB_E_TIMEOUT), "timeout");
}

/* ---- the device timeout on Vulkan ------------------------------------------- */

/* The shader of tests/cli/trust.sh: groups x groups workgroups of 64
   invocations, each storing n times to a volatile buffer (lavapipe stops a
   loop after 65535 iterations). With 65535 and n = 2^32 - 1 from r5: hours
   of work; with 1 and 1000: a moment. */
static const char spin_format[] =
    ".tensors 1\n"
    ".shader spin glsl\n"
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(std430, binding = 0) coherent volatile buffer V { uint v[]; };\n"
    "layout(push_constant) uniform Push { uint n; };\n"
    "void main() {\n"
    "    for (uint i = 0u; i < n; i++)\n"
    "        v[1] = v[1] + 1u;\n"
    "}\n"
    ".endshader\n"
    ".func main regs=8\n"
    "    LDI r0, 4\n"
    "    ALLOC t0, i32, r0, 1\n"
    "    VK_INIT -1\n"
    "    LDI r1, %d\n"
    "    LDI r2, %d\n"
    "    LDI r3, 1\n"
    "    LDI r4, 0\n"
    "    LDI r5, %d\n"
    "    VK_COMPUTE spin, r1, r4, 1\n"
    "    VK_SYNC\n"
    "    HALT r0\n"
    ".end\n";

static void spin_source(char *buf, size_t cap, int groups, int n) {
    snprintf(buf, cap, spin_format, groups, groups, n);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

TestSuite(device_timeout, .timeout = 60);

Test(device_timeout, a_shader_past_the_limit_traps_and_the_executor_stays_unusable) {
    bib_options_t o;
    bib_options_init(&o);
    o.device_timeout_ms = 200;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_OK);
    char spin[2048];
    spin_source(spin, sizeof spin, 65535, -1);
    cr_assert_eq(load(vm, spin), BIB_OK, "%s", bib_vm_error(vm));
    double t0 = now_s();
    bib_status_t st = bib_vm_run(vm, NULL);
    double waited = now_s() - t0;
    if (st == BIB_E_TRAP && strstr(bib_vm_error(vm), "no device for user device code")) {
        printf("SKIP: %s\n", bib_vm_error(vm));
        bib_vm_destroy(vm);
        cr_skip_test("no Vulkan device");
    }
    cr_assert_eq(st, BIB_E_TIMEOUT, "%s: %s", bib_status_name(st), bib_vm_error(vm));
    cr_assert_str_eq(bib_vm_error(vm),
                     "trap at pc 9 (VK_SYNC) line 22: vulkan: device work ran past the device "
                     "timeout (200 ms); the executor is unusable from now on");
    cr_assert(waited >= 0.2 && waited < 10, "the run took %.3f s", waited);

    /* The next run in this VM does not reuse the executor. */
    st = bib_vm_run(vm, NULL);
    cr_assert_eq(st, BIB_E_TRAP, "%s: %s", bib_status_name(st), bib_vm_error(vm));
    cr_assert(strstr(bib_vm_error(vm), "trap at pc 8 (VK_COMPUTE spin, r1, r4, 1) line 21: ") &&
                  strstr(bib_vm_error(vm), "vulkan: unusable after device work ran past the "
                                           "device timeout (200 ms)"),
              "%s", bib_vm_error(vm));

    /* Destroying the VM does not wait for the shader still running. */
    t0 = now_s();
    bib_vm_destroy(vm);
    cr_assert_lt(now_s() - t0, 5.0, "bib_vm_destroy waited for the shader");
}

Test(device_timeout, work_within_the_limit_runs_as_before) {
    bib_options_t o;
    bib_options_init(&o);
    o.device_timeout_ms = 5000;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_OK);
    char quick[2048];
    spin_source(quick, sizeof quick, 1, 1000);
    cr_assert_eq(load(vm, quick), BIB_OK, "%s", bib_vm_error(vm));
    int64_t exit_value = -1;
    bib_status_t st = bib_vm_run(vm, &exit_value);
    if (st == BIB_E_TRAP && strstr(bib_vm_error(vm), "no device for user device code")) {
        printf("SKIP: %s\n", bib_vm_error(vm));
        bib_vm_destroy(vm);
        cr_skip_test("no Vulkan device");
    }
    cr_assert_eq(st, BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(exit_value, 4);
    cr_assert_eq(bib_vm_run(vm, &exit_value), BIB_OK, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}
