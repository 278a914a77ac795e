/* tests/unit/test_debug.c: stepped runs, breakpoints, inspection, reload and
 * profiles through the public API (include/bib.h, "debugging and
 * profiling"). */
#include <criterion/criterion.h>
#include <string.h>

#include "include/bib.h"

static const char fib_src[] = ".func main regs=2\n" /* line 1 */
                              "    LDI r0, 10\n"    /* pc 0 */
                              "    CALL r1, fib, r0, 1\n"
                              "    HALT r1\n"
                              ".end\n"
                              ".func fib args=1 regs=4\n" /* pc 3.. */
                              "    LDI r1, 2\n"
                              "    JLT r0, r1, small\n"
                              "    ADDI r1, r0, -1\n"
                              "    CALL r2, fib, r1, 1\n"
                              "    ADDI r1, r0, -2\n"
                              "    CALL r3, fib, r1, 1\n"
                              "    ADD r0, r2, r3\n"
                              "small:\n"
                              "    RET r0\n" /* pc 10, line 15 */
                              ".end\n";

static bib_vm_t *load(const char *src, const bib_options_t *options) {
    uint8_t *bytes = NULL;
    size_t size = 0;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(src, strlen(src), "t.basm", &bytes, &size, &diag), BIB_OK, "%s",
                 diag ? diag : "");
    bib_free(diag);
    bib_vm_t *vm = NULL;
    cr_assert_eq(bib_vm_create(options, &vm), BIB_OK);
    cr_assert_eq(bib_vm_load(vm, bytes, size, "t"), BIB_OK, "%s", bib_vm_error(vm));
    bib_free(bytes);
    return vm;
}

Test(debug, start_pauses_before_the_first_instruction) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_position_t pos;
    cr_assert_eq(bib_vm_position(vm, &pos), BIB_E_STATE);
    cr_assert_eq(bib_vm_start(vm), BIB_OK);
    cr_assert_eq(bib_vm_position(vm, &pos), BIB_OK);
    cr_assert_eq(pos.stop, BIB_STOP_PAUSED);
    cr_assert_eq(pos.pc, 0);
    cr_assert_eq(pos.depth, 1);
    cr_assert_str_eq(pos.func_name, "main");
    cr_assert_eq(pos.instructions, 0);
    bib_vm_destroy(vm);
}

Test(debug, step_executes_exactly_the_count) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_vm_start(vm);
    bib_stop_t stop;
    cr_assert_eq(bib_vm_step(vm, 3, &stop), BIB_OK);
    cr_assert_eq(stop, BIB_STOP_PAUSED);
    bib_position_t pos;
    bib_vm_position(vm, &pos);
    cr_assert_eq(pos.instructions, 3);
    cr_assert_eq(pos.pc, 4); /* LDI, CALL, LDI r1: now at JLT */
    cr_assert_eq(pos.depth, 2);
    cr_assert_str_eq(pos.func_name, "fib");
    bib_vm_destroy(vm);
}

Test(debug, frames_show_the_caller_at_its_call) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_vm_start(vm);
    bib_vm_step(vm, 2, NULL);
    bib_frame_info_t f;
    cr_assert_eq(bib_vm_frame(vm, 0, &f), BIB_OK);
    cr_assert_str_eq(f.func_name, "fib");
    cr_assert_eq(f.nregs, 4);
    cr_assert_eq(f.regs[0].i, 10);
    cr_assert_eq(bib_vm_frame(vm, 1, &f), BIB_OK);
    cr_assert_str_eq(f.func_name, "main");
    cr_assert_eq(f.pc, 1);
    cr_assert_eq(f.line, 3);
    cr_assert_eq(bib_vm_frame(vm, 2, &f), BIB_E_USAGE);
    bib_vm_destroy(vm);
}

Test(debug, continue_stops_at_a_breakpoint_and_moves_on_from_it) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_vm_start(vm);
    cr_assert_eq(bib_vm_break(vm, 10, 1), BIB_OK);
    bib_stop_t stop;
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK);
    cr_assert_eq(stop, BIB_STOP_BREAKPOINT);
    bib_position_t first, second;
    bib_vm_position(vm, &first);
    cr_assert_eq(first.pc, 10);
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK);
    cr_assert_eq(stop, BIB_STOP_BREAKPOINT);
    bib_vm_position(vm, &second);
    cr_assert_gt(second.instructions, first.instructions);
    uint32_t pcs[4];
    cr_assert_eq(bib_vm_breakpoints(vm, pcs, 4), 1);
    cr_assert_eq(pcs[0], 10);
    bib_vm_destroy(vm);
}

