/* mfact demo: the README's main job. Without FILE it runs the library's real work on
 * generated data sized to the backend: ALS and SGD on a planted, Netflix-shaped ratings
 * matrix (test RMSE next to the planted model's own), BMF on a planted Boolean matrix (F1
 * against the planted factors), the speed of SDDMM and matrix completion (ASD) of a planted
 * low-rank matrix (relative error against it). With FILE it loads the matrix and
 * reports on it (demo_file.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "demo.h"

/* Default sizes, users:items 27:1 as Netflix's 480,189 x 17,770. On the GPU a fifth of
 * Netflix (200 ratings per user on average, Netflix's 209); on the CPU small enough that
 * each step takes a few seconds on two cores, with 100 ratings per user (at 60 the users
 * with few ratings keep ALS and SGD 10-20 % above the planted model's RMSE). */
#define CUDA_USERS    96038
#define CUDA_ITEMS    3554
#define CUDA_PER_USER 200.0
#define CPU_USERS     16200
#define CPU_ITEMS     600
#define CPU_PER_USER  100.0

static void demo_help(void)
{
    printf("usage: mfact demo [--steps LIST] [--scale F] [--shape USERS,ITEMS,DENSITY] [options]\n"
           "       mfact demo FILE [options]\n\n"
           "Without FILE: runs mfact's algorithms on generated data and prints what they get,\n"
           "the steps (--steps, comma-separated, default all) being\n"
           "  als    ALS-WR (mf_als_run) and\n"
           "  sgd    Hogwild SGD (mf_sgd_hogwild_run) on a planted low-rank ratings matrix\n"
           "         (mean 0 + rank-8 product + N(0, 0.5^2) noise) with a Netflix-shaped\n"
           "         pattern (27 users per item, log-normal item popularity and user activity),\n"
           "         10%% of the ratings held out, fitted at rank 16 (32 on a GPU): test RMSE\n"
           "         next to the planted model's own;\n"
           "  bmf    Boolean matrix factorization (mf_bmf_run, Asso start) of a planted\n"
           "         rank-12 Boolean matrix with 0.1%% of its entries flipped: F1 of the\n"
           "         result against the noiseless planted matrix;\n"
           "  sddmm  the sampled dense-dense product (mf_sddmm) on the ratings' pattern: median\n"
           "         time and GFLOP/s (2 k nnz / t);\n"
           "  complete  matrix completion (mf_asd_run, Scaled ASD) of a planted rank-5\n"
           "         5000 x 4000 matrix (rank 10, 30000 x 25000 on a GPU) with N(0, 1)\n"
           "         factors, 5%% (1%%) of its entries observed: relative error of the\n"
           "         completion against the planted matrix (on a million random entries).\n"
           "Sizes follow the backend: %d x %d with %.0f ratings per user on average on a GPU\n"
           "(a fifth of Netflix), %d x %d with %.0f on the CPU. --scale F multiplies the users\n"
           "and the items (F times the ratings, while a user's stay below the items), the\n"
           "Boolean matrix's entries and the completed matrix's; --shape sets the ratings\n"
           "matrix instead (DENSITY: the share of rated entries). The same --seed gives the\n"
           "same data.\n\n"
           "With FILE (MatrixMarket, triplets, .in pairs, .bin binary triplets): loads it and\n"
           "reports its shape and statistics. A repeated entry in FILE keeps its last value, as\n"
           "the fits read it (--duplicates sum|error for the others).\n\n%s",
           CUDA_USERS, CUDA_ITEMS, CUDA_PER_USER, CPU_USERS, CPU_ITEMS, CPU_PER_USER,
           cli_common_help());
}

static int parse_steps(const char *list, unsigned *steps)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"als", DEMO_ALS},     {"sgd", DEMO_SGD},           {"bmf", DEMO_BMF},
                 {"sddmm", DEMO_SDDMM}, {"complete", DEMO_COMPLETE}, {"all", DEMO_ALL}};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *steps = 0;
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next)
            *next++ = '\0';
        size_t i = 0;
        while (i < sizeof names / sizeof *names && strcmp(tok, names[i].name) != 0)
            i++;
        if (i == sizeof names / sizeof *names) {
            cli_error("demo",
                      "--steps takes als, sgd, bmf, sddmm, complete or all (comma-separated), "
                      "not '%s'",
                      tok);
            return -1;
        }
        *steps |= names[i].bit;
    }
    return 0;
}

