"""BIB from Python: assemble or load modules, run them with numpy arrays in
and out, emit bytecode with a builder, and give host functions as Python
callables. A thin layer over libbib's C API (ctypes; no compiler needed).

    import bib
    m = bib.load("examples/matmul.basm")   # a .basm or .bib path, or bytes
    out = m.run({"A": a, "B": b}, backend="cpu")
    out["C"]                               # numpy arrays by output name

Every error of the library is raised as a bib.Error subclass carrying the
VM's message, and the pc and source line when the message names them.
"""

import ctypes
import json
import os
import numbers
import re
import threading
from collections import namedtuple

import numpy as np

from . import _capi

_lib, _path = _capi.load()

__all__ = [
    "Builder",
    "Error",
    "Module",
    "ProfileRow",
    "RunResult",
    "Stats",
    "TensorInfo",
    "Vm",
    "assemble",
    "bits",
    "build_info",
    "f64",
    "library_path",
    "load",
    "opcode",
]

# ---- errors -------------------------------------------------------------------


class Error(Exception):
    """A failure reported by libbib. status is the C status name ("trap",
    "usage", ...); message the library's text; pc and line the program
    counter and source line it names (None when it names none)."""

    status = "error"

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message
        m = re.search(r"\bpc (\d+)\b", message)
        self.pc = int(m.group(1)) if m else None
        m = re.search(r"\bline (\d+)\b", message) or re.search(r"^[^:\n]+:(\d+):\d+: error:", message, re.M)
        self.line = int(m.group(1)) if m else None


class UsageError(Error, ValueError):
    status = "usage"


class FileError(Error, OSError):
    status = "io"


class FormatError(Error):
    status = "format"


class VerifyError(Error):
    status = "verify"


class AssemblyError(Error):
    status = "asm"


class LinkError(Error):
    status = "link"


class Trap(Error):
    status = "trap"


class MemoryLimit(Error, MemoryError):
    status = "nomem"


class Unavailable(Error):
    status = "unavailable"


class StateError(Error):
    status = "state"


class Timeout(Trap):
    """A wait for GPU work ran past device_timeout_ms (a trap)."""

    status = "timeout"


_ERRORS = [
    None,
    UsageError,
    FileError,
    FormatError,
    VerifyError,
    AssemblyError,
    LinkError,
    Trap,
    MemoryLimit,
    Unavailable,
    StateError,
    Timeout,
]


def _raise(status, message):
    cls = _ERRORS[status] if 0 < status < len(_ERRORS) else Error
    raise cls(message, _lib.bib_status_name(status).decode())


def _take_string(p):
    """Copies and frees a char * the library handed over."""
    if not p.value:
        return ""
    try:
        return ctypes.string_at(p.value).decode("utf-8", "replace")
    finally:
        _lib.bib_free(p)


# ---- small helpers ----------------------------------------------------------------


def library_path():
    """The path of the libbib this package loaded."""
    return _path


def build_info():
    """The library's build line: version, SIMD level, executors."""
    return _lib.bib_build_info().decode()


def opcode(mnemonic):
    """The opcode word of a mnemonic ("ADD"); UsageError when unknown."""
    code = _lib.bib_opcode(mnemonic.encode())
    if code < 0:
        raise UsageError("unknown mnemonic '%s'" % mnemonic, "usage")
    return code


def f64(register):
    """A register value (an int, as host functions receive them) read as f64."""
    return _capi.Value(i=register).f


def bits(value):
    """The register (int64) holding the f64 value."""
    return _capi.Value(f=value).i


_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<i4")}
_DTYPE_CODES = {np.dtype("<f4"): 1, np.dtype("<i4"): 2}
_DTYPE_NAMES = {1: "f32", 2: "i32"}

TensorInfo = namedtuple("TensorInfo", "name kind dtype shape")
TensorInfo.__doc__ = """A declared tensor: kind is "input", "output" or
"const"; dtype "f32", "i32" or None (an untyped output); shape a tuple of
sizes, symbol names (str) or None for an open dimension."""

Stats = namedtuple("Stats", "instructions peak_memory fuel")
ProfileRow = namedtuple("ProfileRow", "op executor count seconds flops bytes")


