/* mfact demo's BMF step: a planted Boolean matrix C* = A* o B* (each factor bit 1 with
 * probability p, so that C* has about DENSITY ones), a little noise flipped (each entry with
 * probability NOISE), factorized by mf_bmf_run from the Asso start at the planted rank; the
 * result A o B is scored against the noiseless C*. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "demo.h"

enum { ROWS = 2000, COLS = 1500, RANK = 12 };
#define DENSITY      0.03
#define NOISE        0.001
#define STREAM_BITS  0x64656d6f06000000ull
#define STREAM_FLIPS 0x64656d6f07000000ull

/* One word per line: RANK <= 64. */
static void draw_bits(demo_rng *rng, double p, int32_t lines, uint64_t *X)
{
    for (int32_t i = 0; i < lines; i++) {
        X[i] = 0;
        for (int l = 0; l < RANK; l++)
            X[i] |= (uint64_t)(demo_rng_uniform(rng) < p) << l;
    }
}

/* The positions (i * cols + j, increasing) where the noise flips C*: geometric gaps. */
static int64_t *draw_flips(demo_rng *rng, int64_t cells, int64_t *count)
{
    int64_t cap = (int64_t)(NOISE * (double)cells * 1.5) + 64, n = 0;
    int64_t *pos = demo_alloc("the flipped entries", cap, sizeof *pos);
    double step = log1p(-NOISE);
    /* cap is 1.5 times the expected count: reaching it is all but impossible. */
    for (double at = floor(log(1.0 - demo_rng_uniform(rng)) / step);
         pos && n < cap && at < (double)cells;
         at += 1.0 + floor(log(1.0 - demo_rng_uniform(rng)) / step))
        pos[n++] = (int64_t)at;
    *count = n;
    return pos;
}

/* C = C* with the flips applied, as a pattern. */
static mf_sparse *build(mf_ctx *ctx, int32_t m, int32_t n, const uint64_t *A, const uint64_t *B,
                        const int64_t *flips, int64_t nflips, int64_t *clean_ones)
{
    int64_t ones = 0;
    for (int32_t i = 0; i < m; i++)
        for (int32_t j = 0; j < n; j++)
            ones += (A[i] & B[j]) != 0;
    *clean_ones = ones;
    int64_t *ptr = demo_alloc("the Boolean matrix's row offsets", (int64_t)m + 1, sizeof *ptr);
    int32_t *col = demo_alloc("the Boolean matrix's ones", ones + nflips, sizeof *col);
    mf_sparse *C = NULL;
    if (ptr && col) {
        int64_t q = 0, f = 0;
        ptr[0] = 0;
        for (int32_t i = 0; i < m; i++) {
            for (int32_t j = 0; j < n; j++) {
                int one = (A[i] & B[j]) != 0;
                if (f < nflips && flips[f] == (int64_t)i * n + j)
                    one ^= 1, f++;
                if (one)
                    col[q++] = j;
            }
            ptr[i + 1] = q;
        }
        if (mf_sparse_from_csr(ctx, &C, m, n, q, ptr, col, NULL, MF_MEMORY_HOST, 0) != MF_OK)
            cli_error("demo", "BMF: %s", mf_ctx_last_error(ctx));
    }
    free(ptr), free(col);
    return C;
}

