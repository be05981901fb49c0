/* The CPU engine of Boolean factorization: C in bits by rows and by columns, its ones by
 * rows and by columns, and per instance the factors by lines and transposed. A half-sweep
 * runs OpenMP over the lines of the side it updates. A single-bit move counts, for every
 * factor, the cells a flip would change from the line's ones plus what the line's factor
 * set covers on the other side (bmf_fset.h, cached per factor set), so sparse matrices cost
 * what their ones cost; a per-bit move builds the masks of the changed cells densely and
 * counts them with 64-bit popcount. The counts are exact integers, the same as the CUDA
 * engine's dense ones, which this engine is the reference for. */
#include <stdlib.h>
#include <string.h>

#include "bool/bmf_fset.h"
#include "bool/bmf_internal.h"
#include "bool/bmf_rules.h"
#include "core/clock.h"
#include "core/ctx.h"

typedef struct instance {
    uint64_t *A, *B;   /* rows x kw, cols x kw */
    uint64_t *At, *Bt; /* k x mw, k x nw: factor l's rows of A, columns of B */
    uint64_t *Abest, *Bbest;
    int64_t fp, fn, best;
} instance;

typedef struct cpu_engine {
    mf_bmf_engine base;
    mf_ctx *ctx;
    mf_bmf_setup s;
    int32_t m, n;
    int k, kw;
    int64_t mw, nw;             /* words of a column of C (m bits) and of a row (n bits) */
    uint64_t *Crow, *Ccol;      /* m x nw, n x mw: per-bit moves only (else NULL) */
    const int64_t *rptr, *cptr; /* the ones by rows (C's CSR) and by columns (its CSC) */
    const int32_t *ridx, *cidx;
    int64_t nnz;
    instance *inst;
    int64_t initial[];
} cpu_engine;

/* One half-sweep's view: lines X being updated against the other side Y (also read
 * transposed), and the lines' ones. */
typedef struct view {
    int64_t L, nw; /* lines, and words of a line of C (the other side's bits) */
    uint64_t *X, *Xt;
    const uint64_t *Y, *Yt, *Cl;
    const int64_t *optr; /* line i's ones: oidx[optr[i] .. optr[i + 1]) */
    const int32_t *oidx;
} view;

static view make_view(const cpu_engine *e, instance *in, mf_bmf_side side)
{
    view v;
    if (side == MF_BMF_ROWS)
        v = (view){e->m, e->nw, in->A, in->At, in->B, in->Bt, e->Crow, e->rptr, e->ridx};
    else
        v = (view){e->n, e->mw, in->B, in->Bt, in->A, in->At, e->Ccol, e->cptr, e->cidx};
    return v;
}

static int popc(uint64_t x)
{
    return __builtin_popcountll(x);
}

/* Which of the 64 other lines of word w line x covers at least once (*ones) and at least
 * twice (*twos): bit-sliced counting over the rows of Yt of x's factors, so the cost is
 * the number of x's set bits, not k. Bits past the other side's end stay 0. */
static void cover_word(const uint64_t *x, int kw, const uint64_t *Yt, int64_t nw, int64_t w,
                       uint64_t *ones, uint64_t *twos)
{
    uint64_t o = 0, t2 = 0;
    for (int t = 0; t < kw; t++)
        for (uint64_t b = x[t]; b; b &= b - 1) {
            int l = t * 64 + __builtin_ctzll(b);
            uint64_t y = Yt[(int64_t)l * nw + w];
            t2 |= o & y;
            o |= y;
        }
    *ones = o;
    *twos = t2;
}

/* Factor l's counts for a single-bit move of line i (see bmf_delta): with the bit clear,
 * a = the zeros of the line in Y_l that nothing covers and b = its ones that nothing covers;
 * with the bit set, a = its ones that only l covers and b = its zeros that only l covers.
 * From the factor set's counts (bmf_fset.h) and the line's ones: o0[l] counts the line's
 * uncovered ones in Y_l, o1[l] its ones that l alone covers. */
