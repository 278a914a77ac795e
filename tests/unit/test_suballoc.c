/* tests/unit/test_suballoc.c: the range sub-allocator of the GPU executors'
 * device memory (backends/suballoc.c): first fit, alignment, exhaustion,
 * coalescing on each side, and random take/give sequences checked against a
 * model that keeps one flag per alignment unit. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "backends/suballoc.h"

#define ALIGN 256u

static bib_suballoc_t space(uint64_t size, uint64_t align) {
    bib_suballoc_t a;
    cr_assert(bib_suballoc_init(&a, align));
    bib_suballoc_reset(&a, size);
    return a;
}

static uint64_t take(bib_suballoc_t *a, uint64_t bytes) {
    uint64_t offset = UINT64_MAX;
    cr_assert(bib_suballoc_take(a, bytes, &offset), "no room for %llu bytes",
              (unsigned long long)bytes);
    return offset;
}

/* The free list is exactly the ranges given, in order. */
static void assert_free(const bib_suballoc_t *a, const bib_suballoc_range_t *want, uint32_t n) {
    cr_assert_eq(a->free_count, n, "%u free ranges, want %u", a->free_count, n);
    for (uint32_t i = 0; i < n; i++)
        cr_assert(a->free[i].offset == want[i].offset && a->free[i].size == want[i].size,
                  "free range %u is [%llu, +%llu), want [%llu, +%llu)", i,
                  (unsigned long long)a->free[i].offset, (unsigned long long)a->free[i].size,
                  (unsigned long long)want[i].offset, (unsigned long long)want[i].size);
}

Test(suballoc, a_fresh_space_is_one_free_range_and_empty) {
    bib_suballoc_t a = space(4096, ALIGN);
    assert_free(&a, (bib_suballoc_range_t[]){{0, 4096}}, 1);
    cr_assert(bib_suballoc_empty(&a));
    bib_suballoc_destroy(&a);
}

Test(suballoc, takes_go_upwards_from_offset_zero) {
    bib_suballoc_t a = space(4096, ALIGN);
    cr_assert_eq(take(&a, 256), 0);
    cr_assert_eq(take(&a, 512), 256);
    cr_assert_eq(take(&a, 256), 768);
    assert_free(&a, (bib_suballoc_range_t[]){{1024, 3072}}, 1);
    cr_assert_not(bib_suballoc_empty(&a));
    bib_suballoc_destroy(&a);
}

Test(suballoc, sizes_are_rounded_up_to_the_alignment) {
    bib_suballoc_t a = space(4096, ALIGN);
    cr_assert_eq(take(&a, 1), 0);
    cr_assert_eq(take(&a, 257), 256);
    cr_assert_eq(take(&a, 4), 768);
    assert_free(&a, (bib_suballoc_range_t[]){{1024, 3072}}, 1);
    bib_suballoc_destroy(&a);
}

Test(suballoc, a_zero_byte_request_takes_one_alignment_unit) {
    bib_suballoc_t a = space(1024, ALIGN);
    uint64_t first = take(&a, 0), second = take(&a, 0);
    cr_assert_eq(first, 0);
    cr_assert_eq(second, 256);
    bib_suballoc_give(&a, first, 0);
    bib_suballoc_give(&a, second, 0);
    cr_assert(bib_suballoc_empty(&a));
    bib_suballoc_destroy(&a);
}

Test(suballoc, round_is_the_next_multiple_of_a_power_of_two) {
    cr_assert_eq(bib_suballoc_round(0, 256), 0);
    cr_assert_eq(bib_suballoc_round(1, 256), 256);
    cr_assert_eq(bib_suballoc_round(256, 256), 256);
    cr_assert_eq(bib_suballoc_round(257, 256), 512);
    cr_assert_eq(bib_suballoc_round(3, 1), 3);
    cr_assert_eq(bib_suballoc_round((2u << 20) + 1, 2u << 20), 4u << 20);
}

Test(suballoc, every_offset_is_aligned_whatever_the_request) {
    const uint64_t aligns[] = {1, 8, 64, 256, 4096};
    for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++) {
        bib_suballoc_t a = space(1 << 20, aligns[k]);
        uint64_t offset;
        for (uint64_t bytes = 1; bib_suballoc_take(&a, bytes, &offset); bytes = bytes * 3 + 1)
            cr_assert_eq(offset % aligns[k], 0, "offset %llu under alignment %llu",
                         (unsigned long long)offset, (unsigned long long)aligns[k]);
        bib_suballoc_destroy(&a);
    }
}

Test(suballoc, a_request_that_fills_the_space_exactly_succeeds) {
    bib_suballoc_t a = space(4096, ALIGN);
    cr_assert_eq(take(&a, 4096), 0);
    cr_assert_eq(a.free_count, 0);
    uint64_t offset = 77;
    cr_assert_not(bib_suballoc_take(&a, 1, &offset));
    cr_assert_eq(offset, 77, "a failed take wrote an offset");
    bib_suballoc_destroy(&a);
}