def _shape_text(dtype, shape):
    return "%s[%s]" % (dtype, ",".join("?" if d is None else str(d) for d in shape))


class RunResult(dict):
    """The outputs of a run, as numpy arrays by name (a dict), with
    exit_value, stats (Stats), trace (a list of lines, or of dicts for
    trace="json"; None without a trace) and profile (a list of ProfileRow,
    longest first; None without profile=True)."""

    exit_value = 0
    stats = None
    trace = None
    profile = None


# ---- the VM -----------------------------------------------------------------------------

_TRACE_FORMATS = {None: 0, False: 0, "off": 0, True: 1, "text": 1, "json": 2}


class Vm:
    """One VM: options are fixed when it is made; modules, inputs and host
    functions are given to it, and it runs them. Not for two threads at once."""

    def __init__(
        self,
        backend=None,
        threads=None,
        fuel=None,
        max_memory=None,
        max_depth=None,
        device=None,
        strict_device=False,
        validation=False,
        stdout=None,
        deny_device_code=False,
        allow_hosts=None,
        device_timeout_ms=None,
        max_file_size=None,
    ):
        opts = _capi.Options()
        _lib.bib_options_init_size(ctypes.byref(opts), ctypes.sizeof(opts))
        self._strings = []
        if backend is not None:
            opts.backend = self._keep(backend)
        if device is not None:
            opts.device = self._keep(str(device))
        if threads is not None:
            opts.threads = _unsigned("threads", threads, 32)
        if fuel is not None:
            opts.fuel = _unsigned("fuel", fuel, 64)
        if max_memory is not None:
            opts.max_memory = _unsigned("max_memory", max_memory, 64)
        if max_depth is not None:
            opts.max_call_depth = _unsigned("max_depth", max_depth, 32)
        opts.strict_device = bool(strict_device)
        opts.validation = bool(validation)
        # The load policy and device timeout of spec/security.md.
        opts.deny = 1 if deny_device_code else 0  # BIB_DENY_DEVICE_CODE
        if allow_hosts is not None:
            opts.allow_hosts = self._keep(",".join(allow_hosts) if not isinstance(allow_hosts, str) else allow_hosts)
        if device_timeout_ms is not None:
            opts.device_timeout_ms = _unsigned("device_timeout_ms", device_timeout_ms, 64)
        if max_file_size is not None:
            opts.max_file_size = _unsigned("max_file_size", max_file_size, 64)
        handle = ctypes.c_void_p()
        st = _lib.bib_vm_create(ctypes.byref(opts), ctypes.byref(handle))
        if st != 0:
            _raise(st, "cannot create a VM with these options")
        self._vm = handle
        self._running = False  # within bib_vm_run (a host function may call back)
        self._callbacks = {}  # name -> ctypes callback, kept alive while registered
        self._retired = []  # callbacks replaced since, kept alive with the VM
        self._inputs = {}
        self._trace_lines = None
        self._trace_parts = []
        self._trace_cb = _capi.WRITE_FN(self._on_trace)
        self._host_error = None
        self._out = _capi.WRITE_FN(self._on_output)
        self._stdout = stdout
        st = _lib.bib_vm_register_output(self._vm, self._out, None)
        self._check(st)
        self.module = None

    def _keep(self, s):
        b = s.encode() if isinstance(s, str) else bytes(s)
        self._strings.append(b)
        return b

    def close(self):
        """Releases the VM now (it is released when collected otherwise). A
        host function cannot close the VM whose run called it."""
        if getattr(self, "_running", False):
            raise StateError("the VM is running: a host function cannot close it", "state")
        if getattr(self, "_vm", None):
            _lib.bib_vm_destroy(self._vm)
            self._vm = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check(self, st):
        if st != 0:
            _raise(st, _lib.bib_vm_error(self._vm).decode("utf-8", "replace"))

    def _live(self):
        if not self._vm:
            raise StateError("the VM is closed", "state")

    # -- output and trace callbacks
    def _on_output(self, _user, data, length):
        text = ctypes.string_at(data, length).decode("utf-8", "replace")
        if self._stdout is None:
            import sys

            sys.stdout.write(text)
        else:
            self._stdout.write(text)

    def _on_trace(self, _user, data, length):
        self._trace_parts.append(ctypes.string_at(data, length))

    # -- modules
    def load(self, module, name=None):
        """Loads a Module, module bytes, or a .bib/.basm path. Returns self."""
        self._live()
        if not isinstance(module, Module):
            module = load(module)
        buf = module.bytes
        # A name from a file name may hold bytes that are not UTF-8 (os.listdir
        # gives them as surrogate escapes): they go to the library as they were.
        label = os.fsencode(name or module.name or "module")
        self._check(_lib.bib_vm_load(self._vm, buf, len(buf), label))
        self.module = module
        self._inputs = {}
        return self

    def load_file(self, path):
        """Loads a .bib file, or assembles a .basm file, in the library
        (bib_vm_load_file: max_file_size applies). Returns self."""
        self._live()
        self._check(_lib.bib_vm_load_file(self._vm, os.fsencode(path)))
        self.module = None
        self._inputs = {}
        return self

    def tensors(self):
        """The loaded module's declared tensors, as TensorInfo."""
        self._live()
        out = []
        info = _capi.TensorInfo()
        for i in range(_lib.bib_vm_tensor_count(self._vm)):
            self._check(_lib.bib_vm_tensor_info(self._vm, i, ctypes.byref(info)))
            kind = "input" if info.is_input else "const" if info.is_const else "output"
            shape = []
            for k in range(info.rank):
                if info.dim_names[k]:
                    shape.append(info.dim_names[k].decode())
                elif info.dims[k] < 0:
                    shape.append(None)
                else:
                    shape.append(info.dims[k])
            out.append(TensorInfo(info.name.decode(), kind, _DTYPE_NAMES.get(info.dtype), tuple(shape)))
        return out

    # -- host functions
    def register_host(self, name, fn):
        """Registers fn(*args) as host function `name` (register before
        loading a module that imports it; registering it again replaces it,
        in the loaded module too). Arguments arrive as ints (the 64-bit
        registers; bib.f64(x) reads one as a double). fn returns an integer
        (Python's or numpy's, in [-2**63, 2**64)), a float (Python's or
        numpy's, stored as its f64 bits), or None (0); anything else stops
        the run with a Trap, as an exception in fn does, naming the HOSTCALL
        and the reason."""
        self._live()

        def call(vm, _user, args, nargs, result):
            try:
                values = [args[i].i for i in range(nargs)]
                r = fn(*values)
                if r is None:
                    result[0].i = 0
                elif isinstance(r, numbers.Integral):
                    v = int(r)
                    if not -(1 << 63) <= v < (1 << 64):
                        raise OverflowError("host function %s returned %d, which does not fit 64 bits" % (name, v))
                    result[0].u = v & ((1 << 64) - 1)
                elif isinstance(r, numbers.Real):
                    result[0].f = float(r)
                else:
                    raise TypeError("host function %s returned a %s, not an integer, a float or None"
                                    % (name, type(r).__name__))
                return 0
            except BaseException as e:  # nothing may unwind through C
                text = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
                _lib.bib_vm_trap(vm, text.replace("%", "%%").encode("utf-8", "replace"))
                return 7  # BIB_E_TRAP

        cb = _capi.HOST_FN(call)
        self._check(_lib.bib_vm_register_host(self._vm, name.encode(), cb, None))
        # A function replaced from inside a callback may still be running:
        # the thunks it replaced live as long as the VM.
        if name in self._callbacks:
            self._retired.append(self._callbacks[name])
        self._callbacks[name] = cb
        return self

    # -- tensors
    def _declared(self, name):
        for t in self.tensors():
            if t.name == name:
                return t
        return None

    def set_input(self, name, array):
        """Gives input `name`. A C-contiguous array of the declared dtype
        (float32 for f32, int32 for i32) is passed as it is, without a copy
        on the Python side; the VM copies it. For an i32 input, other integer
        arrays (int64 ids) and bool arrays are converted, a value outside
        int32 refused naming its index. Another numpy dtype is refused
        naming the tensor and both shapes; lists and scalars are converted."""
        self._live()
        decl = self._declared(name)
        if decl is None or decl.kind != "input":
            inputs = [t.name for t in self.tensors() if t.kind == "input"]
            raise UsageError(
                "'%s' is not an input of the module (inputs: %s)" % (name, ", ".join(inputs) or "none"), "usage"
            )
        arr = _as_input(name, array, decl)
        dims = (ctypes.c_uint32 * max(arr.ndim, 1))(*arr.shape)
        if arr.ndim > _capi.MAX_RANK:
            raise UsageError(
                "input '%s': expected %s, given %d dimensions (at most %d)"
                % (name, _shape_text(decl.dtype, decl.shape), arr.ndim, _capi.MAX_RANK),
                "usage",
            )
        self._check(
            _lib.bib_vm_set_input(
                self._vm, name.encode(), _DTYPE_CODES[arr.dtype], arr.ndim, dims, arr.ctypes.data_as(ctypes.c_void_p)
            )
        )
        self._inputs[name] = arr
        return self

    def output(self, name):
        """Output `name` of the last run, as a new numpy array."""
        self._live()
        dtype = ctypes.c_int()
        rank = ctypes.c_uint32()
        dims = (ctypes.c_uint32 * _capi.MAX_RANK)()
        data = ctypes.c_void_p()
        self._check(
            _lib.bib_vm_get_output(
                self._vm, name.encode(), ctypes.byref(dtype), ctypes.byref(rank), dims, ctypes.byref(data)
            )
        )
        shape = tuple(dims[i] for i in range(rank.value))
        dt = _DTYPES[dtype.value]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count == 0:
            return np.zeros(shape, dtype=dt)
        raw = ctypes.string_at(data.value, count * dt.itemsize)
        return np.frombuffer(raw, dtype=dt).reshape(shape).copy()

    def outputs(self):
        """Every declared output of the last run, by name."""
        return {t.name: self.output(t.name) for t in self.tensors() if t.kind == "output"}

    # -- running
    def run(self, inputs=None, trace=None, profile=False):
        """Sets the inputs (a dict of arrays by name), runs the module and
        returns a RunResult: the outputs by name, with exit_value, stats,
        trace and profile. A trap raises Trap (with pc and line)."""
        self._live()
        if self._running:  # from a host function of this VM's run
            raise StateError("the VM is running: a host function cannot run it again", "state")
        for name, array in (inputs or {}).items():
            self.set_input(name, array)
        fmt = _TRACE_FORMATS.get(trace)
        if fmt is None:
            raise UsageError("trace must be None, 'text' or 'json', not %r" % (trace,), "usage")
        self._trace_parts = []
        if fmt:
            self._check(_lib.bib_vm_set_trace_writer(self._vm, fmt, self._trace_cb, None))
        self._check(_lib.bib_vm_profile(self._vm, 1 if profile else 0))
        exit_value = ctypes.c_int64()
        self._running = True
        try:
            st = _lib.bib_vm_run(self._vm, ctypes.byref(exit_value))
        finally:
            self._running = False
            if fmt:
                _lib.bib_vm_set_trace_writer(self._vm, 0, _capi.WRITE_FN(), None)
        self._check(st)
        result = RunResult(self.outputs())
        result.exit_value = exit_value.value
        result.stats = self.stats()
        if fmt:
            lines = b"".join(self._trace_parts).decode("utf-8", "replace").splitlines()
            result.trace = [json.loads(l) for l in lines] if fmt == 2 else lines
        if profile:
            result.profile = self.profile_rows()
        return result

    def stats(self):
        """Counters of the last run, as Stats."""
        self._live()
        s = _capi.RunStats()
        _lib.bib_vm_stats(self._vm, ctypes.byref(s))
        return Stats(s.instructions, s.peak_memory, s.fuel)

    def profile_rows(self):
        """The profile of the last profiled run, as ProfileRow, longest first."""
        self._live()
        rows = []
        r = _capi.ProfileRow()
        for i in range(_lib.bib_vm_profile_rows(self._vm)):
            self._check(_lib.bib_vm_profile_row(self._vm, i, ctypes.byref(r)))
            rows.append(ProfileRow(r.op.decode(), r.executor.decode(), r.count, r.seconds, r.flops, r.bytes))
        return rows

    def profile_report(self, json_format=False):
        """The profile of the last profiled run as the text `--profile` prints
        (or, with json_format, its JSON parsed into a dict)."""
        self._live()
        text = ctypes.c_void_p()
        self._check(_lib.bib_vm_profile_report(self._vm, 1 if json_format else 0, ctypes.byref(text)))
        s = _take_string(text)
        return json.loads(s) if json_format else s


