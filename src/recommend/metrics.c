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
    for (int j = 0; j < N; j++) {
        const int32_t it = list[j];
        int found = 0;
        if (it >= 0) { /* binary search in T */
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
    MF_TRY(mf_opts_out_size(ctx, "mf_ranking", out, sizeof *out, &out_bytes));
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
    int64_t batch = METRICS_BATCH;
    int32_t *ids = malloc((size_t)batch * sizeof *ids);
    int32_t *lists = malloc((size_t)batch * N * sizeof *lists);
    float *scores = malloc((size_t)batch * N * sizeof *scores);
    mf_status st = MF_OK;
    if (!ids || !lists || !scores)
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
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