Test(suballoc, a_request_larger_than_any_free_range_fails_and_takes_nothing) {
    bib_suballoc_t a = space(4096, ALIGN);
    uint64_t x = take(&a, 1024);
    take(&a, 1024);
    bib_suballoc_give(&a, x, 1024); /* free: [0, 1024) and [2048, 4096) */
    uint64_t offset;
    cr_assert_not(bib_suballoc_take(&a, 2049, &offset));
    cr_assert_not(bib_suballoc_take(&a, UINT64_MAX, &offset));
    assert_free(&a, (bib_suballoc_range_t[]){{0, 1024}, {2048, 2048}}, 2);
    bib_suballoc_destroy(&a);
}

Test(suballoc, an_empty_space_has_nothing_to_take) {
    bib_suballoc_t a = space(0, ALIGN);
    uint64_t offset;
    cr_assert_not(bib_suballoc_take(&a, 1, &offset));
    cr_assert(bib_suballoc_empty(&a));
    bib_suballoc_destroy(&a);
}

Test(suballoc, first_fit_takes_the_lowest_free_range_that_holds_the_request) {
    bib_suballoc_t a = space(8192, ALIGN);
    uint64_t r[6];
    for (int i = 0; i < 6; i++)
        r[i] = take(&a, 512 << (i % 2)); /* 512, 1024, 512, 1024, ... */
    bib_suballoc_give(&a, r[0], 512);    /* hole of 512 at 0 */
    bib_suballoc_give(&a, r[3], 1024);   /* hole of 1024 at 2048 */
    cr_assert_eq(take(&a, 768), 2048, "skips the 512 hole, takes the 1024 one");
    cr_assert_eq(take(&a, 256), 0, "the lowest hole that fits");
    bib_suballoc_destroy(&a);
}

Test(suballoc, giving_back_next_to_a_free_range_on_the_left_merges) {
    bib_suballoc_t a = space(4096, ALIGN);
    uint64_t x = take(&a, 1024), y = take(&a, 1024);
    take(&a, 2048);
    bib_suballoc_give(&a, x, 1024);
    bib_suballoc_give(&a, y, 1024);
    assert_free(&a, (bib_suballoc_range_t[]){{0, 2048}}, 1);
    bib_suballoc_destroy(&a);
}

Test(suballoc, giving_back_next_to_a_free_range_on_the_right_merges) {
    bib_suballoc_t a = space(4096, ALIGN);
    take(&a, 1024);
    uint64_t y = take(&a, 1024), z = take(&a, 1024);
    take(&a, 1024);
    bib_suballoc_give(&a, z, 1024);
    bib_suballoc_give(&a, y, 1024);
    assert_free(&a, (bib_suballoc_range_t[]){{1024, 2048}}, 1);
    bib_suballoc_destroy(&a);
}

Test(suballoc, giving_back_between_two_free_ranges_merges_all_three) {
    bib_suballoc_t a = space(4096, ALIGN);
    take(&a, 512);
    uint64_t x = take(&a, 512), y = take(&a, 512), z = take(&a, 512);
    bib_suballoc_give(&a, x, 512);
    bib_suballoc_give(&a, z, 512); /* z merges with the tail [2048, 4096) */
    assert_free(&a, (bib_suballoc_range_t[]){{512, 512}, {1536, 2560}}, 2);
    bib_suballoc_give(&a, y, 512);
    assert_free(&a, (bib_suballoc_range_t[]){{512, 3584}}, 1);
    bib_suballoc_destroy(&a);
}

Test(suballoc, giving_back_between_taken_ranges_adds_a_free_range_in_order) {
    bib_suballoc_t a = space(4096, ALIGN);
    uint64_t r[4];
    for (int i = 0; i < 4; i++)
        r[i] = take(&a, 1024);
    bib_suballoc_give(&a, r[2], 1024);
    bib_suballoc_give(&a, r[0], 1024);
    assert_free(&a, (bib_suballoc_range_t[]){{0, 1024}, {2048, 1024}}, 2);
    bib_suballoc_destroy(&a);
}

Test(suballoc, the_free_list_grows_past_its_first_capacity) {
    bib_suballoc_t a = space(64 * ALIGN, ALIGN);
    uint64_t r[64];
    for (int i = 0; i < 64; i++)
        r[i] = take(&a, ALIGN);
    for (int i = 0; i < 64; i += 2)
        bib_suballoc_give(&a, r[i], ALIGN);
    cr_assert_eq(a.free_count, 32);
    for (uint32_t i = 0; i < 32; i++)
        cr_assert_eq(a.free[i].offset, 2 * i * ALIGN);
    for (int i = 1; i < 64; i += 2)
        bib_suballoc_give(&a, r[i], ALIGN);
    cr_assert(bib_suballoc_empty(&a));
    assert_free(&a, (bib_suballoc_range_t[]){{0, 64 * ALIGN}}, 1);
    bib_suballoc_destroy(&a);
}

