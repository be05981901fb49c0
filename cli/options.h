/* One option parser for every subcommand: each command describes its options in a table
 * (name, kind, destination, bounds, help), the parser reads argv by it and `--help` is
 * printed from it, so an option cannot be parsed without being documented, or the reverse. */
#ifndef MFACT_CLI_OPTIONS_H
#define MFACT_CLI_OPTIONS_H

#include <stdbool.h>

#include "cli.h"

typedef enum cli_kind {
    CLI_FLAG,   /* no value: *(bool *)dest = true                                   */
    CLI_SET,    /* no value: *(int *)dest = set                                     */
    CLI_OR,     /* no value: *(unsigned *)dest |= set                               */
    CLI_INT,    /* *(long long *)dest, a whole number in [lo, hi]                    */
    CLI_DOUBLE, /* *(double *)dest, finite, in [lo, hi] (open ends: CLI_ABOVE/BELOW) */
    CLI_STRING, /* *(const char **)dest = the value                                 */
    CLI_CHOICE, /* *(int *)dest = the value of one of the words of `choices`         */
    CLI_CALL    /* fn(cmd, name, value, dest) checks and stores the value            */
} cli_kind;

enum { CLI_ABOVE = 1, CLI_BELOW = 2 }; /* CLI_DOUBLE: lo, hi themselves excluded */

typedef bool (*cli_value_fn)(const char *cmd, const char *name, const char *value, void *dest);

typedef struct cli_opt {
    const char *name; /* "--rank" */
    cli_kind kind;
    void *dest;
    const char *meta; /* the value's name in help ("K", "FILE"); CHOICE: its words */
    const char *help;
    /* The default as help says it: NULL prints the destination's value as the table is
     * made (the command's defaults are set first), "" prints none. */
    const char *dflt;
    double lo, hi;
    int open;            /* CLI_DOUBLE: CLI_ABOVE | CLI_BELOW */
    const char *choices; /* CLI_CHOICE: "auto|cpu|cuda" */
    const int *values;   /* CLI_CHOICE: each word's value (NULL: its position) */
    int set;             /* CLI_SET, CLI_OR */
    cli_value_fn fn;     /* CLI_CALL */
} cli_opt;

/* Table rows. */
#define CLI_OPT_FLAG(nm, d, hp)                                                                    \
    {                                                                                              \
        .name = nm, .kind = CLI_FLAG, .dest = d, .help = hp, .dflt = ""                            \
    }
#define CLI_OPT_SET(nm, d, v, hp)                                                                  \
    {                                                                                              \
        .name = nm, .kind = CLI_SET, .dest = d, .set = v, .help = hp, .dflt = ""                   \
    }
#define CLI_OPT_OR(nm, d, v, hp)                                                                   \
    {                                                                                              \
        .name = nm, .kind = CLI_OR, .dest = d, .set = v, .help = hp, .dflt = ""                    \
    }
#define CLI_OPT_INT(nm, d, l, h, m, hp)                                                            \
    {                                                                                              \
        .name = nm, .kind = CLI_INT, .dest = d, .lo = l, .hi = h, .meta = m, .help = hp            \
    }
#define CLI_OPT_REAL(nm, d, l, h, o, m, hp)                                                        \
    {                                                                                              \
        .name = nm, .kind = CLI_DOUBLE, .dest = d, .lo = l, .hi = h, .open = o, .meta = m,         \
        .help = hp                                                                                 \
    }
#define CLI_OPT_STR(nm, d, m, hp)                                                                  \
    {                                                                                              \
        .name = nm, .kind = CLI_STRING, .dest = d, .meta = m, .help = hp                           \
    }
#define CLI_OPT_CHOICE(nm, d, ch, vals, hp)                                                        \
    {                                                                                              \
        .name = nm, .kind = CLI_CHOICE, .dest = d, .choices = ch, .values = vals, .help = hp       \
    }
#define CLI_OPT_CALL(nm, d, f, m, hp)                                                              \
    {                                                                                              \
        .name = nm, .kind = CLI_CALL, .dest = d, .fn = f, .meta = m, .help = hp, .dflt = ""        \
    }
#define CLI_COUNT(t) ((int)(sizeof(t) / sizeof *(t)))

/* A titled part of a command's options ("options", "model options", "common options"). */
typedef struct cli_group {
    const char *title;
    const cli_opt *opts;
    int n;
} cli_group;

/* The common options' table, shared by every command, into `out` (room for
 * CLI_COMMON_OPTS); returns its group. */
enum { CLI_COMMON_OPTS = 20 };
cli_group cli_common_group(cli_common *c, cli_opt out[CLI_COMMON_OPTS]);

/* The table of the options als and sgd share (cli_model_args) into `out`. */
enum { CLI_MODEL_OPTS = 12 };
cli_group cli_model_group(cli_model_args *m, const char *lambda_bias, cli_opt out[CLI_MODEL_OPTS]);

/* als and sgd, whole: their own options, the shared and the common ones, --help, the
 * outputs checked, then run on the ratings (cli_run_on_ratings). */
typedef struct cli_ratings_cmd {
    const char *cmd, *usage, *about;
    const cli_opt *own;
    int n_own;
    const char *lambda_bias; /* --lambda-bias's default as help says it */
    cli_ratings_run run;
} cli_ratings_cmd;
int cli_ratings_main(const cli_ratings_cmd *c, int argc, char **argv, cli_common *common,
                     const char **file, cli_model_args *m, double lambda, const void *args);

/* What a command takes. */
typedef struct cli_spec {
    const char *cmd;
    const char *usage; /* after "usage: mfact " (lines after the first indented by the caller) */
    const char *about; /* the description, printed before the options */
    const cli_group *groups;
    int n_groups;
    const char **files; /* the positional words, in order */
    int max_files;
    const char *too_many; /* the message when there are more (the word follows it) */
} cli_spec;

/* Read argv[1..argc) by spec: "--name value", "--name=value", "--" ending the options (a
 * later word is a file even when it starts with '-'). An unknown option, a missing or
 * refused value, a value given to a flag, or one word too many: the problem printed as
 * "mfact CMD: ..." and -1 (the caller exits CLI_USAGE). */
int cli_parse(const cli_spec *spec, int argc, char **argv);
/* cli_parse with the common options after the spec's groups (at most 3): 0 parsed, 1
 * --help given (printed: the caller exits CLI_OK), -1 a usage error (printed). */
int cli_parse_command(const cli_spec *spec, cli_common *c, int argc, char **argv);
/* `mfact CMD --help`, from the spec's tables, on stdout. */
void cli_print_help(const cli_spec *spec);

#endif
