/* bench/opseq.c: which instruction sequences a program executes most, for
 * choosing superinstructions.
 *
 * Built by `make build/opseq`. Runs a module (or a .basm source) one
 * instruction at a time through the stepping API of include/bib.h, counting
 * every executed pair and triple of consecutive instructions (in execution
 * order, so across jumps, calls and returns), and prints the most frequent
 * opcode pairs, opcode triples and pc triples with their counts and their
 * share of all executed instructions. The counts are exact; a step costs
 * about 30 ns, so 10^9 instructions take half a minute. The program's own
 * output is discarded.
 *   build/opseq FILE [TOP]      (TOP rows per table, default 12)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bib.h"

#define MAX_CODE 65536u /* pcs fit 16 bits in a triple's key */

/* Open-addressing table of pc triples, keyed by p1 << 32 | p2 << 16 | p3, plus one. */
typedef struct slot {
    uint64_t key;
    uint64_t count;
} slot_t;

typedef struct table {
    slot_t *slots;
    size_t cap, used;
} table_t;

static int table_add(table_t *t, uint64_t key) {
    if (t->used * 2 >= t->cap) {
        table_t bigger = {calloc(t->cap * 2, sizeof(slot_t)), t->cap * 2, 0};
        if (!bigger.slots)
            return -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].count)
                continue;
            size_t h = (size_t)((t->slots[i].key * 0x9E3779B97F4A7C15ull) >> 32) & (bigger.cap - 1);
            while (bigger.slots[h].count)
                h = (h + 1) & (bigger.cap - 1);
            bigger.slots[h] = t->slots[i];
            bigger.used++;
        }
        free(t->slots);
        *t = bigger;
    }
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (t->cap - 1);
    while (t->slots[h].count && t->slots[h].key != key)
        h = (h + 1) & (t->cap - 1);
    if (!t->slots[h].count) {
        t->slots[h].key = key;
        t->used++;
    }
    t->slots[h].count++;
    return 0;
}

/* One output row: a name (opcodes, or pcs with their text) and its count. */
typedef struct row {
    char name[512];
    uint64_t count;
} row_t;

static int row_order(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* Adds count to the row called name, appending it when new. */
static void rows_add(row_t *rows, size_t *n, const char *name, uint64_t count) {
    for (size_t i = 0; i < *n; i++) {
        if (!strcmp(rows[i].name, name)) {
            rows[i].count += count;
            return;
        }
    }
    snprintf(rows[*n].name, sizeof rows[*n].name, "%s", name);
    rows[(*n)++].count = count;
}

static void rows_print(const char *title, row_t *rows, size_t n, size_t top, uint64_t total) {
    qsort(rows, n, sizeof *rows, row_order);
    printf("%s:\n", title);
    for (size_t i = 0; i < n && i < top; i++)
        printf("  %13llu %5.1f%%  %s\n", (unsigned long long)rows[i].count,
               100.0 * (double)rows[i].count / (double)total, rows[i].name);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: opseq FILE [TOP]\n");
        return 64;
    }
    size_t top = argc == 3 ? (size_t)strtoul(argv[2], NULL, 10) : 12;
    bib_options_t options;
    bib_options_init_size(&options, sizeof options);
    bib_vm_t *vm;
    if (bib_vm_create(&options, &vm) != BIB_OK) {
        fprintf(stderr, "opseq: cannot create a VM\n");
        return 70;
    }
    FILE *sink = fopen("/dev/null", "w");
    if (!sink || bib_vm_register_stdio(vm, sink) != BIB_OK ||
        bib_vm_load_file(vm, argv[1]) != BIB_OK) {
        fprintf(stderr, "opseq: %s: %s\n", argv[1], bib_vm_error(vm));
        return 65;
    }
    uint32_t n = bib_vm_code_count(vm);
    if (n == 0 || n > MAX_CODE) {
        fprintf(stderr, "opseq: %s: %u instructions (1 to %u are counted)\n", argv[1], n, MAX_CODE);
        return 65;
    }
    char(*text)[160] = calloc(n, sizeof *text);
    char(*op)[32] = calloc(n, sizeof *op);
    uint64_t *pairs = calloc((size_t)n * n, sizeof *pairs);
    table_t triples = {calloc(1024, sizeof(slot_t)), 1024, 0};
    if (!text || !op || !pairs || !triples.slots) {
        fprintf(stderr, "opseq: out of memory\n");
        return 71;
    }
    for (uint32_t pc = 0; pc < n; pc++) {
        bib_vm_insn_text(vm, pc, text[pc], sizeof text[pc]);
        sscanf(text[pc], "%31s", op[pc]);
    }

    /* p1, p2: the two pcs executed before pc (n: none yet). */
    uint64_t total = 0;
    uint32_t p1 = n, p2 = n;
    bib_stop_t stop = BIB_STOP_PAUSED;
    if (bib_vm_start(vm) != BIB_OK) {
        fprintf(stderr, "opseq: %s\n", bib_vm_error(vm));
        return 70;
    }
    while (stop == BIB_STOP_PAUSED) {
        bib_position_t pos;
        bib_vm_position(vm, &pos);
        uint32_t pc = pos.pc;
        if (p2 < n)
            pairs[(size_t)p2 * n + pc]++;
        if (p1 < n && table_add(&triples, (uint64_t)p1 << 32 | (uint64_t)p2 << 16 | pc) != 0) {
            fprintf(stderr, "opseq: out of memory\n");
            return 71;
        }
        p1 = p2;
        p2 = pc;
        total++;
        if (bib_vm_step(vm, 1, &stop) != BIB_OK) {
            fprintf(stderr, "opseq: %s: %s\n", argv[1], bib_vm_error(vm));
            return 70;
        }
    }
    printf("%s: %llu instructions\n", argv[1], (unsigned long long)total);

    size_t cap = triples.used + (size_t)n * 4 + 1, count = 0;
    row_t *rows = calloc(cap, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "opseq: out of memory\n");
        return 71;
    }
    char name[512];
    for (uint32_t a = 0; a < n; a++) {
        for (uint32_t b = 0; b < n; b++) {
            if (!pairs[(size_t)a * n + b])
                continue;
            snprintf(name, sizeof name, "%s %s", op[a], op[b]);
            rows_add(rows, &count, name, pairs[(size_t)a * n + b]);
        }
    }
    rows_print("opcode pairs", rows, count, top, total);
    count = 0;
    for (size_t i = 0; i < triples.cap; i++) {
        const slot_t *s = &triples.slots[i];
        if (!s->count)
            continue;
        snprintf(name, sizeof name, "%s %s %s", op[s->key >> 32], op[(s->key >> 16) & 0xFFFF],
                 op[s->key & 0xFFFF]);
        rows_add(rows, &count, name, s->count);
    }
    rows_print("opcode triples", rows, count, top, total);
    count = 0;
    for (size_t i = 0; i < triples.cap; i++) {
        const slot_t *s = &triples.slots[i];
        if (!s->count)
            continue;
        uint32_t a = (uint32_t)(s->key >> 32), b = (uint32_t)(s->key >> 16) & 0xFFFF,
                 c = (uint32_t)s->key & 0xFFFF;
        snprintf(rows[count].name, sizeof rows[count].name, "%u: %s | %u: %s | %u: %s", a, text[a],
                 b, text[b], c, text[c]);
        rows[count++].count = s->count;
    }
    rows_print("pc triples", rows, count, top, total);

    free(rows);
    free(triples.slots);
    free(pairs);
    free(op);
    free(text);
    bib_vm_destroy(vm);
    fclose(sink);
    return 0;
}