static void move_counts(const view *v, int k, int kw, int64_t i, bmf_fset_cache *cache, int64_t *a,
                        int64_t *b, int64_t *o0, int64_t *o1)
{
    const uint64_t *x = v->X + i * kw;
    int64_t cover;
    const int64_t *vals = bmf_fset_counts(cache, x, v->Yt, &cover);
    memset(o0, 0, (size_t)k * sizeof *o0);
    memset(o1, 0, (size_t)k * sizeof *o1);
    for (int64_t p = v->optr[i]; p < v->optr[i + 1]; p++) {
        const uint64_t *y = v->Y + (int64_t)v->oidx[p] * kw;
        int c = 0;
        for (int t = 0; t < kw && c < 2; t++)
            c += popc(x[t] & y[t]);
        if (c >= 2)
            continue; /* covered twice: no single flip changes it */
        for (int t = 0; t < kw; t++)
            for (uint64_t bits = c ? x[t] & y[t] : y[t]; bits; bits &= bits - 1) {
                int l = t * 64 + __builtin_ctzll(bits);
                (c ? o1 : o0)[l]++;
            }
    }
    for (int l = 0; l < k; l++) {
        if (x[l / 64] >> (l % 64) & 1)
            a[l] = o1[l], b[l] = vals[l] - o1[l];
        else
            a[l] = vals[l] - o0[l], b[l] = o0[l];
    }
}

/* The single-bit move of line i: returns the bit to flip or -1, and its count changes.
 * scratch: 4k counts. */
static int single_move(const view *v, int k, int kw, int64_t i, const mf_bmf_sweep *sw,
                       mf_philox_block r, bmf_fset_cache *cache, int64_t *scratch, int64_t *dfp,
                       int64_t *dfn)
{
    int64_t *ca = scratch, *cb = scratch + k;
    move_counts(v, k, kw, i, cache, ca, cb, scratch + 2 * k, scratch + 3 * k);
    const uint64_t *x = v->X + i * kw;
    int start = bmf_rank_start(r, k), best = -1, best_rot = 0;
    int64_t best_d = 0, best_a = 0, best_b = 0;
    int metro = (int)(r.v[1] % (uint32_t)k);
    int64_t metro_d = 0, metro_a = 0, metro_b = 0;
    for (int l = 0; l < k; l++) {
        int bit = (int)(x[l / 64] >> (l % 64) & 1);
        const int64_t a = ca[l], b = cb[l];
        int64_t d = bmf_delta(bit, a, b, sw->wq);
        int rot = (l - start + k) % k;
        if (best < 0 || bmf_better(d, rot, best_d, best_rot)) {
            best = l;
            best_d = d;
            best_rot = rot;
            best_a = a;
            best_b = b;
        }
        if (l == metro) {
            metro_d = d;
            metro_a = a;
            metro_b = b;
        }
    }
    int l = -1;
    int64_t a = 0, b = 0;
    if (best_d < 0) {
        l = best;
        a = best_a;
        b = best_b;
    } else if (bmf_accept(metro_d, sw->temperature, r.v[2])) {
        l = metro;
        a = metro_a;
        b = metro_b;
    }
    if (l < 0)
        return -1;
    int bit = (int)(x[l / 64] >> (l % 64) & 1);
    *dfp = bit ? -b : a;
    *dfn = bit ? a : -b;
    return l;
}

/* The per-bit move of line i: flips the drawn bits in `next` when accepted (returns 1). */
static int per_bit_move(const view *v, int k, int kw, int64_t i, const mf_bmf_sweep *sw,
                        const cpu_engine *e, int q, uint32_t purpose, mf_philox_block r,
                        uint64_t *next, int64_t *dfp, int64_t *dfn)
{
    const uint64_t *x = v->X + i * kw, *c = v->Cl + i * v->nw;
    int any = 0;
    for (int w = 0; w < kw; w++) {
        next[w] = x[w] ^ bmf_random_word(e->s.seed, q, purpose, i, w, k, e->s.flip_p24);
        any |= next[w] != x[w];
    }
    if (!any)
        return 0;
    int64_t fp = 0, fn = 0;
    for (int64_t w = 0; w < v->nw; w++) {
        uint64_t before, after, twos;
        cover_word(x, kw, v->Yt, v->nw, w, &before, &twos);
        cover_word(next, kw, v->Yt, v->nw, w, &after, &twos);
        uint64_t lost = before & ~after, gained = after & ~before;
        fn += popc(lost & c[w]) - popc(gained & c[w]);
        fp += popc(gained & ~c[w]) - popc(lost & ~c[w]);
    }
    int64_t d = (int64_t)BMF_WSCALE * fp + sw->wq * fn;
    if (!bmf_accept(d, sw->temperature, r.v[2]))
        return 0;
    *dfp = fp;
    *dfn = fn;
    return 1;
}

