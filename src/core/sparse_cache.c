/* The matrix's keyed cache (sparse.h): a short list, since a matrix carries a handful of
 * entries at most (an SDDMM plan, cuSPARSE's offsets, the device transpose, ...). */
#include <stdlib.h>

#include "core/ctx.h"
#include "core/sparse.h"

struct mf_sparse_cache_entry {
    const void *key;
    void *value;
    mf_sparse_cache_free_fn free_fn;
    struct mf_sparse_cache_entry *next;
};

void *mf_sparse_cache_get(const mf_sparse *m, const void *key)
{
    for (const struct mf_sparse_cache_entry *e = m->cache; e; e = e->next)
        if (e->key == key)
            return e->value;
    return NULL;
}

mf_status mf_sparse_cache_put(mf_sparse *m, const void *key, void *value,
                              mf_sparse_cache_free_fn free_fn)
{
    struct mf_sparse_cache_entry *e = malloc(sizeof *e);
    if (!e) {
        free_fn(m, value);
        return mf_fail(m->ctx, MF_ERR_OUT_OF_MEMORY, "out of host memory for a matrix's cache");
    }
    e->key = key;
    e->value = value;
    e->free_fn = free_fn;
    e->next = m->cache;
    m->cache = e;
    return MF_OK;
}

/* Entries go in the reverse order of their making, so one made from another goes first. */
void mf_sparse_cache_clear(mf_sparse *m)
{
    while (m->cache) {
        struct mf_sparse_cache_entry *e = m->cache;
        m->cache = e->next;
        e->free_fn(m, e->value);
        free(e);
    }
}
