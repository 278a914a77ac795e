/* cli/npy.c: reading and writing NumPy .npy files (see cli/npy.h).
 *
 * The header is a Python dict literal; only the three keys numpy writes are
 * read ('descr', 'fortran_order', 'shape'), with a small scanner rather than
 * a Python parser: numpy's own writer is the format's reference.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/npy.h"
#include "vm/fileio.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6

static bib_status_t bad(char *msg, size_t cap, const char *path, const char *why) {
    snprintf(msg, cap, "%s: not a usable .npy file: %s", BIB_PATH_QUOTE(path), why);
    return BIB_E_FORMAT;
}

/* Up to 24 bytes of a header string for a one-line message: control and
 * non-ASCII bytes as \xNN, "..." when cut. out holds 24 * 4 + 4 bytes. */
static const char *shown(char *out, const char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && i < 24; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, 5, "\\x%02X", c);
    }
    if (len > 24)
        memcpy(out + o, "...", 3), o += 3;
    out[o] = '\0';
    return out;
}

/* Finds 'key': in the header and returns what follows (spaces skipped). */
/* How many times key appears quoted in the header ('key' or "key"). */
static int key_count(const char *header, const char *key) {
    char quoted[32];
    int n = 0;
    for (int q = 0; q < 2; q++) {
        snprintf(quoted, sizeof quoted, q ? "\"%s\"" : "'%s'", key);
        for (const char *p = strstr(header, quoted); p != NULL; p = strstr(p + 1, quoted))
            n++;
    }
    return n;
}

static const char *find_key(const char *header, const char *key) {
    char quoted[32];
    for (int q = 0; q < 2; q++) {
        snprintf(quoted, sizeof quoted, q ? "\"%s\"" : "'%s'", key);
        const char *p = strstr(header, quoted);
        if (p == NULL)
            continue;
        p += strlen(quoted);
        while (*p == ' ')
            p++;
        if (*p != ':')
            return NULL;
        p++;
        while (*p == ' ')
            p++;
        return p;
    }
    return NULL;
}

/* The prefix's version and header length: *start is where the header begins.
   size is what is present of the file (at least its first 12 bytes when it
   has them). */
