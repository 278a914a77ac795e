/* vm/profile.c: per-opcode, per-executor profiles of a run (--profile).
 *
 * Owns the counters, the clock, the work model (flops and bytes of a tensor
 * opcode) and the two output formats (spec/cli.md). The instrumented loop in
 * interp.c brackets every instruction with bib_profile_open/close; tensor
 * code reports copies between host and devices with bib_profile_copy, whose
 * time is taken out of the instruction that caused them and shown in rows of
 * their own. When an instruction that ran a tensor opcode closes, the
 * started GPU executors are synchronized first, so a kernel's host time
 * lands on its own instruction; each GPU executor's device clock (CUDA
 * events, Vulkan timestamp queries: ops->timing/elapsed, switched on when
 * the executor starts) then gives the device time of the kernels it ran,
 * which becomes the row's device_ms and the time its rates are computed
 * from. An executor without a device clock is host-timed and the table's
 * footer says why. A VM that does not profile has vm->profile == NULL and
 * never calls anything here.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm/json.h"
#include "vm/profile.h"
#include "vm/vm.h"

/* Executor columns: "vm", "host", "view" and the executors of a build. */
#define PROFILE_EXECUTORS 8

typedef struct profile_cell {
    uint64_t count, ns, flops, bytes;
    uint64_t device_ns;    /* device clock time of the instructions that had one */
    uint64_t device_count; /* how many instructions had one */
} profile_cell_t;

/* The device clock of one GPU place. */
typedef enum profile_clock_state {
    PROFILE_CLOCK_UNKNOWN, /* its executor has not started while profiling */
    PROFILE_CLOCK_DEVICE,  /* ops->timing is on */
    PROFILE_CLOCK_HOST,    /* no device clock: why says why */
} profile_clock_state_t;

typedef struct profile_clock {
    const bib_executor_t *ex; /* the executor whose clock this is */
    const char *name;         /* its ops->name */
    profile_clock_state_t state;
    char why[240];
} profile_clock_t;

typedef struct profile_row {
    const char *op, *executor;
    profile_cell_t cell;
} profile_row_t;

struct bib_profile {
    const char *executors[PROFILE_EXECUTORS];
    uint32_t executor_count;
    profile_cell_t cells[BIB_OP__COUNT][PROFILE_EXECUTORS];
    profile_cell_t copies[2][PROFILE_EXECUTORS]; /* [0] uploads, [1] downloads, by executor */

    const bib_dinsn_t *open; /* the instruction running, or NULL */
    uint64_t open_ns;        /* when it started */
    uint64_t copy_ns;        /* copies made while it ran */
    uint64_t closed_ns;      /* when the last instruction closed; 0 after a pause */

    /* Executors outlive runs, and so do their clocks (kept by reset). */
    profile_clock_t clocks[BIB_MAX_PLACES];

    profile_row_t *rows; /* sorted rows of the last run; built on first read */
    uint32_t row_count;
    bool rows_valid;
};

uint64_t bib_profile_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void bib_profile_reset(struct bib_profile *p) {
    free(p->rows);
    profile_clock_t clocks[BIB_MAX_PLACES];
    memcpy(clocks, p->clocks, sizeof clocks);
    memset(p, 0, sizeof *p);
    memcpy(p->clocks, clocks, sizeof clocks);
}

/* Switches on the device clock of place's executor unless it is already
   (or has none). Returns true when it was switched on just now: work the
   executor did before is not on the clock. */
static bool clock_start(bib_vm_t *vm, int place) {
    const bib_tensor_state_t *ts = &vm->tensor;
    bib_executor_t *ex = ts->ex[place];
    profile_clock_t *c = &vm->profile->clocks[place];
    if (ex == NULL || ts->ops[place] == NULL || c->ex == ex)
        return false;
    const bib_executor_ops_t *ops = ts->ops[place];
    c->ex = ex;
    c->name = ops->name;
    c->why[0] = '\0';
    if (ops->timing == NULL || ops->elapsed == NULL) {
        c->state = PROFILE_CLOCK_HOST;
        snprintf(c->why, sizeof c->why, "the %s executor has no device timer", ops->name);
        return false;
    }
    if (ops->timing(ex, true) != BIB_OK) {
        c->state = PROFILE_CLOCK_HOST;
        const char *e = ops->error(ex);
        snprintf(c->why, sizeof c->why, "%s", e != NULL && e[0] != '\0' ? e : "it failed to start");
        return false;
    }
    c->state = PROFILE_CLOCK_DEVICE;
    return true;
}

