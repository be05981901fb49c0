/* MF_BMF_INIT_ASSO on the CPU (see bmf_asso.h): sparse and incremental. A row can only
 * gain from a candidate that holds one of its uncovered ones, so a row's gains are found
 * through an inverted index (column -> candidates holding it), and after a round only
 * the rows that took the new factor change their contribution to the gains. Cell (i, j) is
 * covered when row i of A and row j of B share a factor: the factors being built are the
 * record of what is covered, so no rows x cols map is kept (on 20News, 11,269 x 61,188, that
 * map was 86 MB to clear per instance), and a row that nothing covers yet skips the count
 * of its covered cells outright. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bool/bmf_asso.h"
#include "bool/bmf_rules.h"
#include "core/ctx.h"

/* Association lists: for seed c, the columns co-occurring with it often enough for the
 * lowest tau, and how often, ascending by column. */
typedef struct assoc {
    int64_t *ptr; /* P + 1 */
    int32_t *col;
    int32_t *co;
} assoc;

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static mf_status build_assoc(const mf_bmf_asso_plan *p, assoc *out)
{
    const mf_sparse *C = p->C;
    const int P = p->P;
    int64_t *len = calloc((size_t)P + 1, sizeof *len);
    int32_t **cols = calloc((size_t)P, sizeof *cols), **cos = calloc((size_t)P, sizeof *cos);
    int failed = !len || !cols || !cos;
    /* Each thread counts in arrays of C's columns: no more threads than seeds, so that an
     * idle thread allocates none. */
    const int threads = mf_ctx_threads(p->ctx) < P ? mf_ctx_threads(p->ctx) : (P > 0 ? P : 1);
#pragma omp parallel num_threads(threads) if (!failed)
    {
        int32_t *count = calloc((size_t)C->cols, sizeof *count);
        int32_t *touched = malloc((size_t)C->cols * sizeof *touched);
        if (!count || !touched) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int c = 0; c < P; c++) {
            if (!count || !touched)
                continue;
            int32_t seed = p->seeds[c], nt = 0;
            for (int64_t t = C->transpose.ptr[seed]; t < C->transpose.ptr[seed + 1]; t++) {
                int32_t i = C->transpose.idx[t];
                for (int64_t q = C->row_ptr[i]; q < C->row_ptr[i + 1]; q++)
                    if (count[C->col[q]]++ == 0)
                        touched[nt++] = C->col[q];
            }
            /* keep only what some tau can take: bounds the lists on dense inputs */
            int32_t kept = 0;
            for (int32_t t = 0; t < nt; t++) {
                if (bmf_asso_member(count[touched[t]], p->col_count[seed], BMF_ASSO_TAU_MIN))
                    touched[kept++] = touched[t];
                else
                    count[touched[t]] = 0;
            }
            nt = kept;
            qsort(touched, (size_t)nt, sizeof *touched, cmp_i32);
            cols[c] = malloc((size_t)(nt ? nt : 1) * sizeof **cols);
            cos[c] = malloc((size_t)(nt ? nt : 1) * sizeof **cos);
            if (!cols[c] || !cos[c]) {
#pragma omp atomic write
                failed = 1;
            } else {
                for (int32_t t = 0; t < nt; t++) {
                    cols[c][t] = touched[t];
                    cos[c][t] = count[touched[t]];
                }
                len[c] = nt;
            }
            for (int32_t t = 0; t < nt; t++)
                count[touched[t]] = 0;
        }
        free(count);
        free(touched);
    }
    int64_t total = 0;
    for (int c = 0; !failed && c < P; c++)
        total += len[c];
    if (!failed) {
        out->ptr = malloc(((size_t)P + 1) * sizeof *out->ptr);
        out->col = malloc((size_t)(total ? total : 1) * sizeof *out->col);
        out->co = malloc((size_t)(total ? total : 1) * sizeof *out->co);
        failed = !out->ptr || !out->col || !out->co;
    }
    if (!failed) {
        out->ptr[0] = 0;
        for (int c = 0; c < P; c++) {
            out->ptr[c + 1] = out->ptr[c] + len[c];
            memcpy(out->col + out->ptr[c], cols[c], (size_t)len[c] * sizeof *out->col);
            memcpy(out->co + out->ptr[c], cos[c], (size_t)len[c] * sizeof *out->co);
        }
    }
    for (int c = 0; cols && cos && c < P; c++) {
        free(cols[c]);
        free(cos[c]);
    }
    free(cols);
    free(cos);
    free(len);
    if (failed)
        return mf_fail(p->ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for Asso");
    return MF_OK;
}

