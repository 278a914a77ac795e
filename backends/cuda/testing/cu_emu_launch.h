/* backends/cuda/testing/cu_emu_launch.h: what the mock driver calls of the
 * kernel emulator (cu_emu_sched.cpp) in $(BUILD)/tests/libcuda_emu.so, the
 * build of cu_mock_driver.c with BIB_CU_EMULATE defined.
 *
 * The emulator runs the g++ build of shaders/cuda/<name>.cu (cu_emu.h) on the
 * host: each CUDA thread a fiber, blocks one after another. Tests only. */
#ifndef BIB_CU_EMU_LAUNCH_H
#define BIB_CU_EMU_LAUNCH_H

#ifdef __cplusplus
extern "C" {
#endif

/* The host build of the kernel NAME (an extern "C" __global__ function of
 * shaders/cuda), or NULL when there is none. */
void *bib_cu_emu_kernel(const char *name);

/* Runs KERNEL (from bib_cu_emu_kernel) over the whole grid before it
 * returns; ARGS is the launch's one parameter, a bib_cu_args_t, and
 * OPTED_IN the dynamic shared memory the kernel was allowed past 48 KiB
 * (cuFuncSetAttribute; 0 for none). A launch that breaks a rule of the
 * device (shape limits, a barrier some thread cannot reach, a misaligned
 * cp.async, ...) prints why and aborts. */
void bib_cu_emu_launch(void *kernel, const char *name, const unsigned grid[3],
                       const unsigned block[3], unsigned shared_bytes, unsigned opted_in,
                       const void *args);

#ifdef __cplusplus
}
#endif

#endif
