"""Tests of the Python package `bib` (bindings/python), run by
tests/cli/python.sh under /usr/bin/python3 with unittest. They use the
library in the build tree (BIB_LIBRARY) and the examples of the repository."""

import io
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import bib

ROOT = os.environ.get("BIB_SOURCE", os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")))
MATMUL = os.path.join(ROOT, "examples", "matmul.basm")
MLP = os.path.join(ROOT, "examples", "mlp.basm")


def rng_f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def vulkan_or_skip(test, module, inputs):
    try:
        return module.run(inputs, backend="vulkan")
    except bib.Unavailable as e:
        test.skipTest("no Vulkan device: %s" % e)


class ShortestPath(unittest.TestCase):
    def test_matmul_reads_as_in_the_readme(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.arange(6, dtype=np.float32).reshape(3, 2)
        m = bib.load(MATMUL)
        out = m.run({"A": a, "B": b}, backend="cpu")
        # Small integers: every product and sum is exact, so numpy agrees bit for bit.
        np.testing.assert_array_equal(out["C"], a @ b)
        self.assertEqual(out["C"].dtype, np.float32)
        self.assertEqual(out.exit_value, 0)
        self.assertEqual(out.stats.instructions, 3)

    def test_the_same_bytes_on_every_backend_and_thread_count(self):
        a, b = rng_f32((33, 70), 1), rng_f32((70, 17), 2)
        m = bib.load(MATMUL)
        ref = m.run({"A": a, "B": b}, backend="cpu", threads=1)["C"]
        for threads in (2, 3):
            got = m.run({"A": a, "B": b}, backend="cpu", threads=threads)["C"]
            self.assertEqual(got.tobytes(), ref.tobytes(), "cpu threads=%d" % threads)
        # Vulkan in a Python process: loads lavapipe's LLVM beside libbib.
        got = vulkan_or_skip(self, m, {"A": a, "B": b})["C"]
        self.assertEqual(got.tobytes(), ref.tobytes(), "vulkan")

    def test_mlp_on_cpu_and_vulkan(self):
        x, w1, b1 = rng_f32((5, 8), 3), rng_f32((8, 16), 4), rng_f32((16,), 5)
        w2, b2 = rng_f32((16, 4), 6), rng_f32((4,), 7)
        inputs = {"x": x, "W1": w1, "b1": b1, "W2": w2, "b2": b2}
        m = bib.load(MLP)
        y = m.run(inputs, backend="cpu")["y"]
        self.assertEqual(y.shape, (5, 4))
        np.testing.assert_allclose(y.sum(axis=1), np.ones(5), rtol=1e-5)
        yv = vulkan_or_skip(self, m, inputs)["y"]
        self.assertEqual(yv.tobytes(), y.tobytes())


class Loading(unittest.TestCase):
    def test_basm_text_bytes_bib_path_and_bib_bytes(self):
        m = bib.load(MATMUL)
        with open(MATMUL, "rb") as f:
            text = f.read()
        self.assertEqual(bib.assemble(text, MATMUL).bytes, m.bytes)
        self.assertEqual(bib.load(text).bytes, bib.assemble(text, "bytes.basm").bytes)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.bib")
            m.save(path)
            self.assertEqual(bib.load(path).bytes, m.bytes)
        self.assertEqual(bib.load(m.bytes).bytes, m.bytes)
        self.assertEqual(bib.assemble(m.disassemble()).bytes, m.bytes)

    def test_a_missing_file_is_a_file_error(self):
        with self.assertRaises(bib.FileError) as cm:
            bib.load("/nonexistent/x.basm")
        self.assertIn("/nonexistent/x.basm", str(cm.exception))

    def test_a_file_name_that_is_not_utf8_loads_and_names_the_module(self):
        # os.listdir gives such a name as a str with surrogate escapes; the
        # library takes it as the bytes it was.
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(os.fsencode(d), b"f\xff.basm"), "wb") as f, open(
                os.path.join(ROOT, "examples", "fib.basm"), "rb"
            ) as src:
                f.write(src.read())
            (name,) = os.listdir(d)
            m = bib.load(os.path.join(d, name))
            self.assertEqual(m.name, "f\udcff.basm")
            want = bib.load(os.path.join(ROOT, "examples", "fib.basm")).run().exit_value
            self.assertEqual(bib.Vm().load(m).run().exit_value, want)
            m.save(os.path.join(d, "g\udcff.bib"))
            self.assertIn(b"g\xff.bib", os.listdir(os.fsencode(d)))
            again = bib.load(os.path.join(d, "g\udcff.bib"))
            self.assertEqual(again.name, "g\udcff.bib")
            self.assertEqual(bib.Vm().load(again).run().exit_value, want)
            with self.assertRaises(bib.AssemblyError) as cm:
                bib.assemble("HALT\n", b"e\xfe.basm")
            self.assertIn("e\ufffd.basm:1:", cm.exception.message)

    def test_paths_may_be_bytes_or_path_like(self):
        text = open(MATMUL, "rb").read()
        want = bib.assemble(text, MATMUL)
        self.assertEqual(bib.assemble(text, os.fsencode(MATMUL)).bytes, want.bytes)
        self.assertEqual(bib.assemble(text, os.fsencode(MATMUL)).name, "matmul.basm")
        self.assertEqual(bib.assemble(text, pathlib.Path(MATMUL)).name, "matmul.basm")
        self.assertEqual(bib.load(pathlib.Path(MATMUL)).bytes, want.bytes)
        b = bib.Builder().source(pathlib.Path("p\udcff.basm"))
        self.assertIsInstance(b, bib.Builder)

    def test_a_bib_library_that_cannot_be_loaded_is_named_by_the_variable(self):
        env = dict(os.environ, BIB_LIBRARY="/nonexistent/libbib.so")
        p = subprocess.run([sys.executable, "-c", "import bib"], capture_output=True, text=True, env=env)
        self.assertNotEqual(p.returncode, 0)
        last = p.stderr.strip().splitlines()[-1]
        self.assertIn("cannot load libbib from BIB_LIBRARY=/nonexistent/libbib.so: /nonexistent/libbib.so:", last)
        self.assertNotIn("Set BIB_LIBRARY", last)
        self.assertNotIn("libbib.so.0", last)

    def test_truncated_module_bytes_are_a_format_error(self):
        data = bib.load(MATMUL).bytes
        with self.assertRaises(bib.FormatError) as cm:
            bib.Vm().load(data[:40])
        self.assertIn("byte", cm.exception.message)

    def test_assembly_errors_carry_every_diagnostic_and_the_first_line(self):
        with self.assertRaises(bib.AssemblyError) as cm:
            bib.assemble(".func main regs=1\n    LDI r0, 1\n    ADDD r0, r0, r0\n    HALT r0\n.end\n", "p.basm")
        e = cm.exception
        self.assertEqual(e.status, "asm")
        self.assertEqual(e.line, 3)
        self.assertIn("p.basm:3:5: error: unknown mnemonic 'ADDD'", e.message)


class Inputs(unittest.TestCase):
    def setUp(self):
        self.m = bib.load(MATMUL)
        self.a = np.arange(6, dtype=np.float32).reshape(2, 3)
        self.b = np.ones((3, 2), np.float32)

    def test_c_contiguous_float32_is_passed_without_a_copy(self):
        vm = self.m.vm()
        decl = [t for t in vm.tensors() if t.name == "A"][0]
        self.assertIs(bib._as_input("A", self.a, decl), self.a)
        fortran = np.asfortranarray(self.a)
        self.assertIsNot(bib._as_input("A", fortran, decl), fortran)

    def test_strided_and_list_inputs_are_converted(self):
        wide = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]  # not contiguous
        out = self.m.run({"A": wide, "B": [[1, 0], [0, 1], [1, 1]]})
        np.testing.assert_array_equal(out["C"], wide @ np.array([[1, 0], [0, 1], [1, 1]], np.float32))

    def test_a_wrong_dtype_names_the_tensor_and_both_shapes(self):
        with self.assertRaises(bib.UsageError) as cm:
            self.m.run({"A": self.a.astype(np.float64), "B": self.b})
        self.assertEqual(
            cm.exception.message,
            "input 'A': expected f32[M,K], given float64[2,3] (convert with .astype(numpy.float32))",
        )

    def test_int64_and_bool_arrays_feed_an_i32_input(self):
        m = bib.assemble(".input a t0 i32[?]\n.output b t1\n.func main regs=1\n COPY t1, t0\n HALT r0\n.end\n")
        ids = np.array([5, -7, 2**31 - 1, -(2**31)], np.int64)
        b = m.run({"a": ids})["b"]
        self.assertEqual(b.dtype, np.int32)
        self.assertEqual(b.tolist(), ids.tolist())
        self.assertEqual(m.run({"a": np.array([True, False])})["b"].tolist(), [1, 0])
        with self.assertRaises(bib.UsageError) as cm:
            m.run({"a": np.array([1, 2**31], np.int64)})
        self.assertIn("element 1 is 2147483648, outside int32", cm.exception.message)
        with self.assertRaises(bib.UsageError):
            m.run({"a": np.array([1.0])})  # a float array for an i32 input stays refused

    def test_big_endian_float32_and_int32_arrays_are_the_same_values(self):
        # '>f4' (from a file written on another machine, say) is float32 in
        # the other byte order: taken as its values, not refused.
        y = bib.assemble(".input x t0 f32[?]\n.output y t1\n.func main regs=1\n COPY t1, t0\n HALT r0\n.end\n")
        x = np.array([1.5, -0.0, np.inf], ">f4")
        self.assertEqual(y.run({"x": x})["y"].tobytes(), x.astype("<f4").tobytes())
        i = bib.assemble(".input a t0 i32[?]\n.output b t1\n.func main regs=1\n COPY t1, t0\n HALT r0\n.end\n")
        self.assertEqual(i.run({"a": np.array([7, -(2**31)], ">i4")})["b"].tolist(), [7, -(2**31)])

    def test_a_wrong_shape_names_the_tensor_and_both_shapes(self):
        with self.assertRaises(bib.UsageError) as cm:
            self.m.run({"A": self.a, "B": np.ones((2, 2), np.float32)})
        self.assertEqual(cm.exception.message, "input 'B': expected f32[K,N] where K = 3, given f32[2,2]")

    def test_an_unknown_input_lists_the_inputs(self):
        with self.assertRaises(bib.UsageError) as cm:
            self.m.run({"Z": self.a})
        self.assertIn("'Z' is not an input of the module (inputs: A, B)", cm.exception.message)

    def test_a_missing_input_is_named(self):
        with self.assertRaises(bib.UsageError) as cm:
            bib.load(MATMUL).run({"A": self.a})
        self.assertEqual(cm.exception.message, "input 'B' (f32[K,N]) was not given")

    def test_module_run_never_reuses_an_input_of_an_earlier_run(self):
        self.m.run({"A": self.a, "B": self.b})
        with self.assertRaises(bib.UsageError) as cm:
            self.m.run({"A": self.a})
        self.assertIn("'B'", cm.exception.message)

    def test_a_kept_vm_takes_a_new_size_for_a_shared_dimension(self):
        self.m.run({"A": self.a, "B": self.b})
        a, b = rng_f32((5, 4), 1), rng_f32((4, 3), 2)
        np.testing.assert_allclose(self.m.run({"A": a, "B": b})["C"], a @ b, rtol=1e-5, atol=1e-6)

    def test_seven_dimensions_are_refused(self):
        with self.assertRaises(bib.UsageError) as cm:
            self.m.run({"A": np.zeros((1, 1, 1, 1, 1, 1, 1), np.float32), "B": self.b})
        self.assertIn("at most 6", cm.exception.message)

    def test_tensors_describes_the_declarations(self):
        self.assertEqual(
            self.m.vm().tensors(),
            [
                bib.TensorInfo("A", "input", "f32", ("M", "K")),
                bib.TensorInfo("B", "input", "f32", ("K", "N")),
                bib.TensorInfo("C", "output", "f32", ("M", "N")),
            ],
        )


