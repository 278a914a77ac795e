/* assembler/load.c: bib_vm_load_file, the public loader of a file that may
 * hold source text.
 *
 * Whoever holds source text assembles it, then hands the module to the VM:
 * a .basm file (or any file without the module magic) is assembled here,
 * under the VM's load policy, and the bytes go to bib_vm_load like any
 * module's; a .bib file goes to the VM as it is, read into pages of its own
 * that the loader gives back as it copies the constants out (the file is not
 * in memory twice). The VM itself never calls the assembler.
 * bib_vm_load_file_bytes does the same for a file's bytes already read (a
 * run under mpirun shares rank 0's stdin).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assembler/asm.h"
#include "vm/fileio.h"
#include "vm/vm.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The extension decides; any other name is sniffed for the magic. */
static bool is_source(const char *path, const uint8_t *buf, size_t size) {
    static const uint8_t magic[4] = {0x7F, 'B', 'I', 'B'};
    return ends_with(path, ".basm") ||
           (!ends_with(path, ".bib") && (size < 4 || memcmp(buf, magic, 4) != 0));
}

bib_status_t bib_vm_load_file(bib_vm_t *vm, const char *path) {
    if (vm == NULL)
        return BIB_E_USAGE;
    if (path == NULL)
        return bib_vm_fail(vm, BIB_E_USAGE, "bib_vm_load_file: path is NULL");
    bib_file_pages_t f;
    char why[512];
    bib_status_t read = bib_file_read_pages(path, vm->options.max_file_size, &f, why, sizeof why);
    if (read != BIB_OK)
        return bib_vm_fail(vm, read, "%s", why);
    bib_status_t st = f.mapped != 0 && !is_source(path, f.bytes, f.size)
                          ? bib_vm_load_consuming(vm, f.bytes, f.size, path)
                          : bib_vm_load_file_bytes(vm, f.bytes, f.size, path);
    bib_file_pages_free(&f);
    return st;
}

bib_status_t bib_vm_load_file_bytes(bib_vm_t *vm, const uint8_t *buf, size_t size,
                                    const char *path) {
    if (!is_source(path, buf, size))
        return bib_vm_load(vm, buf, size, path);
    uint8_t *bytes = NULL;
    size_t nbytes = 0;
    char *diagnostics = NULL;
    /* Under the load policy, device code is refused before the assembler
       reads a file a directive names or runs a compiler on it. */
    bib_status_t st =
        vm->options.deny & BIB_DENY_DEVICE_CODE
            ? bib_assemble_without_device_code((const char *)buf, size, path,
                                               vm->options.max_file_size, &bytes, &nbytes,
                                               &diagnostics)
            : bib_assemble_capped((const char *)buf, size, path, vm->options.max_file_size, &bytes,
                                  &nbytes, &diagnostics);
    if (st != BIB_OK) {
        const char *d = diagnostics != NULL ? diagnostics : "";
        size_t n = strlen(d);
        while (n > 0 && d[n - 1] == '\n')
            n--;
        st = bib_vm_fail(vm, st, "%s: assembly failed:\n%.*s", path, (int)n, d);
        bib_free(diagnostics);
        bib_free(bytes);
        return st;
    }
    bib_free(diagnostics);
    st = bib_vm_load(vm, bytes, nbytes, path);
    bib_free(bytes);
    return st;
}
