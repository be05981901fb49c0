/* Contexts: creation under every backend choice, option-struct sizes, errors, logging. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/ctx.h"
#include "cuda/cuda_backend.h"
#include "testutil.h"

static int usable_devices(void)
{
    char why[256];
    return mf_cuda_device_count(why, sizeof why);
}

START_TEST(defaults_and_null_options)
{
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, NULL), MF_OK);
    ck_assert_ptr_nonnull(ctx);
    mf_backend want = usable_devices() > 0 ? MF_BACKEND_CUDA : MF_BACKEND_CPU;
    ck_assert_int_eq(mf_ctx_backend(ctx), want);
    ck_assert_str_eq(mf_ctx_last_error(ctx), "no error");
    mf_ctx_destroy(ctx);
    mf_ctx_destroy(NULL); /* a no-op */
}
END_TEST

START_TEST(cpu_backend_on_request)
{
    mf_ctx *ctx = tu_cpu_ctx();
    ck_assert_int_eq(mf_ctx_backend(ctx), MF_BACKEND_CPU);
    ck_assert_ptr_null(mf_ctx_stream(ctx));
    ck_assert_int_eq(mf_ctx_set_stream(ctx, NULL), MF_ERR_UNSUPPORTED);
    tu_assert_error_has(ctx, "CPU backend");
    mf_device_info info = {.struct_size = sizeof info};
    ck_assert_int_eq(mf_ctx_device_info(ctx, &info), MF_OK);
    ck_assert_str_eq(info.name, "cpu");
    ck_assert_int_eq(info.device, -1);
    ck_assert_int_ge(info.cpu_threads, 1);
    mf_memory_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(mf_ctx_memory_stats(ctx, &st), MF_OK);
    ck_assert_uint_eq(st.current_bytes + st.peak_bytes + st.allocations, 0);
    ck_assert_int_eq(mf_ctx_release_cached_memory(ctx), MF_OK);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(cuda_without_a_device_is_no_device)
{
    if (usable_devices() > 0)
        return; /* the GPU suite covers this machine */
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CUDA;
    mf_ctx *ctx = (mf_ctx *)&o; /* a sentinel that must survive the failure */
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_ERR_NO_DEVICE);
    ck_assert_ptr_eq(ctx, (mf_ctx *)&o);
    ck_assert_msg(strstr(mf_ctx_last_error(NULL), "CUDA") != NULL, "message: %s",
                  mf_ctx_last_error(NULL));
}
END_TEST

START_TEST(auto_falls_back_to_cpu_without_a_device)
{
    if (usable_devices() > 0)
        return;
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.device = 5; /* not there either: AUTO still settles on the CPU */
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    ck_assert_int_eq(mf_ctx_backend(ctx), MF_BACKEND_CPU);
    mf_ctx_destroy(ctx);
}
END_TEST

static void expect_invalid(mf_ctx_opts *o, const char *needle)
{
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, o), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(mf_ctx_last_error(NULL), needle) != NULL, "message \"%s\" lacks \"%s\"",
                  mf_ctx_last_error(NULL), needle);
}

static void *fake_alloc(void *user, size_t bytes, void *stream)
{
    (void)user;
    (void)bytes;
    (void)stream;
    return NULL;
}

START_TEST(bad_options_are_rejected)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.backend = (mf_backend)7;
    expect_invalid(&o, "backend = 7");
    mf_ctx_opts_init(&o);
    o.device = -1;
    expect_invalid(&o, "device = -1");
    mf_ctx_opts_init(&o);
    o.cpu_threads = -2;
    expect_invalid(&o, "cpu_threads = -2");
    mf_ctx_opts_init(&o);
    o.log_level = (mf_log_level)9;
    expect_invalid(&o, "log_level");
    mf_ctx_opts_init(&o);
    o.device_alloc = fake_alloc;
    expect_invalid(&o, "device_alloc and device_free");
    ck_assert_int_eq(mf_ctx_create(NULL, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "ctx is NULL"));
}
END_TEST

