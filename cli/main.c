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
    /* Every command reads its options with cli_parse (options.c): --name value,
     * --name=value, and "--" ending the options. */
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return cli_launched_finish(commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "mfact: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
