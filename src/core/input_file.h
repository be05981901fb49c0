/* Opening a file the readers read: one place that turns "cannot open", "is a directory"
 * and "not a regular file" into messages, and learns the size that bounds what a header
 * may claim. */
#ifndef MF_CORE_INPUT_FILE_H
#define MF_CORE_INPUT_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "mfact/mfact.h"

/* Open path for reading. *size is the file's size in bytes for a regular file, -1 for
 * what has none (a pipe, a character device): readers then trust no header count and grow
 * from what they read. A directory is MF_ERR_IO "is a directory". */
mf_status mf_input_open(mf_ctx *ctx, const char *path, FILE **f, int64_t *size);

#endif
