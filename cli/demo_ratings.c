/* mfact demo's ratings: a planted low-rank model on a Netflix-shaped pattern.
 *
 * The pattern follows bench/synthetic_ratings.h: item popularity is log-normal (sigma 1.5:
 * a few blockbusters, a long tail of rarely rated titles) and user activity log-normal
 * (sigma 1: most users rate a few dozen items, some thousands), each user rating distinct
 * items drawn by popularity. A rating is
 *     r_ui = mean + U*_u . V*_i + N(0, sigma^2),
 * U* and V* of rank PLANTED_RANK with N(0, s^2) entries, left unrounded and unclipped so that
 * the planted model's own RMSE on the held-out ratings is the noise, about sigma: the floor
 * that no factorization can beat. ALS and SGD in mfact fit U V^T without bias terms, so the
 * mean is kept at 0 rather than folded into the factors. Every random number comes from
 * mf_random_uniform with the context's seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { PLANTED_RANK = 8 };
#define PLANTED_SIGMA  0.5  /* noise                                                 */
#define PLANTED_SCALE  0.56 /* s: the planted product has variance 8 s^4, about 0.8 */
#define TEST_FRACTION  0.1
#define ITEM_SIGMA     1.5 /* log-normal popularity                                 */
#define USER_SIGMA     1.0 /* log-normal activity                                   */
#define STREAM_ITEMS   0x64656d6f01000000ull /* "demo" and a tag: apart from the library's */
#define STREAM_USERS   0x64656d6f02000000ull
#define STREAM_FACTORS 0x64656d6f03000000ull
#define STREAM_RATINGS 0x64656d6f04000000ull

void demo_ratings_free(demo_ratings *r)
{
    mf_sparse_destroy(r->train);
    mf_sparse_destroy(r->test);
    r->train = r->test = NULL;
}

/* Degrees exp(m + z_u) rounded and clamped to 1..items, with m set by bisection
 * so that they sum to about `target`. Returns the sum. */
static int64_t user_degrees(const double *z, int32_t users, int32_t items, double target,
                            int32_t *deg)
{
    double lo = -30, hi = 30;
    for (int it = 0; it < 40; it++) {
        double m = 0.5 * (lo + hi), sum = 0;
        for (int32_t u = 0; u < users; u++)
            sum += fmin(fmax(round(exp(m + z[u])), 1.0), (double)items);
        if (sum < target)
            lo = m;
        else
            hi = m;
    }
    int64_t total = 0;
    for (int32_t u = 0; u < users; u++) {
        deg[u] = (int32_t)fmin(fmax(round(exp(hi + z[u])), 1.0), (double)items);
        total += deg[u];
    }
    return total;
}

/* Walker's alias table over weights w[0..n): a draw is one slot, uniform, kept with
 * probability keep[slot] and otherwise replaced by its alias (Vose's construction). `stack`
 * is scratch of n entries. */
static void build_alias(const double *w, int32_t n, double *keep, int32_t *alias, int32_t *stack)
{
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += w[i];
    /* small slots grow up from the bottom of the stack, large ones down from the top */
    int32_t small = 0, large = n;
    for (int32_t i = 0; i < n; i++) {
        keep[i] = w[i] * (double)n / sum;
        alias[i] = i;
        if (keep[i] < 1.0)
            stack[small++] = i;
        else
            stack[--large] = i;
    }
    while (small > 0 && large < n) {
        int32_t s = stack[--small], l = stack[large];
        alias[s] = l;
        keep[l] -= 1.0 - keep[s];
        if (keep[l] < 1.0) {
            large++;
            stack[small++] = l;
        }
    }
    for (int32_t i = 0; i < n; i++) /* what rounding left over is kept whole */
        if (alias[i] == i)
            keep[i] = 1.0;
}

