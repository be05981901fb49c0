/* Status strings, version queries, and the option initializers' size contract. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/opts.h" /* MF_OPTS_END */
#include "testutil.h"

#ifdef MFACT_HAVE_CUDA
#define MFACT_HAVE_CUDA_TEXT "CUDA "
#else
#define MFACT_HAVE_CUDA_TEXT "cuda off"
#endif

START_TEST(every_status_has_its_own_string)
{
    const char *seen[MF_ERR_INTERNAL + 1];
    for (int s = MF_OK; s <= MF_ERR_INTERNAL; s++) {
        seen[s] = mf_status_string((mf_status)s);
        ck_assert_ptr_nonnull(seen[s]);
        ck_assert_str_ne(seen[s], "unknown status");
        for (int t = 0; t < s; t++)
            ck_assert_str_ne(seen[s], seen[t]);
    }
    ck_assert_str_eq(mf_status_string(MF_OK), "success");
    ck_assert_str_eq(mf_status_string(MF_ERR_OUT_OF_MEMORY), "out of memory");
    ck_assert_str_eq(mf_status_string((mf_status)999), "unknown status");
    ck_assert_str_eq(mf_status_string((mf_status)-1), "unknown status");
}
END_TEST

START_TEST(status_values_are_the_abi)
{
    /* Values are frozen: a renumbering would break every compiled caller. */
    ck_assert_int_eq(MF_ERR_INVALID_ARGUMENT, 1);
    ck_assert_int_eq(MF_ERR_INVALID_DATA, 2);
    ck_assert_int_eq(MF_ERR_OUT_OF_MEMORY, 3);
    ck_assert_int_eq(MF_ERR_NO_DEVICE, 4);
    ck_assert_int_eq(MF_ERR_UNSUPPORTED, 5);
    ck_assert_int_eq(MF_ERR_CUDA, 6);
    ck_assert_int_eq(MF_ERR_IO, 7);
    ck_assert_int_eq(MF_ERR_CANCELLED, 8);
    ck_assert_int_eq(MF_ERR_NUMERIC, 9);
    ck_assert_int_eq(MF_ERR_INTERNAL, 10);
}
END_TEST

START_TEST(version_matches_the_header)
{
    ck_assert_uint_eq(mf_version(), MF_VERSION_NUMBER);
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", MF_VERSION_MAJOR, MF_VERSION_MINOR,
             MF_VERSION_PATCH);
    ck_assert_str_eq(mf_version_string(), expect);
    ck_assert_ptr_nonnull(strstr(mf_build_info(), expect));
    ck_assert_ptr_nonnull(strstr(mf_build_info(), MFACT_HAVE_CUDA_TEXT));
}
END_TEST

/* An initializer given `size` bytes of a buffer full of 0xA5: it writes the defaults' first
 * `size` bytes (struct_size = size) and nothing past them, zeros past the library's struct
 * when the caller's is larger, and nothing at all below the size of struct_size. `full` is
 * the struct filled by the macro; `ours` its size. */
typedef void (*init_sized_fn)(void *, size_t);

static void check_sized(const char *name, init_sized_fn init, const void *full, size_t ours)
{
    unsigned char buf[4096];
    ck_assert_uint_lt(ours + 64, sizeof buf);
    const size_t sizes[] = {0,        4,    sizeof(size_t), sizeof(size_t) + 4, ours / 2,
                            ours - 1, ours, ours + 8,       ours + 64};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        const size_t size = sizes[t];
        memset(buf, 0xA5, sizeof buf);
        init(buf, size);
        const size_t touched = size < sizeof(size_t) ? 0 : size;
        for (size_t b = touched; b < sizeof buf; b++)
            ck_assert_msg(buf[b] == 0xA5, "%s_init_sized(%zu) wrote byte %zu", name, size, b);
        if (touched == 0)
            continue;
        size_t got;
        memcpy(&got, buf, sizeof got);
        ck_assert_uint_eq(got, size);
        const size_t same = size < ours ? size : ours;
        ck_assert_msg(memcmp(buf + sizeof(size_t), (const unsigned char *)full + sizeof(size_t),
                             same - sizeof(size_t)) == 0,
                      "%s_init_sized(%zu): not the defaults", name, size);
        for (size_t b = ours; b < size; b++)
            ck_assert_msg(buf[b] == 0, "%s_init_sized(%zu): byte %zu past the struct not zero",
                          name, size, b);
    }
}

