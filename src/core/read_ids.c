/* Delimited text whose rows and columns are ids as users have them ("userId,movieId,rating"
 * with movieId 193609, or string ids): each distinct id gets the next dense index of its
 * map (id_map.h), so that 9,742 movies make 9,742 columns, not 193,609. The fields are
 * chosen by name in the header line or by position (mf_read_opts); the separator is the
 * first line's (a tab, else a comma, else ';', else "::", else spaces), and "quoted" fields
 * may hold it. Every entry goes through mf_read_add with its dense indices (base 0). */
#include <string.h>

#include "core/ctx.h"
#include "core/parse_num.h"
#include "core/readers.h"
#include "core/text_reader.h"

/* The most fields a line is split into: a chosen field lies among them. */
#define MOST_FIELDS 256

typedef struct field {
    char *s;
    size_t len;
} field;

typedef struct splitter {
    char sep;    /* '\t', ',', ';', ':' ("::") or ' ' (runs of spaces and tabs) */
    int64_t bad; /* a line whose quotes are unbalanced */
} splitter;

static char sniff(const char *line)
{
    if (strchr(line, '\t'))
        return '\t';
    if (strchr(line, ','))
        return ',';
    if (strchr(line, ';'))
        return ';';
    if (strstr(line, "::"))
        return ':';
    return ' ';
}

static bool at_separator(const splitter *d, const char *p)
{
    if (d->sep == ' ')
        return *p == ' ' || *p == '\t';
    if (d->sep == ':')
        return p[0] == ':' && p[1] == ':';
    return *p == d->sep;
}

static char *past_separator(const splitter *d, char *p)
{
    if (d->sep == ' ') {
        while (*p == ' ' || *p == '\t')
            p++;
        return p;
    }
    return p + (d->sep == ':' ? 2 : 1);
}

/* A "quoted" field at p (past the quote): its text unescaped in place ("" is one quote).
 * Returns the end of the field, or NULL when the quote is not closed before the end of the
 * line or text follows it. */
static char *unquote(const splitter *d, char *p, field *f)
{
    char *w = p;
    f->s = p;
    for (;;) {
        if (*p == '\0')
            return NULL;
        if (*p == '"' && p[1] == '"') {
            *w++ = '"';
            p += 2;
        } else if (*p == '"') {
            p++;
            break;
        } else {
            *w++ = *p++;
        }
    }
    f->len = (size_t)(w - f->s);
    while (*p == ' ' && d->sep != ' ')
        p++;
    return *p == '\0' || at_separator(d, p) ? p : NULL;
}

/* Split line into fields (at most MOST_FIELDS kept): the number of fields, or -1 for a
 * broken quote. Unquoted fields lose the spaces around them. */
static int split(const splitter *d, char *line, field *f)
{
    char *p = line;
    int n = 0;
    if (d->sep == ' ')
        p = past_separator(d, p);
    for (;;) {
        field cur;
        while (*p == ' ' && d->sep != ' ')
            p++;
        if (*p == '"') {
            p = unquote(d, p + 1, &cur);
            if (!p)
                return -1;
        } else {
            cur.s = p;
            while (*p && !at_separator(d, p))
                p++;
            char *e = p;
            while (e > cur.s && (e[-1] == ' ' || e[-1] == '\t') && d->sep != '\t')
                e--;
            cur.len = (size_t)(e - cur.s);
        }
        if (n < MOST_FIELDS)
            f[n] = cur;
        n++;
        if (*p == '\0')
            break;
        p = past_separator(d, p);
        if (*p == '\0' && d->sep == ' ')
            break;
    }
    return n;
}

/* The three roles: rows, columns, values. */
enum { ROW = 0, COL = 1, VAL = 2 };
static const char *const role_name[3] = {"row", "column", "value"};

typedef struct layout {
    int at[3]; /* 0-based field of each role; -1: none (a value-less read) */
} layout;

/* The field named `name` in the header's fields: its index, or an error at line `at`. */
static mf_status find_name(mf_read_job *job, int64_t at, const field *f, int n, const char *name,
                           int *out)
{
    const size_t len = strlen(name);
    int found = -1;
    for (int i = 0; i < n && i < MOST_FIELDS; i++) {
        if (f[i].len != len || memcmp(f[i].s, name, len) != 0)
            continue;
        if (found >= 0)
            return mf_read_bad(job, at,
                               "the header names column \"%.64s\" twice (fields %d and %d)", name,
                               found + 1, i + 1);
        found = i;
    }
    if (found < 0) {
        char list[256] = "";
        size_t used = 0;
        for (int i = 0; i < n && i < MOST_FIELDS && used + 4 < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s\"%.*s\"", i ? ", " : "",
                                     (int)(f[i].len < 40 ? f[i].len : 40), f[i].s);
        return mf_read_bad(job, at, "no column \"%.64s\" in the header (%s)", name, list);
    }
    *out = found;
    return MF_OK;
}

