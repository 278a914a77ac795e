/* assembler/devcode.c: device code for the assembler (see devcode.h).
 *
 * Owns the calls to the external compilers (libshaderc in-process through
 * glsl.c, linked in libbib.a and loaded from libbib-glsl.so by libbib.so;
 * nvcc as a child process) and the SPIR-V reflection that spares a .shader
 * line from declaring its bindings and push size. The reflection reads only what the
 * VM's binding model needs (SPIR-V 1.0-1.6, section 2.3 "Physical Layout"):
 * decorations, types, constants and module-scope variables.
 */
#include "assembler/devcode.h"
#include "assembler/glsl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Finding the #version the way glslang does before it compiles anything
   (glslang's TInputScanner::scanVersion), so that its choice can be judged
   first: a character reader over src, -1 at the end. */
typedef struct glsl_scan {
    const unsigned char *p;
    size_t len, pos;
    int at_end;
} glsl_scan_t;

static int scan_peek(glsl_scan_t *s) {
    if (s->pos >= s->len) {
        s->at_end = 1;
        return -1;
    }
    return s->p[s->pos];
}

static int scan_get(glsl_scan_t *s) {
    int c = scan_peek(s);
    if (c >= 0)
        s->pos++;
    return c;
}

static void scan_unget(glsl_scan_t *s) {
    if (!s->at_end && s->pos > 0)
        s->pos--;
}

/* Skips blanks, newlines, and // and block comments. */
static void scan_blanks_and_comments(glsl_scan_t *s) {
    for (;;) {
        int c = scan_peek(s);
        while (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            scan_get(s);
            c = scan_peek(s);
        }
        if (c != '/')
            return;
        scan_get(s);
        c = scan_peek(s);
        if (c == '/') { /* to the end of the line; a backslash continues it */
            scan_get(s);
            c = scan_get(s);
            for (;;) {
                while (c >= 0 && c != '\\' && c != '\r' && c != '\n')
                    c = scan_get(s);
                if (c != '\\') {
                    while (c == '\r' || c == '\n')
                        c = scan_get(s);
                    break;
                }
                c = scan_get(s);
                if (c == '\r' && scan_peek(s) == '\n')
                    scan_get(s);
                c = scan_get(s);
            }
            if (c >= 0)
                scan_unget(s);
        } else if (c == '*') {
            scan_get(s);
            c = scan_get(s);
            for (;;) {
                while (c >= 0 && c != '*')
                    c = scan_get(s);
                if (c < 0 || (c = scan_get(s)) == '/')
                    break;
            }
        } else {
            scan_unget(s);
            return;
        }
    }
}

/* The version number of the first line that reads, after blanks and
   comments, '#' 'version' NUMBER [PROFILE]; 0 when there is none. *line is
   that line (from 1). Digits accumulate across rejected lines, and wrap, as
   glslang's do, and the digits of a rejected line count when no line is
   accepted. */
static uint32_t glsl_version(const char *src, size_t len, uint32_t *line) {
    glsl_scan_t s = {(const unsigned char *)src, len, 0, 0};
    uint32_t version = 0;
    size_t digits_at = 0; /* the '#' of the last line whose digits were read */
    int c;
    for (int first = 1;; first = 0) {
        if (!first) { /* the rest of this line and the line breaks after it */
            if (scan_peek(&s) != '\n' && scan_peek(&s) != '\r')
                do
                    c = scan_get(&s);
                while (c >= 0 && c != '\n' && c != '\r');
            while (scan_peek(&s) == '\n' || scan_peek(&s) == '\r')
                scan_get(&s);
            if (scan_peek(&s) < 0)
                break;
        }
        scan_blanks_and_comments(&s);
        size_t hash = s.pos;
        if (scan_get(&s) != '#')
            continue;
        do
            c = scan_get(&s);
        while (c == ' ' || c == '\t');
        const char *word = "version";
        while (*word != '\0' && c == *word) {
            word++;
            if (*word != '\0')
                c = scan_get(&s);
        }
        if (*word != '\0')
            continue;
        do
            c = scan_get(&s);
        while (c == ' ' || c == '\t');
        if (c >= '0' && c <= '9')
            digits_at = hash;
        while (c >= '0' && c <= '9') {
            version = 10u * version + (uint32_t)(c - '0');
            c = scan_get(&s);
        }
        if (version == 0)
            continue;
        while (c == ' ' || c == '\t')
            c = scan_get(&s);
        for (int n = 0; n < 13 && c >= 0 && c != ' ' && c != '\t' && c != '\n' && c != '\r'; n++)
            c = scan_get(&s);
        if (c >= 0 && c != ' ' && c != '\t' && c != '\n' && c != '\r')
            continue;
        break;
    }
    *line = 1;
    for (size_t i = 0; i < digits_at; i++)
        *line += src[i] == '\n';
    return version;
}

#ifdef BIB_GLSL_PLUGIN
/* libbib.so: the compiler lives in libbib-glsl.so.N, found beside libbib.so
 * (its run path is $ORIGIN) or by the dynamic loader's search, and loaded
 * once; it stays loaded for the life of the process. */
typedef int (*glsl_compile_fn)(const char *, size_t, const char *, const char *, uint32_t **,
                               uint32_t *, char **);
static pthread_once_t glsl_once = PTHREAD_ONCE_INIT;
static glsl_compile_fn glsl_compile;
static char glsl_why[512];

static void glsl_open(void) {
    void *h = dlopen(BIB_GLSL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
        *(void **)&glsl_compile = dlsym(h, BIB_GLSL_SYMBOL);
    if (glsl_compile == NULL)
        snprintf(glsl_why, sizeof glsl_why,
                 "GLSL needs the shader compiler " BIB_GLSL_LIBRARY
                 ", which could not be loaded (%s); install it beside libbib.so, or give "
                 "the shader as SPIR-V",
                 dlerror());
}

static int glsl_run(const char *src, size_t len, const char *name, const char *entry,
                    uint32_t **words, uint32_t *count, char **errors) {
    pthread_once(&glsl_once, glsl_open);
    if (glsl_compile == NULL) {
        *words = NULL;
        *count = 0;
        *errors = strdup(glsl_why);
        return 0;
    }
    return glsl_compile(src, len, name, entry, words, count, errors);
}
#else
static int glsl_run(const char *src, size_t len, const char *name, const char *entry,
                    uint32_t **words, uint32_t *count, char **errors) {
    return bib_glsl_compile(src, len, name, entry, words, count, errors);
}
#endif

int bib_devcode_glsl(const char *src, size_t len, const char *name, const char *entry,
                     uint32_t **words, uint32_t *count, char **errors) {
    *words = NULL;
    *count = 0;
    *errors = NULL;
    /* With no #version glslang takes 110. For 110 to 140 it cannot even
       declare its own built-in functions for a compute shader, and prints
       them all (about 260 KB) on stdout; none of those versions can compile
       a compute shader, so they are refused here, in one line. */
    uint32_t line = 0, version = glsl_version(src, len, &line);
    if (version == 0 || version == 110 || version == 120 || version == 130 || version == 140) {
        const char *need = "a compute shader needs '#version 430' or later, or '#version 310 es'";
        size_t cap = strlen(name) + strlen(need) + 64;
        if ((*errors = malloc(cap)) == NULL)
            return 0;
        if (version == 0)
            snprintf(*errors, cap, "no readable '#version' line: %s", need);
        else
            snprintf(*errors, cap, "%s:%u: error: '#version %u' is too old: %s", name, line,
                     version, need);
        return 0;
    }
    return glsl_run(src, len, name, entry, words, count, errors);
}

/* SPIR-V numbers used below (SPIR-V specification, section 3). */
enum {
    SPV_OP_CONSTANT = 43,
    SPV_OP_TYPE_INT = 21,
    SPV_OP_TYPE_FLOAT = 22,
    SPV_OP_TYPE_VECTOR = 23,
    SPV_OP_TYPE_MATRIX = 24,
    SPV_OP_TYPE_ARRAY = 28,
    SPV_OP_TYPE_RUNTIME_ARRAY = 29,
    SPV_OP_TYPE_STRUCT = 30,
    SPV_OP_TYPE_POINTER = 32,
    SPV_OP_VARIABLE = 59,
    SPV_OP_DECORATE = 71,
    SPV_OP_MEMBER_DECORATE = 72,
    SPV_DEC_BLOCK = 2,
    SPV_DEC_BUFFER_BLOCK = 3,
    SPV_DEC_ARRAY_STRIDE = 6,
    SPV_DEC_MATRIX_STRIDE = 7,
    SPV_DEC_BINDING = 33,
    SPV_DEC_DESCRIPTOR_SET = 34,
    SPV_DEC_OFFSET = 35,
    SPV_SC_UNIFORM_CONSTANT = 0,
    SPV_SC_UNIFORM = 2,
    SPV_SC_PUSH_CONSTANT = 9,
    SPV_SC_STORAGE_BUFFER = 12,
};

#define REFLECT_MAX_MEMBERS 64

typedef struct spv_id {
    uint32_t op;     /* defining instruction (type, constant or variable) */
    uint32_t a, b;   /* operands: see reflect_size and the variable walk */
    uint32_t value;  /* OpConstant: its low word */
    uint32_t stride; /* ArrayStride or MatrixStride */
    int32_t binding, set;
    uint8_t block, buffer_block;
    uint32_t member_count;
    uint32_t member_type[REFLECT_MAX_MEMBERS];
    uint32_t member_offset[REFLECT_MAX_MEMBERS];
} spv_id_t;

/* Bytes a type occupies in a push-constant block (explicit layout). */
static uint64_t reflect_size(const spv_id_t *ids, uint32_t bound, uint32_t t, int depth) {
    if (t >= bound || depth > 16)
        return 0;
    const spv_id_t *d = &ids[t];
    switch (d->op) {
    case SPV_OP_TYPE_INT:
    case SPV_OP_TYPE_FLOAT:
        return d->a / 8;
    case SPV_OP_TYPE_VECTOR:
        return reflect_size(ids, bound, d->a, depth + 1) * d->b;
    case SPV_OP_TYPE_MATRIX:
        return (uint64_t)(d->stride ? d->stride : reflect_size(ids, bound, d->a, depth + 1)) * d->b;
    case SPV_OP_TYPE_ARRAY:
        return d->b < bound ? (uint64_t)d->stride * ids[d->b].value : 0;
    case SPV_OP_TYPE_STRUCT: {
        uint64_t end = 0;
        for (uint32_t m = 0; m < d->member_count; m++) {
            uint64_t e =
                d->member_offset[m] + reflect_size(ids, bound, d->member_type[m], depth + 1);
            if (e > end)
                end = e;
        }
        return end;
    }
    default:
        return 0;
    }
}

int bib_devcode_reflect(const uint32_t *w, uint32_t count, uint32_t *bindings, uint32_t *push_bytes,
                        char *why, size_t cap) {
    *bindings = 0;
    *push_bytes = 0;
    if (count < 5 || w[0] != 0x07230203u || w[3] == 0 || w[3] > (1u << 22)) {
        snprintf(why, cap, "not a SPIR-V module (bad header)");
        return 0;
    }
    uint32_t bound = w[3];
    spv_id_t *ids = calloc(bound, sizeof *ids);
    if (ids == NULL) {
        snprintf(why, cap, "out of memory reflecting the shader");
        return 0;
    }
    for (uint32_t i = 0; i < bound; i++)
        ids[i].binding = ids[i].set = -1;
    int ok = 1;
    /* First pass: decorations and type, constant and variable definitions
       (all at module scope, before any function). */
    for (uint32_t at = 5; at < count && ok;) {
        uint32_t n = w[at] >> 16, op = w[at] & 0xFFFF;
        if (n == 0 || at + n > count) {
            snprintf(why, cap, "SPIR-V instruction at word %u runs past the end", at);
            ok = 0;
            break;
        }
        const uint32_t *x = w + at + 1;
        uint32_t nx = n - 1;
        if (op == SPV_OP_DECORATE && nx >= 2 && x[0] < bound) {
            spv_id_t *d = &ids[x[0]];
            if (x[1] == SPV_DEC_BINDING && nx >= 3)
                d->binding = (int32_t)x[2];
            else if (x[1] == SPV_DEC_DESCRIPTOR_SET && nx >= 3)
                d->set = (int32_t)x[2];
            else if (x[1] == SPV_DEC_BLOCK)
                d->block = 1;
            else if (x[1] == SPV_DEC_BUFFER_BLOCK)
                d->buffer_block = 1;
            else if ((x[1] == SPV_DEC_ARRAY_STRIDE || x[1] == SPV_DEC_MATRIX_STRIDE) && nx >= 3)
                d->stride = x[2];
        } else if (op == SPV_OP_MEMBER_DECORATE && nx >= 4 && x[0] < bound &&
                   x[2] == SPV_DEC_OFFSET && x[1] < REFLECT_MAX_MEMBERS) {
            ids[x[0]].member_offset[x[1]] = x[3];
        } else if ((op == SPV_OP_TYPE_INT || op == SPV_OP_TYPE_FLOAT) && nx >= 2 && x[0] < bound) {
            ids[x[0]].op = op;
            ids[x[0]].a = x[1];
        } else if ((op == SPV_OP_TYPE_VECTOR || op == SPV_OP_TYPE_MATRIX ||
                    op == SPV_OP_TYPE_ARRAY) &&
                   nx >= 3 && x[0] < bound) {
            ids[x[0]].op = op;
            ids[x[0]].a = x[1];
            ids[x[0]].b = x[2];
        } else if (op == SPV_OP_TYPE_RUNTIME_ARRAY && nx >= 2 && x[0] < bound) {
            ids[x[0]].op = op;
            ids[x[0]].a = x[1];
        } else if (op == SPV_OP_TYPE_STRUCT && nx >= 1 && x[0] < bound) {
            spv_id_t *d = &ids[x[0]];
            d->op = op;
            d->member_count = nx - 1 < REFLECT_MAX_MEMBERS ? nx - 1 : REFLECT_MAX_MEMBERS;
            for (uint32_t m = 0; m < d->member_count; m++)
                d->member_type[m] = x[1 + m];
        } else if (op == SPV_OP_TYPE_POINTER && nx >= 3 && x[0] < bound) {
            ids[x[0]].op = op;
            ids[x[0]].a = x[1]; /* storage class */
            ids[x[0]].b = x[2]; /* pointee */
        } else if (op == SPV_OP_CONSTANT && nx >= 3 && x[1] < bound) {
            ids[x[1]].op = op;
            ids[x[1]].value = x[2];
        } else if (op == SPV_OP_VARIABLE && nx >= 3 && x[1] < bound) {
            ids[x[1]].op = op;
            ids[x[1]].a = x[2]; /* storage class */
            ids[x[1]].b = x[0]; /* pointer type */
        }
        at += n;
    }
    uint32_t highest = 0;
    for (uint32_t v = 0; v < bound && ok; v++) {
        const spv_id_t *d = &ids[v];
        if (d->op != SPV_OP_VARIABLE)
            continue;
        uint32_t sc = d->a;
        uint32_t pointee = d->b < bound ? ids[d->b].b : 0;
        const spv_id_t *type = pointee < bound ? &ids[pointee] : NULL;
        if (sc == SPV_SC_PUSH_CONSTANT) {
            uint64_t size = reflect_size(ids, bound, pointee, 0);
            *push_bytes = (uint32_t)((size + 3) & ~(uint64_t)3);
        } else if (sc == SPV_SC_STORAGE_BUFFER ||
                   (sc == SPV_SC_UNIFORM && type != NULL && type->buffer_block)) {
            if (d->set > 0) {
                snprintf(why, cap, "a buffer is in descriptor set %d; user shaders use set 0 only",
                         d->set);
                ok = 0;
            } else if (d->binding < 0) {
                snprintf(why, cap, "a buffer has no binding decoration");
                ok = 0;
            } else if ((uint32_t)d->binding + 1 > highest) {
                highest = (uint32_t)d->binding + 1;
            }
        } else if (sc == SPV_SC_UNIFORM || sc == SPV_SC_UNIFORM_CONSTANT) {
            snprintf(why, cap,
                     "the shader declares a uniform block, image or sampler (binding %d); user "
                     "shaders bind storage buffers ('buffer' blocks) only",
                     d->binding);
            ok = 0;
        }
    }
    free(ids);
    if (ok)
        *bindings = highest;
    return ok;
}

int bib_devcode_read_file(const char *path, char **bytes, size_t *size, char *why, size_t cap) {
    *bytes = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, cap, "cannot open '%s': %s", path, strerror(errno));
        return 0;
    }
    size_t len = 0, room = 4096;
    char *buf = malloc(room + 1);
    while (buf != NULL) {
        size_t got = fread(buf + len, 1, room - len, f);
        len += got;
        if (got == 0)
            break;
        if (len == room) {
            if (room >= (256u << 20)) {
                snprintf(why, cap, "'%s' is larger than 256 MiB", path);
                free(buf);
                fclose(f);
                return 0;
            }
            char *more = realloc(buf, room * 2 + 1);
            if (more == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            room *= 2;
        }
    }
    int failed = ferror(f);
    int err = errno;
    fclose(f);
    if (buf == NULL || failed) {
        const char *reason = buf == NULL ? "out of memory" : strerror(err != 0 ? err : EIO);
        free(buf);
        snprintf(why, cap, "cannot read '%s': %s", path, reason);
        return 0;
    }
    buf[len] = '\0';
    *bytes = buf;
    *size = len;
    return 1;
}

int bib_devcode_nvcc(const char *path, char **ptx, size_t *size, char *why, size_t cap) {
    *ptx = NULL;
    *size = 0;
    char out[] = "/tmp/bib-nvcc-XXXXXX";
    int fd = mkstemp(out);
    if (fd < 0) {
        snprintf(why, cap, "cannot make a temporary file for nvcc: %s", strerror(errno));
        return 0;
    }
    close(fd);
    char log[] = "/tmp/bib-nvcc-log-XXXXXX";
    int lfd = mkstemp(log);
    if (lfd < 0) {
        unlink(out);
        snprintf(why, cap, "cannot make a temporary file for nvcc: %s", strerror(errno));
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(lfd, 1);
        dup2(lfd, 2);
        /* nvcc on PATH first, then the toolkit's usual homes, each named by
         * its full path: nvcc finds its own tools from argv[0]. */
        execlp("nvcc", "nvcc", "-ptx", "-o", out, path, (char *)NULL);
        const char *home = getenv("CUDA_HOME");
        char exe[4096];
        if (home != NULL && home[0] != '\0' &&
            (size_t)snprintf(exe, sizeof exe, "%s/bin/nvcc", home) < sizeof exe)
            execl(exe, exe, "-ptx", "-o", out, path, (char *)NULL);
        execl("/usr/local/cuda/bin/nvcc", "/usr/local/cuda/bin/nvcc", "-ptx", "-o", out, path,
              (char *)NULL);
        _exit(127);
    }
    close(lfd);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        snprintf(why, cap, "cannot run nvcc: %s", strerror(errno));
        unlink(out);
        unlink(log);
        return 0;
    }
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        char *text = NULL;
        size_t n = 0;
        char ignored[8];
        bib_devcode_read_file(log, &text, &n, ignored, sizeof ignored);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            snprintf(why, cap,
                     "nvcc is not installed (not on PATH, in $CUDA_HOME/bin or "
                     "/usr/local/cuda/bin): a '.kernel ... cu' line needs "
                     "the CUDA toolkit; give PTX with '.kernel NAME ptx \"file.ptx\"' instead");
        else
            snprintf(why, cap, "nvcc failed on '%s': %s", path,
                     text != NULL && text[0] ? text : "(no message)");
        free(text);
    } else {
        ok = bib_devcode_read_file(out, ptx, size, why, cap);
    }
    unlink(out);
    unlink(log);
    return ok;
}
