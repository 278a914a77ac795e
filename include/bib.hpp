/* bib.hpp: header-only C++17 wrappers over the C API of libbib (bib.h).
 *
 * RAII owners for the VM (bib::Vm) and the builder (bib::Builder), a module's
 * bytes (bib::Module), non-owning tensor views (bib::TensorView), and options
 * with chained setters (bib::Options). Every failing call throws bib::Error,
 * which carries the status and the library's one-line message. Host
 * functions are any callable; an exception thrown by one becomes a trap of
 * the run (it never crosses the C library).
 *
 * Link as for bib.h: `c++ -std=c++17 prog.cpp $(pkg-config --cflags --libs bib)`.
 * Everything here is inline over the stable C API, so it adds no ABI of its own.
 */
#ifndef BIB_HPP
#define BIB_HPP

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "bib.h"

namespace bib {

/* A failed call: the status and the library's message. */
class Error : public std::runtime_error {
  public:
    Error(bib_status_t status, const std::string &message)
        : std::runtime_error(std::string(bib_status_name(status)) + ": " + message),
          status_(status), message_(message) {}
    bib_status_t status() const noexcept {
        return status_;
    }
    /* The library's message alone, without the status name. */
    const std::string &message() const noexcept {
        return message_;
    }

  private:
    bib_status_t status_;
    std::string message_;
};

namespace detail {
struct Freer {
    void operator()(void *p) const noexcept {
        bib_free(p);
    }
};
template <class T> using owned = std::unique_ptr<T, Freer>;
} // namespace detail

/* The .bib bytes of a module, from the assembler, the builder or a file. */
class Module {
  public:
    Module() = default;
    explicit Module(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}

    /* Assembles .basm source; on errors throws bib::Error whose message holds
       every diagnostic, one per line. */
    static Module assemble(std::string_view source, const std::string &filename = "source.basm") {
        uint8_t *out = nullptr;
        size_t size = 0;
        char *diagnostics = nullptr;
        bib_status_t st =
            bib_assemble(source.data(), source.size(), filename.c_str(), &out, &size, &diagnostics);
        detail::owned<uint8_t> bytes(out);
        detail::owned<char> diag(diagnostics);
        if (st != BIB_OK)
            throw Error(st, diag ? diag.get() : "assembly failed");
        return Module(std::vector<uint8_t>(out, out + size));
    }

    /* .basm text that assembles back to the same bytes. */
    std::string disassemble() const {
        char *text = nullptr, *diagnostics = nullptr;
        bib_status_t st = bib_disassemble(bytes_.data(), bytes_.size(), &text, &diagnostics);
        detail::owned<char> t(text), d(diagnostics);
        if (st != BIB_OK)
            throw Error(st, d ? d.get() : "disassembly failed");
        return std::string(t.get());
    }

    const std::vector<uint8_t> &bytes() const noexcept {
        return bytes_;
    }

