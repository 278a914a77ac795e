/* tests/unit/test_abi.c: the parts of the public API that keep hosts and
 * bindings working across library versions: the versioned options struct
 * (options.size), the versioned structs of bib info's facts, and the
 * write-callback twins of the FILE * functions. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bib.h"

/* Text collected from a bib_write_fn, with the number of calls. */
typedef struct {
    char text[4096];
    size_t length;
    unsigned calls;
} sink_t;

static void sink_write(void *user, const char *bytes, size_t length) {
    sink_t *s = user;
    cr_assert_leq(s->length + length, sizeof s->text - 1);
    memcpy(s->text + s->length, bytes, length);
    s->length += length;
    s->text[s->length] = '\0';
    s->calls++;
}

static void load_source(bib_vm_t *vm, const char *src) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag), BIB_OK, "%s",
                 diag ? diag : "");
    bib_free(diag);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "t"), BIB_OK, "%s", bib_vm_error(vm));
    bib_free(bytes);
}

static const char loop_src[] = ".func main regs=3\n"
                               "    LDI r0, 0\n"
                               "    LDI r1, 100\n"
                               "top:\n"
                               "    ADDI r0, r0, 1\n"
                               "    JLT r0, r1, top\n"
                               "    HALT r0\n"
                               ".end\n";

Test(abi, options_init_records_the_struct_size) {
    bib_options_t o;
    memset(&o, 0xff, sizeof o);
    bib_options_init(&o);
    cr_assert_eq(o.size, sizeof o);
    cr_assert_eq(o.fuel, 0);
    cr_assert_null(o.trace_write);
}

Test(abi, options_without_init_are_refused) {
    bib_options_t o;
    memset(&o, 0, sizeof o); /* size 0: not made by bib_options_init */
    bib_vm_t *vm = (bib_vm_t *)&o;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_E_USAGE);
    cr_assert_null(vm);
}

Test(abi, options_from_a_newer_header_are_refused) {
    bib_options_t o;
    bib_options_init(&o);
    o.size = sizeof o + 8;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_E_USAGE);
    cr_assert_null(vm);
}

/* A host whose struct ends with strict_device (a header without the trace
 * callback): the fields after it take their defaults, whatever follows its
 * struct in memory. */
Test(abi, options_from_an_older_header_take_defaults_for_new_fields) {
    unsigned char buf[sizeof(bib_options_t)];
    memset(buf, 0xab, sizeof buf); /* garbage where the newer fields would be */
    bib_options_t *o = (bib_options_t *)buf;
    bib_options_init_size(o, BIB_OPTIONS_SIZE_MIN);
    cr_assert_eq(o->size, BIB_OPTIONS_SIZE_MIN);
    cr_assert_eq(buf[BIB_OPTIONS_SIZE_MIN], 0xab, "init wrote past the size it was given");
    o->fuel = 50;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(o, &vm), BIB_OK);
    load_source(vm, loop_src);
    /* The fuel the old host set is honoured; trace_write (garbage here)
       is not read, or the run would crash. */
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_E_TRAP);
    cr_assert(strstr(bib_vm_error(vm), "fuel exhausted") != NULL, "%s", bib_vm_error(vm));
    bib_vm_destroy(vm);
}

Test(abi, options_one_byte_short_of_the_oldest_are_refused) {
    bib_options_t o;
    bib_options_init_size(&o, BIB_OPTIONS_SIZE_MIN - 1);
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_E_USAGE);
}

/* ---- the facts of bib info ---------------------------------------------- */

static bib_info_t *gather(void) {
    bib_info_t *info = NULL;
    cr_assert_eq(bib_info_gather(NULL, &info), BIB_OK);
    cr_assert_not_null(info);
    return info;
}

Test(abi, info_gather_reads_options_of_an_older_size) {
    unsigned char buf[sizeof(bib_options_t)];
    memset(buf, 0xab, sizeof buf);
    bib_options_t *o = (bib_options_t *)buf;
    bib_options_init_size(o, BIB_OPTIONS_SIZE_MIN);
    bib_info_t *info = NULL;
    cr_assert_eq(bib_info_gather(o, &info), BIB_OK);
    cr_assert_not_null(info);
    bib_info_free(info);
    bib_options_t zero;
    memset(&zero, 0, sizeof zero);
    cr_assert_eq(bib_info_gather(&zero, &info), BIB_E_USAGE);
    cr_assert_null(info);
}

