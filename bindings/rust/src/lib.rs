//! Safe Rust bindings to libbib, the BIB deterministic bytecode virtual
//! machine (include/bib.h). No external crates: the C declarations are in
//! [`sys`], and the types here own the C objects and turn every failure into
//! an [`Error`] carrying the library's message.
//!
//! ```no_run
//! let module = bib::Module::load("examples/matmul.basm")?;
//! let mut vm = bib::Vm::new(&bib::Options::new().backend("cpu"))?;
//! vm.load(&module)?;
//! vm.set_input("A", &[2, 3], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! vm.set_input("B", &[3, 1], &[1.0f32, 1.0, 1.0])?;
//! vm.run()?;
//! let c = vm.output::<f32>("C")?;
//! assert_eq!(c.data, vec![6.0, 15.0]);
//! # Ok::<(), bib::Error>(())
//! ```

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr;

/// The C API, as declared in bib.h (the part these bindings use).
pub mod sys {
    use std::os::raw::{c_char, c_int, c_void};

    pub type Status = c_int;
    pub const BIB_OK: Status = 0;
    pub const BIB_E_USAGE: Status = 1;
    pub const BIB_E_TRAP: Status = 7;
    pub const BIB_DENY_DEVICE_CODE: u32 = 0x1;
    pub const BIB_DTYPE_F32: c_int = 1;
    pub const BIB_DTYPE_I32: c_int = 2;
    pub const BIB_MAX_RANK: usize = 6;

    #[repr(C)]
    pub struct Vm {
        _private: [u8; 0],
    }
    #[repr(C)]
    pub struct Builder {
        _private: [u8; 0],
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub union Value {
        pub i: i64,
        pub u: u64,
        pub f: f64,
    }

    pub type WriteFn = Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize)>;
    pub type HostFn =
        unsafe extern "C" fn(*mut Vm, *mut c_void, *const Value, u32, *mut Value) -> Status;

    /// bib_options_t. Versioned by `size`: bib_options_init_size fills it for
    /// this layout, and a newer library defaults the fields it lacks.
    #[repr(C)]
    pub struct Options {
        pub size: usize,
        pub max_memory: u64,
        pub fuel: u64,
        pub max_call_depth: u32,
        pub trace_format: c_int,
        pub trace: *mut c_void,
        pub backend: *const c_char,
        pub device: *const c_char,
        pub threads: u32,
        pub validation: c_int,
        pub strict_device: c_int,
        pub deny: u32,
        pub allow_hosts: *const c_char,
        pub device_timeout_ms: u64,
        pub max_file_size: u64,
        pub trace_write: WriteFn,
        pub trace_user: *mut c_void,
    }

    #[repr(C)]
    #[derive(Default)]
    pub struct RunStats {
        pub instructions: u64,
        pub peak_memory: u64,
        pub fuel: u64,
    }

