/* The one option parser (options.h): every command's argv is read here, by its table. */
#include "options.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The value of word `w` (of length len) in opt's choices, or false. */
static bool choice_value(const cli_opt *o, const char *w, int *out)
{
    const char *s = o->choices;
    for (int k = 0; s; k++) {
        const char *bar = strchr(s, '|');
        const size_t n = bar ? (size_t)(bar - s) : strlen(s);
        if (strlen(w) == n && !strncmp(s, w, n)) {
            *out = o->values ? o->values[k] : k;
            return true;
        }
        s = bar ? bar + 1 : NULL;
    }
    return false;
}

/* "a, b or c" from "a|b|c". */
static void choice_words(const char *choices, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (const char *s = choices; *s && n + 8 < cap; s++) {
        if (*s != '|') {
            buf[n++] = *s;
            continue;
        }
        const char *sep = strchr(s + 1, '|') ? ", " : " or ";
        n += (size_t)snprintf(buf + n, cap - n, "%s", sep);
    }
    buf[n < cap ? n : cap - 1] = '\0';
}

static int take_value(const char *cmd, const cli_opt *o, const char *v)
{
    long long n;
    double x;
    int c;
    char words[256];
    switch (o->kind) {
    case CLI_INT:
        if (cli_parse_ll(v, &n) && (double)n >= o->lo && (double)n <= o->hi) {
            *(long long *)o->dest = n;
            return 0;
        }
        if (o->hi >= 1e18)
            cli_error(cmd, "%s takes an integer >= %.0f, not '%s'", o->name, o->lo, v);
        else
            cli_error(cmd, "%s takes an integer from %.0f to %.0f, not '%s'", o->name, o->lo, o->hi,
                      v);
        return -1;
    case CLI_DOUBLE:
        if (cli_parse_double(v, &x) && ((o->open & CLI_ABOVE) ? x > o->lo : x >= o->lo) &&
            ((o->open & CLI_BELOW) ? x < o->hi : x <= o->hi)) {
            *(double *)o->dest = x;
            return 0;
        }
        if (isinf(o->hi))
            cli_error(cmd, "%s takes a finite number %s %g, not '%s'", o->name,
                      (o->open & CLI_ABOVE) ? ">" : ">=", o->lo, v);
        else
            cli_error(cmd, "%s takes a number %s %g and %s %g, not '%s'", o->name,
                      (o->open & CLI_ABOVE) ? ">" : ">=", o->lo,
                      (o->open & CLI_BELOW) ? "<" : "<=", o->hi, v);
        return -1;
    case CLI_STRING: *(const char **)o->dest = v; return 0;
    case CLI_CHOICE:
        if (choice_value(o, v, &c)) {
            *(int *)o->dest = c;
            return 0;
        }
        choice_words(o->choices, words, sizeof words);
        cli_error(cmd, "%s takes %s, not '%s'", o->name, words, v);
        return -1;
    case CLI_CALL: return o->fn(cmd, o->name, v, o->dest) ? 0 : -1;
    default: /* the flags take no value: not reached */ return -1;
    }
}

static const cli_opt *find(const cli_spec *s, const char *name, size_t len)
{
    for (int g = 0; g < s->n_groups; g++)
        for (int k = 0; k < s->groups[g].n; k++) {
            const cli_opt *o = &s->groups[g].opts[k];
            if (strlen(o->name) == len && !strncmp(o->name, name, len))
                return o;
        }
    return NULL;
}

int cli_parse(const cli_spec *s, int argc, char **argv)
{
    int files = 0;
    bool ended = false;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        if (!ended && !strcmp(w, "--")) {
            ended = true;
            continue;
        }
        if (ended || w[0] != '-') {
            if (files == s->max_files) {
                cli_error(s->cmd, "%s ('%s')", s->too_many, w);
                return -1;
            }
            s->files[files++] = w;
            continue;
        }
        if (!strcmp(w, "-h"))
            w = "--help";
        const char *eq = !strncmp(w, "--", 2) ? strchr(w, '=') : NULL;
        const size_t len = eq ? (size_t)(eq - w) : strlen(w);
        const cli_opt *o = find(s, w, len);
        if (!o) {
            cli_error(s->cmd, "unknown option '%.*s' (mfact %s --help lists them)", (int)len, w,
                      s->cmd);
            return -1;
        }
        if (o->kind == CLI_FLAG || o->kind == CLI_SET || o->kind == CLI_OR) {
            if (eq) {
                cli_error(s->cmd, "%s takes no value", o->name);
                return -1;
            }
            if (o->kind == CLI_FLAG)
                *(bool *)o->dest = true;
            else if (o->kind == CLI_SET)
                *(int *)o->dest = o->set;
            else
                *(unsigned *)o->dest |= (unsigned)o->set;
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            cli_error(s->cmd, "%s needs a value", o->name);
            return -1;
        }
        if (take_value(s->cmd, o, v) != 0)
            return -1;
    }
    return 0;
}

