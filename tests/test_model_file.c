/* Model files (mf_model_save, mf_model_load, mf_saved_model_*): round trips bit for bit
 * (factors, biases, mean, none, ld > k, the metadata), predictions of a loaded model equal
 * the trained one's, every truncation and every single-byte change of a small file refused
 * with a message, files made by hand to the format's description (docs/model-file.md: a
 * future version, a section past the end, a shape of terabytes, sections this version does
 * not know), the atomic replacement of the target, and every bad argument. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <dirent.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crc32.h"
#include "testutil.h"

/* ---- scratch files --------------------------------------------------------------------- */

static char dir[256];

static void make_dir(void)
{
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/mfact-model-XXXXXX", tmp);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* The files left in the scratch directory (0 once a test has removed its own). */
static int files_left(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[512];
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

static const char *in_dir(const char *name)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, const unsigned char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* ---- models ---------------------------------------------------------------------------- */

/* A users x items model of rank k with leading dimensions k + pad, seeded values (the
 * padding NaN: it must never reach the file), and biases when asked. */
typedef struct test_model {
    mf_model m;
    float *U, *V, *bu, *bi;
} test_model;

static test_model make_model(int32_t users, int32_t items, int k, int pad, int biases,
                             uint64_t seed)
{
    test_model t;
    const int64_t ld = k + pad;
    t.U = malloc((size_t)(users * ld) * sizeof(float));
    t.V = malloc((size_t)(items * ld) * sizeof(float));
    t.bu = biases ? malloc((size_t)users * sizeof(float)) : NULL;
    t.bi = biases ? malloc((size_t)items * sizeof(float)) : NULL;
    for (int64_t p = 0; p < users * ld; p++)
        t.U[p] = p % ld < k ? (float)(tu_unit(&seed) - 0.5) : NAN;
    for (int64_t p = 0; p < items * ld; p++)
        t.V[p] = p % ld < k ? (float)(tu_unit(&seed) - 0.5) : NAN;
    for (int32_t u = 0; biases && u < users; u++)
        t.bu[u] = (float)(tu_unit(&seed) - 0.5);
    for (int32_t i = 0; biases && i < items; i++)
        t.bi[i] = (float)(tu_unit(&seed) - 0.5);
    mf_model_init(&t.m);
    t.m.users = users, t.m.items = items, t.m.k = k;
    t.m.U = t.U, t.m.ldu = ld, t.m.V = t.V, t.m.ldv = ld;
    t.m.mean = biases ? 3.25f : 0.0f;
    t.m.user_bias = t.bu, t.m.item_bias = t.bi;
    return t;
}

static void free_model(test_model *t)
{
    free(t->U), free(t->V), free(t->bu), free(t->bi);
}

/* The loaded view equals the model bit for bit (its rows, not its padding). */
static void expect_same(const mf_model *a, const mf_model *b)
{
    ck_assert_int_eq(a->users, b->users);
    ck_assert_int_eq(a->items, b->items);
    ck_assert_int_eq(a->k, b->k);
    ck_assert(memcmp(&a->mean, &b->mean, sizeof a->mean) == 0);
    for (int32_t u = 0; u < a->users; u++)
        ck_assert(memcmp(a->U + u * a->ldu, b->U + u * b->ldu, (size_t)a->k * sizeof(float)) == 0);
    for (int32_t i = 0; i < a->items; i++)
        ck_assert(memcmp(a->V + i * a->ldv, b->V + i * b->ldv, (size_t)a->k * sizeof(float)) == 0);
    ck_assert(!a->user_bias == !b->user_bias);
    ck_assert(!a->item_bias == !b->item_bias);
    if (a->user_bias)
        ck_assert(memcmp(a->user_bias, b->user_bias, (size_t)a->users * sizeof(float)) == 0);
    if (a->item_bias)
        ck_assert(memcmp(a->item_bias, b->item_bias, (size_t)a->items * sizeof(float)) == 0);
}

static mf_saved_model *load_ok(mf_ctx *ctx, const char *path, mf_model *view)
{
    mf_saved_model *s = NULL;
    ck_assert_msg(mf_model_load(ctx, path, &s) == MF_OK, "%s", mf_ctx_last_error(ctx));
    ck_assert_ptr_nonnull(s);
    mf_model_init(view);
    ck_assert_int_eq(mf_saved_model_view(s, view), MF_OK);
    ck_assert_int_eq(view->where, MF_MEMORY_HOST);
    ck_assert_int_eq(view->ldu, view->k);
    ck_assert_int_eq(view->ldv, view->k);
    return s;
}

/* A small saved model's bytes (3 users, 2 items, rank 2, biases, metadata). */
static unsigned char *small_file(mf_ctx *ctx, size_t *n)
{
    test_model t = make_model(3, 2, 2, 1, 1, 7);
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = "als";
    o.options = "rank=2 lambda=15";
    const char *path = in_dir("small.mfm");
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_OK);
    free_model(&t);
    unsigned char *b = tu_read_file(path, n);
    unlink(path);
    return b;
}

/* A load that must fail: the status, *out untouched, the path in the message, and the
 * message's words. */
static void expect_refused(mf_ctx *ctx, const char *path, mf_status status, const char *words)
{
    mf_saved_model *sentinel = (mf_saved_model *)(uintptr_t)0x1234;
    mf_saved_model *s = sentinel;
    mf_status st = mf_model_load(ctx, path, &s);
    ck_assert_msg(st == status, "status %d (%s), expected %d", (int)st, mf_ctx_last_error(ctx),
                  (int)status);
    ck_assert_ptr_eq(s, sentinel);
    tu_assert_error_has(ctx, path);
    if (words)
        tu_assert_error_has(ctx, words);
}

/* ---- round trips ----------------------------------------------------------------------- */

START_TEST(crc32_known_answer)
{
    ck_assert_uint_eq(mf_crc32(0, "123456789", 9), 0xCBF43926u);
    ck_assert_uint_eq(mf_crc32(mf_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    ck_assert_uint_eq(mf_crc32(0, "", 0), 0u);
    unsigned char big[1000]; /* past the 8-byte steps, against a bytewise reference */
    uint32_t ref = 0xFFFFFFFFu;
    for (int i = 0; i < 1000; i++) {
        big[i] = (unsigned char)(i * 131 + 7);
        ref ^= big[i];
        for (int b = 0; b < 8; b++)
            ref = ref & 1 ? (ref >> 1) ^ 0xEDB88320u : ref >> 1;
    }
    ck_assert_uint_eq(mf_crc32(0, big, 1000), ~ref);
}
END_TEST

START_TEST(round_trip_bit_for_bit)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    test_model t = make_model(37, 23, 5, 3, 1, 1);
    t.U[0] = -0.0f, t.U[1] = 1e-40f, t.V[2] = 3.4e38f, t.bu[0] = -1e-45f; /* odd floats */
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = "sgd";
    o.options = "rank=5 lambda=0.03 index_base=1";
    const char *path = in_dir("m.mfm");
    ck_assert_msg(mf_model_save(ctx, &t.m, &o, path) == MF_OK, "%s", mf_ctx_last_error(ctx));
    ck_assert_int_eq(files_left(), 1); /* no temporary file left */
    mf_model v;
    mf_saved_model *s = load_ok(ctx, path, &v);
    expect_same(&t.m, &v);
    ck_assert_str_eq(mf_saved_model_algorithm(s), "sgd");
    ck_assert_str_eq(mf_saved_model_options(s), "rank=5 lambda=0.03 index_base=1");
    ck_assert_str_eq(mf_saved_model_library_version(s), mf_version_string());
    /* Saved again from the view: the same bytes. */
    size_t n1, n2;
    unsigned char *b1 = tu_read_file(path, &n1);
    const char *again = in_dir("again.mfm");
    ck_assert_int_eq(mf_model_save(ctx, &v, &o, again), MF_OK);
    unsigned char *b2 = tu_read_file(again, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(b1, b2, n1) == 0);
    free(b1), free(b2);
    mf_saved_model_destroy(s);
    free_model(&t);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

START_TEST(round_trip_without_biases_or_metadata)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    test_model t = make_model(4, 9, 1, 0, 0, 2); /* k = 1, ld = k, no mean, no biases */
    const char *path = in_dir("plain.mfm");
    ck_assert_int_eq(mf_model_save(ctx, &t.m, NULL, path), MF_OK);
    mf_model v;
    mf_saved_model *s = load_ok(ctx, path, &v);
    expect_same(&t.m, &v);
    ck_assert_ptr_null(v.user_bias);
    ck_assert_ptr_null(v.item_bias);
    ck_assert_str_eq(mf_saved_model_algorithm(s), "");
    ck_assert_str_eq(mf_saved_model_options(s), "");
    mf_saved_model_destroy(s);
    /* One bias array of the two, and empty metadata strings (none written). */
    free_model(&t);
    t = make_model(6, 2, 3, 2, 1, 3);
    free(t.bi), t.bi = NULL, t.m.item_bias = NULL;
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = "", o.options = "";
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_OK); /* over the first */
    s = load_ok(ctx, path, &v);
    expect_same(&t.m, &v);
    ck_assert_str_eq(mf_saved_model_algorithm(s), "");
    mf_saved_model_destroy(s);
    free_model(&t);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* A model ALS fits, saved and loaded: mf_predict_pairs gives the same bits from both, for
 * seen and unseen pairs, and the same RMSE on the ratings. */
START_TEST(loaded_predictions_are_the_trained_ones)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    enum { USERS = 40, ITEMS = 30, K = 4 };
    int32_t r[USERS * ITEMS], c[USERS * ITEMS];
    float val[USERS * ITEMS];
    uint64_t seed = 11;
    int64_t nnz = 0;
    for (int32_t u = 0; u < USERS; u++)
        for (int32_t i = 0; i < ITEMS; i++)
            if (tu_unit(&seed) < 0.3 || (u + i) % 5 == 0)
                r[nnz] = u, c[nnz] = i, val[nnz] = (float)(1 + (u * 7 + i * 3) % 5), nnz++;
    mf_sparse *R = NULL;
    ck_assert_int_eq(mf_sparse_from_coo(ctx, &R, USERS, ITEMS, nnz, r, c, val, MF_MEMORY_HOST, 0),
                     MF_OK);
    float U[USERS * K], V[ITEMS * K], bu[USERS], bi[ITEMS];
    mf_biases b = {0.0f, bu, bi};
    mf_als_opts ao;
    mf_als_opts_init(&ao);
    ao.rank = K, ao.iterations = 3, ao.bias_out = &b;
    ck_assert_int_eq(mf_als_run(ctx, R, &ao, U, V, MF_MEMORY_HOST, NULL), MF_OK);
    mf_model m;
    mf_model_init(&m);
    m.users = USERS, m.items = ITEMS, m.k = K, m.U = U, m.ldu = K, m.V = V, m.ldv = K;
    m.mean = b.mean, m.user_bias = bu, m.item_bias = bi;
    const char *path = in_dir("als.mfm");
    ck_assert_int_eq(mf_model_save(ctx, &m, NULL, path), MF_OK);
    mf_model v;
    mf_saved_model *s = load_ok(ctx, path, &v);
    enum { PAIRS = 500 };
    int32_t pu[PAIRS], pi[PAIRS];
    float want[PAIRS], got[PAIRS];
    for (int p = 0; p < PAIRS; p++) /* some past the model: unseen */
        pu[p] = (int32_t)(tu_unit(&seed) * (USERS + 3)),
        pi[p] = (int32_t)(tu_unit(&seed) * (ITEMS + 3));
    ck_assert_int_eq(mf_predict_pairs(ctx, &m, PAIRS, pu, pi, want), MF_OK);
    ck_assert_int_eq(mf_predict_pairs(ctx, &v, PAIRS, pu, pi, got), MF_OK);
    ck_assert(memcmp(want, got, sizeof want) == 0);
    double e1, e2;
    ck_assert_int_eq(mf_model_rmse(ctx, &m, R, &e1), MF_OK);
    ck_assert_int_eq(mf_model_rmse(ctx, &v, R, &e2), MF_OK);
    ck_assert(e1 == e2);
    mf_saved_model_destroy(s);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* ---- damaged files --------------------------------------------------------------------- */

START_TEST(every_truncation_refused)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    size_t n;
    unsigned char *b = small_file(ctx, &n);
    ck_assert_uint_gt(n, 100);
    const char *path = in_dir("cut.mfm");
    for (size_t len = 0; len < n; len++) {
        write_bytes(path, b, len);
        expect_refused(ctx, path, MF_ERR_INVALID_DATA, len >= 16 ? "truncated at byte" : NULL);
    }
    write_bytes(path, b, n);
    mf_model v;
    mf_saved_model_destroy(load_ok(ctx, path, &v));
    /* One byte more is refused too. */
    b = realloc(b, n + 1);
    b[n] = 0;
    write_bytes(path, b, n + 1);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "past the end");
    free(b);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

START_TEST(every_byte_change_refused)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    size_t n;
    unsigned char *b = small_file(ctx, &n);
    const char *path = in_dir("flip.mfm");
    static const unsigned char flips[] = {0x01, 0x10, 0x80, 0xff};
    for (size_t at = 0; at < n; at++)
        for (size_t f = 0; f < sizeof flips; f++) {
            b[at] ^= flips[f];
            write_bytes(path, b, n);
            mf_saved_model *s = NULL;
            mf_status st = mf_model_load(ctx, path, &s);
            ck_assert_msg(st == MF_ERR_INVALID_DATA || st == MF_ERR_UNSUPPORTED,
                          "byte %zu ^ 0x%02x: status %d", at, flips[f], (int)st);
            ck_assert_ptr_null(s);
            tu_assert_error_has(ctx, path);
            b[at] ^= flips[f];
        }
    free(b);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* ---- files made to the format's description -------------------------------------------- */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v), put32(p + 4, (uint32_t)(v >> 32));
}

