/* vm/interp.c: the dispatch loop.
 *
 * Runs a decoded program (decode.c) whose module passed the verifier, so no
 * handler re-checks a register index, target, callee or argument range. What
 * only the run can know is checked here: memory bounds, division by zero,
 * call depth, fuel, host failures.
 *
 * One loop body, two instantiations: this file includes itself twice, with
 * BIB_INSTRUMENTED 0 (the loop every plain bib_vm_run uses; nothing below
 * costs it anything) and BIB_INSTRUMENTED 1, the loop of traced, profiled and
 * stepped runs: it writes trace lines, brackets every instruction for the
 * profiler (vm/profile.c), and starts from and saves back vm->cursor, stopping
 * when a step budget runs out or before a breakpoint. The handlers are written
 * once against the macros vmdispatch/vmcase/vmbreak (as in Lua's lvm.c and
 * ljumptab.h): computed goto when the compiler is GNU C, a switch otherwise
 * (or when built with -DBIB_NO_COMPUTED_GOTO). The jump table is generated
 * from isa/opcodes.def: every OP row must have a handler here (a missing one
 * is a compile error); TOP and KOP rows share one handler that calls
 * bib_tensor_exec (vm/tensor.c), so the tensor opcodes cost the loop one
 * jump-table entry each and no code; GOP, GKOP and VOP rows share one more,
 * device_exec: user device programs (VK_*, GPU_LAUNCH) go to vm/devprog.c,
 * the collectives (COP rows) to vm/collective.c, the other GPU_* opcodes
 * (the CUDA executor driven directly) to bib_tensor_exec.
 *
 * The plain loop runs superinstructions that decode.c marks (xop != op):
 * a compare and the JZ/JNZ that tests it, an ADD/SUB/ADDI and the JMP after
 * it, loop latches (a JMP, alone or after an ADD/SUB/ADDI, together with
 * the test it jumps to), and forwarding pairs (an f64 or integer operation
 * or a load, and the next instruction that reads its result, which it takes
 * from a machine register instead of a store to the register file and a
 * load that waits on that store), each in one dispatch; and it is directly
 * threaded: each decoded instruction holds the address of its handler. The
 * instrumented loop dispatches op through the table, one instruction at a
 * time, so traces, profiles, steps and breakpoints never see a group.
 *
 * Hot state stays in locals: ip, the register window R, the frame pointer,
 * the memory base and size, and the fuel counter, which doubles as the
 * instruction count (one decrement and one never-taken branch per
 * instruction; a superinstruction charges the rest of its group at once,
 * and when fuel runs short it goes on one instruction at a time, so that
 * fuel N still runs exactly N instructions). A tensor opcode's work beyond
 * its one unit is charged by bib_tensor_exec, out of the loop: the tensor and
 * device handlers hand the counters over in vm->fuel and take them back, and
 * the charge comes out of fuel_base too, so that fuel_base - fuel stays the
 * instruction count without any cost to scalar instructions.
 */
#ifndef BIB_INTERP_INSTANCE

#include <math.h>
#include <string.h>

#include "vm/vm.h"

#if defined(__GNUC__)
#define BIB_LIKELY(x) __builtin_expect(!!(x), 1)
#define BIB_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define BIB_COLD __attribute__((noinline, cold))
#else
#define BIB_LIKELY(x) (x)
#define BIB_UNLIKELY(x) (x)
#define BIB_COLD
#endif

/* A new frame's registers are zeroed by a loop of a few iterations; GCC
   would turn it into a call to memset, whose call sequence costs more than
   the loop in the hottest path of CALL. */
#if defined(__GNUC__) && !defined(__clang__)
#define BIB_INTERP_ATTRS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define BIB_INTERP_ATTRS
#endif

#if defined(__GNUC__) && !defined(BIB_NO_COMPUTED_GOTO)
#define BIB_USE_COMPUTED_GOTO 1
#else
#define BIB_USE_COMPUTED_GOTO 0
#endif

/* Bases at or below this cannot reach past memory by accident of wrapping:
   base + a signed 32-bit offset then never leaves [-2^31, 2^63), so the
   64-bit sum is exact or, when negative, far above any memory size. */
#define BIB_ADDR_LIMIT ((uint64_t)1 << 62)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define BIB_LE16(x) __builtin_bswap16(x)
#define BIB_LE32(x) __builtin_bswap32(x)
#define BIB_LE64(x) __builtin_bswap64(x)
#else
#define BIB_LE16(x) (x)
#define BIB_LE32(x) (x)
#define BIB_LE64(x) (x)
#endif

static inline uint16_t mem_get16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return BIB_LE16(v);
}
static inline uint32_t mem_get32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return BIB_LE32(v);
}
static inline uint64_t mem_get64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return BIB_LE64(v);
}
static inline void mem_put16(uint8_t *p, uint16_t v) {
    v = BIB_LE16(v);
    memcpy(p, &v, sizeof v);
}
static inline void mem_put32(uint8_t *p, uint32_t v) {
    v = BIB_LE32(v);
    memcpy(p, &v, sizeof v);
}
static inline void mem_put64(uint8_t *p, uint64_t v) {
    v = BIB_LE64(v);
    memcpy(p, &v, sizeof v);
}

/* binary32 <-> f64 bits: widening is exact; narrowing rounds to nearest even. */
static inline uint64_t f32_widen(uint32_t w) {
    float f;
    memcpy(&f, &w, sizeof f);
    return bib_f64_bits((double)f);
}

static inline uint32_t f32_narrow(uint64_t bits) {
    float f = (float)bib_f64_from_bits(bits);
    uint32_t w;
    memcpy(&w, &f, sizeof w);
    return w;
}

static inline uint64_t sar64(uint64_t x, uint64_t s) {
    s &= 63;
    /* Right shift of a negative value is implementation-defined in C: build
       the sign fill by hand. */
    uint64_t fill = (uint64_t)0 - (x >> 63);
    return s == 0 ? x : (x >> s) | (fill << (64 - s));
}

static inline uint64_t div_s(uint64_t x, uint64_t y) {
    if (x == (uint64_t)INT64_MIN && y == UINT64_MAX)
        return x;
    return (uint64_t)((int64_t)x / (int64_t)y);
}

static inline uint64_t rem_s(uint64_t x, uint64_t y) {
    if (y == UINT64_MAX)
        return 0;
    return (uint64_t)((int64_t)x % (int64_t)y);
}

/* NaN operands go through an addition so the result NaN is the one the
   hardware's arithmetic gives, like FADD's. Equal values may differ only in
   the sign of zero: OR of the bits picks -0 for min, AND picks +0 for max. */
static inline uint64_t fmin_bits(uint64_t xb, uint64_t yb) {
    double x = bib_f64_from_bits(xb), y = bib_f64_from_bits(yb);
    if (x != x || y != y)
        return bib_f64_bits(x + y);
    if (x < y)
        return xb;
    if (y < x)
        return yb;
    return xb | yb;
}

static inline uint64_t fmax_bits(uint64_t xb, uint64_t yb) {
    double x = bib_f64_from_bits(xb), y = bib_f64_from_bits(yb);
    if (x != x || y != y)
        return bib_f64_bits(x + y);
    if (x > y)
        return xb;
    if (y > x)
        return yb;
    return xb & yb;
}

static inline uint64_t ftoi_bits(uint64_t xb) {
    double x = bib_f64_from_bits(xb);
    if (x != x)
        return 0;
    if (x >= 9223372036854775808.0)
        return (uint64_t)INT64_MAX;
    if (x < -9223372036854775808.0)
        return (uint64_t)INT64_MIN;
    return (uint64_t)(int64_t)x;
}

static inline uint32_t insn_pc(const bib_vm_t *vm, const bib_dinsn_t *ip) {
    return (uint32_t)(ip - vm->program.code);
}