LOOP = """
.func main regs=3
    LDI  r0, 1
    LDI  r1, 0
top:
    ADD  r1, r1, r0
    JMP  top
.end
"""

RECURSE = """
.func main regs=2
    CALL r1, f, r0, 1
    HALT r1
.end
.func f args=1 regs=2
    CALL r1, f, r0, 1
    RET  r1
.end
"""


class Limits(unittest.TestCase):
    def test_fuel_traps_with_pc_and_line(self):
        with self.assertRaises(bib.Trap) as cm:
            bib.assemble(LOOP, "loop.basm").run(fuel=50)
        e = cm.exception
        self.assertIn("fuel exhausted (50 instructions)", e.message)
        self.assertEqual((e.pc, e.line), (2, 6))  # the source starts with a newline

    def test_depth_traps(self):
        with self.assertRaises(bib.Trap) as cm:
            bib.assemble(RECURSE).run(max_depth=100)
        self.assertIn("100", cm.exception.message)

    def test_memory_cap_is_a_memory_limit(self):
        with self.assertRaises(bib.MemoryLimit):
            bib.assemble(".memory 2000000\n.func main regs=1\n    HALT r0\n.end\n").run(max_memory=1 << 20)

    def test_negative_options_are_refused(self):
        with self.assertRaises(bib.UsageError):
            bib.Vm(fuel=-1)

    def test_an_unknown_backend_is_refused(self):
        with self.assertRaises(bib.Error) as cm:
            bib.load(MATMUL).run({"A": np.ones((1, 1), np.float32), "B": np.ones((1, 1), np.float32)}, backend="tpu")
        self.assertIn("tpu", cm.exception.message)