/* A file by hand: the header's fields, then sections (kind, flags, payload), with every
 * size and checksum as docs/model-file.md describes them. */
typedef struct hand_section {
    uint32_t kind, flags;
    const void *data;
    uint64_t length;
} hand_section;

static size_t hand_file(unsigned char *out, uint32_t version, int32_t users, int32_t items,
                        int32_t k, uint32_t flags, float mean, const hand_section *s, int n)
{
    size_t at = 64;
    for (int i = 0; i < n; i++) {
        unsigned char *h = out + at;
        memset(h, 0, 24);
        put32(h, s[i].kind), put32(h + 4, s[i].flags), put64(h + 8, s[i].length);
        put32(h + 20, mf_crc32(0, h, 20));
        size_t padded = (size_t)((s[i].length + 7) / 8 * 8);
        memset(h + 24, 0, padded + 8);
        memcpy(h + 24, s[i].data, (size_t)s[i].length);
        put32(h + 24 + padded, mf_crc32(0, s[i].data, (size_t)s[i].length));
        at += 24 + padded + 8;
    }
    const size_t bytes = at + 16;
    memset(out, 0, 64);
    memcpy(out, "MFACTMDL", 8);
    put32(out + 8, version), put32(out + 12, 64), put64(out + 16, bytes);
    put32(out + 24, (uint32_t)n), put32(out + 28, mf_version());
    put32(out + 32, (uint32_t)users), put32(out + 36, (uint32_t)items),
        put32(out + 40, (uint32_t)k);
    put32(out + 44, flags);
    memcpy(out + 48, &mean, 4); /* the tests run on little-endian hosts */
    put32(out + 60, mf_crc32(0, out, 60));
    memcpy(out + at, "MFACTEND", 8);
    put32(out + at + 8, mf_crc32(0, out, at + 8));
    put32(out + at + 12, 0);
    return bytes;
}