START_TEST(struct_size_from_an_older_caller)
{
    /* An "older" caller knows the fields up to cpu_threads only: what follows must read as
     * the defaults, whatever garbage lies beyond the caller's struct. */
    mf_ctx_opts o;
    memset(&o, 0xAB, sizeof o);
    o.struct_size = offsetof(mf_ctx_opts, seed);
    o.backend = MF_BACKEND_CPU;
    o.device = 0;
    o.device_memory_limit = 12345;
    o.cpu_threads = 3;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    mf_device_info info = {.struct_size = sizeof info};
    ck_assert_int_eq(mf_ctx_device_info(ctx, &info), MF_OK);
    ck_assert_int_eq(info.cpu_threads, 3);
    mf_memory_stats st = {.struct_size = sizeof st};
    ck_assert_int_eq(mf_ctx_memory_stats(ctx, &st), MF_OK);
    ck_assert_uint_eq(st.limit_bytes, 12345);
    mf_ctx_destroy(ctx);
}
END_TEST

START_TEST(struct_size_from_a_newer_caller)
{
    struct {
        mf_ctx_opts known;
        uint64_t future_field;
    } newer;
    mf_ctx_opts_init(&newer.known);
    newer.known.struct_size = sizeof newer;
    newer.known.backend = MF_BACKEND_CPU;
    newer.future_field = 0; /* unset: fine */
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &newer.known), MF_OK);
    mf_ctx_destroy(ctx);
    ctx = NULL;
    newer.future_field = 1; /* a field this version cannot honour */
    ck_assert_int_eq(mf_ctx_create(&ctx, &newer.known), MF_ERR_UNSUPPORTED);
    ck_assert_ptr_null(ctx);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "does not know"));
}
END_TEST

START_TEST(struct_size_garbage_is_rejected)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.struct_size = 0;
    expect_invalid(&o, "struct_size = 0");
    o.struct_size = (size_t)1 << 40; /* uninitialized memory, most likely */
    expect_invalid(&o, "_init()");
}
END_TEST

