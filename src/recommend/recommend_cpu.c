/* The CPU engine of recommendations: OpenMP over the requested ids; each scores every item
 * in turn (a dot product over k) and keeps the best N in a heap whose root is the worst
 * kept, so the N best are found without sorting all scores. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "recommend/recommend_internal.h"

typedef struct cand {
    float score;
    int32_t item;
} cand;

/* Heap order: a parent is worse than its children (the worst kept at the root). */
static int worse(const cand *a, const cand *b)
{
    return mf_rec_before(b->score, b->item, a->score, a->item);
}

static void sift_down(cand *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && worse(&h[l], &h[w]))
            w = l;
        if (r < n && worse(&h[r], &h[w]))
            w = r;
        if (w == i)
            return;
        cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void offer(cand *h, int *size, int N, float score, int32_t item)
{
    if (isnan(score))
        return;
    if (*size < N) { /* sift up */
        int i = (*size)++;
        h[i] = (cand){score, item};
        while (i > 0 && worse(&h[i], &h[(i - 1) / 2])) {
            cand t = h[i];
            h[i] = h[(i - 1) / 2];
            h[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (mf_rec_before(score, item, h[0].score, h[0].item)) {
        h[0] = (cand){score, item};
        sift_down(h, N, 0);
    }
}

/* The heap's N best, best first, into items and scores (padding past what it holds). */
static void drain(cand *h, int size, int N, int32_t *items, float *scores)
{
    for (int j = size; j < N; j++)
        items[j] = -1, scores[j] = -INFINITY;
    while (size > 0) { /* pop the worst to the back */
        const int j = --size;
        items[j] = h[0].item, scores[j] = h[0].score;
        h[0] = h[size];
        sift_down(h, size, 0);
    }
}

static float dot(const float *a, const float *b, int k)
{
    float s = 0.0f;
    for (int t = 0; t < k; t++)
        s += a[t] * b[t];
    return s;
}

mf_status mf_recommend_cpu(mf_ctx *ctx, const mf_rec_call *c)
{
    const mf_model *m = &c->model;
    const int k = m->k, N = c->N;
    const int cap = N < m->items ? N : m->items; /* the heap never holds more than the items */
    float *norm = NULL;
    if (c->kind == MF_REC_SIMILAR) {
        norm = malloc(((size_t)m->items + 1) * sizeof *norm);
        if (!norm)
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_similar_items: out of host memory");
        for (int32_t i = 0; i < m->items; i++) {
            const float *v = m->V + (int64_t)i * m->ldv;
            norm[i] = sqrtf(dot(v, v, k));
        }
    }
    /* Every thread's heap before any output is written: a failed allocation inside the
     * parallel region would leave the other threads' rows written and the call failing. */
    const int threads = mf_ctx_threads(ctx);
    cand *heaps = malloc((size_t)threads * (size_t)cap * sizeof *heaps);
    if (!heaps) {
        free(norm);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for top-N heaps",
                       c->kind == MF_REC_SIMILAR ? "mf_similar_items" : "mf_recommend");
    }
#pragma omp parallel num_threads(threads)
    {
        cand *h = heaps + (size_t)mf_thread_index() * (size_t)cap; /* a team is at most threads */
#pragma omp for schedule(dynamic, 4)
        for (int64_t b = 0; b < c->n; b++) {
            const int32_t id = c->ids[b];
            int size = 0;
            if (c->kind == MF_REC_SIMILAR) {
                const float *x = m->V + (int64_t)id * m->ldv;
                for (int32_t i = 0; i < m->items; i++) {
                    if (i == id)
                        continue;
                    const float d = norm[id] * norm[i];
                    offer(h, &size, cap,
                          d > 0.0f ? dot(x, m->V + (int64_t)i * m->ldv, k) / d : 0.0f, i);
                }
            } else {
                const int seen = id < m->users;
                const float *x = seen ? m->U + (int64_t)id * m->ldu : NULL;
                const float base = m->mean + (seen && m->user_bias ? m->user_bias[id] : 0.0f);
                const mf_sparse *E = c->exclude;
                int64_t p = 0, pe = 0;
                if (E && id < E->rows)
                    p = E->row_ptr[id], pe = E->row_ptr[id + 1];
                for (int32_t i = 0; i < m->items; i++) {
                    while (p < pe && E->col[p] < i)
                        p++;
                    if (p < pe && E->col[p] == i)
                        continue;
                    float s = base + (m->item_bias ? m->item_bias[i] : 0.0f);
                    if (x)
                        s += dot(x, m->V + (int64_t)i * m->ldv, k);
                    offer(h, &size, cap, s, i);
                }
            }
            drain(h, size, N, c->out_items + b * N, c->out_scores + b * N);
        }
    }
    free(heaps);
    free(norm);
    return MF_OK;
}