class LoadPolicy(unittest.TestCase):
    """The options after strict_device in bib_options_t: these fail if the
    package's mirror of the struct is laid out wrong."""

    def test_allow_hosts_refuses_an_import_outside_the_list(self):
        m = bib.assemble(".func main regs=2\n    HOSTCALL r1, print_i64, r0, 1\n    HALT r1\n.end\n")
        with self.assertRaises(bib.VerifyError) as cm:
            m.run(allow_hosts=["print_f64"], stdout=io.StringIO())
        self.assertIn("print_i64", cm.exception.message)
        out = io.StringIO()
        self.assertEqual(m.run(allow_hosts=["print_i64"], stdout=out).exit_value, 0)
        self.assertEqual(out.getvalue(), "0\n")

    def test_deny_device_code_refuses_a_shader(self):
        m = bib.load(os.path.join(ROOT, "examples", "vk_custom.basm"))
        with self.assertRaises(bib.VerifyError) as cm:
            m.vm(deny_device_code=True)
        self.assertIn("saxpy", cm.exception.message)

    def test_max_file_size_caps_load_file(self):
        with self.assertRaises(bib.MemoryLimit) as cm:
            bib.Vm(max_file_size=100).load_file(MATMUL)
        self.assertIn("100", cm.exception.message)

    def test_device_timeout_and_trace_callback_together(self):
        r = bib.assemble(".func main regs=1\n    HALT r0\n.end\n").run(device_timeout_ms=5000, trace="text")
        self.assertEqual(len(r.trace), 1)