void bib_profile_executor_started(bib_vm_t *vm, int place) {
    if (vm->profile == NULL || place <= BIB_PLACE_HOST || place >= BIB_MAX_PLACES)
        return;
    /* A new executor, even at the address of one shut down before. */
    vm->profile->clocks[place].ex = NULL;
    clock_start(vm, place);
}

/* Profiling stops: device clocks that are on go off. */
static void clocks_stop(bib_vm_t *vm) {
    const bib_tensor_state_t *ts = &vm->tensor;
    for (int place = 1; place < BIB_MAX_PLACES; place++) {
        const profile_clock_t *c = &vm->profile->clocks[place];
        if (c->state == PROFILE_CLOCK_DEVICE && ts->ex[place] != NULL && ts->ex[place] == c->ex)
            ts->ops[place]->timing(ts->ex[place], false);
    }
}

void bib_profile_destroy(struct bib_profile *p) {
    if (p == NULL)
        return;
    free(p->rows);
    free(p);
}

bib_status_t bib_vm_profile(bib_vm_t *vm, int on) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (vm->running)
        return bib_vm_fail(vm, BIB_E_STATE, "cannot switch profiling while the VM is running");
    if (!on) {
        if (vm->profile != NULL)
            clocks_stop(vm);
        bib_profile_destroy(vm->profile);
        vm->profile = NULL;
        return BIB_OK;
    }
    if (vm->profile == NULL) {
        vm->profile = calloc(1, sizeof *vm->profile);
        if (vm->profile == NULL)
            return bib_vm_fail(vm, BIB_E_NOMEM, "host out of memory for the profile");
    }
    /* Executors a previous run started get their clocks now. */
    for (int place = 1; place < BIB_MAX_PLACES; place++)
        clock_start(vm, place);
    return BIB_OK;
}

static uint32_t executor_slot(struct bib_profile *p, const char *name) {
    for (uint32_t i = 0; i < p->executor_count; i++)
        if (p->executors[i] == name || strcmp(p->executors[i], name) == 0)
            return i;
    if (p->executor_count == PROFILE_EXECUTORS)
        return PROFILE_EXECUTORS - 1; /* more names than any build has: share the last */
    p->executors[p->executor_count] = name;
    return p->executor_count++;
}

void bib_profile_resume(bib_vm_t *vm) {
    vm->profile->closed_ns = 0;
}

void bib_profile_open(bib_vm_t *vm, const bib_dinsn_t *ip) {
    struct bib_profile *p = vm->profile;
    p->open = ip;
    p->copy_ns = 0;
    /* One clock read per instruction: the previous one closed just now. */
    p->open_ns = p->closed_ns != 0 ? p->closed_ns : bib_profile_now();
}

static uint64_t bytes_of(const bib_vm_t *vm, uint32_t reg) {
    const bib_tensor_state_t *ts = &vm->tensor;
    if (reg >= ts->reg_count || ts->regs[reg].storage == NULL)
        return 0;
    return ts->regs[reg].count * 4;
}

/* The work of a tensor opcode that has just run: its kernel call's flops
   (bib_tensor_cost, vm/tensor_ops.c: 2·M·N·K for a product, the bias and
   activation of LINEAR* not counted; attention's two products, 4·S·T·H·D,
   causal or not; 0 for every other kernel), and from its operands' shapes
   the bytes read and written. Register moves, views and element access
   count nothing. */
static void tensor_work(const bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t *flops,
                        uint64_t *bytes) {
    *flops = 0;
    *bytes = 0;
    const bib_opinfo_t *info = &bib_isa_table[ip->op];
    switch ((bib_opcode_t)ip->op) {
    case BIB_OP_ALLOC:
    case BIB_OP_FREE:
    case BIB_OP_RESHAPE:
    case BIB_OP_TGET:
    case BIB_OP_TSET:
    case BIB_OP_DIM:
        return;
    default:
        break;
    }
    const uint32_t words[4] = {ip->a, ip->b, ip->c, ip->d};
    for (int k = 0; k < 4; k++)
        if (info->kinds[k] == BIB_K_TD || info->kinds[k] == BIB_K_TS || info->kinds[k] == BIB_K_TM)
            *bytes += bytes_of(vm, words[k]);
    if (info->kernel >= 0)
        *flops = vm->tensor.last_flops;
}