static bool any_bit(const uint64_t *x, int kw)
{
    for (int t = 0; t < kw; t++)
        if (x[t])
            return true;
    return false;
}

/* Xt from X: word w of factor l's row holds bit l of lines 64w .. 64w + 63. */
static void transpose(int64_t L, int k, int kw, const uint64_t *X, uint64_t *Xt, int threads)
{
    (void)threads; /* read by OpenMP alone */
    int64_t lw = (L + 63) / 64;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t w = 0; w < lw; w++)
        for (int l = 0; l < k; l++) {
            uint64_t word = 0;
            for (int t = 0; t < 64 && w * 64 + t < L; t++)
                word |= (X[(w * 64 + t) * kw + l / 64] >> (l % 64) & 1) << t;
            Xt[(int64_t)l * lw + w] = word;
        }
}

static mf_status half_sweep(cpu_engine *e, int q, mf_bmf_side side, int sweep,
                            const mf_bmf_sweep *sw)
{
    instance *in = &e->inst[q];
    view v = make_view(e, in, side);
    int k = e->k, kw = e->kw, threads = mf_ctx_threads(e->ctx);
    uint32_t purpose = bmf_purpose_sweep(sweep, side);
    /* Without Metropolis moves only a flip that lowers the error is taken (bmf_accept). */
    const bool quiet = !(sw->temperature > 0.0);
    int64_t fp = 0, fn = 0;
    int oom = 0;
#pragma omp parallel num_threads(threads) reduction(+ : fp, fn)
    {
        uint64_t *buf = malloc((size_t)(4 * k + kw) * sizeof *buf);
        bmf_fset_cache *cache =
            e->s.flip == MF_BMF_FLIP_SINGLE ? bmf_fset_cache_new(k, kw, v.nw) : NULL;
        if (!buf || (e->s.flip == MF_BMF_FLIP_SINGLE && !cache)) {
            free(buf);
            buf = NULL;
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t i = 0; i < v.L; i++) {
            if (!buf)
                continue;
            int64_t dfp = 0, dfn = 0;
            uint64_t *x = v.X + i * kw;
            if (e->s.flip == MF_BMF_FLIP_SINGLE && quiet && v.optr[i] == v.optr[i + 1] &&
                !any_bit(x, kw))
                continue; /* no ones, no factors: every flip only adds false positives */
            mf_philox_block r = bmf_draw(e->s.seed, q, purpose, i, 0);
            if (e->s.flip == MF_BMF_FLIP_SINGLE) {
                int l = single_move(&v, k, kw, i, sw, r, cache, (int64_t *)buf, &dfp, &dfn);
                if (l >= 0)
                    x[l / 64] ^= (uint64_t)1 << (l % 64);
            } else {
                uint64_t *next = buf + 4 * k;
                if (per_bit_move(&v, k, kw, i, sw, e, q, purpose, r, next, &dfp, &dfn))
                    memcpy(x, next, (size_t)kw * sizeof *x);
            }
            fp += dfp;
            fn += dfn;
        }
        free(buf);
        bmf_fset_cache_free(cache);
    }
    if (oom)
        return mf_fail(e->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_bmf_run: out of host memory for a half-sweep's counts");
    in->fp += fp;
    in->fn += fn;
    transpose(v.L, k, kw, v.X, v.Xt, threads);
    return MF_OK;
}

static void keep_best(cpu_engine *e, instance *in)
{
    if (in->fp + in->fn >= in->best)
        return;
    in->best = in->fp + in->fn;
    memcpy(in->Abest, in->A, (size_t)e->m * e->kw * 8);
    memcpy(in->Bbest, in->B, (size_t)e->n * e->kw * 8);
}

static bool past(double deadline)
{
    return deadline > 0.0 && mf_seconds() >= deadline;
}

static mf_status cpu_sweeps(mf_bmf_engine *base, int first, int count, const mf_bmf_sweep *plan,
                            double deadline, int64_t *hist, int *done)
{
    cpu_engine *e = (cpu_engine *)base;
    bool stop = false;
    *done = 0;
    for (int g = 0; g < count && !stop; g++) {
        for (int q = 0; q < e->s.instances; q++) {
            if (!stop) {
                MF_TRY(half_sweep(e, q, MF_BMF_ROWS, first + g, &plan[g]));
                stop = past(deadline);
                if (!stop)
                    MF_TRY(half_sweep(e, q, MF_BMF_COLS, first + g, &plan[g]));
                stop = stop || past(deadline);
                keep_best(e, &e->inst[q]);
            }
            /* Past the deadline the later instances stand as they were: their counts
             * are the ones the driver already has. */
            hist[((size_t)g * e->s.instances + q) * 2] = e->inst[q].fp;
            hist[((size_t)g * e->s.instances + q) * 2 + 1] = e->inst[q].fn;
        }
        *done = g + 1;
    }
    return MF_OK;
}

/* fp and fn of an instance's current factors: fn from C's ones (those no shared factor
 * covers), fp as the cells each row's factor set covers (bmf_fset.h) less the covered
 * ones. Bt must be B's transpose. */
static mf_status count_errors(const cpu_engine *e, const instance *in, int64_t *fp, int64_t *fn)
{
    int64_t n = 0, covered = 0;
    int oom = 0;
#pragma omp parallel num_threads(mf_ctx_threads(e->ctx)) reduction(+ : n, covered)
    {
        bmf_fset_cache *cache = bmf_fset_cache_new(e->k, e->kw, e->nw);
        if (!cache) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 256)
        for (int32_t i = 0; i < e->m; i++) {
            if (!cache)
                continue;
            const uint64_t *a = in->A + (int64_t)i * e->kw;
            for (int64_t p = e->rptr[i]; p < e->rptr[i + 1]; p++)
                n += !bmf_share(a, in->B + (int64_t)e->ridx[p] * e->kw, e->kw);
            int any = 0;
            for (int t = 0; t < e->kw; t++)
                any |= a[t] != 0;
            if (any) {
                int64_t cover;
                (void)bmf_fset_counts(cache, a, in->Bt, &cover);
                covered += cover;
            }
        }
        bmf_fset_cache_free(cache);
    }
    if (oom)
        return mf_fail(e->ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory for counts");
    *fn = n;
    *fp = covered - (e->nnz - n);
    return MF_OK;
}

static mf_status cpu_recount(mf_bmf_engine *base, int q, int64_t *fp, int64_t *fn)
{
    cpu_engine *e = (cpu_engine *)base;
    return count_errors(e, &e->inst[q], fp, fn);
}

static mf_status cpu_finish(mf_bmf_engine *base, int q, uint64_t *A, uint64_t *B, mf_memory where)
{
    cpu_engine *e = (cpu_engine *)base;
    (void)where; /* a CPU context has host memory only */
    memcpy(A, e->inst[q].Abest, (size_t)e->m * e->kw * 8);
    memcpy(B, e->inst[q].Bbest, (size_t)e->n * e->kw * 8);
    return MF_OK;
}

static void cpu_destroy(mf_bmf_engine *base)
{
    cpu_engine *e = (cpu_engine *)base;
    if (!e)
        return;
    if (e->inst)
        for (int q = 0; q < e->s.instances; q++) {
            instance *in = &e->inst[q];
            free(in->A);
            free(in->B);
            free(in->At);
            free(in->Bt);
            free(in->Abest);
            free(in->Bbest);
        }
    free(e->inst);
    free(e->Crow);
    free(e->Ccol);
    free(e);
}

/* One instance's starting factors (see mf_bmf_init). */
static mf_status init_instance(cpu_engine *e, int q, instance *in)
{
    const mf_bmf_setup *s = &e->s;
    int k = e->k, kw = e->kw;
    size_t abytes = (size_t)e->m * kw * 8, bbytes = (size_t)e->n * kw * 8;
    if (s->A0) {
        size_t q_at = s->given_per_instance ? (size_t)q : 0;
        memcpy(in->A, (const char *)s->A0 + q_at * abytes, abytes);
        memcpy(in->B, (const char *)s->B0 + q_at * bbytes, bbytes);
    } else if (s->init == MF_BMF_INIT_RANDOM) {
        for (int64_t i = 0; i < e->m; i++)
            for (int w = 0; w < kw; w++)
                in->A[i * kw + w] =
                    bmf_random_word(s->seed, q, BMF_PURPOSE_INIT_A, i, w, k, s->init_p24);
        for (int64_t j = 0; j < e->n; j++)
            for (int w = 0; w < kw; w++)
                in->B[j * kw + w] =
                    bmf_random_word(s->seed, q, BMF_PURPOSE_INIT_B, j, w, k, s->init_p24);
    } else {
        memset(in->A, 0, abytes);
        memset(in->B, 0, bbytes);
        for (int l = 0; s->sample_ptr && l < k; l++) {
            int64_t f = (int64_t)q * k + l;
            for (int64_t p = s->sample_ptr[f]; p < s->sample_ptr[f + 1]; p++)
                in->B[(int64_t)s->sample_cols[p] * kw + l / 64] |= (uint64_t)1 << (l % 64);
        }
    }
    int threads = mf_ctx_threads(e->ctx);
    transpose(e->m, k, kw, in->A, in->At, threads);
    transpose(e->n, k, kw, in->B, in->Bt, threads);
    MF_TRY(count_errors(e, in, &in->fp, &in->fn));
    in->best = in->fp + in->fn;
    memcpy(in->Abest, in->A, abytes);
    memcpy(in->Bbest, in->B, bbytes);
    return MF_OK;
}

mf_status mf_bmf_cpu_engine(const mf_bmf_setup *s, mf_bmf_engine **out)
{
    mf_ctx *ctx = s->ctx;
    mf_sparse *C = s->C;
    cpu_engine *e = calloc(1, sizeof *e + (size_t)s->instances * 2 * sizeof(int64_t));
    if (!e)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_bmf_run: out of host memory");
    e->base =
        (mf_bmf_engine){s->instances, e->initial, cpu_sweeps, cpu_recount, cpu_finish, cpu_destroy};
    e->ctx = ctx;
    e->s = *s;
    e->m = C->rows;
    e->n = C->cols;
    e->k = s->k;
    e->kw = mf_bmf_words(s->k);
    e->mw = (C->rows + 63) / 64;
    e->nw = (C->cols + 63) / 64;
    /* C in bits only for per-bit moves, which build their masks densely: single-bit moves
     * and the counts read the ones, so memory follows the ones and the factors. */
    const bool bits = s->flip == MF_BMF_FLIP_PER_BIT;
    if (bits) {
        e->Crow = calloc((size_t)e->m * e->nw, 8);
        e->Ccol = calloc((size_t)e->n * e->mw, 8);
    }
    e->inst = calloc((size_t)s->instances, sizeof *e->inst);
    int ok = (!bits || (e->Crow && e->Ccol)) && e->inst;
    for (int q = 0; ok && q < s->instances; q++) {
        instance *in = &e->inst[q];
        in->A = malloc((size_t)e->m * e->kw * 8);
        in->B = malloc((size_t)e->n * e->kw * 8);
        in->Abest = malloc((size_t)e->m * e->kw * 8);
        in->Bbest = malloc((size_t)e->n * e->kw * 8);
        in->At = malloc((size_t)e->k * e->mw * 8);
        in->Bt = malloc((size_t)e->k * e->nw * 8);
        ok = in->A && in->B && in->Abest && in->Bbest && in->At && in->Bt;
    }
    if (!ok) {
        cpu_destroy(&e->base);
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_bmf_run: out of host memory for a %d x %d Boolean matrix "
                       "and %d instances of rank %d",
                       (int)C->rows, (int)C->cols, s->instances, s->k);
    }
    for (int32_t i = 0; bits && i < e->m; i++)
        for (int64_t p = C->row_ptr[i]; p < C->row_ptr[i + 1]; p++) {
            int32_t j = C->col[p];
            e->Crow[(int64_t)i * e->nw + j / 64] |= (uint64_t)1 << (j % 64);
            e->Ccol[(int64_t)j * e->mw + i / 64] |= (uint64_t)1 << (i % 64);
        }
    mf_status st = mf_sparse_host_transpose(C); /* the ones by columns */
    if (st != MF_OK) {
        cpu_destroy(&e->base);
        return st;
    }
    e->rptr = C->row_ptr, e->ridx = C->col;
    e->cptr = C->transpose.ptr, e->cidx = C->transpose.idx;
    e->nnz = C->nnz;
    for (int q = 0; q < s->instances; q++) {
        st = init_instance(e, q, &e->inst[q]);
        if (st != MF_OK) {
            cpu_destroy(&e->base);
            return st;
        }
        e->initial[2 * q] = e->inst[q].fp;
        e->initial[2 * q + 1] = e->inst[q].fn;
    }
    *out = &e->base;
    return MF_OK;
}