Test(suballoc, the_space_is_empty_again_once_everything_is_given_back) {
    bib_suballoc_t a = space(4096, ALIGN);
    uint64_t x = take(&a, 100), y = take(&a, 300);
    bib_suballoc_give(&a, x, 100);
    cr_assert_not(bib_suballoc_empty(&a));
    bib_suballoc_give(&a, y, 300);
    cr_assert(bib_suballoc_empty(&a));
    bib_suballoc_destroy(&a);
}

Test(suballoc, reset_forgets_what_was_taken) {
    bib_suballoc_t a = space(4096, ALIGN);
    take(&a, 1000);
    take(&a, 1000);
    bib_suballoc_reset(&a, 8192);
    assert_free(&a, (bib_suballoc_range_t[]){{0, 8192}}, 1);
    bib_suballoc_reset(&a, 0);
    cr_assert_eq(a.free_count, 0);
    cr_assert(bib_suballoc_empty(&a));
    bib_suballoc_destroy(&a);
}

/* ---- random sequences against a model ------------------------------------ */

#define UNITS 512 /* the model's space, in alignment units */

typedef struct model {
    bool used[UNITS];
} model_t;

/* First fit in the model: the lowest unit that starts n free units. */
static int64_t model_take(model_t *m, uint64_t n) {
    for (uint64_t start = 0; start + n <= UNITS; start++) {
        uint64_t run = 0;
        while (run < n && !m->used[start + run])
            run++;
        if (run == n) {
            memset(&m->used[start], 1, n);
            return (int64_t)start;
        }
        start += run; /* the unit at start + run is used: jump past it */
    }
    return -1;
}

/* The free list matches the model's maximal free runs, in order. */
static void assert_matches(const bib_suballoc_t *a, const model_t *m, uint64_t align) {
    uint32_t k = 0;
    bool all_free = true;
    for (uint64_t u = 0; u < UNITS;) {
        if (m->used[u]) {
            all_free = false;
            u++;
            continue;
        }
        uint64_t end = u;
        while (end < UNITS && !m->used[end])
            end++;
        cr_assert_lt(k, a->free_count, "the model has a free run at unit %llu the list lacks",
                     (unsigned long long)u);
        cr_assert(a->free[k].offset == u * align && a->free[k].size == (end - u) * align,
                  "free range %u is [%llu, +%llu), the model's [%llu, +%llu)", k,
                  (unsigned long long)a->free[k].offset, (unsigned long long)a->free[k].size,
                  (unsigned long long)(u * align), (unsigned long long)((end - u) * align));
        k++;
        u = end;
    }
    cr_assert_eq(k, a->free_count, "the list has %u free ranges, the model %u", a->free_count, k);
    cr_assert_eq(bib_suballoc_empty(a), all_free);
}

static uint64_t next_random(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

typedef struct live {
    uint64_t offset, bytes;
} live_t;

Test(suballoc, random_takes_and_gives_match_a_first_fit_model) {
    const uint64_t aligns[] = {1, 16, 256};
    for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++) {
        uint64_t align = aligns[k];
        for (uint64_t seed = 1; seed <= 20; seed++) {
            uint64_t rng = seed * 0x9e3779b97f4a7c15ull;
            bib_suballoc_t a = space(UNITS * align, align);
            model_t m = {0};
            live_t live[UNITS];
            uint32_t nlive = 0;
            for (int step = 0; step < 2000; step++) {
                bool give = nlive > 0 && next_random(&rng) % 100 < 45;
                if (give) {
                    uint32_t i = (uint32_t)(next_random(&rng) % nlive);
                    live_t l = live[i];
                    live[i] = live[--nlive];
                    bib_suballoc_give(&a, l.offset, l.bytes);
                    uint64_t units = bib_suballoc_round(l.bytes ? l.bytes : 1, align) / align;
                    memset(&m.used[l.offset / align], 0, units);
                } else {
                    /* Mostly small requests, sometimes large, some unaligned. */
                    uint64_t bytes = next_random(&rng) % 8 == 0
                                         ? next_random(&rng) % (UNITS * align / 2)
                                         : next_random(&rng) % (8 * align);
                    uint64_t units = bib_suballoc_round(bytes ? bytes : 1, align) / align;
                    int64_t want = model_take(&m, units);
                    uint64_t offset = UINT64_MAX;
                    bool ok = bib_suballoc_take(&a, bytes, &offset);
                    cr_assert_eq(ok, want >= 0, "seed %llu step %d: take of %llu bytes %s",
                                 (unsigned long long)seed, step, (unsigned long long)bytes,
                                 ok ? "succeeded, the model has no room" : "failed");
                    if (ok) {
                        cr_assert_eq(offset, (uint64_t)want * align,
                                     "seed %llu step %d: offset %llu, the model's %llu",
                                     (unsigned long long)seed, step, (unsigned long long)offset,
                                     (unsigned long long)((uint64_t)want * align));
                        live[nlive++] = (live_t){offset, bytes};
                    }
                }
                assert_matches(&a, &m, align);
            }
            while (nlive > 0) {
                nlive--;
                bib_suballoc_give(&a, live[nlive].offset, live[nlive].bytes);
            }
            cr_assert(bib_suballoc_empty(&a));
            bib_suballoc_destroy(&a);
        }
    }
}