/* One instance's greedy cover. */
typedef struct greedy {
    const mf_bmf_asso_plan *p;
    int64_t *cptr;         /* candidates: P + 1 */
    int32_t *ccol;         /* columns of each, ascending */
    int64_t *iptr;         /* inverted: cols + 1 */
    int32_t *icand;        /* candidates holding each column, smallest first */
    int64_t *isize;        /* the size of each of those candidates */
    uint64_t *by_size;     /* P: (size << 32 | candidate), sorted: smallest first */
    const uint64_t *A, *B; /* the instance's factors so far: rows x kw, cols x kw words */
    int32_t *covn;         /* covered cells per row */
    int64_t *gain;         /* P */
    int32_t *x1;           /* P, zero between uses */
    int32_t *touched;
    int32_t *fresh;       /* the longest row's length: a row's uncovered ones */
    int32_t *stamp;       /* rows */
    uint8_t *chosen_mark; /* cols: columns of the chosen candidate */
    int kw;
} greedy;

static int covered(const greedy *g, int32_t i, int32_t j)
{
    return bmf_share(g->A + (int64_t)i * g->kw, g->B + (int64_t)j * g->kw, g->kw);
}

/* How many of candidate c's columns row i already has covered. */
static int64_t covered_in(const greedy *g, int32_t i, int c)
{
    if (g->covn[i] == 0)
        return 0;
    int64_t in = 0;
    for (int64_t u = g->cptr[c]; u < g->cptr[c + 1]; u++)
        in += covered(g, i, g->ccol[u]);
    return in;
}

/* Add sign * max(0, g_ic) for every candidate c to the gains. With u uncovered ones in row
 * i, g_ic <= 2 u - |c| + covn[i], so candidates of size 2 u + covn[i] or more cannot gain:
 * the inverted lists run smallest first and stop there. (The largest candidates hold the
 * most popular columns, and skipping them is most of the work on basket-like data.) */
