/* tests/fuzz/fuzz_npy.c: libFuzzer harness for the .npy reader (cli/npy.c).
 *
 * Promise checked: any bytes given as `--input NAME=FILE.npy` get a tensor or
 * one clear line, never a crash, an overread or a leak. For each input:
 *   - bib_npy_parse fails with BIB_E_FORMAT or BIB_E_NOMEM and a non-empty
 *     one-line message naming the file, or
 *   - it succeeds with dtype f32 or i32, rank <= 6, dims <= 2^31-1, and
 *     data of exactly 4 bytes per element of the shape (a 0 among the dims
 *     gives 0 bytes), copied from the input; and writing that tensor back
 *     with bib_npy_write and parsing the file again gives the same tensor.
 * Any violation aborts, so libFuzzer saves the input.
 *
 * Build and run: `make fuzz-build` (tests/fuzz/fuzz.mk), then
 *   build/fuzz/fuzz_npy -dict=tests/fuzz/npy.dict build/fuzz/corpus/npy build/fuzz/seeds/npy
 * Reproduce a saved input: build/fuzz/fuzz_npy crash-FILE, or
 *   `build/bib run PROGRAM --input NAME=crash-FILE`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/npy.h"

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_npy: %s%s%s\n", what, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
    abort();
}

static void check_message(const char *msg) {
    if (msg[0] == '\0')
        fail("parse", "failed without a message");
    if (strchr(msg, '\n') != NULL)
        fail("parse", "message spans several lines");
    if (strncmp(msg, "fuzz.npy: ", 10) != 0)
        fail("parse", "message does not name the file");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exact-size copy, so ASan sees any read past the input's end. */
    uint8_t *bytes = malloc(size ? size : 1);
    if (bytes == NULL)
        return 0;
    memcpy(bytes, data, size);
    bib_npy_t npy;
    char msg[512] = "";
    bib_status_t st = bib_npy_parse(bytes, size, "fuzz.npy", &npy, msg, sizeof msg);
    free(bytes);
    if (st != BIB_OK) {
        if (st != BIB_E_FORMAT && st != BIB_E_NOMEM)
            fail("parse", "failed with an unexpected status");
        check_message(msg);
        return 0;
    }
    if (npy.dtype != BIB_DTYPE_F32 && npy.dtype != BIB_DTYPE_I32)
        fail("parse", "accepted a dtype other than f32 and i32");
    if (npy.rank > BIB_MAX_RANK)
        fail("parse", "accepted more than 4 dimensions");
    uint64_t count = 1;
    for (uint32_t i = 0; i < npy.rank; i++) {
        if (npy.dims[i] > 0x7FFFFFFFu)
            fail("parse", "accepted a dimension over 2^31-1");
        count *= npy.dims[i];
    }
    if (npy.bytes != count * 4 || npy.bytes > size)
        fail("parse", "data size does not match the shape");
    if (npy.data == NULL)
        fail("parse", "succeeded without data");

    /* Written back and read again: the same tensor. */
    char path[] = "/tmp/fuzz_npy_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        bib_npy_free(&npy);
        return 0;
    }
    close(fd);
    if (bib_npy_write(path, npy.dtype, npy.rank, npy.dims, npy.data, msg, sizeof msg) != BIB_OK)
        fail("write", msg);
    FILE *f = fopen(path, "rb");
    uint8_t *written = malloc(npy.bytes + 4096);
    size_t got = f != NULL && written != NULL ? fread(written, 1, npy.bytes + 4096, f) : 0;
    if (f == NULL || written == NULL || ferror(f))
        fail("read back", "the written file cannot be read");
    fclose(f);
    unlink(path);
    bib_npy_t again;
    if (bib_npy_parse(written, got, path, &again, msg, sizeof msg) != BIB_OK)
        fail("read back", msg);
    free(written);
    if (again.dtype != npy.dtype || again.rank != npy.rank ||
        memcmp(again.dims, npy.dims, sizeof npy.dims) != 0 || again.bytes != npy.bytes ||
        memcmp(again.data, npy.data, npy.bytes) != 0)
        fail("read back", "the written file reads as another tensor");
    bib_npy_free(&again);
    bib_npy_free(&npy);
    return 0;
}