def _unsigned(what, value, width):
    v = int(value)
    if v < 0 or v >= 1 << width:
        raise UsageError("%s must be between 0 and %d, not %d" % (what, (1 << width) - 1, v), "usage")
    return v


def _as_input(name, array, decl):
    """The array handed to the VM: array itself when it is already a
    C-contiguous array of the declared dtype, else a converted copy (lists,
    scalars, strided views). A numpy array of another dtype is refused."""
    want = np.dtype("<f4") if decl.dtype == "f32" else np.dtype("<i4")
    if isinstance(array, np.ndarray):
        if want.kind == "i" and array.dtype != want and (array.dtype.kind in "iu" or array.dtype == np.bool_):
            # int64 token ids and bool masks (torch's and numpy's defaults)
            # for an i32 input, as `bib run --input` takes them: converted,
            # a value outside int32 refused naming its index.
            if array.dtype.kind in "iu" and array.size:
                bad = np.flatnonzero((array < -(1 << 31)) | (array > (1 << 31) - 1))
                if bad.size:
                    raise UsageError(
                        "input '%s': element %d is %d, outside int32 (BIB's integer tensors are int32)"
                        % (name, bad[0], array.reshape(-1)[bad[0]]),
                        "usage",
                    )
            return np.require(array.astype(want), requirements="C")
        if array.dtype != want and array.dtype.newbyteorder("<") == want:
            # float32 or int32 in the other byte order: the same values.
            return np.require(array.astype(want), requirements="C")
        if array.dtype != want:
            raise UsageError(
                "input '%s': expected %s, given %s%s (convert with .astype(numpy.%s))"
                % (
                    name,
                    _shape_text(decl.dtype, decl.shape),
                    array.dtype.name,
                    "[" + ",".join(str(d) for d in array.shape) + "]",
                    "float32" if decl.dtype == "f32" else "int32",
                ),
                "usage",
            )
        return np.require(array, requirements="C")  # keeps rank 0 (ascontiguousarray would not)
    return np.require(np.asarray(array, dtype=want), requirements="C")


