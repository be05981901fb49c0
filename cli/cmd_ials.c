/* mfact ials and mfact recommend: implicit-feedback ALS (mf_ials_run) on an interactions file
 * (repeated pairs summed: play counts), the ranking metrics of a held-out part printed after
 * every iteration (mf_ranking_evaluate), and, for recommend, the top-N items of every user
 * written as text (mf_recommend, the training interactions left out). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gpus.h"
#include "launched.h"
#include "model_file.h"
#include "options.h"
#include "outputs.h"
#include "recommendations.h"

typedef struct ials_args {
    cli_common common;
    const char *cmd;
    const char *file, *test_file, *out_u, *out_v, *out_rec, *save_model;
    bool eval_each; /* --eval-each: the ranking metrics after every iteration, not the last */
    long long rank, iterations, cg_steps, top, gpus;
    double lambda, alpha, epsilon, test_fraction;
    int confidence, solver; /* mf_ials_confidence, mf_als_solver */
} ials_args;

static const char about[] =
    "Factorizes the interactions of FILE (users x items; repeated pairs are summed) by "
    "implicit-feedback ALS (Hu, Koren & Volinsky), confidence 1 + A r (linear) or 1 + A log(1 + "
    "r / E) (log). With --test FILE or a held-out fraction F of FILE (by a hash of the position "
    "and --seed), prints precision, MAP, NDCG (at --top N) and AUC after the last iteration, as "
    "implicit's ranking_metrics_at_k computes them. ials writes no recommendations (--output is "
    "recommend's). recommend writes each user's top N items, those of FILE left out, to "
    "--output FILE (default standard output) as 'user item score' lines, users and items as "
    "FILE names them (its ids, or its index base).\n"
    "mfact recommend --model MODEL [--users FILE] [--exclude FILE] [--top N] recommends from a "
    "saved model, without training: mfact recommend --model --help.";

static int bad(const ials_args *a, const char *what)
{
    cli_error(a->cmd, "%s", what);
    return -1;
}

/* 0 parsed, 1 help printed, -1 a usage error (printed). */
static int parse(int argc, char **argv, const char *cmd, ials_args *a)
{
    mf_ials_opts d;
    mf_ials_opts_init(&d);
    memset(a, 0, sizeof *a);
    cli_common_init(&a->common);
    a->common.duplicates = CLI_DUP_SUM; /* interactions: repeated pairs add up */
    a->cmd = cmd;
    a->rank = d.rank, a->iterations = d.iterations, a->cg_steps = d.cg_steps, a->top = 10;
    a->lambda = d.lambda, a->alpha = d.alpha, a->epsilon = d.epsilon;
    a->confidence = d.confidence, a->solver = d.solver;
    a->gpus = 1;
    const bool rec = !strcmp(cmd, "recommend");
    const cli_opt own[] = {
        CLI_OPT_INT("--rank", &a->rank, 1, 512, "K", "the factors' rank"),
        CLI_OPT_REAL("--lambda", &a->lambda, 0, INFINITY, 0, "L", "the penalty"),
        CLI_OPT_REAL("--alpha", &a->alpha, 0, INFINITY, 0, "A", "the confidence's scale"),
        /* in mf_ials_confidence's order */
        CLI_OPT_CHOICE("--confidence", &a->confidence, "linear|log", NULL,
                       "1 + A r (linear) or 1 + A log(1 + r / E) (log)"),
        CLI_OPT_REAL("--epsilon", &a->epsilon, 0, INFINITY, CLI_ABOVE, "E", "log's E"),
        CLI_OPT_INT("--iterations", &a->iterations, 1, 1000000, "N", "sweeps"),
        /* in mf_als_solver's order */
        CLI_OPT_CHOICE("--solver", &a->solver, "auto|exact|cg", NULL,
                       "each row's system solved exactly (Cholesky) or by --cg-steps "
                       "conjugate-gradient steps from the previous iteration (cg, which auto "
                       "takes)"),
        CLI_OPT_INT("--cg-steps", &a->cg_steps, 1, 64, "S", "CG steps per row"),
        CLI_OPT_STR("--test", &a->test_file, "FILE", "measure the ranking metrics on FILE"),
        CLI_OPT_REAL("--test-fraction", &a->test_fraction, 0, 1, CLI_ABOVE | CLI_BELOW, "F",
                     "measure them on a held-out fraction F of FILE (0: none)"),
        CLI_OPT_FLAG("--eval-each", &a->eval_each,
                     "the metrics after every iteration, which can cost more than the training "
                     "(the output gives the evaluation's seconds)"),
        CLI_OPT_INT("--top", &a->top, 1, 100000, "N", "the metrics' (and recommend's) list length"),
        CLI_OPT_STR("--output", &a->out_rec, "FILE",
                    rec ? "the recommendations (default standard output)"
                        : "recommend's (ials writes no recommendations)"),
        CLI_OPT_STR("--output-u", &a->out_u, "FILE", "write U as text, one row per line"),
        CLI_OPT_STR("--output-v", &a->out_v, "FILE", "write V as text, one row per line"),
        CLI_OPT_STR("--save-model", &a->save_model, "FILE",
                    "write the model file that mfact recommend --model reads"),
        CLI_OPT_INT("--gpus", &a->gpus, 1, CLI_MAX_GPUS, "N",
                    "one fit over N GPUs (--device and the N - 1 after it), each solving its "
                    "share of the rows; the factors are those of one GPU"),
    };
    const cli_group g = {"options", own, CLI_COUNT(own)};
    const cli_spec s = {cmd,   rec ? "recommend FILE [options]" : "ials FILE [options]",
                        about, &g,
                        1,     &a->file,
                        1,     "one FILE at most"};
    const int r = cli_parse_command(&s, &a->common, argc, argv);
    if (r != 0)
        return r;
    if (!a->file)
        return bad(a, "an interactions FILE is required");
    if (a->test_file && a->test_fraction > 0)
        return bad(a, "--test and --test-fraction exclude each other");
    if (a->out_rec && !rec) /* it had been ignored */
        return bad(a, "--output writes recommendations, which is mfact recommend's (ials "
                      "writes its factors with --output-u/--output-v or --save-model)");
    return 0;
}

