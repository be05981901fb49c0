#define _POSIX_C_SOURCE 200809L /* fileno, stat */
#include "core/input_file.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"

mf_status mf_input_open(mf_ctx *ctx, const char *path, FILE **f, int64_t *size)
{
    *f = NULL;
    *size = -1;
    /* Check before opening: fopen("rb") succeeds on a directory and only the first read
     * fails, with a reason (EISDIR) that readers would have to recognise one by one. */
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return mf_fail(ctx, MF_ERR_IO, "%s: is a directory", path);
    FILE *file = fopen(path, "rb");
    if (!file)
        return mf_fail(ctx, MF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(file), &st) == 0 && S_ISREG(st.st_mode))
        *size = (int64_t)st.st_size;
    *f = file;
    return MF_OK;
}