START_TEST(hand_made_files)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    const float U[2] = {1.0f, 2.0f}, V[3] = {0.5f, -1.0f, 4.0f}, bu[2] = {0.25f, -0.25f};
    unsigned char f[1024];
    const char *path = in_dir("hand.mfm");
    mf_model v;
    /* The writer's layout, made here from the description: it loads. */
    hand_section s[6] = {{3, 1, U, 8}, {4, 1, V, 12}, {5, 1, bu, 8}};
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 1, 2.5f, s, 3));
    mf_saved_model *m = load_ok(ctx, path, &v);
    ck_assert(v.users == 2 && v.items == 3 && v.k == 1 && v.mean == 2.5f);
    ck_assert(v.U[1] == 2.0f && v.V[2] == 4.0f && v.user_bias[1] == -0.25f && !v.item_bias);
    mf_saved_model_destroy(m);
    /* Sections this version does not know, optional (an empty one among them): skipped. */
    hand_section extra[5] = {{9, 0, "", 0}, {3, 1, U, 8}, {99, 0, "later", 5}, {4, 1, V, 12}};
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, extra, 4));
    mf_saved_model_destroy(load_ok(ctx, path, &v));
    /* ... but one the file requires needs a newer mfact. */
    extra[2].flags = 1;
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, extra, 4));
    expect_refused(ctx, path, MF_ERR_UNSUPPORTED, "kind 99");
    /* A future format version. */
    write_bytes(path, f, hand_file(f, 2, 2, 3, 1, 0, 0.0f, s, 2));
    expect_refused(ctx, path, MF_ERR_UNSUPPORTED, "format version 2 is newer");
    /* Wrong magic; an empty file. */
    size_t n = hand_file(f, 1, 2, 3, 1, 0, 0.0f, s, 2);
    f[0] = 'X';
    write_bytes(path, f, n);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "not an mfact model file");
    write_bytes(path, f, 0);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "not an mfact model file");
    /* A section whose length runs past the end (its header's checksum right). */
    hand_section long_v[2] = {{3, 1, U, 8}, {4, 1, V, 12}};
    n = hand_file(f, 1, 2, 3, 1, 0, 0.0f, long_v, 2);
    unsigned char *h = f + 64 + 24 + 8 + 8; /* the second section's header */
    put64(h + 8, 1000), put32(h + 20, mf_crc32(0, h, 20));
    write_bytes(path, f, n);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "section 2 (V): its 1000 bytes run past");
    put64(h + 8, UINT64_MAX), put32(h + 20, mf_crc32(0, h, 20));
    write_bytes(path, f, n);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "run past the end");
    /* A shape that would need terabytes, in a file of a hundred bytes. */
    n = hand_file(f, 1, INT32_MAX, INT32_MAX, INT32_MAX, 3, 0.0f, s, 2);
    write_bytes(path, f, n);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "more than the file's");
    n = hand_file(f, 1, 1000000, 2, 1000, 0, 0.0f, s, 2);
    write_bytes(path, f, n);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "GB of factors");
    /* A section of the wrong size for the shape; a second U; a missing V; biases the
     * header does not announce; a shape below 1; a mean that is not finite. */
    hand_section wrong[3] = {{3, 1, U, 4}, {4, 1, V, 12}};
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, wrong, 2));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "section 1 (U) holds 4 bytes");
    hand_section twice[3] = {{3, 1, U, 8}, {3, 1, U, 8}, {4, 1, V, 12}};
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, twice, 3));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "section 2 is a second U section");
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, s, 1));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "no V section");
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, s, 3));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "the header says the model has none");
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 2, 0.0f, s, 2));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "no section holds them");
    write_bytes(path, f, hand_file(f, 1, 0, 3, 1, 0, 0.0f, s, 2));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "must be at least 1");
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, NAN, s, 2));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "mean is not finite");
    /* A NUL in the options; an algorithm name with a space. */
    hand_section text[3] = {{2, 0, "a\0b", 3}, {3, 1, U, 8}, {4, 1, V, 12}};
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, text, 3));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "section 1 (options): byte 1");
    text[0] = (hand_section){1, 0, "a b", 3};
    write_bytes(path, f, hand_file(f, 1, 2, 3, 1, 0, 0.0f, text, 3));
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "section 1 (algorithm): byte 1");
    /* More sections than the file can hold. */
    n = hand_file(f, 1, 2, 3, 1, 0, 0.0f, s, 2);
    put32(f + 24, 1000000), put32(f + 60, mf_crc32(0, f, 60));
    write_bytes(path, f, n);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "sections cannot fit");
    /* A changed payload byte names its section. */
    n = hand_file(f, 1, 2, 3, 1, 0, 0.0f, s, 2);
    f[64 + 24 + 8 + 8 + 24] ^= 1; /* V's first byte */
    write_bytes(path, f, n);
    expect_refused(ctx, path, MF_ERR_INVALID_DATA, "section 2 (V) checksum mismatch");
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* ---- saving: replacement, failures, arguments ------------------------------------------ */

