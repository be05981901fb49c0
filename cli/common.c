#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
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

void cli_read_opts(const cli_common *c, int dflt, mf_read_opts *ro)
{
    mf_read_opts_init(ro);
    ro->format = (mf_format)c->format;
    ro->index_base = c->index_base;
    ro->rows = (int32_t)c->rows, ro->cols = (int32_t)c->cols;
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

const char *cli_id_option(const cli_common *c)
{
    return c->user_col     ? "--user-col"
           : c->item_col   ? "--item-col"
           : c->rating_col ? "--rating-col"
           : c->ids        ? "--ids"
                           : NULL;
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

/* The library's log: printed from --log's level up (user: that level, 0 for none), and
 * the reason backend auto chose the CPU kept. */
static void log_message(void *user, mf_log_level level, const char *message)
{
    if ((int)level <= (int)(intptr_t)user)
        fprintf(stderr, "mfact: %s\n", message);
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
    o.log = log_message;
    o.log_user = (void *)(intptr_t)c->log_level;
    o.log_level = c->log_level > MF_LOG_INFO ? (mf_log_level)c->log_level : MF_LOG_INFO;
    o.backend = (mf_backend)c->backend;
    o.device = (int)c->device;
    o.seed = (uint64_t)c->seed;
    o.cpu_threads = (int)c->threads;
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

double cli_run_fraction(int done, long long most, double seconds, double time_limit)
{
    double f = (double)done / (double)most;
    if (time_limit > 0 && seconds / time_limit > f)
        f = seconds / time_limit;
    return f < 1 ? f : 1;
}
