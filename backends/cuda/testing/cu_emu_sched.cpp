// backends/cuda/testing/cu_emu_sched.cpp: the scheduler of the CUDA kernel
// emulator (tests only; part of $(BUILD)/tests/libcuda_emu.so).
//
// Runs a launch of a g++-built kernel of shaders/cuda (see cu_emu.h) on the
// host, bit for bit the IEEE operations the source names. The blocks of the
// grid run one after another; inside a block every CUDA thread is a fiber
// (ucontext) with its own stack, and the fibers run one at a time until each
// finishes or stops at a barrier:
//
//   __syncthreads      releases when every thread of the block waits at the
//                      same call; a thread that has exited, or threads
//                      waiting at different __syncthreads, abort the run
//                      (undefined behaviour on the device).
//   __shfl_down_sync   releases a warp (32 consecutive linear thread ids)
//                      when all 32 lanes have posted their values; a full
//                      mask only, in full warps, and a lane that exited or
//                      waits at __syncthreads while its warp shuffles aborts.
//   cp.async           (matmul.cu on sm_80 and newer) is checked as the
//                      hardware checks it (4, 8 or 16 bytes, both addresses
//                      aligned to the size, destination in shared memory,
//                      source outside it) and lands at one of the two ends
//                      of its legal window: in even blocks at the latest
//                      moment, when the issuing thread's cp.async.wait_group
//                      retires its group (a read of the buffer before the
//                      wait and the barrier sees stale data), in odd blocks
//                      at once (a copy that overwrites a buffer other
//                      threads still read shows). A thread that exits with
//                      copies in flight or uncommitted aborts.
//
// The order the fibers run in alternates too: ascending thread ids in even
// blocks, descending in odd ones, so that a missing barrier shows whichever
// way its producer and consumer are numbered. Shared memory, static (the
// "bib_cu_shared" section) and dynamic (plus a guard after it), is filled
// with a NaN pattern before every block, as a GPU leaves it holding garbage.
// Launch shapes are checked against the device's limits (grid y and z
// <= 65535, block <= 1024 threads and z <= 64, dynamic shared memory <= 48
// KiB, which is all a kernel gets without cuFuncSetAttribute, or what that
// allowed).
//
// What it cannot tell: the order of memory operations between blocks or
// across warps without a barrier on real hardware (blocks here never run
// concurrently), what SASS really computes (this is the source's arithmetic
// on the host's IEEE unit), and the real driver's behaviour. Any rule
// broken prints "bib cuda emulator: ..." and aborts, which fails the test.
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <vector>

#include "backends/cuda/cu_args.h"
#include "backends/cuda/testing/cu_emu.h"
#include "backends/cuda/testing/cu_emu_launch.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

// The static __shared__ variables of every kernel (cu_emu.h: cuda.mk moves
// the kernels' .bss there); the linker defines these bounds of the section.
extern "C" char __start_bib_cu_shared[], __stop_bib_cu_shared[];

