/* backends/cuda/cu_unary_rows.h: the CUDA unary kernels, one per elementwise
 * unary opcode (a KOP row of kernel UNARY in isa/opcodes.def), in
 * bib_unary_t order.
 *
 * Not a header of declarations: each inclusion expands
 * BIB_CU_UNARY_ROW(id, symbol) once per row, with id UNARY_<SUB> and symbol
 * the kernel's name, "bib_unary_<SUB>". Define BIB_CU_UNARY_ROW first. The
 * kernels list (cu_internal.h), the name tables (cu_device.c) and the
 * kernels themselves (shaders/cuda/elementwise.cu) all expand it, so a new
 * unary opcode brings its CUDA kernel with its row; its arithmetic is the
 * case of unary<OP> in shaders/cuda/common.cuh.
 */
#ifndef BIB_CU_UNARY_ROW
#error "define BIB_CU_UNARY_ROW(id, symbol) before including cu_unary_rows.h"
#endif
#include "isa/kernels.h"

#define KOP(name, code, k0, k1, k2, k3, flags, kernel, sub, sem)                                   \
    BIB_KOP_WHEN(BIB_KOP_IS(UNARY, kernel))(BIB_CU_UNARY_ROW(UNARY_##sub, bib_unary_##sub))
#include "isa/opcodes.def"
