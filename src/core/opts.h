/* Reading caller option structs that start with `size_t struct_size` (the ABI rule that lets
 * old binaries run against a newer library, and new ones fail clearly on an older one). */
#ifndef MF_CORE_OPTS_H
#define MF_CORE_OPTS_H

#include <stddef.h>

#include "mfact/mfact.h"

/* `dst` holds the defaults (our_size bytes, its struct_size = our_size). Copy the caller's
 * `src` over them: a smaller caller struct fills only its prefix; a larger one is accepted
 * only when every byte past our end is zero (fields this version does not know, unset).
 * `name` is the struct's type name, for messages. A caller's struct_size is a sizeof (a
 * multiple of the struct's alignment `align`) or `legacy_size`, what the unsized
 * initializer of binaries built before 0.4 wrote (MF_OPTS_INITIALIZERS): any other value
 * could end inside a field (half a pointer), so it is refused. MF_OPTS_LOAD passes all three
 * sizes of a type. */
mf_status mf_opts_load(mf_ctx *ctx, const char *name, void *dst, size_t our_size, size_t align,
                       size_t legacy_size, const void *src);
#define MF_OPTS_LOAD(ctx, T, dst, src)                                                             \
    mf_opts_load((ctx), #T, (dst), sizeof(T), _Alignof(T), MF_OPTS_LEGACY_SIZE(T), (src))

/* Whether `size` is a struct_size mf_opts_load takes (within its range, and a multiple of
 * `align` or `legacy_size`): for structs read by hand, like mf_model. */
int mf_opts_size_valid(size_t size, size_t align, size_t legacy_size);

/* The end of `field` in `type`: the size of the struct as it was when `field` was its last. */
#define MF_OPTS_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* What every *_init_sized() does: write the defaults `def` (our_size bytes, struct_size
 * first) into the caller's struct of `size` bytes (its sizeof), and not a byte past it. A
 * smaller struct (an older header) gets the prefix; a larger one (a newer header) gets the
 * defaults and zeros in the fields this version does not know, which mf_opts_load accepts.
 * struct_size becomes `size`. dst NULL, or too small to hold struct_size: nothing. */
void mf_opts_init_into(void *dst, size_t size, const void *def, size_t our_size);

/* A byte count from the environment variable `name` (tests and benches force small chunks
 * with it): its value when a positive integer, else `fallback`. */
size_t mf_env_bytes(const char *name, size_t fallback);

/* Defines the exported pair of an options struct T: fn_sized(p, size), the defaults that
 * `defaults` fills written into the caller's `size` bytes, and the symbol fn(p) that binaries
 * built before the sized initializers call, which fills T through `last` (the struct as their
 * header had it), never more. The header's fn(p) is a macro for fn_sized(p, sizeof *p). */
#define MF_OPTS_LEGACY_SIZE(T) mf_opts_legacy_size_##T
#define MF_OPTS_INITIALIZERS(T, fn, defaults, last)                                                \
    static const size_t MF_OPTS_LEGACY_SIZE(T) = MF_OPTS_END(T, last);                             \
    void fn##_sized(T *p, size_t size)                                                             \
    {                                                                                              \
        T d;                                                                                       \
        defaults(&d);                                                                              \
        mf_opts_init_into(p, size, &d, sizeof d);                                                  \
    }                                                                                              \
    void(fn)(T * p)                                                                                \
    {                                                                                              \
        fn##_sized(p, MF_OPTS_END(T, last));                                                       \
    }

/* For output structs (stats, info, reports): check struct_size and return how many bytes of
 * a fully filled struct of our_size may be written back. A caller's struct_size is a sizeof:
 * a multiple of the struct's alignment `align` (every version starts with a size_t), so a
 * size that ends inside a field (half of a double) is refused, not half written.
 * MF_OPTS_OUT_SIZE passes a type's sizes. */
mf_status mf_opts_out_size(mf_ctx *ctx, const char *name, const void *caller, size_t our_size,
                           size_t align, size_t *writable);
#define MF_OPTS_OUT_SIZE(ctx, T, caller, writable)                                                 \
    mf_opts_out_size((ctx), #T, (caller), sizeof(T), _Alignof(T), (writable))

#endif