    extern "C" {
        pub fn bib_status_name(status: Status) -> *const c_char;
        pub fn bib_free(ptr: *mut c_void);
        pub fn bib_build_info() -> *const c_char;
        pub fn bib_options_init_size(options: *mut Options, size: usize);
        pub fn bib_vm_create(options: *const Options, out: *mut *mut Vm) -> Status;
        pub fn bib_vm_destroy(vm: *mut Vm);
        pub fn bib_vm_error(vm: *const Vm) -> *const c_char;
        pub fn bib_vm_load(vm: *mut Vm, bytes: *const c_void, size: usize, name: *const c_char)
            -> Status;
        pub fn bib_vm_load_file(vm: *mut Vm, path: *const c_char) -> Status;
        pub fn bib_vm_run(vm: *mut Vm, exit_value: *mut i64) -> Status;
        pub fn bib_vm_stats(vm: *const Vm, stats: *mut RunStats);
        pub fn bib_vm_set_input(
            vm: *mut Vm,
            name: *const c_char,
            dtype: c_int,
            rank: u32,
            dims: *const u32,
            data: *const c_void,
        ) -> Status;
        pub fn bib_vm_get_output(
            vm: *mut Vm,
            name: *const c_char,
            dtype: *mut c_int,
            rank: *mut u32,
            dims: *mut u32,
            data: *mut *const c_void,
        ) -> Status;
        pub fn bib_vm_register_host(
            vm: *mut Vm,
            name: *const c_char,
            f: HostFn,
            user: *mut c_void,
        ) -> Status;
        pub fn bib_vm_register_output(vm: *mut Vm, write: WriteFn, user: *mut c_void) -> Status;
        pub fn bib_vm_trap(vm: *mut Vm, format: *const c_char, ...);
        pub fn bib_opcode(mnemonic: *const c_char) -> i64;
        pub fn bib_assemble(
            source: *const c_char,
            length: usize,
            filename: *const c_char,
            out: *mut *mut u8,
            size: *mut usize,
            diagnostics: *mut *mut c_char,
        ) -> Status;
        pub fn bib_disassemble(
            bytes: *const c_void,
            size: usize,
            text: *mut *mut c_char,
            diagnostics: *mut *mut c_char,
        ) -> Status;
        pub fn bib_builder_create() -> *mut Builder;
        pub fn bib_builder_destroy(b: *mut Builder);
        pub fn bib_builder_error(b: *const Builder) -> *const c_char;
        pub fn bib_builder_declare(b: *mut Builder, name: *const c_char) -> u32;
        pub fn bib_builder_begin(b: *mut Builder, func: u32, nargs: u32, nregs: u32) -> Status;
        pub fn bib_builder_end(b: *mut Builder) -> Status;
        pub fn bib_builder_label(b: *mut Builder) -> u32;
        pub fn bib_builder_bind(b: *mut Builder, label: u32) -> Status;
        pub fn bib_builder_import(b: *mut Builder, name: *const c_char) -> u32;
        pub fn bib_builder_emit(b: *mut Builder, opcode: u32, a: u32, bb: u32, c: u32, d: u32)
            -> Status;
        pub fn bib_builder_finish(b: *mut Builder, out: *mut *mut u8, size: *mut usize) -> Status;
    }
}

/// What kind of failure: the C status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Usage,
    Io,
    Format,
    Verify,
    Asm,
    Link,
    Trap,
    NoMem,
    Unavailable,
    State,
    Timeout,
    Other(i32),
}

impl Status {
    fn from_raw(st: sys::Status) -> Status {
        match st {
            1 => Status::Usage,
            2 => Status::Io,
            3 => Status::Format,
            4 => Status::Verify,
            5 => Status::Asm,
            6 => Status::Link,
            7 => Status::Trap,
            8 => Status::NoMem,
            9 => Status::Unavailable,
            10 => Status::State,
            11 => Status::Timeout,
            n => Status::Other(n),
        }
    }
}

/// A failure reported by libbib: its status and one-line message (an
/// assembler's message holds every diagnostic, one per line).
#[derive(Debug, Clone)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    fn number_after(&self, word: &str) -> Option<u32> {
        let at = self.message.find(word)? + word.len();
        let digits: String =
            self.message[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse().ok()
    }

    /// The program counter the message names ("trap at pc 5 ..."), if any.
    pub fn pc(&self) -> Option<u32> {
        self.number_after("pc ")
    }

    /// The source line the message names, if any.
    pub fn line(&self) -> Option<u32> {
        self.number_after(" line ")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(Status::Usage, format!("{what} '{s}' contains a NUL byte")))
}

unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Copies and frees a string the library handed over.
unsafe fn take_text(p: *mut c_char) -> String {
    let s = text(p);
    sys::bib_free(p as *mut c_void);
    s
}

/// The library's build line: version, SIMD level, executors.
pub fn build_info() -> String {
    unsafe { text(sys::bib_build_info()) }
}