int cli_parse_command(const cli_spec *s, cli_common *c, int argc, char **argv)
{
    cli_opt com[CLI_COMMON_OPTS];
    cli_group g[4];
    const int n = s->n_groups < 3 ? s->n_groups : 3;
    memcpy(g, s->groups, (size_t)n * sizeof *g);
    g[n] = cli_common_group(c, com);
    cli_spec all = *s;
    all.groups = g, all.n_groups = n + 1;
    if (cli_parse(&all, argc, argv) < 0)
        return -1;
    if (!c->help)
        return 0;
    cli_print_help(&all);
    return 1;
}

/* text from column `col` on, wrapped at 92 columns with continuation lines at `indent`. */
static void wrap(const char *text, int col, int indent)
{
    const int width = 92;
    while (*text) {
        size_t word = strcspn(text, " \n");
        if (col > indent && col + 1 + (int)word > width) {
            printf("\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)word, text);
        col += (int)word;
        text += word;
        if (*text == '\n') {
            printf("\n%*s", indent, "");
            col = indent;
        }
        while (*text == ' ' || *text == '\n')
            text++;
    }
    putchar('\n');
}

/* The default of o as help says it, into buf ("" for none). */
static void default_text(const cli_opt *o, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (o->dflt) {
        snprintf(buf, cap, "%s", o->dflt);
        return;
    }
    if (o->kind == CLI_INT)
        snprintf(buf, cap, "%lld", *(const long long *)o->dest);
    else if (o->kind == CLI_DOUBLE)
        snprintf(buf, cap, "%g", *(const double *)o->dest);
    else if (o->kind == CLI_STRING && *(const char *const *)o->dest)
        snprintf(buf, cap, "%s", *(const char *const *)o->dest);
    else if (o->kind == CLI_CHOICE) {
        const char *s = o->choices;
        for (int k = 0; s; k++) {
            const char *bar = strchr(s, '|');
            if ((o->values ? o->values[k] : k) == *(const int *)o->dest) {
                snprintf(buf, cap, "%.*s", bar ? (int)(bar - s) : (int)strlen(s), s);
                return;
            }
            s = bar ? bar + 1 : NULL;
        }
    }
}

void cli_print_help(const cli_spec *s)
{
    /* One write at exit: `mfact CMD --help | grep -q X` may close the pipe as soon as it
     * matches, and a later write would kill the tool with SIGPIPE. */
    static char buf[1 << 16];
    setvbuf(stdout, buf, _IOFBF, sizeof buf);
    printf("usage: mfact %s\n\n", s->usage);
    wrap(s->about, 0, 0);
    for (int g = 0; g < s->n_groups; g++) {
        printf("\n%s:\n", s->groups[g].title);
        for (int k = 0; k < s->groups[g].n; k++) {
            const cli_opt *o = &s->groups[g].opts[k];
            char head[128], dflt[128], text[1024];
            const char *meta = o->kind == CLI_CHOICE ? o->choices : o->meta;
            int n =
                snprintf(head, sizeof head, "  %s%s%s", o->name, meta ? " " : "", meta ? meta : "");
            printf("%s", head);
            if (n > 27) {
                printf("\n%*s", 28, "");
                n = 28;
            } else {
                printf("%*s", 28 - n, "");
                n = 28;
            }
            default_text(o, dflt, sizeof dflt);
            snprintf(text, sizeof text, "%s%s%s%s", o->help, dflt[0] ? " (default " : "", dflt,
                     dflt[0] ? ")" : "");
            wrap(text, n, 28);
        }
    }
}

/* --user-col, --item-col, --rating-col: a header name, or a position from 1 to 256. */
static bool column(const char *cmd, const char *name, const char *v, void *dest)
{
    long long n;
    if (!*v ||
        (strspn(v, "0123456789") == strlen(v) && (!cli_parse_ll(v, &n) || n < 1 || n > 256))) {
        cli_error(cmd, "%s takes a column's name or its position from 1 to 256, not '%s'", name, v);
        return false;
    }
    *(const char **)dest = v;
    return true;
}

cli_group cli_common_group(cli_common *c, cli_opt out[CLI_COMMON_OPTS])
{
    static const int bases[] = {-1, 0, 1};
    const cli_opt t[] = {
        CLI_OPT_CHOICE("--backend", &c->backend, "auto|cpu|cuda", NULL,
                       "where to compute (auto: CUDA when usable)"),
        CLI_OPT_INT("--device", &c->device, 0, 1 << 20, "N", "CUDA device ordinal"),
        CLI_OPT_INT("--seed", &c->seed, 0, 9.3e18, "S", "seed of every random choice"),
        CLI_OPT_INT("--threads", &c->threads, 0, 1 << 20, "N", "CPU threads (0: all)"),
        CLI_OPT_FLAG("--json", &c->json, "print the results as one JSON object"),
        CLI_OPT_CHOICE("--format", &c->format, "auto|mtx|triplets|pairs|bin", NULL,
                       "how FILE is read (auto: by its banner, suffix and first line; see "
                       "docs/formats.md)"),
        CLI_OPT_CHOICE("--index-base", &c->index_base, "auto|0|1", bases,
                       "the index base of FILE (auto: the format's convention; triplets 0 if any "
                       "index is 0, else 1); a --test file takes FILE's"),
        CLI_OPT_CHOICE("--duplicates", &c->duplicates, "last|sum|error", NULL,
                       "a repeated (row, col) entry of FILE: the last one kept (ratings: als, sgd, "
                       "complete, demo), the values summed (interactions: ials, recommend; bmf, "
                       "sddmm) or an error naming both lines"),
        CLI_OPT_SET("--sum-duplicates", &c->duplicates, CLI_DUP_SUM, "--duplicates sum"),
        CLI_OPT_INT("--rows", &c->rows, 1, INT32_MAX, "N",
                    "FILE's rows, when it has more than its entries reach (0: from the file)"),
        CLI_OPT_INT("--cols", &c->cols, 1, INT32_MAX, "N",
                    "FILE's columns, likewise (0: from the file)"),
        CLI_OPT_CALL("--user-col", &c->user_col, column, "C",
                     "ids as users have them: FILE's users are column C, a header name (userId) "
                     "or a position from 1; integer or string ids map to dense indices, and "
                     "outputs (lists, factors, models) speak FILE's ids; a --test file takes "
                     "FILE's ids"),
        CLI_OPT_CALL("--item-col", &c->item_col, column, "C", "FILE's items, likewise"),
        CLI_OPT_CALL("--rating-col", &c->rating_col, column, "C", "FILE's ratings, likewise"),
        CLI_OPT_FLAG("--ids", &c->ids, "the same with columns 1, 2 (and 3: the rating)"),
        CLI_OPT_FLAG("--split-input", &c->split_input,
                     "started by a launcher (mpirun, torchrun): each of N ranks "
                     "keeps every N-th entry of FILE and the fit gathers what "
                     "each rank solves, so no rank holds all of FILE (als, sgd, "
                     "complete, whose test set is split the same way; ials, "
                     "without a test set)"),
        CLI_OPT_CHOICE("--log", &c->log_level, "off|error|warning|info|debug", NULL,
                       "the library's messages to stderr from this level up (info: each phase "
                       "of an ALS fit and its seconds, a plan's choice)"),
        CLI_OPT_FLAG("--help", &c->help, "this text (also -h)"),
    };
    _Static_assert(CLI_COUNT(t) <= CLI_COMMON_OPTS, "CLI_COMMON_OPTS is too small");
    memcpy(out, t, sizeof t);
    return (cli_group){"common options", out, CLI_COUNT(t)};
}