/* ---- slow paths, out of the loop ---------------------------------------- */

BIB_COLD static bib_status_t trap_oob(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R,
                                      uint64_t msize, unsigned width) {
    uint64_t base = R[ip->b];
    int64_t off = ip->x.imm;
    uint64_t ea = base + (uint64_t)off;
    char addr[96];
    if (off >= 0 && ea < base)
        snprintf(addr, sizeof addr, "r%u (%llu) %+lld, beyond 64 bits", ip->b,
                 (unsigned long long)base, (long long)off);
    else if (off < 0 && ea > base) /* below zero: small, as base < -off <= 2^31 */
        snprintf(addr, sizeof addr, "%lld (r%u = %llu, offset %lld)", (long long)(int64_t)ea, ip->b,
                 (unsigned long long)base, (long long)off);
    else
        snprintf(addr, sizeof addr, "%llu (r%u = %llu, offset %lld)", (unsigned long long)ea, ip->b,
                 (unsigned long long)base, (long long)off);
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                          "out-of-bounds memory access: address %s, width %u, memory size %llu "
                          "bytes",
                          addr, width, (unsigned long long)msize);
}

BIB_COLD static bib_status_t trap_oob_indexed(bib_vm_t *vm, const bib_dinsn_t *ip,
                                              const uint64_t *R, uint64_t msize, unsigned width) {
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                          "out-of-bounds memory access: address r%u (%llu) + r%u (%llu) << %u, "
                          "width %u, memory size %llu bytes",
                          ip->b, (unsigned long long)R[ip->b], ip->c, (unsigned long long)R[ip->c],
                          ip->d, width, (unsigned long long)msize);
}

BIB_COLD static bib_status_t trap_callee(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t index) {
    const bib_program_t *p = &vm->program;
    if (index >= p->func_count)
        return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                              "CALLR through r%u = %llu, which names no function (the module has "
                              "%u)",
                              ip->b, (unsigned long long)index, p->func_count);
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                          "CALLR through r%u calls function %llu '%s', which takes %u argument%s, "
                          "with %u",
                          ip->b, (unsigned long long)index, vm->module->funcs[index].name,
                          p->funcs[index].nargs, p->funcs[index].nargs == 1 ? "" : "s", ip->d);
}

BIB_COLD static bib_status_t trap_return_fit(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t dest,
                                             size_t room) {
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                          "RETN returns %u values to the caller's r%u.., whose frame has room "
                          "for %zu",
                          ip->b, dest, room);
}

BIB_COLD static bib_status_t trap_div_zero(bib_vm_t *vm, const bib_dinsn_t *ip) {
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip), "division by zero");
}

static inline uint64_t fuel_limit(const bib_vm_t *vm) {
    return vm->options.fuel != 0 ? vm->options.fuel : UINT64_MAX;
}

/* Fuel ran out at ip, fuel_base - fuel instructions in (see vm->fuel). */
BIB_COLD static bib_status_t trap_fuel(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t fuel_base,
                                       uint64_t fuel) {
    const uint64_t limit = fuel_limit(vm);
    if (fuel_base == limit)
        return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip), "fuel exhausted (%llu instructions)",
                              (unsigned long long)limit);
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                          "fuel exhausted (%llu: %llu instructions, %llu for tensor work)",
                          (unsigned long long)limit, (unsigned long long)(fuel_base - fuel),
                          (unsigned long long)(limit - fuel_base));
}

/* What the loop's counters say when it stops or calls a host function. */
static inline void note_fuel(bib_vm_t *vm, uint64_t fuel_base, uint64_t fuel) {
    vm->stats.instructions = fuel_base - fuel;
    vm->stats.fuel = fuel_limit(vm) - fuel;
}

BIB_COLD static bib_status_t trap_user(bib_vm_t *vm, const bib_dinsn_t *ip) {
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip), "TRAP with code %lld",
                          (long long)ip->x.imm);
}

BIB_COLD static bib_status_t trap_reserved(bib_vm_t *vm, const bib_dinsn_t *ip) {
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                          "opcode %s is not implemented in this build", bib_isa_table[ip->op].name);
}

/* CUDA, Vulkan and collective family rows; the verifier lets through only
   those this build implements. */
BIB_COLD static bib_status_t device_exec(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t *R) {
    if (bib_isa_table[ip->op].flags & BIB_F_RESERVED)
        return trap_reserved(vm, ip);
    if (bib_isa_table[ip->op].opclass == BIB_CLASS_VULKAN || ip->op == BIB_OP_GPU_LAUNCH)
        return bib_devprog_exec(vm, ip, R);
    if (bib_isa_table[ip->op].opclass == BIB_CLASS_COLLECTIVE)
        return bib_collective_exec(vm, ip, R);
    return bib_tensor_exec(vm, ip, R);
}

BIB_COLD static bib_status_t trap_host(bib_vm_t *vm, const bib_dinsn_t *ip, bib_status_t hs) {
    const bib_host_t *h = ip->x.host;
    if (vm->host_trap_set)
        return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip), "host function '%s' failed: %s",
                              h->name, vm->host_trap);
    return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip),
                          "host function '%s' failed with status '%s'", h->name,
                          bib_status_name(hs));
}

/* Makes room for a frame after the depth-th one: grows the frame array up to
   the call-depth limit, and traps at the limit. The caller re-derives its
   frame pointer from vm->frames. */
BIB_COLD static bib_status_t grow_frames(bib_vm_t *vm, const bib_dinsn_t *ip, size_t depth) {
    uint32_t depth_max = vm->options.max_call_depth;
    if (vm->frames_cap >= depth_max)
        return bib_vm_trap_at(vm, BIB_E_TRAP, insn_pc(vm, ip), "call stack overflow (depth %u)",
                              depth_max);
    uint32_t cap = vm->frames_cap * 2 > depth_max ? depth_max : vm->frames_cap * 2;
    void *p = vm->frames;
    bib_status_t st = bib_arena_grow(&vm->run_arena, &p, depth * sizeof(bib_frame_t),
                                     (size_t)cap * sizeof(bib_frame_t), _Alignof(bib_frame_t));
    if (st != BIB_OK)
        return bib_vm_trap_at(vm, st, insn_pc(vm, ip), "call frames of depth %u: %s", cap,
                              vm->blocks.error);
    vm->frames = p;
    vm->frames_cap = cap;
    return BIB_OK;
}

/* Makes the register stack hold need registers, moving it if it must, and
   re-points every saved window (frames 1..depth-1) into the new one. used is
   where the caller's window ends. The caller re-derives R from vm->regs. */
BIB_COLD static bib_status_t grow_regs(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t need,
                                       size_t used, size_t depth) {
    uint64_t cap = vm->regs_cap;
    while (cap < need)
        cap *= 2;
    uint64_t *old = vm->regs;
    void *p = old;
    bib_status_t st = BIB_E_NOMEM;
    if (cap <= SIZE_MAX / sizeof(uint64_t))
        st = bib_arena_grow(&vm->run_arena, &p, used * sizeof(uint64_t),
                            (size_t)cap * sizeof(uint64_t), sizeof(uint64_t));
    else
        snprintf(vm->blocks.error, sizeof vm->blocks.error, "register stack too large");
    if (st != BIB_OK)
        return bib_vm_trap_at(vm, st, insn_pc(vm, ip), "register stack of %llu registers: %s",
                              (unsigned long long)cap, vm->blocks.error);
    uint64_t *fresh = p;
    for (size_t i = 1; i < depth; i++)
        vm->frames[i].regs = fresh + (vm->frames[i].regs - old);
    vm->regs = fresh;
    vm->regs_cap = cap;
    return BIB_OK;
}

/* ---- the two instantiations ---------------------------------------------- */

