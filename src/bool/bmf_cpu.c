/* The CPU engine of Boolean factorization: C in bits by rows and by columns, and per
 * instance the factors by lines and transposed. A half-sweep runs OpenMP over the lines of
 * the side it updates; each line builds, over the other side's lines, the masks of the
 * entries a flip would change, and counts them against each factor with 64-bit popcount.
 * It is the reference the CUDA engine is tested against, so it favours plain loops. */
#include <stdlib.h>
#include <string.h>

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
    int64_t mw, nw;        /* words of a column of C (m bits) and of a row (n bits) */
    uint64_t *Crow, *Ccol; /* m x nw, n x mw */
    instance *inst;
    int64_t initial[];
} cpu_engine;

/* One half-sweep's view: lines X being updated against the other side, read transposed. */
typedef struct view {
    int64_t L, nw; /* lines, and words of a line of C (the other side's bits) */
    uint64_t *X, *Xt;
    const uint64_t *Yt, *Cl;
} view;

static view make_view(const cpu_engine *e, instance *in, mf_bmf_side side)
{
    view v;
    if (side == MF_BMF_ROWS)
        v = (view){e->m, e->nw, in->A, in->At, in->Bt, e->Crow};
    else
        v = (view){e->n, e->mw, in->B, in->Bt, in->At, e->Ccol};
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

/* The four masks of a line over the other side (see bmf_delta): entries covered by no
 * factor (zeros m0p, ones m0n) and by exactly one (ones m1p, zeros m1n). */
static void line_masks(const view *v, int kw, int64_t i, uint64_t *m0p, uint64_t *m0n,
                       uint64_t *m1p, uint64_t *m1n)
{
    const uint64_t *x = v->X + i * kw, *c = v->Cl + i * v->nw;
    for (int64_t w = 0; w < v->nw; w++) {
        uint64_t ones, twos;
        cover_word(x, kw, v->Yt, v->nw, w, &ones, &twos);
        uint64_t once = ones & ~twos;
        m0p[w] = ~ones & ~c[w];
        m0n[w] = ~ones & c[w];
        m1p[w] = once & c[w];
        m1n[w] = once & ~c[w];
    }
}

/* The single-bit move of line i: returns the bit to flip or -1, and its count changes. */
static int single_move(const view *v, int k, int kw, int64_t i, const mf_bmf_sweep *sw,
                       mf_philox_block r, uint64_t *masks, int64_t *dfp, int64_t *dfn)
{
    uint64_t *m0p = masks, *m0n = masks + v->nw, *m1p = masks + 2 * v->nw, *m1n = masks + 3 * v->nw;
    line_masks(v, kw, i, m0p, m0n, m1p, m1n);
    const uint64_t *x = v->X + i * kw;
    int start = bmf_rank_start(r, k), best = -1, best_rot = 0;
    int64_t best_d = 0, best_a = 0, best_b = 0;
    int metro = (int)(r.v[1] % (uint32_t)k);
    int64_t metro_d = 0, metro_a = 0, metro_b = 0;
    for (int l = 0; l < k; l++) {
        int bit = (int)(x[l / 64] >> (l % 64) & 1);
        const uint64_t *yt = v->Yt + (int64_t)l * v->nw;
        const uint64_t *ma = bit ? m1p : m0p, *mb = bit ? m1n : m0n;
        int64_t a = 0, b = 0;
        for (int64_t w = 0; w < v->nw; w++) {
            a += popc(yt[w] & ma[w]);
            b += popc(yt[w] & mb[w]);
        }
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
    int64_t fp = 0, fn = 0;
    int oom = 0;
#pragma omp parallel num_threads(threads) reduction(+ : fp, fn)
    {
        uint64_t *buf = malloc((size_t)(4 * v.nw + kw) * sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 16)
        for (int64_t i = 0; i < v.L; i++) {
            if (!buf)
                continue;
            mf_philox_block r = bmf_draw(e->s.seed, q, purpose, i, 0);
            int64_t dfp = 0, dfn = 0;
            uint64_t *x = v.X + i * kw;
            if (e->s.flip == MF_BMF_FLIP_SINGLE) {
                int l = single_move(&v, k, kw, i, sw, r, buf, &dfp, &dfn);
                if (l >= 0)
                    x[l / 64] ^= (uint64_t)1 << (l % 64);
            } else {
                uint64_t *next = buf + 4 * v.nw;
                if (per_bit_move(&v, k, kw, i, sw, e, q, purpose, r, next, &dfp, &dfn))
                    memcpy(x, next, (size_t)kw * sizeof *x);
            }
            fp += dfp;
            fn += dfn;
        }
        free(buf);
    }
    if (oom)
        return mf_fail(e->ctx, MF_ERR_OUT_OF_MEMORY,
                       "mf_bmf_run: out of host memory for a line's masks");
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

/* Whether lines a and b share a factor. */
static int share(const uint64_t *a, const uint64_t *b, int kw)
{
    for (int t = 0; t < kw; t++)
        if (a[t] & b[t])
            return 1;
    return 0;
}

static void count_errors(const cpu_engine *e, const uint64_t *A, const uint64_t *B, int64_t *fp,
                         int64_t *fn)
{
    int64_t p = 0, n = 0;
#pragma omp parallel for num_threads(mf_ctx_threads(e->ctx)) reduction(+ : p, n)
    for (int32_t i = 0; i < e->m; i++)
        for (int32_t j = 0; j < e->n; j++) {
            int covered = share(A + (int64_t)i * e->kw, B + (int64_t)j * e->kw, e->kw);
            int one = (int)(e->Crow[(int64_t)i * e->nw + j / 64] >> (j % 64) & 1);
            p += covered && !one;
            n += one && !covered;
        }
    *fp = p;
    *fn = n;
}

static mf_status cpu_recount(mf_bmf_engine *base, int q, int64_t *fp, int64_t *fn)
{
    cpu_engine *e = (cpu_engine *)base;
    count_errors(e, e->inst[q].A, e->inst[q].B, fp, fn);
    return MF_OK;
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
static void init_instance(cpu_engine *e, int q, instance *in)
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
    count_errors(e, in->A, in->B, &in->fp, &in->fn);
    in->best = in->fp + in->fn;
    memcpy(in->Abest, in->A, abytes);
    memcpy(in->Bbest, in->B, bbytes);
}

mf_status mf_bmf_cpu_engine(const mf_bmf_setup *s, mf_bmf_engine **out)
{
    mf_ctx *ctx = s->ctx;
    const mf_sparse *C = s->C;
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
    e->Crow = calloc((size_t)e->m * e->nw, 8);
    e->Ccol = calloc((size_t)e->n * e->mw, 8);
    e->inst = calloc((size_t)s->instances, sizeof *e->inst);
    int ok = e->Crow && e->Ccol && e->inst;
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
                       "mf_bmf_run: out of host memory for a %d x %d Boolean matrix in bits "
                       "and %d instances of rank %d",
                       (int)C->rows, (int)C->cols, s->instances, s->k);
    }
    for (int32_t i = 0; i < e->m; i++)
        for (int64_t p = C->row_ptr[i]; p < C->row_ptr[i + 1]; p++) {
            int32_t j = C->col[p];
            e->Crow[(int64_t)i * e->nw + j / 64] |= (uint64_t)1 << (j % 64);
            e->Ccol[(int64_t)j * e->mw + i / 64] |= (uint64_t)1 << (i % 64);
        }
    for (int q = 0; q < s->instances; q++) {
        init_instance(e, q, &e->inst[q]);
        e->initial[2 * q] = e->inst[q].fp;
        e->initial[2 * q + 1] = e->inst[q].fn;
    }
    *out = &e->base;
    return MF_OK;
}
