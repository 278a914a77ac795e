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

#define MB ((uint64_t)1 << 20)

Test(blocks, freed_large_buffers_are_parked_and_handed_out_again_for_the_same_size) {
    bib_blocks_t b;
    bib_blocks_init(&b, 0, 64 * MB);
    void *p, *q, *r;
    cr_assert_eq(bib_blocks_big_alloc(&b, 4 * MB, 64, 0, &p), BIB_OK);
    memset(p, 0xAB, 4 * MB);
    bib_blocks_big_free(&b, p, 4 * MB);
    cr_assert_eq(b.in_use, 0u);
    cr_assert_eq(b.big_count, 1u);
    /* Another size takes its own buffer; the same size (zeroed when asked)
     * the parked one. */
    cr_assert_eq(bib_blocks_big_alloc(&b, 3 * MB, 64, 0, &q), BIB_OK);
    cr_assert_eq(b.big_count, 0u,
                 "the parked buffer is given back: held would pass the most "
                 "ever in use (4 MB)");
    bib_blocks_big_free(&b, q, 3 * MB);
    cr_assert_eq(bib_blocks_big_alloc(&b, 3 * MB, 64, 1, &r), BIB_OK);
    cr_assert_eq(r, q);
    for (uint64_t i = 0; i < 3 * MB; i += 4096)
        cr_assert_eq(((unsigned char *)r)[i], 0, "a parked buffer asked for zeroed is zeroed");
    cr_assert_eq(b.in_use, 3 * MB);
    bib_blocks_big_free(&b, r, 3 * MB);
    bib_blocks_destroy(&b); /* frees what is parked (ASan checks) */
    cr_assert_eq(b.big_count, 0u);
}

Test(blocks, parked_buffers_never_hold_more_than_the_most_ever_in_use) {
    bib_blocks_t b;
    bib_blocks_init(&b, 0, 64 * MB);
    void *p[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(bib_blocks_big_alloc(&b, 2 * MB, 64, 0, &p[i]), BIB_OK);
    cr_assert_eq(b.high, 6 * MB);
    for (int i = 0; i < 3; i++)
        bib_blocks_big_free(&b, p[i], 2 * MB);
    cr_assert_eq(b.big_bytes, 6 * MB);
    /* 5 MB in use beside 6 MB parked would hold 11: the parked ones go
     * first, the oldest first, until 5 + parked <= 6. */
    void *big;
    cr_assert_eq(bib_blocks_big_alloc(&b, 5 * MB, 64, 0, &big), BIB_OK);
    cr_assert_leq(b.in_use + b.big_bytes, b.high);
    cr_assert_eq(b.big_bytes, 0u);
    bib_blocks_big_free(&b, big, 5 * MB);
    bib_blocks_destroy(&b);
}

Test(blocks, parked_buffers_make_room_under_the_cap_and_small_ones_are_not_parked) {
    bib_blocks_t b;
    bib_blocks_init(&b, 0, 8 * MB);
    void *p, *q, *small;
    cr_assert_eq(bib_blocks_big_alloc(&b, 6 * MB, 64, 0, &p), BIB_OK);
    bib_blocks_big_free(&b, p, 6 * MB);
    cr_assert_eq(b.big_bytes, 6 * MB);
    cr_assert_eq(bib_blocks_big_alloc(&b, 8 * MB, 64, 0, &q), BIB_OK,
                 "the whole cap: the parked 6 MB are given back first");
    cr_assert_eq(b.big_bytes, 0u);
    bib_blocks_big_free(&b, q, 8 * MB);
    cr_assert_eq(bib_blocks_big_alloc(&b, MB / 2, 64, 0, &small), BIB_OK);
    uint64_t parked = b.big_bytes;
    bib_blocks_big_free(&b, small, MB / 2);
    cr_assert_eq(b.big_bytes, parked, "buffers under BIB_BIG_PARK_MIN go back to mimalloc");
    bib_blocks_destroy(&b);
}

Test(blocks, reused_blocks_give_parked_buffers_back_past_the_most_in_use) {
    /* 2 MB of blocks, freed; an 8 MB buffer, freed and parked (the most in
     * use: 8 MB). Taking the blocks again must give the buffer back. */
    bib_blocks_t b;
    bib_blocks_init(&b, 4096, 64 * MB);
    enum { N = 512 }; /* 2 MB of 4 KB blocks */
    static void *blk[N];
    for (int i = 0; i < N; i++)
        cr_assert_eq(bib_blocks_alloc(&b, &blk[i]), BIB_OK);
    for (int i = 0; i < N; i++)
        bib_blocks_free(&b, blk[i]);
    void *big;
    cr_assert_eq(bib_blocks_big_alloc(&b, 8 * MB, 64, 0, &big), BIB_OK);
    bib_blocks_big_free(&b, big, 8 * MB);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(bib_blocks_alloc(&b, &blk[i]), BIB_OK);
        uint64_t held = b.in_use + b.free_count * 4096 + b.big_bytes;
        cr_assert_leq(held, b.high, "held %llu past the most in use %llu", (unsigned long long)held,
                      (unsigned long long)b.high);
    }
    for (int i = 0; i < N; i++)
        bib_blocks_free(&b, blk[i]);
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
