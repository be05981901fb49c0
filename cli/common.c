#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_common_init(cli_common *c)
{
    memset(c, 0, sizeof *c);
    c->backend = MF_BACKEND_AUTO;
    c->index_base = -1;
    c->duplicates = -1;
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mfact %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

bool cli_parse_ll(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return false;
    *out = v;
    return true;
}

int cli_choice(const char *s, const char *const *names, int n)
{
    for (int c = 0; c < n; c++)
        if (!strcmp(s, names[c]))
            return c;
    return -1;
}

bool cli_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

const char *cli_common_help(void)
{
    return "common options:\n"
           "  --backend auto|cpu|cuda   where to compute (default auto: CUDA when usable)\n"
           "  --device N                CUDA device ordinal (default 0)\n"
           "  --seed S                  seed of every random choice (default 0)\n"
           "  --threads N               CPU threads (default: all)\n"
           "  --json                    print the results as one JSON object\n"
           "  --format auto|mtx|triplets|pairs|bin\n"
           "                            how FILE is read (default auto: by its banner, suffix\n"
           "                            and first line; see docs/formats.md)\n"
           "  --index-base auto|0|1     the index base of FILE (default auto: the format's\n"
           "                            convention; triplets 0 if any index is 0, else 1); a\n"
           "                            --test file takes FILE's\n"
           "  --duplicates last|sum|error\n"
           "                            a repeated (row, col) entry of FILE: the last one kept\n"
           "                            (ratings: als, sgd, complete, demo), the values summed\n"
           "                            (interactions: ials, recommend; bmf, sddmm) or an error\n"
           "                            naming both lines; --sum-duplicates is --duplicates sum\n"
           "  --rows N, --cols N        FILE's shape, when it has more rows or columns than\n"
           "                            its entries reach (default: from the file)\n"
           "  --user-col C, --item-col C, --rating-col C\n"
           "                            ids as users have them: FILE's users, items and\n"
           "                            ratings are column C, a header name (userId) or a\n"
           "                            position from 1; integer or string ids map to dense\n"
           "                            indices, and outputs (lists, factors, models) speak\n"
           "                            FILE's ids; a --test file takes FILE's ids\n"
           "  --ids                     the same with columns 1, 2 (and 3: the rating)\n"
           "  --split-input             started by a launcher (mpirun, torchrun): each of N\n"
           "                            ranks keeps every N-th entry of FILE and the fit\n"
           "                            gathers what each rank solves, so no rank holds all\n"
           "                            of FILE (als; the test set is split the same way)\n"
           "  --help                    this text\n";
}

/* The value after a flag, or NULL with a message. */
static const char *value_of(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        cli_error(cmd, "%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_common_parse(const char *cmd, int argc, char **argv, int *i, cli_common *c)
{
    const char *flag = argv[*i], *v;
    long long n;
    if (strcmp(flag, "--json") == 0) {
        c->json = true;
        return 1;
    }
    if (strcmp(flag, "--ids") == 0) {
        c->ids = true;
        return 1;
    }
    if (strcmp(flag, "--split-input") == 0) {
        c->split_input = true;
        return 1;
    }
    if (strcmp(flag, "--user-col") == 0 || strcmp(flag, "--item-col") == 0 ||
        strcmp(flag, "--rating-col") == 0) {
        if (!(v = value_of(cmd, argc, argv, i)))
            return -1;
        if (!*v ||
            (strspn(v, "0123456789") == strlen(v) && (!cli_parse_ll(v, &n) || n < 1 || n > 256))) {
            cli_error(cmd, "%s takes a column's name or its position from 1 to 256, not '%s'", flag,
                      v);
            return -1;
        }
        *(flag[2] == 'u' ? &c->user_col : flag[2] == 'i' ? &c->item_col : &c->rating_col) = v;
        return 1;
    }
    if (strcmp(flag, "--sum-duplicates") == 0) {
        c->duplicates = CLI_DUP_SUM;
        return 1;
    }
    if (strcmp(flag, "--rows") == 0 || strcmp(flag, "--cols") == 0) {
        if (!(v = value_of(cmd, argc, argv, i)))
            return -1;
        if (!cli_parse_ll(v, &n) || n < 1 || n > INT32_MAX) {
            cli_error(cmd, "%s takes an integer from 1 to %d, not '%s'", flag, INT32_MAX, v);
            return -1;
        }
        *(flag[2] == 'r' ? &c->rows : &c->cols) = (int32_t)n;
        return 1;
    }
    if (strcmp(flag, "--duplicates") == 0) {
        static const char *const names[] = {"last", "sum", "error"};
        if (!(v = value_of(cmd, argc, argv, i)))
            return -1;
        for (int k = 0; k < 3; k++)
            if (strcmp(v, names[k]) == 0) {
                c->duplicates = k;
                return 1;
            }
        cli_error(cmd, "--duplicates takes last, sum or error, not '%s'", v);
        return -1;
    }
    if (strcmp(flag, "--format") == 0) {
        static const char *const names[] = {"auto", "mtx", "triplets", "pairs", "bin"};
        if (!(v = value_of(cmd, argc, argv, i)))
            return -1;
        for (int f = 0; f < (int)(sizeof names / sizeof *names); f++)
            if (strcmp(v, names[f]) == 0) {
                c->format = (mf_format)f; /* names[] is in mf_format's order */
                return 1;
            }
        cli_error(cmd, "--format must be auto, mtx, triplets, pairs or bin, not '%s'", v);
        return -1;
    }
    if (strcmp(flag, "--index-base") == 0) {
        if (!(v = value_of(cmd, argc, argv, i)))
            return -1;
        if (strcmp(v, "auto") == 0)
            c->index_base = -1;
        else if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
            c->index_base = v[0] - '0';
        else {
            cli_error(cmd, "--index-base must be auto, 0 or 1, not '%s'", v);
            return -1;
        }
        return 1;
    }
    if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
        c->help = true;
        return 1;
    }
    if (strcmp(flag, "--backend") == 0) {
        if (!(v = value_of(cmd, argc, argv, i)))
            return -1;
        if (strcmp(v, "auto") == 0)
            c->backend = MF_BACKEND_AUTO;
        else if (strcmp(v, "cpu") == 0)
            c->backend = MF_BACKEND_CPU;
        else if (strcmp(v, "cuda") == 0)
            c->backend = MF_BACKEND_CUDA;
        else {
            cli_error(cmd, "--backend must be auto, cpu or cuda, not '%s'", v);
            return -1;
        }
        return 1;
    }
    if (strcmp(flag, "--device") == 0 || strcmp(flag, "--threads") == 0 ||
        strcmp(flag, "--seed") == 0) {
        if (!(v = value_of(cmd, argc, argv, i)))
            return -1;
        if (!cli_parse_ll(v, &n) || n < 0 || (flag[2] != 's' && n > 1 << 20)) {
            cli_error(cmd, "%s takes a non-negative integer, not '%s'", flag, v);
            return -1;
        }
        if (flag[2] == 'd')
            c->device = (int)n;
        else if (flag[2] == 't')
            c->threads = (int)n;
        else
            c->seed = (uint64_t)n;
        return 1;
    }
    return 0;
}

void cli_read_opts(const cli_common *c, int dflt, mf_read_opts *ro)
{
    mf_read_opts_init(ro);
    ro->format = c->format;
    ro->index_base = c->index_base;
    ro->rows = c->rows, ro->cols = c->cols;
    /* A column by its position (digits alone) or its header name. */
    const char *cols[3] = {c->user_col, c->item_col, c->rating_col};
    const char **names[3] = {&ro->row_column, &ro->col_column, &ro->value_column};
    int *fields[3] = {&ro->row_field, &ro->col_field, &ro->value_field};
    for (int k = 0; k < 3; k++)
        if (cols[k] && strspn(cols[k], "0123456789") == strlen(cols[k]))
            *fields[k] = atoi(cols[k]);
        else if (cols[k])
            *names[k] = cols[k];
    ro->map_ids = c->ids;
    const int rule = c->duplicates >= 0 ? c->duplicates : dflt;
    ro->flags = rule == CLI_DUP_SUM    ? MF_SPARSE_SUM_DUPLICATES
                : rule == CLI_DUP_LAST ? MF_SPARSE_KEEP_LAST
                                       : MF_SPARSE_DEFAULT;
}

const char *cli_name(const cli_names *n, int side, int32_t index, char *buf, size_t cap)
{
    const mf_id_map *map = side ? n->items : n->users;
    const char *id = mf_id_map_id(map, index);
    if (id)
        return id;
    const int64_t extra = (int64_t)index - mf_id_map_count(map);
    if (map && side == 0 && extra >= 0 && extra < n->n_unseen)
        return n->unseen[extra];
    snprintf(buf, cap, "%lld", (long long)index + (map ? 0 : n->base));
    return buf;
}

/* Why backend auto settled on the CPU, as the library logs it ("" until it does). */
static char cpu_reason[512];

const char *cli_cpu_reason(void)
{
    return cpu_reason;
}

static void keep_cpu_reason(void *user, mf_log_level level, const char *message)
{
    (void)user, (void)level;
    static const char head[] = "backend auto: using the CPU (";
    if (strncmp(message, head, sizeof head - 1) != 0)
        return;
    snprintf(cpu_reason, sizeof cpu_reason, "%s", message + sizeof head - 1);
    const size_t n = strlen(cpu_reason);
    if (n > 0 && cpu_reason[n - 1] == ')')
        cpu_reason[n - 1] = '\0';
}

mf_ctx *cli_make_ctx(const char *cmd, const cli_common *c)
{
    mf_ctx_opts o;
    mf_ctx_opts_init(&o);
    o.log = keep_cpu_reason;
    o.log_level = MF_LOG_INFO;
    o.backend = c->backend;
    o.device = c->device;
    o.seed = c->seed;
    o.cpu_threads = c->threads;
    mf_ctx *ctx = NULL;
    if (mf_ctx_create(&ctx, &o) != MF_OK) {
        cli_error(cmd, "%s", mf_ctx_last_error(NULL));
        return NULL;
    }
    return ctx;
}

bool cli_parse_shape(const char *cmd, const char *spec, long long *rows, long long *cols,
                     double *density)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", spec);
    char *c1 = strchr(buf, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c2) {
        cli_error(cmd, "--shape takes ROWS,COLS,DENSITY, not '%s'", spec);
        return false;
    }
    *c1 = *c2 = '\0';
    if (!cli_parse_ll(buf, rows) || !cli_parse_ll(c1 + 1, cols) ||
        !cli_parse_double(c2 + 1, density) || *rows < 1 || *cols < 1 || *rows > INT32_MAX ||
        *cols > INT32_MAX || *density <= 0 || *density > 1) {
        cli_error(cmd, "--shape needs positive sizes and a density in (0, 1]");
        return false;
    }
    return true;
}

int cli_parse_args(const char *cmd, int argc, char **argv, cli_common *c, cli_option_fn option,
                   void *args, const char **file)
{
    for (int i = 1; i < argc; i++) {
        int r = cli_common_parse(cmd, argc, argv, &i, c);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        const char *opt = argv[i];
        r = opt[0] == '-' ? option(args, opt, i + 1 < argc ? argv[i + 1] : NULL) : CLI_NOT_MINE;
        if (r < 0)
            return -1;
        if (r == CLI_TOOK_FLAG)
            continue;
        if (r == CLI_TOOK_VALUE) {
            i++;
            continue;
        }
        if (opt[0] == '-') {
            cli_error(cmd, "unknown option '%s' (or it lacks its value)", opt);
            return -1;
        }
        if (*file) {
            cli_error(cmd, "one FILE at most");
            return -1;
        }
        *file = opt;
    }
    return 0;
}

double cli_run_fraction(int done, long long most, double seconds, double time_limit)
{
    double f = (double)done / (double)most;
    if (time_limit > 0 && seconds / time_limit > f)
        f = seconds / time_limit;
    return f < 1 ? f : 1;
}