static bib_status_t parse_prefix(const uint8_t *bytes, size_t size, const char *path,
                                 size_t *header_len_out, size_t *start_out, char *msg, size_t cap) {
    if (size < 10 || memcmp(bytes, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return bad(msg, cap, path, "it does not start with the .npy magic \\x93NUMPY");
    uint8_t major = bytes[6], minor = bytes[7];
    size_t header_len, start;
    if (major == 1) {
        header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12)
            return bad(msg, cap, path, "the header is truncated");
        header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8 | (size_t)bytes[10] << 16 |
                     (size_t)bytes[11] << 24;
        start = 12;
    } else {
        char why[96];
        snprintf(why, sizeof why, "format version %u.%u (this reader knows 1.0, 2.0 and 3.0)",
                 major, minor);
        return bad(msg, cap, path, why);
    }
    *header_len_out = header_len;
    *start_out = start;
    return BIB_OK;
}

/* Parses the prefix and the header dict: dtype, rank, dims, and out->bytes,
   the data's size; *data_at is where the data starts. */
static bib_status_t parse_header(const uint8_t *bytes, size_t size, const char *path,
                                 bib_npy_t *out, size_t *data_at_out, char *msg, size_t cap) {
    memset(out, 0, sizeof *out);
    size_t header_len, start;
    bib_status_t prefix = parse_prefix(bytes, size, path, &header_len, &start, msg, cap);
    if (prefix != BIB_OK)
        return prefix;
    if (header_len > size - start)
        return bad(msg, cap, path, "the header is truncated");
    char *header = malloc(header_len + 1);
    if (header == NULL) {
        snprintf(msg, cap, "%s: out of memory", BIB_PATH_QUOTE(path));
        return BIB_E_NOMEM;
    }
    memcpy(header, bytes + start, header_len);
    header[header_len] = '\0';

    bib_status_t st = BIB_OK;
    const char *descr = find_key(header, "descr");
    const char *fortran = find_key(header, "fortran_order");
    const char *shape = find_key(header, "shape");
    if (descr == NULL || fortran == NULL || shape == NULL) {
        st = bad(msg, cap, path, "the header lacks 'descr', 'fortran_order' or 'shape'");
        goto done;
    }
    /* A key given twice is ambiguous (numpy takes the last): refused. */
    static const char *const keys[] = {"descr", "fortran_order", "shape"};
    for (int k = 0; k < 3; k++)
        if (key_count(header, keys[k]) > 1) {
            char why[64];
            snprintf(why, sizeof why, "the header gives '%s' twice", keys[k]);
            st = bad(msg, cap, path, why);
            goto done;
        }
    char quote = *descr;
    const char *end = (quote == '\'' || quote == '"') ? strchr(descr + 1, quote) : NULL;
    if (end == NULL) {
        st = bad(msg, cap, path, "'descr' is not a string");
        goto done;
    }
    size_t dlen = (size_t)(end - descr - 1);
    out->in_file = 4;
    if (dlen == 3 && memcmp(descr + 1, "<f4", 3) == 0) {
        out->dtype = BIB_DTYPE_F32;
    } else if (dlen == 3 && memcmp(descr + 1, "<i4", 3) == 0) {
        out->dtype = BIB_DTYPE_I32;
    } else if (dlen == 3 && memcmp(descr + 1, "<i8", 3) == 0) {
        out->dtype = BIB_DTYPE_I32;
        out->in_file = 8;
    } else if (dlen == 3 && memcmp(descr + 1, "|b1", 3) == 0) {
        out->dtype = BIB_DTYPE_I32;
        out->in_file = 1;
    } else {
        char why[240], text[24 * 4 + 4];
        snprintf(why, sizeof why,
                 "dtype '%s' is not supported (float32 '<f4', int32 '<i4', int64 '<i8' and bool "
                 "'|b1' are; save another with astype)",
                 shown(text, descr + 1, dlen));
        st = bad(msg, cap, path, why);
        goto done;
    }
    if (strncmp(fortran, "True", 4) == 0) {
        st = bad(msg, cap, path, "fortran_order True is not supported; save a C-order array");
        goto done;
    }
    if (strncmp(fortran, "False", 5) != 0) {
        st = bad(msg, cap, path, "'fortran_order' is neither True nor False");
        goto done;
    }
    if (*shape != '(') {
        st = bad(msg, cap, path, "'shape' is not a tuple");
        goto done;
    }
    const char *p = shape + 1;
    uint64_t count = 1;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *num_end;
        errno = 0;
        unsigned long long v = strtoull(p, &num_end, 10);
        if (num_end == p || errno != 0 || *p == '-') {
            st = bad(msg, cap, path, "'shape' holds something other than sizes");
            goto done;
        }
        if (out->rank == BIB_MAX_RANK) {
            char why[64];
            snprintf(why, sizeof why, "the array has more than %d dimensions", BIB_MAX_RANK);
            st = bad(msg, cap, path, why);
            goto done;
        }
        if (v > 0x7FFFFFFFull || (v > 0 && count > (UINT64_MAX / 8) / v)) {
            st = bad(msg, cap, path, "the array is too large");
            goto done;
        }
        out->dims[out->rank++] = (uint32_t)v;
        count *= v;
        p = num_end;
        if (*p == 'L')
            p++;
    }
    *data_at_out = start + header_len;
    out->bytes = (size_t)(count * 4);
done:
    free(header);
    return st;
}

/* n elements of a file's data (in_file bytes each, little-endian) as BIB's
   4-byte elements; first is the index of src[0] in the array, for messages.
   An int64 outside int32, or a bool byte other than 0 and 1, is refused. */
static bib_status_t narrow(uint32_t in_file, const uint8_t *src, void *dst, size_t n,
                           uint64_t first, const char *path, char *msg, size_t cap) {
    int32_t *to = dst;
    if (in_file == 4) {
        if (n > 0)
            memcpy(dst, src, n * 4);
        return BIB_OK;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (in_file == 8) {
            uint64_t u = 0;
            for (int b = 7; b >= 0; b--)
                u = u << 8 | src[i * 8 + (size_t)b];
            v = (int64_t)u;
        } else {
            v = src[i];
        }
        if (in_file == 8 ? (v < INT32_MIN || v > INT32_MAX) : v > 1) {
            char why[160];
            snprintf(why, sizeof why, "element %llu is %lld, %s", (unsigned long long)(first + i),
                     (long long)v,
                     in_file == 8 ? "outside int32 (BIB's integer tensors are int32)"
                                  : "neither 0 nor 1 in a bool array");
            return bad(msg, cap, path, why);
        }
        to[i] = (int32_t)v;
    }
    return BIB_OK;
}