int demo_bmf(mf_ctx *ctx, uint64_t seed, double scale, cli_out *out)
{
    int32_t m = (int32_t)fmax(1.0, round(ROWS * sqrt(scale)));
    int32_t n = (int32_t)fmax(1.0, round(COLS * sqrt(scale)));
    /* A o B has density 1 - (1 - p^2)^RANK. */
    double p = sqrt(1.0 - pow(1.0 - DENSITY, 1.0 / RANK));
    demo_say("planting a %d x %d Boolean matrix of rank %d (factor bits 1 with p = %.3f), "
             "%.1f%% of its entries flipped",
             (int)m, (int)n, RANK, p, 100 * NOISE);
    if (!demo_fits("the planted Boolean matrix", 0.5 * (double)m * n + 64.0 * ((double)m + n)))
        return -1;
    uint64_t *As = demo_alloc("the planted factor A*", m, sizeof *As);
    uint64_t *Bs = demo_alloc("the planted factor B*", n, sizeof *Bs);
    uint64_t *A = demo_alloc("the factor A", m, sizeof *A);
    uint64_t *B = demo_alloc("the factor B", n, sizeof *B);
    int64_t *flips = NULL, nflips = 0, clean = 0;
    mf_sparse *C = NULL;
    int rc = -1;
    demo_rng rng;
    bool have_rng = false;
    if (!As || !Bs || !A || !B || !(have_rng = demo_rng_init(&rng, ctx, seed, STREAM_BITS)))
        goto done;
    draw_bits(&rng, p, m, As);
    draw_bits(&rng, p, n, Bs);
    rng.stream = STREAM_FLIPS, rng.pos = rng.len = 0;
    if (!(flips = draw_flips(&rng, (int64_t)m * n, &nflips)))
        goto done;
    if (rng.failed) {
        cli_error("demo", "BMF: %s", mf_ctx_last_error(ctx));
        goto done;
    }
    if (!(C = build(ctx, m, n, As, Bs, flips, nflips, &clean)))
        goto done;
    int64_t ones;
    mf_sparse_shape(C, NULL, NULL, &ones);
    mf_bmf_opts o;
    mf_bmf_opts_init(&o);
    /* From the Asso start 4 instances (4 association thresholds) and a patience of 10
     * sweeps find the planted factors as 16 and 30 do (the defaults), in a third of the
     * time on the CPU. */
    o.rank = RANK, o.init = MF_BMF_INIT_ASSO; /* the context carries the seed */
    o.instances = 4, o.patience = 10;
    demo_say("BMF (mf_bmf_run): rank %d, Asso start, %d instances, patience %d sweeps, on %lld "
             "ones",
             o.rank, o.instances, o.patience, (long long)ones);
    mf_bmf_report rep = {.struct_size = sizeof rep};
    if (mf_bmf_run(ctx, C, &o, A, B, MF_MEMORY_HOST, &rep) != MF_OK) {
        cli_error("demo", "BMF: %s", mf_ctx_last_error(ctx));
        goto done;
    }
    /* The result against the noiseless C*. */
    int64_t tp = 0, pred = 0;
    for (int32_t i = 0; i < m; i++)
        for (int32_t j = 0; j < n; j++) {
            int got = (A[i] & B[j]) != 0;
            pred += got;
            tp += got && (As[i] & Bs[j]) != 0;
        }
    double cells = (double)m * n;
    cli_out_int(out, "BMF rows", m);
    cli_out_int(out, "BMF cols", n);
    cli_out_int(out, "BMF ones", ones);
    cli_out_int(out, "BMF flipped", nflips);
    cli_out_int(out, "BMF rank", RANK);
    cli_out_num(out, "BMF relative error", rep.relative_error);
    cli_out_num(out, "BMF planted relative error", (double)nflips / cells);
    cli_out_num(out, "BMF precision vs planted", pred ? (double)tp / (double)pred : 1.0);
    cli_out_num(out, "BMF recall vs planted", clean ? (double)tp / (double)clean : 1.0);
    cli_out_num(out, "BMF F1 vs planted",
                pred + clean ? 2.0 * (double)tp / (double)(pred + clean) : 1.0);
    cli_out_int(out, "BMF sweeps", rep.sweeps);
    cli_out_num(out, "BMF seconds", rep.seconds);
    rc = 0;
done:
    if (have_rng)
        demo_rng_free(&rng);
    mf_sparse_destroy(C);
    free(As), free(Bs), free(A), free(B), free(flips);
    return rc;
}
