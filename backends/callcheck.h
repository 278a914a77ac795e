/* backends/callcheck.h: the kernel calls the GPU executors' kernels accept.
 *
 * The CUDA and Vulkan kernels take the same calls (the same kernels, dtypes,
 * shape relations and sub-operations) but for the rules bib_call_rule_t
 * names; the CPU executor's reference kernels (backends/cpu/ops.c) take more
 * and check less. This is those rules, once; the questions about a view or
 * a call (its rows, its padded shape, its operands' broadcast forms) the
 * kernels of every executor ask again when they run; and the checks of
 * values (GATHER's indices, i32 DIV's divisors) every executor makes before
 * it computes, with their messages. Device limits (grid sizes, index
 * widths, buffer ranges) are each executor's own and stay in its
 * supports(). */
#ifndef BIB_CALLCHECK_H
#define BIB_CALLCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* The elements of a view: the product of its dims (1 for rank 0). */
uint64_t bib_view_count(const bib_view_t *v);

/* The rows of a view along its last axis, whose length goes to *last (1 for
 * rank 0); 0 rows when that axis is empty. */
uint64_t bib_view_rows(const bib_view_t *v, uint32_t *last);

/* The rows a row kernel (SOFTMAX, LAYERNORM, RMSNORM, REDUCE, ARGMAX) runs
 * over: in0's along its last axis, whose length goes to *last. REDUCE and
 * ARGMAX write one output per row, also for rows of length 0, so theirs
 * are counted on the output. */
uint64_t bib_call_rows(const bib_call_t *call, uint32_t *last);

/* Axis k of the view's shape padded on the left with 1s to BIB_MAX_RANK
 * axes, as STRIDED's and TAKE's p[] index their output. */
static inline uint32_t bib_view_padded_dim(const bib_view_t *v, uint32_t k) {
    uint32_t at = k + v->rank;
    return at >= BIB_MAX_RANK ? v->dims[at - BIB_MAX_RANK] : 1;
}

/* How BINARY's in1 stands against in0; the values are the kernels' FORM_*
 * (shaders/cuda/elementwise.cu) and the Vulkan shader's broadcast mode. */
typedef enum bib_broadcast {
    BIB_BROADCAST_NONE = -1, /* none of the below: the call is refused */
    BIB_BROADCAST_SAME = 0,  /* as many elements as in0 */
    BIB_BROADCAST_ROW = 1,   /* one row as long as in0's last axis */
    BIB_BROADCAST_ONE = 2,   /* one element */
} bib_broadcast_t;

bib_broadcast_t bib_call_broadcast(const bib_call_t *call);
/* The same for any operand v against the view `to` (WHERE's in1 and in2
 * against its condition in0). */
bib_broadcast_t bib_view_broadcast(const bib_view_t *to, const bib_view_t *v);
/* The forms of in1 and in2 against in0 in forms[1] and forms[2] (SAME for
 * an input with no buffer, and forms[0], in0 against itself); false when an
 * input with a buffer does not broadcast. */
bool bib_call_forms(const bib_call_t *call, bib_broadcast_t forms[3]);

/* i32 TDIV: the first result element whose divisor is 0, or -1 when there is
 * none (or the result is empty). divisor: in1's n elements; count: the
 * result's. Whatever in1's form, that element's index is the index of the
 * first 0 in in1. Every executor checks this before it computes anything
 * and fails with BIB_E_TRAP and bib_i32_zero_divisor_message. */
int64_t bib_i32_zero_divisor(const int32_t *divisor, uint64_t n, uint64_t count);
void bib_i32_zero_divisor_message(char *buf, size_t cap, int64_t element);

/* GATHER: the position of the first of the n indices outside the table's
 * rows [0, rows), or -1 when there is none. Every executor checks this
 * before it copies anything and fails with BIB_E_TRAP and
 * bib_gather_index_message (index: the value at that position). */
int64_t bib_gather_bad_index(const int32_t *indices, uint64_t n, uint64_t rows);
void bib_gather_index_message(char *buf, size_t cap, int32_t index, int64_t position,
                              uint64_t rows);

/* An executor's error setter: writes the message as its error() and
 * returns status. */
typedef bib_status_t bib_executor_fail_fn(bib_executor_t *ex, bib_status_t status, const char *fmt,
                                          ...);

/* The two checks above on a GPU executor, whose operands live on the device:
 * GATHER's indices and i32 BINARY DIV's divisors (in1) come back to the host
 * through ops->download (one wait) and are checked there, so that the call
 * itself returns the error; any other call reads nothing back. BIB_OK when
 * the kernel may run; otherwise the status of a failed download (its
 * message already set), or fail's BIB_E_NOMEM ("<ops->name>: out of host
 * memory for ...") or BIB_E_TRAP with the check's message. */
bib_status_t bib_call_check_on_host(const bib_executor_ops_t *ops, bib_executor_fail_fn *fail,
                                    bib_executor_t *ex, const bib_call_t *call);

/* ARGSORT on a GPU places each element by a loop over its whole row, one
 * workgroup (block) a row: n^2 / 64 steps a lane. Rows longer than this
 * run on the CPU executor (a radix sort, linear in n), where a GPU's lanes
 * would loop for seconds (a vocabulary of 50,000: 39 million steps). */
#define BIB_ARGSORT_GPU_ROW_MAX 4096u

/* Rules where the executors' kernels differ, as bits for bib_call_shapes_ok. */
typedef enum bib_call_rule {
    /* TRANSPOSE's output has its input's dtype. The CUDA executor asks it,
     * the Vulkan one does not; both kernels move raw 32-bit words, and the
     * VM always passes the input's dtype. */
    BIB_CALL_RULE_TRANSPOSE_SAME_DTYPE = 1u << 0,
} bib_call_rule_t;

/* Whether the call names a kernel the GPU executors run, with the dtypes,
 * present buffers, shapes and sub-operation that kernel takes. rules: the
 * bib_call_rule_t bits that also apply. */
bool bib_call_shapes_ok(const bib_call_t *call, uint32_t rules);

/* STRIDED: whether every element the call's p[] reads lies inside its
 * source (in0, or in1 past the split), so a kernel trusts its indices. */
bool bib_call_strided_ok(const bib_call_t *call);

/* TAKE: whether every position the call's p[] names lies inside its view
 * (in0 but for the indexed axis, and in1, the i32 indices), and the indexed
 * axis has p[13] elements of stride p[12]. The indices' values are the VM's
 * to check (each in -p[13]..p[13]-1); the GPU kernels clamp any other into
 * the axis, so no call reads outside its buffer. */
bool bib_call_take_ok(const bib_call_t *call);

#endif