bib_status_t bib_npy_parse(const uint8_t *bytes, size_t size, const char *path, bib_npy_t *out,
                           char *msg, size_t cap) {
    size_t data_at;
    bib_status_t st = parse_header(bytes, size, path, out, &data_at, msg, cap);
    if (st != BIB_OK)
        return st;
    uint64_t need = out->bytes / 4 * out->in_file;
    if (need > size - data_at) {
        char why[160];
        snprintf(why, sizeof why, "the data is truncated: %llu bytes for the shape, %zu present",
                 (unsigned long long)need, size - data_at);
        return bad(msg, cap, path, why);
    }
    out->data = malloc(out->bytes ? out->bytes : 1);
    if (out->data == NULL) {
        snprintf(msg, cap, "%s: out of memory for %zu bytes", BIB_PATH_QUOTE(path), out->bytes);
        return BIB_E_NOMEM;
    }
    st = narrow(out->in_file, bytes + data_at, out->data, out->bytes / 4, 0, path, msg, cap);
    if (st != BIB_OK) {
        free(out->data);
        out->data = NULL;
    }
    return st;
}

/* Reads up to n bytes; fewer only at the end of the file or on an error. */
static size_t read_up_to(FILE *f, void *to, size_t n) {
    size_t got = 0;
    while (got < n) {
        size_t k = fread((uint8_t *)to + got, 1, n - got, f);
        if (k == 0)
            break;
        got += k;
    }
    return got;
}

/* The bytes of the file up to the data: prefix and header, whose length the
   prefix gives; *head is malloc'd. The header is bounded (NPY_HEADER_MAX) and
   so is the file (max_file), before anything is allocated for either. */
#define NPY_HEADER_MAX (1u << 20)

static bib_status_t read_head(FILE *f, const char *path, uint64_t max_file, uint8_t **head,
                              size_t *head_len, char *msg, size_t cap) {
    uint8_t prefix[12];
    size_t got = read_up_to(f, prefix, sizeof prefix);
    size_t header_len, start;
    bib_status_t st = parse_prefix(prefix, got, path, &header_len, &start, msg, cap);
    if (st != BIB_OK)
        return st;
    if (header_len > NPY_HEADER_MAX)
        return bad(msg, cap, path, "the header is longer than 1 MiB");
    if (start + header_len > bib_file_cap(max_file))
        return bib_file_too_large(path, max_file, msg, cap);
    uint8_t *buf = malloc(start + header_len + 1);
    if (buf == NULL) {
        snprintf(msg, cap, "%s: out of memory", BIB_PATH_QUOTE(path));
        return BIB_E_NOMEM;
    }
    /* A short header (malformed: it cannot hold the keys) ends inside the
       prefix read: only its own bytes are kept. */
    size_t have = got < start + header_len ? got : start + header_len;
    memcpy(buf, prefix, have);
    if (start + header_len > have)
        have += read_up_to(f, buf + have, start + header_len - have);
    if (have < start + header_len) {
        free(buf);
        if (ferror(f)) {
            snprintf(msg, cap, "cannot read '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
            return BIB_E_IO;
        }
        return bad(msg, cap, path, "the header is truncated");
    }
    *head = buf;
    *head_len = start + header_len;
    return BIB_OK;
}

typedef struct npy_fill {
    FILE *f;
    const char *path;
    char *msg;
    size_t cap;
    bib_status_t status;
    uint32_t in_file;
} npy_fill_t;

static bib_status_t truncated(char *msg, size_t cap, const char *path, uint64_t want,
                              uint64_t got) {
    char why[160];
    snprintf(why, sizeof why,
             "the data is truncated: %" PRIu64 " bytes for the shape, %" PRIu64 " present", want,
             got);
    return bad(msg, cap, path, why);
}

static int fill_short(npy_fill_t *fill, size_t want, size_t got) {
    if (ferror(fill->f)) {
        snprintf(fill->msg, fill->cap, "cannot read '%s': %s", BIB_PATH_QUOTE(fill->path),
                 strerror(errno));
        fill->status = BIB_E_IO;
    } else {
        fill->status = truncated(fill->msg, fill->cap, fill->path, want, got);
    }
    return -1;
}

/* Reads the data straight into the VM's buffer for the input; int64 and
   bool elements through a small buffer, narrowed or widened to 4 bytes. */
static int fill_from_file(void *ctx, void *data, size_t bytes) {
    npy_fill_t *fill = ctx;
    if (fill->in_file == 4) {
        size_t got = read_up_to(fill->f, data, bytes);
        return got == bytes ? 0 : fill_short(fill, bytes, got);
    }
    uint8_t buf[1 << 16];
    const size_t per = sizeof buf / fill->in_file, n = bytes / 4;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < per ? n - done : per;
        size_t got = read_up_to(fill->f, buf, k * fill->in_file);
        if (got != k * fill->in_file)
            return fill_short(fill, n * fill->in_file, done * fill->in_file + got);
        fill->status = narrow(fill->in_file, buf, (int32_t *)data + done, k, done, fill->path,
                              fill->msg, fill->cap);
        if (fill->status != BIB_OK)
            return -1;
        done += k;
    }
    return 0;
}