static void row_eval(greedy *g, int32_t i, int sign)
{
    const mf_sparse *C = g->p->C;
    int64_t u = 0; /* the row's uncovered ones, into g->fresh */
    for (int64_t q = C->row_ptr[i]; q < C->row_ptr[i + 1]; q++)
        if (!covered(g, i, C->col[q]))
            g->fresh[u++] = C->col[q];
    const int64_t bound = 2 * u + g->covn[i];
    int nt = 0;
    for (int64_t f = 0; f < u; f++) {
        const int32_t j = g->fresh[f];
        for (int64_t t = g->iptr[j]; t < g->iptr[j + 1] && g->isize[t] < bound; t++)
            if (g->x1[g->icand[t]]++ == 0)
                g->touched[nt++] = g->icand[t];
    }
    for (int t = 0; t < nt; t++) {
        int32_t c = g->touched[t];
        int64_t x1 = g->x1[c], size = g->cptr[c + 1] - g->cptr[c];
        g->x1[c] = 0;
        /* g_ic = 2 x1 - (size - covered in c) <= 2 x1 - size + covn: skip what cannot win */
        if (2 * x1 - size + g->covn[i] <= 0)
            continue;
        int64_t gic = 2 * x1 - (size - covered_in(g, i, c));
        if (gic > 0)
            g->gain[c] += sign * gic;
    }
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Whether this thread is the one that called mf_bmf_asso (the watch's callbacks run there). */
static int on_caller(void)
{
#ifdef _OPENMP
    return omp_get_thread_num() == 0;
#else
    return 1;
#endif
}

static void run_instance(greedy *g, int q, const assoc *as, uint64_t *A, uint64_t *B)
{
    const mf_bmf_asso_plan *p = g->p;
    const mf_sparse *C = p->C;
    const int P = p->P, kw = p->kw, tau = bmf_asso_tau(q);
    if (mf_bmf_asso_rounds_done(p, 0, on_caller()))
        return; /* the watch stopped the cover: this instance stays empty */
    /* candidates */
    int64_t used = 0;
    g->cptr[0] = 0;
    for (int c = 0; c < P; c++) {
        int64_t sc = p->col_count[p->seeds[c]];
        for (int64_t t = as->ptr[c]; t < as->ptr[c + 1]; t++)
            if (bmf_asso_member(as->co[t], sc, tau))
                g->ccol[used++] = as->col[t];
        g->cptr[c + 1] = used;
    }
    /* inverted index, candidates smallest first within a column (ties: lower index) */
    for (int c = 0; c < P; c++)
        g->by_size[c] = (uint64_t)(g->cptr[c + 1] - g->cptr[c]) << 32 | (uint32_t)c;
    qsort(g->by_size, (size_t)P, sizeof *g->by_size, cmp_u64);
    memset(g->iptr, 0, ((size_t)C->cols + 1) * sizeof *g->iptr);
    for (int64_t t = 0; t < used; t++)
        g->iptr[g->ccol[t] + 1]++;
    for (int32_t j = 0; j < C->cols; j++)
        g->iptr[j + 1] += g->iptr[j];
    for (int s = 0; s < P; s++) {
        const int c = (int)(g->by_size[s] & 0xffffffffu);
        const int64_t size = g->cptr[c + 1] - g->cptr[c];
        for (int64_t t = g->cptr[c]; t < g->cptr[c + 1]; t++) {
            const int64_t at = g->iptr[g->ccol[t]]++;
            g->icand[at] = c;
            g->isize[at] = size;
        }
    }
    for (int32_t j = C->cols; j > 0; j--)
        g->iptr[j] = g->iptr[j - 1];
    g->iptr[0] = 0;

    g->A = A, g->B = B; /* zero on entry (mf_bmf_asso) */
    memset(g->covn, 0, (size_t)C->rows * sizeof *g->covn);
    memset(g->gain, 0, (size_t)P * sizeof *g->gain);
    memset(g->stamp, 0, (size_t)C->rows * sizeof *g->stamp);
    for (int32_t i = 0; i < C->rows; i++)
        row_eval(g, i, 1);
    for (int l = 0; l < p->k; l++) {
        int best = 0;
        for (int c = 1; c < P; c++)
            if (g->gain[c] > g->gain[best])
                best = c;
        if (g->gain[best] <= 0)
            break;
        const int64_t b0 = g->cptr[best], b1 = g->cptr[best + 1];
        for (int64_t u = b0; u < b1; u++) {
            g->chosen_mark[g->ccol[u]] = 1;
            B[(int64_t)g->ccol[u] * kw + l / 64] |= (uint64_t)1 << (l % 64);
        }
        /* rows holding an uncovered one in the chosen candidate */
        for (int64_t u = b0; u < b1; u++) {
            int32_t j = g->ccol[u];
            for (int64_t t = C->transpose.ptr[j]; t < C->transpose.ptr[j + 1]; t++) {
                int32_t i = C->transpose.idx[t];
                if (g->stamp[i] == l + 1 || covered(g, i, j))
                    continue;
                g->stamp[i] = l + 1;
                int64_t x1 = 0;
                for (int64_t r = C->row_ptr[i]; r < C->row_ptr[i + 1]; r++)
                    x1 += g->chosen_mark[C->col[r]] && !covered(g, i, C->col[r]);
                if (2 * x1 - ((b1 - b0) - covered_in(g, i, best)) <= 0)
                    continue;
                row_eval(g, i, -1);
                /* B already holds factor l and row i of A does not yet: covered() is what
                 * was covered before row i takes it. */
                for (int64_t v = b0; v < b1; v++)
                    g->covn[i] += !covered(g, i, g->ccol[v]);
                A[(int64_t)i * kw + l / 64] |= (uint64_t)1 << (l % 64);
                row_eval(g, i, 1);
            }
        }
        for (int64_t u = b0; u < b1; u++)
            g->chosen_mark[g->ccol[u]] = 0;
        if (mf_bmf_asso_rounds_done(p, 1, on_caller()))
            break;
    }
}

static void greedy_free(greedy *g)
{
    free(g->cptr);
    free(g->ccol);
    free(g->iptr);
    free(g->icand);
    free(g->isize);
    free(g->by_size);
    free(g->covn);
    free(g->gain);
    free(g->x1);
    free(g->touched);
    free(g->fresh);
    free(g->stamp);
    free(g->chosen_mark);
}

struct mf_bmf_asso_lists {
    assoc as;
};

void mf_bmf_asso_lists_free(mf_bmf_asso_lists *l)
{
    if (!l)
        return;
    free(l->as.ptr);
    free(l->as.col);
    free(l->as.co);
    free(l);
}

void mf_bmf_asso_lists_arrays(const mf_bmf_asso_lists *l, const int64_t **ptr, const int32_t **col,
                              const int32_t **co)
{
    *ptr = l->as.ptr;
    *col = l->as.col;
    *co = l->as.co;
}

double mf_bmf_asso_cpu_lists_cost(const mf_bmf_asso_plan *p)
{
    const mf_sparse *C = p->C;
    double cost = 0.0;
    for (int32_t i = 0; i < C->rows; i++) {
        const double n = (double)(C->row_ptr[i + 1] - C->row_ptr[i]);
        cost += n * n;
    }
    return cost;
}

mf_status mf_bmf_asso_cpu_lists(const mf_bmf_asso_plan *p, mf_bmf_asso_lists **out, double *work)
{
    mf_bmf_asso_lists *l = calloc(1, sizeof *l);
    if (!l)
        return mf_fail(p->ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for Asso");
    mf_status st = build_assoc(p, &l->as);
    if (st != MF_OK) {
        free(l);
        return st;
    }
    /* A row's gains visit, for each of its ones, the candidates holding that column: a
     * column's ones times its candidates, summed (at the lowest tau, a bound for every
     * instance). */
    double w = 0.0;
    for (int64_t t = 0; t < l->as.ptr[p->P]; t++)
        w += (double)p->col_count[l->as.col[t]];
    *work = w;
    *out = l;
    return MF_OK;
}

mf_status mf_bmf_asso_cpu(const mf_bmf_asso_plan *p, uint64_t *A, uint64_t *B)
{
    mf_bmf_asso_lists *l = NULL;
    double work = 0.0;
    MF_TRY(mf_bmf_asso_cpu_lists(p, &l, &work));
    mf_status st = mf_bmf_asso_cpu_cover(p, l, A, B);
    mf_bmf_asso_lists_free(l);
    return st;
}

mf_status mf_bmf_asso_cpu_cover(const mf_bmf_asso_plan *p, mf_bmf_asso_lists *lists, uint64_t *A,
                                uint64_t *B)
{
    const mf_sparse *C = p->C;
    const assoc as = lists->as;
    int64_t longest = 0;
    for (int32_t i = 0; i < C->rows; i++)
        if (C->row_ptr[i + 1] - C->row_ptr[i] > longest)
            longest = C->row_ptr[i + 1] - C->row_ptr[i];
    const int64_t total = as.ptr[p->P];
    int failed = 0;
    /* Each thread holds a whole working copy of the lists and of C's rows and columns (far
     * more than the input's ones on a sparse C) and covers whole instances: no more threads
     * than instances, so that idle threads allocate none (64 threads of a 64-core host
     * allocated 32 copies per instance of a 2-instance run). */
    const int threads = mf_ctx_threads(p->ctx) < p->instances
                            ? mf_ctx_threads(p->ctx)
                            : (p->instances > 0 ? p->instances : 1);
#pragma omp parallel num_threads(threads)
    {
        greedy g;
        memset(&g, 0, sizeof g);
        g.p = p;
        g.kw = p->kw;
        g.cptr = malloc(((size_t)p->P + 1) * sizeof *g.cptr);
        g.ccol = malloc((size_t)(total ? total : 1) * sizeof *g.ccol);
        g.iptr = malloc(((size_t)C->cols + 1) * sizeof *g.iptr);
        g.icand = malloc((size_t)(total ? total : 1) * sizeof *g.icand);
        g.isize = malloc((size_t)(total ? total : 1) * sizeof *g.isize);
        g.by_size = malloc((size_t)p->P * sizeof *g.by_size);
        g.covn = malloc((size_t)C->rows * sizeof *g.covn);
        g.gain = malloc((size_t)p->P * sizeof *g.gain);
        g.x1 = calloc((size_t)p->P, sizeof *g.x1);
        g.touched = malloc((size_t)p->P * sizeof *g.touched);
        g.fresh = malloc((size_t)(longest ? longest : 1) * sizeof *g.fresh);
        g.stamp = malloc((size_t)C->rows * sizeof *g.stamp);
        g.chosen_mark = calloc((size_t)C->cols, 1);
        int ok = g.cptr && g.ccol && g.iptr && g.icand && g.isize && g.by_size && g.covn &&
                 g.gain && g.x1 && g.touched && g.fresh && g.stamp && g.chosen_mark;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic)
        for (int q = 0; q < p->instances; q++)
            if (ok)
                run_instance(&g, q, &as, A + (int64_t)q * C->rows * p->kw,
                             B + (int64_t)q * C->cols * p->kw);
        greedy_free(&g);
    }
    if (failed)
        return mf_fail(p->ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for Asso");
    return MF_OK;
}
