/* vm/devprog.h: user device programs at run time (internal).
 *
 * Owns what VK_INIT, VK_COMPUTE, VK_SUBMIT, VK_SYNC and GPU_LAUNCH do
 * (spec/device-code.md): it turns the module's shaders and kernels into
 * executor programs on first use, finds each bound tensor's buffer on the
 * executor through the tensor layer (bib_tensor_buffer_on), and records the
 * dispatch. It knows no Vulkan or CUDA type: everything goes through the
 * executor interface's program_* members. Tensor residency is vm/tensor.c's.
 */
#ifndef BIB_DEVPROG_H
#define BIB_DEVPROG_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "include/bib.h"

struct bib_vm;
struct bib_dinsn;

/* One family of device programs (shaders on Vulkan, kernels on CUDA). */
typedef struct bib_devprog_family {
    const bib_executor_ops_t *ops; /* the executor programs were made on; NULL before the first */
    bib_executor_t *ex;
    void **progs; /* per module shader or kernel: the executor's program, NULL until first use */
    uint32_t count;
} bib_devprog_family_t;

typedef struct bib_devprog_state {
    bib_devprog_family_t vulkan; /* module shaders */
    bib_devprog_family_t cuda;   /* module kernels */
} bib_devprog_state_t;

/* Runs one of VK_INIT, VK_COMPUTE, VK_SUBMIT, VK_SYNC, GPU_LAUNCH; R is the
 * current register window. Returns BIB_OK or a trap status with the VM error
 * set (bib_vm_trap_at): no device, a register that holds no live tensor, a
 * launch size out of range, an executor that refused the program. */
bib_status_t bib_devprog_exec(struct bib_vm *vm, const struct bib_dinsn *ip, uint64_t *R);

/* Destroys every program made for the loaded module. Call when the module
 * is unloaded or replaced and before the executors shut down (the programs
 * belong to them). */
void bib_devprog_unload(struct bib_vm *vm);

#endif