bib_status_t bib_profile_close(bib_vm_t *vm, const bib_dinsn_t **trapped) {
    struct bib_profile *p = vm->profile;
    const bib_dinsn_t *ip = p->open;
    if (ip == NULL)
        return BIB_OK;
    p->open = NULL;
    bib_status_t timed_out = BIB_OK;
    const bib_opinfo_t *info = &bib_isa_table[ip->op];
    const char *executor = "vm";
    uint64_t flops = 0, bytes = 0, device_ns = 0;
    bool device_timed = false;
    if (info->opclass != BIB_CLASS_SCALAR) {
        /* Device kernels may only have been recorded: wait for them, so their
           time is this instruction's. */
        bib_tensor_state_t *ts = &vm->tensor;
        for (int place = 1; place < BIB_MAX_PLACES; place++) {
            if (ts->ex[place] == NULL || ts->ops[place] == NULL ||
                ts->ops[place]->synchronize == NULL)
                continue;
            /* Other failures are the next user's to report, as without
               --profile; a timeout leaves the executor unusable, so it is
               this instruction's trap. */
            if (ts->ops[place]->synchronize(ts->ex[place]) == BIB_E_TIMEOUT &&
                timed_out == BIB_OK && trapped != NULL) {
                timed_out = bib_vm_trap_at(vm, BIB_E_TIMEOUT, (uint32_t)(ip - vm->program.code),
                                           "%s", ts->ops[place]->error(ts->ex[place]));
                *trapped = ip;
            }
        }
        executor = ts->last_place != NULL ? ts->last_place : "host";
        tensor_work(vm, ip, &flops, &bytes);
        for (int place = 1; place < BIB_MAX_PLACES; place++) {
            /* An executor that started without the hook gets its clock now;
               this instruction's work on it was not on the clock. */
            if (ts->ex[place] == NULL || clock_start(vm, place) ||
                p->clocks[place].state != PROFILE_CLOCK_DEVICE)
                continue;
            double ms = 0;
            if (ts->ops[place]->elapsed(ts->ex[place], &ms) == BIB_OK && ms > 0)
                device_ns += (uint64_t)llround(ms * 1e6);
            if (strcmp(ts->ops[place]->name, executor) == 0)
                device_timed = true;
        }
    }
    const uint64_t now = bib_profile_now();
    p->closed_ns = now;
    uint64_t ns = now - p->open_ns;
    ns = ns > p->copy_ns ? ns - p->copy_ns : 0;
    profile_cell_t *c = &p->cells[ip->op][executor_slot(p, executor)];
    c->count++;
    c->ns += ns;
    c->flops += flops;
    c->bytes += bytes;
    if (device_timed) {
        c->device_ns += device_ns;
        c->device_count++;
    }
    p->rows_valid = false;
    return timed_out;
}

void bib_profile_drop(bib_vm_t *vm) {
    vm->profile->open = NULL;
}

void bib_profile_copy(bib_vm_t *vm, int dev, bool down, uint64_t bytes, uint64_t t0) {
    struct bib_profile *p = vm->profile;
    if (p == NULL)
        return;
    const bib_tensor_state_t *ts = &vm->tensor;
    const char *name =
        dev >= 0 && dev < BIB_MAX_PLACES && ts->ops[dev] != NULL ? ts->ops[dev]->name : "device";
    const uint64_t ns = bib_profile_now() - t0;
    profile_cell_t *c = &p->copies[down ? 1 : 0][executor_slot(p, name)];
    c->count++;
    c->ns += ns;
    c->bytes += bytes;
    p->copy_ns += ns;
    p->rows_valid = false;
}

/* ---- rows and output ----------------------------------------------------------- */

static int row_order(const void *a, const void *b) {
    const profile_row_t *x = a, *y = b;
    if (x->cell.ns != y->cell.ns)
        return x->cell.ns > y->cell.ns ? -1 : 1;
    int c = strcmp(x->op, y->op);
    return c != 0 ? c : strcmp(x->executor, y->executor);
}