/* The exported *_init symbol of binaries built before the _sized initializers writes the
 * struct as their header had it, through `end`, and no further. */
typedef void (*init_legacy_fn)(void *);

static void check_legacy(const char *name, init_legacy_fn init, size_t end)
{
    unsigned char buf[4096];
    memset(buf, 0xA5, sizeof buf);
    init(buf);
    size_t got;
    memcpy(&got, buf, sizeof got);
    ck_assert_msg(got == end, "%s_init: struct_size %zu, not %zu", name, got, end);
    for (size_t b = end; b < sizeof buf; b++)
        ck_assert_msg(buf[b] == 0xA5, "%s_init wrote byte %zu past %zu", name, b, end);
}

/* Typed wrappers, so that each initializer is called through its own type. */
#define INIT_WRAPPERS(T, fn)                                                                       \
    static void fn##_sized_any(void *p, size_t size)                                               \
    {                                                                                              \
        fn##_sized((T *)p, size);                                                                  \
    }                                                                                              \
    static void fn##_legacy_any(void *p)                                                           \
    {                                                                                              \
        (fn)((T *)p);                                                                              \
    }
INIT_WRAPPERS(mf_ctx_opts, mf_ctx_opts_init)
INIT_WRAPPERS(mf_read_opts, mf_read_opts_init)
INIT_WRAPPERS(mf_model, mf_model_init)
INIT_WRAPPERS(mf_als_opts, mf_als_opts_init)
INIT_WRAPPERS(mf_sgd_opts, mf_sgd_opts_init)
INIT_WRAPPERS(mf_bmf_opts, mf_bmf_opts_init)
INIT_WRAPPERS(mf_asd_opts, mf_asd_opts_init)
INIT_WRAPPERS(mf_ials_opts, mf_ials_opts_init)
INIT_WRAPPERS(mf_model_save_opts, mf_model_save_opts_init)

