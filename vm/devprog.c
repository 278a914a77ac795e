/* vm/devprog.c: user device programs at run time (VK_* opcodes, GPU_LAUNCH).
 *
 * Owns the run-time half of spec/device-code.md. The module's shaders and
 * kernels were checked by the verifier (SPIR-V header, binding and push
 * sizes, the argument count of every VK_COMPUTE and GPU_LAUNCH against what
 * its program declares, every register range inside the frame); what only a
 * run can know is checked here: that a register names a live tensor, that a
 * launch size fits 32 bits, that the device exists. There is no CPU fallback:
 * an arbitrary shader or kernel has no CPU equivalent, so a missing device is
 * a trap that says why. Programs are built on first use and kept until the
 * module goes away; the tensors they bind are moved by the tensor layer
 * (bib_tensor_buffer_on), so a tensor a shader wrote is read back by TGET or
 * an output like any other.
 */
#include "vm/devprog.h"

#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

static uint32_t pc_of(const bib_vm_t *vm, const bib_dinsn_t *ip) {
    return (uint32_t)(ip - vm->program.code);
}

static void family_release(bib_devprog_family_t *f) {
    if (f->progs != NULL && f->ex != NULL && f->ops->program_destroy != NULL)
        for (uint32_t i = 0; i < f->count; i++)
            if (f->progs[i] != NULL)
                f->ops->program_destroy(f->ex, f->progs[i]);
    free(f->progs);
    memset(f, 0, sizeof *f);
}

void bib_devprog_unload(bib_vm_t *vm) {
    family_release(&vm->devprog.vulkan);
    family_release(&vm->devprog.cuda);
}

/* The executor behind a device family, or a trap saying why there is none. */
static bib_status_t family_ops(bib_vm_t *vm, const bib_dinsn_t *ip, const char *executor,
                               const char *what, const bib_executor_ops_t **out) {
    const bib_executor_ops_t *ops = bib_executor_find(executor);
    if (ops == NULL)
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                              "this build has no %s executor (it has: %s), and a user %s has no "
                              "CPU equivalent",
                              executor, BIB_EXECUTORS, what);
    if (ops->program_create == NULL || ops->program_dispatch == NULL)
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                              "the %s executor of this build cannot run user %ss", executor, what);
    *out = ops;
    return BIB_OK;
}

/* A register that must name a tensor register (checked for every binding
   before any moves, so a bad one traps the same with or without a device). */
static bib_status_t check_tensor_reg(bib_vm_t *vm, const bib_dinsn_t *ip, uint32_t reg_at,
                                     uint64_t value) {
    uint32_t regs = vm->module->tensor_regs;
    if (value >= regs)
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                              "r%u holds %llu, which names no tensor register (the module has %u)",
                              reg_at, (unsigned long long)value, regs);
    return BIB_OK;
}

/* Makes t[R[reg_at]] valid on the family's executor for writing and returns
 * its buffer and byte size; remembers the executor. */
static bib_status_t bind_tensor(bib_vm_t *vm, const bib_dinsn_t *ip, bib_devprog_family_t *f,
                                const char *executor, uint32_t reg_at, uint64_t value, void **buf,
                                uint64_t *bytes) {
    uint32_t pc = pc_of(vm, ip);
    bib_status_t checked = check_tensor_reg(vm, ip, reg_at, value);
    if (checked != BIB_OK)
        return checked;
    bib_executor_t *ex = NULL;
    bib_status_t st = bib_tensor_buffer_on(vm, (uint32_t)value, executor, &ex, buf, true);
    if (st != BIB_OK) {
        /* Restate the tensor layer's reason as this instruction's trap. */
        char why[600];
        snprintf(why, sizeof why, "%s", bib_vm_error(vm));
        if (st == BIB_E_NOMEM)
            return bib_vm_trap_at(vm, BIB_E_NOMEM, pc, "t%llu: %s", (unsigned long long)value, why);
        return bib_vm_trap_at(vm, bib_trap_status(st), pc, "%s%s",
                              st == BIB_E_UNAVAILABLE ? "no device for user device code: " : "",
                              why);
    }
    if (f->ex != NULL && f->ex != ex)
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc,
                              "the %s executor was restarted while programs built on it were in "
                              "use",
                              executor);
    f->ex = ex;
    *bytes = vm->tensor.regs[value].count * 4;
    return BIB_OK;
}

