#define _POSIX_C_SOURCE 200809L /* getline */
#include "id_lines.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct id_file {
    const char *cmd, *path;
    long long line;
    int fields, base;
    int32_t *ids;
    int64_t n, cap; /* records held, and room for */
    int any_zero;
} id_file;

static int fail(const id_file *f, const char *what)
{
    cli_error(f->cmd, "%s:%lld: %s", f->path, f->line, what);
    return CLI_FAILED;
}

/* One record's ids from the line at p. */
static int parse_record(id_file *f, const char *p)
{
    if (f->n == f->cap) {
        const int64_t cap = f->cap ? 2 * f->cap : 1024;
        int32_t *grown = realloc(f->ids, (size_t)(cap * f->fields) * sizeof *grown);
        if (!grown)
            return fail(f, "out of host memory for the ids");
        f->ids = grown, f->cap = cap;
    }
    for (int k = 0; k < f->fields; k++) {
        while (*p == ' ' || *p == '\t' || *p == ',' || (p[0] == ':' && p[1] == ':'))
            p += *p == ':' ? 2 : 1;
        char *end;
        errno = 0;
        const long long v = strtoll(p, &end, 10);
        if (end == p || (*end && !strchr(" \t,:\r\n", *end)))
            return fail(f, k ? "the line lacks an item id (an integer)"
                             : "the line does not start with an id (an integer)");
        if (errno || v < 0 || v > INT32_MAX)
            return fail(f, "an id is negative or larger than 2^31 - 1");
        if (f->base == 1 && v == 0)
            return fail(f, "id 0 in a 1-based file (--index-base 0 reads it as 0-based)");
        f->any_zero |= v == 0;
        f->ids[f->n * f->fields + k] = (int32_t)v;
        p = end;
    }
    f->n++;
    return CLI_OK;
}

static int read_lines(id_file *f, FILE *in)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = CLI_OK, content = 0, matrix_market = 0, size_line = 0;
    while (rc == CLI_OK && getline(&line, &cap, in) >= 0) {
        f->line++;
        const char *p = line;
        if (f->line == 1 && !strncmp(p, "\xef\xbb\xbf", 3)) /* a UTF-8 byte-order mark */
            p += 3;
        if (f->line == 1 && !strncmp(p, "%%MatrixMarket", 14))
            matrix_market = size_line = 1;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#' || *p == '%')
            continue;
        if (size_line) { /* "rows cols nnz" after a MatrixMarket banner */
            size_line = 0;
            continue;
        }
        if (!content++ && !isdigit((unsigned char)*p) && *p != '-' && *p != '+')
            continue; /* a header */
        rc = parse_record(f, p);
    }
    free(line);
    if (rc == CLI_OK && ferror(in)) {
        cli_error(f->cmd, "cannot read %s: %s", f->path, strerror(errno));
        rc = CLI_FAILED;
    }
    if (matrix_market && f->base < 0)
        f->base = 1;
    return rc;
}

int cli_read_ids(const char *cmd, const char *path, int fields, int base, int32_t **ids, int64_t *n)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        cli_error(cmd, "cannot open %s: %s", path, strerror(errno));
        return CLI_FAILED;
    }
    id_file f = {cmd, path, 0, fields, base, NULL, 0, 0, 0};
    int rc = read_lines(&f, in);
    fclose(in);
    if (rc != CLI_OK) {
        free(f.ids);
        return rc;
    }
    const int shift = f.base >= 0 ? f.base : !f.any_zero;
    if (shift && f.any_zero) { /* a MatrixMarket file (1-based by its banner) holding a 0 */
        free(f.ids);
        cli_error(cmd, "%s: id 0 in a 1-based file", path);
        return CLI_FAILED;
    }
    for (int64_t i = 0; i < f.n * fields; i++)
        f.ids[i] -= shift;
    *ids = f.ids;
    *n = f.n;
    return CLI_OK;
}