bib_status_t bib_npy_set_input(bib_vm_t *vm, const char *name, const char *path, uint64_t max_file,
                               char *msg, size_t cap) {
    /* "-" is stdin, as for a module. */
    int fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : strcmp(path, "-") == 0 ? NULL : fopen(path, "rb");
    if (f == NULL) {
        snprintf(msg, cap, "cannot open '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
        if (fd >= 0)
            close(fd);
        return BIB_E_IO;
    }
    struct stat st_f;
    const bool stated = fstat(fileno(f), &st_f) == 0;
    if (stated && S_ISDIR(st_f.st_mode)) {
        snprintf(msg, cap, "cannot open '%s': %s", BIB_PATH_QUOTE(path), strerror(EISDIR));
        fclose(f);
        return BIB_E_IO;
    }
    uint8_t *head = NULL;
    size_t head_len = 0, data_at;
    bib_npy_t npy;
    bib_status_t st = read_head(f, path, max_file, &head, &head_len, msg, cap);
    if (st == BIB_OK)
        st = parse_header(head, head_len, path, &npy, &data_at, msg, cap);
    free(head);
    /* A file shorter than its header's shape is truncated, however large
       the shape: it is not over the cap. A pipe is judged by the cap alone. */
    uint64_t data_bytes = st == BIB_OK ? npy.bytes / 4 * npy.in_file : 0;
    if (st == BIB_OK && stated && S_ISREG(st_f.st_mode) &&
        (uint64_t)st_f.st_size - head_len < data_bytes)
        st = truncated(msg, cap, path, data_bytes, (uint64_t)st_f.st_size - head_len);
    if (st == BIB_OK && data_bytes > bib_file_cap(max_file) - head_len)
        st = bib_file_too_large(path, max_file, msg, cap);
    if (st != BIB_OK) {
        fclose(f);
        return st;
    }
    npy_fill_t fill = {f, path, msg, cap, BIB_OK, npy.in_file};
    st = bib_vm_set_input_fill(vm, name, npy.dtype, npy.rank, npy.dims, fill_from_file, &fill);
    fclose(f);
    if (st == BIB_E_IO && fill.status != BIB_OK)
        return fill.status;
    if (st != BIB_OK)
        snprintf(msg, cap, "%s", bib_vm_error(vm));
    return st;
}

bib_status_t bib_npy_begin(bib_file_out_t *file, const char *path, bib_dtype_t dtype, uint32_t rank,
                           const uint32_t *dims, const void *data, char *msg, size_t cap) {
    char shape[128];
    size_t n = (size_t)snprintf(shape, sizeof shape, "(");
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++) {
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%u%s", dims[i],
                              rank == 1      ? ","
                              : i + 1 < rank ? ", "
                                             : "");
        count *= dims[i];
    }
    snprintf(shape + n, sizeof shape - n, ")");
    char header[256];
    int len =
        snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                 dtype == BIB_DTYPE_I32 ? "<i4" : "<f4", shape);
    /* numpy pads with spaces so the data starts on a 64-byte boundary. */
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    uint8_t prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t header_len = padded - 10;
    prefix[8] = (uint8_t)header_len;
    prefix[9] = (uint8_t)(header_len >> 8);
    bib_status_t st = bib_file_out_open(file, path, msg, cap);
    if (st != BIB_OK)
        return st;
    bib_file_out_write(file, prefix, sizeof prefix);
    bib_file_out_write(file, header, (size_t)len);
    char spaces[64];
    memset(spaces, ' ', sizeof spaces);
    bib_file_out_write(file, spaces, padded - total);
    bib_file_out_write(file, "\n", 1);
    bib_file_out_write(file, data, (size_t)count * 4);
    st = bib_file_out_close(file, msg, cap);
    if (st != BIB_OK)
        bib_file_out_discard(file);
    return st;
}

bib_status_t bib_npy_write(const char *path, bib_dtype_t dtype, uint32_t rank, const uint32_t *dims,
                           const void *data, char *msg, size_t cap) {
    bib_file_out_t file;
    bib_status_t st = bib_npy_begin(&file, path, dtype, rank, dims, data, msg, cap);
    return st == BIB_OK ? bib_file_out_commit(&file, msg, cap) : st;
}

void bib_npy_free(bib_npy_t *npy) {
    if (npy == NULL)
        return;
    free(npy->data);
    npy->data = NULL;
}