START_TEST(save_replaces_whole_or_not_at_all)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    test_model t = make_model(5, 4, 2, 0, 1, 5);
    const char *path = in_dir("keep.mfm");
    ck_assert_int_eq(mf_model_save(ctx, &t.m, NULL, path), MF_OK);
    size_t n0, n1;
    unsigned char *before = tu_read_file(path, &n0);
    /* A failing save (a bad model, a bad algorithm name) leaves the old file as it was. */
    mf_model bad = t.m;
    bad.ldu = 1;
    ck_assert_int_eq(mf_model_save(ctx, &bad, NULL, path), MF_ERR_INVALID_ARGUMENT);
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = "a b";
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "algorithm name");
    unsigned char *after = tu_read_file(path, &n1);
    ck_assert(n0 == n1 && memcmp(before, after, n0) == 0);
    free(after);
    ck_assert_int_eq(files_left(), 1);
    /* A directory that does not exist, and a directory as the target: MF_ERR_IO, nothing
     * left behind. */
    ck_assert_int_eq(mf_model_save(ctx, &t.m, NULL, in_dir("no/such/dir.mfm")), MF_ERR_IO);
    tu_assert_error_has(ctx, "no/such/dir.mfm");
    ck_assert_int_eq(mkdir(in_dir("sub"), 0700), 0);
    ck_assert_int_eq(mf_model_save(ctx, &t.m, NULL, in_dir("sub")), MF_ERR_IO);
    tu_assert_error_has(ctx, "is a directory");
    ck_assert_int_eq(rmdir(in_dir("sub")), 0);
    ck_assert_int_eq(files_left(), 1);
    /* A new model over the old one: the new bytes. */
    test_model t2 = make_model(2, 2, 3, 0, 0, 6);
    ck_assert_int_eq(mf_model_save(ctx, &t2.m, NULL, path), MF_OK);
    mf_model v;
    mf_saved_model *s = load_ok(ctx, path, &v);
    expect_same(&t2.m, &v);
    mf_saved_model_destroy(s);
    ck_assert_int_eq(files_left(), 1);
    free(before);
    free_model(&t), free_model(&t2);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

