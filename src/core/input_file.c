#define _POSIX_C_SOURCE 200809L /* fileno, stat */
#include "core/input_file.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"

mf_status mf_input_open(mf_ctx *ctx, const char *path, mf_input *in)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    in->size = -1;
    /* Check before opening: fopen("rb") succeeds on a directory and only the first read
     * fails, with a reason (EISDIR) that readers would have to recognise one by one. */
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return mf_fail(ctx, MF_ERR_IO, "%s: is a directory", path);
    FILE *file = fopen(path, "rb");
    if (!file)
        return mf_fail(ctx, MF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(file), &st) == 0 && S_ISREG(st.st_mode))
        in->size = (int64_t)st.st_size;
    in->file = file;
    return MF_OK;
}

void mf_input_peek(mf_input *in, size_t n)
{
    if (n > MF_INPUT_HEAD)
        n = MF_INPUT_HEAD;
    if (in->head_pos == 0 && in->head_len < n)
        in->head_len += fread(in->head + in->head_len, 1, n - in->head_len, in->file);
}

size_t mf_input_read(mf_input *in, void *dst, size_t n)
{
    size_t held = in->head_len - in->head_pos, k = held < n ? held : n;
    memcpy(dst, in->head + in->head_pos, k);
    in->head_pos += k;
    if (k == n)
        return n;
    return k + fread((unsigned char *)dst + k, 1, n - k, in->file);
}

bool mf_input_error(const mf_input *in)
{
    return ferror(in->file) != 0;
}

bool mf_input_rewind(mf_input *in)
{
    if (in->size < 0 || fseek(in->file, 0, SEEK_SET) != 0)
        return false;
    clearerr(in->file);
    in->head_len = in->head_pos = 0;
    return true;
}

void mf_input_close(mf_input *in)
{
    if (in->file)
        fclose(in->file);
    memset(in, 0, sizeof *in);
}