Test(abi, info_gives_the_cpu_and_its_executor_first) {
    bib_info_t *info = gather();
    bib_info_cpu_t cpu = {.size = sizeof cpu};
    cr_assert_eq(bib_info_cpu(info, &cpu), BIB_OK);
    cr_assert(cpu.model != NULL && cpu.model[0] != '\0');
    cr_assert_geq(cpu.cores_online, 1);
    cr_assert_not_null(cpu.kernel_level);
    for (uint32_t i = 0; i < cpu.feature_count; i++)
        cr_assert(cpu.features[i] != NULL && cpu.features[i][0] != '\0');
    cr_assert_geq(bib_info_executor_count(info), 1);
    bib_info_executor_t e = {.size = sizeof e};
    cr_assert_eq(bib_info_executor(info, 0, &e), BIB_OK);
    cr_assert_str_eq(e.name, "cpu");
    cr_assert(e.built);
    cr_assert_eq(e.device_count, 1, "%s", e.absent ? e.absent : "");
    cr_assert_null(e.absent);
    bib_info_device_t d = {.size = sizeof d};
    cr_assert_eq(bib_info_device(info, 0, 0, &d), BIB_OK);
    cr_assert(strncmp(d.describe, "cpu: ", 5) == 0, "%s", d.describe);
    cr_assert(d.has_facts);
    cr_assert_str_eq(d.kind, "CPU");
    cr_assert_eq(d.memory_bytes, cpu.memory_total_bytes);
    cr_assert_gt(d.max_threads, 0);
    bib_info_free(info);
}

Test(abi, info_lists_each_gpu_executor_once_with_devices_or_why_none) {
    bib_info_t *info = gather();
    int cuda = 0, vulkan = 0;
    for (uint32_t i = 1; i < bib_info_executor_count(info); i++) {
        bib_info_executor_t e = {.size = sizeof e};
        cr_assert_eq(bib_info_executor(info, i, &e), BIB_OK);
        cuda += strcmp(e.name, "cuda") == 0;
        vulkan += strcmp(e.name, "vulkan") == 0;
        cr_assert((e.device_count > 0) == (e.absent == NULL), "%s", e.name);
        if (!e.built)
            cr_assert(strstr(e.absent, "this build has no") != NULL, "%s", e.absent);
        if (e.measured)
            cr_assert(e.built && e.device_count > 0 && e.flops_per_s > 0, "%s", e.name);
        for (uint32_t k = 0; k < e.device_count; k++) {
            bib_info_device_t d = {.size = sizeof d};
            cr_assert_eq(bib_info_device(info, i, k, &d), BIB_OK);
            cr_assert(d.describe != NULL && d.describe[0] != '\0');
        }
    }
    cr_assert_eq(cuda, 1);
    cr_assert_eq(vulkan, 1);
    bib_info_free(info);
}

Test(abi, info_placement_picks_a_listed_executor) {
    bib_info_t *info = gather();
    bib_info_placement_t p = {.size = sizeof p};
    cr_assert_eq(bib_info_placement(info, &p), BIB_OK);
    cr_assert_eq(p.small_n, 16);
    cr_assert_eq(p.large_n, 4096);
    const char *picks[] = {p.small_executor, p.large_executor, p.threshold_executor};
    for (size_t k = 0; k < 3; k++) {
        int listed = picks[k] == NULL && k == 2;
        for (uint32_t i = 0; !listed && i < bib_info_executor_count(info); i++) {
            bib_info_executor_t e = {.size = sizeof e};
            cr_assert_eq(bib_info_executor(info, i, &e), BIB_OK);
            listed = e.built && strcmp(e.name, picks[k]) == 0;
        }
        cr_assert(listed, "%s", picks[k]);
    }
    if (p.threshold_executor != NULL)
        cr_assert(p.threshold_flops_from_host >= 0 && p.threshold_flops_resident >= 0);
    bib_info_free(info);
}

/* A host built against a newer bib.h, whose structs have fields this library
 * does not know: those read as zero, whatever was in them. */
