/* Reading caller option structs that start with `size_t struct_size` (the ABI rule that lets
 * old binaries run against a newer library, and new ones fail clearly on an older one). */
#ifndef MF_CORE_OPTS_H
#define MF_CORE_OPTS_H

#include <stddef.h>

#include "mfact/mfact.h"

/* `dst` holds the defaults (our_size bytes, its struct_size = our_size). Copy the caller's
 * `src` over them: a smaller caller struct fills only its prefix; a larger one is accepted
 * only when every byte past our end is zero (fields this version does not know, unset).
 * `name` is the struct's type name, for messages. */
mf_status mf_opts_load(mf_ctx *ctx, const char *name, void *dst, size_t our_size, const void *src);

/* For output structs (stats, info): check struct_size and return how many bytes of a
 * fully filled struct of our_size may be written back. */
mf_status mf_opts_out_size(mf_ctx *ctx, const char *name, const void *caller, size_t our_size,
                           size_t *writable);

#endif