/// The opcode word of a mnemonic.
pub fn opcode(mnemonic: &str) -> Result<u32> {
    let c = cstring("mnemonic", mnemonic)?;
    let code = unsafe { sys::bib_opcode(c.as_ptr()) };
    if code < 0 {
        return Err(Error::new(Status::Usage, format!("unknown mnemonic '{mnemonic}'")));
    }
    Ok(code as u32)
}

/// The bytes of a .bib module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    pub bytes: Vec<u8>,
}

impl Module {
    /// Assembles .basm text; the error holds every diagnostic.
    pub fn assemble(source: &str, filename: &str) -> Result<Module> {
        let name = cstring("file name", filename)?;
        let mut out: *mut u8 = ptr::null_mut();
        let mut size = 0usize;
        let mut diag: *mut c_char = ptr::null_mut();
        unsafe {
            let st = sys::bib_assemble(
                source.as_ptr() as *const c_char,
                source.len(),
                name.as_ptr(),
                &mut out,
                &mut size,
                &mut diag,
            );
            let diagnostics = take_text(diag);
            if st != sys::BIB_OK {
                return Err(Error::new(Status::from_raw(st), diagnostics));
            }
            let bytes = std::slice::from_raw_parts(out, size).to_vec();
            sys::bib_free(out as *mut c_void);
            Ok(Module { bytes })
        }
    }

    /// A .bib file as it is, or a .basm file (any other name that does not
    /// start with the .bib magic) assembled.
    pub fn load(path: impl AsRef<Path>) -> Result<Module> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| {
            Error::new(Status::Io, format!("cannot open '{}': {e}", path.display()))
        })?;
        let is_bib = path.extension().map_or(false, |e| e == "bib")
            || (path.extension().map_or(true, |e| e != "basm") && bytes.starts_with(b"\x7fBIB"));
        if is_bib {
            return Ok(Module { bytes });
        }
        let source = String::from_utf8(bytes).map_err(|_| {
            Error::new(Status::Asm, format!("{}: the source is not UTF-8", path.display()))
        })?;
        Module::assemble(&source, &path.to_string_lossy())
    }

    /// .basm text that assembles back to the same bytes.
    pub fn disassemble(&self) -> Result<String> {
        let mut out: *mut c_char = ptr::null_mut();
        let mut diag: *mut c_char = ptr::null_mut();
        unsafe {
            let st = sys::bib_disassemble(
                self.bytes.as_ptr() as *const c_void,
                self.bytes.len(),
                &mut out,
                &mut diag,
            );
            let t = take_text(out);
            let d = take_text(diag);
            if st != sys::BIB_OK {
                return Err(Error::new(Status::from_raw(st), d));
            }
            Ok(t)
        }
    }
}

/// Options of a VM.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub max_memory: Option<u64>,
    pub fuel: Option<u64>,
    pub max_depth: Option<u32>,
    pub backend: Option<String>,
    pub device: Option<String>,
    pub threads: Option<u32>,
    pub strict_device: bool,
    /// For modules the host did not write (spec/security.md): refuse device code at load.
    pub deny_device_code: bool,
    /// Host functions a module may import (None: any registered one).
    pub allow_hosts: Option<Vec<String>>,
    /// The longest one wait for GPU work may take, in milliseconds.
    pub device_timeout_ms: Option<u64>,
    /// The largest file bib_vm_load_file reads (0: the library's default, 1 GiB).
    pub max_file_size: Option<u64>,
}

impl Options {
    pub fn new() -> Options {
        Options::default()
    }
    pub fn fuel(mut self, units: u64) -> Options {
        self.fuel = Some(units);
        self
    }
    pub fn max_memory(mut self, bytes: u64) -> Options {
        self.max_memory = Some(bytes);
        self
    }
    pub fn max_depth(mut self, frames: u32) -> Options {
        self.max_depth = Some(frames);
        self
    }
    pub fn backend(mut self, name: &str) -> Options {
        self.backend = Some(name.to_string());
        self
    }
    pub fn device(mut self, selector: &str) -> Options {
        self.device = Some(selector.to_string());
        self
    }
    pub fn threads(mut self, count: u32) -> Options {
        self.threads = Some(count);
        self
    }
    pub fn strict_device(mut self, on: bool) -> Options {
        self.strict_device = on;
        self
    }
    pub fn deny_device_code(mut self, on: bool) -> Options {
        self.deny_device_code = on;
        self
    }
    pub fn allow_hosts(mut self, names: &[&str]) -> Options {
        self.allow_hosts = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }
    pub fn device_timeout_ms(mut self, ms: u64) -> Options {
        self.device_timeout_ms = Some(ms);
        self
    }
    pub fn max_file_size(mut self, bytes: u64) -> Options {
        self.max_file_size = Some(bytes);
        self
    }
}