Test(debug, a_stepped_run_halts_with_the_same_result_as_run) {
    bib_vm_t *vm = load(fib_src, NULL);
    int64_t exit_value = 0;
    cr_assert_eq(bib_vm_run(vm, &exit_value), BIB_OK);
    bib_run_stats_t stats;
    bib_vm_stats(vm, &stats);
    bib_vm_start(vm);
    bib_stop_t stop;
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK);
    cr_assert_eq(stop, BIB_STOP_HALTED);
    bib_position_t pos;
    bib_vm_position(vm, &pos);
    cr_assert_eq(pos.exit_value, 55);
    cr_assert_eq(pos.exit_value, exit_value);
    cr_assert_eq(pos.instructions, stats.instructions);
    cr_assert_eq(bib_vm_step(vm, 1, &stop), BIB_E_STATE);
    bib_vm_destroy(vm);
}

Test(debug, a_trap_is_reported_with_its_status_and_stop) {
    bib_vm_t *vm = load(".func main regs=3\n LDI r1, 1\n DIV r0, r1, r2\n HALT r0\n.end\n", NULL);
    bib_vm_start(vm);
    bib_stop_t stop;
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_E_TRAP);
    cr_assert_eq(stop, BIB_STOP_TRAPPED);
    cr_assert(strstr(bib_vm_error(vm), "division by zero") != NULL);
    bib_position_t pos;
    bib_vm_position(vm, &pos);
    cr_assert_eq(pos.pc, 1);
    bib_vm_destroy(vm);
}

Test(debug, reload_keeps_registers_and_memory_and_runs_on_from_the_offset) {
    bib_vm_t *vm =
        load(".func main\n LDI r0, 7\n STORE8 r0, r1, 0\n HALT r0\n.end\n.memory 8\n", NULL);
    bib_vm_start(vm);
    bib_stop_t stop;
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK);
    cr_assert_eq(stop, BIB_STOP_HALTED);
    const char *more = ".func main\n LDI r0, 7\n STORE8 r0, r1, 0\n ADDI r2, r0, 1\n HALT r2\n"
                       ".end\n.memory 16\n";
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(more, strlen(more), "t", &bytes, &size, &diag), BIB_OK);
    bib_free(diag);
    cr_assert_eq(bib_vm_reload(vm, bytes, size, "t", 2), BIB_OK, "%s", bib_vm_error(vm));
    bib_free(bytes);
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK);
    cr_assert_eq(stop, BIB_STOP_HALTED);
    bib_position_t pos;
    bib_vm_position(vm, &pos);
    cr_assert_eq(pos.exit_value, 8); /* r0 = 7 survived the reload */
    uint64_t msize;
    uint8_t *mem = bib_vm_memory(vm, &msize);
    cr_assert_eq(msize, 16);
    cr_assert_eq(mem[0], 7);
    bib_vm_destroy(vm);
}

/* The kept tensor registers share the old module's constants; a reload
   frees that module, and the registers keep their values. */
