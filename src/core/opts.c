#include "core/opts.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* A struct_size beyond this is not a struct any version will have: most likely the caller
 * forgot the *_init() call and the field holds garbage. */
#define MF_OPTS_MAX_SIZE 65536u

static mf_status check_size(mf_ctx *ctx, const char *name, size_t size)
{
    if (size < sizeof(size_t) || size > MF_OPTS_MAX_SIZE)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "%s.struct_size = %zu is not a valid size; initialize the struct with "
                       "its _init() function (or set struct_size = sizeof(%s))",
                       name, size, name);
    return MF_OK;
}

int mf_opts_size_valid(size_t size, size_t align, size_t legacy_size)
{
    return size >= sizeof(size_t) && size <= MF_OPTS_MAX_SIZE &&
           (size % align == 0 || size == legacy_size);
}

mf_status mf_opts_load(mf_ctx *ctx, const char *name, void *dst, size_t our_size, size_t align,
                       size_t legacy_size, const void *src)
{
    size_t caller_size;
    memcpy(&caller_size, src, sizeof caller_size);
    MF_TRY(check_size(ctx, name, caller_size));
    if (!mf_opts_size_valid(caller_size, align, legacy_size))
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "%s.struct_size = %zu ends inside a field (a struct's size is a "
                       "multiple of %zu); initialize the struct with its _init() function",
                       name, caller_size, align);
    if (caller_size > our_size) {
        const unsigned char *tail = (const unsigned char *)src + our_size;
        for (size_t i = 0; i < caller_size - our_size; i++)
            if (tail[i] != 0)
                return mf_fail(ctx, MF_ERR_UNSUPPORTED,
                               "%s sets a field at byte %zu that mfact %s does not know (its "
                               "struct ends at byte %zu); link a newer mfact",
                               name, our_size + i, mf_version_string(), our_size);
    }
    size_t n = caller_size < our_size ? caller_size : our_size;
    memcpy(dst, src, n);
    memcpy(dst, &our_size, sizeof our_size);
    return MF_OK;
}

mf_status mf_opts_out_size(mf_ctx *ctx, const char *name, const void *caller, size_t our_size,
                           size_t align, size_t *writable)
{
    size_t caller_size;
    memcpy(&caller_size, caller, sizeof caller_size);
    MF_TRY(check_size(ctx, name, caller_size));
    if (caller_size % align != 0)
        return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                       "%s.struct_size = %zu ends inside a field (a struct's size is a "
                       "multiple of %zu); set struct_size = sizeof(%s)",
                       name, caller_size, align, name);
    *writable = caller_size < our_size ? caller_size : our_size;
    return MF_OK;
}

void mf_opts_init_into(void *dst, size_t size, const void *def, size_t our_size)
{
    if (!dst || size < sizeof(size_t))
        return;
    unsigned char *out = (unsigned char *)dst;
    memcpy(out, def, size < our_size ? size : our_size);
    if (size > our_size)
        memset(out + our_size, 0, size - our_size);
    memcpy(out, &size, sizeof size);
}

size_t mf_env_bytes(const char *name, size_t fallback)
{
    const char *env = getenv(name);
    const long long asked = env ? atoll(env) : 0;
    return asked > 0 ? (size_t)asked : fallback;
}
