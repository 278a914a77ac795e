/* vm/tensor_gpu.c: the GPU_* opcodes (family 0xC0DA): the CUDA executor
 * driven by the program. GPU_INIT, GPU_ALLOC, GPU_UPLOAD, GPU_DOWNLOAD and
 * GPU_SYNC move and wait here; GPU_MATMUL and GPU_ATTENTION* are GKOP rows
 * and run through vm/tensor_ops.c forced onto the CUDA place. Without a CUDA
 * device they all run on the CPU executor, with the same bits. User kernels
 * (GPU_LAUNCH) are vm/devprog.c's.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "vm/tensor_internal.h"

/* ---- GPU_* opcodes: the CUDA executor, driven by the program --------------------- */

/* One warning per process: a host running many VMs (bib test runs each case
 * in its own) learns it once, not once per VM. */
static atomic_flag gpu_fallback_warned = ATOMIC_FLAG_INIT;

/* The place GPU_* opcodes run on: CUDA's, started on first use; without a
 * CUDA device the host (the CPU executor gives the same bits), with one
 * warning per process, or a BIB_E_UNAVAILABLE trap under options.strict_device. */
static bib_status_t gpu_place(bib_vm_t *vm, const bib_dinsn_t *ip, int *out) {
    bib_tensor_state_t *ts = &vm->tensor;
    if (!ts->gpu_resolved) {
        int p = bib_tensor_place_of("cuda");
        if (p >= 0 && bib_tensor_start_place(vm, p) == BIB_OK) {
            ts->gpu_place = p;
        } else {
            const char *why = p < 0 ? "this build has no CUDA executor" : ts->why[p];
            if (vm->options.strict_device)
                return bib_tensor_trap(vm, ip, BIB_E_UNAVAILABLE,
                                       "no CUDA device (%s); --strict-device forbids running GPU_* "
                                       "opcodes on the CPU",
                                       why);
            if (!atomic_flag_test_and_set(&gpu_fallback_warned))
                fprintf(stderr, "bib: no CUDA device (%s); GPU_* opcodes run on the CPU\n", why);
            ts->gpu_place = BIB_PLACE_HOST;
        }
        ts->gpu_resolved = true;
    }
    *out = ts->gpu_place;
    return BIB_OK;
}

bib_status_t bib_tensor_op_gpu(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    bib_tensor_state_t *ts = &vm->tensor;
    int place = BIB_PLACE_HOST;
    CHECK(gpu_place(vm, ip, &place));
    char why[300], rt[300];
    switch ((bib_opcode_t)ip->op) {
    case BIB_OP_GPU_INIT:
        ts->last_place = bib_tensor_place_name(place);
        return BIB_OK;
    case BIB_OP_GPU_ALLOC: {
        CHECK(bib_tensor_op_alloc(vm, ip, R));
        ts->last_place = bib_tensor_place_name(place);
        if (place == BIB_PLACE_HOST)
            return BIB_OK;
        /* Zeroes written on the device: no copy of the host's zeroes. */
        bib_tensor_t *t = &ts->regs[ip->a];
        bib_kspec_t k;
        memset(&k, 0, sizeof k);
        k.kernel = BIB_KERNEL_FILL;
        k.elementwise = true;
        k.forced = true;
        k.place = place;
        k.charged = true;
        uint32_t dims[BIB_MAX_RANK];
        memcpy(dims, t->dims, sizeof dims);
        return bib_tensor_run_kernel(vm, ip, ip->a, t->dtype, t->rank, dims, &k);
    }
    case BIB_OP_GPU_UPLOAD: {
        LIVE(t, ip->a);
        /* A copy's reads and writes, whether or not one is needed. */
        CHECK(bib_tensor_charge_fuel(vm, ip, bib_sat_mul(t->count, 2)));
        ts->last_place = bib_tensor_place_name(place);
        bib_status_t st = bib_tensor_start_place(vm, place);
        if (st == BIB_OK)
            st = bib_storage_make_valid(vm, t->storage, place, why, sizeof why);
        else
            snprintf(why, sizeof why, "%s", ts->why[place]);
        if (st != BIB_OK)
            return bib_tensor_trap(vm, ip, bib_trap_status(st), "moving %s to the %s executor: %s",
                                   bib_tensor_reg_text(vm, rt, sizeof rt, ip->a),
                                   bib_tensor_place_name(place), why);
        return BIB_OK;
    }
    case BIB_OP_GPU_DOWNLOAD: {
        LIVE(t, ip->a);
        CHECK(bib_tensor_charge_fuel(vm, ip, bib_sat_mul(t->count, 2)));
        return bib_tensor_to_host(vm, ip, ip->a, t);
    }
    case BIB_OP_GPU_SYNC: {
        ts->last_place = bib_tensor_place_name(place);
        if (place == BIB_PLACE_HOST || ts->ex[place] == NULL)
            return BIB_OK;
        bib_status_t st = ts->ops[place]->synchronize(ts->ex[place]);
        if (st != BIB_OK)
            return bib_tensor_trap(vm, ip, bib_trap_status(st), "waiting for the %s executor: %s",
                                   bib_tensor_place_name(place),
                                   bib_tensor_executor_error(vm, place));
        return BIB_OK;
    }
    case BIB_OP_GPU_MATMUL:
    case BIB_OP_GPU_ATTENTION:
    case BIB_OP_GPU_ATTENTION_CAUSAL:
        return bib_tensor_op_kernel(vm, ip, R, place);
    default:
        return bib_tensor_trap(vm, ip, BIB_E_TRAP, "opcode %s is not implemented in this build",
                               bib_isa_table[ip->op].name);
    }
}