/// An element type of tensors: f32 or i32.
pub trait Element: Copy + Default + 'static {
    const DTYPE: c_int;
    const NAME: &'static str;
}
impl Element for f32 {
    const DTYPE: c_int = sys::BIB_DTYPE_F32;
    const NAME: &'static str = "f32";
}
impl Element for i32 {
    const DTYPE: c_int = sys::BIB_DTYPE_I32;
    const NAME: &'static str = "i32";
}

/// A tensor copied out of the VM: row-major data and its dimensions.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<T> {
    pub dims: Vec<u32>,
    pub data: Vec<T>,
}

type HostBox = Box<dyn FnMut(&[i64]) -> std::result::Result<i64, String>>;
type OutputBox = Box<dyn FnMut(&[u8])>;

unsafe extern "C" fn host_trampoline(
    vm: *mut sys::Vm,
    user: *mut c_void,
    args: *const sys::Value,
    nargs: u32,
    result: *mut sys::Value,
) -> sys::Status {
    let f = &mut *(user as *mut HostBox);
    let values: Vec<i64> = (0..nargs as usize).map(|i| (*args.add(i)).i).collect();
    let message = match catch_unwind(AssertUnwindSafe(|| f(&values))) {
        Ok(Ok(v)) => {
            (*result).i = v;
            return sys::BIB_OK;
        }
        Ok(Err(message)) => message,
        Err(_) => "host function panicked".to_string(),
    };
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    sys::bib_vm_trap(vm, b"%s\0".as_ptr() as *const c_char, c.as_ptr());
    sys::BIB_E_TRAP
}

unsafe extern "C" fn output_trampoline(user: *mut c_void, bytes: *const c_char, length: usize) {
    let f = &mut *(user as *mut OutputBox);
    let data = std::slice::from_raw_parts(bytes as *const u8, length);
    let _ = catch_unwind(AssertUnwindSafe(|| f(data)));
}

/// A VM. Not shared between threads; dropping it releases everything.
pub struct Vm {
    raw: *mut sys::Vm,
    // Boxed twice so that the pointer the VM holds stays put.
    hosts: Vec<Box<HostBox>>,
    outputs: Vec<Box<OutputBox>>,
}

impl Vm {
    pub fn new(options: &Options) -> Result<Vm> {
        let backend = options.backend.as_deref().map(|s| cstring("backend", s)).transpose()?;
        let device = options.device.as_deref().map(|s| cstring("device", s)).transpose()?;
        let allow = options.allow_hosts.as_ref().map(|v| cstring("allow_hosts", &v.join(","))).transpose()?;
        let mut raw: *mut sys::Vm = ptr::null_mut();
        unsafe {
            let mut o: sys::Options = std::mem::zeroed();
            sys::bib_options_init_size(&mut o, std::mem::size_of::<sys::Options>());
            if let Some(v) = options.max_memory {
                o.max_memory = v;
            }
            if let Some(v) = options.fuel {
                o.fuel = v;
            }
            if let Some(v) = options.max_depth {
                o.max_call_depth = v;
            }
            if let Some(v) = options.threads {
                o.threads = v;
            }
            o.strict_device = options.strict_device as c_int;
            o.deny = if options.deny_device_code { sys::BIB_DENY_DEVICE_CODE } else { 0 };
            o.allow_hosts = allow.as_ref().map_or(ptr::null(), |c| c.as_ptr());
            if let Some(v) = options.device_timeout_ms {
                o.device_timeout_ms = v;
            }
            if let Some(v) = options.max_file_size {
                o.max_file_size = v;
            }
            o.backend = backend.as_ref().map_or(ptr::null(), |c| c.as_ptr());
            o.device = device.as_ref().map_or(ptr::null(), |c| c.as_ptr());
            let st = sys::bib_vm_create(&o, &mut raw);
            if st != sys::BIB_OK {
                return Err(Error::new(Status::from_raw(st), "bib_vm_create: invalid options"));
            }
        }
        Ok(Vm { raw, hosts: Vec::new(), outputs: Vec::new() })
    }

