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
 *   every rank (one all-to-all) and folds it in rank order,
 *   acc = canon(x0), then acc = canon(acc + x1), ..., a plain binary32 add;
 *   then every rank gathers every block (one all-gather). Each element's sum
 *   is therefore the same left fold over ranks 0..WORLD-1 whatever the
 *   arrival order or the network, and the traffic is that of a ring
 *   all-reduce (each rank sends and receives 2 (WORLD-1)/WORLD of the
 *   tensor). _MAX takes MAX's maximum (spec/numerics.md section 2).
 * - REDUCE_SCATTER: the same fold over blocks of rows (axis 0), without the
 *   all-gather.
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
static bib_status_t agree_at(bib_vm_t *vm, const bib_dinsn_t *ip, const header_t *mine,
                             header_t **all) {
    *all = calloc((size_t)bib_comm_size(), sizeof **all);
    if (*all == NULL)
        lost(bib_isa_table[ip->op].name, "host out of memory for the headers");
    if (exchange(mine, *all, bib_isa_table[ip->op].name) == 0)
        return BIB_OK;
    free(*all);
    *all = NULL;
    return trap(vm, ip, "%s", agreement.verdict);
}

static void *scratch(const bib_dinsn_t *ip, uint64_t bytes) {
    void *p = malloc(bytes ? (size_t)bytes : 1);
    if (p == NULL)
        lost(bib_isa_table[ip->op].name, "host out of memory for the exchange");
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

/* acc[i] = the fold over ranks 0..w-1 of parts[s * len + i], in rank
   order: the sum's left fold, or MAX's maximum. */
static void fold(float *acc, const float *parts, uint64_t len, int w, bool max) {
    for (uint64_t i = 0; i < len; i++) {
        if (max) {
            bool nan = false;
            int32_t best = bib_f32_order_key(-INFINITY);
            for (int s = 0; s < w; s++) {
                const float x = parts[(uint64_t)s * len + i];
                nan |= x != x;
                const int32_t k = bib_f32_order_key(x);
                best = k > best ? k : best;
            }
            acc[i] = nan ? bib_f32_canonical_nan() : bib_f32_from_order_key(best);
        } else {
            float a = bib_f32_canon(parts[i]);
            for (int s = 1; s < w; s++)
                a = bib_f32_canon(a + parts[(uint64_t)s * len + i]);
            acc[i] = a;
        }
    }
}

/* Reduces src (units * unit f32 elements, this rank's contribution) over
   the ranks: block r of the split of the units goes to rank r, which folds
   it; *mine gets this rank's folded block (malloc'd; the caller frees it),
   *mine_off and *mine_len its place in elements. */
static void reduce_blocks(const bib_dinsn_t *ip, const float *src, uint64_t units, uint64_t unit,
                          bool max, float **mine, uint64_t *mine_off, uint64_t *mine_len) {
    const int w = bib_comm_size(), me = bib_comm_rank();
    uint64_t off, len;
    block_of(units, w, me, &off, &len);
    *mine_off = off * unit;
    *mine_len = len * unit;
    float *parts = scratch(ip, (uint64_t)w * *mine_len * 4);
    uint64_t *c = scratch(ip, 4 * (uint64_t)w * sizeof *c);
    uint64_t *sc = c, *sd = c + w, *rc = c + 2 * w, *rd = c + 3 * w;
    for (int r = 0; r < w; r++) {
        uint64_t o, l;
        block_of(units, w, r, &o, &l);
        sc[r] = l * unit * 4;
        sd[r] = o * unit * 4;
        rc[r] = *mine_len * 4;
        rd[r] = (uint64_t)r * *mine_len * 4;
    }
    char why[600];
    if (bib_comm_alltoallv(src, sc, sd, parts, rc, rd, why, sizeof why) != BIB_OK)
        lost(bib_isa_table[ip->op].name, why);
    free(c);
    /* Folded in place into the first row: element i reads only column i. */
    fold(parts, parts, *mine_len, w, max);
    *mine = parts;
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

static bib_status_t op_reduce(bib_vm_t *vm, const bib_dinsn_t *ip, bool max, bool scatter) {
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
    /* The destination before any exchange: a failure here is this rank's
       error, which the others learn from its header. */
    uint8_t *out;
    if (!bib_comm_started()) {
        /* Alone: the fold of one rank, element by element, so in place too. */
        const float *src = (const float *)in->storage->host;
        CHECK(bib_tensor_host_out(vm, ip, ip->a, BIB_DTYPE_F32, in_rank, dims, &out));
        fold((float *)out, src, out_count, 1, max);
        return BIB_OK;
    }
    if (ip->a != ip->b)
        CHECK(bib_tensor_host_out(vm, ip, ip->a, BIB_DTYPE_F32, in_rank, dims, &out));
    header_t mine, *all;
    header_for(vm, ip, in, 0, &mine);
    CHECK(agree_at(vm, ip, &mine, &all));
    free(all);

    float *block;
    uint64_t off, len;
    reduce_blocks(ip, (const float *)in->storage->host, scatter ? rows : in_count, unit, max,
                  &block, &off, &len);
    if (ip->a == ip->b) {
        /* In place: the input has been sent; its buffer takes the result. */
        if (bib_tensor_host_out(vm, ip, ip->a, BIB_DTYPE_F32, in_rank, dims, &out) != BIB_OK)
            lost(bib_isa_table[ip->op].name, bib_vm_error(vm));
    }
    if (scatter) {
        memcpy(out, block, (size_t)(len * 4));
    } else {
        uint64_t *c = scratch(ip, 2 * (uint64_t)w * sizeof *c);
        for (int r = 0; r < w; r++) {
            uint64_t o, l;
            block_of(in_count, w, r, &o, &l);
            c[r] = l * 4;
            c[w + r] = o * 4;
        }
        char why[600];
        if (bib_comm_allgatherv(block, len * 4, out, c, c + w, why, sizeof why) != BIB_OK)
            lost(bib_isa_table[ip->op].name, why);
        free(c);
    }
    free(block);
    (void)off;
    return BIB_OK;
}

static bib_status_t op_allgather(bib_vm_t *vm, const bib_dinsn_t *ip) {
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
    CHECK(agree_at(vm, ip, &mine, &all));

    const int w = bib_comm_size();
    uint32_t dims[BIB_MAX_RANK];
    memcpy(dims, in->dims, sizeof dims);
    uint64_t outer = 1, tail = 1, total_axis = 0;
    for (int64_t i = 0; i < at; i++)
        outer *= in->dims[i];
    for (uint32_t i = (uint32_t)at + 1; i < in->rank; i++)
        tail *= in->dims[i];
    uint64_t *c = scratch(ip, 2 * (uint64_t)w * sizeof *c), total = 0;
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
    header_t *again = scratch(ip, (uint64_t)w * sizeof *again);
    if (st != BIB_OK) {
        mine.kind = H_FAILED;
        mine.exit_code = 70;
        snprintf(mine.text, sizeof mine.text, "%s", bib_vm_error(vm));
    }
    int verdict = exchange(&mine, again, "ALLGATHER");
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
        copy = scratch(ip, in->count * 4);
        memcpy(copy, src, (size_t)(in->count * 4));
        src = copy;
    }
    if (at == 0 || w == 1) {
        char why[600];
        if (bib_comm_allgatherv(src, in->count * 4, out, c, c + w, why, sizeof why) != BIB_OK)
            lost("ALLGATHER", why);
    } else {
        /* Gathered rank by rank, then interleaved along the axis. */
        uint8_t *tmp = scratch(ip, total);
        char why[600];
        if (bib_comm_allgatherv(src, in->count * 4, tmp, c, c + w, why, sizeof why) != BIB_OK)
            lost("ALLGATHER", why);
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

static bib_status_t op_broadcast(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
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
    CHECK(agree_at(vm, ip, &mine, &all));
    free(all);
    char why[600];
    if (bib_comm_bcast(buf, t->count * 4, (int)root, why, sizeof why) != BIB_OK)
        lost("BROADCAST", why);
    return BIB_OK;
}

bib_status_t bib_collective_exec(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t *R) {
    vm->tensor.last_place = "host";
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
        CHECK(agree_at(vm, ip, &mine, &all));
        free(all);
        return BIB_OK;
    }
    case BIB_OP_BROADCAST:
        return op_broadcast(vm, ip, R);
    case BIB_OP_ALLGATHER:
        return op_allgather(vm, ip);
    case BIB_OP_ALLREDUCE:
    case BIB_OP_ALLREDUCE_MAX:
    case BIB_OP_REDUCE_SCATTER:
    case BIB_OP_REDUCE_SCATTER_MAX:
        return op_reduce(vm, ip,
                         ip->op == BIB_OP_ALLREDUCE_MAX || ip->op == BIB_OP_REDUCE_SCATTER_MAX,
                         ip->op == BIB_OP_REDUCE_SCATTER || ip->op == BIB_OP_REDUCE_SCATTER_MAX);
    default:
        return trap(vm, ip, "opcode %s is not a collective", bib_isa_table[ip->op].name);
    }
}
