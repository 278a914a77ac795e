/* tests/unit/test_alloc.c: the block allocator (vm/blocks.c) and the arena
 * (vm/arena.c): bump allocation, alignment, reset, free-list reuse, the
 * memory cap and its messages. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "vm/arena.h"
#include "vm/blocks.h"

#define BLOCK 4096u

Test(blocks, defaults_are_4096_byte_blocks_and_256_mib_cap) {
    bib_blocks_t b;
    bib_blocks_init(&b, 0, 0);
    cr_assert_eq(b.block_size, 4096u);
    cr_assert_eq(b.cap, 4096ull * 65536ull);
    bib_blocks_destroy(&b);
}

Test(blocks, block_size_is_rounded_up_to_alignment) {
    bib_blocks_t b;
    bib_blocks_init(&b, 100, 1 << 20);
    cr_assert_eq(b.block_size % BIB_BLOCK_ALIGN, 0);
    cr_assert_geq(b.block_size, 100u);
    bib_blocks_destroy(&b);
}

Test(blocks, freed_block_is_reused_from_the_free_list) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    void *p, *q;
    cr_assert_eq(bib_blocks_alloc(&b, &p), BIB_OK);
    cr_assert_eq(b.in_use, BLOCK);
    bib_blocks_free(&b, p);
    cr_assert_eq(b.in_use, 0);
    cr_assert_eq(b.free_count, 1);
    cr_assert_eq(bib_blocks_alloc(&b, &q), BIB_OK);
    cr_assert_eq(q, p);
    cr_assert_eq(b.free_count, 0);
    bib_blocks_free(&b, q);
    bib_blocks_destroy(&b);
}

Test(blocks, blocks_are_aligned) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    void *p;
    cr_assert_eq(bib_blocks_alloc(&b, &p), BIB_OK);
    cr_assert_eq((uintptr_t)p % BIB_BLOCK_ALIGN, 0);
    bib_blocks_free(&b, p);
    bib_blocks_destroy(&b);
}

Test(blocks, cap_limits_the_number_of_blocks) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 4 * BLOCK);
    void *p[5];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(bib_blocks_alloc(&b, &p[i]), BIB_OK);
    cr_assert_eq(bib_blocks_alloc(&b, &p[4]), BIB_E_NOMEM);
    cr_assert_null(p[4]);
    cr_assert_eq(b.in_use, 4 * BLOCK);
    for (int i = 0; i < 4; i++)
        bib_blocks_free(&b, p[i]);
    bib_blocks_destroy(&b);
}

Test(blocks, cap_error_names_the_request_and_the_cap) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 2 * BLOCK);
    void *p;
    cr_assert_eq(bib_blocks_big_alloc(&b, 100000, 64, 0, &p), BIB_E_NOMEM);
    cr_assert_not_null(strstr(b.error, "asked for 100000 bytes"), "%s", b.error);
    cr_assert_not_null(strstr(b.error, "cap 8192 bytes"), "%s", b.error);
    cr_assert_eq(b.in_use, 0);
    bib_blocks_destroy(&b);
}

Test(blocks, big_buffers_are_zeroed_aligned_and_charged) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    uint8_t *p;
    cr_assert_eq(bib_blocks_big_alloc(&b, 10000, 256, 1, (void **)&p), BIB_OK);
    cr_assert_eq((uintptr_t)p % 256, 0);
    for (int i = 0; i < 10000; i++)
        cr_assert_eq(p[i], 0);
    cr_assert_eq(b.in_use, 10000);
    cr_assert_eq(b.peak, 10000);
    bib_blocks_big_free(&b, p, 10000);
    cr_assert_eq(b.in_use, 0);
    cr_assert_eq(b.peak, 10000);
    bib_blocks_reset_peak(&b);
    cr_assert_eq(b.peak, 0);
    bib_blocks_destroy(&b);
}

Test(blocks, parked_blocks_are_released_to_make_room_under_the_cap) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 4 * BLOCK);
    void *p[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(bib_blocks_alloc(&b, &p[i]), BIB_OK);
    for (int i = 0; i < 4; i++)
        bib_blocks_free(&b, p[i]);
    cr_assert_eq(b.free_count, 4);
    void *big;
    cr_assert_eq(bib_blocks_big_alloc(&b, 3 * BLOCK, 64, 0, &big), BIB_OK);
    /* Held memory (in use + parked) never exceeds the cap. */
    cr_assert_leq(b.in_use + b.free_count * BLOCK, 4 * BLOCK);
    bib_blocks_big_free(&b, big, 3 * BLOCK);
    bib_blocks_destroy(&b);
}

