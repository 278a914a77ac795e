/* vm/placement.c: measured cost models of executors (see vm/placement.h).
 *
 * The model of a place is four numbers: the fixed cost of a kernel call, the
 * MATMUL rate, the fixed cost of a copy to or from the host and the copy
 * bandwidth. They are measured, never assumed: the point where a GPU beats
 * the CPU depends on the GPU, the CPU, the thread count and the bus, so any
 * constant would be wrong somewhere. Measuring takes about a second per
 * executor, so the result is cached per executor and device.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "isa/isa.h"
#include "vm/fileio.h"
#include "vm/placement.h"

/* Bumped whenever the measurement changes, so old entries are measured again. */
#define CACHE_MAGIC "bib-placement 2"

/* ---- keys --------------------------------------------------------------------- */

/* The CPU's brand string from /proc/cpuinfo ("model name"), or "". */
static void cpu_model(char *buf, size_t cap) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (v == NULL)
            break;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(buf, cap, "%s", v);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

void bib_placement_key(const bib_executor_ops_t *ops, bib_executor_t *ex, char *key, size_t cap) {
    const char *d = ops->describe != NULL ? ops->describe(ex) : NULL;
    char model[160] = "";
    if (strcmp(ops->name, "cpu") == 0)
        cpu_model(model, sizeof model);
    snprintf(key, cap, "%s|%s|%s", ops->name, model, d != NULL ? d : "");
    /* One line in the cache file. */
    for (char *p = key; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

bool bib_placement_cpu_device(const bib_executor_ops_t *ops, bib_executor_t *ex) {
    if (strcmp(ops->name, "cpu") == 0 || ops->describe == NULL)
        return false;
    const char *d = ops->describe(ex);
    /* The Vulkan executor names the device type in parentheses ("(CPU, Vulkan
       1.3)"); llvmpipe is lavapipe's device whatever its type says. */
    return d != NULL && (strstr(d, "(CPU") != NULL || strstr(d, "llvmpipe") != NULL);
}

/* ---- the cache ----------------------------------------------------------------- */

static uint64_t fnv64(const char *s, size_t n) {
    return bib_fnv1a64(BIB_FNV1A64_BASIS, s, n);
}

/* The cache directory, created if missing; false when there is none. */
static bool cache_dir(char *dir, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(dir, cap, "%s/bib", xdg);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(dir, cap, "%s/.cache/bib", home);
    else
        return false;
    if (n < 0 || (size_t)n >= cap)
        return false;
    /* mkdir -p of the last two levels ($HOME/.cache, then bib). */
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    mkdir(dir, 0755);
    *slash = '/';
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

static bool cache_path(const char *key, char *path, size_t cap) {
    char dir[4096];
    if (!cache_dir(dir, sizeof dir))
        return false;
    int n = snprintf(path, cap, "%s/placement-%016" PRIx64 ".txt", dir, fnv64(key, strlen(key)));
    return n > 0 && (size_t)n < cap;
}

/* The body of an entry (everything before its check line). */
static int cache_body(char *buf, size_t cap, const bib_place_model_t *m) {
    return snprintf(buf, cap,
                    CACHE_MAGIC "\nkey %s\noverhead_s %.17g\nflops_per_s %.17g\ntransfer_s "
                                "%.17g\nbytes_per_s %.17g\n",
                    m->key, m->overhead_s, m->flops_per_s, m->transfer_s, m->bytes_per_s);
}

static bool positive(double v) {
    return isfinite(v) && v >= 0;
}

/* Reads the entry for m->key; false when missing, corrupt or foreign. */
static bool cache_read(bib_place_model_t *m) {
    char path[4200];
    if (!cache_path(m->key, path, sizeof path))
        return false;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    char text[2048];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *check = strstr(text, "check ");
    if (check == NULL)
        return false;
    uint64_t want;
    if (sscanf(check, "check %" SCNx64, &want) != 1 || fnv64(text, (size_t)(check - text)) != want)
        return false;
    bib_place_model_t r = *m;
    char key[sizeof r.key + 8];
    int len = snprintf(key, sizeof key, "\nkey %s\n", m->key);
    if (len < 0 || (size_t)len >= sizeof key || strstr(text, key) == NULL ||
        strncmp(text, CACHE_MAGIC "\n", sizeof CACHE_MAGIC) != 0)
        return false;
    const char *p;
    if ((p = strstr(text, "\noverhead_s ")) == NULL ||
        sscanf(p, "\noverhead_s %lf", &r.overhead_s) != 1 ||
        (p = strstr(text, "\nflops_per_s ")) == NULL ||
        sscanf(p, "\nflops_per_s %lf", &r.flops_per_s) != 1 ||
        (p = strstr(text, "\ntransfer_s ")) == NULL ||
        sscanf(p, "\ntransfer_s %lf", &r.transfer_s) != 1 ||
        (p = strstr(text, "\nbytes_per_s ")) == NULL ||
        sscanf(p, "\nbytes_per_s %lf", &r.bytes_per_s) != 1)
        return false;
    if (!positive(r.overhead_s) || !positive(r.transfer_s) || !(r.flops_per_s > 0) ||
        !isfinite(r.flops_per_s) || !(r.bytes_per_s >= 0) || !isfinite(r.bytes_per_s))
        return false;
    r.measured = true;
    *m = r;
    return true;
}

/* Writes the entry all or nothing (vm/fileio.h), so a reader never sees
 * half of it. Failure is silent: the cache is optional. */
static void cache_write(const bib_place_model_t *m) {
    char path[4200], body[2100], why[4400];
    if (!cache_path(m->key, path, sizeof path))
        return;
    int n = cache_body(body, 2048, m);
    if (n < 0 || n >= 2048)
        return;
    int k = snprintf(body + n, sizeof body - (size_t)n, "check %016" PRIx64 "\n",
                     fnv64(body, (size_t)n));
    if (k < 0 || (size_t)k >= sizeof body - (size_t)n)
        return;
    (void)bib_file_write(path, body, (size_t)(n + k), why, sizeof why);
}

/* ---- measuring ------------------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct bench {
    const bib_executor_ops_t *ops;
    bib_executor_t *ex;
    void *a, *b, *c;
} bench_t;

/* Seconds of one n x n MATMUL, kernel and wait: the best of reps. */
static bib_status_t time_matmul(bench_t *t, uint32_t n, int reps, double *best) {
    bib_call_t call;
    memset(&call, 0, sizeof call);
    call.kernel = BIB_KERNEL_MATMUL;
    call.sub = BIB_ACT_NONE;
    bib_view_t v;
    memset(&v, 0, sizeof v);
    v.dtype = BIB_DTYPE_F32;
    v.rank = 2;
    v.dims[0] = n;
    v.dims[1] = n;
    call.out = v;
    call.in[0] = v;
    call.in[1] = v;
    call.out.buf = t->c;
    call.in[0].buf = t->a;
    call.in[1].buf = t->b;
    *best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        bib_status_t st = t->ops->kernels[BIB_KERNEL_MATMUL](t->ex, &call);
        if (st == BIB_OK)
            st = t->ops->synchronize(t->ex);
        if (st != BIB_OK)
            return st;
        double dt = now_s() - t0;
        if (dt < *best)
            *best = dt;
    }
    return BIB_OK;
}

/* Seconds of one upload then download of bytes: the best of reps. */
static bib_status_t time_copy(bench_t *t, void *host, size_t bytes, int reps, double *best) {
    *best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        bib_status_t st = t->ops->upload(t->ex, t->a, 0, host, bytes);
        if (st == BIB_OK)
            st = t->ops->download(t->ex, t->a, 0, host, bytes);
        if (st == BIB_OK)
            st = t->ops->synchronize(t->ex);
        if (st != BIB_OK)
            return st;
        double dt = (now_s() - t0) / 2;
        if (dt < *best)
            *best = dt;
    }
    return BIB_OK;
}

/* Largest MATMUL measured; big enough for a GPU to leave its launch cost
   behind, small enough that a slow device takes well under a second. */
#define MEASURE_N 512u
#define MEASURE_SMALL_N 8u
#define MEASURE_MID_N 128u

static bib_status_t measure(const bib_executor_ops_t *ops, bib_executor_t *ex, bib_place_model_t *m,
                            char *why, size_t why_len) {
    const size_t bytes = (size_t)MEASURE_N * MEASURE_N * 4;
    bench_t t = {ops, ex, NULL, NULL, NULL};
    float *host = malloc(bytes);
    bib_status_t st = host == NULL ? BIB_E_NOMEM : BIB_OK;
    if (st == BIB_OK)
        st = ops->buffer_alloc(ex, bytes, &t.a);
    if (st == BIB_OK)
        st = ops->buffer_alloc(ex, bytes, &t.b);
    if (st == BIB_OK)
        st = ops->buffer_alloc(ex, bytes, &t.c);
    if (st == BIB_OK) {
        /* Small integers keep every product exact and far from denormals. */
        for (size_t i = 0; i < bytes / 4; i++)
            host[i] = (float)(int)(i % 7) - 3.0f;
        st = ops->upload(ex, t.a, 0, host, bytes);
        if (st == BIB_OK)
            st = ops->upload(ex, t.b, 0, host, bytes);
    }
    double small = 0, mid = 0, big = 0, copy_small = 0, copy_big = 0;
    if (st == BIB_OK)
        st = time_matmul(&t, MEASURE_SMALL_N, 1, &small); /* warm-up: pipelines, caches */
    if (st == BIB_OK)
        st = time_matmul(&t, MEASURE_SMALL_N, 7, &small);
    if (st == BIB_OK)
        st = time_matmul(&t, MEASURE_MID_N, 3, &mid);
    if (st == BIB_OK)
        st = time_matmul(&t, MEASURE_N, 3, &big);
    bool host_place = strcmp(ops->name, "cpu") == 0;
    if (st == BIB_OK && !host_place)
        st = time_copy(&t, host, 4, 5, &copy_small);
    if (st == BIB_OK && !host_place)
        st = time_copy(&t, host, bytes, 3, &copy_big);
    if (st != BIB_OK)
        snprintf(why, why_len, "%s",
                 host == NULL     ? "host out of memory"
                 : ops->error(ex) ? ops->error(ex)
                                  : "");
    if (t.a != NULL)
        ops->buffer_free(ex, t.a);
    if (t.b != NULL)
        ops->buffer_free(ex, t.b);
    if (t.c != NULL)
        ops->buffer_free(ex, t.c);
    free(host);
    if (st != BIB_OK)
        return st;
    /* t(w) = overhead + w / rate, fitted to the three sizes by least squares
       on the relative error (each size counts alike, whatever its time):
       rows [1/t, w/t] . [overhead, 1/rate] = 1. */
    const double w[3] = {2.0 * MEASURE_SMALL_N * MEASURE_SMALL_N * MEASURE_SMALL_N,
                         2.0 * MEASURE_MID_N * MEASURE_MID_N * MEASURE_MID_N,
                         2.0 * MEASURE_N * MEASURE_N * MEASURE_N};
    const double t_s[3] = {fmax(small, 1e-9), fmax(mid, 1e-9), fmax(big, 1e-9)};
    double aa = 0, ab = 0, bb = 0, a1 = 0, b1 = 0;
    for (int i = 0; i < 3; i++) {
        double a = 1 / t_s[i], b = w[i] / t_s[i];
        aa += a * a, ab += a * b, bb += b * b, a1 += a, b1 += b;
    }
    double det = aa * bb - ab * ab;
    double overhead = det != 0 ? (a1 * bb - b1 * ab) / det : 0;
    double inv_rate = det != 0 ? (aa * b1 - ab * a1) / det : 0;
    if (overhead < 0 || inv_rate <= 0) {
        overhead = fmax(overhead, 0);
        inv_rate = b1 / bb; /* the fit through the origin */
    }
    m->overhead_s = overhead;
    m->flops_per_s = 1 / inv_rate;
    if (host_place) {
        m->transfer_s = 0;
        m->bytes_per_s = 0;
    } else {
        m->transfer_s = copy_small;
        m->bytes_per_s = (double)(bytes - 4) / fmax(copy_big - copy_small, 1e-9);
    }
    m->measured = true;
    return BIB_OK;
}

bib_status_t bib_placement_model(const bib_executor_ops_t *ops, bib_executor_t *ex,
                                 bib_place_model_t *out, bool *cached, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    bib_placement_key(ops, ex, out->key, sizeof out->key);
    out->cpu_device = bib_placement_cpu_device(ops, ex);
    if (cached != NULL)
        *cached = false;
    if (cache_read(out)) {
        if (cached != NULL)
            *cached = true;
        return BIB_OK;
    }
    bib_status_t st = measure(ops, ex, out, why, why_len);
    if (st == BIB_OK)
        cache_write(out);
    return st;
}

/* ---- the arithmetic --------------------------------------------------------------- */

double bib_placement_run_cost(const bib_place_model_t *m, double flops) {
    return m->overhead_s + flops / m->flops_per_s;
}

double bib_placement_copy_cost(const bib_place_model_t *m, uint64_t bytes) {
    if (m->bytes_per_s <= 0)
        return 0;
    return m->transfer_s + (double)bytes / m->bytes_per_s;
}

/* How much faster dev is than host on an n x n MATMUL (negative: slower). */
static double gain(const bib_place_model_t *host, const bib_place_model_t *dev, double n,
                   bool from_host) {
    double w = 2 * n * n * n;
    double d = bib_placement_run_cost(dev, w);
    if (from_host)
        d += 2 * bib_placement_copy_cost(dev, (uint64_t)(n * n * 4));
    return bib_placement_run_cost(host, w) - d;
}

double bib_placement_crossover(const bib_place_model_t *host, const bib_place_model_t *dev,
                               bool from_host) {
    /* Both costs are affine in the work, plus copies that grow slower than
       it, so dev wins above at most one size: find it by doubling, then
       bisecting. */
    if (gain(host, dev, 1, from_host) > 0)
        return 0;
    double lo = 1, hi = 2;
    while (gain(host, dev, hi, from_host) <= 0) {
        lo = hi;
        hi *= 2;
        if (hi > 1e6)
            return INFINITY;
    }
    for (int i = 0; i < 40; i++) {
        double mid = (lo + hi) / 2;
        if (gain(host, dev, mid, from_host) > 0)
            hi = mid;
        else
            lo = mid;
    }
    return 2 * hi * hi * hi;
}
