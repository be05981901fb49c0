/* mf_ranking_evaluate: the held-out users' top-N lists, batch by batch through the backend's
 * recommendation engine (host outputs), scored on the host as implicit's
 * ranking_metrics_at_k scores them, so that the two libraries' numbers compare. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/model.h"
#include "core/opts.h"
#include "core/staging.h"
#include "recommend/recommend_internal.h"

/* Users per batch: bounds the host lists (and the engine's device buffers). */
#define METRICS_BATCH 8192

typedef struct sums {
    double relevant, pr_div, ap, ndcg, auc;
    int64_t users;
} sums;

/* One user's list against its held-out items T (sorted ids, count t) among `items`. */
static void score_user(const int32_t *list, int N, const int32_t *T, int64_t t, int32_t items,
                       sums *s)
{
    const int64_t cut = t < N ? t : N;
    double idcg = 0.0;
    for (int64_t j = 0; j < cut; j++)
        idcg += 1.0 / log2((double)j + 2.0);
    double ap = 0.0, dcg = 0.0, auc = 0.0;
    int64_t hit = 0, miss = 0;
    for (int j = 0; j < N && list[j] >= 0; j++) { /* -1: no more candidates */
        const int32_t it = list[j];
        int found = 0;
        { /* binary search in T */
            int64_t lo = 0, hi = t;
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (T[mid] < it)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            found = lo < t && T[lo] == it;
        }
        if (found) {
            hit++;
            ap += (double)hit / (j + 1);
            dcg += 1.0 / log2((double)j + 2.0);
        } else {
            miss++;
            auc += (double)hit;
        }
    }
    const double neg = (double)items - (double)t;
    auc += ((double)hit + (double)t) / 2.0 * (neg - (double)miss);
    s->relevant += (double)hit;
    s->pr_div += (double)cut;
    s->ap += ap / (double)cut;
    s->ndcg += dcg / idcg;
    s->auc += neg > 0.0 ? auc / ((double)t * neg) : 0.0;
    s->users++;
}

/* The model's host arrays into device buffers `up` (U, V, user and item biases); m then
 * points at them. */
static mf_status upload_model(mf_ctx *ctx, mf_model *m, mf_dbuf up[4])
{
    MF_TRY(mf_upload(ctx, &up[0], m->U, mf_matrix_bytes(m->users, m->k, m->ldu), "the model's U"));
    MF_TRY(mf_upload(ctx, &up[1], m->V, mf_matrix_bytes(m->items, m->k, m->ldv), "the model's V"));
    if (m->user_bias)
        MF_TRY(
            mf_upload(ctx, &up[2], m->user_bias, (size_t)m->users * sizeof(float), "user biases"));
    if (m->item_bias)
        MF_TRY(
            mf_upload(ctx, &up[3], m->item_bias, (size_t)m->items * sizeof(float), "item biases"));
    m->U = up[0].ptr, m->V = up[1].ptr;
    m->user_bias = m->user_bias ? up[2].ptr : NULL;
    m->item_bias = m->item_bias ? up[3].ptr : NULL;
    m->where = MF_MEMORY_DEVICE;
    return MF_OK;
}

mf_status mf_ranking_evaluate(mf_ctx *ctx, const mf_model *model, const mf_sparse *train,
                              const mf_sparse *test, int N, mf_ranking *out)
{
    static const char fn[] = "mf_ranking_evaluate";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    mf_rec_call c;
    memset(&c, 0, sizeof c);
    MF_TRY(mf_model_check(ctx, model, fn, &c.model));
    MF_REQUIRE(ctx, test, "%s: test is NULL", fn);
    MF_REQUIRE(ctx, out, "%s: out is NULL", fn);
    size_t out_bytes = 0;
    MF_TRY(MF_OPTS_OUT_SIZE(ctx, mf_ranking, out, &out_bytes));
    MF_REQUIRE(ctx, N >= 1, "%s: N = %d must be at least 1", fn, N);
    MF_REQUIRE(ctx, test->ctx == ctx, "%s: test belongs to another context", fn);
    MF_REQUIRE(ctx, test->cols == c.model.items,
               "%s: test has %d columns but the model has %d items", fn, test->cols, c.model.items);
    if (train) {
        MF_REQUIRE(ctx, train->ctx == ctx, "%s: train belongs to another context", fn);
        MF_REQUIRE(ctx, train->cols == c.model.items,
                   "%s: train has %d columns but the model has %d items", fn, train->cols,
                   c.model.items);
    }
    /* A list never holds more than the model's items (the rest is -1 padding), and every
     * metric reads min(N, |T_u|) with |T_u| <= items: N beyond the items changes nothing,
     * so it is cut there and the buffers follow the model, not N alone. */
    if (N > c.model.items)
        N = c.model.items;
    /* Users per batch: at most METRICS_BATCH, and lists of at most 2^24 entries. */
    int64_t batch = METRICS_BATCH;
    if (batch * N > ((int64_t)1 << 24))
        batch = ((int64_t)1 << 24) / N > 0 ? ((int64_t)1 << 24) / N : 1;
    int32_t *ids = malloc((size_t)batch * sizeof *ids);
    int32_t *lists = malloc((size_t)batch * N * sizeof *lists);
    float *scores = malloc((size_t)batch * N * sizeof *scores);
    mf_status st = MF_OK;
    if (!ids || !lists || !scores)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    /* A host model on a CUDA context goes up once, not once a batch. */
    mf_dbuf up[4] = {{NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}};
    if (st == MF_OK && ctx->backend == MF_BACKEND_CUDA && c.model.where == MF_MEMORY_HOST)
        st = upload_model(ctx, &c.model, up);
    sums s = {0};
    c.kind = MF_REC_USERS;
    c.exclude = (mf_sparse *)train;
    c.N = N;
    c.ids = ids, c.out_items = lists, c.out_scores = scores;
    c.where = MF_MEMORY_HOST;
    for (int32_t u = 0; u < test->rows && st == MF_OK;) {
        int64_t n = 0;
        for (; u < test->rows && n < batch; u++)
            if (test->row_ptr[u + 1] > test->row_ptr[u])
                ids[n++] = u;
        if (n == 0)
            break;
        c.n = n;
        st = mf_recommend_dispatch(ctx, &c);
        for (int64_t b = 0; st == MF_OK && b < n; b++) {
            const int64_t p = test->row_ptr[ids[b]];
            score_user(lists + b * N, N, test->col + p, test->row_ptr[ids[b] + 1] - p,
                       c.model.items, &s);
        }
    }
    for (int i = 0; i < 4; i++)
        mf_dmem_free(ctx, &up[i]);
    free(ids);
    free(lists);
    free(scores);
    if (st != MF_OK)
        return st;
    mf_ranking r = {0};
    r.users = s.users;
    const double users = s.users > 0 ? (double)s.users : 1.0;
    r.precision = s.pr_div > 0.0 ? s.relevant / s.pr_div : 0.0;
    r.map = s.ap / users;
    r.ndcg = s.ndcg / users;
    r.auc = s.auc / users;
    r.struct_size = out_bytes;
    memcpy(out, &r, out_bytes);
    return MF_OK;
}