Test(abi, info_structs_from_a_newer_header_read_zeros_past_what_the_library_knows) {
    bib_info_t *info = gather();
    const size_t own[] = {sizeof(bib_info_cpu_t), sizeof(bib_info_executor_t),
                          sizeof(bib_info_device_t), sizeof(bib_info_placement_t),
                          sizeof(bib_info_mpi_t)};
    for (int k = 0; k < 5; k++) {
        union {
            size_t size;
            unsigned char bytes[512];
        } buf;
        memset(&buf, 0xab, sizeof buf);
        buf.size = own[k] + 24;
        bib_status_t st = k == 0   ? bib_info_cpu(info, (bib_info_cpu_t *)&buf)
                          : k == 1 ? bib_info_executor(info, 0, (bib_info_executor_t *)&buf)
                          : k == 2 ? bib_info_device(info, 0, 0, (bib_info_device_t *)&buf)
                          : k == 3 ? bib_info_placement(info, (bib_info_placement_t *)&buf)
                                   : bib_info_mpi(info, 0, (bib_info_mpi_t *)&buf);
        cr_assert_eq(st, BIB_OK, "struct %d", k);
        for (size_t b = own[k]; b < own[k] + 24; b++)
            cr_assert_eq(buf.bytes[b], 0, "struct %d: byte %zu", k, b);
        cr_assert_eq(buf.bytes[own[k] + 24], 0xab, "struct %d: written past its size", k);
    }
    bib_info_free(info);
}

/* A host compiled against the first bib_info_device_t, which ended at
 * max_threads: it gets its fields, and nothing is written past them. */
Test(abi, info_device_of_the_first_version_gets_its_fields_only) {
    bib_info_t *info = gather();
    union {
        bib_info_device_t d;
        unsigned char bytes[sizeof(bib_info_device_t)];
    } old;
    memset(&old, 0xab, sizeof old);
    old.d.size = offsetof(bib_info_device_t, max_threads) + sizeof old.d.max_threads;
    cr_assert_eq(bib_info_device(info, 0, 0, &old.d), BIB_OK);
    cr_assert_eq(old.d.max_threads, 256, "the cpu executor's thread cap");
    for (size_t b = old.d.size; b < sizeof old; b++)
        cr_assert_eq(old.bytes[b], 0xab, "byte %zu past the first version's size was written", b);
    bib_info_free(info);
}

Test(abi, info_structs_smaller_than_their_first_version_are_refused) {
    bib_info_t *info = gather();
    bib_info_cpu_t cpu = {.size = sizeof cpu - 1};
    cr_assert_eq(bib_info_cpu(info, &cpu), BIB_E_USAGE);
    bib_info_executor_t e = {.size = 0};
    cr_assert_eq(bib_info_executor(info, 0, &e), BIB_E_USAGE);
    /* The first version ended at max_threads (loop_limit came later). */
    bib_info_device_t d = {.size =
                               offsetof(bib_info_device_t, max_threads) + sizeof d.max_threads - 1};
    cr_assert_eq(bib_info_device(info, 0, 0, &d), BIB_E_USAGE);
    bib_info_placement_t p = {.size = sizeof p - 1};
    cr_assert_eq(bib_info_placement(info, &p), BIB_E_USAGE);
    /* Its last field is an int: sizeof has padding past it. */
    bib_info_mpi_t m = {.size = offsetof(bib_info_mpi_t, selected) + sizeof m.selected - 1};
    cr_assert_eq(bib_info_mpi(info, 0, &m), BIB_E_USAGE);
    bib_info_free(info);
}

/* The MPI libraries: Open MPI's and the MPICH ABI's, each either usable
 * (an ABI and a version) or not (why), none selected outside a launcher;
 * found without starting MPI. */