  private:
    std::vector<uint8_t> bytes_;
};

/* A view of tensor data that someone else owns: the caller's buffer (an
   input) or the VM's (an output, valid until the next run, load or
   destruction of the VM). */
template <class T> class TensorView {
    static_assert(std::is_same_v<T, const float> || std::is_same_v<T, const int32_t> ||
                      std::is_same_v<T, float> || std::is_same_v<T, int32_t>,
                  "BIB tensors hold float or int32_t");

  public:
    using value_type = std::remove_const_t<T>;
    static constexpr bib_dtype_t dtype =
        std::is_same_v<value_type, float> ? BIB_DTYPE_F32 : BIB_DTYPE_I32;

    TensorView() = default;
    TensorView(T *data, std::initializer_list<uint32_t> dims) : data_(data) {
        if (dims.size() > BIB_MAX_RANK)
            throw Error(BIB_E_USAGE, "a tensor has at most " + std::to_string(BIB_MAX_RANK) +
                                         " dimensions, " + std::to_string(dims.size()) + " given");
        for (uint32_t d : dims)
            dims_[rank_++] = d;
    }
    TensorView(T *data, uint32_t rank, const uint32_t *dims) : data_(data), rank_(rank) {
        if (rank > BIB_MAX_RANK)
            throw Error(BIB_E_USAGE, "a tensor has at most " + std::to_string(BIB_MAX_RANK) +
                                         " dimensions, " + std::to_string(rank) + " given");
        for (uint32_t i = 0; i < rank; i++)
            dims_[i] = dims[i];
    }

    T *data() const noexcept {
        return data_;
    }
    uint32_t rank() const noexcept {
        return rank_;
    }
    uint32_t dim(uint32_t i) const {
        if (i >= rank_)
            throw std::out_of_range("bib::TensorView::dim: " + std::to_string(i) +
                                    " is not below the rank " + std::to_string(rank_));
        return dims_[i];
    }
    const uint32_t *dims() const noexcept {
        return dims_.data();
    }
    /* The element count (1 for rank 0). */
    size_t size() const noexcept {
        size_t n = 1;
        for (uint32_t i = 0; i < rank_; i++)
            n *= dims_[i];
        return n;
    }
    T &operator[](size_t i) const noexcept {
        return data_[i];
    }
    T *begin() const noexcept {
        return data_;
    }
    T *end() const noexcept {
        return data_ + size();
    }

  private:
    T *data_ = nullptr;
    uint32_t rank_ = 0;
    std::array<uint32_t, BIB_MAX_RANK> dims_{};
};

/* Options of a VM, as bib_options_t with chained setters. The strings are
   kept here, so temporaries may be passed. */
class Options {
  public:
    Options() {
        bib_options_init(&options_);
    }
    Options &max_memory(uint64_t bytes) {
        options_.max_memory = bytes;
        return *this;
    }
    Options &fuel(uint64_t units) {
        options_.fuel = units;
        return *this;
    }
    Options &max_call_depth(uint32_t frames) {
        options_.max_call_depth = frames;
        return *this;
    }
    Options &backend(std::string name) {
        backend_ = std::move(name);
        return *this;
    }
    Options &device(std::string selector) {
        device_ = std::move(selector);
        return *this;
    }
    Options &threads(uint32_t count) {
        options_.threads = count;
        return *this;
    }
    Options &strict_device(bool on = true) {
        options_.strict_device = on;
        return *this;
    }
    Options &validation(bool on = true) {
        options_.validation = on;
        return *this;
    }
    /* For modules the host did not write (spec/security.md). */
    Options &deny_device_code(bool on = true) {
        options_.deny = on ? (options_.deny | BIB_DENY_DEVICE_CODE)
                           : (options_.deny & ~static_cast<uint32_t>(BIB_DENY_DEVICE_CODE));
        return *this;
    }
    /* The host functions a module may import, separated by commas. */
    Options &allow_hosts(std::string names) {
        allow_hosts_ = std::move(names);
        has_allow_hosts_ = true;
        return *this;
    }
    Options &device_timeout_ms(uint64_t ms) {
        options_.device_timeout_ms = ms;
        return *this;
    }
    Options &max_file_size(uint64_t bytes) {
        options_.max_file_size = bytes;
        return *this;
    }
    /* The options as the C API takes them; valid while this object lives. */
    const bib_options_t *get() const {
        options_.backend = backend_.empty() ? nullptr : backend_.c_str();
        options_.device = device_.empty() ? nullptr : device_.c_str();
        options_.allow_hosts = has_allow_hosts_ ? allow_hosts_.c_str() : nullptr;
        return &options_;
    }

  private:
    mutable bib_options_t options_;
    std::string backend_, device_, allow_hosts_;
    bool has_allow_hosts_ = false;
};

/* A host function: receives the HOSTCALL arguments, returns the result.
   Throwing makes the run trap with the exception's message. */
using HostFunction = std::function<bib_value_t(const bib_value_t *args, uint32_t nargs)>;

/* The VM. Move-only; destroying it releases everything it holds. */
class Vm {
  public:
    explicit Vm(const Options &options = Options()) {
        bib_vm_t *vm = nullptr;
        bib_status_t st = bib_vm_create(options.get(), &vm);
        if (st != BIB_OK)
            throw Error(st, "bib_vm_create: invalid options");
        vm_.reset(vm);
    }
    Vm(Vm &&) = default;
    Vm &operator=(Vm &&) = default;