START_TEST(bad_arguments)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    test_model t = make_model(3, 3, 2, 0, 1, 9);
    const char *path = in_dir("args.mfm");
    ck_assert_int_eq(mf_model_save(NULL, &t.m, NULL, path), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(NULL, "ctx is NULL");
    ck_assert_int_eq(mf_model_save(ctx, NULL, NULL, path), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_model_save(ctx, &t.m, NULL, NULL), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "path is NULL");
    ck_assert_int_eq(mf_model_save(ctx, &t.m, NULL, ""), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "path is empty"); /* was ": renaming it over .PID-2.tmp failed" */
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.struct_size = 3;
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "struct_size");
    mf_model_save_opts_init(&o);
    char name[80];
    memset(name, 'a', sizeof name - 1), name[sizeof name - 1] = '\0';
    o.algorithm = name; /* 79 characters */
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_ERR_INVALID_ARGUMENT);
    char *text = malloc((1u << 20) + 2);
    memset(text, 'x', (1u << 20) + 1), text[(1u << 20) + 1] = '\0';
    mf_model_save_opts_init(&o);
    o.options = text;
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "options text");
    text[1u << 20] = '\0'; /* exactly 1 MiB: saved and read back */
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_OK);
    mf_model v;
    mf_saved_model *s = load_ok(ctx, path, &v);
    ck_assert_uint_eq(strlen(mf_saved_model_options(s)), 1u << 20);
    free(text);
    /* Options from an older header (the algorithm alone) and from a newer one (zeros past
     * ours run; a field this version does not know, set, is refused). */
    mf_model_save_opts_init_sized(&o, offsetof(mf_model_save_opts, options));
    o.algorithm = "als";
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, in_dir("older.mfm")), MF_OK);
    union {
        mf_model_save_opts o;
        unsigned char bytes[sizeof(mf_model_save_opts) + 16];
    } newer;
    mf_model_save_opts_init_sized(&newer.o, sizeof newer);
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &newer.o, in_dir("newer.mfm")), MF_OK);
    newer.bytes[sizeof(mf_model_save_opts) + 3] = 1;
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &newer.o, in_dir("newer.mfm")), MF_ERR_UNSUPPORTED);
    /* A model in device memory on a CPU context. */
    mf_model dev = t.m;
    dev.where = MF_MEMORY_DEVICE;
    ck_assert_int_eq(mf_model_save(ctx, &dev, NULL, path), MF_ERR_INVALID_ARGUMENT);
    /* Loading. */
    mf_saved_model *sentinel = (mf_saved_model *)(uintptr_t)0x99, *out = sentinel;
    ck_assert_int_eq(mf_model_load(NULL, path, &out), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_model_load(ctx, NULL, &out), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_model_load(ctx, path, NULL), MF_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(out, sentinel);
    ck_assert_int_eq(mf_model_load(ctx, in_dir("missing.mfm"), &out), MF_ERR_IO);
    tu_assert_error_has(ctx, "missing.mfm");
    ck_assert_int_eq(mf_model_load(ctx, dir, &out), MF_ERR_IO);
    tu_assert_error_has(ctx, "is a directory");
    ck_assert_int_eq(mf_model_load(ctx, "/dev/null", &out), MF_ERR_IO);
    tu_assert_error_has(ctx, "not a regular file");
    ck_assert_ptr_eq(out, sentinel);
    /* The view and the accessors. */
    mf_model keep;
    mf_model_init(&keep);
    keep.k = 77;
    ck_assert_int_eq(mf_saved_model_view(NULL, &keep), MF_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mf_saved_model_view(s, NULL), MF_ERR_INVALID_ARGUMENT);
    keep.struct_size = 8;
    ck_assert_int_eq(mf_saved_model_view(s, &keep), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(NULL, "struct_size");
    keep.struct_size = offsetof(mf_model, precision) + 2; /* half of precision */
    ck_assert_int_eq(mf_saved_model_view(s, &keep), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(NULL, "struct_size");
    ck_assert_int_eq(keep.k, 77);
    ck_assert_str_eq(mf_saved_model_algorithm(NULL), "");
    ck_assert_str_eq(mf_saved_model_options(NULL), "");
    ck_assert_str_eq(mf_saved_model_library_version(NULL), "");
    mf_saved_model_destroy(NULL);
    mf_saved_model_destroy(s);
    free_model(&t);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* ---- id maps --------------------------------------------------------------------------- */

START_TEST(id_maps_round_trip_and_are_checked)
{
    make_dir();
    mf_ctx *ctx = tu_cpu_ctx();
    test_model t = make_model(3, 2, 2, 1, 1, 11);
    const char *users[] = {"alice", "193609", "carol, jr"}, *items[] = {"The Matrix", "7"};
    mf_id_map *um = NULL, *im = NULL;
    ck_assert_int_eq(mf_id_map_create(ctx, &um, 3, users), MF_OK);
    ck_assert_int_eq(mf_id_map_create(ctx, &im, 2, items), MF_OK);
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = "als";
    o.user_ids = um, o.item_ids = im;
    const char *path = in_dir("ids.mfm");
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_OK);
    mf_model v;
    mf_saved_model *s = load_ok(ctx, path, &v);
    expect_same(&t.m, &v);
    const mf_id_map *lu = mf_saved_model_user_ids(s), *li = mf_saved_model_item_ids(s);
    ck_assert_int_eq(mf_id_map_count(lu), 3);
    ck_assert_int_eq(mf_id_map_count(li), 2);
    for (int i = 0; i < 3; i++)
        ck_assert_str_eq(mf_id_map_id(lu, i), users[i]);
    ck_assert_str_eq(mf_id_map_id(li, 0), "The Matrix");
    ck_assert_int_eq(mf_id_map_index(li, "7"), 1);
    mf_saved_model_destroy(s);
    /* One map alone; none: the accessors say NULL. */
    o.user_ids = NULL;
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_OK);
    s = load_ok(ctx, path, &v);
    ck_assert_ptr_null(mf_saved_model_user_ids(s));
    ck_assert_int_eq(mf_id_map_count(mf_saved_model_item_ids(s)), 2);
    mf_saved_model_destroy(s);
    ck_assert_ptr_null(mf_saved_model_user_ids(NULL));
    ck_assert_ptr_null(mf_saved_model_item_ids(NULL));
    /* A map of the wrong size is refused before anything is written. */
    o.user_ids = im;
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, in_dir("bad.mfm")), MF_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(ctx, "user_ids holds 2 ids for the model's 3 users");
    /* Every truncation and changed byte of a file with maps is refused. */
    o.user_ids = um;
    ck_assert_int_eq(mf_model_save(ctx, &t.m, &o, path), MF_OK);
    size_t n;
    unsigned char *b = tu_read_file(path, &n);
    const char *cut = in_dir("cut.mfm");
    for (size_t len = 0; len < n; len++) {
        write_bytes(cut, b, len);
        expect_refused(ctx, cut, MF_ERR_INVALID_DATA, NULL);
    }
    for (size_t at = 0; at < n; at++) {
        b[at] ^= 0x41;
        write_bytes(cut, b, n);
        mf_saved_model *bad = NULL;
        mf_status st = mf_model_load(ctx, cut, &bad);
        ck_assert_msg(st == MF_ERR_INVALID_DATA || st == MF_ERR_UNSUPPORTED, "byte %zu", at);
        ck_assert_ptr_null(bad);
        b[at] ^= 0x41;
    }
    free(b);
    /* Id sections made by hand, checksums right, contents wrong. */
    const float U[2] = {1.0f, 2.0f}, V[2] = {0.5f, -1.0f};
    unsigned char f[1024];
    struct {
        const char *payload;
        uint64_t length;
        const char *words;
    } cases[] = {
        {"a\0b\0", 4, NULL},                          /* right: 2 users */
        {"a\0", 2, "too few for 2 ids"},              /* one id */
        {"a\0a\0", 4, "id 2 repeats an earlier one"}, /* repeated */
        {"a\0\0\0", 4, "id 2 is empty"},              /* empty */
        {"a\0b\0c\0", 6, "2 bytes after its 2 ids"},  /* one too many */
        {"a\0bc", 4, "ends inside id 2 of 2"},        /* no last NUL */
        {"a\0\tb\0", 5, "id 2 holds a control byte"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const hand_section sec[3] = {
            {3, 1, U, 8}, {4, 1, V, 8}, {7, 1, cases[c].payload, cases[c].length}};
        write_bytes(path, f, hand_file(f, 1, 2, 2, 1, 0, 0.0f, sec, 3));
        if (!cases[c].words) {
            s = load_ok(ctx, path, &v);
            ck_assert_str_eq(mf_id_map_id(mf_saved_model_user_ids(s), 1), "b");
            mf_saved_model_destroy(s);
        } else {
            expect_refused(ctx, path, MF_ERR_INVALID_DATA, cases[c].words);
        }
    }
    mf_id_map_destroy(um);
    mf_id_map_destroy(im);
    free_model(&t);
    mf_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

int main(void)
{
    static const tu_suite suite = {.name = "model_file"};
    const TTest *const tests[] = {crc32_known_answer,
                                  round_trip_bit_for_bit,
                                  round_trip_without_biases_or_metadata,
                                  loaded_predictions_are_the_trained_ones,
                                  every_truncation_refused,
                                  every_byte_change_refused,
                                  hand_made_files,
                                  save_replaces_whole_or_not_at_all,
                                  bad_arguments,
                                  id_maps_round_trip_and_are_checked};
    return tu_main(&suite, tests, sizeof tests / sizeof *tests);
}