static int32_t draw_alias(demo_rng *rng, const double *keep, const int32_t *alias, int32_t n)
{
    int32_t slot = (int32_t)(demo_rng_uniform(rng) * n);
    slot = slot < n ? slot : n - 1;
    return demo_rng_uniform(rng) < keep[slot] ? slot : alias[slot];
}

typedef struct keyed {
    double key;
    int32_t item;
} keyed;

/* The working arrays of one generation, all released by release(). */
typedef struct gen {
    double *w, *keep, *z;
    int32_t *alias, *deg, *col;
    int64_t *ptr, *tptr;
    double *U, *V;
    float *val;
    int32_t *tcol;
    float *tval;
    uint64_t *seen;
    keyed *keys;
} gen;

static void release(gen *g)
{
    free(g->w), free(g->keep), free(g->alias), free(g->z), free(g->deg), free(g->col), free(g->ptr),
        free(g->tptr);
    free(g->U), free(g->V), free(g->val), free(g->tcol), free(g->tval), free(g->seen);
    free(g->keys);
}

/* n normals N(0, s^2) into out, from stream `stream` on. */
static int normals(mf_ctx *ctx, uint64_t seed, uint64_t stream, int64_t n, double s, double *out)
{
    demo_rng r;
    if (!demo_rng_init(&r, ctx, seed, stream))
        return -1;
    for (int64_t i = 0; i < n; i++)
        out[i] = s * demo_rng_normal(&r);
    bool failed = r.failed;
    demo_rng_free(&r);
    if (failed)
        cli_error("demo", "%s", mf_ctx_last_error(ctx));
    return failed ? -1 : 0;
}

/* Whether a goes before b: larger keys first, ties by item. */
static bool before(const keyed *a, const keyed *b)
{
    return a->key > b->key || (a->key == b->key && a->item < b->item);
}

/* Reorder x[0..n) so that its first m entries are the m first in before()'s order
 * (Hoare's selection, middle pivot). */
static void select_first(keyed *x, int32_t n, int32_t m)
{
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        keyed pivot = x[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (before(&x[i], &pivot))
                i++;
            while (before(&pivot, &x[j]))
                j--;
            if (i <= j) {
                keyed t = x[i];
                x[i++] = x[j], x[j--] = t;
            }
        }
        if (m - 1 <= j)
            hi = j;
        else if (m - 1 >= i)
            lo = i;
        else
            break;
    }
}

static int compare_int32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* deg distinct items drawn by popularity, one after another without replacement, into out
 * in ascending order (g->seen, a zeroed bitmap of the items, is left zeroed). A light
 * user draws from the popularity and redraws items already taken; a heavy one (a quarter
 * of the items or more, where redraws would dominate) takes the deg largest keys
 * log(u_i) / w_i over all items, which is the same distribution (Efraimidis and Spirakis).
 * Returns how many: deg, unless a light user's redraws kept hitting taken items. */
static int32_t draw_items(demo_rng *rng, const gen *g, int32_t items, int32_t deg, int32_t *out)
{
    uint64_t *seen = g->seen;
    int32_t n = 0;
    if ((int64_t)deg * 4 >= items) {
        for (int32_t i = 0; i < items; i++) {
            g->keys[i].key = log(1.0 - demo_rng_uniform(rng)) / g->w[i];
            g->keys[i].item = i;
        }
        select_first(g->keys, items, deg);
        for (n = 0; n < deg; n++)
            seen[g->keys[n].item >> 6] |= 1ull << (g->keys[n].item & 63);
    } else {
        for (int64_t tries = 0; n < deg && tries < 20 * (int64_t)deg + 100; tries++) {
            int32_t i = draw_alias(rng, g->keep, g->alias, items);
            if (!(seen[i >> 6] >> (i & 63) & 1)) {
                seen[i >> 6] |= 1ull << (i & 63);
                out[n++] = i;
            }
        }
    }
    if ((int64_t)n * 64 >= items) { /* read the sorted set off the bitmap */
        n = 0;
        for (int32_t w = 0; w < (items + 63) / 64; w++) {
            for (uint64_t b = seen[w]; b; b &= b - 1)
                out[n++] = w * 64 + __builtin_ctzll(b);
            seen[w] = 0;
        }
    } else {
        qsort(out, (size_t)n, sizeof *out, compare_int32);
        for (int32_t p = 0; p < n; p++)
            seen[out[p] >> 6] = 0;
    }
    return n;
}