    bib_vm_t *get() const noexcept {
        return vm_.get();
    }

    /* Loads module bytes (copied), a Module, or a .bib / .basm file. */
    Vm &load(const void *bytes, size_t size, const std::string &name = "module") {
        return check(bib_vm_load(get(), bytes, size, name.c_str()));
    }
    Vm &load(const Module &module, const std::string &name = "module") {
        return load(module.bytes().data(), module.bytes().size(), name);
    }
    Vm &load_file(const std::string &path) {
        return check(bib_vm_load_file(get(), path.c_str()));
    }

    /* Runs the entry function; returns its exit value. A trap throws
       bib::Error whose message names the pc, the instruction and the line. */
    int64_t run() {
        int64_t exit_value = 0;
        check(bib_vm_run(get(), &exit_value));
        return exit_value;
    }

    /* Sets input `name` (the data is copied). */
    template <class T> Vm &set_input(const std::string &name, const TensorView<T> &tensor) {
        return check(bib_vm_set_input(get(), name.c_str(), TensorView<T>::dtype, tensor.rank(),
                                      tensor.dims(), tensor.data()));
    }

    /* Output `name` of the last run as T (float or int32_t); throws when the
       output holds the other type. */
    template <class T> TensorView<const T> output(const std::string &name) {
        bib_dtype_t dtype{};
        uint32_t rank = 0, dims[BIB_MAX_RANK] = {0};
        const void *data = nullptr;
        check(bib_vm_get_output(get(), name.c_str(), &dtype, &rank, dims, &data));
        if (dtype != TensorView<const T>::dtype)
            throw Error(BIB_E_USAGE, "output '" + name + "' holds " +
                                         (dtype == BIB_DTYPE_F32 ? "f32" : "i32") +
                                         ", not the type asked for");
        return TensorView<const T>(static_cast<const T *>(data), rank, dims);
    }

    /* Registers fn under name; the VM keeps the callable alive. */
    Vm &register_host(const std::string &name, HostFunction fn) {
        hosts_.push_back(std::move(fn));
        return check(bib_vm_register_host(get(), name.c_str(), &Vm::trampoline, &hosts_.back()));
    }
    /* print_i64 and the other standard output functions, writing to out. */
    Vm &register_output(std::function<void(std::string_view)> out) {
        writers_.push_back(std::move(out));
        return check(bib_vm_register_output(get(), &Vm::writer, &writers_.back()));
    }
    Vm &register_stdio(FILE *out = stdout) {
        return check(bib_vm_register_stdio(get(), out));
    }
    Vm &trace(bib_trace_format_t format, std::function<void(std::string_view)> out) {
        writers_.push_back(std::move(out));
        return check(bib_vm_set_trace_writer(get(), format, &Vm::writer, &writers_.back()));
    }

    bib_run_stats_t stats() const {
        bib_run_stats_t s{};
        bib_vm_stats(get(), &s);
        return s;
    }
    std::vector<bib_tensor_info_t> tensors() const {
        std::vector<bib_tensor_info_t> out(bib_vm_tensor_count(get()));
        for (uint32_t i = 0; i < out.size(); i++)
            bib_vm_tensor_info(get(), i, &out[i]);
        return out;
    }
    std::string error() const {
        return bib_vm_error(get());
    }

  private:
    struct Destroy {
        void operator()(bib_vm_t *vm) const noexcept {
            bib_vm_destroy(vm);
        }
    };

    Vm &check(bib_status_t st) {
        if (st != BIB_OK)
            throw Error(st, bib_vm_error(get()));
        return *this;
    }

    static bib_status_t trampoline(bib_vm_t *vm, void *user, const bib_value_t *args,
                                   uint32_t nargs, bib_value_t *result) {
        try {
            *result = (*static_cast<HostFunction *>(user))(args, nargs);
            return BIB_OK;
        } catch (const std::exception &e) {
            bib_vm_trap(vm, "%s", e.what());
        } catch (...) {
            bib_vm_trap(vm, "host function threw a non-standard exception");
        }
        return BIB_E_TRAP;
    }

