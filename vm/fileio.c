/* vm/fileio.c: bounded reads and all-or-nothing writes (see vm/fileio.h). */
#include "vm/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t bib_file_cap(uint64_t max) {
    return max ? max : BIB_FILE_SIZE_CAP_DEFAULT;
}

static bool is_continuation(char c) {
    return ((unsigned char)c & 0xC0) == 0x80;
}

const char *bib_path_quote(const char *path, bib_path_quote_t *q) {
    size_t n = strlen(path);
    if (n <= BIB_PATH_QUOTE_MAX)
        return path;
    int saved = errno; /* the message's strerror(errno) may be read after this */
    const size_t keep = (BIB_PATH_QUOTE_MAX - 3) / 2;
    size_t head = keep, tail = n - keep;
    while (head > 0 && is_continuation(path[head]))
        head--;
    while (tail < n && is_continuation(path[tail]))
        tail++;
    snprintf(q->text, sizeof q->text, "%.*s...%s", (int)head, path, path + tail);
    errno = saved;
    return q->text;
}

bib_status_t bib_file_too_large(const char *path, uint64_t max, char *why, size_t cap) {
    snprintf(why, cap,
             "cannot read '%s': larger than the file size cap of %" PRIu64
             " bytes (--max-file-size raises it)",
             BIB_PATH_QUOTE(path), bib_file_cap(max));
    return BIB_E_NOMEM;
}

/* The pieces a file is read in until its end is known: growing a single
   buffer would copy it at every doubling and, near the cap, hold the old and
   the new one together (2 GiB and more to refuse a 1 GiB stream). */
typedef struct chunk {
    uint8_t *bytes;
    size_t len, cap;
} chunk_t;

#define CHUNK_MIN ((size_t)1 << 16)
#define CHUNK_MAX ((size_t)64 << 20)
#define CHUNKS_MAX 128 /* 64 KiB doubling to 64 MiB, then 64 MiB each: far past 1 GiB */

static void free_chunks(chunk_t *chunks, int count) {
    for (int i = 0; i < count; i++)
        free(chunks[i].bytes);
}

/* path opened for reading ("-": a duplicate of stdin, read under the same
   cap as any file); -1 with why set when it cannot be. */
