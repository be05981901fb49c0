/* The one open of a file the readers read: "cannot open", "is a directory" and read errors
 * turned into messages, the size that bounds what a header may claim, and the first bytes
 * held for format detection and then handed to the reader as the start of the file. A pipe,
 * a FIFO or /dev/stdin can be read once only: detection must not consume what the reader
 * needs, so detection and reader share this one input. */
#ifndef MF_CORE_INPUT_FILE_H
#define MF_CORE_INPUT_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mfact/mfact.h"

/* What format detection looks at: "%%MatrixMarket" after a byte-order mark. */
#define MF_INPUT_HEAD 32

typedef struct mf_input {
    FILE *file;
    const char *path;
    int64_t size; /* bytes of a regular file; -1 for what has none (a pipe, a device) */
    unsigned char head[MF_INPUT_HEAD]; /* bytes read ahead by mf_input_peek */
    size_t head_len, head_pos;         /* held, and already handed out by mf_input_read */
} mf_input;

/* Open path for reading. in->size is the file's size in bytes for a regular file, -1 for
 * what has none: readers then trust no header count and grow from what they read. A
 * directory is MF_ERR_IO "is a directory". */
mf_status mf_input_open(mf_ctx *ctx, const char *path, mf_input *in);
/* The first min(n, MF_INPUT_HEAD) bytes (fewer at the end of the file) in in->head, without
 * consuming them: mf_input_read hands them out first. Call before any mf_input_read. */
void mf_input_peek(mf_input *in, size_t n);
/* As fread: up to n bytes into dst, fewer only at the end of the file or on an error. */
size_t mf_input_read(mf_input *in, void *dst, size_t n);
/* Whether a read failed (errno says why). */
bool mf_input_error(const mf_input *in);
/* Back to the first byte, for a second pass over a regular file; false (nothing changed)
 * for what cannot be read twice. */
bool mf_input_rewind(mf_input *in);
void mf_input_close(mf_input *in);

#endif