class HostFunctions(unittest.TestCase):
    SRC = """
.func main regs=3
    LDI      r0, 7
    HOSTCALL r1, square, r0, 1
    HOSTCALL r2, print_i64, r1, 1
    LDI64    r0, 2.5
    HOSTCALL r1, half, r0, 1
    HOSTCALL r2, print_f64, r1, 1
    HOSTCALL r2, fail, r0, 1
    HALT     r1
.end
"""

    def test_callables_results_output_and_exceptions(self):
        out = io.StringIO()
        seen = []
        hosts = {
            "square": lambda x: x * x,
            "half": lambda x: bib.f64(x) / 2,
            "fail": lambda x: seen.append(bib.f64(x)) or (_ for _ in ()).throw(RuntimeError("no 100%")),
        }
        with self.assertRaises(bib.Trap) as cm:
            bib.assemble(self.SRC, "h.basm").run(hosts=hosts, stdout=out)
        self.assertEqual(out.getvalue(), "49\n1.25\n")
        self.assertEqual(seen, [2.5])
        e = cm.exception
        self.assertEqual((e.pc, e.line), (6, 9))
        self.assertIn("host function 'fail' failed: RuntimeError: no 100%", e.message)

    def test_registering_again_after_loading_replaces_the_function(self):
        src = ".func main regs=2\n LDI r0, 6\n HOSTCALL r1, f, r0, 1\n HALT r1\n.end\n"
        vm = bib.Vm()
        vm.register_host("f", lambda x: x * 2)
        vm.load(bib.assemble(src))
        self.assertEqual(vm.run().exit_value, 12)
        vm.register_host("f", lambda x: x * 3)
        import gc

        gc.collect()  # the replaced callback is not freed while the VM may call it
        self.assertEqual(vm.run().exit_value, 18)

    def test_numpy_results_convert_and_out_of_range_integers_trap(self):
        m = bib.assemble(".func main regs=2\n LDI r0, 1\n HOSTCALL r1, f, r0, 1\n HALT r1\n.end\n")
        self.assertEqual(bib.f64(m.run(hosts={"f": lambda x: np.float32(2.5)}).exit_value), 2.5)
        self.assertEqual(m.run(hosts={"f": lambda x: np.int64(-7)}).exit_value, -7)
        self.assertEqual(m.run(hosts={"f": lambda x: 2**64 - 1}).exit_value, -1)
        with self.assertRaises(bib.Trap) as cm:
            m.run(hosts={"f": lambda x: 2**64 + 5})
        self.assertIn("does not fit 64 bits", cm.exception.message)
        with self.assertRaises(bib.Trap) as cm:
            m.run(hosts={"f": lambda x: "7"})
        self.assertIn("returned a str", cm.exception.message)

    def test_an_unregistered_import_is_a_link_error(self):
        with self.assertRaises(bib.LinkError) as cm:
            bib.assemble(self.SRC).run(hosts={"square": abs})
        self.assertIn("'half'", cm.exception.message)

    def test_bits_and_f64_are_inverse(self):
        self.assertEqual(bib.f64(bib.bits(-0.1)), -0.1)
        self.assertEqual(bib.bits(1.0), 0x3FF0000000000000)