/* Every user's ratings into g->ptr/col/val (test entries with the column stored as ~col),
 * then the test entries moved out into g->tptr/tcol/tval. Returns the squared error of the
 * planted model summed over the test entries, or NAN on failure. */
static double fill(mf_ctx *ctx, uint64_t seed, demo_ratings *r, gen *g, int64_t *ntest)
{
    demo_rng rng;
    if (!demo_rng_init(&rng, ctx, seed, STREAM_RATINGS))
        return NAN;
    const int k = PLANTED_RANK;
    double se = 0;
    int64_t t = 0;
    g->ptr[0] = 0;
    for (int32_t u = 0; u < r->users; u++) {
        int32_t *c = g->col + g->ptr[u];
        float *v = g->val + g->ptr[u];
        int32_t n = draw_items(&rng, g, r->items, g->deg[u], c);
        for (int32_t p = 0; p < n; p++) {
            const double *a = g->U + (size_t)u * k, *b = g->V + (size_t)c[p] * k;
            double model = r->mean;
            for (int l = 0; l < k; l++)
                model += a[l] * b[l];
            v[p] = (float)(model + r->sigma * demo_rng_normal(&rng));
            if (demo_rng_uniform(&rng) < r->test_fraction) {
                se += (v[p] - model) * (v[p] - model);
                c[p] = ~c[p];
                t++;
            }
        }
        g->ptr[u + 1] = g->ptr[u] + n;
    }
    bool failed = rng.failed;
    demo_rng_free(&rng);
    if (failed) {
        cli_error("demo", "%s", mf_ctx_last_error(ctx));
        return NAN;
    }
    *ntest = t;
    return se;
}

/* Move the test entries (marked ~col) out of g->ptr/col/val: the train part stays in place
 * (it only moves left), the test part goes to g->tptr/tcol/tval. */
static int split(const demo_ratings *r, gen *g, int64_t ntest)
{
    g->tptr = demo_alloc("the test ratings' row offsets", (int64_t)r->users + 1, sizeof *g->tptr);
    g->tcol = demo_alloc("the test ratings' columns", ntest, sizeof *g->tcol);
    g->tval = demo_alloc("the test ratings' values", ntest, sizeof *g->tval);
    if (!g->tptr || !g->tcol || !g->tval)
        return -1;
    int64_t a = 0, b = 0, start = 0;
    g->tptr[0] = 0;
    for (int32_t u = 0; u < r->users; u++) {
        int64_t end = g->ptr[u + 1];
        for (int64_t p = start; p < end; p++) {
            if (g->col[p] < 0)
                g->tcol[b] = ~g->col[p], g->tval[b++] = g->val[p];
            else
                g->col[a] = g->col[p], g->val[a++] = g->val[p];
        }
        start = end;
        g->ptr[u + 1] = a, g->tptr[u + 1] = b;
    }
    return 0;
}