namespace {

typedef void (*kernel_fn)(bib_cu_args_t);

constexpr size_t STACK_BYTES = 256 * 1024;
constexpr unsigned MAX_THREADS = 1024;
constexpr unsigned WARP = 32;
constexpr unsigned MAX_DYNAMIC_SHARED = 48 * 1024;
constexpr unsigned DYNAMIC_GUARD_WORDS = 16;
// A quiet NaN with a payload no kernel produces (they canonicalise NaNs):
// a read of shared memory no thread wrote turns up as wrong bits.
constexpr uint32_t POISON = 0x7fa5a5a5u;

enum class state { run, at_block_barrier, at_shuffle, done };

struct copy_op {
    void *dst;
    const void *src;
    int bytes;
};

struct fiber {
    ucontext_t ctx;
    char *stack = nullptr;
    state st = state::done;
    uint3 tid{};
    const char *barrier_file = nullptr; // the __syncthreads it waits at
    int barrier_line = 0;
    uint32_t shfl_value = 0, shfl_result = 0;
    int shfl_delta = 0;
    std::vector<copy_op> open;               // cp.async not yet committed
    std::deque<std::vector<copy_op>> groups; // committed, not yet retired
};

// The launch being run (one at a time: the mock's stream is synchronous).
struct launch_state {
    kernel_fn fn = nullptr;
    const char *name = "";
    bib_cu_args_t args{};
    unsigned threads = 0;
    bool copies_land_at_once = false; // odd blocks, see the top of the file
    std::vector<uint32_t> dynamic;    // dynamic shared words, then the guard
    unsigned dynamic_words = 0;
    unsigned cur = 0; // the running fiber
    ucontext_t sched;
};

launch_state L;
// A pool that grows to the largest block seen; a deque, because a saved
// ucontext_t points into itself and must never move.
std::deque<fiber> fibers;

[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...) {
    fprintf(stderr, "bib cuda emulator: kernel %s, block (%u,%u,%u)", L.name, blockIdx.x,
            blockIdx.y, blockIdx.z);
    if (L.threads && L.cur < L.threads) {
        const uint3 &t = fibers[L.cur].tid;
        fprintf(stderr, ", thread (%u,%u,%u)", t.x, t.y, t.z);
    }
    fputs(": ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

// Back to the scheduler in state s; returns when the scheduler resumes us.
void yield_as(state s) {
    fiber &f = fibers[L.cur];
    f.st = s;
    swapcontext(&f.ctx, &L.sched);
}

void land(std::vector<copy_op> &group) {
    for (const copy_op &c : group)
        memcpy(c.dst, c.src, static_cast<size_t>(c.bytes));
    group.clear();
}

// A fiber's life: one thread of the kernel per block, forever; the
// scheduler resumes it once per block (its context is made once).
void fiber_main() {
    for (;;) {
        L.fn(L.args);
        fiber &f = fibers[L.cur];
        if (!f.open.empty())
            fail("exits with %zu cp.async never committed", f.open.size());
        for (const std::vector<copy_op> &g : f.groups)
            if (!g.empty())
                fail("exits with cp.async in flight (no cp.async.wait_group retired them)");
        yield_as(state::done);
    }
}

void grow_pool(unsigned n) {
    long page = sysconf(_SC_PAGESIZE);
    while (fibers.size() < n) {
        fibers.emplace_back();
        fiber &f = fibers.back();
        // The lowest page of each stack is a guard: an overflow faults.
        void *m = mmap(nullptr, STACK_BYTES + static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || mprotect(m, static_cast<size_t>(page), PROT_NONE) != 0)
            fail("no memory for a fiber stack");
        f.stack = static_cast<char *>(m);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = STACK_BYTES + static_cast<size_t>(page);
        f.ctx.uc_link = nullptr; // fiber_main never returns
        makecontext(&f.ctx, fiber_main, 0);
    }
}

bool in_shared(const void *p, size_t bytes) {
    const char *c = static_cast<const char *>(p);
    const char *dyn = reinterpret_cast<const char *>(L.dynamic.data());
    return (c >= __start_bib_cu_shared && c + bytes <= __stop_bib_cu_shared) ||
           (c >= dyn && c + bytes <= dyn + size_t{L.dynamic_words} * 4);
}

// Releases the warps whose 32 lanes all wait at a shuffle; aborts on a warp
// some of whose lanes shuffle while others can never join them.
bool release_shuffles() {
    bool released = false;
    for (unsigned w = 0; w < L.threads; w += WARP) {
        unsigned end = w + WARP < L.threads ? w + WARP : L.threads, waiting = 0;
        for (unsigned i = w; i < end; i++)
            waiting += fibers[i].st == state::at_shuffle;
        if (waiting == 0)
            continue;
        if (end - w != WARP)
            fail("__shfl_down_sync in a partial warp of %u threads", end - w);
        if (waiting != WARP) {
            bool running = false;
            for (unsigned i = w; i < end; i++)
                running |= fibers[i].st == state::run;
            if (!running)
                fail("__shfl_down_sync in warp %u reached by %u of its 32 lanes (the others "
                     "exited or wait at __syncthreads)",
                     w / WARP, waiting);
            continue;
        }
        for (unsigned i = w; i < end; i++) {
            fiber &f = fibers[i];
            unsigned lane = i - w, src = lane + static_cast<unsigned>(f.shfl_delta);
            f.shfl_result = src < WARP ? fibers[w + src].shfl_value : f.shfl_value;
            f.st = state::run;
        }
        released = true;
    }
    return released;
}

// Releases the block barrier when every thread waits at the same one.
bool release_block_barrier() {
    unsigned waiting = 0, done = 0;
    for (unsigned i = 0; i < L.threads; i++) {
        waiting += fibers[i].st == state::at_block_barrier;
        done += fibers[i].st == state::done;
    }
    if (waiting == 0 || waiting + done != L.threads)
        return false;
    if (done)
        fail("__syncthreads that %u exited threads never reach", done);
    const fiber &f0 = fibers[0];
    for (unsigned i = 1; i < L.threads; i++) {
        const fiber &f = fibers[i];
        if (f.barrier_line != f0.barrier_line || strcmp(f.barrier_file, f0.barrier_file) != 0)
            fail("threads 0 and %u wait at different __syncthreads (%s:%d, %s:%d)", i,
                 f0.barrier_file, f0.barrier_line, f.barrier_file, f.barrier_line);
    }
    for (unsigned i = 0; i < L.threads; i++)
        fibers[i].st = state::run;
    return true;
}

void run_block(const uint3 &b, const unsigned block[3], bool odd) {
    blockIdx = b;
    L.copies_land_at_once = odd;
    for (uint32_t *p = reinterpret_cast<uint32_t *>(__start_bib_cu_shared);
         reinterpret_cast<char *>(p + 1) <= __stop_bib_cu_shared; p++)
        *p = POISON;
    std::fill(L.dynamic.begin(), L.dynamic.end(), POISON);
    for (unsigned i = 0; i < L.threads; i++) {
        fiber &f = fibers[i];
        f.tid = {i % block[0], (i / block[0]) % block[1], i / (block[0] * block[1])};
        f.st = state::run;
        f.open.clear();
        f.groups.clear();
    }
    for (;;) {
        for (unsigned k = 0; k < L.threads; k++) {
            unsigned i = odd ? L.threads - 1 - k : k;
            if (fibers[i].st != state::run)
                continue;
            L.cur = i;
            threadIdx = fibers[i].tid;
            swapcontext(&L.sched, &fibers[i].ctx);
        }
        L.cur = L.threads; // no thread is running
        unsigned done = 0;
        for (unsigned i = 0; i < L.threads; i++)
            done += fibers[i].st == state::done;
        if (done == L.threads)
            break;
        bool released = release_shuffles();
        if (!released)
            released = release_block_barrier();
        if (!released)
            fail("deadlock: %u threads exited, the rest wait at barriers none can release", done);
    }
    for (unsigned i = L.dynamic_words; i < L.dynamic.size(); i++)
        if (L.dynamic[i] != POISON)
            fail("wrote past its %u bytes of dynamic shared memory", L.dynamic_words * 4);
}

} // namespace

// ---- what the kernels call (cu_emu.h) ---------------------------------------

void bib_cu_emu_syncthreads(const char *file, int line) {
    fibers[L.cur].barrier_file = file;
    fibers[L.cur].barrier_line = line;
    yield_as(state::at_block_barrier);
}

uint32_t bib_cu_emu_shfl_down(uint32_t mask, uint32_t value, int delta) {
    if (mask != 0xffffffffu)
        fail("__shfl_down_sync with mask %#x: the emulator models full warps only", mask);
    if (delta < 0 || delta >= static_cast<int>(WARP))
        fail("__shfl_down_sync by %d lanes", delta);
    fiber &f = fibers[L.cur];
    f.shfl_value = value;
    f.shfl_delta = delta;
    yield_as(state::at_shuffle);
    return fibers[L.cur].shfl_result;
}

void *bib_cu_emu_dynamic_shared(void) {
    return L.dynamic.data();
}

void bib_cu_emu_cp_async(void *dst, const void *src, int bytes) {
    if (bytes != 4 && bytes != 8 && bytes != 16)
        fail("cp.async of %d bytes", bytes);
    uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    if (d % static_cast<unsigned>(bytes) || s % static_cast<unsigned>(bytes))
        fail("cp.async of %d bytes from %p to %p: not aligned to its size", bytes, src, dst);
    if (!in_shared(dst, static_cast<size_t>(bytes)))
        fail("cp.async to %p, which is not shared memory", dst);
    if (in_shared(src, static_cast<size_t>(bytes)))
        fail("cp.async from %p, which is shared memory, not global", src);
    if (L.copies_land_at_once)
        memcpy(dst, src, static_cast<size_t>(bytes));
    else
        fibers[L.cur].open.push_back({dst, src, bytes});
}

void bib_cu_emu_cp_commit(void) {
    fiber &f = fibers[L.cur];
    f.groups.push_back(std::move(f.open));
    f.open.clear();
}

void bib_cu_emu_cp_wait(int pending) {
    fiber &f = fibers[L.cur];
    while (f.groups.size() > static_cast<size_t>(pending)) {
        land(f.groups.front());
        f.groups.pop_front();
    }
}

// ---- what the mock driver calls (cu_emu_launch.h) ---------------------------

extern "C" void *bib_cu_emu_kernel(const char *name) {
    // The kernels are this library's own extern "C" functions.
    static void *self;
    if (!self) {
        Dl_info info;
        if (!dladdr(reinterpret_cast<void *>(&bib_cu_emu_kernel), &info) ||
            !(self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)))
            return nullptr;
    }
    return dlsym(self, name);
}

extern "C" void bib_cu_emu_launch(void *kernel, const char *name, const unsigned grid[3],
                                  const unsigned block[3], unsigned shared_bytes,
                                  unsigned opted_in, const void *args) {
    L.name = name;
    L.threads = 0;
    blockIdx = {0, 0, 0};
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0 || grid[0] > 0x7fffffffu || grid[1] > 65535 ||
        grid[2] > 65535)
        fail("grid (%u,%u,%u) is outside the device's limits", grid[0], grid[1], grid[2]);
    uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
    if (threads == 0 || threads > MAX_THREADS || block[2] > 64)
        fail("block (%u,%u,%u) is outside the device's limits", block[0], block[1], block[2]);
    if (shared_bytes > MAX_DYNAMIC_SHARED && shared_bytes > opted_in)
        fail("%u bytes of dynamic shared memory (at most %u without opting in, %u opted in)",
             shared_bytes, MAX_DYNAMIC_SHARED, opted_in);
    if (shared_bytes % 4)
        fail("%u bytes of dynamic shared memory: not whole words", shared_bytes);
    L.fn = reinterpret_cast<kernel_fn>(kernel);
    memcpy(&L.args, args, sizeof L.args);
    L.threads = static_cast<unsigned>(threads);
    L.dynamic_words = shared_bytes / 4;
    L.dynamic.assign(L.dynamic_words + DYNAMIC_GUARD_WORDS, POISON);
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block[0], block[1], block[2]};
    grow_pool(L.threads);
    uint64_t linear = 0;
    for (unsigned z = 0; z < grid[2]; z++)
        for (unsigned y = 0; y < grid[1]; y++)
            for (unsigned x = 0; x < grid[0]; x++)
                run_block({x, y, z}, block, (linear++ & 1) != 0);
    L.threads = 0;
}