class TraceAndProfile(unittest.TestCase):
    def test_json_trace_is_a_list_of_dicts(self):
        r = bib.assemble(".func main regs=1\n    LDI r0, 7\n    HALT r0\n.end\n").run(trace="json")
        self.assertEqual([t["op"] for t in r.trace], ["LDI", "HALT"])
        self.assertEqual(r.trace[0]["pc"], 0)
        self.assertEqual(r.exit_value, 7)

    def test_text_trace_and_no_trace_afterwards(self):
        m = bib.assemble(".func main regs=1\n    LDI r0, 7\n    HALT r0\n.end\n")
        r = m.run(trace="text")
        self.assertEqual(len(r.trace), 2)
        self.assertIn("LDI r0, 7", r.trace[0])
        self.assertIsNone(m.run().trace)

    def test_profile_rows(self):
        a, b = rng_f32((8, 8), 1), rng_f32((8, 8), 2)
        m = bib.load(MATMUL)
        vm = m.vm(backend="cpu")
        r = vm.run({"A": a, "B": b}, profile=True)
        ops = {(p.op, p.executor): p for p in r.profile}
        self.assertEqual(ops[("MATMUL", "cpu")].count, 1)
        self.assertEqual(ops[("MATMUL", "cpu")].flops, 2 * 8 * 8 * 8)
        self.assertEqual(vm.profile_report(json_format=True)["instructions"], 3)
        self.assertTrue(vm.profile_report().startswith("profile: 3 instructions"))


