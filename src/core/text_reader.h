/* Line-by-line reading of a text file in fixed blocks: the text is never held whole, so a
 * file of 100M lines costs one block of memory plus what the caller keeps. */
#ifndef MF_CORE_TEXT_READER_H
#define MF_CORE_TEXT_READER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/input_file.h"
#include "mfact/mfact.h"

typedef struct mf_text_reader {
    mf_input *in; /* the caller's, open: the reader does not close it */
    const char *path;
    char *buf;
    size_t cap, begin, end; /* unread bytes are buf[begin, end) */
    int64_t line;           /* number of the line last returned, from 1 */
    int64_t size;           /* the file's size in bytes; -1 when it has none (a pipe) */
    bool eof;
    bool started;     /* the first bytes were seen (and a byte-order mark skipped) */
    mf_status status; /* why mf_text_next returned -1 */
} mf_text_reader;

/* Read lines of `in` from where it stands (bytes held by mf_input_peek first). Fails only
 * for want of host memory. */
mf_status mf_text_open(mf_ctx *ctx, mf_text_reader *r, mf_input *in);
/* The next line without its "\n" or "\r\n", NUL-terminated and writable until the next
 * call: 1 when there is one, 0 at the end, -1 on failure (r->status, message on ctx). */
int mf_text_next(mf_ctx *ctx, mf_text_reader *r, char **line);
/* Frees the reader's block; `in` stays open. */
void mf_text_close(mf_text_reader *r);

#endif
