/* vm/collective.c: the collective opcodes (see vm/collective.h).
 *
 * Each tensor collective is: local checks (operands live and typed, axis and
 * root in range, the destination's shape where it is known here, fuel), the
 * header exchange (every rank's opcode and shapes; any failure or
 * disagreement stops every rank with the same verdict), then the payload
 * exchange on host copies, then the arithmetic on the host. The arithmetic
 * is the same on every rank count, executor and machine:
 *
 * - ALLREDUCE: the elements are split in WORLD blocks (block r: n/WORLD
 *   elements, one more when r < n mod WORLD). Rank r receives block r of
 *   every other rank (all-to-all) and folds it with its own in rank order,
 *   acc = x0 + x1, then acc = acc + x2, ..., a plain binary32 add, NaN
 *   canonical; then every rank gathers every folded block (all-gather, in
 *   place in the destination). Each element's sum is therefore the same left
 *   fold over ranks 0..WORLD-1 whatever the arrival order or the network,
 *   and the traffic is that of a ring all-reduce (each rank sends and
 *   receives 2 (WORLD-1)/WORLD of the tensor). _MAX takes MAX's maximum
 *   (spec/numerics.md section 2).
 *   The blocks move in steps of about 1 MiB received per rank (an
 *   all-to-all, the fold, an all-gather per step; reduce_steps), so the
 *   pieces are folded while still in the cache, and the only scratch is one
 *   step's pieces: nothing is copied to itself, no buffer the size of the
 *   tensor is allocated. The step changes the speed, never the bits.
 * - REDUCE_SCATTER: the same fold over blocks of rows (axis 0), into the
 *   destination, without the all-gather.
 * - ALLGATHER and BROADCAST move bits unchanged.
 *
 * Tensors are read from and written to the host (bib_tensor_host_in/out):
 * a tensor on a GPU is downloaded once, and the result is valid on the host
 * until a kernel moves it. So a collective gives the same bits whichever
 * executor computed its input.
 */
#include "vm/collective.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/comm.h"
#include "backends/cpu/bmath.h"
#include "vm/vm.h"

/* ---- headers and the verdict ------------------------------------------------- */

enum {
    H_COLLECTIVE = 1, /* at a collective opcode */
    H_STARTING = 2,   /* bib run: loaded, about to share the inputs */
    H_FINISHED = 3,   /* the run has ended without an error */
    H_FAILED = 4,     /* an error: text holds its line, code the exit code */
};

#define HEADER_TEXT (484 - 4 * BIB_MAX_RANK)

typedef struct header {
    uint32_t kind, code, pc, dtype, rank;
    uint32_t dims[BIB_MAX_RANK];
    int32_t arg;       /* BROADCAST's root, ALLGATHER's axis (from 0) */
    int32_t exit_code; /* H_FAILED */
    char text[HEADER_TEXT];
} header_t;

_Static_assert(sizeof(header_t) == 512, "a header is 512 bytes on every rank");

/* Once a verdict has stopped the run, every rank knows it; kept per process,
   as the communicator is. */
static struct {
    int settled; /* 0: still running; else the exit code */
    char verdict[HEADER_TEXT + 600];
} agreement;

static const char *op_name(uint32_t code) {
    int i = bib_isa_find_code(code);
    return i >= 0 ? bib_isa_table[i].name : "?";
}

