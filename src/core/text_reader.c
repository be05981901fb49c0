#include "core/text_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define MF_TEXT_BLOCK    (1u << 20)
#define MF_TEXT_MAX_LINE (64u << 20) /* a longer "line" is not a matrix file */

mf_status mf_text_open(mf_ctx *ctx, mf_text_reader *r, mf_input *in)
{
    memset(r, 0, sizeof *r);
    r->in = in;
    r->path = in->path;
    r->size = in->size;
    r->cap = MF_TEXT_BLOCK;
    r->buf = malloc(r->cap);
    if (!r->buf)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", in->path);
    return MF_OK;
}

void mf_text_close(mf_text_reader *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
}

static char *finish_line(mf_text_reader *r, size_t stop, size_t next)
{
    char *line = r->buf + r->begin;
    if (stop > r->begin && r->buf[stop - 1] == '\r')
        stop--;
    r->buf[stop] = '\0';
    r->begin = next;
    r->line++;
    return line;
}

/* Move unread bytes to the front and read more; grow the block when one line fills it. */
static int refill(mf_ctx *ctx, mf_text_reader *r)
{
    size_t unread = r->end - r->begin;
    memmove(r->buf, r->buf + r->begin, unread);
    r->begin = 0;
    r->end = unread;
    if (r->end + 1 >= r->cap) {
        if (r->cap >= MF_TEXT_MAX_LINE) {
            r->status = mf_fail(ctx, MF_ERR_INVALID_DATA, "%s:%lld: line longer than %u bytes",
                                r->path, (long long)r->line + 1, MF_TEXT_MAX_LINE);
            return -1;
        }
        char *p = realloc(r->buf, r->cap * 2);
        if (!p) {
            r->status = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", r->path);
            return -1;
        }
        r->buf = p;
        r->cap *= 2;
    }
    /* One byte stays free for the terminator of a last line without "\n". */
    size_t got = mf_input_read(r->in, r->buf + r->end, r->cap - 1 - r->end);
    if (got == 0) {
        if (mf_input_error(r->in)) {
            r->status = mf_fail(ctx, MF_ERR_IO, "%s: read error after line %lld: %s", r->path,
                                (long long)r->line, strerror(errno));
            return -1;
        }
        r->eof = true;
    }
    r->end += got;
    /* A UTF-8 byte-order mark (what some editors and spreadsheet exports write first) is
     * not part of the first line: left there, it turned a first entry into a "header". */
    if (!r->started && r->end >= 3 && memcmp(r->buf, "\xEF\xBB\xBF", 3) == 0)
        r->begin = 3;
    r->started = r->started || r->end >= 3 || r->eof;
    return 0;
}

/* A NUL byte inside the line [r->begin, stop): the text would end there, and the rest of
 * the line (or file) be silently ignored. */
static int has_nul(mf_ctx *ctx, mf_text_reader *r, size_t stop)
{
    if (!memchr(r->buf + r->begin, '\0', stop - r->begin))
        return 0;
    r->status = mf_fail(ctx, MF_ERR_INVALID_DATA, "%s:%lld: a NUL byte (not a text file?)", r->path,
                        (long long)r->line + 1);
    return 1;
}

int mf_text_next(mf_ctx *ctx, mf_text_reader *r, char **line)
{
    for (;;) {
        char *nl = memchr(r->buf + r->begin, '\n', r->end - r->begin);
        if (nl) {
            size_t stop = (size_t)(nl - r->buf);
            if (has_nul(ctx, r, stop))
                return -1;
            *line = finish_line(r, stop, stop + 1);
            return 1;
        }
        if (r->eof) {
            if (r->begin == r->end)
                return 0;
            if (has_nul(ctx, r, r->end))
                return -1;
            *line = finish_line(r, r->end, r->end);
            return 1;
        }
        if (refill(ctx, r) < 0)
            return -1;
    }
}
