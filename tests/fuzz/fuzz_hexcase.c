/* tests/fuzz/fuzz_hexcase.c: libFuzzer harness for the `bib test` case-file
 * parser (cli/hexcase.c).
 *
 * Promise checked: any bytes as a case file give a parsed case or one line
 * "line N: ..." (or "out of memory ..."), never a crash, an overread, a leak
 * or a field outside its documented range (spec/hex-tests.md). For each
 * input, bib_hexcase_parse either fails with such a line, or succeeds and:
 *   - every present section is NUL-free text whose lines end in '\n' (the
 *     stdout-no-newline section may lack the last one), with a header line
 *     inside the file;
 *   - fuel and max-memory, when given, are >= 1; max-depth and regs >= 1;
 *     truncate and the flip offset are -1 (none) or >= 0; the flip bit 0..7;
 *   - the -- raw and -- mem sections then parse as hex words
 *     (bib_hexcase_words) into values within their bound, or fail with one
 *     "line N: ..." line.
 * Any violation aborts, so libFuzzer saves the input.
 *
 * Build and run: `make fuzz-build` (tests/fuzz/fuzz.mk), then
 *   build/fuzz/fuzz_hexcase -dict=tests/fuzz/hexcase.dict build/fuzz/corpus/hexcase tests/hex
 * Reproduce a saved input: build/fuzz/fuzz_hexcase crash-FILE, or
 *   `build/bib test crash-FILE` (after naming it *.hex).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/hexcase.h"

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_hexcase: %s%s%s\n", what, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
    abort();
}

static void check_message(const char *stage, const char *msg) {
    if (msg[0] == '\0')
        fail(stage, "failed without a message");
    if (strchr(msg, '\n') != NULL)
        fail(stage, "message spans several lines");
    if (strncmp(msg, "line ", 5) != 0 && strncmp(msg, "out of memory", 13) != 0)
        fail(stage, "message does not name the line");
}

static void check_section(const bib_hexcase_text_t *s, int lines, bool may_end_open) {
    if (s->text == NULL)
        return;
    if (s->line < 1 || s->line > lines)
        fail("section", "header line outside the file");
    size_t n = strlen(s->text);
    if (n > 0 && s->text[n - 1] != '\n' && !may_end_open)
        fail("section", "text does not end with a newline");
}

static void check_words(const bib_hexcase_text_t *s, uint64_t max) {
    if (s->text == NULL)
        return;
    uint64_t *words = NULL;
    char msg[256] = "";
    long n = bib_hexcase_words(s->text, s->line, max, &words, msg, sizeof msg);
    if (n < 0) {
        check_message("words", msg);
        return;
    }
    for (long i = 0; i < n; i++)
        if (words[i] > max)
            fail("words", "a value above its bound");
    free(words);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exact-size copy with no NUL after it, so ASan sees any overread. */
    char *text = malloc(size ? size : 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    int lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    bib_hexcase_t tc;
    char msg[256] = "";
    int rc = bib_hexcase_parse(&tc, text, size, msg, sizeof msg);
    free(text);
    if (rc != 0) {
        if (rc != -1)
            fail("parse", "returned neither 0 nor -1");
        check_message("parse", msg);
        return 0;
    }
    check_section(&tc.asm_src, lines, false);
    check_section(&tc.raw, lines, false);
    check_section(&tc.mem, lines, false);
    check_section(&tc.out, lines, tc.out_no_newline);
    check_section(&tc.error, lines, false);
    if ((tc.has_fuel && tc.fuel == 0) || (tc.has_max_memory && tc.max_memory == 0) ||
        (tc.has_max_depth && tc.max_depth == 0) || tc.regs == 0)
        fail("options", "a limit of 0 was accepted");
    if (tc.truncate < -1 || tc.flip_byte < -1 || tc.flip_bit > 7)
        fail("offsets", "a negative offset or a bit outside 0..7 was accepted");
    check_words(&tc.raw, 0xFFFFFFFFu);
    check_words(&tc.mem, 0xFF);
    bib_hexcase_free(&tc);
    return 0;
}