Test(abi, info_mpi_lists_both_abis_without_starting_mpi) {
    unsetenv("BIB_MPI_LIBRARY");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMI_SIZE");
    bib_info_t *info = gather();
    cr_assert_eq(bib_info_mpi_count(info), 2);
    const char *launchers[] = {"mpirun (Open MPI)", "mpiexec (Hydra)"};
    const char *abis[] = {"Open MPI", "MPICH"};
    for (uint32_t i = 0; i < 2; i++) {
        bib_info_mpi_t m = {.size = sizeof m};
        cr_assert_eq(bib_info_mpi(info, i, &m), BIB_OK);
        cr_assert_str_eq(m.launcher, launchers[i]);
        cr_assert(m.library != NULL && m.library[0] != '\0');
        cr_assert((m.abi == NULL) == (m.absent != NULL), "%s", m.library);
        cr_assert((m.abi == NULL) == (m.version == NULL), "%s", m.library);
        if (m.abi != NULL)
            cr_assert_str_eq(m.abi, abis[i]);
        cr_assert_eq(m.selected, 0);
    }
    bib_info_mpi_t m = {.size = sizeof m};
    cr_assert_eq(bib_info_mpi(info, 2, &m), BIB_E_USAGE);
    bib_info_free(info);
}

Test(abi, info_readers_refuse_what_is_not_there) {
    bib_info_t *info = gather();
    uint32_t n = bib_info_executor_count(info);
    bib_info_executor_t e = {.size = sizeof e};
    cr_assert_eq(bib_info_executor(info, n, &e), BIB_E_USAGE);
    bib_info_device_t d = {.size = sizeof d};
    cr_assert_eq(bib_info_device(info, 0, 1, &d), BIB_E_USAGE);
    cr_assert_eq(bib_info_device(info, n, 0, &d), BIB_E_USAGE);
    cr_assert_eq(bib_info_executor(info, 0, NULL), BIB_E_USAGE);
    cr_assert_eq(bib_info_executor_count(NULL), 0);
    bib_info_cpu_t cpu = {.size = sizeof cpu};
    cr_assert_eq(bib_info_cpu(NULL, &cpu), BIB_E_USAGE);
    cr_assert_eq(bib_info_gather(NULL, NULL), BIB_E_USAGE);
    bib_info_free(info);
    bib_info_free(NULL);
}

Test(abi, output_functions_write_through_a_callback) {
    sink_t sink = {0};
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_register_output(vm, sink_write, &sink), BIB_OK);
    load_source(vm, "msg: .ascii \"hi\\n\"\n"
                    ".func main regs=3\n"
                    "    LDI r0, -42\n"
                    "    HOSTCALL r1, print_i64, r0, 1\n"
                    "    LDI r0, 65\n"
                    "    HOSTCALL r1, print_char, r0, 1\n"
                    "    LDI r0, msg\n"
                    "    LDI r1, 3\n"
                    "    HOSTCALL r2, print_str, r0, 2\n"
                    "    HALT r2\n"
                    ".end\n");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    /* Unbuffered: everything arrived before the run returned, in order. */
    cr_assert_str_eq(sink.text, "-42\nAhi\n");
    bib_vm_destroy(vm);
}

/* Runs the loaded module, which must succeed; its exit value. */
static int64_t run_ok(bib_vm_t *vm) {
    int64_t exit = 0;
    cr_assert_eq(bib_vm_run(vm, &exit), BIB_OK, "%s", bib_vm_error(vm));
    return exit;
}

/* A host function that multiplies its argument by *user. */
static bib_status_t times(bib_vm_t *vm, void *user, const bib_value_t *args, uint32_t nargs,
                          bib_value_t *result) {
    (void)vm;
    (void)nargs;
    result->i = args[0].i * *(const int64_t *)user;
    return BIB_OK;
}

Test(abi, functions_registered_again_after_loading_replace_the_loaded_ones) {
    sink_t first = {0}, second = {0};
    int64_t two = 2, three = 3;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_register_output(vm, sink_write, &first), BIB_OK);
    cr_assert_eq(bib_vm_register_host(vm, "f", times, &two), BIB_OK);
    load_source(vm, ".func main regs=2\n"
                    "    LDI r0, 7\n"
                    "    HOSTCALL r1, f, r0, 1\n"
                    "    HOSTCALL r0, print_i64, r1, 1\n"
                    "    HALT r1\n"
                    ".end\n");
    cr_assert_eq(run_ok(vm), 14);
    /* Both replaced with the module loaded: the next run calls the new
       function with its own user pointer, and prints through the new sink
       (the stream of the first one is closed: writing to it would be a use
       after free, which the sanitized build reports). */
    cr_assert_eq(bib_vm_register_host(vm, "f", times, &three), BIB_OK);
    cr_assert_eq(bib_vm_register_output(vm, sink_write, &second), BIB_OK);
    cr_assert_eq(run_ok(vm), 21);
    cr_assert_str_eq(first.text, "14\n");
    cr_assert_str_eq(second.text, "21\n");
    bib_vm_destroy(vm);
}

