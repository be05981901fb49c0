/* What the parts of `mfact demo` share: its arguments, a seeded stream of uniforms drawn
 * through mf_random_uniform, checked host allocations, the generated ratings, and one
 * function per step. */
#ifndef MFACT_CLI_DEMO_H
#define MFACT_CLI_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

/* The steps of a run on generated data, in the order they run. */
enum {
    DEMO_ALS = 1,
    DEMO_SGD = 2,
    DEMO_BMF = 4,
    DEMO_SDDMM = 8,
    DEMO_COMPLETE = 16,
    DEMO_ALL = 31
};

typedef struct demo_args {
    cli_common common;
    const char *file;
    double scale; /* --scale: multiplies the default sizes                   */
    bool shape;   /* --shape given: the ratings are rows x cols at density  */
    long long rows, cols;
    double density;
    unsigned steps; /* DEMO_* bits                                            */
} demo_args;

/* `mfact demo FILE`: load it and report its shape and statistics. */
int demo_file(mf_ctx *ctx, const demo_args *a);

/* The subcommand named by the helpers' failure messages ("demo" unless set). */
void demo_set_command(const char *cmd);
const char *demo_command(void);

/* "== what" on stderr: what the demo does next. */
void demo_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* malloc(count * size), or NULL with "out of host memory: N bytes for WHAT" printed
 * (a product that overflows counts as a failed allocation). */
void *demo_alloc(const char *what, int64_t count, size_t size);
/* Whether `bytes` of host memory look available (at most 90 % of the physical memory);
 * otherwise prints why not, naming `what`, and returns false. Linux lends memory it does
 * not have, so a large malloc can succeed and the process be killed later: generation
 * checks its total first. */
bool demo_fits(const char *what, double bytes);

/* Uniforms in [0, 1) drawn in blocks through mf_random_uniform: the same (seed, stream)
 * gives the same sequence. A failure of the library sets `failed` (and its message stays on
 * the context); the stream then yields 0.5. */
typedef struct demo_rng {
    mf_ctx *ctx;
    uint64_t seed, stream;
    float *buf;
    int len, pos;
    bool failed;
    double spare; /* the second normal of the last Box-Muller pair, or NaN */
} demo_rng;

bool demo_rng_init(demo_rng *r, mf_ctx *ctx, uint64_t seed, uint64_t stream);
void demo_rng_free(demo_rng *r);
double demo_rng_uniform(demo_rng *r);
double demo_rng_normal(demo_rng *r);

/* A planted ratings matrix split into train and test parts (see demo_ratings.c). */
typedef struct demo_ratings {
    int32_t users, items;
    uint64_t seed;        /* of the generation                                  */
    int rank;             /* of the planted model U* V*^T                        */
    double mean, sigma;   /* ratings = mean + U* V*^T + N(0, sigma^2)            */
    double test_fraction; /* share of the ratings held out                      */
    mf_sparse *train, *test;
    double planted_rmse; /* the planted model mean + U* V*^T on the test part (0 if empty) */
    double seconds;      /* to generate and build both matrices                 */
} demo_ratings;

/* Generate `users` x `items` ratings, about per_user per user on average (saying so with
 * "== ..."). On failure the message is printed and -1 returned; release with
 * demo_ratings_free either way. */
int demo_ratings_make(mf_ctx *ctx, uint64_t seed, int32_t users, int32_t items, double per_user,
                      demo_ratings *r);
void demo_ratings_free(demo_ratings *r);

/* The steps: each prints "== ..." first, then its results through `out`; on failure the
 * message is printed and -1 returned. BMF plants its own matrix, `scale` times the default
 * entries. */
int demo_als(mf_ctx *ctx, const demo_ratings *r, cli_out *out);
int demo_sgd(mf_ctx *ctx, const demo_ratings *r, cli_out *out);
int demo_bmf(mf_ctx *ctx, uint64_t seed, double scale, cli_out *out);
int demo_sddmm(mf_ctx *ctx, const demo_ratings *r, cli_out *out);
/* Matrix completion (mf_asd_run, Scaled ASD) of a planted low-rank matrix, `scale` times the
 * default entries: the relative error against the planted matrix. */
int demo_complete(mf_ctx *ctx, uint64_t seed, double scale, cli_out *out);

/* A planted low-rank matrix observed on a random sample of its entries (planted.c): A (rows x
 * rank) and B (cols x rank) with N(0, 1) entries, column t of A scaled by
 * condition^(-t / (rank - 1)) when condition > 1, each entry of A B^T observed with
 * probability `density` (its value A_i . B_j). */
typedef struct demo_planted {
    int32_t rows, cols;
    int rank;
    double density, condition;
    uint64_t seed;
    float *A, *B;   /* row-major, leading dimension rank */
    mf_sparse *M;   /* the observed entries             */
    double seconds; /* to generate and build M           */
} demo_planted;

/* Generate (saying so with "== ..."); on failure the message is printed and -1 returned.
 * Release with demo_planted_free either way. */
int demo_planted_make(mf_ctx *ctx, uint64_t seed, int32_t rows, int32_t cols, int rank,
                      double density, double condition, demo_planted *p);
void demo_planted_free(demo_planted *p);
/* |X Y^T - A B^T|_F / |A B^T|_F in double, X (rows x k) and Y (cols x k) row-major: over
 * every entry when there are at most `samples`, else over `samples` uniformly random
 * entries; *used says how many. NaN on failure (printed). */
double demo_planted_error(mf_ctx *ctx, const demo_planted *p, const float *X, const float *Y, int k,
                          int64_t samples, int64_t *used);
/* "tolerance", "stagnation", "max iterations", "time limit", "cancelled". */
const char *demo_asd_stop_name(mf_asd_stop stop);

#endif
