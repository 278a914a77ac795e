/* vm/fileio.h: how BIB reads and writes files.
 *
 * Every read is bounded: a file larger than the cap is refused once the cap
 * is passed, whatever it is (a regular file, a pipe, /dev/zero), since
 * st_size says nothing for the last two. Every write is all or nothing: the
 * bytes go to a temporary file beside the target, which is flushed to disk
 * and then renamed over it, so the file that was there survives a full disk,
 * a size limit or a crash. Used by the library (modules, sources, caches) and
 * by the `bib` command (its inputs and outputs) alike.
 */
#ifndef BIB_VM_FILEIO_H
#define BIB_VM_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "include/bib.h"

/* A path as the messages below quote it: whole when it is at most
 * BIB_PATH_QUOTE_MAX bytes, else its first and last bytes around "..." (never
 * splitting a UTF-8 character), so that a message into a fixed buffer keeps
 * its closing quote and its reason whatever the path's length. Returns path
 * itself or q->text. BIB_PATH_QUOTE(path) is one for a single expression. */
#define BIB_PATH_QUOTE_MAX 200
typedef struct bib_path_quote {
    char text[BIB_PATH_QUOTE_MAX + 1];
} bib_path_quote_t;
const char *bib_path_quote(const char *path, bib_path_quote_t *q);
#define BIB_PATH_QUOTE(path) bib_path_quote((path), &(bib_path_quote_t){{0}})

/* Reads the whole of path into *bytes (malloc'd, with a NUL after the last
 * byte that *size does not count; the caller frees it). max is the largest
 * size accepted, 0 meaning BIB_FILE_SIZE_CAP_DEFAULT. The path "-" is stdin
 * (read to its end, under the same cap). Returns BIB_OK;
 * BIB_E_IO when the file cannot be opened or read (why: "cannot open 'x':
 * No such file or directory"); BIB_E_NOMEM when it is larger than max (why:
 * bib_file_too_large's text) or memory runs out. */
bib_status_t bib_file_read(const char *path, uint64_t max, uint8_t **bytes, size_t *size, char *why,
                           size_t cap);

/* A file read into pages of its own (a private anonymous mapping) instead of
 * the heap, for a reader that copies it out a piece at a time and gives back
 * the pages it is done with (bib_module_read_consuming): a module's
 * constants are then never in memory twice. bytes has a NUL after the last
 * byte, as bib_file_read's. A file that is not a regular one ("-", a pipe, a
 * device), or that grows while it is read, is read by bib_file_read instead
 * (mapped is 0: bytes is malloc'd, and nothing may be given back). Returns
 * what bib_file_read returns; bib_file_pages_free releases either kind. */
typedef struct bib_file_pages {
    uint8_t *bytes;
    size_t size;
    size_t mapped; /* the mapping's length; 0 when bytes came from malloc */
} bib_file_pages_t;
bib_status_t bib_file_read_pages(const char *path, uint64_t max, bib_file_pages_t *f, char *why,
                                 size_t cap);
void bib_file_pages_free(bib_file_pages_t *f);

/* The one message for a file over the size cap: "cannot read 'x': larger
 * than the file size cap of N bytes (--max-file-size raises it)". Returns
 * BIB_E_NOMEM, the status that goes with it. */
bib_status_t bib_file_too_large(const char *path, uint64_t max, char *why, size_t cap);

/* The cap that max stands for: max itself, or the default for 0. */
uint64_t bib_file_cap(uint64_t max);

/* A file being written: bytes go to a temporary file in the target's folder
 * until bib_file_out_commit renames it over the target. */
typedef struct bib_file_out {
    char *path;   /* the target, as given (for messages) */
    char *target; /* the file replaced: path, or the file a link at path names */
    char *tmp;    /* the temporary file beside it; NULL when path is a device or a
                     pipe (/dev/null, /dev/stdout), written directly */
    FILE *f;      /* open on tmp until bib_file_out_close */
    int err;      /* the first write's errno, 0 while all went well */
} bib_file_out_t;

/* Creates the temporary file for path. The path "-" is stdout, written
 * directly (there is nothing to replace). BIB_E_IO with why set ("cannot
 * create 'out/x.npy': No such file or directory") on failure. */
bib_status_t bib_file_out_open(bib_file_out_t *out, const char *path, char *why, size_t cap);
/* Appends bytes; a failure is remembered and reported by bib_file_out_close. */
void bib_file_out_write(bib_file_out_t *out, const void *bytes, size_t size);
/* Flushes the bytes to disk and closes the temporary file (still not in
 * place). BIB_E_IO with why naming the target and the reason (strerror). */
bib_status_t bib_file_out_close(bib_file_out_t *out, char *why, size_t cap);
/* Renames the closed temporary file over the target and releases out. */
bib_status_t bib_file_out_commit(bib_file_out_t *out, char *why, size_t cap);
/* Removes the temporary file and releases out (after any step; idempotent). */
void bib_file_out_discard(bib_file_out_t *out);
/* Removes every temporary file an open bib_file_out_t is writing, and nothing
 * else; async-signal-safe, for a handler of SIGINT or SIGTERM that then ends
 * the process (the targets keep what they held). */
void bib_file_out_unlink_pending(void);

/* All of the above for one buffer: the target holds exactly bytes, or what it
 * held before. */
bib_status_t bib_file_write(const char *path, const void *bytes, size_t size, char *why,
                            size_t cap);

/* Whether path could be written now: its folder exists, is a folder and is
 * writable, and path is not a folder ("-", stdout, always is). BIB_E_IO with
 * why set otherwise. */
bib_status_t bib_file_check_writable(const char *path, char *why, size_t cap);

/* Whether two paths name the same file: the same regular file when both
 * exist (devices and pipes never count), else the same name in the same
 * folder. "-" (a stream) is only the same as "-". */
bool bib_file_same(const char *a, const char *b);

#endif