/* The roles' fields from the options, and the header's names where asked. */
static mf_status resolve(mf_read_job *job, int64_t at, const field *f, int n, layout *L)
{
    const mf_read_opts *o = job->opts;
    const char *names[3] = {o->row_column, o->col_column, o->value_column};
    const int pos[3] = {o->row_field, o->col_field, o->value_field};
    for (int r = 0; r < 3; r++) {
        if (names[r])
            MF_TRY(find_name(job, at, f, n, names[r], &L->at[r]));
        else
            L->at[r] = pos[r] > 0 ? pos[r] - 1 : -1;
    }
    if (L->at[ROW] < 0)
        L->at[ROW] = 0;
    if (L->at[COL] < 0)
        L->at[COL] = L->at[ROW] == 1 ? 0 : 1;
    if (L->at[VAL] < 0 && !job->pattern) /* the first other field, where the line has one */
        for (int i = 0; i < n && L->at[VAL] < 0; i++)
            if (i != L->at[ROW] && i != L->at[COL])
                L->at[VAL] = i;
    if (job->pattern)
        L->at[VAL] = -1;
    job->pattern = L->at[VAL] < 0; /* two fields: the positions alone */
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (L->at[a] >= 0 && L->at[a] == L->at[b])
                return mf_read_bad(job, at, "the %s and %s are both field %d", role_name[a],
                                   role_name[b], L->at[a] + 1);
    for (int r = 0; r < 3; r++)
        if (L->at[r] >= MOST_FIELDS)
            return mf_read_bad(job, at, "the %s field %d is past the %d fields read", role_name[r],
                               L->at[r] + 1, MOST_FIELDS);
    return MF_OK;
}

/* One id of a line into its map. */
static mf_status intern(mf_read_job *job, int64_t at, mf_id_map *map, int role, const field *f,
                        int32_t *index)
{
    const char *why = mf_id_check(f->s, f->len);
    char q[MF_EXCERPT_CAP];
    if (why)
        return mf_read_bad(job, at, "the %s id %s %s", role_name[role],
                           mf_read_excerpt(q, f->s, f->s + f->len), why);
    const int32_t before = map->n;
    mf_status st = mf_id_map_intern(map, f->s, f->len, index, NULL);
    if (st == MF_ERR_OUT_OF_MEMORY)
        return mf_fail(job->ctx, st, "%s: out of host memory at %d %s ids", job->path, before,
                       role_name[role]);
    if (st != MF_OK)
        return mf_read_bad(job, at, "more distinct %s ids than fit in int32", role_name[role]);
    return MF_OK;
}

/* One entry line. */
static mf_status entry(mf_read_job *job, int64_t at, const field *f, int n, const layout *L)
{
    for (int r = 0; r < 3; r++)
        if (L->at[r] >= n)
            return mf_read_bad(job, at, "%d fields, but the %s is field %d", n, role_name[r],
                               L->at[r] + 1);
    float v = 1.0f;
    char q[MF_EXCERPT_CAP];
    const field *fv = L->at[VAL] >= 0 ? &f[L->at[VAL]] : NULL;
    if (fv && mf_parse_float(fv->s, fv->s + fv->len, &v) != 0)
        return mf_read_bad(job, at, "value %s is not a number",
                           mf_read_excerpt(q, fv->s, fv->s + fv->len));
    int32_t i = 0, j = 0;
    MF_TRY(intern(job, at, job->row_ids, ROW, &f[L->at[ROW]], &i));
    MF_TRY(intern(job, at, job->col_ids, COL, &f[L->at[COL]], &j));
    return mf_read_add(job, at, i, j, v);
}

/* Whether a first line without header names is a header all the same: its value field
 * is there and is not a number ("userId,movieId,rating"). */
static bool is_header(const field *f, int n, const layout *L)
{
    float v;
    int a = L->at[VAL];
    /* A value-less read (MF_SPARSE_PATTERN) of a line with more fields judges by the field a
     * value would come from: "user,item,rating" is a header there too, not a first entry. */
    for (int i = 0; a < 0 && i < n; i++)
        if (i != L->at[ROW] && i != L->at[COL])
            a = i;
    return a >= 0 && a < n && mf_parse_float(f[a].s, f[a].s + f[a].len, &v) != 0;
}

mf_status mf_read_ids(mf_read_job *job)
{
    mf_text_reader r;
    MF_TRY(mf_text_open(job->ctx, &r, job->in));
    const mf_read_opts *o = job->opts;
    const bool named = o->row_column || o->col_column || o->value_column;
    field f[MOST_FIELDS];
    splitter d = {0, 0};
    layout L = {{-1, -1, -1}};
    bool first = true;
    mf_status st = MF_OK;
    char *line;
    int got;
    while (st == MF_OK && (got = mf_text_next(job->ctx, &r, &line)) == 1) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '#' || *p == '%')
            continue;
        if (!d.sep)
            d.sep = sniff(line);
        const int n = split(&d, line, f);
        if (n < 0) {
            st = mf_read_bad(job, r.line,
                             "a quoted field is not closed, or text follows its "
                             "closing quote");
            break;
        }
        if (first) {
            first = false;
            st = resolve(job, r.line, f, n, &L);
            if (st != MF_OK || named || is_header(f, n, &L))
                continue;
        }
        st = entry(job, r.line, f, n, &L);
    }
    if (st == MF_OK && got < 0)
        st = r.status;
    mf_text_close(&r);
    return st;
}