/* The family's program for module entry index, built on first use. */
static bib_status_t family_program(bib_vm_t *vm, const bib_dinsn_t *ip, bib_devprog_family_t *f,
                                   uint32_t count, uint32_t index, bib_program_kind_t kind,
                                   const void *code, size_t size, const char *entry,
                                   uint32_t bindings, uint32_t push_bytes, const char *signature,
                                   const char *name, void **prog) {
    if (f->progs == NULL) {
        f->progs = calloc(count, sizeof *f->progs);
        if (f->progs == NULL)
            return bib_vm_trap_at(vm, BIB_E_NOMEM, pc_of(vm, ip), "host out of memory");
        f->count = count;
    }
    if (f->progs[index] == NULL) {
        bib_status_t st = f->ops->program_create(f->ex, kind, code, size, entry, bindings,
                                                 push_bytes, signature, &f->progs[index]);
        if (st != BIB_OK) {
            f->progs[index] = NULL;
            return bib_vm_trap_at(
                vm, bib_trap_status(st), pc_of(vm, ip), "%s '%s' could not be built: %s",
                kind == BIB_PROGRAM_SPIRV ? "shader" : "kernel", name, f->ops->error(f->ex));
        }
    }
    *prog = f->progs[index];
    return BIB_OK;
}

/* Launch sizes: registers r[at..at+n) as 32-bit counts. */
static bib_status_t launch_size(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R, uint32_t at,
                                uint32_t n, uint32_t *out) {
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = R[at + i];
        if (v > UINT32_MAX)
            return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                                  "launch size r%u = %llu does not fit 32 bits", at + i,
                                  (unsigned long long)v);
        out[i] = (uint32_t)v;
    }
    return BIB_OK;
}

static bib_status_t vk_init(bib_vm_t *vm, const bib_dinsn_t *ip) {
    const bib_executor_ops_t *ops;
    bib_status_t st = family_ops(vm, ip, "vulkan", "shader", &ops);
    if (st != BIB_OK)
        return st;
    int64_t want = ip->x.imm;
    if (want < -1)
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                              "device index %lld: expected -1 (the VM's device) or an index",
                              (long long)want);
    /* The VM's Vulkan device is chosen once, by the host (--device); a
       program may only confirm it. */
    const char *dev = vm->options.device;
    if (want >= 0 && dev != NULL && dev[0] != '\0') {
        char *end = NULL;
        long long given = strtoll(dev, &end, 10);
        if (*end != '\0' || given != want)
            return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                                  "VK_INIT asks for Vulkan device %lld but the VM runs on device "
                                  "'%s' (--device)",
                                  (long long)want, dev);
    }
    vm->devprog.vulkan.ops = ops;
    return BIB_OK;
}

static bib_status_t vk_compute(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    bib_devprog_family_t *f = &vm->devprog.vulkan;
    const bib_shader_decl_t *sh = &vm->module->shaders[ip->a];
    if (f->ops == NULL)
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                              "VK_COMPUTE before VK_INIT: initialise the Vulkan device first");
    uint32_t groups[3];
    bib_status_t st = launch_size(vm, ip, R, ip->b, 3, groups);
    for (uint32_t i = 0; i < sh->bindings && st == BIB_OK; i++)
        st = check_tensor_reg(vm, ip, ip->c + i, R[ip->c + i]);
    void *bufs[BIB_MAX_SHADER_BINDINGS];
    uint64_t sizes[BIB_MAX_SHADER_BINDINGS];
    for (uint32_t i = 0; i < sh->bindings && st == BIB_OK; i++)
        st = bind_tensor(vm, ip, f, "vulkan", ip->c + i, R[ip->c + i], &bufs[i], &sizes[i]);
    uint32_t push[BIB_MAX_PUSH_BYTES / 4];
    for (uint32_t i = 0; i < sh->push_bytes / 4; i++)
        push[i] = (uint32_t)R[ip->c + sh->bindings + i];
    void *prog = NULL;
    if (st == BIB_OK)
        st = family_program(vm, ip, f, vm->module->shader_count, ip->a, BIB_PROGRAM_SPIRV,
                            sh->spirv, (size_t)sh->words * 4, sh->entry, sh->bindings,
                            sh->push_bytes, NULL, sh->name, &prog);
    if (st != BIB_OK)
        return st;
    st = f->ops->program_dispatch(f->ex, prog, bufs, sizes, sh->bindings, push, sh->push_bytes,
                                  groups, NULL);
    if (st != BIB_OK)
        return bib_vm_trap_at(vm, bib_trap_status(st), pc_of(vm, ip), "shader '%s': %s", sh->name,
                              f->ops->error(f->ex));
    vm->tensor.last_place = "vulkan";
    return BIB_OK;
}