class Building(unittest.TestCase):
    def test_builder_emits_the_sum_of_squares(self):
        b = bib.Builder()
        main = b.declare("main")
        report = b.import_host("report")
        loop, done = b.label(), b.label()
        b.begin(main, 0, 5)
        b.emit("LDI", 0, 0).emit("LDI", 1, 1).emit("LDI", 2, 10)
        b.bind(loop)
        b.emit("JLT", 2, 1, done).emit("MUL", 3, 1, 1).emit("ADD", 0, 0, 3).emit("ADDI", 1, 1, 1)
        b.emit("JMP", loop)
        b.bind(done)
        b.emit("HOSTCALL", 4, report, 0, 1).emit("HALT", 0)
        b.end()
        m = b.finish("squares")
        seen = []
        r = m.run(hosts={"report": seen.append})
        self.assertEqual((r.exit_value, seen), (385, [385]))

    def test_builder_tensors_and_negative_immediates(self):
        b = bib.Builder()
        n = b.dim("n")
        b.tensor_input("x", 0, "f32", [n, 2])
        b.tensor_const("w", 1, np.array([[1, 2], [3, 4]], np.float32))
        b.tensor_output("y", 2, np.float32, [n, 2])
        main = b.declare("main")
        b.begin(main, 0, 1)
        b.emit("MATMUL", 2, 0, 1).emit("LDI", 0, -3).emit("HALT", 0).end()
        r = b.finish().run({"x": np.array([[1, 1], [2, 0], [0, 1]], np.float32)})
        np.testing.assert_array_equal(r["y"], [[4, 6], [2, 4], [3, 4]])
        self.assertEqual(r.exit_value, -3)

    def test_rank_0_inputs_and_constants_keep_rank_0(self):
        b = bib.Builder()
        b.tensor_input("x", 0, "f32", [])
        b.tensor_const("k", 1, np.array(2.5, np.float32))
        b.tensor_output("y", 2, "f32", [])
        b.tensor_output("ks", 3, "f32", [])
        main = b.declare("main")
        b.begin(main, 0, 1)
        b.emit("TMUL", 2, 0, 1).emit("COPY", 3, 1).emit("LDI", 0, 0).emit("HALT", 0).end()
        r = b.finish().run({"x": np.array(3.0, np.float32)})
        self.assertEqual((r["y"].shape, float(r["y"])), ((), 7.5))
        self.assertEqual((r["ks"].shape, float(r["ks"])), ((), 2.5))

    def test_builder_errors_are_raised(self):
        b = bib.Builder()
        with self.assertRaises(bib.UsageError):
            b.emit("NOPE")
        with self.assertRaises(bib.Error) as cm:
            b.begin(99, 0, 1)
        self.assertIn("99", cm.exception.message)


