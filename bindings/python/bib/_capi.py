"""ctypes declarations of libbib's C API (include/bib.h), and the loading of
the library. Nothing here is for users: the package's __init__ wraps it.

The structs mirror bib.h. bib_options_t is versioned by its size field, so
this mirror may lag behind a newer library: bib_vm_create takes the fields
within the size given and defaults the rest."""

import ctypes
import os

SONAME = "libbib.so.0"

c_status = ctypes.c_int
WRITE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)


class Value(ctypes.Union):
    _fields_ = [("i", ctypes.c_int64), ("u", ctypes.c_uint64), ("f", ctypes.c_double)]


HOST_FN = ctypes.CFUNCTYPE(
    c_status, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(Value), ctypes.c_uint32, ctypes.POINTER(Value)
)


class Options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("max_memory", ctypes.c_uint64),
        ("fuel", ctypes.c_uint64),
        ("max_call_depth", ctypes.c_uint32),
        ("trace_format", ctypes.c_int),
        ("trace", ctypes.c_void_p),
        ("backend", ctypes.c_char_p),
        ("device", ctypes.c_char_p),
        ("threads", ctypes.c_uint32),
        ("validation", ctypes.c_int),
        ("strict_device", ctypes.c_int),
        ("deny", ctypes.c_uint32),
        ("allow_hosts", ctypes.c_char_p),
        ("device_timeout_ms", ctypes.c_uint64),
        ("max_file_size", ctypes.c_uint64),
        ("trace_write", WRITE_FN),
        ("trace_user", ctypes.c_void_p),
    ]


MAX_RANK = 6


class TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("is_input", ctypes.c_int),
        ("is_output", ctypes.c_int),
        ("is_const", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_uint32),
        ("dims", ctypes.c_int64 * MAX_RANK),
        ("dim_names", ctypes.c_char_p * MAX_RANK),
    ]


class RunStats(ctypes.Structure):
    _fields_ = [("instructions", ctypes.c_uint64), ("peak_memory", ctypes.c_uint64), ("fuel", ctypes.c_uint64)]


class ProfileRow(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_char_p),
        ("executor", ctypes.c_char_p),
        ("count", ctypes.c_uint64),
        ("seconds", ctypes.c_double),
        ("flops", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
    ]


P = ctypes.c_void_p
u8p = ctypes.POINTER(ctypes.c_uint8)
u8pp = ctypes.POINTER(u8p)
cpp = ctypes.POINTER(ctypes.c_char_p)
sizep = ctypes.POINTER(ctypes.c_size_t)
u32 = ctypes.c_uint32
u32p = ctypes.POINTER(ctypes.c_uint32)
i64 = ctypes.c_int64