#define BIB_INTERP_INSTANCE
#define BIB_INSTRUMENTED 0
#define BIB_INTERP_NAME interp_plain
#include "vm/interp.c"
#undef BIB_INSTRUMENTED
#undef BIB_INTERP_NAME
#define BIB_INSTRUMENTED 1
#define BIB_INTERP_NAME interp_instrumented
#include "vm/interp.c"
#undef BIB_INSTRUMENTED
#undef BIB_INTERP_NAME
#undef BIB_INTERP_INSTANCE

void bib_interp_begin(bib_vm_t *vm) {
    bib_cursor_t *cur = &vm->cursor;
    bib_frame_t *fp = vm->frames;
    fp->ret = NULL;
    fp->regs = NULL;
    fp->dest = 0;
    cur->stop = BIB_STOP_PAUSED;
    cur->ip = vm->program.entry->entry;
    cur->R = vm->regs;
    cur->fp = fp;
    cur->fuel_start = fuel_limit(vm);
    cur->fuel = cur->fuel_start;
    cur->exit_value = 0;
}

bib_status_t bib_interp_resume(bib_vm_t *vm, uint64_t budget) {
    return interp_instrumented(vm, budget);
}

bib_status_t bib_interp_run(bib_vm_t *vm, int64_t *exit_value) {
    if (vm->options.trace_format == BIB_TRACE_OFF && vm->profile == NULL)
        return interp_plain(vm, exit_value);
    /* A whole run through the instrumented loop: no budget, no breakpoints. */
    uint8_t *breaks = vm->breaks;
    vm->breaks = NULL;
    bib_interp_begin(vm);
    bib_status_t st = interp_instrumented(vm, UINT64_MAX);
    vm->breaks = breaks;
    if (st == BIB_OK && exit_value != NULL)
        *exit_value = vm->cursor.exit_value;
    vm->cursor.stop = BIB_STOP_NONE;
    return st;
}

#else /* BIB_INTERP_INSTANCE: the loop, instantiated per BIB_INSTRUMENTED */

