/* vm/profile.h: the profiler's hook for tensor code (vm/profile.c).
 *
 * The rest of the profiler's interface (open/close around instructions,
 * copies) is in vm/vm.h; this is the one call tensor.c makes when an
 * executor starts, so that a GPU executor's device clock is on before it
 * records its first kernel. */
#ifndef BIB_PROFILE_H
#define BIB_PROFILE_H

#include "vm/vm.h"

/* The executor of place has just started. With --profile on, switches its
 * device clock on (ops->timing) or notes why it has none; otherwise does
 * nothing. */
void bib_profile_executor_started(bib_vm_t *vm, int place);

#endif