/* A host function that destroys the VM whose run called it. */
static bib_status_t destroy_own_vm(bib_vm_t *vm, void *user, const bib_value_t *args,
                                   uint32_t nargs, bib_value_t *result) {
    (void)user;
    (void)nargs;
    bib_vm_destroy(vm);
    result->i = args[0].i + 1;
    return BIB_OK;
}

/* bib_vm_destroy from inside the VM's own run is ignored: the run finishes
 * with its result (the sanitized build reports the use after free the call
 * used to cause), and the owner's destroy afterwards frees it. */
Test(abi, destroying_the_vm_from_its_own_run_is_ignored) {
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    cr_assert_eq(bib_vm_register_host(vm, "f", destroy_own_vm, NULL), BIB_OK);
    load_source(vm, ".func main regs=2\n"
                    "    LDI r0, 41\n"
                    "    HOSTCALL r1, f, r0, 1\n"
                    "    ADDI r1, r1, 100\n"
                    "    HALT r1\n"
                    ".end\n");
    cr_assert_eq(run_ok(vm), 142);
    cr_assert_eq(run_ok(vm), 142);
    bib_vm_destroy(vm);
}

Test(abi, trace_lines_go_to_the_options_callback) {
    sink_t sink = {0};
    bib_options_t o;
    bib_options_init(&o);
    o.trace_format = BIB_TRACE_TEXT;
    o.trace_write = sink_write;
    o.trace_user = &sink;
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(&o, &vm), BIB_OK);
    load_source(vm, ".func main regs=1\n    LDI r0, 7\n    HALT r0\n.end\n");
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert(strstr(sink.text, "LDI r0, 7") != NULL, "%s", sink.text);
    cr_assert(strstr(sink.text, "HALT r0") != NULL, "%s", sink.text);
    cr_assert_eq(sink.calls, 2, "one call per trace line, got %u: %s", sink.calls, sink.text);
    bib_vm_destroy(vm);
}

Test(abi, set_trace_writer_switches_the_trace_to_a_callback) {
    sink_t sink = {0};
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    load_source(vm, ".func main regs=1\n    LDI r0, 7\n    HALT r0\n.end\n");
    cr_assert_eq(bib_vm_set_trace_writer(vm, BIB_TRACE_JSON, sink_write, &sink), BIB_OK);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(sink.text[0], '{', "%s", sink.text);
    size_t first = sink.length;
    /* A second writer replaces the first (which the VM closes). */
    sink_t second = {0};
    cr_assert_eq(bib_vm_set_trace_writer(vm, BIB_TRACE_TEXT, sink_write, &second), BIB_OK);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
    cr_assert_eq(sink.length, first);
    cr_assert(strstr(second.text, "HALT") != NULL, "%s", second.text);
    cr_assert_eq(bib_vm_set_trace_writer(vm, (bib_trace_format_t)9, sink_write, &second),
                 BIB_E_USAGE);
    bib_vm_destroy(vm);
}

Test(abi, profile_report_returns_the_text_profile_write_prints) {
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(NULL, &vm), BIB_OK);
    load_source(vm, loop_src);
    char *text = NULL;
    cr_assert_eq(bib_vm_profile_report(vm, 1, &text), BIB_E_STATE);
    cr_assert_null(text);
    cr_assert_eq(bib_vm_profile(vm, 1), BIB_OK);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
    cr_assert_eq(bib_vm_profile_report(vm, 1, &text), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert(strncmp(text, "{\"instructions\":203,", 20) == 0, "%s", text);
    bib_free(text);
    cr_assert_eq(bib_vm_profile_report(vm, 0, &text), BIB_OK);
    cr_assert(strncmp(text, "profile: 203 instructions", 25) == 0, "%s", text);
    bib_free(text);
    bib_vm_destroy(vm);
}