    fn check(&self, st: sys::Status) -> Result<()> {
        if st == sys::BIB_OK {
            Ok(())
        } else {
            Err(Error::new(Status::from_raw(st), unsafe { text(sys::bib_vm_error(self.raw)) }))
        }
    }

    pub fn load(&mut self, module: &Module) -> Result<()> {
        self.load_bytes(&module.bytes, "module")
    }

    pub fn load_bytes(&mut self, bytes: &[u8], name: &str) -> Result<()> {
        let n = cstring("name", name)?;
        self.check(unsafe {
            sys::bib_vm_load(self.raw, bytes.as_ptr() as *const c_void, bytes.len(), n.as_ptr())
        })
    }

    pub fn load_file(&mut self, path: &str) -> Result<()> {
        let p = cstring("path", path)?;
        self.check(unsafe { sys::bib_vm_load_file(self.raw, p.as_ptr()) })
    }

    /// Runs the entry function; the exit value, or the trap as an Error.
    pub fn run(&mut self) -> Result<i64> {
        let mut exit_value = 0i64;
        self.check(unsafe { sys::bib_vm_run(self.raw, &mut exit_value) })?;
        Ok(exit_value)
    }

    pub fn stats(&self) -> sys::RunStats {
        let mut s = sys::RunStats::default();
        unsafe { sys::bib_vm_stats(self.raw, &mut s) };
        s
    }

    /// Sets input `name` (copied) from row-major data of the given dims.
    pub fn set_input<T: Element>(&mut self, name: &str, dims: &[u32], data: &[T]) -> Result<()> {
        let count: u64 = dims.iter().map(|&d| d as u64).product();
        if count != data.len() as u64 || dims.len() > sys::BIB_MAX_RANK {
            return Err(Error::new(
                Status::Usage,
                format!(
                    "input '{name}': dims {dims:?} (at most {} of them) need {count} elements, \
                     the slice holds {}",
                    sys::BIB_MAX_RANK,
                    data.len()
                ),
            ));
        }
        let n = cstring("input", name)?;
        self.check(unsafe {
            sys::bib_vm_set_input(
                self.raw,
                n.as_ptr(),
                T::DTYPE,
                dims.len() as u32,
                dims.as_ptr(),
                data.as_ptr() as *const c_void,
            )
        })
    }

    /// Output `name` of the last run, copied.
    pub fn output<T: Element>(&mut self, name: &str) -> Result<Tensor<T>> {
        let n = cstring("output", name)?;
        let mut dtype: c_int = 0;
        let mut rank = 0u32;
        let mut dims = [0u32; sys::BIB_MAX_RANK];
        let mut data: *const c_void = ptr::null();
        self.check(unsafe {
            sys::bib_vm_get_output(
                self.raw,
                n.as_ptr(),
                &mut dtype,
                &mut rank,
                dims.as_mut_ptr(),
                &mut data,
            )
        })?;
        if dtype != T::DTYPE {
            return Err(Error::new(
                Status::Usage,
                format!("output '{name}' is not {}", T::NAME),
            ));
        }
        let dims = dims[..rank as usize].to_vec();
        let count: usize = dims.iter().map(|&d| d as usize).product();
        let data = if count == 0 {
            Vec::new()
        } else {
            unsafe { std::slice::from_raw_parts(data as *const T, count).to_vec() }
        };
        Ok(Tensor { dims, data })
    }

