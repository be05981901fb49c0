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
#include "options.h"

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

/* --steps's and --shape's values (cli_opt's CLI_CALL). */
static bool steps(const char *cmd, const char *name, const char *v, void *dest)
{
    (void)cmd, (void)name;
    return parse_steps(v, dest) == 0;
}

static bool shape(const char *cmd, const char *name, const char *v, void *dest)
{
    demo_args *a = dest;
    (void)name;
    return a->shape = cli_parse_shape(cmd, v, &a->rows, &a->cols, &a->density);
}

/* 0 parsed, 1 help printed, -1 a usage error (printed). */
static int parse(int argc, char **argv, demo_args *a)
{
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    double scale = 0; /* 0: not given */
    char about[2048];
    snprintf(about, sizeof about,
             "Without FILE: runs mfact's algorithms on generated data and prints what they get, "
             "the steps (--steps, comma-separated, default all) being\n"
             "als: ALS-WR (mf_als_run) and sgd: Hogwild SGD (mf_sgd_hogwild_run) on a planted "
             "low-rank ratings matrix (mean 0 + rank-8 product + N(0, 0.5^2) noise) with a "
             "Netflix-shaped pattern (27 users per item, log-normal item popularity and user "
             "activity), 10%% of the ratings held out, fitted at rank 16 (32 on a GPU): test "
             "RMSE next to the planted model's own;\n"
             "bmf: Boolean matrix factorization (mf_bmf_run, Asso start) of a planted rank-12 "
             "Boolean matrix with 0.1%% of its entries flipped: F1 of the result against the "
             "noiseless planted matrix;\n"
             "sddmm: the sampled dense-dense product (mf_sddmm) on the ratings' pattern: median "
             "time and GFLOP/s (2 k nnz / t);\n"
             "complete: matrix completion (mf_asd_run, Scaled ASD) of a planted rank-5 5000 x "
             "4000 matrix (rank 10, 30000 x 25000 on a GPU) with N(0, 1) factors, 5%% (1%%) of "
             "its entries observed: relative error of the completion against the planted matrix "
             "(on a million random entries).\n"
             "Sizes follow the backend: %d x %d with %.0f ratings per user on average on a GPU "
             "(a fifth of Netflix), %d x %d with %.0f on the CPU. --scale F multiplies the users "
             "and the items (F times the ratings, while a user's stay below the items), the "
             "Boolean matrix's entries and the completed matrix's; --shape sets the ratings "
             "matrix instead (DENSITY: the share of rated entries). The same --seed gives the "
             "same data.\n"
             "With FILE (MatrixMarket, triplets, .in pairs, .bin binary triplets): loads it and "
             "reports its shape and statistics. A repeated entry in FILE keeps its last value, "
             "as the fits read it (--duplicates sum|error for the others).",
             CUDA_USERS, CUDA_ITEMS, CUDA_PER_USER, CPU_USERS, CPU_ITEMS, CPU_PER_USER);
    const cli_opt own[] = {
        {.name = "--steps",
         .kind = CLI_CALL,
         .dest = &a->steps,
         .fn = steps,
         .meta = "LIST",
         .help = "als, sgd, bmf, sddmm, complete or all, comma-separated",
         .dflt = "all"},
        {.name = "--scale",
         .kind = CLI_DOUBLE,
         .dest = &scale,
         .lo = 0,
         .hi = 1e6,
         .open = CLI_ABOVE,
         .meta = "F",
         .help = "multiplies the generated sizes",
         .dflt = "1"},
        CLI_OPT_CALL("--shape", a, shape, "USERS,ITEMS,DENSITY",
                     "the generated ratings matrix's shape instead"),
    };
    const cli_group g = {"options", own, CLI_COUNT(own)};
    const cli_spec s = {"demo", "demo [options]\n       mfact demo FILE [options]",
                        about,  &g,
                        1,      &a->file,
                        1,      "one FILE at most"};
    const int r = cli_parse_command(&s, &a->common, argc, argv);
    if (r != 0)
        return r;
    const bool generation_flag = a->shape || scale > 0 || a->steps;
    a->scale = scale > 0 ? scale : 1.0;
    a->steps = a->steps ? a->steps : DEMO_ALL;
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
    const int parsed = parse(argc, argv, &a);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
    mf_ctx *ctx = cli_make_ctx("demo", &a.common);
    if (!ctx)
        return CLI_FAILED;
    int rc = a.file ? demo_file(ctx, &a) : run_generated(ctx, &a);
    mf_ctx_destroy(ctx);
    return rc;
}