Test(arena, allocations_respect_alignment) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    for (size_t align = 1; align <= 64; align *= 2) {
        void *p;
        cr_assert_eq(bib_arena_alloc(&a, 3, 1, &p), BIB_OK);
        cr_assert_eq(bib_arena_alloc(&a, 24, align, &p), BIB_OK);
        cr_assert_eq((uintptr_t)p % align, 0, "align %zu", align);
    }
    bib_arena_destroy(&a);
    bib_blocks_destroy(&b);
}

Test(arena, bump_allocations_do_not_overlap) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    uint8_t *ptrs[200];
    for (int i = 0; i < 200; i++) {
        cr_assert_eq(bib_arena_alloc(&a, 100, 8, (void **)&ptrs[i]), BIB_OK);
        memset(ptrs[i], i, 100);
    }
    for (int i = 0; i < 200; i++)
        for (int j = 0; j < 100; j++)
            cr_assert_eq(ptrs[i][j], (uint8_t)i);
    cr_assert_geq(b.in_use, 200 * 100);
    bib_arena_destroy(&a);
    bib_blocks_destroy(&b);
}

Test(arena, reset_returns_every_block_and_buffer) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    void *small, *big;
    cr_assert_eq(bib_arena_alloc(&a, 64, 8, &small), BIB_OK);
    cr_assert_eq(bib_arena_alloc(&a, 100000, 8, &big), BIB_OK);
    cr_assert_gt(b.in_use, 100000);
    bib_arena_reset(&a);
    cr_assert_eq(b.in_use, 0);
    cr_assert_eq(a.used, 0);
    /* The next run bumps from the recycled block again. */
    void *again;
    cr_assert_eq(bib_arena_alloc(&a, 64, 8, &again), BIB_OK);
    cr_assert_eq(again, small);
    bib_arena_destroy(&a);
    bib_blocks_destroy(&b);
}

Test(arena, same_allocations_charge_the_same_bytes_after_reset) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    uint64_t peaks[2];
    for (int run = 0; run < 2; run++) {
        bib_arena_reset(&a);
        bib_blocks_reset_peak(&b);
        void *p;
        for (int i = 0; i < 50; i++)
            cr_assert_eq(bib_arena_alloc(&a, (size_t)(i * 37 % 3000), 8, &p), BIB_OK);
        peaks[run] = b.peak;
    }
    cr_assert_eq(peaks[0], peaks[1]);
    bib_arena_destroy(&a);
    bib_blocks_destroy(&b);
}

Test(arena, zalloc_zero_fills) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    uint8_t *p;
    cr_assert_eq(bib_arena_alloc(&a, 500, 8, (void **)&p), BIB_OK);
    memset(p, 0xAB, 500);
    bib_arena_reset(&a);
    cr_assert_eq(bib_arena_zalloc(&a, 500, 8, (void **)&p), BIB_OK);
    for (int i = 0; i < 500; i++)
        cr_assert_eq(p[i], 0);
    bib_arena_destroy(&a);
    bib_blocks_destroy(&b);
}

Test(arena, grow_copies_and_releases_the_old_buffer) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 1 << 20);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    void *p;
    cr_assert_eq(bib_arena_alloc(&a, 10000, 8, &p), BIB_OK);
    memset(p, 7, 10000);
    uint64_t before = b.in_use;
    cr_assert_eq(bib_arena_grow(&a, &p, 10000, 20000, 8), BIB_OK);
    for (int i = 0; i < 10000; i++)
        cr_assert_eq(((uint8_t *)p)[i], 7);
    cr_assert_eq(b.in_use, before + 10000);
    bib_arena_destroy(&a);
    cr_assert_eq(b.in_use, 0);
    bib_blocks_destroy(&b);
}

Test(arena, cap_error_leaves_the_arena_usable) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 2 * BLOCK);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    void *p;
    cr_assert_eq(bib_arena_alloc(&a, 1 << 20, 8, &p), BIB_E_NOMEM);
    cr_assert_null(p);
    cr_assert_not_null(strstr(b.error, "memory cap"), "%s", b.error);
    cr_assert_eq(bib_arena_alloc(&a, 16, 8, &p), BIB_OK);
    bib_arena_destroy(&a);
    bib_blocks_destroy(&b);
}

Test(arena, small_allocations_stop_at_the_cap) {
    bib_blocks_t b;
    bib_blocks_init(&b, BLOCK, 3 * BLOCK);
    bib_arena_t a;
    bib_arena_init(&a, &b);
    void *p;
    int ok = 0;
    while (bib_arena_alloc(&a, 1000, 8, &p) == BIB_OK)
        ok++;
    cr_assert_eq(ok, 12); /* four 1000-byte pieces fit in each of three blocks */
    cr_assert_leq(b.in_use, 3 * BLOCK);
    bib_arena_destroy(&a);
    bib_blocks_destroy(&b);
}
