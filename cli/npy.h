/* cli/npy.h: NumPy .npy files for `bib run --input/--output`.
 *
 * Reads versions 1.0, 2.0 and 3.0 with dtype '<f4' or '<i4' in C order, up to
 * rank 4; writes version 1.0. Anything else (Fortran order, other dtypes, a
 * truncated file) is refused with a one-line message naming the file. The
 * element bytes are little-endian in the file and in memory (BIB's tensors
 * are little-endian).
 */
#ifndef BIB_CLI_NPY_H
#define BIB_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "include/bib.h"

typedef struct bib_npy {
    bib_dtype_t dtype;
    uint32_t rank;
    uint32_t dims[BIB_MAX_RANK];
    void *data; /* malloc'd; count * 4 bytes; the caller frees it with bib_npy_free */
    size_t bytes;
} bib_npy_t;

/* Parses .npy bytes (path is for messages). Returns BIB_OK, or BIB_E_FORMAT
 * with msg set ("x.npy: fortran_order True is not supported; save a C-order
 * array"), or BIB_E_NOMEM. */
bib_status_t bib_npy_parse(const uint8_t *bytes, size_t size, const char *path, bib_npy_t *out,
                           char *msg, size_t cap);

/* Reads and parses a file: BIB_E_IO when it cannot be read. */
bib_status_t bib_npy_read(const char *path, bib_npy_t *out, char *msg, size_t cap);

/* Writes a version 1.0 file; BIB_E_IO with msg set on failure. */
bib_status_t bib_npy_write(const char *path, bib_dtype_t dtype, uint32_t rank, const uint32_t *dims,
                           const void *data, char *msg, size_t cap);

void bib_npy_free(bib_npy_t *npy);

#endif
