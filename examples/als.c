/* ALS-WR on a tiny ratings matrix: build it, factorize with a held-out rating, follow the
 * progress, and predict. Build: cc als.c $(pkg-config --cflags --libs mfact)
 *
 * Five users and four items; user 4's rating of item 3 is held out: it is 5, and users 1
 * and 3, who rate the other items as user 4 does, gave item 3 five and four stars. */
#include <stdio.h>

#include <mfact/mfact.h>

static int show(void *user, const mf_progress *p)
{
    (void)user;
    if (p->iteration % 5 == 0)
        printf("iteration %2d: train RMSE %.3f, test RMSE %.3f\n", p->iteration, p->train_rmse,
               p->test_rmse);
    return 0; /* nonzero would stop the run */
}

int main(void)
{
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, NULL) != MF_OK) { /* CUDA when a GPU is usable, else CPU */
        fprintf(stderr, "%s\n", mf_ctx_last_error(NULL));
        return 1;
    }
    /* users 0 and 2 like items 0 and 1; users 1, 3 and 4 like items 2 and 3 */
    int32_t user[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4};
    int32_t item[] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 3, 0, 1, 2, 3, 0, 1, 2};
    float stars[] = {5, 5, 1, 1, 1, 1, 5, 5, 5, 4, 1, 1, 2, 5, 4, 1, 1, 5};
    int32_t held_user[] = {4}, held_item[] = {3};
    float held_stars[] = {5};
    mf_sparse *train = NULL, *test = NULL;
    if (mf_sparse_from_coo(ctx, &train, 5, 4, 18, user, item, stars, MF_MEMORY_HOST, 0) != MF_OK ||
        mf_sparse_from_coo(ctx, &test, 5, 4, 1, held_user, held_item, held_stars, MF_MEMORY_HOST,
                           0) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    mf_als_opts opts;
    mf_als_opts_init(&opts);
    opts.rank = 2;
    opts.lambda = 0.05f;
    opts.iterations = 20;
    opts.test = test;
    opts.progress = show;
    float U[5 * 2], V[4 * 2]; /* row-major: U[u * rank + t] */
    float user_bias[5], item_bias[4];
    mf_biases biases = {0.0f, user_bias, item_bias}; /* the run fills in the mean */
    opts.bias_out = &biases;
    mf_als_report report = {.struct_size = sizeof report};
    if (mf_als_run(ctx, train, &opts, U, V, MF_MEMORY_HOST, &report) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    /* The model: mean + user bias + item bias + U_u . V_i. */
    mf_model model;
    mf_model_init(&model);
    model.users = 5, model.items = 4, model.k = 2;
    model.U = U, model.ldu = 2, model.V = V, model.ldv = 2;
    model.mean = biases.mean, model.user_bias = user_bias, model.item_bias = item_bias;
    float predicted = 0.0f;
    if (mf_predict_pairs(ctx, &model, 1, held_user, held_item, &predicted) != MF_OK) {
        fprintf(stderr, "%s\n", mf_ctx_last_error(ctx));
        return 1;
    }
    printf("user 4, item 3: predicted %.1f (held out: 5)\n", predicted);
    printf("%d iterations in %.3f s\n", report.iterations, report.seconds);
    mf_sparse_destroy(train);
    mf_sparse_destroy(test);
    mf_ctx_destroy(ctx);
    return 0;
}