int demo_ratings_make(mf_ctx *ctx, uint64_t seed, int32_t users, int32_t items, double per_user,
                      demo_ratings *r)
{
    memset(r, 0, sizeof *r);
    r->users = users, r->items = items, r->seed = seed;
    r->rank = PLANTED_RANK, r->mean = 0.0, r->sigma = PLANTED_SIGMA;
    r->test_fraction = TEST_FRACTION;
    double t0 = cli_seconds();
    double target = fmin((double)users * per_user, (double)users * (double)items);
    demo_say("generating ratings: %d users x %d items, about %.3g ratings (%.0f per user) of a "
             "planted rank-%d model + N(0, %g^2) noise, %g%% held out",
             (int)users, (int)items, target, target / users, PLANTED_RANK, PLANTED_SIGMA,
             100 * TEST_FRACTION);
    /* Generation holds 8 bytes per rating and the library's two matrices 12 more, plus
     * about 100 bytes per user and item (degrees, planted factors, offsets). */
    char what[160];
    snprintf(what, sizeof what, "generating %.3g ratings of %d users x %d items", target,
             (int)users, (int)items);
    if (!demo_fits(what, 20.0 * target + 100.0 * ((double)users + items)))
        return -1;
    gen g;
    memset(&g, 0, sizeof g);
    int rc = -1;
    const int k = PLANTED_RANK;
    g.w = demo_alloc("the item popularities", items, sizeof *g.w);
    g.keep = demo_alloc("the item popularities", items, sizeof *g.keep);
    g.alias = demo_alloc("the item popularities", items, sizeof *g.alias);
    g.z = demo_alloc("the user activities", users, sizeof *g.z);
    g.deg = demo_alloc("the user degrees", users, sizeof *g.deg);
    g.U = demo_alloc("the planted user factors", (int64_t)users * k, sizeof *g.U);
    g.V = demo_alloc("the planted item factors", (int64_t)items * k, sizeof *g.V);
    g.seen = demo_alloc("a bitmap of items", (items + 63) / 64, sizeof *g.seen);
    g.ptr = demo_alloc("the ratings' row offsets", (int64_t)users + 1, sizeof *g.ptr);
    g.keys = demo_alloc("the draws of heavy users", items, sizeof *g.keys);
    if (!g.w || !g.keep || !g.alias || !g.z || !g.deg || !g.U || !g.V || !g.seen || !g.ptr ||
        !g.keys)
        goto done;
    memset(g.seen, 0, (size_t)(items + 63) / 64 * sizeof *g.seen);
    /* Item popularities (log-normal weights) and user activities (their logarithms). */
    if (normals(ctx, seed, STREAM_ITEMS, items, ITEM_SIGMA, g.keep) != 0 ||
        normals(ctx, seed, STREAM_USERS, users, USER_SIGMA, g.z) != 0)
        goto done;
    for (int32_t i = 0; i < items; i++)
        g.w[i] = exp(g.keep[i]);
    build_alias(g.w, items, g.keep, g.alias, g.deg); /* deg: scratch until filled below */
    int64_t nnz = user_degrees(g.z, users, items, target, g.deg);
    g.col = demo_alloc("the ratings' columns", nnz, sizeof *g.col);
    g.val = demo_alloc("the ratings' values", nnz, sizeof *g.val);
    if (!g.col || !g.val)
        goto done;
    if (normals(ctx, seed, STREAM_FACTORS, (int64_t)users * k, PLANTED_SCALE, g.U) != 0 ||
        normals(ctx, seed, STREAM_FACTORS + (1u << 20), (int64_t)items * k, PLANTED_SCALE, g.V) !=
            0)
        goto done;
    int64_t ntest = 0;
    double se = fill(ctx, seed, r, &g, &ntest);
    if (isnan(se) || split(r, &g, ntest) != 0)
        goto done;
    r->planted_rmse = ntest ? sqrt(se / (double)ntest) : 0.0; /* 0 as mf_rmse of no entries */
    if (mf_sparse_from_csr(ctx, &r->train, users, items, g.ptr[users], g.ptr, g.col, g.val,
                           MF_MEMORY_HOST, 0) != MF_OK ||
        mf_sparse_from_csr(ctx, &r->test, users, items, ntest, g.tptr, g.tcol, g.tval,
                           MF_MEMORY_HOST, 0) != MF_OK) {
        cli_error("demo", "%s", mf_ctx_last_error(ctx));
        goto done;
    }
    rc = 0;
done:
    release(&g);
    r->seconds = cli_seconds() - t0;
    return rc;
}