static void shape_text(char *buf, size_t cap, uint32_t dtype, uint32_t rank, const uint32_t *dims) {
    size_t n = (size_t)snprintf(buf, cap, "%s[", dtype == BIB_DTYPE_I32 ? "i32" : "f32");
    for (uint32_t i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu32, i ? "," : "", dims[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* "is at ALLREDUCE (pc 4) with f32[4,3]", for the verdict. */
static void describe(const header_t *h, char *buf, size_t cap) {
    char sh[80];
    switch (h->kind) {
    case H_STARTING:
        snprintf(buf, cap, "is starting the run");
        return;
    case H_FINISHED:
        snprintf(buf, cap, "has finished its run");
        return;
    case H_COLLECTIVE:
        break;
    default:
        snprintf(buf, cap, "failed");
        return;
    }
    int n = snprintf(buf, cap, "is at %s (pc %" PRIu32 ")", op_name(h->code), h->pc);
    if (h->code == BIB_CODE_BARRIER || n < 0 || (size_t)n >= cap)
        return;
    shape_text(sh, sizeof sh, h->dtype, h->rank, h->dims);
    n += snprintf(buf + n, cap - (size_t)n, " with %s", sh);
    if (h->code == BIB_CODE_BROADCAST && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " from root %" PRId32, h->arg);
    else if (h->code == BIB_CODE_ALLGATHER && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " along axis %" PRId32, h->arg);
}

/* Whether rank r's header agrees with rank 0's. */
static bool agrees(const header_t *a, const header_t *b) {
    if (a->kind != b->kind)
        return false;
    if (a->kind != H_COLLECTIVE)
        return true;
    if (a->code != b->code)
        return false;
    if (a->code == BIB_CODE_BARRIER)
        return true;
    if (a->dtype != b->dtype || a->rank != b->rank || a->arg != b->arg)
        return false;
    for (uint32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i] && !(a->code == BIB_CODE_ALLGATHER && (int32_t)i == a->arg))
            return false;
    return true;
}

/* The verdict of a set of headers, the same on every rank: 0 to go on, or
   the exit code with agreement.verdict written and the run settled. */
static int judge(const header_t *h, int n) {
    for (int r = 0; r < n; r++) {
        if (h[r].kind != H_FAILED)
            continue;
        snprintf(agreement.verdict, sizeof agreement.verdict, "rank %d: %.*s", r, HEADER_TEXT,
                 h[r].text);
        return agreement.settled = h[r].exit_code != 0 ? h[r].exit_code : 70;
    }
    for (int r = 1; r < n; r++) {
        if (agrees(&h[0], &h[r]))
            continue;
        char a[200], b[200];
        describe(&h[0], a, sizeof a);
        describe(&h[r], b, sizeof b);
        snprintf(agreement.verdict, sizeof agreement.verdict,
                 "the ranks disagree: rank 0 %s, rank %d %s (every rank must run the same "
                 "collectives on matching shapes)",
                 a, r, b);
        return agreement.settled = 70;
    }
    return 0;
}

/* An exchange that cannot complete leaves MPI in an unknown state: every
   rank is ended, after one line saying why. */
__attribute__((noreturn)) static void lost(const char *where, const char *why) {
    fprintf(stderr, "bib: rank %d of %d: %s: %s; ending every rank\n", bib_comm_rank(),
            bib_comm_size(), where, why);
    bib_comm_abort(70);
}

/* Gathers every rank's header into all (bib_comm_size() of them) and
   judges them. */
static int exchange(const header_t *mine, header_t *all, const char *where) {
    char why[600];
    bib_status_t st = bib_comm_allgather(mine, all, sizeof *mine, why, sizeof why);
    if (st != BIB_OK)
        lost(where, why);
    return judge(all, bib_comm_size());
}

int bib_collective_agree(int finished, const char *failure, int failure_code, char *verdict,
                         size_t cap) {
    if (!agreement.settled && bib_comm_started()) {
        header_t mine;
        memset(&mine, 0, sizeof mine);
        mine.kind = failure != NULL ? H_FAILED : finished ? H_FINISHED : H_STARTING;
        if (failure != NULL) {
            snprintf(mine.text, sizeof mine.text, "%s", failure);
            mine.exit_code = failure_code;
        }
        header_t *all = calloc((size_t)bib_comm_size(), sizeof *all);
        if (all == NULL)
            lost("the agreement of the ranks", "host out of memory");
        exchange(&mine, all, finished ? "the end of the run" : "the start of the run");
        free(all);
        /* A finished run is over for everyone, whatever came out. */
        if (finished && !agreement.settled)
            agreement.settled = -1;
    }
    if (agreement.settled > 0) {
        snprintf(verdict, cap, "%s", agreement.verdict);
        return agreement.settled;
    }
    verdict[0] = '\0';
    return 0;
}

/* ---- helpers ------------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bib_status_t
trap(bib_vm_t *vm, const bib_dinsn_t *ip, const char *format, ...) {
    char cause[1200];
    va_list ap;
    va_start(ap, format);
    vsnprintf(cause, sizeof cause, format, ap);
    va_end(ap);
    return bib_vm_trap_at(vm, BIB_E_TRAP, (uint32_t)(ip - vm->program.code), "%s", cause);
}

static uint32_t pc_of(const bib_vm_t *vm, const bib_dinsn_t *ip) {
    return (uint32_t)(ip - vm->program.code);
}

/* The instruction at ip as a trap names it, "pc 5 (ALLREDUCE t2, t0) line
   9", for the lines of a rank that ends every rank: a program may hold the
   same collective many times. */
typedef struct site {
    char text[600];
} site_t;

static void site_of(const bib_vm_t *vm, const bib_dinsn_t *ip, site_t *site) {
    const uint32_t pc = pc_of(vm, ip);
    char insn[512];
    bib_insn_format(vm->module, pc, insn, sizeof insn);
    const uint32_t *lines = vm->module->lines;
    if (lines != NULL && lines[pc] != 0)
        snprintf(site->text, sizeof site->text, "pc %" PRIu32 " (%s) line %" PRIu32, pc, insn,
                 lines[pc]);
    else
        snprintf(site->text, sizeof site->text, "pc %" PRIu32 " (%s)", pc, insn);
}

/* The header of this rank at ip with the tensor t's dtype and shape. */
static void header_for(const bib_vm_t *vm, const bib_dinsn_t *ip, const bib_tensor_t *t,
                       int32_t arg, header_t *h) {
    memset(h, 0, sizeof *h);
    h->kind = H_COLLECTIVE;
    h->code = bib_isa_table[ip->op].code;
    h->pc = pc_of(vm, ip);
    h->arg = arg;
    if (t != NULL) {
        h->dtype = t->dtype;
        h->rank = t->rank;
        memcpy(h->dims, t->dims, sizeof h->dims);
    }
}

/* The headers of every rank (the communicator is started), or a trap with
   the verdict when they do not go on. */
static bib_status_t agree_at(bib_vm_t *vm, const bib_dinsn_t *ip, const site_t *site,
                             const header_t *mine, header_t **all) {
    *all = calloc((size_t)bib_comm_size(), sizeof **all);
    if (*all == NULL)
        lost(site->text, "host out of memory for the headers");
    if (exchange(mine, *all, site->text) == 0)
        return BIB_OK;
    free(*all);
    *all = NULL;
    return trap(vm, ip, "%s", agreement.verdict);
}

static void *scratch(const site_t *site, uint64_t bytes) {
    void *p = malloc(bytes ? (size_t)bytes : 1);
    if (p == NULL)
        lost(site->text, "host out of memory for the exchange");
    return p;
}

/* Block r of n items split over w ranks: n / w items, one more when
   r < n mod w; off its first item. */
static void block_of(uint64_t n, int w, int r, uint64_t *off, uint64_t *len) {
    const uint64_t base = n / (uint64_t)w, extra = n % (uint64_t)w;
    *len = base + ((uint64_t)r < extra);
    *off = (uint64_t)r * base + ((uint64_t)r < extra ? (uint64_t)r : extra);
}

/* ---- the fold ------------------------------------------------------------------ */

/* Four lanes in GCC's vector extension, one SSE2 register (the x86-64
   baseline; wider vectors built for SSE2 go through the stack): each lane
   is the scalar operation on one element, so the bits are the scalar
   code's. Loads and stores go through memcpy: rows need not be aligned. */
typedef float fold_vf __attribute__((vector_size(16)));
typedef int32_t fold_vi __attribute__((vector_size(16)));
#define FOLD_LANES 4

/* The pairwise step of the fold, element by element: d[i] = canon(a[i] +
   b[i]) (one binary32 add; a NaN becomes the canonical NaN, so canon(x0)
   is not needed first: a NaN stays a NaN through the later adds) or MAX's
   maximum of a[i] and b[i] (bib_max2: canonical NaN if either is NaN, else
   the greater order key, -0 < +0). b NULL: d[i] = the fold of a[i] alone,
   canon(a[i]). d may be a or b (element i of each), never overlap them
   otherwise. */
static void fold_pair(float *d, const float *a, const float *b, uint64_t n, bool max) {
    const fold_vi nan_bits = (fold_vi){0} + (int32_t)BIB_F32_CANONICAL_NAN_BITS;
    const fold_vi low31 = (fold_vi){0} + 0x7FFFFFFF;
    uint64_t i = 0;
    for (; i + FOLD_LANES <= n; i += FOLD_LANES) {
        fold_vf x, y;
        memcpy(&x, a + i, sizeof x);
        if (b != NULL)
            memcpy(&y, b + i, sizeof y);
        else
            y = x;
        fold_vi nan, pick;
        if (!max) {
            const fold_vf r = b != NULL ? x + y : x;
            nan = r != r;
            pick = (fold_vi)r;
        } else {
            const fold_vi xi = (fold_vi)x, yi = (fold_vi)y;
            const fold_vi kx = xi ^ ((xi >> 31) & low31), ky = yi ^ ((yi >> 31) & low31);
            const fold_vi greater = ky > kx;
            nan = (x != x) | (y != y);
            pick = (yi & greater) | (xi & ~greater);
        }
        pick = (nan_bits & nan) | (pick & ~nan);
        memcpy(d + i, &pick, sizeof pick);
    }
    for (; i < n; i++) {
        if (b == NULL)
            d[i] = bib_f32_canon(a[i]);
        else
            d[i] = max ? bib_max2(a[i], b[i]) : bib_f32_canon(a[i] + b[i]);
    }
}

/* Elements per block that one step of the reduction moves from each rank:
   about 1 MiB received per step, so a step's parts are still in the cache
   when they are folded, and the scratch stays small whatever the tensor. */
#define REDUCE_STEP_BYTES ((uint64_t)1 << 20)
#define REDUCE_STEP_MIN 4096

/* Reduces this rank's contribution src (units * unit f32 elements) over the
   ranks; rank r owns block r of the split of the units (block_of) and folds
   it. The blocks go in steps: step k moves the k-th piece of every block
   (one all-to-all: this rank's piece of block r to rank r; nothing to
   itself), folds the piece of its own block in rank order, from the
   received pieces and its own src, into mine + k * step, and, with gather,
   sends that folded piece to every rank (one all-gather in place into out,
   where mine = out + this block's offset). The fold of each element is the
   same left fold whatever the step size, so the step only changes speed.
   mine may be src + this block's offset (in place); every element of src
   that another rank needs is sent before the step that overwrites it. */
static void reduce_steps(const site_t *site, const float *src, float *out, float *mine,
                         uint64_t units, uint64_t unit, bool max, bool gather) {
    const int w = bib_comm_size(), me = bib_comm_rank();
    /* Blocks in elements: rank r's block is [eo[r], eo[r] + el[r]). */
    uint64_t *c = scratch(site, 6 * (uint64_t)w * sizeof *c);
    uint64_t *eo = c, *el = c + w, *sc = c + 2 * w, *sd = c + 3 * w, *rc = c + 4 * w,
             *rd = c + 5 * w;
    for (int r = 0; r < w; r++) {
        uint64_t o, l;
        block_of(units, w, r, &o, &l);
        eo[r] = o * unit;
        el[r] = l * unit;
    }
    uint64_t step = REDUCE_STEP_BYTES / 4 / (uint64_t)(w > 1 ? w - 1 : 1);
    step = step < REDUCE_STEP_MIN ? REDUCE_STEP_MIN : step;
    /* Block 0 is the longest: every rank takes the same number of steps. */
    const uint64_t steps = (el[0] + step - 1) / step;
    const uint64_t part = step < el[me] ? step : el[me];
    float *parts = scratch(site, (uint64_t)(w - 1) * part * 4);
    char why[600];
    for (uint64_t k = 0; k < steps; k++) {
        const uint64_t at = k * step;
        uint64_t len = 0;
        for (int r = 0; r < w; r++) {
            const uint64_t left = el[r] > at ? el[r] - at : 0;
            const uint64_t n = left < step ? left : step;
            if (r == me)
                len = n;
            sc[r] = r == me ? 0 : n * 4;
            sd[r] = (eo[r] + (n ? at : 0)) * 4;
        }
        /* Rank r's piece of this rank's block lands in slot r, or r - 1
           after this rank. */
        for (int r = 0; r < w; r++) {
            rc[r] = r == me ? 0 : len * 4;
            rd[r] = r == me ? 0 : (uint64_t)(r < me ? r : r - 1) * part * 4;
        }
        if (w > 1 && bib_comm_alltoallv(src, sc, sd, parts, rc, rd, why, sizeof why) != BIB_OK)
            lost(site->text, why);
        if (len > 0) {
            const float *own = src + eo[me] + at;
            float *d = mine + at;
            /* In rank order. Until this rank's own piece the running fold
               lives in slot 0 (rank 0's piece, read only by the step that
               overwrites it): d may be own's elements, read first. */
            if (w == 1)
                fold_pair(d, own, NULL, len, max);
            const float *acc = me == 0 ? own : parts;
            for (int r = 1; r < w; r++) {
                const float *x = r == me ? own : parts + (uint64_t)(r < me ? r : r - 1) * part;
                float *to = r < me ? parts : d;
                fold_pair(to, acc, x, len, max);
                acc = to;
            }
        }
        if (gather && w > 1) {
            for (int r = 0; r < w; r++) {
                const uint64_t left = el[r] > at ? el[r] - at : 0;
                sc[r] = (left < step ? left : step) * 4;
                sd[r] = (eo[r] + (sc[r] ? at : 0)) * 4;
            }
            if (bib_comm_allgatherv(NULL, 0, out, sc, sd, why, sizeof why) != BIB_OK)
                lost(site->text, why);
        }
    }
    free(parts);
    free(c);
}

/* ---- the opcodes ---------------------------------------------------------------- */

static bib_status_t need_f32(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg,
                             const bib_tensor_t *t) {
    if (t->dtype == BIB_DTYPE_F32)
        return BIB_OK;
    char rt[300];
    return trap(vm, ip, "%s is i32; %s needs f32", bib_tensor_reg_text(vm, rt, sizeof rt, reg),
                bib_isa_table[ip->op].name);
}

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        bib_status_t st_ = (expr);                                                                 \
        if (st_ != BIB_OK)                                                                         \
            return st_;                                                                            \
    } while (0)

static bib_status_t op_reduce(bib_vm_t *vm, const bib_dinsn_t *ip, const site_t *site, bool max,
                              bool scatter) {
    const bib_tensor_t *in;
    CHECK(bib_tensor_host_in(vm, ip, ip->b, &in));
    CHECK(need_f32(vm, ip, ip->b, in));
    char rt[300];
    if (scatter && in->rank == 0)
        return trap(vm, ip, "%s is a scalar []; %s splits axis 0",
                    bib_tensor_reg_text(vm, rt, sizeof rt, ip->b), bib_isa_table[ip->op].name);
    const int w = bib_comm_size(), me = bib_comm_rank();
    uint32_t dims[BIB_MAX_RANK];
    memcpy(dims, in->dims, sizeof dims);
    const uint64_t rows = scatter ? in->dims[0] : in->count;
    const uint64_t unit = scatter ? (rows ? in->count / rows : 0) : 1;
    if (scatter) {
        uint64_t off, len;
        block_of(rows, w, me, &off, &len);
        dims[0] = (uint32_t)len;
    }
    const uint64_t in_count = in->count, out_count = scatter ? dims[0] * unit : in_count;
    const uint32_t in_rank = in->rank;
    CHECK(bib_tensor_charge_fuel(vm, ip, in_count + out_count));
    /* The destination before any exchange: a failure here (a live
       destination of another shape, in place too) is this rank's error,
       which the others learn from its header. In place, or a view of the
       input, it is the input's buffer with the input's layout (taken after
       the destination: in place, that may be a copy of the input's own). */
    uint8_t *out;
    CHECK(bib_tensor_host_out(vm, ip, ip->a, BIB_DTYPE_F32, in_rank, dims, &out));
    const float *src = (const float *)in->storage->host;
    if (!bib_comm_started()) {
        /* Alone: the fold of one rank, element by element, so in place too. */
        fold_pair((float *)out, src, NULL, out_count, max);
        return BIB_OK;
    }
    header_t mine, *all;
    header_for(vm, ip, in, 0, &mine);
    CHECK(agree_at(vm, ip, site, &mine, &all));
    free(all);
    uint64_t off, len;
    block_of(rows, w, me, &off, &len);
    float *block = scatter ? (float *)out : (float *)out + off * unit;
    reduce_steps(site, src, (float *)out, block, rows, unit, max, !scatter);
    return BIB_OK;
}

static bib_status_t op_allgather(bib_vm_t *vm, const bib_dinsn_t *ip, const site_t *site) {
    const bib_tensor_t *in;
    CHECK(bib_tensor_host_in(vm, ip, ip->b, &in));
    char rt[300], sh[80];
    const int64_t axis = ip->x.imm;
    const int64_t at = axis < 0 ? axis + (int64_t)in->rank : axis;
    if (at < 0 || at >= (int64_t)in->rank) {
        shape_text(sh, sizeof sh, in->dtype, in->rank, in->dims);
        return trap(vm, ip, "axis %" PRId64 " is outside %s %s (rank %" PRIu32 ")", axis,
                    bib_tensor_reg_text(vm, rt, sizeof rt, ip->b), sh, in->rank);
    }
    if (!bib_comm_started()) {
        uint8_t *out;
        uint32_t same[BIB_MAX_RANK];
        memcpy(same, in->dims, sizeof same);
        CHECK(bib_tensor_charge_fuel(vm, ip, 2 * in->count));
        CHECK(bib_tensor_host_out(vm, ip, ip->a, in->dtype, in->rank, same, &out));
        if (out != in->storage->host)
            memcpy(out, in->storage->host, (size_t)(in->count * 4));
        return BIB_OK;
    }
    header_t mine, *all;
    header_for(vm, ip, in, (int32_t)at, &mine);
    CHECK(agree_at(vm, ip, site, &mine, &all));

    const int w = bib_comm_size();
    uint32_t dims[BIB_MAX_RANK];
    memcpy(dims, in->dims, sizeof dims);
    uint64_t outer = 1, tail = 1, total_axis = 0;
    for (int64_t i = 0; i < at; i++)
        outer *= in->dims[i];
    for (uint32_t i = (uint32_t)at + 1; i < in->rank; i++)
        tail *= in->dims[i];
    uint64_t *c = scratch(site, 2 * (uint64_t)w * sizeof *c), total = 0;
    for (int r = 0; r < w; r++) {
        total_axis += all[r].dims[at];
        c[r] = outer * all[r].dims[at] * tail * 4;
        c[w + r] = total;
        total += c[r];
    }
    free(all);
    bib_status_t st = BIB_OK;
    uint8_t *out = NULL;
    if (total_axis > BIB_MAX_TENSOR_DIM) {
        shape_text(sh, sizeof sh, in->dtype, in->rank, in->dims);
        st = trap(vm, ip, "the gathered axis %" PRId64 " would be %" PRIu64 " long, over %d", at,
                  total_axis, BIB_MAX_TENSOR_DIM);
    } else {
        dims[at] = (uint32_t)total_axis;
        st = bib_tensor_charge_fuel(vm, ip, in->count + total / 4);
        if (st == BIB_OK)
            st = bib_tensor_host_out(vm, ip, ip->a, in->dtype, in->rank, dims, &out);
    }
    /* The destination is known only now: a second round tells every rank
       whether every rank has one. */
    header_t *again = scratch(site, (uint64_t)w * sizeof *again);
    if (st != BIB_OK) {
        mine.kind = H_FAILED;
        mine.exit_code = 70;
        snprintf(mine.text, sizeof mine.text, "%s", bib_vm_error(vm));
    }
    int verdict = exchange(&mine, again, site->text);
    free(again);
    if (verdict != 0) {
        free(c);
        return st != BIB_OK ? st : trap(vm, ip, "%s", agreement.verdict);
    }
    /* In place (the other ranks gave nothing along the axis): MPI wants the
       send and receive buffers apart. */
    uint8_t *copy = NULL;
    const uint8_t *src = in->storage->host;
    if (src == out) {
        copy = scratch(site, in->count * 4);
        memcpy(copy, src, (size_t)(in->count * 4));
        src = copy;
    }
    if (at == 0 || w == 1) {
        char why[600];
        if (bib_comm_allgatherv(src, in->count * 4, out, c, c + w, why, sizeof why) != BIB_OK)
            lost(site->text, why);
    } else {
        /* Gathered rank by rank, then interleaved along the axis. */
        uint8_t *tmp = scratch(site, total);
        char why[600];
        if (bib_comm_allgatherv(src, in->count * 4, tmp, c, c + w, why, sizeof why) != BIB_OK)
            lost(site->text, why);
        uint64_t pos = 0;
        for (uint64_t o = 0; o < outer; o++)
            for (int r = 0; r < w; r++) {
                const uint64_t piece = outer ? c[r] / outer : 0;
                memcpy(out + pos, tmp + c[w + r] + o * piece, (size_t)piece);
                pos += piece;
            }
        free(tmp);
    }
    free(copy);
    free(c);
    return BIB_OK;
}

static bib_status_t op_broadcast(bib_vm_t *vm, const bib_dinsn_t *ip, const site_t *site,
                                 const uint64_t *R) {
    const bib_tensor_t *t;
    CHECK(bib_tensor_host_in(vm, ip, ip->a, &t));
    const int64_t root = (int64_t)R[ip->b];
    if (root < 0 || root >= bib_comm_size())
        return trap(vm, ip, "root r%" PRIu32 " = %" PRId64 " is not a rank (ranks 0..%d)", ip->b,
                    root, bib_comm_size() - 1);
    CHECK(bib_tensor_charge_fuel(vm, ip, 2 * t->count));
    uint8_t *buf;
    uint32_t dims[BIB_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims);
    CHECK(bib_tensor_host_out(vm, ip, ip->a, t->dtype, t->rank, dims, &buf));
    if (!bib_comm_started())
        return BIB_OK;
    header_t mine, *all;
    header_for(vm, ip, t, (int32_t)root, &mine);
    CHECK(agree_at(vm, ip, site, &mine, &all));
    free(all);
    char why[600];
    if (bib_comm_bcast(buf, t->count * 4, (int)root, why, sizeof why) != BIB_OK)
        lost(site->text, why);
    return BIB_OK;
}

bib_status_t bib_collective_exec(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t *R) {
    vm->tensor.last_place = "host";
    /* Only a rank that ends every rank names it: formatted only with others. */
    site_t site = {.text = ""};
    if (bib_comm_started() && ip->op != BIB_OP_RANK && ip->op != BIB_OP_WORLD)
        site_of(vm, ip, &site);
    switch ((bib_opcode_t)ip->op) {
    case BIB_OP_RANK:
        R[ip->a] = (uint64_t)bib_comm_rank();
        return BIB_OK;
    case BIB_OP_WORLD:
        R[ip->a] = (uint64_t)bib_comm_size();
        return BIB_OK;
    case BIB_OP_BARRIER: {
        if (!bib_comm_started())
            return BIB_OK;
        header_t mine, *all;
        header_for(vm, ip, NULL, 0, &mine);
        CHECK(agree_at(vm, ip, &site, &mine, &all));
        free(all);
        return BIB_OK;
    }
    case BIB_OP_BROADCAST:
        return op_broadcast(vm, ip, &site, R);
    case BIB_OP_ALLGATHER:
        return op_allgather(vm, ip, &site);
    case BIB_OP_ALLREDUCE:
    case BIB_OP_ALLREDUCE_MAX:
    case BIB_OP_REDUCE_SCATTER:
    case BIB_OP_REDUCE_SCATTER_MAX:
        return op_reduce(vm, ip, &site,
                         ip->op == BIB_OP_ALLREDUCE_MAX || ip->op == BIB_OP_REDUCE_SCATTER_MAX,
                         ip->op == BIB_OP_REDUCE_SCATTER || ip->op == BIB_OP_REDUCE_SCATTER_MAX);
    default:
        return trap(vm, ip, "opcode %s is not a collective", bib_isa_table[ip->op].name);
    }
}
