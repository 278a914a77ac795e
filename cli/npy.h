/* cli/npy.h: NumPy .npy files for `bib run --input/--output`.
 *
 * Reads versions 1.0, 2.0 and 3.0 with dtype '<f4' or '<i4' in C order, up to
 * rank 6, and also '<i8' (numpy's and torch's default integers: token ids,
 * indices) and '|b1' (bool masks) as BIB's i32, an int64 outside int32 being
 * refused naming its index; writes version 1.0. Anything else (Fortran order,
 * other dtypes, a truncated file) is refused with a one-line message naming
 * the file. The
 * element bytes are little-endian in the file and in memory (BIB's tensors
 * are little-endian).
 */
#ifndef BIB_CLI_NPY_H
#define BIB_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"
#include "vm/fileio.h"

typedef struct bib_npy {
    bib_dtype_t dtype;
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
    void *data;       /* malloc'd; count * 4 bytes; the caller frees it with bib_npy_free */
    size_t bytes;     /* count * 4: the tensor's bytes */
    uint32_t in_file; /* bytes per element in the file: 4, or 8 ('<i8') or 1 ('|b1') */
} bib_npy_t;

/* Parses .npy bytes (path is for messages). Returns BIB_OK, or BIB_E_FORMAT
 * with msg set ("x.npy: fortran_order True is not supported; save a C-order
 * array"), or BIB_E_NOMEM. */
bib_status_t bib_npy_parse(const uint8_t *bytes, size_t size, const char *path, bib_npy_t *out,
                           char *msg, size_t cap);

/* Gives input `name` of vm from a file, reading only its header before the VM
 * has checked the shape and the memory cap (bib_vm_set_input_fill), then the
 * data straight into the VM: a file the cap refuses costs nothing, and no
 * copy is made. The file, header and data, may not pass max_file bytes (0:
 * the default cap). The status is the file's (BIB_E_IO, BIB_E_FORMAT,
 * BIB_E_NOMEM for too large) or the VM's (BIB_E_USAGE for a shape that does
 * not fit, BIB_E_NOMEM over the memory cap), with msg set. */
bib_status_t bib_npy_set_input(bib_vm_t *vm, const char *name, const char *path, uint64_t max_file,
                               char *msg, size_t cap);

/* Writes a version 1.0 file all or nothing (vm/fileio.h); BIB_E_IO with msg
 * set ("cannot write 'x.npy': File too large") on failure. */
bib_status_t bib_npy_write(const char *path, bib_dtype_t dtype, uint32_t rank, const uint32_t *dims,
                           const void *data, char *msg, size_t cap);

/* The first half of bib_npy_write, for a set of files that must appear
 * together: the file is written and flushed to a temporary file; the caller
 * then calls bib_file_out_commit, or bib_file_out_discard. On failure nothing
 * is left. */
bib_status_t bib_npy_begin(bib_file_out_t *file, const char *path, bib_dtype_t dtype, uint32_t rank,
                           const uint32_t *dims, const void *data, char *msg, size_t cap);

void bib_npy_free(bib_npy_t *npy);

#endif
