/* tests/oracle/oracle_driver.c: runs one CPU kernel on .npy inputs.
 *
 * Usage: oracle_driver OP OUT.npy IN.npy [IN2.npy IN3.npy]
 *   OP: exp tanh sigmoid gelu relu (elementwise), softmax layernorm rmsnorm
 *       sum mean max (along the last axis of a 2-D input), div (IN / IN2).
 * Inputs are little-endian float32 C-order .npy files (numpy's '<f4').
 * Exists so tests/oracle/check.py can hold BIB's kernels against a float64
 * numpy reference; it links the executor's row functions directly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpufeatures.h"
#include "backends/cpu/ops.h"

typedef struct npy {
    float *data;
    size_t rows, cols; /* a 1-D array is one row */
} npy_t;

static int npy_read(const char *path, npy_t *a) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "oracle_driver: %s: cannot open\n", path);
        return -1;
    }
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] != 1) {
        fprintf(stderr, "oracle_driver: %s: not a version-1 .npy file\n", path);
        fclose(f);
        return -1;
    }
    size_t hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    char header[65536];
    if (fread(header, 1, hlen, f) != hlen) {
        fclose(f);
        return -1;
    }
    header[hlen] = '\0';
    if (!strstr(header, "'<f4'") || strstr(header, "'fortran_order': True")) {
        fprintf(stderr, "oracle_driver: %s: want little-endian float32 in C order\n", path);
        fclose(f);
        return -1;
    }
    const char *shape = strstr(header, "'shape': (");
    unsigned long d0 = 0, d1 = 0;
    int nd = shape ? sscanf(shape, "'shape': (%lu, %lu", &d0, &d1) : 0;
    if (nd < 1) {
        fprintf(stderr, "oracle_driver: %s: no shape\n", path);
        fclose(f);
        return -1;
    }
    a->rows = nd == 2 ? d0 : 1;
    a->cols = nd == 2 ? d1 : d0;
    a->data = malloc(a->rows * a->cols * sizeof(float) + 4);
    size_t got = fread(a->data, sizeof(float), a->rows * a->cols, f);
    fclose(f);
    return got == a->rows * a->cols ? 0 : -1;
}

static int npy_write(const char *path, const float *data, size_t rows, size_t cols, int two_d) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    char header[128];
    int n = two_d ? snprintf(header, sizeof header,
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }",
                             rows, cols)
                  : snprintf(header, sizeof header,
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }",
                             rows * cols);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned short hlen = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xFF, f);
    fputc(hlen >> 8, f);
    fwrite(header, 1, (size_t)n, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(data, sizeof(float), rows * cols, f);
    return fclose(f);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: oracle_driver OP OUT.npy IN.npy [IN2.npy IN3.npy]\n");
        return 2;
    }
    const char *op = argv[1];
    npy_t in[3] = {{0}};
    for (int i = 3; i < argc && i < 6; i++)
        if (npy_read(argv[i], &in[i - 3]) != 0)
            return 1;
    bib_cpu_features_t features;
    bib_cpu_detect(&features);
    const bib_cpu_rowops_t *ro = bib_cpu_rowops_for(bib_cpu_best_level(&features));
    size_t rows = in[0].rows, cols = in[0].cols;
    float *out = calloc(rows * cols + 1, sizeof(float));
    static const struct {
        const char *name;
        bib_unary_t op;
    } unary[] = {{"exp", BIB_UNARY_EXP},           {"tanh", BIB_UNARY_TANH},
                 {"sigmoid", BIB_UNARY_SIGMOID},   {"gelu", BIB_UNARY_GELU},
                 {"relu", BIB_UNARY_RELU},         {"erf", BIB_UNARY_ERF},
                 {"log", BIB_UNARY_LOG},           {"sqrt", BIB_UNARY_SQRT},
                 {"rsqrt", BIB_UNARY_RSQRT},       {"recip", BIB_UNARY_RECIP},
                 {"gelu_erf", BIB_UNARY_GELU_ERF}, {"floor", BIB_UNARY_FLOOR},
                 {"ceil", BIB_UNARY_CEIL},         {"round", BIB_UNARY_ROUND},
                 {"sin", BIB_UNARY_SIN},           {"cos", BIB_UNARY_COS}};
    for (size_t u = 0; u < sizeof unary / sizeof unary[0]; u++)
        if (strcmp(op, unary[u].name) == 0) {
            ro->unary(unary[u].op, in[0].data, out, rows * cols);
            return npy_write(argv[2], out, rows, cols, in[0].rows > 1) ? 1 : 0;
        }
    int reduce = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *x = in[0].data + r * cols;
        float *y = out + r * cols;
        if (strcmp(op, "softmax") == 0)
            ro->softmax(x, y, cols);
        else if (strcmp(op, "layernorm") == 0)
            ro->layernorm(x, in[1].data, in[2].data, 1e-5f, y, cols);
        else if (strcmp(op, "rmsnorm") == 0)
            ro->rmsnorm(x, in[1].data, 1e-6f, y, cols);
        else if (strcmp(op, "div") == 0)
            ro->binary(BIB_BINARY_DIV, x, in[1].data + r * cols, 1, y, cols);
        else if (strcmp(op, "pow") == 0)
            ro->binary(BIB_BINARY_POW, x, in[1].data + r * cols, 1, y, cols);
        else if (strcmp(op, "logsoftmax") == 0)
            ro->logsoftmax(x, y, cols);
        else if (strcmp(op, "sum") == 0 || strcmp(op, "mean") == 0 || strcmp(op, "max") == 0) {
            reduce = 1;
            float s = op[1] == 'a' ? ro->max(x, cols) : ro->sum(x, cols);
            out[r] = op[0] == 'm' && op[1] == 'e' ? s / (float)cols : s;
        } else {
            fprintf(stderr, "oracle_driver: unknown op '%s'\n", op);
            return 2;
        }
    }
    return npy_write(argv[2], out, reduce ? rows : rows, reduce ? 1 : cols, !reduce) ? 1 : 0;
}