#define CHECK_INIT(T, fn, last)                                                                    \
    do {                                                                                           \
        T full;                                                                                    \
        fn(&full);                                                                                 \
        ck_assert_uint_eq(full.struct_size, sizeof full);                                          \
        check_sized(#fn, fn##_sized_any, &full, sizeof full);                                      \
        check_legacy(#fn, fn##_legacy_any, MF_OPTS_END(T, last));                                  \
    } while (0)

START_TEST(initializers_write_only_the_callers_struct)
{
    CHECK_INIT(mf_ctx_opts, mf_ctx_opts_init, allocator_user);
    CHECK_INIT(mf_read_opts, mf_read_opts_init, flags);
    CHECK_INIT(mf_model, mf_model_init, where);
    CHECK_INIT(mf_als_opts, mf_als_opts_init, cg_steps);
    CHECK_INIT(mf_sgd_opts, mf_sgd_opts_init, tune);
    CHECK_INIT(mf_bmf_opts, mf_bmf_opts_init, temperature_decay);
    CHECK_INIT(mf_asd_opts, mf_asd_opts_init, rank_continuation);
    CHECK_INIT(mf_ials_opts, mf_ials_opts_init, fp16);
    CHECK_INIT(mf_model_save_opts, mf_model_save_opts_init, options);
}
END_TEST

/* A struct from an older header (ALS options through cg_steps, as the exported symbol
 * fills them) runs, with the newer fields at their defaults; one from a newer header with
 * zeros past ours runs too. */
START_TEST(older_and_newer_structs_run)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int32_t r[] = {0, 0, 1, 2, 2}, c[] = {0, 1, 1, 0, 2};
    const float v[] = {4.0f, 3.0f, 5.0f, 1.0f, 2.0f};
    mf_sparse *R = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &R, 3, 3, 5, r, c, v, MF_MEMORY_HOST, 0), MF_OK);
    float U[3 * 2], V[3 * 2];
    union {
        mf_als_opts o;
        unsigned char bytes[sizeof(mf_als_opts) + 32];
    } old, newer;
    /* Past the old struct_size, bytes the run must not read: 0xA5 would be tf32 = 0xA5A5A5A5,
     * which it refuses. */
    memset(&old, 0xA5, sizeof old);
    (mf_als_opts_init)(&old.o);
    old.o.rank = 2;
    mf_als_report rep = {.struct_size = sizeof rep};
    ck_assert_int_eq(mf_als_run(ctx, R, &old.o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    mf_als_opts_init_sized(&newer.o, sizeof newer.bytes);
    newer.o.rank = 2;
    ck_assert_int_eq(mf_als_run(ctx, R, &newer.o, U, V, MF_MEMORY_HOST, &rep), MF_OK);
    newer.bytes[sizeof newer.bytes - 1] = 1; /* a field this version does not know, set */
    ck_assert_int_eq(mf_als_run(ctx, R, &newer.o, U, V, MF_MEMORY_HOST, &rep), MF_ERR_UNSUPPORTED);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

/* A struct_size that ends inside a field (half a pointer, the low byte of an enum) is
 * refused before a field is read; the sizes real callers pass (a sizeof, or what the unsized
 * initializers of older binaries wrote, some of them ending on a 4-byte field) run. */
START_TEST(struct_sizes_inside_a_field_are_refused)
{
    mf_ctx *ctx = NULL;
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU;
    co.struct_size = 9; /* struct_size and backend's first byte */
    ck_assert_int_eq(mf_ctx_create(&ctx, &co), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "ends inside a field"));
    ck_assert_ptr_null(ctx);

    ctx = tu_cpu_ctx();
    mf_read_opts ro;
    mf_read_opts_init(&ro);
    ro.row_column = "user";
    ro.struct_size = offsetof(mf_read_opts, row_column) + 1; /* a pointer's first byte */
    mf_sparse *S = NULL;
    ck_assert_int_eq(mf_sparse_read(ctx, &S, "/nonexistent", &ro), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "mf_read_opts.struct_size");
    ck_assert_ptr_null(S);

    const int32_t r[] = {0, 0, 1, 2, 2}, c[] = {0, 1, 1, 0, 2};
    const float v[] = {4.0f, 3.0f, 5.0f, 1.0f, 2.0f};
    mf_sparse *R = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &R, 3, 3, 5, r, c, v, MF_MEMORY_HOST, 0), MF_OK);
    float U[3 * 2], V[3 * 2], keep[3 * 2];
    for (int i = 0; i < 6; i++)
        U[i] = keep[i] = (float)i;
    mf_biases b;
    memset(&b, 0, sizeof b);
    mf_als_opts ao;
    mf_als_opts_init(&ao);
    ao.rank = 2, ao.bias_out = &b;
    ao.struct_size = offsetof(mf_als_opts, bias_out) + 1;
    ck_assert_int_eq(mf_als_run(ctx, R, &ao, U, V, MF_MEMORY_HOST, NULL), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "mf_als_opts.struct_size");
    ck_assert_mem_eq(U, keep, sizeof keep);

    /* the older binaries' sizes: SGD's ends on a 4-byte field (tune), and so does mf_model's */
    mf_sgd_opts so;
    (mf_sgd_opts_init)(&so);
    ck_assert_uint_eq(so.struct_size % _Alignof(mf_sgd_opts), 4);
    so.rank = 2, so.epochs = 2;
    ck_assert_int_eq(mf_sgd_hogwild_run(ctx, R, &so, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    mf_model m;
    (mf_model_init)(&m);
    ck_assert_uint_eq(m.struct_size % _Alignof(mf_model), 4);
    m.users = 3, m.items = 3, m.k = 2, m.U = U, m.ldu = 2, m.V = V, m.ldv = 2;
    float pred = NAN;
    ck_assert_int_eq(mf_predict_pairs(ctx, &m, 1, r, c, &pred), MF_OK);
    ck_assert(isfinite(pred));
    const size_t bad[] = {MF_OPTS_END(mf_model, where) + 1, sizeof m + 3};
    for (int i = 0; i < 2; i++) {
        m.struct_size = bad[i];
        pred = -1.0f;
        ck_assert_int_eq(mf_predict_pairs(ctx, &m, 1, r, c, &pred), MF_ERR_INVALID_ARGUMENT);
        tu_assert_error_has(ctx, "ends inside a field");
        ck_assert(pred == -1.0f);
    }
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "status"};
    const TTest *const tests[] = {
        every_status_has_its_own_string, status_values_are_the_abi,
        version_matches_the_header,      initializers_write_only_the_callers_struct,
        older_and_newer_structs_run,     struct_sizes_inside_a_field_are_refused};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
