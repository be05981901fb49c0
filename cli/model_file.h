/* The tool's model files (mf_model_save, mf_model_load): what als, sgd and ials write with
 * --save-model, and what predict and recommend --model read. */
#ifndef MFACT_CLI_MODEL_FILE_H
#define MFACT_CLI_MODEL_FILE_H

#include "cli.h"

/* What a fit hands to cli_save_model: the factors of train's users and items (U users x
 * ld, V items x ld, the first k columns fitted), the biases (NULL or bias->user/item NULL:
 * none) and the algorithm's options as text. */
typedef struct cli_fit {
    const char *algorithm; /* "als", "sgd", "ials" */
    const char *options;   /* "rank=32 lambda=15 ..." */
    const mf_sparse *train;
    int k, ld;
    const float *U, *V;
    const mf_biases *bias;
} cli_fit;

/* The fit as a host mf_model (a view of its arrays). */
void cli_fit_model(const cli_fit *fit, mf_model *m);

/* Save the fit to `path` (NULL: nothing) on rank 0 of a launch (the other ranks write
 * nothing), its options followed by "index_base=B", the base of the ratings file it read
 * (cli_ratings_base), so that predict and recommend number ids as the training file did.
 * Prints the failure; returns 0 or -1. */
int cli_save_model(const char *cmd, mf_ctx *ctx, const char *path, const cli_fit *fit);

/* Room for the fitted biases of train's users and items in b->user and b->item, for a fit
 * to hand over (mf_als_opts.bias_out); cli_free_biases releases it. Prints the failure;
 * returns 0 or -1. */
int cli_bias_room(const char *cmd, const mf_sparse *train, mf_biases *b);
void cli_free_biases(mf_biases *b);

/* Load `path` into *saved and its view into *model. *base is the index base of the ids
 * that go with it: `given` (--index-base) when it is 0 or 1, else the one the file's options
 * record, else -1 (the readers' convention). Prints the failure; returns 0 or -1. */
int cli_load_model(const char *cmd, mf_ctx *ctx, const char *path, int given,
                   mf_saved_model **saved, mf_model *model, int *base);

#endif