static bool build_rows(struct bib_profile *p) {
    if (p->rows_valid)
        return true;
    uint32_t n = 0;
    for (int op = 0; op < BIB_OP__COUNT; op++)
        for (uint32_t e = 0; e < p->executor_count; e++)
            n += p->cells[op][e].count > 0;
    for (int d = 0; d < 2; d++)
        for (uint32_t e = 0; e < p->executor_count; e++)
            n += p->copies[d][e].count > 0;
    profile_row_t *rows = n > 0 ? malloc(n * sizeof *rows) : NULL;
    if (n > 0 && rows == NULL)
        return false;
    uint32_t i = 0;
    for (int op = 0; op < BIB_OP__COUNT; op++)
        for (uint32_t e = 0; e < p->executor_count; e++)
            if (p->cells[op][e].count > 0)
                rows[i++] =
                    (profile_row_t){bib_isa_table[op].name, p->executors[e], p->cells[op][e]};
    for (int d = 0; d < 2; d++)
        for (uint32_t e = 0; e < p->executor_count; e++)
            if (p->copies[d][e].count > 0)
                rows[i++] = (profile_row_t){d == 0 ? "upload" : "download", p->executors[e],
                                            p->copies[d][e]};
    if (n > 1)
        qsort(rows, n, sizeof *rows, row_order);
    free(p->rows);
    p->rows = rows;
    p->row_count = n;
    p->rows_valid = true;
    return true;
}

uint32_t bib_vm_profile_rows(const bib_vm_t *vm) {
    if (vm == NULL || vm->profile == NULL || !build_rows(vm->profile))
        return 0;
    return vm->profile->row_count;
}

bib_status_t bib_vm_profile_row(const bib_vm_t *vm, uint32_t index, bib_profile_row_t *row) {
    if (vm == NULL || row == NULL || vm->profile == NULL)
        return BIB_E_USAGE;
    if (!build_rows(vm->profile))
        return BIB_E_NOMEM;
    if (index >= vm->profile->row_count)
        return BIB_E_USAGE;
    const profile_row_t *r = &vm->profile->rows[index];
    row->op = r->op;
    row->executor = r->executor;
    row->count = r->cell.count;
    row->seconds = (double)r->cell.ns * 1e-9;
    row->flops = r->cell.flops;
    row->bytes = r->cell.bytes;
    return BIB_OK;
}

/* The device time of a row when a device clock timed every one of its
   instructions. */
static bool row_device_seconds(const profile_row_t *r, double *seconds) {
    if (r->cell.device_count == 0 || r->cell.device_count != r->cell.count)
        return false;
    *seconds = (double)r->cell.device_ns * 1e-9;
    return true;
}

/* A rate column: GFLOP/s where flops are counted, else GB/s where bytes are;
   over the row's device time when it has one, else its host time. */
static bool rate(const profile_row_t *r, bool flops, double *out) {
    const uint64_t work = flops ? r->cell.flops : r->cell.bytes;
    double seconds;
    if (!row_device_seconds(r, &seconds))
        seconds = (double)r->cell.ns * 1e-9;
    if (work == 0 || seconds <= 0)
        return false;
    *out = (double)work / seconds * 1e-9;
    return true;
}

/* The clocks worth a footer line: those of executors that have rows. */
static bool clock_shown(const struct bib_profile *p, const profile_clock_t *c) {
    if (c->state == PROFILE_CLOCK_UNKNOWN || c->name == NULL)
        return false;
    for (uint32_t i = 0; i < p->row_count; i++)
        if (strcmp(p->rows[i].executor, c->name) == 0)
            return true;
    return false;
}

static const char *clock_kind(const char *executor) {
    return strcmp(executor, "vulkan") == 0 ? "timestamp queries"
           : strcmp(executor, "cuda") == 0 ? "CUDA events"
                                           : "device timer";
}