/* One rank's mf_ials_run (cli_gpus_call): each rank continues from its own copy of the
 * factors (every rank returns the same ones). */
typedef struct ials_call {
    mf_ials_opts o;
    mf_ials_report rep; /* rank 0's */
} ials_call;

static mf_status ials_rank(const cli_rank *r, void *user)
{
    ials_call *c = user;
    mf_ials_report rep = {.struct_size = sizeof rep};
    mf_status st = mf_ials_run(r->ctx, r->train, &c->o, r->U, r->V, MF_MEMORY_HOST, &rep);
    if (r->rank == 0)
        c->rep = rep;
    return st;
}

static int run(mf_ctx *ctx, const void *args, mf_sparse *train, mf_sparse *test)
{
    const ials_args *a = args;
    const bool to_stdout = !strcmp(a->cmd, "recommend") && !a->out_rec;
    FILE *log = stderr; /* progress on stderr, as every command's: stdout is the results' */
    /* Split input (--split-input under a launcher): the fit gathers what each rank solves,
     * but the ranking and the lists leave out each user's training items, all of which no
     * rank holds. */
    if (mf_sparse_is_part(train) == 1 && cli_launched_size() > 1 &&
        (test || !strcmp(a->cmd, "recommend"))) {
        cli_error(a->cmd,
                  "--split-input fits the factors alone (--output-u, --output-v, "
                  "--save-model): %s leave out every training interaction of a user, "
                  "which no rank holds; measure or recommend from the saved model",
                  test ? "the ranking metrics" : "the recommendations");
        return CLI_FAILED;
    }
    int32_t users, items;
    mf_sparse_shape(train, &users, &items, NULL);
    const int k = (int)a->rank;
    float *U = malloc((size_t)users * k * sizeof *U), *V = malloc((size_t)items * k * sizeof *V);
    if (!U || !V) {
        free(U);
        free(V);
        cli_error(a->cmd, "out of host memory for the factors");
        return CLI_FAILED;
    }
    mf_ials_opts o;
    mf_ials_opts_init(&o);
    o.rank = k, o.lambda = (float)a->lambda, o.alpha = (float)a->alpha;
    o.epsilon = (float)a->epsilon, o.confidence = a->confidence;
    o.solver = a->solver, o.cg_steps = (int)a->cg_steps;
    mf_model m;
    mf_model_init(&m);
    m.users = users, m.items = items, m.k = k, m.U = U, m.ldu = k, m.V = V, m.ldv = k;
    /* One iteration a call, so that the ranking can be measured in between: each call
     * continues from the factors of the last (CG keeps nothing else between half-steps). */
    o.iterations = 1;
    double seconds = 0.0, evaluating = 0.0;
    mf_ranking r = {.struct_size = sizeof r};
    cli_gpus g;
    int rc = cli_gpus_open(a->cmd, &a->common, ctx, (int)a->gpus, train, NULL, k, U, V, &g) != 0
                 ? CLI_FAILED
                 : CLI_OK;
    ials_call call = {o, {0}};
    for (long long it = 1; rc == CLI_OK && it <= a->iterations; it++) {
        if (cli_gpus_call(a->cmd, &g, ials_rank, &call) != MF_OK) {
            rc = CLI_FAILED;
            break;
        }
        call.o.init = MF_IALS_INIT_GIVEN;
        seconds += call.rep.iteration_seconds;
        if (!cli_quiet()) /* a launched rank other than 0 prints no progress */
            fprintf(log, "iteration %lld (%.3f s)", it, call.rep.iteration_seconds);
        /* The ranking of every user costs more than an iteration: after the last one only,
         * unless --eval-each asks, and its time is reported apart. */
        if (test && (a->eval_each || it == a->iterations)) {
            const double t0 = cli_seconds();
            if (mf_ranking_evaluate(ctx, &m, train, test, (int)a->top, &r) != MF_OK) {
                cli_error(a->cmd, "%s", mf_ctx_last_error(ctx));
                rc = CLI_FAILED;
                break;
            }
            evaluating += cli_seconds() - t0;
            if (!cli_quiet())
                fprintf(log, ": precision@%lld %.4f  MAP %.4f  NDCG %.4f  AUC %.4f", a->top,
                        r.precision, r.map, r.ndcg, r.auc);
        }
        if (!cli_quiet())
            fprintf(log, "\n");
    }
    cli_gpus_close(&g);
    const mf_ials_report rep = call.rep;
    if (rc == CLI_OK && (a->out_u || a->out_v))
        rc = cli_write_factors(a->cmd, a->out_u, a->out_v, U, V, train, k) ? CLI_FAILED : CLI_OK;
    char text[256];
    snprintf(text, sizeof text,
             "rank=%d lambda=%g alpha=%g confidence=%s epsilon=%g iterations=%lld", k, a->lambda,
             a->alpha, a->confidence == MF_IALS_CONFIDENCE_LOG ? "log" : "linear", a->epsilon,
             a->iterations);
    const cli_fit fitted = {"ials", text, train, k, k, U, V, NULL};
    if (rc == CLI_OK && cli_save_model(a->cmd, ctx, a->save_model, &fitted) != 0)
        rc = CLI_FAILED;
    /* rank 0 writes the lists: every rank holds the same model */
    if (rc == CLI_OK && !strcmp(a->cmd, "recommend") && cli_launched_rank() == 0) {
        /* Users and items as FILE names them: its ids, or its own index base. */
        const cli_names names = {cli_user_ids(), cli_item_ids(), cli_ratings_base(), NULL, 0};
        rc = cli_write_recommendations(a->cmd, ctx, a->out_rec, &m, NULL, 0, train, (int)a->top,
                                       &names);
    }
    if (rc == CLI_OK && !to_stdout) {
        cli_out out;
        cli_out_begin(&out, a->common.json);
        cli_out_ratings(&out, ctx, train, test, a->rank);
        cli_out_str(&out, "solver", rep.solver == MF_ALS_SOLVER_CG ? "cg" : "exact");
        cli_out_int(&out, "iterations", a->iterations);
        cli_out_num(&out, "seconds per iteration", seconds / (double)a->iterations);
        if (test) {
            char label[64];
            snprintf(label, sizeof label, "precision@%lld", a->top);
            cli_out_num(&out, label, r.precision);
            cli_out_num(&out, "MAP", r.map);
            cli_out_num(&out, "NDCG", r.ndcg);
            cli_out_num(&out, "AUC", r.auc);
            cli_out_num(&out, "evaluation seconds", evaluating);
        }
        cli_out_end(&out);
    }
    free(U);
    free(V);
    return rc;
}

static int main_of(const char *cmd, int argc, char **argv)
{
    ials_args a;
    const int parsed = parse(argc, argv, cmd, &a);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
    const char *const inputs[] = {a.file, a.test_file}, *const outputs[] = {a.out_u, a.out_v,
                                                                            a.out_rec,
                                                                            a.save_model};
    const int out_rc = cli_check_outputs(cmd, inputs, 2, outputs, 4);
    if (out_rc != CLI_OK)
        return out_rc;
    return cli_run_on_ratings(cmd, &a.common, a.file, a.test_file, a.test_fraction, run, &a);
}

int cmd_ials(int argc, char **argv)
{
    return main_of("ials", argc, argv);
}

int cmd_recommend(int argc, char **argv)
{
    /* --model (or --model=MODEL) among the options: from a model file, without training */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (!strncmp(argv[i], "--model", 7) && (!argv[i][7] || argv[i][7] == '='))
            return cmd_recommend_model(argc, argv);
    return main_of("recommend", argc, argv);
}