Test(debug, reload_keeps_tensors_that_share_the_old_modules_constants) {
    bib_vm_t *vm = load(".tensor k t0 f32[4] = 1.0, 2.0, 3.0, 4.0\n"
                        ".func main regs=3\n THASH r0, t0\n HALT r0\n.end\n",
                        NULL);
    bib_vm_start(vm);
    bib_stop_t stop;
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK);
    cr_assert_eq(stop, BIB_STOP_HALTED);
    const char *more = ".tensor k t0 f32[4] = 5.0, 6.0, 7.0, 8.0\n"
                       ".func main regs=3\n THASH r0, t0\n LDI r1, 1\n LDK r2, =9.5\n"
                       " TSET t0, r1, r2\n HALT r0\n.end\n";
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    cr_assert_eq(bib_assemble(more, strlen(more), "t", &bytes, &size, &diag), BIB_OK);
    bib_free(diag);
    cr_assert_eq(bib_vm_reload(vm, bytes, size, "t", 1), BIB_OK, "%s", bib_vm_error(vm));
    bib_free(bytes);
    float v[4];
    cr_assert_eq(bib_vm_tensor_read(vm, 0, 0, 4, v), BIB_OK, "%s", bib_vm_error(vm));
    cr_expect(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4, "%g %g %g %g", v[0], v[1], v[2],
              v[3]);
    cr_assert_eq(bib_vm_continue(vm, &stop), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(stop, BIB_STOP_HALTED);
    cr_assert_eq(bib_vm_tensor_read(vm, 0, 0, 4, v), BIB_OK, "%s", bib_vm_error(vm));
    cr_expect(v[0] == 1 && v[1] == 9.5f && v[2] == 3 && v[3] == 4, "%g %g %g %g", v[0], v[1], v[2],
              v[3]);
    /* A fresh run starts from the new module's constant. */
    int64_t h0 = 0;
    cr_assert_eq(bib_vm_run(vm, &h0), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(bib_vm_tensor_read(vm, 0, 0, 4, v), BIB_OK, "%s", bib_vm_error(vm));
    cr_expect(v[0] == 5 && v[1] == 9.5f && v[2] == 7 && v[3] == 8, "%g %g %g %g", v[0], v[1], v[2],
              v[3]);
    bib_vm_destroy(vm);
}

Test(debug, reload_refuses_a_run_paused_inside_a_call) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_vm_start(vm);
    bib_vm_step(vm, 2, NULL);
    uint8_t *bytes;
    size_t size;
    char *diag = NULL;
    bib_assemble(fib_src, strlen(fib_src), "t", &bytes, &size, &diag);
    bib_free(diag);
    cr_assert_eq(bib_vm_reload(vm, bytes, size, "t", 0), BIB_E_STATE);
    bib_free(bytes);
    bib_position_t pos;
    bib_vm_position(vm, &pos);
    cr_assert_eq(pos.depth, 2);
    bib_vm_destroy(vm);
}

Test(debug, functions_and_lines_map_to_pcs) {
    bib_vm_t *vm = load(fib_src, NULL);
    cr_assert_eq(bib_vm_function_count(vm), 2);
    cr_assert_eq(bib_vm_function_find(vm, "fib"), 1);
    cr_assert_eq(bib_vm_function_find(vm, "nope"), -1);
    bib_function_info_t f;
    bib_vm_function_info(vm, 1, &f);
    cr_assert_eq(f.entry, 3);
    cr_assert_eq(f.count, 8);
    uint32_t pc;
    cr_assert_eq(bib_vm_line_pc(vm, 14, &pc), BIB_OK); /* the label line: next instruction */
    cr_assert_eq(pc, 10);
    cr_assert_eq(bib_vm_pc_line(vm, 10), 15);
    char text[64];
    bib_vm_insn_text(vm, 1, text, sizeof text);
    cr_assert_str_eq(text, "CALL r1, fib, r0, 1");
    bib_vm_destroy(vm);
}

Test(debug, tensor_registers_show_shape_executor_and_hash) {
    const char *src = ".func main regs=3\n LDI r0, 2\n LDI r1, 3\n ALLOC t0, f32, r0, 2\n"
                      " LDK r2, =1.5\n FILL t0, r2\n THASH r2, t0\n HALT r2\n.end\n";
    bib_vm_t *vm = load(src, NULL);
    bib_vm_start(vm);
    bib_stop_t stop;
    bib_vm_continue(vm, &stop);
    cr_assert_eq(stop, BIB_STOP_HALTED);
    cr_assert_eq(bib_vm_tensor_regs(vm), 1);
    bib_tensor_reg_info_t info;
    cr_assert_eq(bib_vm_tensor_reg(vm, 0, &info), BIB_OK);
    cr_assert(info.live);
    cr_assert_eq(info.dtype, BIB_DTYPE_F32);
    cr_assert_eq(info.rank, 2);
    cr_assert_eq(info.dims[1], 3);
    cr_assert_str_eq(info.executors, "cpu");
    bib_position_t pos;
    bib_vm_position(vm, &pos);
    cr_assert_eq(info.hash, (uint64_t)pos.exit_value); /* what THASH gave */
    float v[2];
    cr_assert_eq(bib_vm_tensor_read(vm, 0, 4, 2, v), BIB_OK);
    cr_assert_eq(v[1], 1.5f);
    cr_assert_eq(bib_vm_tensor_read(vm, 0, 5, 2, v), BIB_E_USAGE);
    bib_vm_destroy(vm);
}

