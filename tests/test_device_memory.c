/* The memory manager's accounting, limit and hook plumbing, driven through a host-memory
 * stand-in source so that it runs without a GPU. The GPU suite repeats the essentials on
 * the real pool. */
#include <stdlib.h>

#include "core/ctx.h"
#include "testutil.h"

typedef struct fake_source {
    int allocs, frees;
    size_t outstanding;
    void *last_stream;
    size_t refuse_above; /* 0: never refuse */
    int misalign;        /* hand out blocks 8 bytes past malloc's (16-byte aligned) ones */
} fake_source;

static void *fake_alloc(void *user, size_t bytes, void *stream)
{
    fake_source *f = user;
    f->last_stream = stream;
    if (f->refuse_above && bytes > f->refuse_above)
        return NULL;
    f->allocs++;
    f->outstanding += bytes;
    char *p = malloc(bytes + 8);
    return p && f->misalign ? p + 8 : p;
}

static void fake_free(void *user, void *ptr, size_t bytes, void *stream)
{
    fake_source *f = user;
    (void)stream;
    f->frees++;
    f->outstanding -= bytes;
    free(f->misalign ? (char *)ptr - 8 : ptr);
}

static mf_ctx *ctx_with_fake(fake_source *f, size_t limit)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CPU;
    o.device_memory_limit = limit;
    o.device_alloc = fake_alloc;
    o.device_free = fake_free;
    o.allocator_user = f;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    return ctx;
}

START_TEST(accounting_tracks_current_and_peak)
{
    fake_source f = {0};
    mf_ctx *ctx = ctx_with_fake(&f, 0);
    mf_dbuf a, b, c;
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 1000, "a"), MF_OK);
    ck_assert_int_eq(mf_dmem_alloc(ctx, &b, 500, "b"), MF_OK);
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 1500);
    mf_dmem_free(ctx, &a);
    ck_assert_ptr_null(a.ptr);
    ck_assert_int_eq(mf_dmem_alloc(ctx, &c, 200, "c"), MF_OK);
    mf_memory_stats st = tu_memory_stats(ctx);
    ck_assert_uint_eq(st.current_bytes, 700);
    ck_assert_uint_eq(st.peak_bytes, 1500);
    ck_assert_uint_eq(st.allocations, 3);
    ck_assert_uint_eq(st.failed_allocations, 0);
    ck_assert_int_eq(mf_ctx_reset_peak_memory(ctx), MF_OK);
    ck_assert_uint_eq(tu_memory_stats(ctx).peak_bytes, 700);
    mf_dmem_free(ctx, &b);
    mf_dmem_free(ctx, &c);
    mf_dmem_free(ctx, &c); /* freeing an emptied buffer is a no-op */
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 0);
    ck_assert_int_eq(f.allocs, 3);
    ck_assert_int_eq(f.frees, 3);
    ck_assert_uint_eq(f.outstanding, 0);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(zero_bytes_allocates_nothing)
{
    fake_source f = {0};
    mf_ctx *ctx = ctx_with_fake(&f, 0);
    mf_dbuf a;
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 0, "nothing"), MF_OK);
    ck_assert_ptr_null(a.ptr);
    ck_assert_int_eq(f.allocs, 0);
    mf_dmem_free(ctx, &a);
    ck_assert_int_eq(f.frees, 0);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(limit_gives_out_of_memory_with_a_message)
{
    fake_source f = {0};
    mf_ctx *ctx = ctx_with_fake(&f, 4096);
    mf_dbuf a, b;
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 4000, "factor matrix U"), MF_OK);
    ck_assert_int_eq(mf_dmem_alloc(ctx, &b, 100, "factor matrix V"), MF_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(b.ptr);
    tu_assert_error_has(ctx, "factor matrix V");
    tu_assert_error_has(ctx, "limit of 4096");
    /* The source never saw the refused request. */
    ck_assert_int_eq(f.allocs, 1);
    /* Exactly up to the limit is fine; a request beyond the limit on its own is refused
     * without overflowing the arithmetic. */
    ck_assert_int_eq(mf_dmem_alloc(ctx, &b, 96, "rest"), MF_OK);
    mf_dbuf huge;
    ck_assert_int_eq(mf_dmem_alloc(ctx, &huge, (size_t)-1, "huge"), MF_ERR_OUT_OF_MEMORY);
    mf_memory_stats st = tu_memory_stats(ctx);
    ck_assert_uint_eq(st.current_bytes, 4096);
    ck_assert_uint_eq(st.limit_bytes, 4096);
    ck_assert_uint_eq(st.failed_allocations, 2);
    mf_dmem_free(ctx, &a);
    mf_dmem_free(ctx, &b);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(a_refusing_source_gives_out_of_memory)
{
    fake_source f = {.refuse_above = 64};
    mf_ctx *ctx = ctx_with_fake(&f, 0);
    mf_dbuf a;
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 65, "SDDMM panel"), MF_ERR_OUT_OF_MEMORY);
    tu_assert_error_has(ctx, "device_alloc hook");
    tu_assert_error_has(ctx, "SDDMM panel");
    ck_assert_uint_eq(tu_memory_stats(ctx).failed_allocations, 1);
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 0);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(a_misaligned_block_is_refused_and_returned)
{
    fake_source f = {.misalign = 1};
    mf_ctx *ctx = ctx_with_fake(&f, 0);
    mf_dbuf a = {(void *)&f, 7};
    ck_assert_int_eq(mf_dmem_alloc(ctx, &a, 100, "SDDMM 16-bit factors"), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "not aligned to 16 bytes");
    tu_assert_error_has(ctx, "SDDMM 16-bit factors");
    ck_assert_ptr_null(a.ptr);
    ck_assert_int_eq(f.allocs, 1);
    ck_assert_int_eq(f.frees, 1); /* handed back, not leaked */
    ck_assert_uint_eq(f.outstanding, 0);
    ck_assert_uint_eq(tu_memory_stats(ctx).failed_allocations, 1);
    ck_assert_uint_eq(tu_memory_stats(ctx).current_bytes, 0);
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "device_memory"};
    const TTest *const tests[] = {accounting_tracks_current_and_peak, zero_bytes_allocates_nothing,
                                  limit_gives_out_of_memory_with_a_message,
                                  a_refusing_source_gives_out_of_memory,
                                  a_misaligned_block_is_refused_and_returned};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
