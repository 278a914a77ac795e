/* tests/unit/test_abi.c: the parts of the public API that keep hosts and
 * bindings working across library versions: the versioned options struct
 * (options.size), and the write-callback twins of the FILE * functions. */
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

Test(abi, info_report_reads_options_of_an_older_size) {
    unsigned char buf[sizeof(bib_options_t)];
    memset(buf, 0xab, sizeof buf);
    bib_options_t *o = (bib_options_t *)buf;
    bib_options_init_size(o, BIB_OPTIONS_SIZE_MIN);
    char *report = NULL;
    cr_assert_eq(bib_info_report(o, 1, &report), BIB_OK);
    cr_assert_not_null(report);
    bib_free(report);
    bib_options_t zero;
    memset(&zero, 0, sizeof zero);
    cr_assert_eq(bib_info_report(&zero, 1, &report), BIB_E_USAGE);
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