Test(debug, profile_counts_every_instruction_per_opcode) {
    bib_vm_t *vm = load(fib_src, NULL);
    cr_assert_eq(bib_vm_profile_rows(vm), 0);
    cr_assert_eq(bib_vm_profile(vm, 1), BIB_OK);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
    bib_run_stats_t stats;
    bib_vm_stats(vm, &stats);
    uint64_t total = 0;
    uint32_t n = bib_vm_profile_rows(vm);
    bool saw_call = false;
    for (uint32_t i = 0; i < n; i++) {
        bib_profile_row_t row;
        cr_assert_eq(bib_vm_profile_row(vm, i, &row), BIB_OK);
        cr_assert_str_eq(row.executor, "vm");
        total += row.count;
        if (strcmp(row.op, "CALL") == 0)
            saw_call = row.count == 177; /* fib(10): 177 calls */
    }
    cr_assert_eq(total, stats.instructions);
    cr_assert(saw_call);
    bib_vm_destroy(vm);
}

Test(debug, profiling_off_leaves_no_rows) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_vm_profile(vm, 1);
    bib_vm_profile(vm, 0);
    cr_assert_eq(bib_vm_run(vm, NULL), BIB_OK);
    cr_assert_eq(bib_vm_profile_rows(vm), 0);
    cr_assert_eq(bib_vm_profile_write(vm, stderr, 0), BIB_E_STATE);
    bib_vm_destroy(vm);
}

/* bib_vm_call: a function by name, its arguments in its first registers. */
Test(call, runs_a_function_by_name_with_its_arguments) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_value_t n = {.i = 20};
    int64_t result = 0;
    cr_assert_eq(bib_vm_call(vm, "fib", &n, 1, &result), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(result, 6765);
    /* The entry function still runs as before, from a fresh state. */
    cr_assert_eq(bib_vm_run(vm, &result), BIB_OK);
    cr_assert_eq(result, 55);
    bib_vm_destroy(vm);
}

Test(call, passes_floats_as_their_bits) {
    static const char src[] = ".func main regs=1\n    HALT r0\n.end\n"
                              ".func twice args=1 regs=2\n    FADD r1, r0, r0\n    FTOI r1, r1\n"
                              "    RET r1\n.end\n";
    bib_vm_t *vm = load(src, NULL);
    bib_value_t x = {.f = 10.75};
    int64_t result = 0;
    cr_assert_eq(bib_vm_call(vm, "twice", &x, 1, &result), BIB_OK, "%s", bib_vm_error(vm));
    cr_assert_eq(result, 21);
    bib_vm_destroy(vm);
}

Test(call, a_wrong_count_names_the_signature) {
    bib_vm_t *vm = load(fib_src, NULL);
    bib_value_t args[2] = {{.i = 1}, {.i = 2}};
    cr_assert_eq(bib_vm_call(vm, "fib", args, 2, NULL), BIB_E_USAGE);
    cr_assert_str_eq(bib_vm_error(vm), "function fib takes 1 argument (.func fib args=1), not 2");
    cr_assert_eq(bib_vm_call(vm, "fob", args, 1, NULL), BIB_E_USAGE);
    cr_assert_str_eq(bib_vm_error(vm),
                     "no function 'fob' in the module (its functions: main, fib)");
    cr_assert_eq(bib_vm_call(vm, "fib", NULL, 1, NULL), BIB_E_USAGE);
    bib_vm_destroy(vm);
}

Test(call, traps_like_a_run) {
    static const char src[] = ".func main regs=1\n    HALT r0\n.end\n"
                              ".func div args=2 regs=3\n    DIV r2, r0, r1\n    RET r2\n.end\n";
    bib_vm_t *vm = load(src, NULL);
    bib_value_t args[2] = {{.i = 1}, {.i = 0}};
    cr_assert_eq(bib_vm_call(vm, "div", args, 2, NULL), BIB_E_TRAP);
    cr_assert(strstr(bib_vm_error(vm), "division by zero") != NULL, "%s", bib_vm_error(vm));
    args[1].i = 1;
    int64_t result = 0;
    cr_assert_eq(bib_vm_call(vm, "div", args, 2, &result), BIB_OK);
    cr_assert_eq(result, 1);
    bib_vm_destroy(vm);
}
