#define _POSIX_C_SOURCE 200809L /* getline */
#include "id_lines.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
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

/* Room for one more record. */
static int room(id_file *f)
{
    if (f->n == f->cap) {
        const int64_t cap = f->cap ? 2 * f->cap : 1024;
        int32_t *grown = realloc(f->ids, (size_t)(cap * f->fields) * sizeof *grown);
        if (!grown)
            return fail(f, "out of host memory for the ids");
        f->ids = grown, f->cap = cap;
    }
    return CLI_OK;
}

/* One record's ids from the line at p. */
static int parse_record(id_file *f, const char *p)
{
    if (room(f) != CLI_OK)
        return CLI_FAILED;
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

/* ---- ids as users have them ---------------------------------------------------------- */

/* The most fields of a line looked at: a chosen column lies among them. */
#define MOST_FIELDS 256

typedef struct named_file {
    id_file f;
    char sep; /* '\t', ',', ';', ':' ("::") or ' ' (runs of spaces and tabs) */
    int at[2];
    int64_t unseen_items;
    cli_names *names;
} named_file;

static bool is_sep(char sep, const char *p)
{
    return sep == ' '   ? *p == ' ' || *p == '\t'
           : sep == ':' ? p[0] == ':' && p[1] == ':'
                        : *p == sep;
}

/* Fields of line (unquoted in place): their number, or -1 for a broken quote. */
static int fields_of(char sep, char *p, char **s, size_t *len)
{
    int n = 0;
    for (;;) {
        while (*p == ' ' || (sep == ' ' && *p == '\t'))
            p++;
        if (!*p && sep == ' ')
            return n;
        char *start = p, *w = p;
        if (*p == '"') {
            for (start = w = ++p;; p++) {
                if (!*p)
                    return -1;
                if (*p == '"' && p[1] != '"')
                    break;
                *w++ = *p;
                p += *p == '"';
            }
            p++;
            while (*p == ' ' && sep != ' ')
                p++;
            if (*p && !is_sep(sep, p))
                return -1;
        } else {
            while (*p && !is_sep(sep, p))
                p++;
            w = p;
            while (w > start && (w[-1] == ' ' || (w[-1] == '\t' && sep != '\t')))
                w--;
        }
        if (n < MOST_FIELDS)
            s[n] = start, len[n] = (size_t)(w - start);
        n++;
        if (!*p)
            return n;
        p += sep == ':' ? 2 : 1;
    }
}

/* The header's field named `name`, or -1 (printed). */
static int named(named_file *nf, char **s, const size_t *len, int n, const char *name)
{
    for (int i = 0; i < n && i < MOST_FIELDS; i++)
        if (len[i] == strlen(name) && !memcmp(s[i], name, len[i]))
            return i;
    cli_error(nf->f.cmd, "%s:%lld: the header has no column \"%s\"", nf->f.path, nf->f.line, name);
    return -1;
}

/* One id into its index: the map's, or past it. */
static int index_of(named_file *nf, int side, char *s, size_t len, int32_t *out)
{
    const mf_id_map *map = side ? nf->names->items : nf->names->users;
    const char c = s[len];
    s[len] = '\0';
    const int32_t i = mf_id_map_index(map, s);
    if (i >= 0) {
        s[len] = c;
        *out = i;
        return CLI_OK;
    }
    const int64_t k = side ? nf->unseen_items++ : nf->names->n_unseen;
    if ((int64_t)mf_id_map_count(map) + k > INT32_MAX) {
        s[len] = c;
        return fail(&nf->f, "more unseen ids than fit in int32");
    }
    *out = (int32_t)(mf_id_map_count(map) + k);
    if (side == 0) {
        char **grown = realloc(nf->names->unseen, (size_t)(k + 1) * sizeof *grown);
        char *copy = strdup(s);
        if (!grown || !copy) {
            free(copy);
            if (grown)
                nf->names->unseen = grown;
            s[len] = c;
            return fail(&nf->f, "out of host memory for the ids");
        }
        nf->names->unseen = grown;
        grown[k] = copy;
        nf->names->n_unseen++;
    }
    s[len] = c;
    return CLI_OK;
}

static int named_record(named_file *nf, char **s, size_t *len, int n)
{
    id_file *f = &nf->f;
    if (room(f) != CLI_OK)
        return CLI_FAILED;
    for (int k = 0; k < f->fields; k++) {
        if (nf->at[k] >= n || len[nf->at[k]] == 0)
            return fail(f, k ? "the line lacks an item id" : "the line lacks a user id");
        if (index_of(nf, k, s[nf->at[k]], len[nf->at[k]], &f->ids[f->n * f->fields + k]) != CLI_OK)
            return CLI_FAILED;
    }
    f->n++;
    return CLI_OK;
}

int cli_read_named_ids(const char *cmd, const char *path, int fields, const cli_common *common,
                       cli_names *names, int32_t **ids, int64_t *n)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        cli_error(cmd, "cannot open %s: %s", path, strerror(errno));
        return CLI_FAILED;
    }
    named_file nf = {{cmd, path, 0, fields, 0, NULL, 0, 0, 0}, 0, {0, 1}, 0, names};
    /* A users file (one field) lists ids one a line: the columns are PAIRS's. */
    const char *col[2] = {fields == 2 ? common->user_col : NULL, common->item_col};
    bool by_name = false;
    for (int k = 0; k < 2; k++)
        if (col[k] && strspn(col[k], "0123456789") == strlen(col[k]))
            nf.at[k] = atoi(col[k]) - 1;
        else if (col[k] && k < fields)
            by_name = true;
    char *line = NULL, *s[MOST_FIELDS];
    size_t cap = 0, len[MOST_FIELDS];
    int rc = CLI_OK;
    bool first = true;
    while (rc == CLI_OK && getline(&line, &cap, in) >= 0) {
        nf.f.line++;
        char *p = line;
        if (nf.f.line == 1 && !strncmp(p, "\xef\xbb\xbf", 3)) /* a UTF-8 byte-order mark */
            p += 3;
        p[strcspn(p, "\r\n")] = '\0';
        const char *q = p + strspn(p, " \t");
        if (!*q || *q == '#' || *q == '%')
            continue;
        if (!nf.sep)
            nf.sep = strchr(p, '\t')   ? '\t'
                     : strchr(p, ',')  ? ','
                     : strchr(p, ';')  ? ';'
                     : strstr(p, "::") ? ':'
                                       : ' ';
        const int nfields = fields_of(nf.sep, p, s, len);
        if (nfields < 0) {
            rc = fail(&nf.f, "a quoted id is not closed, or text follows its closing quote");
            break;
        }
        if (first) {
            first = false;
            for (int k = 0; by_name && k < fields; k++)
                if (col[k] && strspn(col[k], "0123456789") != strlen(col[k]) &&
                    (nf.at[k] = named(&nf, s, len, nfields, col[k])) < 0)
                    rc = CLI_FAILED;
            char *end = NULL;
            if (nfields > 2 && nfields <= MOST_FIELDS) {
                const char c = s[2][len[2]];
                s[2][len[2]] = '\0';
                strtod(s[2], &end);
                s[2][len[2]] = c;
            }
            if (by_name || (end && (end == s[2] || end != s[2] + len[2])))
                continue; /* a header: "userId,movieId,rating" */
        }
        rc = named_record(&nf, s, len, nfields);
    }
    free(line);
    if (rc == CLI_OK && ferror(in)) {
        cli_error(cmd, "cannot read %s: %s", path, strerror(errno));
        rc = CLI_FAILED;
    }
    fclose(in);
    if (rc != CLI_OK) {
        free(nf.f.ids);
        return rc;
    }
    *ids = nf.f.ids;
    *n = nf.f.n;
    return CLI_OK;
}

void cli_names_free(cli_names *names)
{
    for (int64_t i = 0; i < names->n_unseen; i++)
        free(names->unseen[i]);
    free(names->unseen);
    names->unseen = NULL;
    names->n_unseen = 0;
}

int cli_write_id_lines(const char *cmd, const char *path, int32_t lines, const mf_id_map *ids,
                       cli_line_fn body, const void *user)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        cli_error(cmd, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    for (int32_t i = 0; i < lines; i++) {
        if (ids)
            fprintf(f, "%s ", mf_id_map_id(ids, i));
        body(f, i, user);
        fputc('\n', f);
    }
    const int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        cli_error(cmd, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}