# ---- modules ---------------------------------------------------------------------------


class Module:
    """The .bib bytes of a module. run() runs it on a VM made for the options
    given (kept for the next run with the same options). Calls of run() from
    several threads take turns on that VM; for runs in parallel, give each
    thread a Vm of its own (module.vm())."""

    def __init__(self, data, name=None):
        self.bytes = bytes(data)
        self.name = name
        self._vm = None
        self._vm_key = None
        # One VM must not be used by two threads at once (bib.h), and ctypes
        # lets go of the GIL while the library runs: run() holds this.
        self._lock = threading.RLock()

    def __repr__(self):
        return "<bib.Module %s, %d bytes>" % (self.name or "(unnamed)", len(self.bytes))

    # A copy (pickle, multiprocessing, copy.deepcopy) is the bytes and the
    # name: the kept VM and the lock stay with this object.
    def __getstate__(self):
        return {"bytes": self.bytes, "name": self.name}

    def __setstate__(self, state):
        self.__init__(state["bytes"], state["name"])

    def disassemble(self):
        """.basm text that assembles back to the same bytes."""
        text = ctypes.c_void_p()
        diag = ctypes.c_void_p()
        st = _lib.bib_disassemble(self.bytes, len(self.bytes), ctypes.byref(text), ctypes.byref(diag))
        t, d = _take_string(text), _take_string(diag)
        if st != 0:
            _raise(st, d)
        return t

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.bytes)

    def vm(self, **options):
        """A new Vm with the options (see Vm), with this module loaded."""
        return Vm(**options).load(self)

    def run(self, inputs=None, hosts=None, trace=None, profile=False, **options):
        """Runs the module with inputs (arrays by name) and returns a
        RunResult (a dict of numpy arrays by output name). hosts maps import
        names to Python callables. options: backend ("cpu", "vulkan",
        "cuda", "auto"), threads, fuel, max_memory, max_depth, device,
        strict_device, validation, stdout (where print_* writes; default
        sys.stdout), and for modules the host did not write (spec/security.md)
        deny_device_code, allow_hosts (names a module may import),
        device_timeout_ms and max_file_size."""
        with self._lock:
            return self._run(inputs, hosts, trace, profile, options)

    def _run(self, inputs, hosts, trace, profile, options):
        if self._vm is not None and self._vm._running:
            # The lock is re-entrant: this is a host function of the run in
            # progress, whose VM must not be replaced (freed) or run again.
            raise StateError("Module.run from a host function of its own run (give the inner run a Vm "
                             "of its own: module.vm())", "state")
        key = (
            tuple(sorted(((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()), key=lambda kv: kv[0])),
            tuple(sorted((hosts or {}).items())),
        )
        try:
            hash(key)
        except TypeError:
            key = None
        if self._vm is None or key is None or key != self._vm_key:
            vm = Vm(**options)
            for name, fn in (hosts or {}).items():
                vm.register_host(name, fn)
            vm.load(self)
            if self._vm is not None:
                self._vm.close()
            self._vm, self._vm_key = vm, key
        # Each run takes exactly the inputs it is given: none is left over
        # from an earlier run on the kept VM.
        declared = [t for t in self._vm.tensors() if t.kind == "input"]
        for name in inputs or {}:
            if name not in [t.name for t in declared]:
                raise UsageError(
                    "'%s' is not an input of the module (inputs: %s)"
                    % (name, ", ".join(t.name for t in declared) or "none"),
                    "usage",
                )
        for t in declared:
            if t.name not in (inputs or {}):
                raise UsageError(
                    "input '%s' (%s) was not given" % (t.name, _shape_text(t.dtype, t.shape)), "usage"
                )
        return self._vm.run(inputs, trace=trace, profile=profile)


def assemble(source, filename="source.basm"):
    """Assembles .basm text; AssemblyError lists every error, one per line.
    filename (str, bytes or os.PathLike) names the source in diagnostics."""
    if isinstance(source, str):
        source = source.encode()
    out = ctypes.POINTER(ctypes.c_uint8)()
    size = ctypes.c_size_t()
    diag = ctypes.c_void_p()
    filename = os.fsencode(filename)
    st = _lib.bib_assemble(source, len(source), filename, ctypes.byref(out), ctypes.byref(size), ctypes.byref(diag))
    d = _take_string(diag)
    if st != 0:
        _raise(st, d)
    try:
        data = ctypes.string_at(out, size.value)
    finally:
        _lib.bib_free(out)
    return Module(data, os.fsdecode(os.path.basename(filename)))


_MAGIC = b"\x7fBIB"


def load(source):
    """A Module from a .basm or .bib path (str or os.PathLike), or from
    bytes: module bytes (starting with the .bib magic) or .basm text. A path
    that is not UTF-8 is taken as os.listdir gives it (surrogate escapes)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if data[:4] == _MAGIC:
            return Module(data)
        return assemble(data, "bytes.basm")
    path = os.fsdecode(os.fspath(source))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise FileError("cannot open '%s': %s" % (path, e.strerror), "io") from None
    if path.endswith(".bib") or (not path.endswith(".basm") and data[:4] == _MAGIC):
        return Module(data, os.path.basename(path))
    return assemble(data, path)


# ---- the builder ------------------------------------------------------------------------


class Builder:
    """Emits a module without assembly text, as bib_builder_* does: declare
    functions, begin/end bodies, labels, imports, constants, emit
    instructions by mnemonic, tensors, data; finish() gives the Module."""

    DIM_ANY = -1

    def __init__(self):
        self._b = _lib.bib_builder_create()
        if not self._b:
            raise MemoryLimit("bib_builder_create: out of memory", "nomem")

    def __del__(self):
        if getattr(self, "_b", None):
            _lib.bib_builder_destroy(self._b)
            self._b = None

    def _check(self, st):
        if st != 0:
            _raise(st, _lib.bib_builder_error(self._b).decode("utf-8", "replace"))
        return self

    def source(self, filename):
        _lib.bib_builder_source(self._b, os.fsencode(filename))
        return self

    def line(self, line):
        _lib.bib_builder_line(self._b, line)
        return self

    def declare(self, name):
        return _lib.bib_builder_declare(self._b, name.encode())

    def begin(self, func, nargs, nregs):
        return self._check(_lib.bib_builder_begin(self._b, func, nargs, nregs))

    def end(self):
        return self._check(_lib.bib_builder_end(self._b))

    def label(self):
        return _lib.bib_builder_label(self._b)

    def bind(self, label):
        return self._check(_lib.bib_builder_bind(self._b, label))

    def import_host(self, name):
        return _lib.bib_builder_import(self._b, name.encode())

    def const_i64(self, value):
        return _lib.bib_builder_const_i64(self._b, value)

    def const_f64(self, value):
        return _lib.bib_builder_const_f64(self._b, value)

    def emit(self, mnemonic, a=0, b=0, c=0, d=0):
        """Emits one instruction. Operands are the words of the C API (a
        label id for a jump target, a function id, an import id, a constant
        index); negative immediates are given as Python ints."""
        words = [w & 0xFFFFFFFF for w in (a, b, c, d)]
        return self._check(_lib.bib_builder_emit(self._b, opcode(mnemonic), *words))

    def memory(self, size):
        return self._check(_lib.bib_builder_memory(self._b, size))

    def data(self, offset, data):
        data = bytes(data)
        return self._check(_lib.bib_builder_data(self._b, offset, data, len(data)))

    def dim(self, name):
        """A symbolic dimension for tensor shapes."""
        v = _lib.bib_builder_tensor_dim(self._b, name.encode())
        if v == 0:
            self._check(1)
        return v

    @staticmethod
    def _dims(shape):
        return (ctypes.c_int64 * max(len(shape), 1))(*shape), len(shape)

    def tensor_input(self, name, reg, dtype, shape):
        dims, rank = self._dims(shape)
        return self._check(_lib.bib_builder_tensor_input(self._b, name.encode(), reg, _dtype_code(dtype), rank, dims))

    def tensor_output(self, name, reg, dtype, shape):
        dims, rank = self._dims(shape)
        return self._check(_lib.bib_builder_tensor_output(self._b, name.encode(), reg, _dtype_code(dtype), rank, dims))

    def tensor_const(self, name, reg, array):
        arr = np.require(array, requirements="C")  # keeps rank 0
        if arr.dtype not in _DTYPE_CODES:
            raise UsageError("constant '%s': dtype %s (use float32 or int32)" % (name, arr.dtype.name), "usage")
        dims, rank = self._dims(arr.shape)
        return self._check(
            _lib.bib_builder_tensor_const(
                self._b,
                name.encode(),
                reg,
                _DTYPE_CODES[arr.dtype],
                rank,
                dims,
                arr.ctypes.data_as(ctypes.c_void_p),
            )
        )

    def tensor_regs(self, count):
        _lib.bib_builder_tensor_regs(self._b, count)
        return self

    def finish(self, name=None):
        out = ctypes.POINTER(ctypes.c_uint8)()
        size = ctypes.c_size_t()
        self._check(_lib.bib_builder_finish(self._b, ctypes.byref(out), ctypes.byref(size)))
        try:
            data = ctypes.string_at(out, size.value)
        finally:
            _lib.bib_free(out)
        return Module(data, name)


def _dtype_code(dtype):
    names = {"f32": 1, "i32": 2, "float32": 1, "int32": 2}
    if isinstance(dtype, str) and dtype in names:
        return names[dtype]
    try:
        return _DTYPE_CODES[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise UsageError("dtype %r: use 'f32' or 'i32'" % (dtype,), "usage") from None