START_TEST(output_structs_respect_struct_size)
{
    mf_ctx *ctx = tu_cpu_ctx();
    /* An older caller's mf_memory_stats ends after peak_bytes: nothing beyond is written. */
    struct {
        mf_memory_stats stats;
        unsigned char guard[8];
    } out;
    memset(&out, 0x5A, sizeof out);
    out.stats.struct_size = offsetof(mf_memory_stats, limit_bytes);
    ck_assert_int_eq(mf_ctx_memory_stats(ctx, &out.stats), MF_OK);
    ck_assert_uint_eq(out.stats.current_bytes, 0);
    unsigned char *tail = (unsigned char *)&out.stats.limit_bytes;
    for (size_t i = 0; i < sizeof out - offsetof(mf_memory_stats, limit_bytes); i++)
        ck_assert_uint_eq(tail[i], 0x5A);
    out.stats.struct_size = 3;
    ck_assert_int_eq(mf_ctx_memory_stats(ctx, &out.stats), MF_ERR_INVALID_ARGUMENT);
    /* A size ending inside a field would have half of it written: refused, nothing written
     * (the struct_size of every version is a sizeof, a multiple of 8). */
    memset(&out, 0x5A, sizeof out);
    out.stats.struct_size = 13;
    ck_assert_int_eq(mf_ctx_memory_stats(ctx, &out.stats), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "ends inside a field");
    for (size_t i = sizeof out.stats.struct_size; i < sizeof out; i++)
        ck_assert_uint_eq(((unsigned char *)&out)[i], 0x5A);
    mf_device_info info;
    memset(&info, 0x5A, sizeof info);
    info.struct_size = 9;
    ck_assert_int_eq(mf_ctx_device_info(ctx, &info), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "ends inside a field");
    ck_assert_int_eq(mf_ctx_memory_stats(ctx, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_memory_stats(NULL, &out.stats), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_ctx_device_info(ctx, NULL), MF_ERR_INVALID_ARGUMENT);
    mf_ctx_destroy(ctx);
}
END_TEST

typedef struct log_capture {
    int calls;
    mf_log_level worst;
    char last[512];
} log_capture;

static void capture(void *user, mf_log_level level, const char *message)
{
    log_capture *c = user;
    c->calls++;
    if (c->worst == 0 || level < c->worst)
        c->worst = level;
    snprintf(c->last, sizeof c->last, "%s", message);
}

START_TEST(log_callback_receives_messages)
{
    log_capture cap = {0};
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.log = capture;
    o.log_user = &cap;
    o.log_level = MF_LOG_DEBUG;
    mf_ctx *ctx = NULL;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    /* Creation says which backend it chose (INFO), and failures are logged at DEBUG. */
    ck_assert_int_ge(cap.calls, 1);
    int before = cap.calls;
    ck_assert_int_eq(mf_sparse_shape(NULL, NULL, NULL, NULL), MF_ERR_INVALID_ARGUMENT);
    mf_sparse *m = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &m, 0, 1, 0, NULL, NULL, NULL, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(cap.calls, before + 1);
    ck_assert_ptr_nonnull(strstr(cap.last, "shape 0 x 1"));
    mf_ctx_destroy(ctx);

    /* At the default level (warnings) a healthy run says nothing. */
    log_capture quiet = {0};
    mf_ctx_opts_init(&o);
    o.backend = MF_BACKEND_CPU;
    o.log = capture;
    o.log_user = &quiet;
    ck_assert_int_eq(mf_ctx_create(&ctx, &o), MF_OK);
    mf_ctx_destroy(ctx);
    ck_assert_int_eq(quiet.calls, 0);
}
END_TEST

START_TEST(errors_without_a_context_go_to_the_thread)
{
    ck_assert_int_eq(mf_sparse_from_coo(NULL, NULL, 1, 1, 0, NULL, NULL, NULL, MF_MEMORY_HOST, 0),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mf_ctx_last_error(NULL), "mf_sparse_from_coo: ctx is NULL"));
}
END_TEST

/* mf_check_dense at its edges: ld >= cols, and (rows - 1) * ld + cols floats within
 * PTRDIFF_MAX bytes, with no overflow on the way. */
START_TEST(dense_spans_are_checked_without_overflow)
{
    mf_ctx *ctx = tu_cpu_ctx();
    const int64_t limit = PTRDIFF_MAX / (int64_t)sizeof(float);
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", 4, "k", 4, 1000), MF_OK);
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", 3, "k", 4, 1000), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "f: ld = 3 is less than k = 4");
    /* one row spans cols floats whatever ld is */
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", INT64_MAX, "k", 4, 1), MF_OK);
    /* 3 rows: 2 * ld + 2 floats; the largest ld that fits, and the next */
    const int64_t top = (limit - 2) / 2;
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", top, "k", 2, 3), MF_OK);
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", top + 1, "k", 2, 3), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "over 3 rows spans more memory than an address space holds");
    /* the product overflows int64 outright */
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", INT64_MAX / 3, "k", 2, 1000),
                     MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", INT64_MAX, "k", INT64_MAX, 1),
                     MF_ERR_INVALID_ARGUMENT);
    /* a factor table at the library's largest shape passes */
    ck_assert_int_eq(mf_check_dense(ctx, "f", "ld", 1024, "k", 1000, INT32_MAX), MF_OK);
    mf_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "ctx"};
    const TTest *const tests[] = {defaults_and_null_options,
                                  cpu_backend_on_request,
                                  cuda_without_a_device_is_no_device,
                                  auto_falls_back_to_cpu_without_a_device,
                                  bad_options_are_rejected,
                                  struct_size_from_an_older_caller,
                                  struct_size_from_a_newer_caller,
                                  struct_size_garbage_is_rejected,
                                  output_structs_respect_struct_size,
                                  log_callback_receives_messages,
                                  errors_without_a_context_go_to_the_thread,
                                  dense_spans_are_checked_without_overflow};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
