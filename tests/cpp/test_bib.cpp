// tests/cpp/test_bib.cpp: the C++ wrappers of include/bib.hpp, checked
// through what a C++ host sees. Built with -std=c++17 -Wall -Wextra -pedantic
// -Werror by tests/cli/cpp.sh. Prints one line per check and
// "N passed, N failed"; exits non-zero when any failed.
#include "bib.hpp"

#include <cmath>
#include <cstdio>
#include <string>

static int passed = 0, failed = 0;

static void check(bool ok, const std::string &what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    (ok ? passed : failed)++;
}

static bool contains(const std::string &s, const std::string &part) {
    return s.find(part) != std::string::npos;
}

static const char matmul_src[] = ".input  A t0 f32[M, K]\n"
                                 ".input  B t1 f32[K, N]\n"
                                 ".output C t2 f32[M, N]\n"
                                 ".func main regs=1\n"
                                 "    MATMUL C, A, B\n"
                                 "    LDI    r0, 0\n"
                                 "    HALT   r0\n"
                                 ".end\n";

static void matmul_through_views() {
    bib::Vm vm(bib::Options().backend("cpu").threads(1));
    vm.load(bib::Module::assemble(matmul_src, "matmul.basm"));
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    vm.set_input("A", bib::TensorView<const float>(a, {2, 3}));
    vm.set_input("B", bib::TensorView<const float>(b, {3, 2}));
    check(vm.run() == 0, "a run returns the exit value");
    auto c = vm.output<float>("C");
    check(c.rank() == 2 && c.dim(0) == 2 && c.dim(1) == 2, "the output view has the shape");
    check(c[0] == 58 && c[1] == 64 && c[2] == 139 && c[3] == 154, "MATMUL values through views");
    try {
        vm.output<int32_t>("C");
        check(false, "asking an f32 output for int32_t throws");
    } catch (const bib::Error &e) {
        check(e.status() == BIB_E_USAGE && contains(e.what(), "'C' holds f32"),
              "asking an f32 output for int32_t throws: " + std::string(e.what()));
    }
    try {
        vm.set_input("A", bib::TensorView<const float>(a, {3, 2}));
        vm.run();
        check(false, "a shape that does not fit throws");
    } catch (const bib::Error &e) {
        /* A[3,2] alone may be half of a new K: the run names B, kept from
           the run before, which no longer fits. */
        check(contains(e.what(), "input 'B' (kept from an earlier run") &&
                  contains(e.what(), "K = 2"),
              "a shape that does not fit throws, naming the tensor: " + e.message());
    }
    try {
        const uint32_t seven[7] = {1, 1, 1, 1, 1, 1, 1};
        bib::TensorView<const float> v(a, 7, seven);
        check(false, "a view of rank 7 throws");
    } catch (const bib::Error &e) {
        check(e.status() == BIB_E_USAGE && contains(e.what(), "at most 6 dimensions, 7 given"),
              "a view of rank 7 throws: " + e.message());
    }
}

static void traps_and_host_functions() {
    bib::Vm vm;
    std::string printed;
    vm.register_output([&](std::string_view s) { printed += s; });
    int64_t seen = 0;
    vm.register_host("report", [&](const bib_value_t *args, uint32_t n) {
        seen = n == 1 ? args[0].i : -1;
        return bib_value_t{0};
    });
    vm.register_host("fail", [](const bib_value_t *, uint32_t) -> bib_value_t {
        throw std::runtime_error("the host said no");
    });
    vm.load(bib::Module::assemble(".func main regs=2\n"
                                  "    LDI r0, 41\n"
                                  "    ADDI r0, r0, 1\n"
                                  "    HOSTCALL r1, report, r0, 1\n"
                                  "    HOSTCALL r1, print_i64, r0, 1\n"
                                  "    HOSTCALL r1, fail, r0, 1\n"
                                  "    HALT r0\n"
                                  ".end\n",
                                  "host.basm"));
    try {
        vm.run();
        check(false, "an exception in a host function traps the run");
    } catch (const bib::Error &e) {
        check(e.status() == BIB_E_TRAP && contains(e.message(), "the host said no") &&
                  contains(e.message(), "pc 4") && contains(e.message(), "line 6"),
              "an exception in a host function becomes a trap with pc and line: " + e.message());
    }
    check(seen == 42, "a lambda host function gets the argument");
    check(printed == "42\n", "print_i64 goes to the output callback");
    bib::Vm moved = std::move(vm);
    seen = 0;
    try {
        moved.run();
    } catch (const bib::Error &) {
    }
    check(seen == 42, "host functions survive a move of the Vm");
}