/* VK_SUBMIT and VK_SYNC: nothing was recorded before the first VK_COMPUTE
   started the executor, so there is nothing to do then. */
static bib_status_t vk_flush(bib_vm_t *vm, const bib_dinsn_t *ip, bool wait) {
    bib_devprog_family_t *f = &vm->devprog.vulkan;
    if (f->ops == NULL)
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                              "%s before VK_INIT: initialise the Vulkan device first",
                              wait ? "VK_SYNC" : "VK_SUBMIT");
    if (f->ex == NULL)
        return BIB_OK;
    bib_status_t st =
        wait || f->ops->submit == NULL ? f->ops->synchronize(f->ex) : f->ops->submit(f->ex);
    if (st != BIB_OK)
        return bib_vm_trap_at(vm, bib_trap_status(st), pc_of(vm, ip), "%s", f->ops->error(f->ex));
    return BIB_OK;
}

static bib_status_t gpu_launch(bib_vm_t *vm, const bib_dinsn_t *ip, const uint64_t *R) {
    bib_devprog_family_t *f = &vm->devprog.cuda;
    const bib_kernel_decl_t *k = &vm->module->kernels[ip->a];
    uint32_t size[6];
    bib_status_t st = launch_size(vm, ip, R, ip->b, 6, size);
    for (uint32_t i = 0; k->params[i] != '\0' && st == BIB_OK; i++)
        if (k->params[i] == 't')
            st = check_tensor_reg(vm, ip, ip->c + i, R[ip->c + i]);
    if (st == BIB_OK && f->ops == NULL)
        st = family_ops(vm, ip, "cuda", "kernel", &f->ops);
    void *bufs[BIB_MAX_KERNEL_PARAMS];
    uint64_t sizes[BIB_MAX_KERNEL_PARAMS];
    uint8_t slots[BIB_MAX_KERNEL_PARAMS * 8];
    uint32_t nbufs = 0, nslots = 0;
    for (uint32_t i = 0; k->params[i] != '\0' && st == BIB_OK; i++) {
        uint64_t v = R[ip->c + i];
        switch (k->params[i]) {
        case 't':
            st = bind_tensor(vm, ip, f, "cuda", ip->c + i, v, &bufs[nbufs], &sizes[nbufs]);
            nbufs++;
            continue;
        case 'i':
            v = (uint32_t)v;
            break;
        case 'f': {
            double d;
            float x;
            memcpy(&d, &v, 8);
            x = (float)d;
            uint32_t bits;
            memcpy(&bits, &x, 4);
            v = bits;
            break;
        }
        default: /* 'l' and 'd' pass the register's 64 bits */
            break;
        }
        bib_write_u64le(slots + 8 * nslots++, v);
    }
    void *prog = NULL;
    if (st == BIB_OK)
        st = family_program(vm, ip, f, vm->module->kernel_count, ip->a, BIB_PROGRAM_PTX, k->ptx,
                            (size_t)k->ptx_bytes + 1, k->entry, 0, 0, k->params, k->name, &prog);
    if (st != BIB_OK)
        return st;
    st = f->ops->program_dispatch(f->ex, prog, bufs, sizes, nbufs, slots, nslots * 8, size,
                                  size + 3);
    if (st != BIB_OK)
        return bib_vm_trap_at(vm, bib_trap_status(st), pc_of(vm, ip), "kernel '%s': %s", k->name,
                              f->ops->error(f->ex));
    vm->tensor.last_place = "cuda";
    return BIB_OK;
}

bib_status_t bib_devprog_exec(bib_vm_t *vm, const bib_dinsn_t *ip, uint64_t *R) {
    /* Where it runs, for traces and profiles: VK_INIT, VK_SUBMIT and VK_SYNC
       are the Vulkan executor's as much as VK_COMPUTE is. */
    vm->tensor.last_place = ip->op == BIB_OP_GPU_LAUNCH ? "cuda" : "vulkan";
    switch ((bib_opcode_t)ip->op) {
    case BIB_OP_VK_INIT:
        return vk_init(vm, ip);
    case BIB_OP_VK_COMPUTE:
        return vk_compute(vm, ip, R);
    case BIB_OP_VK_SUBMIT:
        return vk_flush(vm, ip, false);
    case BIB_OP_VK_SYNC:
        return vk_flush(vm, ip, true);
    case BIB_OP_GPU_LAUNCH:
        return gpu_launch(vm, ip, R);
    default:
        return bib_vm_trap_at(vm, BIB_E_TRAP, pc_of(vm, ip),
                              "opcode %s is not a device-program opcode",
                              bib_isa_table[ip->op].name);
    }
}