# name: (restype, argtypes)
PROTOTYPES = {
    "bib_status_name": (ctypes.c_char_p, [c_status]),
    "bib_free": (None, [P]),
    "bib_build_info": (ctypes.c_char_p, []),
    "bib_options_init_size": (None, [ctypes.POINTER(Options), ctypes.c_size_t]),
    "bib_vm_create": (c_status, [ctypes.POINTER(Options), ctypes.POINTER(P)]),
    "bib_vm_destroy": (None, [P]),
    "bib_vm_error": (ctypes.c_char_p, [P]),
    "bib_vm_load": (c_status, [P, P, ctypes.c_size_t, ctypes.c_char_p]),
    "bib_vm_load_file": (c_status, [P, ctypes.c_char_p]),
    "bib_vm_run": (c_status, [P, ctypes.POINTER(i64)]),
    "bib_vm_stats": (None, [P, ctypes.POINTER(RunStats)]),
    "bib_vm_tensor_count": (u32, [P]),
    "bib_vm_tensor_info": (c_status, [P, u32, ctypes.POINTER(TensorInfo)]),
    "bib_vm_set_input": (c_status, [P, ctypes.c_char_p, ctypes.c_int, u32, u32p, P]),
    "bib_vm_get_output": (
        c_status,
        [P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), u32p, u32p, ctypes.POINTER(P)],
    ),
    "bib_vm_register_host": (c_status, [P, ctypes.c_char_p, HOST_FN, P]),
    "bib_vm_register_output": (c_status, [P, WRITE_FN, P]),
    "bib_vm_trap": (None, [P, ctypes.c_char_p]),
    "bib_vm_set_trace_writer": (c_status, [P, ctypes.c_int, WRITE_FN, P]),
    "bib_vm_profile": (c_status, [P, ctypes.c_int]),
    "bib_vm_profile_rows": (u32, [P]),
    "bib_vm_profile_row": (c_status, [P, u32, ctypes.POINTER(ProfileRow)]),
    "bib_vm_profile_report": (c_status, [P, ctypes.c_int, ctypes.POINTER(P)]),
    "bib_opcode": (i64, [ctypes.c_char_p]),
    "bib_assemble": (c_status, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, u8pp, sizep, ctypes.POINTER(P)]),
    "bib_disassemble": (c_status, [P, ctypes.c_size_t, ctypes.POINTER(P), ctypes.POINTER(P)]),
    "bib_builder_create": (P, []),
    "bib_builder_destroy": (None, [P]),
    "bib_builder_error": (ctypes.c_char_p, [P]),
    "bib_builder_source": (None, [P, ctypes.c_char_p]),
    "bib_builder_line": (None, [P, u32]),
    "bib_builder_declare": (u32, [P, ctypes.c_char_p]),
    "bib_builder_begin": (c_status, [P, u32, u32, u32]),
    "bib_builder_end": (c_status, [P]),
    "bib_builder_label": (u32, [P]),
    "bib_builder_bind": (c_status, [P, u32]),
    "bib_builder_import": (u32, [P, ctypes.c_char_p]),
    "bib_builder_const_i64": (u32, [P, i64]),
    "bib_builder_const_f64": (u32, [P, ctypes.c_double]),
    "bib_builder_emit": (c_status, [P, u32, u32, u32, u32, u32]),
    "bib_builder_memory": (c_status, [P, ctypes.c_uint64]),
    "bib_builder_data": (c_status, [P, ctypes.c_uint64, P, ctypes.c_size_t]),
    "bib_builder_tensor_dim": (i64, [P, ctypes.c_char_p]),
    "bib_builder_tensor_input": (c_status, [P, ctypes.c_char_p, u32, ctypes.c_int, u32, ctypes.POINTER(i64)]),
    "bib_builder_tensor_output": (c_status, [P, ctypes.c_char_p, u32, ctypes.c_int, u32, ctypes.POINTER(i64)]),
    "bib_builder_tensor_const": (
        c_status,
        [P, ctypes.c_char_p, u32, ctypes.c_int, u32, ctypes.POINTER(i64), P],
    ),
    "bib_builder_tensor_regs": (None, [P, u32]),
    "bib_builder_finish": (c_status, [P, u8pp, sizep]),
}


def _candidates():
    """Where the library may be, in order: $BIB_LIBRARY, the lib directory
    `make install` recorded, the build directory of a source tree this
    package sits in, then the dynamic loader's own search."""
    env = os.environ.get("BIB_LIBRARY")
    if env:
        yield env
        return
    try:
        from . import _install  # written by make install

        yield os.path.join(_install.LIBDIR, SONAME)
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "..", "build", SONAME))
    if os.path.exists(tree):
        yield tree
    yield SONAME


def load():
    """Opens libbib and declares its functions; returns (library, path)."""
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        for name, (restype, argtypes) in PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise ImportError(
                    "%s has no %s: it is older than this Python package (%s)"
                    % (path, name, lib.bib_build_info().decode() if hasattr(lib, "bib_build_info") else "?")
                ) from None
            fn.restype = restype
            fn.argtypes = argtypes
        return lib, path
    env = os.environ.get("BIB_LIBRARY")
    if env:
        # Only the library the variable names was tried: say so, not where
        # else libbib may be.
        raise ImportError("cannot load libbib from BIB_LIBRARY=%s: %s" % (env, "; ".join(errors)))
    raise ImportError(
        "cannot load libbib (%s): %s. Set BIB_LIBRARY to its path, or run `make install`"
        % (SONAME, "; ".join(errors))
    )
