/* tests/unit/test_null.c: the shared executor conformance suite
 * (executor_cts.h) on the null executor (backends/null), which is the
 * template for new executors and must pass it as any executor does. */
#include "backends/backend.h"
#include "backends/null/null.h"

#define CTS_SUITE null
#define CTS_EXECUTOR (&bib_null_executor)
#define CTS_DEVICE_NOUN "null"
#define CTS_DESCRIBE_WORDS "fma:", "denormals:", "rounding:"
#define CTS_NOMEM_WORDS "out of device memory"
#include "tests/unit/executor_cts.h"

CTS_TEST(every_kernel_has_an_entry_and_the_optional_slots_are_empty) {
    for (int k = 0; k < BIB_KERNEL__COUNT; k++)
        cr_expect_not_null(cts_ops->kernels[k], "kernel %s", bib_kernel_table[k].name);
    cr_expect_null(cts_ops->program_create);
    cr_expect_null(cts_ops->timing);
}