static int parse(int argc, char **argv, demo_args *a)
{
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    a->scale = 1.0;
    a->steps = DEMO_ALL;
    bool generation_flag = false;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_parse("demo", argc, argv, &i, &a->common);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--shape") && val) {
            if (!cli_parse_shape("demo", argv[++i], &a->rows, &a->cols, &a->density))
                return -1;
            a->shape = generation_flag = true;
        } else if (!strcmp(opt, "--scale") && val) {
            if (!cli_parse_double(argv[++i], &a->scale) || !(a->scale > 0) || a->scale > 1e6) {
                cli_error("demo", "--scale takes a number > 0");
                return -1;
            }
            generation_flag = true;
        } else if (!strcmp(opt, "--steps") && val) {
            if (parse_steps(argv[++i], &a->steps) != 0)
                return -1;
            generation_flag = true;
        } else if (opt[0] == '-') {
            cli_error("demo", "unknown option '%s' (or it lacks its value)", opt);
            return -1;
        } else if (a->file) {
            cli_error("demo", "one FILE at most");
            return -1;
        } else
            a->file = opt;
    }
    if (a->file && generation_flag) {
        cli_error("demo", "--steps, --scale and --shape are for generated data, not FILE");
        return -1;
    }
    return 0;
}

/* The ratings' sizes: --shape, else the backend's default times --scale. */
static void ratings_size(const demo_args *a, mf_ctx *ctx, int32_t *users, int32_t *items,
                         double *per_user)
{
    if (a->shape) {
        *users = (int32_t)a->rows, *items = (int32_t)a->cols;
        *per_user = a->density * (double)a->cols;
        return;
    }
    bool cuda = mf_ctx_backend(ctx) == MF_BACKEND_CUDA;
    double u = (cuda ? CUDA_USERS : CPU_USERS) * a->scale;
    double i = (cuda ? CUDA_ITEMS : CPU_ITEMS) * a->scale;
    *users = (int32_t)fmax(1.0, fmin(round(u), (double)INT32_MAX));
    *items = (int32_t)fmax(1.0, fmin(round(i), (double)INT32_MAX));
    *per_user = cuda ? CUDA_PER_USER : CPU_PER_USER;
}

static int run_ratings(mf_ctx *ctx, const demo_args *a, cli_out *out)
{
    int32_t users, items;
    double per_user;
    ratings_size(a, ctx, &users, &items, &per_user);
    demo_ratings r;
    int rc = demo_ratings_make(ctx, a->common.seed, users, items, per_user, &r);
    if (rc == 0) {
        int64_t ntrain, ntest;
        mf_sparse_shape(r.train, NULL, NULL, &ntrain);
        mf_sparse_shape(r.test, NULL, NULL, &ntest);
        cli_out_int(out, "users", users);
        cli_out_int(out, "items", items);
        cli_out_int(out, "train ratings", ntrain);
        cli_out_int(out, "test ratings", ntest);
        cli_out_num(out, "density", (double)(ntrain + ntest) / ((double)users * items));
        cli_out_int(out, "planted rank", r.rank);
        cli_out_num(out, "noise sigma", r.sigma);
        cli_out_num(out, "planted test RMSE", r.planted_rmse);
        cli_out_num(out, "generate seconds", r.seconds);
    }
    if (rc == 0 && (a->steps & DEMO_ALS))
        rc = demo_als(ctx, &r, out);
    if (rc == 0 && (a->steps & DEMO_SGD))
        rc = demo_sgd(ctx, &r, out);
    if (rc == 0 && (a->steps & DEMO_SDDMM))
        rc = demo_sddmm(ctx, &r, out);
    demo_ratings_free(&r);
    return rc;
}

static int run_generated(mf_ctx *ctx, const demo_args *a)
{
    mf_device_info d = {.struct_size = sizeof d};
    mf_ctx_device_info(ctx, &d);
    bool cuda = mf_ctx_backend(ctx) == MF_BACKEND_CUDA;
    cli_out out;
    cli_out_begin(&out, a->common.json);
    cli_out_str(&out, "backend", cuda ? "cuda" : "cpu");
    if (!cuda && cli_cpu_reason()[0])
        cli_out_str(&out, "why not cuda", cli_cpu_reason());
    cli_out_str(&out, "device", d.name);
    if (!cuda)
        cli_out_int(&out, "cpu threads", d.cpu_threads);
    double t0 = cli_seconds();
    int rc = 0;
    if (a->steps & (DEMO_ALS | DEMO_SGD | DEMO_SDDMM))
        rc = run_ratings(ctx, a, &out);
    if (rc == 0 && (a->steps & DEMO_BMF))
        rc = demo_bmf(ctx, a->common.seed, a->scale, &out);
    if (rc == 0 && (a->steps & DEMO_COMPLETE))
        rc = demo_complete(ctx, a->common.seed, a->scale, &out);
    if (rc == 0)
        cli_out_num(&out, "total seconds", cli_seconds() - t0);
    cli_out_end(&out);
    return rc == 0 ? CLI_OK : CLI_FAILED;
}

int cmd_demo(int argc, char **argv)
{
    demo_args a;
    if (parse(argc, argv, &a) < 0)
        return CLI_USAGE;
    if (a.common.help) {
        demo_help();
        return CLI_OK;
    }
    mf_ctx *ctx = cli_make_ctx("demo", &a.common);
    if (!ctx)
        return CLI_FAILED;
    int rc = a.file ? demo_file(ctx, &a) : run_generated(ctx, &a);
    mf_ctx_destroy(ctx);
    return rc;
}