    /// Registers a host function: it receives the HOSTCALL arguments and
    /// returns the result, or Err(message) to trap the run.
    pub fn register_host<F>(&mut self, name: &str, f: F) -> Result<()>
    where
        F: FnMut(&[i64]) -> std::result::Result<i64, String> + 'static,
    {
        let n = cstring("host function", name)?;
        let mut boxed: Box<HostBox> = Box::new(Box::new(f));
        let user = &mut *boxed as *mut HostBox as *mut c_void;
        self.check(unsafe { sys::bib_vm_register_host(self.raw, n.as_ptr(), host_trampoline, user) })?;
        self.hosts.push(boxed);
        Ok(())
    }

    /// print_i64 and the other standard output functions, writing to f.
    pub fn register_output<F: FnMut(&[u8]) + 'static>(&mut self, f: F) -> Result<()> {
        let mut boxed: Box<OutputBox> = Box::new(Box::new(f));
        let user = &mut *boxed as *mut OutputBox as *mut c_void;
        self.check(unsafe { sys::bib_vm_register_output(self.raw, Some(output_trampoline), user) })?;
        self.outputs.push(boxed);
        Ok(())
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        unsafe { sys::bib_vm_destroy(self.raw) };
    }
}

/// Emits a module without assembly text.
pub struct Builder {
    raw: *mut sys::Builder,
}

impl Builder {
    pub fn new() -> Builder {
        let raw = unsafe { sys::bib_builder_create() };
        assert!(!raw.is_null(), "bib_builder_create: out of memory");
        Builder { raw }
    }

    fn check(&mut self, st: sys::Status) -> Result<&mut Builder> {
        if st == sys::BIB_OK {
            Ok(self)
        } else {
            Err(Error::new(Status::from_raw(st), unsafe { text(sys::bib_builder_error(self.raw)) }))
        }
    }

    pub fn declare(&mut self, name: &str) -> Result<u32> {
        let n = cstring("function", name)?;
        Ok(unsafe { sys::bib_builder_declare(self.raw, n.as_ptr()) })
    }
    pub fn import(&mut self, name: &str) -> Result<u32> {
        let n = cstring("import", name)?;
        Ok(unsafe { sys::bib_builder_import(self.raw, n.as_ptr()) })
    }
    pub fn label(&mut self) -> u32 {
        unsafe { sys::bib_builder_label(self.raw) }
    }
    pub fn begin(&mut self, func: u32, nargs: u32, nregs: u32) -> Result<&mut Builder> {
        let st = unsafe { sys::bib_builder_begin(self.raw, func, nargs, nregs) };
        self.check(st)
    }
    pub fn end(&mut self) -> Result<&mut Builder> {
        let st = unsafe { sys::bib_builder_end(self.raw) };
        self.check(st)
    }
    pub fn bind(&mut self, label: u32) -> Result<&mut Builder> {
        let st = unsafe { sys::bib_builder_bind(self.raw, label) };
        self.check(st)
    }
    /// Emits mnemonic with its operand words (negative immediates as i32 casts).
    pub fn emit(&mut self, mnemonic: &str, ops: [u32; 4]) -> Result<&mut Builder> {
        let code = opcode(mnemonic)?;
        let st = unsafe { sys::bib_builder_emit(self.raw, code, ops[0], ops[1], ops[2], ops[3]) };
        self.check(st)
    }
    pub fn finish(&mut self) -> Result<Module> {
        let mut out: *mut u8 = ptr::null_mut();
        let mut size = 0usize;
        let st = unsafe { sys::bib_builder_finish(self.raw, &mut out, &mut size) };
        self.check(st)?;
        unsafe {
            let bytes = std::slice::from_raw_parts(out, size).to_vec();
            sys::bib_free(out as *mut c_void);
            Ok(Module { bytes })
        }
    }
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        unsafe { sys::bib_builder_destroy(self.raw) };
    }
}
