/* vm/options.c: the versioned options struct and the write-callback streams.
 *
 * Owns the defaults of bib_options_t, the reading of a host's options of any
 * size this library knows (bib_options_take: fields beyond the host's size
 * keep their defaults), and the FILE streams that carry text to a host's
 * bib_write_fn, so the rest of the VM writes to a FILE either way. It does
 * not own what the options mean: api.c and the executors read them.
 */
#include <stdlib.h>
#include <string.h>

#include "vm/vm.h"

static void defaults(bib_options_t *o) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->max_memory = BIB_MEMORY_CAP_DEFAULT;
    o->max_call_depth = BIB_CALL_DEPTH_DEFAULT;
    o->trace_format = BIB_TRACE_OFF;
}

void bib_options_init_size(bib_options_t *options, size_t size) {
    if (options == NULL || size < sizeof options->size)
        return;
    bib_options_t full;
    defaults(&full);
    memcpy(options, &full, size < sizeof full ? size : sizeof full);
    options->size = size;
}

bib_status_t bib_options_take(const bib_options_t *in, bib_options_t *out) {
    defaults(out);
    if (in == NULL)
        return BIB_OK;
    if (in->size < BIB_OPTIONS_SIZE_MIN || in->size > sizeof *out)
        return BIB_E_USAGE;
    memcpy(out, in, in->size);
    out->size = sizeof *out;
    return BIB_OK;
}

/* ---- write-callback streams ------------------------------------------------ */

typedef struct {
    bib_write_fn write;
    void *user;
} writer_t;

static ssize_t writer_write(void *cookie, const char *bytes, size_t length) {
    const writer_t *w = cookie;
    if (length > 0)
        w->write(w->user, bytes, length);
    return (ssize_t)length;
}

static int writer_close(void *cookie) {
    free(cookie);
    return 0;
}

FILE *bib_stream_open(bib_write_fn write, void *user, int line_buffered) {
    writer_t *w = malloc(sizeof *w);
    if (w == NULL)
        return NULL;
    w->write = write;
    w->user = user;
    cookie_io_functions_t io = {
        .read = NULL, .write = writer_write, .seek = NULL, .close = writer_close};
    FILE *f = fopencookie(w, "w", io);
    if (f == NULL) {
        free(w);
        return NULL;
    }
    /* Trace lines arrive one call each; printed output unbuffered, so it keeps
       its order with what the host writes itself between host calls. */
    setvbuf(f, NULL, line_buffered ? _IOLBF : _IONBF, 0);
    return f;
}