class VmObject(unittest.TestCase):
    def test_inputs_persist_between_runs_and_outputs_are_copies(self):
        vm = bib.load(MATMUL).vm()
        a = np.eye(2, dtype=np.float32)
        vm.set_input("A", a).set_input("B", np.full((2, 2), 3, np.float32))
        r1 = vm.run()
        a[0, 0] = 9  # the VM copied the input; this changes nothing
        r2 = vm.run()
        self.assertEqual(r1["C"].tobytes(), r2["C"].tobytes())
        c = vm.output("C")
        c[0, 0] = 0
        self.assertEqual(vm.output("C")[0, 0], 3)
        vm.close()
        with self.assertRaises(bib.StateError):
            vm.run()
        # The counters and the profile of a closed VM are errors too, not zeros.
        for read in (vm.stats, vm.profile_rows, vm.profile_report):
            with self.assertRaises(bib.StateError):
                read()

    def test_module_run_from_several_threads_takes_turns(self):
        # Module.run keeps one VM; four threads running the module at once
        # used it together (ctypes lets go of the GIL), which crashed the
        # process or failed with "executor 'cpu' is not available".
        import threading

        m = bib.load(MATMUL)
        ins = [(rng_f32((48, 40), 2 * i), rng_f32((40, 24), 2 * i + 1)) for i in range(4)]
        want = [m.run({"A": a, "B": b})["C"].tobytes() for a, b in ins]
        errors = []

        def work(i):
            try:
                for _ in range(25):
                    got = m.run({"A": ins[i][0], "B": ins[i][1]})["C"].tobytes()
                    if got != want[i]:
                        errors.append("thread %d: other bytes" % i)
            except Exception as e:  # reported below, with the thread
                errors.append("thread %d: %r" % (i, e))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_a_host_function_running_its_own_vm_leaves_the_run_alone(self):
        # The library refuses the second run, but Vm.run had first emptied
        # the run's trace: a host function that caught the error left the
        # run with the lines after the call only (3 of 5).
        src = ".func main regs=2\n LDI r0, 6\n LDI r0, 6\n HOSTCALL r1, f, r0, 1\n ADDI r1, r1, 1\n HALT r1\n.end\n"
        vm = bib.Vm()
        refused = []

        def f(x):
            try:
                vm.run()
            except bib.StateError as e:
                refused.append(e.message)
            return x

        vm.register_host("f", f)
        vm.load(bib.assemble(src))
        out = vm.run(trace="text")
        self.assertEqual([line.split()[2] for line in out.trace], ["LDI", "LDI", "HOSTCALL", "ADDI", "HALT"])
        self.assertEqual(refused, ["the VM is running: a host function cannot run it again"])
        self.assertEqual(out.exit_value, 7)
        vm.close()

    def test_a_module_copies_and_pickles_with_its_bytes(self):
        # For multiprocessing: the lock that Module.run holds cannot be
        # pickled, and a copy must not share the kept VM or the lock.
        import copy
        import pickle

        m = bib.load(MATMUL)
        a, b = rng_f32((48, 40), 1), rng_f32((40, 24), 2)
        want = m.run({"A": a, "B": b})["C"].tobytes()
        for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m), copy.copy(m)):
            self.assertEqual((other.bytes, other.name), (m.bytes, m.name))
            self.assertIsNone(other._vm)
            self.assertIsNot(other._lock, m._lock)
            self.assertEqual(other.run({"A": a, "B": b})["C"].tobytes(), want)

    def test_a_host_function_cannot_free_the_vm_that_runs_it(self):
        # Module.run's lock is re-entrant, so a host function could run the
        # module again: with other options that closed the kept VM in the
        # middle of its run (a use after free: the outer run went on in
        # freed memory), and Vm.close from a host function did the same.
        src = ".func main regs=2\n LDI r0, 6\n HOSTCALL r1, f, r0, 1\n HALT r1\n.end\n"
        m = bib.assemble(src)
        inner = []

        def again(x):
            inner.append(m.run(hosts={"f": lambda y: y}, threads=1).exit_value)
            return x

        with self.assertRaises(bib.Trap) as cm:
            m.run(hosts={"f": again})
        self.assertIn("StateError: Module.run from a host function of its own run", cm.exception.message)
        self.assertEqual(inner, [])
        self.assertEqual(m.run(hosts={"f": lambda x: x * 2}).exit_value, 12)

        def own(x):  # the inner run on a Vm of its own is fine
            v = bib.Vm()
            v.register_host("f", lambda y: y + 1)
            return v.load(m).run().exit_value

        self.assertEqual(m.run(hosts={"f": own}).exit_value, 7)

        vm = bib.Vm()
        vm.register_host("f", lambda x: vm.close() or x)
        vm.load(m)
        with self.assertRaises(bib.Trap) as cm:
            vm.run()
        self.assertIn("StateError: the VM is running", cm.exception.message)
        vm.register_host("f", lambda x: x * 3)
        self.assertEqual(vm.run().exit_value, 18)
        vm.close()

    def test_run_before_load_is_a_state_error(self):
        with self.assertRaises(bib.StateError):
            bib.Vm().run()


if __name__ == "__main__":
    unittest.main()
