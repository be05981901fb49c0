/* mfact: one subcommand per job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "launched.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", cmd_info, "version, build options, backend, device and memory"},
    {"demo", cmd_demo,
     "run ALS, SGD, BMF, SDDMM and completion on generated data, or report on FILE"},
    {"als", cmd_als, "factorize explicit ratings by ALS-WR (mf_als_run)"},
    {"bmf", cmd_bmf, "Boolean matrix factorization of a 0/1 matrix (mf_bmf_run)"},
    {"complete", cmd_complete, "complete a low-rank matrix from some of its entries (mf_asd_run)"},
    {"sgd", cmd_sgd, "factorize explicit ratings by lock-free SGD (mf_sgd_hogwild_run)"},
    {"ials", cmd_ials, "implicit-feedback ALS on interactions, with ranking metrics (mf_ials_run)"},
    {"recommend", cmd_recommend,
     "train implicit ALS (or load a model: --model) and write every user's top-N items"},
    {"predict", cmd_predict, "predict ratings of (user, item) pairs from a saved model"},
    {"sddmm", cmd_sddmm, "time the sampled dense-dense product (mf_sddmm) on a matrix"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: mfact COMMAND [options]   (mfact COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
}

/* The options as every command reads them: "--name=value" becomes "--name" "value", and
 * after "--" (dropped) a word that starts with '-' is a file, "./-word" (the same file),
 * not an option. Returns the new argc; the caller frees *out and *store (the new words). */
static int normalize_args(int argc, char **argv, char ***out, char **store)
{
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += strlen(argv[i]) + 3;
    char **v = malloc(((size_t)argc * 2 + 1) * sizeof *v);
    char *s = malloc(bytes + 1);
    if (!v || !s) {
        free(v), free(s);
        return -1;
    }
    *store = s;
    int n = 0, ended = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (i >= 2 && !ended && strcmp(a, "--") == 0) {
            ended = 1;
            continue;
        }
        if (i >= 2 && ended && a[0] == '-') {
            v[n++] = s, s += sprintf(s, "./%s", a) + 1;
        } else if (i >= 2 && !ended && a[0] == '-' && a[1] == '-' && eq && eq > a + 2) {
            v[n++] = s, s += sprintf(s, "%.*s", (int)(eq - a), a) + 1;
            v[n++] = s, s += sprintf(s, "%s", eq + 1) + 1;
        } else {
            v[n++] = (char *)a;
        }
    }
    v[n] = NULL;
    *out = v;
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("mfact %s\n", mf_version_string());
        return CLI_OK;
    }
    char **args = NULL, *store = NULL;
    const int n = normalize_args(argc, argv, &args, &store);
    if (n < 0) {
        fprintf(stderr, "mfact: out of memory\n");
        return CLI_FAILED;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(args[1], commands[i].name) == 0) {
            const int rc = cli_launched_finish(commands[i].run(n - 1, args + 1));
            free(args), free(store);
            return rc;
        }
    free(args), free(store);
    fprintf(stderr, "mfact: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