#if BIB_INSTRUMENTED
BIB_INTERP_ATTRS static bib_status_t BIB_INTERP_NAME(bib_vm_t *vm, uint64_t budget) {
    bib_cursor_t *const cur = &vm->cursor;
    const bib_dinsn_t *ip = cur->ip;
    uint64_t *R = cur->R;
    bib_frame_t *fp = cur->fp;
    uint64_t fuel_base = cur->fuel_start;
    uint64_t fuel = cur->fuel;
    int64_t *const exit_value = &cur->exit_value;
    const bool tracing = vm->options.trace_format != BIB_TRACE_OFF;
    const bool profiling = vm->profile != NULL;
    const uint8_t *const brk = vm->breaks;
    const bib_dinsn_t *const code = vm->program.code;
    const bib_dinsn_t *skip = ip;  /* the first instruction runs despite a breakpoint */
    const bib_dinsn_t *tip = NULL; /* executed, trace line not yet written */
    if (profiling)
        bib_profile_resume(vm);
#else
BIB_INTERP_ATTRS static bib_status_t BIB_INTERP_NAME(bib_vm_t *vm, int64_t *exit_value) {
    const bib_dinsn_t *ip = vm->program.entry->entry;
    uint64_t *R = vm->regs;
    bib_frame_t *fp = vm->frames;
    /* The fuel the run started with, less what tensor work has taken. */
    uint64_t fuel_base = fuel_limit(vm);
    uint64_t fuel = fuel_base;
    fp->ret = NULL;
    fp->regs = NULL;
    fp->dest = 0;
#endif
    bib_frame_t *fp_limit = vm->frames + vm->frames_cap - 1;
    uint64_t *regs_end = vm->regs + vm->regs_cap;
    uint8_t *const mem = vm->memory;
    const uint64_t msize = vm->memory_size;
    bib_status_t st = BIB_OK;

#if BIB_INSTRUMENTED
/* The trace line of an instruction is written once it has run, when the next
   one is fetched; CALL, RET and HALT write their own (the frame changes). The
   profiler's bracket closes at the same point. A pause comes after both, so
   a paused run has written and timed exactly what it executed. */
#define TRACE_NOW(kind, value)                                                                     \
    do {                                                                                           \
        if (tracing) {                                                                             \
            bib_trace_step(vm, insn_pc(vm, ip), R, (kind), (value));                               \
            tip = NULL;                                                                            \
        }                                                                                          \
    } while (0)
#define FETCH()                                                                                    \
    do {                                                                                           \
        if (tip != NULL) {                                                                         \
            bib_trace_step(vm, insn_pc(vm, tip), R, BIB_TRACE_WRITE_DEST, 0);                      \
            tip = NULL;                                                                            \
        }                                                                                          \
        if (profiling && BIB_UNLIKELY((st = bib_profile_close(vm, &ip)) != BIB_OK))                \
            goto fail;                                                                             \
        if (BIB_UNLIKELY(budget == 0))                                                             \
            goto paused;                                                                           \
        if (brk != NULL && brk[ip - code] != 0 && ip != skip)                                      \
            goto at_breakpoint;                                                                    \
        skip = NULL;                                                                               \
        if (BIB_UNLIKELY(fuel == 0))                                                               \
            goto out_of_fuel;                                                                      \
        fuel--;                                                                                    \
        budget--;                                                                                  \
        if (tracing)                                                                               \
            tip = ip;                                                                              \
        if (profiling)                                                                             \
            bib_profile_open(vm, ip);                                                              \
    } while (0)
#else
#define TRACE_NOW(kind, value) ((void)0)
#define FETCH()                                                                                    \
    do {                                                                                           \
        if (BIB_UNLIKELY(fuel == 0))                                                               \
            goto out_of_fuel;                                                                      \
        fuel--;                                                                                    \
    } while (0)
#endif

/* The plain loop dispatches the decoded xop (an opcode or a superinstruction),
   the instrumented one the opcode, so that it traces, profiles, counts and
   stops at every instruction of a fused pair on its own. */
#if BIB_INSTRUMENTED
#define DISPATCH_INDEX(ip) ((ip)->op)
#else
#define DISPATCH_INDEX(ip) ((ip)->xop)
#endif

#if BIB_USE_COMPUTED_GOTO
    static const void *const jump_table[] = {
#define OP(name, ...) &&L_##name,
#define TOP(name, ...) &&L__tensor,
#define KOP TOP
#define GOP(name, ...) &&L__device,
#define GKOP GOP
#define VOP(name, ...) &&L__device,
#define COP(name, ...) &&L__device,
#include "isa/opcodes.def"
#if !BIB_INSTRUMENTED
#define BIB_FUSED_LABEL(name, ...) &&LX_##name,
#define BIB_LATCH_LABEL(lead, test) &&LX_L_##lead##_##test,
#define BIB_FORWARD_LABEL(first, second, side) &&LX_F_##first##_##second##_##side,
        BIB_FUSED_ROWS(BIB_FUSED_LABEL) BIB_LATCH_ROWS(BIB_LATCH_LABEL)
            BIB_FORWARD_ROWS(BIB_FORWARD_LABEL)
#undef BIB_LATCH_LABEL
#undef BIB_FORWARD_LABEL
#undef BIB_FUSED_LABEL
#endif
    };
/* Direct threading: the plain loop jumps to the handler address kept in
   each decoded instruction, one load fewer per dispatch than the table. */
#if BIB_INSTRUMENTED
#define DISPATCH_TARGET(ip) jump_table[(ip)->op]
#else
#define DISPATCH_TARGET(ip) ((ip)->handler)
#endif
#define vmdispatch(o) goto *jump_table[o];
#define vmcase(name) L_##name:
#define vmfused(name) LX_##name:
#define vmtensor                                                                                   \
    L__tensor:
#define vmdevice                                                                                   \
    L__device:
#define vmbreak                                                                                    \
    do {                                                                                           \
        FETCH();                                                                                   \
        goto *DISPATCH_TARGET(ip);                                                                 \
    } while (0)
#else
#define vmdispatch(o) switch ((int)(o))
#define vmcase(name) case BIB_OP_##name:
#define vmfused(name) case BIB_XOP_##name:
#define vmtensor
#define vmdevice
#define vmbreak continue
#endif

/* Runs call, a tensor or device opcode, with the fuel counters handed over
   to vm->fuel for bib_tensor_exec to charge its work from (see vm.h). */
#define WITH_FUEL(call)                                                                            \
    do {                                                                                           \
        vm->fuel.left = fuel;                                                                      \
        vm->fuel.base = fuel_base;                                                                 \
        call;                                                                                      \
        fuel = vm->fuel.left;                                                                      \
        fuel_base = vm->fuel.base;                                                                 \
    } while (0)

/* Operand access. */
#define RA R[ip->a]
#define RB R[ip->b]
#define RC R[ip->c]

#define INT_BINOP(name, expr)                                                                      \
    vmcase(name) {                                                                                 \
        const uint64_t x = RB, y = RC;                                                             \
        RA = (expr);                                                                               \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
#define INT_UNOP(name, expr)                                                                       \
    vmcase(name) {                                                                                 \
        const uint64_t x = RB;                                                                     \
        RA = (expr);                                                                               \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
#define INT_DIVOP(name, expr)                                                                      \
    vmcase(name) {                                                                                 \
        const uint64_t x = RB, y = RC;                                                             \
        if (BIB_UNLIKELY(y == 0)) {                                                                \
            st = trap_div_zero(vm, ip);                                                            \
            goto fail;                                                                             \
        }                                                                                          \
        RA = (expr);                                                                               \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
#define INT_IMMOP(name, expr)                                                                      \
    vmcase(name) {                                                                                 \
        const uint64_t x = RB, y = (uint64_t)ip->x.imm;                                            \
        RA = (expr);                                                                               \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
/* f64 with the constant K[c], inlined at decode. */
#define F_CONSTOP(name, expr)                                                                      \
    vmcase(name) {                                                                                 \
        const double x = bib_f64_from_bits(RB), k = bib_f64_from_bits(ip->x.bits);                 \
        RA = bib_f64_bits(expr);                                                                   \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
#define F_BINOP(name, expr)                                                                        \
    vmcase(name) {                                                                                 \
        const double x = bib_f64_from_bits(RB), y = bib_f64_from_bits(RC);                         \
        RA = bib_f64_bits(expr);                                                                   \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
#define F_CMP(name, expr)                                                                          \
    vmcase(name) {                                                                                 \
        const double x = bib_f64_from_bits(RB), y = bib_f64_from_bits(RC);                         \
        RA = (expr) ? 1u : 0u;                                                                     \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
/* Two dispatch sites per branch: taken and not taken predict separately.
   operands declares x (and y) for cond. */
#define BRANCH_IF(name, operands, cond)                                                            \
    vmcase(name) {                                                                                 \
        operands;                                                                                  \
        if (cond) {                                                                                \
            ip = ip->x.target;                                                                     \
            vmbreak;                                                                               \
        }                                                                                          \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
#define X_A const uint64_t x = RA
#define X_AB const uint64_t x = RA, y = RB
/* Against the sign-extended immediate in the raw word b (x holds the target). */
#define X_AIMM const int64_t x = (int64_t)RA, y = (int64_t)(int32_t)ip->b
/* A counted loop's back edge: r[a] steps by the raw word d (sign-extended)
   or by r[d], then meets r[b]. */
#define X_LOOP(step)                                                                               \
    const uint64_t i_ = RA + (step);                                                               \
    RA = i_;                                                                                       \
    const int64_t x = (int64_t)i_, y = (int64_t)RB
#define BRANCH1(name, cond) BRANCH_IF(name, X_A, cond)
#define BRANCH2(name, cond) BRANCH_IF(name, X_AB, cond)
#define BRANCHI(name, cond) BRANCH_IF(name, X_AIMM, cond)
#define LOOP_OP(name, cmp) BRANCH_IF(name, X_LOOP((uint64_t)(int64_t)(int32_t)ip->d), x cmp y)
#define LOOPR_OP(name, cmp) BRANCH_IF(name, X_LOOP(R[ip->d]), x cmp y)
/* Enters function f_ with a window that starts window_ registers into the
   caller's (the caller's register count): the arguments r[c..c+d) are
   copied to the callee's r[0..d), and the registers the callee may read
   before it writes them, up to nzero, are zeroed (decode.c); the
   instrumented loop zeroes the whole frame, so that stepping and the REPL
   never show a register left from an earlier call. */
#if BIB_INSTRUMENTED
#define FRAME_ZERO_END(f) ((f)->nregs)
#else
#define FRAME_ZERO_END(f) ((f)->nzero)
#endif
#define ENTER(f_, window_)                                                                         \
    do {                                                                                           \
        const bib_dfunc_t *const f = (f_);                                                         \
        const uint32_t window = (window_);                                                         \
        if (BIB_UNLIKELY(fp == fp_limit)) {                                                        \
            const size_t depth = (size_t)(fp - vm->frames) + 1;                                    \
            st = grow_frames(vm, ip, depth);                                                       \
            if (st != BIB_OK)                                                                      \
                goto fail;                                                                         \
            fp = vm->frames + depth - 1;                                                           \
            fp_limit = vm->frames + vm->frames_cap - 1;                                            \
        }                                                                                          \
        uint64_t *nR = R + window;                                                                 \
        if (BIB_UNLIKELY((size_t)(regs_end - nR) < f->nregs)) {                                    \
            const size_t at = (size_t)(R - vm->regs);                                              \
            st = grow_regs(vm, ip, (uint64_t)(at + window) + f->nregs, at + window,                \
                           (size_t)(fp - vm->frames) + 1);                                         \
            if (st != BIB_OK)                                                                      \
                goto fail;                                                                         \
            R = vm->regs + at;                                                                     \
            regs_end = vm->regs + vm->regs_cap;                                                    \
            nR = R + window;                                                                       \
        }                                                                                          \
        fp++;                                                                                      \
        fp->ret = ip + 1;                                                                          \
        fp->regs = R;                                                                              \
        fp->dest = ip->a;                                                                          \
        const uint64_t *args = R + ip->c;                                                          \
        uint32_t i = 0;                                                                            \
        for (const uint32_t n = ip->d; i < n; i++)                                                 \
            nR[i] = args[i];                                                                       \
        for (const uint32_t n = FRAME_ZERO_END(f); i < n; i++)                                     \
            nR[i] = 0;                                                                             \
        TRACE_NOW(BIB_TRACE_WRITE_NONE, 0);                                                        \
        R = nR;                                                                                    \
        ip = f->entry;                                                                             \
    } while (0)
/* A superinstruction has run its first instruction; the second needs fuel of
   its own. Without it, it goes on at the second alone, whose fetch then
   traps at the second's pc: fuel N runs exactly N instructions, fused or not.
   (No do-while around it: vmbreak is `continue` in the switch form.) */
#define FUSED_SECOND_FUEL()                                                                        \
    if (BIB_UNLIKELY(fuel == 0)) {                                                                 \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }                                                                                              \
    fuel--
#define X_INT const uint64_t x = RB, y = RC
#define X_F64 const double x = bib_f64_from_bits(RB), y = bib_f64_from_bits(RC)
/* Compare, then JZ/JNZ of its result (taken: the branch's condition on r). */
#define FUSED_CMP(name, operands, expr, taken)                                                     \
    vmfused(name) {                                                                                \
        operands;                                                                                  \
        const uint64_t r = (expr) ? 1u : 0u;                                                       \
        RA = r;                                                                                    \
        FUSED_SECOND_FUEL();                                                                       \
        if (taken) {                                                                               \
            ip = ip->x.target;                                                                     \
            vmbreak;                                                                               \
        }                                                                                          \
        ip += 2;                                                                                   \
        vmbreak;                                                                                   \
    }
/* An arithmetic instruction, then JMP. */
#define FUSED_JMP(name, expr)                                                                      \
    vmfused(name) {                                                                                \
        RA = (expr);                                                                               \
        FUSED_SECOND_FUEL();                                                                       \
        ip = ip->x.target;                                                                         \
        vmbreak;                                                                                   \
    }
/* Latch superinstructions (BIB_LATCH_ROWS): lead (JMP, or ADD/SUB/ADDI then
   JMP) and the test t it jumps to, len instructions long, followed by n. The
   group needs fuel for the instructions after its first; without it the run
   goes on at fallback (the group's second instruction) one at a time. */
#define LATCH_FUEL(cost, fallback)                                                                 \
    if (BIB_UNLIKELY(fuel < (cost))) {                                                             \
        ip = (fallback);                                                                           \
        vmbreak;                                                                                   \
    }                                                                                              \
    fuel -= (cost)
#define LATCH_LEAD_JMP(len)                                                                        \
    const bib_dinsn_t *const t = ip->x.target;                                                     \
    LATCH_FUEL(len, t);                                                                            \
    const bib_dinsn_t *const n = t + (len)
#define LATCH_LEAD_ALU(expr, len)                                                                  \
    RA = (expr);                                                                                   \
    LATCH_FUEL(1 + (len), ip + 1);                                                                 \
    const bib_dinsn_t *const n = ip->x.target;                                                     \
    const bib_dinsn_t *const t = n - (len)
#define LATCH_LEAD_ADD(len) LATCH_LEAD_ALU(RB + RC, len)
#define LATCH_LEAD_SUB(len) LATCH_LEAD_ALU(RB - RC, len)
#define LATCH_LEAD_ADDI(len) LATCH_LEAD_ALU(RB + ADDI_IMM, len)
/* A compare fused with JZ/JNZ (len 2): taken is the branch's condition on r. */
#define LATCH_CMPJ(cond, taken)                                                                    \
    const uint64_t x = R[t->b], y = R[t->c];                                                       \
    const uint64_t r = (cond) ? 1u : 0u;                                                           \
    R[t->a] = r;                                                                                   \
    if (taken) {                                                                                   \
        ip = t->x.target;                                                                          \
        vmbreak;                                                                                   \
    }                                                                                              \
    ip = n;                                                                                        \
    vmbreak
/* A two-register branch (len 1). */
#define LATCH_JCC(cond)                                                                            \
    const uint64_t x = R[t->a], y = R[t->b];                                                       \
    if (cond) {                                                                                    \
        ip = t->x.target;                                                                          \
        vmbreak;                                                                                   \
    }                                                                                              \
    ip = n;                                                                                        \
    vmbreak
#define LATCH_LEN_CMPJ 2
#define LATCH_LEN_JCC 1
#define LATCH_EQ_JZ(L) L(CMPJ)(x == y, r == 0)
#define LATCH_EQ_JNZ(L) L(CMPJ)(x == y, r != 0)
#define LATCH_NE_JZ(L) L(CMPJ)(x != y, r == 0)
#define LATCH_NE_JNZ(L) L(CMPJ)(x != y, r != 0)
#define LATCH_LT_JZ(L) L(CMPJ)((int64_t)x < (int64_t)y, r == 0)
#define LATCH_LT_JNZ(L) L(CMPJ)((int64_t)x < (int64_t)y, r != 0)
#define LATCH_LE_JZ(L) L(CMPJ)((int64_t)x <= (int64_t)y, r == 0)
#define LATCH_LE_JNZ(L) L(CMPJ)((int64_t)x <= (int64_t)y, r != 0)
#define LATCH_LTU_JZ(L) L(CMPJ)(x < y, r == 0)
#define LATCH_LTU_JNZ(L) L(CMPJ)(x < y, r != 0)
#define LATCH_LEU_JZ(L) L(CMPJ)(x <= y, r == 0)
#define LATCH_LEU_JNZ(L) L(CMPJ)(x <= y, r != 0)
#define LATCH_JEQ(L) L(JCC)(x == y)
#define LATCH_JNE(L) L(JCC)(x != y)
#define LATCH_JLT(L) L(JCC)((int64_t)x < (int64_t)y)
#define LATCH_JLE(L) L(JCC)((int64_t)x <= (int64_t)y)
#define LATCH_JLTU(L) L(JCC)(x < y)
#define LATCH_JLEU(L) L(JCC)(x <= y)
/* LATCH_<test>(L) gives L(kind)(args): the kind's length, then its test. */
#define LATCH_KIND_LEN(kind) LATCH_LEN_##kind LATCH_SWALLOW
#define LATCH_SWALLOW(...)
#define LATCH_KIND_TEST(kind) LATCH_##kind
#define LATCH_HANDLER(lead, test)                                                                  \
    vmfused(L_##lead##_##test) {                                                                   \
        LATCH_LEAD_##lead(LATCH_##test(LATCH_KIND_LEN));                                           \
        LATCH_##test(LATCH_KIND_TEST);                                                             \
    }
/* Forwarding superinstructions (BIB_FORWARD_ROWS): the first instruction
   computes t, the bits of its result, and writes its register; after the
   second's fuel, ip moves to the second, which reads t where it would read
   the first's register (its other operand from the register file, after the
   first's write). */
#define FWD_X(r) bib_f64_from_bits(r)
/* Each opcode's result from its operands' bits u and v, for either place in
   a pair (an immediate or K form reads its own from ip; a one-operand or
   immediate form never evaluates v). The single-instruction handlers above
   are written apart, and the tests hold these to them. */
#define FWD_OP_FADD(u, v) bib_f64_bits(FWD_X(u) + FWD_X(v))
#define FWD_OP_FSUB(u, v) bib_f64_bits(FWD_X(u) - FWD_X(v))
#define FWD_OP_FMUL(u, v) bib_f64_bits(FWD_X(u) * FWD_X(v))
#define FWD_OP_FDIV(u, v) bib_f64_bits(FWD_X(u) / FWD_X(v))
#define FWD_OP_FSQRT(u, v) bib_f64_bits(sqrt(FWD_X(u)))
#define FWD_OP_FADDK(u, v) bib_f64_bits(FWD_X(u) + FWD_X(ip->x.bits))
#define FWD_OP_FSUBK(u, v) bib_f64_bits(FWD_X(u) - FWD_X(ip->x.bits))
#define FWD_OP_FMULK(u, v) bib_f64_bits(FWD_X(u) * FWD_X(ip->x.bits))
#define FWD_OP_FDIVK(u, v) bib_f64_bits(FWD_X(u) / FWD_X(ip->x.bits))
#define FWD_OP_FRSUBK(u, v) bib_f64_bits(FWD_X(ip->x.bits) - FWD_X(u))
#define FWD_OP_FRDIVK(u, v) bib_f64_bits(FWD_X(ip->x.bits) / FWD_X(u))
#define FWD_OP_ADD(u, v) ((u) + (v))
#define FWD_OP_SUB(u, v) ((u) - (v))
#define FWD_OP_MUL(u, v) ((u) * (v))
#define FWD_OP_ADDI(u, v) ((u) + ADDI_IMM)
#define FWD_OP_MULI(u, v) ((u) * (uint64_t)ip->x.imm)
#define FWD_OP_DIVI(u, v) div_s((u), (uint64_t)ip->x.imm)
#define FWD_OP_ITOF(u, v) bib_f64_bits((double)(int64_t)(u))
/* The first: an operation of its registers b and c, or an 8-byte load. */
#define FWD_FIRST(op1) const uint64_t t = FWD_OP_##op1(RB, RC)
#define FWD_FIRST_FADD FWD_FIRST(FADD)
#define FWD_FIRST_FSUB FWD_FIRST(FSUB)
#define FWD_FIRST_FMUL FWD_FIRST(FMUL)
#define FWD_FIRST_FDIV FWD_FIRST(FDIV)
#define FWD_FIRST_FSQRT FWD_FIRST(FSQRT)
#define FWD_FIRST_ITOF FWD_FIRST(ITOF)
#define FWD_FIRST_ADD FWD_FIRST(ADD)
#define FWD_FIRST_SUB FWD_FIRST(SUB)
#define FWD_FIRST_ADDI FWD_FIRST(ADDI)
#define FWD_FIRST_MUL FWD_FIRST(MUL)
#define FWD_FIRST_MULI FWD_FIRST(MULI)
#define FWD_FIRST_DIVI FWD_FIRST(DIVI)
#define FWD_FIRST_LOAD                                                                             \
    MEM_ADDR(8);                                                                                   \
    const uint64_t t = mem_get64(mem + ea)
#define FWD_FIRST_LOADX                                                                            \
    MEMX_ADDR(8);                                                                                  \
    const uint64_t t = mem_get64(mem + ea)
#define FWD_SECOND_L(op2) RA = FWD_OP_##op2(t, RC)
#define FWD_SECOND_R(op2) RA = FWD_OP_##op2(RB, t)
#define FWD_SECOND_S_STORE                                                                         \
    MEM_ADDR(8);                                                                                   \
    mem_put64(mem + ea, t)
#define FWD_SECOND_S_STOREX                                                                        \
    MEMX_ADDR(8);                                                                                  \
    mem_put64(mem + ea, t)
#define FWD_SECOND_S(op2) FWD_SECOND_S_##op2
#define FORWARD_HANDLER(first, second, side)                                                       \
    vmfused(F_##first##_##second##_##side) {                                                       \
        FWD_FIRST_##first;                                                                         \
        RA = t;                                                                                    \
        FUSED_SECOND_FUEL();                                                                       \
        ip++;                                                                                      \
        { FWD_SECOND_##side(second); }                                                             \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }

/* ADDI's immediate, from its raw operand word (x may hold ADDI_JMP's target). */
#define ADDI_IMM ((uint64_t)(int64_t)(int32_t)ip->c)

/* ea = r[b] + sign-extended c, bounds-checked without any 64-bit overflow
   (see BIB_ADDR_LIMIT). */
#define MEM_ADDR(width)                                                                            \
    const uint64_t base_ = RB;                                                                     \
    const uint64_t ea = base_ + (uint64_t)ip->x.imm;                                               \
    if (BIB_UNLIKELY(base_ > BIB_ADDR_LIMIT || ea > msize || msize - ea < (width))) {              \
        st = trap_oob(vm, ip, R, msize, (width));                                                  \
        goto fail;                                                                                 \
    }
/* ea = r[b] + (r[c] << d), bounds-checked: with base and offset each at most
   the memory size (below 2^41), their sum cannot wrap. */
#define MEMX_ADDR(width)                                                                           \
    const uint64_t base_ = RB, index_ = RC;                                                        \
    const uint64_t ea = base_ + (index_ << ip->d);                                                 \
    if (BIB_UNLIKELY(base_ > msize || index_ > (msize >> ip->d) || ea > msize ||                   \
                     msize - ea < (width))) {                                                      \
        st = trap_oob_indexed(vm, ip, R, msize, (width));                                          \
        goto fail;                                                                                 \
    }
#define IMM_A ((uint64_t)(int64_t)(int32_t)ip->a)
/* A load or store with the address rule addr (MEM_ADDR or MEMX_ADDR). */
#define LOAD_WITH(addr, name, width, expr)                                                         \
    vmcase(name) {                                                                                 \
        addr(width);                                                                               \
        const uint8_t *p = mem + ea;                                                               \
        RA = (expr);                                                                               \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
#define STORE_WITH(addr, name, width, value, stmt)                                                 \
    vmcase(name) {                                                                                 \
        addr(width);                                                                               \
        uint8_t *p = mem + ea;                                                                     \
        const uint64_t v = (value);                                                                \
        stmt;                                                                                      \
        ip++;                                                                                      \
        vmbreak;                                                                                   \
    }
/* Every width, for one address rule: LOAD8U with MEM_ADDR and an empty x,
   LOADX8U with MEMX_ADDR and x = X. */
#define MEMORY_OPS(addr, x)                                                                        \
    LOAD_WITH(addr, LOAD##x, 8, mem_get64(p))                                                      \
    LOAD_WITH(addr, LOAD##x##8U, 1, (uint64_t)p[0])                                                \
    LOAD_WITH(addr, LOAD##x##8S, 1, (uint64_t)(int64_t)(int8_t)p[0])                               \
    LOAD_WITH(addr, LOAD##x##16U, 2, (uint64_t)mem_get16(p))                                       \
    LOAD_WITH(addr, LOAD##x##16S, 2, (uint64_t)(int64_t)(int16_t)mem_get16(p))                     \
    LOAD_WITH(addr, LOAD##x##32U, 4, (uint64_t)mem_get32(p))                                       \
    LOAD_WITH(addr, LOAD##x##32S, 4, (uint64_t)(int64_t)(int32_t)mem_get32(p))                     \
    LOAD_WITH(addr, LOAD##x##F32, 4, f32_widen(mem_get32(p)))                                      \
    STORE_WITH(addr, STORE##x, 8, RA, mem_put64(p, v))                                             \
    STORE_WITH(addr, STORE##x##8, 1, RA, p[0] = (uint8_t)v)                                        \
    STORE_WITH(addr, STORE##x##16, 2, RA, mem_put16(p, (uint16_t)v))                               \
    STORE_WITH(addr, STORE##x##32, 4, RA, mem_put32(p, (uint32_t)v))                               \
    STORE_WITH(addr, STORE##x##F32, 4, RA, mem_put32(p, f32_narrow(v)))

#if BIB_USE_COMPUTED_GOTO && !BIB_INSTRUMENTED
    for (; vm->program.threaded < vm->program.code_count; vm->program.threaded++) {
        bib_dinsn_t *d = &vm->program.code[vm->program.threaded];
        d->handler = jump_table[d->xop];
    }
#endif
    for (;;) {
        FETCH();
        vmdispatch(DISPATCH_INDEX(ip)) {
            /* ---- control ---- */
            vmcase(NOP) {
                ip++;
                vmbreak;
            }
            vmcase(JMP) {
                ip = ip->x.target;
                vmbreak;
            }
            BRANCH1(JZ, x == 0)
            BRANCH1(JNZ, x != 0)
            BRANCH2(JEQ, x == y)
            BRANCH2(JNE, x != y)
            BRANCH2(JLT, (int64_t)x < (int64_t)y)
            BRANCH2(JLE, (int64_t)x <= (int64_t)y)
            BRANCH2(JLTU, x < y)
            BRANCH2(JLEU, x <= y)
            vmcase(CALL) {
                ENTER(ip->x.func, ip->b);
                vmbreak;
            }
            vmcase(CALLR) {
                const uint64_t index = RB;
                if (BIB_UNLIKELY(index >= vm->program.func_count ||
                                 vm->program.funcs[index].nargs != ip->d)) {
                    st = trap_callee(vm, ip, index);
                    goto fail;
                }
                ENTER(&vm->program.funcs[index], (uint32_t)ip->x.imm);
                vmbreak;
            }
            vmcase(FNREF) {
                RA = (uint64_t)(ip->x.func - vm->program.funcs);
                ip++;
                vmbreak;
            }
            vmcase(JTAB) {
                const uint64_t i = RA;
                ip = i < ip->b ? ip[1 + i].x.target : ip->x.target;
                vmbreak;
            }
            LOOP_OP(LOOPLT, <)
            LOOP_OP(LOOPLE, <=)
            LOOP_OP(LOOPGE, >=)
            LOOPR_OP(LOOPLTR, <)
            LOOPR_OP(LOOPLER, <=)
            LOOPR_OP(LOOPGER, >=)
            BRANCHI(JEQI, x == y)
            BRANCHI(JNEI, x != y)
            BRANCHI(JLTI, x < y)
            BRANCHI(JLEI, x <= y)
            BRANCHI(JGTI, x > y)
            BRANCHI(JGEI, x >= y)
            vmcase(RET) {
                const uint64_t v = RA;
                TRACE_NOW(BIB_TRACE_WRITE_RET, v);
                if (BIB_UNLIKELY(fp->ret == NULL)) {
                    if (exit_value != NULL)
                        *exit_value = (int64_t)v;
                    goto done;
                }
                ip = fp->ret;
                R = fp->regs;
                R[fp->dest] = v;
                fp--;
                vmbreak;
            }
            vmcase(RETN) {
                const uint32_t n = ip->b;
                TRACE_NOW(BIB_TRACE_WRITE_RET, n > 0 ? RA : 0);
                if (BIB_UNLIKELY(fp->ret == NULL)) {
                    if (exit_value != NULL)
                        *exit_value = n > 0 ? (int64_t)RA : 0;
                    goto done;
                }
                /* The caller's frame ends where this one begins. */
                uint64_t *const dst = fp->regs + fp->dest;
                if (BIB_UNLIKELY((size_t)(R - dst) < n)) {
                    st = trap_return_fit(vm, ip, fp->dest, (size_t)(R - dst));
                    goto fail;
                }
                const uint64_t *const src = R + ip->a;
                for (uint32_t i = 0; i < n; i++)
                    dst[i] = src[i];
                ip = fp->ret;
                R = fp->regs;
                fp--;
                vmbreak;
            }
            vmcase(HOSTCALL) {
                const bib_host_t *h = ip->x.host;
                bib_value_t args[BIB_MAX_HOST_ARGS];
                const uint32_t n = ip->d;
                for (uint32_t i = 0; i < n; i++)
                    args[i].u = R[ip->c + i];
                bib_value_t result;
                result.u = 0;
                vm->host_trap_set = false;
                note_fuel(vm, fuel_base, fuel);
                const bib_status_t hs = h->fn(vm, h->user, args, n, &result);
                if (BIB_UNLIKELY(hs != BIB_OK)) {
                    st = trap_host(vm, ip, hs);
                    goto fail;
                }
                RA = result.u;
                ip++;
                vmbreak;
            }
            vmcase(TRAP) {
                st = trap_user(vm, ip);
                goto fail;
            }
            vmcase(HALT) {
                TRACE_NOW(BIB_TRACE_WRITE_NONE, 0);
                if (exit_value != NULL)
                    *exit_value = (int64_t)RA;
                goto done;
            }

            /* ---- registers and memory ---- */
            vmcase(MOV) {
                RA = RB;
                ip++;
                vmbreak;
            }
            vmcase(LDI) {
                RA = (uint64_t)ip->x.imm;
                ip++;
                vmbreak;
            }
            vmcase(LDI64) {
                RA = ip->x.bits;
                ip++;
                vmbreak;
            }
            vmcase(LDK) {
                RA = ip->x.bits;
                ip++;
                vmbreak;
            }
            MEMORY_OPS(MEM_ADDR, )
            MEMORY_OPS(MEMX_ADDR, X)
            /* The stores of an immediate: the raw word a, sign-extended. */
            STORE_WITH(MEM_ADDR, STOREI, 8, IMM_A, mem_put64(p, v))
            STORE_WITH(MEM_ADDR, STOREI8, 1, IMM_A, p[0] = (uint8_t)v)
            STORE_WITH(MEM_ADDR, STOREI16, 2, IMM_A, mem_put16(p, (uint16_t)v))
            STORE_WITH(MEM_ADDR, STOREI32, 4, IMM_A, mem_put32(p, (uint32_t)v))
            vmcase(MEMSIZE) {
                RA = msize;
                ip++;
                vmbreak;
            }

            /* ---- integer arithmetic: unsigned, so it wraps ---- */
            INT_BINOP(ADD, x + y)
            INT_BINOP(SUB, x - y)
            INT_BINOP(MUL, x * y)
            INT_DIVOP(DIV, div_s(x, y))
            INT_DIVOP(REM, rem_s(x, y))
            INT_DIVOP(DIVU, x / y)
            INT_DIVOP(REMU, x % y)
            INT_UNOP(NEG, (uint64_t)0 - x)
            INT_BINOP(AND, x & y)
            INT_BINOP(OR, x | y)
            INT_BINOP(XOR, x ^ y)
            INT_UNOP(NOT, ~x)
            INT_BINOP(SHL, x << (y & 63))
            INT_BINOP(SHR, x >> (y & 63))
            INT_BINOP(SAR, sar64(x, y))
            vmcase(ADDI) {
                RA = RB + ADDI_IMM;
                ip++;
                vmbreak;
            }
            INT_BINOP(EQ, x == y)
            INT_BINOP(NE, x != y)
            INT_BINOP(LT, (int64_t)x < (int64_t)y)
            INT_BINOP(LE, (int64_t)x <= (int64_t)y)
            INT_BINOP(LTU, x < y)
            INT_BINOP(LEU, x <= y)
            INT_BINOP(IMIN, (int64_t)x < (int64_t)y ? x : y)
            INT_BINOP(IMAX, (int64_t)x > (int64_t)y ? x : y)
            INT_BINOP(IMINU, x < y ? x : y)
            INT_BINOP(IMAXU, x > y ? x : y)
            vmcase(SELECT) {
                RA = RB != 0 ? RC : R[ip->d];
                ip++;
                vmbreak;
            }

            /* ---- immediate forms: c sign-extended at decode ---- */
            INT_IMMOP(MULI, x * y)
            INT_IMMOP(DIVI, div_s(x, y))
            INT_IMMOP(REMI, rem_s(x, y))
            INT_IMMOP(ANDI, x & y)
            INT_IMMOP(ORI, x | y)
            INT_IMMOP(XORI, x ^ y)
            INT_IMMOP(SHLI, x << (y & 63))
            INT_IMMOP(SHRI, x >> (y & 63))
            INT_IMMOP(SARI, sar64(x, y))
            INT_IMMOP(EQI, x == y)
            INT_IMMOP(NEI, x != y)
            INT_IMMOP(LTI, (int64_t)x < (int64_t)y)
            INT_IMMOP(LEI, (int64_t)x <= (int64_t)y)
            INT_IMMOP(GTI, (int64_t)x > (int64_t)y)
            INT_IMMOP(GEI, (int64_t)x >= (int64_t)y)

            /* ---- f64 arithmetic ---- */
            F_BINOP(FADD, x + y)
            F_BINOP(FSUB, x - y)
            F_BINOP(FMUL, x * y)
            F_BINOP(FDIV, x / y)
            INT_UNOP(FNEG, x ^ ((uint64_t)1 << 63))
            INT_UNOP(FABS, x & ~((uint64_t)1 << 63))
            INT_UNOP(FSQRT, bib_f64_bits(sqrt(bib_f64_from_bits(x))))
            INT_BINOP(FMIN, fmin_bits(x, y))
            INT_BINOP(FMAX, fmax_bits(x, y))
            F_CONSTOP(FADDK, x + k)
            F_CONSTOP(FSUBK, x - k)
            F_CONSTOP(FMULK, x * k)
            F_CONSTOP(FDIVK, x / k)
            F_CONSTOP(FRSUBK, k - x)
            F_CONSTOP(FRDIVK, k / x)
            F_CMP(FEQ, x == y)
            F_CMP(FNE, x != y)
            F_CMP(FLT, x < y)
            F_CMP(FLE, x <= y)
            INT_UNOP(ITOF, bib_f64_bits((double)(int64_t)x))
            INT_UNOP(FTOI, ftoi_bits(x))
            INT_UNOP(UTOF, bib_f64_bits((double)x))

#if !BIB_INSTRUMENTED
            /* ---- superinstructions (BIB_FUSED_ROWS): two instructions, one dispatch ---- */
            FUSED_CMP(EQ_JZ, X_INT, x == y, r == 0)
            FUSED_CMP(EQ_JNZ, X_INT, x == y, r != 0)
            FUSED_CMP(NE_JZ, X_INT, x != y, r == 0)
            FUSED_CMP(NE_JNZ, X_INT, x != y, r != 0)
            FUSED_CMP(LT_JZ, X_INT, (int64_t)x < (int64_t)y, r == 0)
            FUSED_CMP(LT_JNZ, X_INT, (int64_t)x < (int64_t)y, r != 0)
            FUSED_CMP(LE_JZ, X_INT, (int64_t)x <= (int64_t)y, r == 0)
            FUSED_CMP(LE_JNZ, X_INT, (int64_t)x <= (int64_t)y, r != 0)
            FUSED_CMP(LTU_JZ, X_INT, x < y, r == 0)
            FUSED_CMP(LTU_JNZ, X_INT, x < y, r != 0)
            FUSED_CMP(LEU_JZ, X_INT, x <= y, r == 0)
            FUSED_CMP(LEU_JNZ, X_INT, x <= y, r != 0)
            FUSED_CMP(FEQ_JZ, X_F64, x == y, r == 0)
            FUSED_CMP(FEQ_JNZ, X_F64, x == y, r != 0)
            FUSED_CMP(FNE_JZ, X_F64, x != y, r == 0)
            FUSED_CMP(FNE_JNZ, X_F64, x != y, r != 0)
            FUSED_CMP(FLT_JZ, X_F64, x < y, r == 0)
            FUSED_CMP(FLT_JNZ, X_F64, x < y, r != 0)
            FUSED_CMP(FLE_JZ, X_F64, x <= y, r == 0)
            FUSED_CMP(FLE_JNZ, X_F64, x <= y, r != 0)
            FUSED_JMP(ADD_JMP, RB + RC)
            FUSED_JMP(SUB_JMP, RB - RC)
            FUSED_JMP(ADDI_JMP, RB + ADDI_IMM)
            BIB_LATCH_ROWS(LATCH_HANDLER)
            BIB_FORWARD_ROWS(FORWARD_HANDLER)
#endif

            /* ---- tensors: one entry point, out of the loop (tensor.c) ---- */
#if !BIB_USE_COMPUTED_GOTO
#define TOP(name, ...) case BIB_OP_##name:
#include "isa/opcodes.def"
#endif
            vmtensor {
                WITH_FUEL(st = bib_tensor_exec(vm, ip, R));
                if (BIB_UNLIKELY(st != BIB_OK))
                    goto fail;
                ip++;
                vmbreak;
            }

            /* ---- CUDA and Vulkan families, out of the loop ---- */
            vmdevice
#if !BIB_USE_COMPUTED_GOTO
#define TOP(...)
#define KOP TOP
#define GOP(name, ...) case BIB_OP_##name:
#define GKOP GOP
#define VOP(name, ...) case BIB_OP_##name:
#define COP(name, ...) case BIB_OP_##name:
#include "isa/opcodes.def"
                default :
#endif
            {
                WITH_FUEL(st = device_exec(vm, ip, R));
                if (BIB_UNLIKELY(st != BIB_OK))
                    goto fail;
                ip++;
                vmbreak;
            }
        }
    }

out_of_fuel:
    st = trap_fuel(vm, ip, fuel_base, fuel);
    goto fail;
done:
    st = BIB_OK;
fail:
    note_fuel(vm, fuel_base, fuel);
#if BIB_INSTRUMENTED
    /* An instruction that trapped while it ran is traced (marked as the
       trap) and profiled, as it is counted in the stats; one that fuel
       stopped before it ran (at its fetch, or at its tensor work) is in
       none of them. */
    if (tracing && tip != NULL && st != BIB_OK && !vm->fuel.unrun)
        bib_trace_step(vm, insn_pc(vm, tip), R, BIB_TRACE_WRITE_TRAP, 0);
    if (profiling && vm->fuel.unrun)
        bib_profile_drop(vm);
    vm->fuel.unrun = false;
    if (profiling)
        bib_profile_close(vm, NULL);
    cur->stop = st == BIB_OK ? BIB_STOP_HALTED : BIB_STOP_TRAPPED;
    goto save;
paused:
    cur->stop = BIB_STOP_PAUSED;
    goto save_paused;
at_breakpoint:
    cur->stop = BIB_STOP_BREAKPOINT;
save_paused:
    note_fuel(vm, fuel_base, fuel);
save:
    cur->ip = ip;
    cur->R = R;
    cur->fp = fp;
    cur->fuel = fuel;
    cur->fuel_start = fuel_base;
#endif
    return st;

#undef TRACE_NOW
#undef FETCH
#undef vmdispatch
#undef vmcase
#undef vmfused
#undef DISPATCH_TARGET
#undef DISPATCH_INDEX
#undef FUSED_SECOND_FUEL
#undef X_INT
#undef X_F64
#undef FUSED_CMP
#undef FUSED_JMP
#undef ADDI_IMM
#undef LATCH_FUEL
#undef LATCH_LEAD_JMP
#undef LATCH_LEAD_ALU
#undef LATCH_LEAD_ADD
#undef LATCH_LEAD_SUB
#undef LATCH_LEAD_ADDI
#undef LATCH_CMPJ
#undef LATCH_JCC
#undef LATCH_LEN_CMPJ
#undef LATCH_LEN_JCC
#undef LATCH_EQ_JZ
#undef LATCH_EQ_JNZ
#undef LATCH_NE_JZ
#undef LATCH_NE_JNZ
#undef LATCH_LT_JZ
#undef LATCH_LT_JNZ
#undef LATCH_LE_JZ
#undef LATCH_LE_JNZ
#undef LATCH_LTU_JZ
#undef LATCH_LTU_JNZ
#undef LATCH_LEU_JZ
#undef LATCH_LEU_JNZ
#undef LATCH_JEQ
#undef LATCH_JNE
#undef LATCH_JLT
#undef LATCH_JLE
#undef LATCH_JLTU
#undef LATCH_JLEU
#undef LATCH_KIND_LEN
#undef LATCH_SWALLOW
#undef LATCH_KIND_TEST
#undef LATCH_HANDLER
#undef WITH_FUEL
#undef vmtensor
#undef vmdevice
#undef vmbreak
#undef RA
#undef RB
#undef RC
#undef INT_BINOP
#undef INT_UNOP
#undef INT_DIVOP
#undef F_BINOP
#undef F_CMP
#undef BRANCH1
#undef BRANCH2
#undef MEM_ADDR
#undef MEMX_ADDR
#undef MEMORY_OPS
#undef IMM_A
#undef LOAD_WITH
#undef STORE_WITH
#undef INT_IMMOP
#undef F_CONSTOP
#undef BRANCHI
#undef BRANCH_IF
#undef X_A
#undef X_AB
#undef X_AIMM
#undef X_LOOP
#undef LOOP_OP
#undef LOOPR_OP
#undef ENTER
#undef FRAME_ZERO_END
}

#endif /* BIB_INTERP_INSTANCE */