static int open_for_reading(const char *path, char *why, size_t cap) {
    int fd = strcmp(path, "-") == 0 ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
                                    : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        snprintf(why, cap, "cannot open '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
    return fd;
}

/* bib_file_read of path, already open on fd (closed here): a pipe is opened
   once, so none of its bytes are lost to a second open. */
static bib_status_t read_fd(int fd, const char *path, uint64_t max, uint8_t **bytes, size_t *size,
                            char *why, size_t cap) {
    *bytes = NULL;
    *size = 0;
    max = bib_file_cap(max);
    if (max > SIZE_MAX / 2)
        max = SIZE_MAX / 2;
    struct stat st;
    bool known = fstat(fd, &st) == 0;
    if (known && S_ISDIR(st.st_mode)) {
        close(fd);
        snprintf(why, cap, "cannot read '%s': %s", BIB_PATH_QUOTE(path), strerror(EISDIR));
        return BIB_E_IO;
    }
    /* st_size only sizes the first piece: it is 0 for pipes and devices, and
       a file may grow while it is read. One byte past max proves it too large. */
    size_t first = CHUNK_MIN;
    if (known && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= max)
        first = (size_t)st.st_size + 1;
    chunk_t chunks[CHUNKS_MAX];
    int count = 0;
    size_t total = 0;
    bib_status_t status = BIB_OK;
    for (;;) {
        chunk_t *c = count > 0 ? &chunks[count - 1] : NULL;
        if (c == NULL || c->len == c->cap) {
            size_t want = c == NULL ? first : total < CHUNK_MAX ? total : CHUNK_MAX;
            if (want < CHUNK_MIN && c != NULL)
                want = CHUNK_MIN;
            if (count == CHUNKS_MAX || (c = &chunks[count], c->bytes = malloc(want)) == NULL) {
                snprintf(why, cap, "cannot read '%s': out of memory", BIB_PATH_QUOTE(path));
                status = BIB_E_NOMEM;
                break;
            }
            c->len = 0;
            c->cap = want;
            count++;
        }
        ssize_t got = read(fd, c->bytes + c->len, c->cap - c->len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(why, cap, "cannot read '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
            status = BIB_E_IO;
            break;
        }
        if (got == 0)
            break;
        c->len += (size_t)got;
        total += (size_t)got;
        if (total > max) {
            status = bib_file_too_large(path, max, why, cap);
            break;
        }
    }
    close(fd);
    if (status != BIB_OK) {
        free_chunks(chunks, count);
        return status;
    }
    /* One piece with room for the NUL is the answer as it is. */
    uint8_t *buf;
    if (count == 1 && chunks[0].len < chunks[0].cap) {
        buf = chunks[0].bytes;
    } else {
        buf = malloc(total + 1);
        if (buf == NULL) {
            free_chunks(chunks, count);
            snprintf(why, cap, "cannot read '%s': out of memory", BIB_PATH_QUOTE(path));
            return BIB_E_NOMEM;
        }
        size_t at = 0;
        for (int i = 0; i < count; i++) {
            memcpy(buf + at, chunks[i].bytes, chunks[i].len);
            at += chunks[i].len;
            free(chunks[i].bytes);
        }
    }
    buf[total] = 0;
    *bytes = buf;
    *size = total;
    return BIB_OK;
}

bib_status_t bib_file_read(const char *path, uint64_t max, uint8_t **bytes, size_t *size, char *why,
                           size_t cap) {
    *bytes = NULL;
    *size = 0;
    int fd = open_for_reading(path, why, cap);
    return fd < 0 ? BIB_E_IO : read_fd(fd, path, max, bytes, size, why, cap);
}

bib_status_t bib_file_read_pages(const char *path, uint64_t max, bib_file_pages_t *f, char *why,
                                 size_t cap) {
    memset(f, 0, sizeof *f);
    int fd = open_for_reading(path, why, cap);
    if (fd < 0)
        return BIB_E_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (uint64_t)st.st_size > bib_file_cap(max) || (uint64_t)st.st_size >= SIZE_MAX / 2)
        /* "-", a pipe, an empty file, one over the cap: read as a stream is */
        return read_fd(fd, path, max, &f->bytes, &f->size, why, cap);
    /* One byte more than st_size: a read that fills it means the file grew.
       Read from where fd stands (stdin redirected from a file may not be at
       its start). */
    off_t start = lseek(fd, 0, SEEK_CUR);
    size_t want = (size_t)st.st_size + 1;
    long page = sysconf(_SC_PAGESIZE);
    size_t mapped = (want + (size_t)page - 1) & ~((size_t)page - 1);
    uint8_t *bytes = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bytes == MAP_FAILED) {
        close(fd);
        snprintf(why, cap, "cannot read '%s': out of memory for %zu bytes", BIB_PATH_QUOTE(path),
                 want - 1);
        return BIB_E_NOMEM;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, bytes + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(why, cap, "cannot read '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
            close(fd);
            munmap(bytes, mapped);
            return BIB_E_IO;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == want) { /* it grew: read it again, under the cap, as a stream is */
        munmap(bytes, mapped);
        if (start >= 0 && lseek(fd, start, SEEK_SET) == start)
            return read_fd(fd, path, max, &f->bytes, &f->size, why, cap);
        snprintf(why, cap, "cannot read '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
        close(fd);
        return BIB_E_IO;
    }
    close(fd);
    bytes[got] = 0; /* the mapping starts zeroed; this keeps the promise if it shrank */
    f->bytes = bytes;
    f->size = got;
    f->mapped = mapped;
    return BIB_OK;
}

void bib_file_pages_free(bib_file_pages_t *f) {
    if (f->mapped != 0)
        munmap(f->bytes, f->mapped);
    else
        free(f->bytes);
    memset(f, 0, sizeof *f);
}

/* The folder part of path ("." when it has none); the caller frees it. */
static char *folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* The mode a plain create would give: 0666 less the umask, read from
   /proc so that no other thread sees the umask change. */
static mode_t create_mode(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    unsigned mask = 0;
    bool found = false;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Umask: %o", &mask) == 1) {
            found = true;
            break;
        }
    if (f != NULL)
        fclose(f);
    if (!found) {
        mask = umask(022);
        umask((mode_t)mask);
    }
    return 0666 & ~(mode_t)mask;
}

/* The temporary files being written now, for bib_file_out_unlink_pending
   (a signal handler): a slot is claimed once the file exists and released
   after it was renamed or removed, so at worst the handler unlinks a name
   that is already gone. A file past the slots is not tracked. */
#define PENDING_MAX 64
static _Atomic(const char *) pending[PENDING_MAX];

static void pending_add(const char *tmp) {
    for (int i = 0; i < PENDING_MAX; i++) {
        const char *none = NULL;
        if (atomic_compare_exchange_strong(&pending[i], &none, tmp))
            return;
    }
}

static void pending_remove(const char *tmp) {
    for (int i = 0; i < PENDING_MAX; i++) {
        const char *was = tmp;
        if (atomic_compare_exchange_strong(&pending[i], &was, NULL))
            return;
    }
}

void bib_file_out_unlink_pending(void) {
    for (int i = 0; i < PENDING_MAX; i++) {
        const char *tmp = atomic_load(&pending[i]);
        if (tmp != NULL)
            unlink(tmp);
    }
}

bib_status_t bib_file_out_open(bib_file_out_t *out, const char *path, char *why, size_t cap) {
    memset(out, 0, sizeof *out);
    out->path = strdup(path);
    if (out->path == NULL) {
        snprintf(why, cap, "cannot create '%s': out of memory", BIB_PATH_QUOTE(path));
        return BIB_E_NOMEM;
    }
    if (strcmp(path, "-") == 0) {
        /* stdout: written directly, after what the process printed before. */
        fflush(stdout);
        int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
        out->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (out->f == NULL) {
            snprintf(why, cap, "cannot write to stdout: %s", strerror(errno));
            if (fd >= 0)
                close(fd);
            bib_file_out_discard(out);
            return BIB_E_IO;
        }
        return BIB_OK;
    }
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        /* A device or a pipe (/dev/null, /dev/stdout): there is no file to
           replace, so the bytes go to it directly. */
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        out->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (out->f == NULL) {
            snprintf(why, cap, "cannot write '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
            if (fd >= 0)
                close(fd);
            bib_file_out_discard(out);
            return BIB_E_IO;
        }
        return BIB_OK;
    }
    /* A link is followed: the file it names is replaced, and the link stays. */
    struct stat lst;
    out->target = exists && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) ? realpath(path, NULL)
                                                                           : strdup(path);
    if (out->target == NULL) {
        snprintf(why, cap, "cannot create '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
        bib_file_out_discard(out);
        return BIB_E_IO;
    }
    const char *slash = strrchr(out->target, '/');
    size_t dir_len = slash ? (size_t)(slash - out->target) + 1 : 0;
    const char *base = out->target + dir_len;
    /* ".NAME.XXXXXX" beside the target: the same file system, so rename is atomic. */
    size_t len = dir_len + 1 + strlen(base) + 8;
    out->tmp = malloc(len);
    if (out->tmp == NULL) {
        bib_file_out_discard(out);
        snprintf(why, cap, "cannot create '%s': out of memory", BIB_PATH_QUOTE(path));
        return BIB_E_NOMEM;
    }
    snprintf(out->tmp, len, "%.*s.%s.XXXXXX", (int)dir_len, out->target, base);
    int fd = mkostemp(out->tmp, O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "cannot create '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
        free(out->tmp);
        out->tmp = NULL;
        bib_file_out_discard(out);
        return BIB_E_IO;
    }
    pending_add(out->tmp);
    /* mkstemp makes the file 0600: give it the mode of the file it replaces,
       or the mode a plain create would. */
    (void)fchmod(fd, exists ? st.st_mode & 07777 : create_mode());
    out->f = fdopen(fd, "wb");
    if (out->f == NULL) {
        snprintf(why, cap, "cannot create '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
        close(fd);
        bib_file_out_discard(out);
        return BIB_E_IO;
    }
    return BIB_OK;
}

void bib_file_out_write(bib_file_out_t *out, const void *bytes, size_t size) {
    if (out->f == NULL || out->err != 0 || size == 0)
        return;
    errno = 0;
    if (fwrite(bytes, 1, size, out->f) != size)
        out->err = errno ? errno : EIO;
}

bib_status_t bib_file_out_close(bib_file_out_t *out, char *why, size_t cap) {
    if (out->f == NULL) {
        snprintf(why, cap, "cannot write '%s': it is not open",
                 BIB_PATH_QUOTE(out->path ? out->path : ""));
        return BIB_E_IO;
    }
    int err = out->err;
    errno = 0;
    if (err == 0 && fflush(out->f) != 0)
        err = errno ? errno : EIO;
    if (err == 0 && fsync(fileno(out->f)) != 0 && errno != EINVAL) /* EINVAL: a pipe */
        err = errno;
    errno = 0;
    if (fclose(out->f) != 0 && err == 0)
        err = errno ? errno : EIO;
    out->f = NULL;
    if (err != 0) {
        snprintf(why, cap, "cannot write '%s': %s", BIB_PATH_QUOTE(out->path), strerror(err));
        return BIB_E_IO;
    }
    return BIB_OK;
}

bib_status_t bib_file_out_commit(bib_file_out_t *out, char *why, size_t cap) {
    if (out->f != NULL) {
        bib_status_t st = bib_file_out_close(out, why, cap);
        if (st != BIB_OK) {
            bib_file_out_discard(out);
            return st;
        }
    }
    if (out->tmp == NULL) { /* written directly (a device or a pipe) */
        bib_file_out_discard(out);
        return BIB_OK;
    }
    if (rename(out->tmp, out->target) != 0) {
        snprintf(why, cap, "cannot write '%s': %s", BIB_PATH_QUOTE(out->path), strerror(errno));
        bib_file_out_discard(out);
        return BIB_E_IO;
    }
    /* The rename itself reaches the disk with the folder. */
    char *dir = folder_of(out->target);
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
    pending_remove(out->tmp);
    free(out->tmp);
    out->tmp = NULL;
    bib_file_out_discard(out);
    return BIB_OK;
}

void bib_file_out_discard(bib_file_out_t *out) {
    if (out->f != NULL)
        fclose(out->f);
    if (out->tmp != NULL) {
        unlink(out->tmp);
        pending_remove(out->tmp);
    }
    free(out->tmp);
    free(out->path);
    free(out->target);
    memset(out, 0, sizeof *out);
}

bib_status_t bib_file_write(const char *path, const void *bytes, size_t size, char *why,
                            size_t cap) {
    bib_file_out_t out;
    bib_status_t st = bib_file_out_open(&out, path, why, cap);
    if (st != BIB_OK)
        return st;
    bib_file_out_write(&out, bytes, size);
    return bib_file_out_commit(&out, why, cap);
}

bib_status_t bib_file_check_writable(const char *path, char *why, size_t cap) {
    if (strcmp(path, "-") == 0) /* stdout: a failed write is reported when it happens */
        return BIB_OK;
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        snprintf(why, cap, "cannot write '%s': %s", BIB_PATH_QUOTE(path), strerror(EISDIR));
        return BIB_E_IO;
    }
    if (exists && !S_ISREG(st.st_mode)) { /* a device or a pipe, written directly */
        if (access(path, W_OK) == 0)
            return BIB_OK;
        snprintf(why, cap, "cannot write '%s': %s", BIB_PATH_QUOTE(path), strerror(errno));
        return BIB_E_IO;
    }
    /* The folder that will hold the temporary file: a link's target's. */
    char *target = exists ? realpath(path, NULL) : NULL;
    char *dir = folder_of(target != NULL ? target : path);
    free(target);
    if (dir == NULL) {
        snprintf(why, cap, "cannot write '%s': out of memory", BIB_PATH_QUOTE(path));
        return BIB_E_NOMEM;
    }
    int err = 0;
    if (stat(dir, &st) != 0)
        err = errno;
    else if (!S_ISDIR(st.st_mode))
        err = ENOTDIR;
    else if (access(dir, W_OK | X_OK) != 0)
        err = errno;
    if (err != 0)
        snprintf(why, cap, "cannot write '%s': folder '%s': %s", BIB_PATH_QUOTE(path),
                 BIB_PATH_QUOTE(dir), strerror(err));
    free(dir);
    return err ? BIB_E_IO : BIB_OK;
}

bool bib_file_same(const char *a, const char *b) {
    /* "-" is a stream (stdin to read, stdout to write), never a file. */
    if (strcmp(a, "-") == 0 || strcmp(b, "-") == 0)
        return strcmp(a, b) == 0;
    struct stat sa, sb;
    /* Devices and pipes (/dev/stdin and /dev/stdout on one terminal) are
       never replaced, so never "the same file" in the sense that matters. */
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* One is still to be created: the same name in the same folder. */
    const char *base_a = strrchr(a, '/'), *base_b = strrchr(b, '/');
    base_a = base_a ? base_a + 1 : a;
    base_b = base_b ? base_b + 1 : b;
    if (strcmp(base_a, base_b) != 0)
        return false;
    char *dir_a = folder_of(a), *dir_b = folder_of(b);
    bool same = dir_a && dir_b && stat(dir_a, &sa) == 0 && stat(dir_b, &sb) == 0 &&
                sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    free(dir_a);
    free(dir_b);
    return same;
}
