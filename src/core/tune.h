/* The candidates of a tuned run (mf_tune flags in an algorithm's options): lambda scaled by
 * 1/4 .. 4, and with MF_TUNE_RANK the ranks 1/2 and 1/4 of the requested one. Each
 * algorithm fits them its own way; this is only the grid and the pick, so that ALS and SGD
 * search alike. */
#ifndef MF_CORE_TUNE_H
#define MF_CORE_TUNE_H

#include <math.h>

#include "mfact/mfact.h"

#define MF_TUNE_SCALES 5
/* The seed of the validation split, xored into the context's. */
#define MF_TUNE_SPLIT_SEED 0x74756e65ull
/* The validation part of the training ratings. */
#define MF_TUNE_FRACTION 0.1

typedef struct mf_tune_grid {
    int ranks[3];
    int nranks;
    float lambdas[MF_TUNE_SCALES];
    /* the best so far */
    double best_rmse;
    int best_rank;
    float best_lambda;
} mf_tune_grid;

static inline void mf_tune_grid_make(unsigned flags, int rank, float lambda, mf_tune_grid *g)
{
    static const float scales[MF_TUNE_SCALES] = {0.25f, 0.5f, 1.0f, 2.0f, 4.0f};
    g->ranks[0] = rank;
    g->nranks = 1;
    if (flags & MF_TUNE_RANK) {
        if (rank / 2 >= 1)
            g->ranks[g->nranks++] = rank / 2;
        if (rank / 4 >= 1 && rank / 4 != rank / 2)
            g->ranks[g->nranks++] = rank / 4;
    }
    for (int i = 0; i < MF_TUNE_SCALES; i++)
        g->lambdas[i] = lambda * scales[i];
    g->best_rmse = INFINITY;
    g->best_rank = rank;
    g->best_lambda = lambda;
}

/* Keep (rank, lambda) when its validation RMSE is the lowest so far. */
static inline void mf_tune_grid_offer(mf_tune_grid *g, int rank, float lambda, double rmse)
{
    if (rmse < g->best_rmse) {
        g->best_rmse = rmse;
        g->best_rank = rank;
        g->best_lambda = lambda;
    }
}

#endif