bib_status_t bib_vm_profile_write(const bib_vm_t *vm, FILE *out, int json) {
    if (vm == NULL || out == NULL)
        return BIB_E_USAGE;
    if (vm->profile == NULL)
        return bib_vm_fail((bib_vm_t *)vm, BIB_E_STATE, "profiling is off: call bib_vm_profile");
    const uint32_t n = bib_vm_profile_rows(vm);
    const struct bib_profile *p = vm->profile;
    double total = 0;
    uint64_t executed = 0;
    for (uint32_t i = 0; i < n; i++) {
        const profile_row_t *r = &p->rows[i];
        total += (double)r->cell.ns * 1e-9;
        if (strcmp(r->op, "upload") != 0 && strcmp(r->op, "download") != 0)
            executed += r->cell.count;
    }
    if (json) {
        fprintf(out, "{\"instructions\":%" PRIu64 ",\"seconds\":%.9f,\"rows\":[", executed, total);
        for (uint32_t i = 0; i < n; i++) {
            const profile_row_t *r = &p->rows[i];
            const double seconds = (double)r->cell.ns * 1e-9;
            double g;
            fprintf(out,
                    "%s{\"op\":\"%s\",\"executor\":\"%s\",\"count\":%" PRIu64
                    ",\"seconds\":%.9f,\"mean_seconds\":%.9g,\"flops\":%" PRIu64
                    ",\"bytes\":%" PRIu64,
                    i > 0 ? "," : "", r->op, r->executor, r->cell.count, seconds,
                    seconds / (double)r->cell.count, r->cell.flops, r->cell.bytes);
            if (row_device_seconds(r, &g))
                fprintf(out, ",\"device_seconds\":%.9f", g);
            else
                fprintf(out, ",\"device_seconds\":null");
            if (rate(r, true, &g))
                fprintf(out, ",\"gflops\":%.6g", g);
            else
                fprintf(out, ",\"gflops\":null");
            if (rate(r, false, &g))
                fprintf(out, ",\"gbps\":%.6g", g);
            else
                fprintf(out, ",\"gbps\":null");
            fputc('}', out);
        }
        fputs("],\"clocks\":[", out);
        bool first = true;
        for (int place = 1; place < BIB_MAX_PLACES; place++) {
            const profile_clock_t *c = &p->clocks[place];
            if (!clock_shown(p, c))
                continue;
            fprintf(out, "%s{\"executor\":\"%s\",\"clock\":", first ? "" : ",", c->name);
            if (c->state == PROFILE_CLOCK_DEVICE) {
                fputs("\"device\"}", out);
            } else {
                fputs("\"host\",\"why\":", out);
                bib_json_string(out, c->why);
                fputc('}', out);
            }
            first = false;
        }
        fputs("]}\n", out);
        return BIB_OK;
    }
    fprintf(out, "profile: %" PRIu64 " instructions, %.6f s (host monotonic clock)\n", executed,
            total);
    fprintf(out, "%-18s %-8s %12s %12s %12s %12s %10s %10s\n", "op", "executor", "count",
            "total_ms", "mean_us", "device_ms", "GFLOP/s", "GB/s");
    for (uint32_t i = 0; i < n; i++) {
        const profile_row_t *r = &p->rows[i];
        const double seconds = (double)r->cell.ns * 1e-9;
        char dev[32] = "-", gf[32] = "-", gb[32] = "-";
        double g;
        if (row_device_seconds(r, &g))
            snprintf(dev, sizeof dev, "%.3f", g * 1e3);
        if (rate(r, true, &g))
            snprintf(gf, sizeof gf, "%.3f", g);
        if (rate(r, false, &g))
            snprintf(gb, sizeof gb, "%.3f", g);
        fprintf(out, "%-18s %-8s %12" PRIu64 " %12.3f %12.3f %12s %10s %10s\n", r->op, r->executor,
                r->cell.count, seconds * 1e3, seconds * 1e6 / (double)r->cell.count, dev, gf, gb);
    }
    for (int place = 1; place < BIB_MAX_PLACES; place++) {
        const profile_clock_t *c = &p->clocks[place];
        if (!clock_shown(p, c))
            continue;
        if (c->state == PROFILE_CLOCK_DEVICE)
            fprintf(out,
                    "%s: device clock (%s): device_ms is the time its kernels took on the "
                    "device; GFLOP/s and GB/s of %s rows use it\n",
                    c->name, clock_kind(c->name), c->name);
        else
            fprintf(out, "%s: no device clock (%s): %s rows are host-timed\n", c->name, c->why,
                    c->name);
    }
    return BIB_OK;
}

bib_status_t bib_vm_profile_report(const bib_vm_t *vm, int json, char **text) {
    if (text == NULL)
        return BIB_E_USAGE;
    *text = NULL;
    if (vm == NULL)
        return BIB_E_USAGE;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return bib_vm_fail((bib_vm_t *)vm, BIB_E_NOMEM, "profile report: host out of memory");
    bib_status_t st = bib_vm_profile_write(vm, f, json);
    if (fclose(f) != 0 && st == BIB_OK)
        st = bib_vm_fail((bib_vm_t *)vm, BIB_E_NOMEM, "profile report: host out of memory");
    if (st != BIB_OK) {
        free(buf);
        return st;
    }
    *text = buf;
    return BIB_OK;
}
