/* cli/hexcase.h: the parser of `bib test` case files (spec/hex-tests.md).
 *
 * It turns a case file's bytes into its sections and checked fields, and
 * nothing more: no assembling, loading or running (cli/hextest.c does that).
 * It works on a buffer so that tests/fuzz/fuzz_hexcase.c can drive it.
 * Every refusal is one line "line N: FIELD: why".
 */
#ifndef BIB_CLI_HEXCASE_H
#define BIB_CLI_HEXCASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The fuel of a case that sets none (spec/hex-tests.md): about a tenth of a
 * second of scalar instructions, far more than any case needs, so a case
 * that loops forever fails quickly instead of hanging the suite. */
#define BIB_HEXCASE_DEFAULT_FUEL 100000000ull

typedef struct bib_hexcase_text {
    char *text; /* NUL-terminated, each line ending in '\n'; NULL when absent */
    int line;   /* line of the section header in the case file */
} bib_hexcase_text_t;

typedef struct bib_hexcase {
    bib_hexcase_text_t asm_src, raw, mem, out, error;
    bool out_no_newline; /* the section was -- stdout-no-newline */
    bool has_result;
    int64_t result; /* -- result: decimal, or 0x hex read as the 64-bit pattern */
    /* -- options; has_* says which were given */
    bool has_fuel, has_max_memory, has_max_depth;
    uint64_t fuel, max_memory;
    uint32_t max_depth;
    uint32_t regs;     /* 16 unless given */
    int64_t truncate;  /* -1: none */
    int64_t flip_byte; /* -1: none */
    uint32_t flip_bit;
} bib_hexcase_t;

/* Parses a case file of len bytes (it need not end in NUL). Returns 0, or -1
 * with one line in msg; tc is then freed already. Free a parsed case with
 * bib_hexcase_free. */
int bib_hexcase_parse(bib_hexcase_t *tc, const char *text, size_t len, char *msg, size_t msglen);
void bib_hexcase_free(bib_hexcase_t *tc);

/* Parses whitespace-separated hex numbers up to max (';' or '#' starts a
 * comment; line numbers in msg count from first_line + 1). Returns the count
 * and a malloc'd array in *out (caller frees), or -1 with msg set. */
long bib_hexcase_words(const char *text, int first_line, uint64_t max, uint64_t **out, char *msg,
                       size_t msglen);

#endif