    static void writer(void *user, const char *bytes, size_t length) {
        try {
            (*static_cast<std::function<void(std::string_view)> *>(user))(
                std::string_view(bytes, length));
        } catch (...) {
            /* Output is best effort: an exception cannot cross the C library. */
        }
    }

    /* Declared before vm_ so they outlive it: the VM points at them. */
    std::list<HostFunction> hosts_;
    std::list<std::function<void(std::string_view)>> writers_;
    std::unique_ptr<bib_vm_t, Destroy> vm_;
};

/* Emits a module without assembly text (bib_builder_*). Ids and labels are
   the C API's. */
class Builder {
  public:
    Builder() : b_(bib_builder_create()) {
        if (!b_)
            throw Error(BIB_E_NOMEM, "bib_builder_create: out of memory");
    }
    bib_builder_t *get() const noexcept {
        return b_.get();
    }

    Builder &source(const std::string &filename) {
        bib_builder_source(get(), filename.c_str());
        return *this;
    }
    Builder &line(uint32_t line) {
        bib_builder_line(get(), line);
        return *this;
    }
    uint32_t declare(const std::string &name) {
        return bib_builder_declare(get(), name.c_str());
    }
    Builder &begin(uint32_t func, uint32_t nargs, uint32_t nregs) {
        return check(bib_builder_begin(get(), func, nargs, nregs));
    }
    Builder &end() {
        return check(bib_builder_end(get()));
    }
    uint32_t label() {
        return bib_builder_label(get());
    }
    Builder &bind(uint32_t label) {
        return check(bib_builder_bind(get(), label));
    }
    uint32_t import(const std::string &name) {
        return bib_builder_import(get(), name.c_str());
    }
    uint32_t const_i64(int64_t value) {
        return bib_builder_const_i64(get(), value);
    }
    uint32_t const_f64(double value) {
        return bib_builder_const_f64(get(), value);
    }
    /* Emits mnemonic (e.g. "ADD") with up to four operand words. */
    Builder &emit(const std::string &mnemonic, uint32_t a = 0, uint32_t b = 0, uint32_t c = 0,
                  uint32_t d = 0) {
        int64_t code = bib_opcode(mnemonic.c_str());
        if (code < 0)
            throw Error(BIB_E_USAGE, "unknown mnemonic '" + mnemonic + "'");
        return check(bib_builder_emit(get(), static_cast<uint32_t>(code), a, b, c, d));
    }
    Builder &memory(uint64_t size) {
        return check(bib_builder_memory(get(), size));
    }
    Builder &data(uint64_t offset, const void *bytes, size_t size) {
        return check(bib_builder_data(get(), offset, bytes, size));
    }
    Builder &tensor_input(const std::string &name, uint32_t reg, bib_dtype_t dtype,
                          std::vector<int64_t> dims) {
        return check(bib_builder_tensor_input(get(), name.c_str(), reg, dtype,
                                              static_cast<uint32_t>(dims.size()), dims.data()));
    }
    Builder &tensor_output(const std::string &name, uint32_t reg, bib_dtype_t dtype,
                           std::vector<int64_t> dims) {
        return check(bib_builder_tensor_output(get(), name.c_str(), reg, dtype,
                                               static_cast<uint32_t>(dims.size()), dims.data()));
    }
    /* Checks the module and returns its bytes; the builder may be dropped. */
    Module finish() {
        uint8_t *out = nullptr;
        size_t size = 0;
        check(bib_builder_finish(get(), &out, &size));
        detail::owned<uint8_t> bytes(out);
        return Module(std::vector<uint8_t>(out, out + size));
    }

  private:
    struct Destroy {
        void operator()(bib_builder_t *b) const noexcept {
            bib_builder_destroy(b);
        }
    };
    Builder &check(bib_status_t st) {
        if (st != BIB_OK)
            throw Error(st, bib_builder_error(get()));
        return *this;
    }
    std::unique_ptr<bib_builder_t, Destroy> b_;
};

} // namespace bib

#endif
