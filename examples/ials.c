/* Implicit-feedback ALS on a tiny play log, then recommendations: fit, recommend what each
 * listener has not played, find similar artists, and fold in a new listener.
 * Build: cc ials.c $(pkg-config --cflags --libs mfact)
 *
 * Six listeners and six artists in two scenes: listeners 0-2 play artists 0-2, listeners 3-5
 * play artists 3-5, each missing one artist of their scene. Listener 0 has not played
 * artist 2: the top recommendation should be artist 2, from the same scene. */
#include <stdio.h>

#include <mfact/mfact.h>

int main(void)
{
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, NULL) != MF_OK) { /* CUDA when a GPU is usable, else CPU */
        fprintf(stderr, "%s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    int32_t user[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5};
    int32_t item[] = {0, 1, 1, 2, 0, 2, 3, 4, 4, 5, 3, 5};
    float plays[] = {12, 3, 7, 5, 4, 9, 8, 2, 6, 6, 3, 10};
    mf_sparse *R = NULL;
    if (mf_sparse_from_coo(ctx, &R, 6, 6, 12, user, item, plays, MF_MEMORY_HOST, 0) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    mf_ials_opts opts;
    mf_ials_opts_init(&opts);
    opts.rank = 2;
    opts.lambda = 0.1f;
    opts.alpha = 2.0f; /* confidence 1 + 2 plays */
    opts.iterations = 20;
    float U[6 * 2], V[6 * 2];
    if (mf_ials_run(ctx, R, &opts, U, V, MF_MEMORY_HOST, NULL) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    mf_model model; /* an implicit model: no mean, no biases */
    mf_model_init(&model);
    model.users = 6, model.items = 6, model.k = 2;
    model.U = U, model.ldu = 2, model.V = V, model.ldv = 2;
    int32_t who[] = {0, 3}, top[2 * 2], like[2];
    float score[2 * 2], like_score[2];
    int32_t artist[] = {0};
    if (mf_recommend(ctx, &model, 2, who, R, 2, top, score) != MF_OK ||
        mf_similar_items(ctx, &model, 1, artist, 2, like, like_score) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    for (int b = 0; b < 2; b++) /* -1: no more artists the listener has not played */
        printf("listener %d: recommend artist %d (%.2f), then %d\n", who[b], top[2 * b],
               (double)score[2 * b], top[2 * b + 1]);
    printf("artists like artist 0: %d, %d\n", like[0], like[1]);
    /* A new listener who played artists 3 and 4: factors from V, then a recommendation. */
    int32_t new_user[] = {0, 0}, new_item[] = {3, 4};
    float new_plays[] = {5, 5};
    mf_sparse *N = NULL;
    float u_new[2];
    int32_t pick[1], zero[1] = {0};
    float pick_score[1];
    if (mf_sparse_from_coo(ctx, &N, 1, 6, 2, new_user, new_item, new_plays, MF_MEMORY_HOST, 0) !=
            MF_OK ||
        mf_ials_fold_in(ctx, N, &opts, V, u_new, MF_MEMORY_HOST) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    mf_model one = model;
    one.users = 1, one.U = u_new;
    if (mf_recommend(ctx, &one, 1, zero, N, 1, pick, pick_score) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    printf("new listener: recommend artist %d\n", pick[0]);
    mf_sparse_destroy(N);
    mf_sparse_destroy(R);
    mf_ctx_destroy(ctx);
    return 0;
}