static void fuel_and_trace() {
    bib::Vm vm(bib::Options().fuel(3));
    std::string trace;
    vm.trace(BIB_TRACE_TEXT, [&](std::string_view s) { trace += s; });
    vm.load(bib::Module::assemble(".func main regs=1\n"
                                  "top:\n"
                                  "    ADDI r0, r0, 1\n"
                                  "    JMP top\n"
                                  ".end\n"));
    try {
        vm.run();
        check(false, "running out of fuel throws");
    } catch (const bib::Error &e) {
        check(e.status() == BIB_E_TRAP && contains(e.message(), "fuel exhausted"),
              "running out of fuel throws: " + e.message());
    }
    check(vm.stats().instructions == 3, "stats count the instructions run");
    check(contains(trace, "ADDI r0, r0, 1") && contains(trace, "JMP"), "the trace callback");
}

static void builder_and_text() {
    bib::Builder b;
    uint32_t main_fn = b.declare("main");
    uint32_t done = b.label();
    b.begin(main_fn, 0, 2)
        .emit("LDI", 0, 7)
        .emit("LDI", 1, 6)
        .emit("MUL", 0, 0, 1)
        .emit("JMP", done)
        .bind(done)
        .emit("HALT", 0)
        .end();
    bib::Module m = b.finish();
    bib::Vm vm;
    vm.load(m, "built");
    check(vm.run() == 42, "a builder module runs");
    std::string text = m.disassemble();
    check(contains(text, "MUL") && contains(text, "r0, r0, r1"), "disassembly of a built module");
    check(bib::Module::assemble(text).bytes() == m.bytes(), "the text assembles to the same bytes");
    try {
        b.emit("NOPE");
        check(false, "an unknown mnemonic throws");
    } catch (const bib::Error &e) {
        check(contains(e.message(), "'NOPE'"), "an unknown mnemonic throws: " + e.message());
    }
    try {
        bib::Module::assemble(".func main\n    ADDD r0, r0, r0\n.end\n", "bad.basm");
        check(false, "assembly errors throw");
    } catch (const bib::Error &e) {
        check(e.status() == BIB_E_ASM && contains(e.message(), "bad.basm:2:5:"),
              "assembly errors throw with file:line:col");
    }
    try {
        bib::Vm bad;
        bad.load_file("/nonexistent/x.bib");
        check(false, "a missing file throws");
    } catch (const bib::Error &e) {
        check(e.status() == BIB_E_IO, "a missing file throws BIB_E_IO: " + e.message());
    }
}

static void load_policy() {
    bib::Vm vm(bib::Options().allow_hosts("print_f64").device_timeout_ms(5000));
    vm.register_output([](std::string_view) {});
    try {
        vm.load(bib::Module::assemble(".func main regs=2\n    HOSTCALL r1, print_i64, r0, 1\n"
                                      "    HALT r1\n.end\n"));
        check(false, "allow_hosts refuses an import outside the list");
    } catch (const bib::Error &e) {
        check(e.status() == BIB_E_VERIFY && contains(e.message(), "print_i64"),
              "allow_hosts refuses an import outside the list: " + e.message());
    }
}

int main() {
    matmul_through_views();
    traps_and_host_functions();
    fuel_and_trace();
    builder_and_text();
    load_policy();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
