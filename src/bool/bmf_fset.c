/* The factor-set cache of the CPU engine (see bmf_fset.h): direct-mapped, keyed by the
 * factor set's words, each entry the k counts and the cover of one set. */
#include "bool/bmf_fset.h"

#include <stdlib.h>
#include <string.h>

/* At most this many bytes of entries: enough for the distinct factor sets of a half-sweep
 * on the sets measured, small next to the engine's bit matrices. */
#define FSET_CACHE_BYTES ((size_t)8 << 20)

struct bmf_fset_cache {
    int k, kw;
    int64_t nw;
    size_t slots;      /* a power of two */
    size_t stride;     /* words of an entry: key (kw), cover, generation, vals (k) */
    uint64_t gen;      /* entries of older generations are empty */
    uint64_t *entries; /* slots x stride */
};

bmf_fset_cache *bmf_fset_cache_new(int k, int kw, int64_t nw)
{
    bmf_fset_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->k = k, c->kw = kw, c->nw = nw;
    c->stride = (size_t)kw + 2 + (size_t)k;
    size_t fit = FSET_CACHE_BYTES / (c->stride * 8);
    c->slots = 1;
    while (c->slots * 2 <= fit && c->slots < 4096)
        c->slots *= 2;
    c->gen = 1;
    c->entries = calloc(c->slots * c->stride, 8); /* generation 0: empty */
    if (!c->entries) {
        free(c);
        return NULL;
    }
    return c;
}

void bmf_fset_cache_free(bmf_fset_cache *c)
{
    if (c)
        free(c->entries);
    free(c);
}

static uint64_t hash(const uint64_t *x, int kw)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int w = 0; w < kw; w++) {
        h ^= x[w];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    return h;
}

static int popc(uint64_t x)
{
    return __builtin_popcountll(x);
}

/* The counts of x, densely: per word of the other side, which cells x covers once and at
 * least twice (bit-sliced over x's factors), then each factor's share. */
static void compute(const bmf_fset_cache *c, const uint64_t *x, const uint64_t *Yt, int64_t *vals,
                    int64_t *cover)
{
    const int k = c->k;
    int64_t cov = 0;
    memset(vals, 0, (size_t)k * sizeof *vals);
    for (int64_t w = 0; w < c->nw; w++) {
        uint64_t ones = 0, twos = 0;
        for (int t = 0; t < c->kw; t++)
            for (uint64_t b = x[t]; b; b &= b - 1) {
                uint64_t y = Yt[(int64_t)(t * 64 + __builtin_ctzll(b)) * c->nw + w];
                twos |= ones & y;
                ones |= y;
            }
        const uint64_t once = ones & ~twos;
        cov += popc(ones);
        for (int l = 0; l < k; l++) {
            const uint64_t y = Yt[(int64_t)l * c->nw + w];
            if (!y)
                continue;
            vals[l] += (x[l / 64] >> (l % 64) & 1) ? popc(y & once) : popc(y & ~ones);
        }
    }
    *cover = cov;
}

const int64_t *bmf_fset_counts(bmf_fset_cache *c, const uint64_t *x, const uint64_t *Yt,
                               int64_t *cover)
{
    uint64_t *e = c->entries + (hash(x, c->kw) & (c->slots - 1)) * c->stride;
    uint64_t *key = e, *cov = e + c->kw, *gen = e + c->kw + 1;
    int64_t *vals = (int64_t *)(e + c->kw + 2);
    if (*gen != c->gen || memcmp(key, x, (size_t)c->kw * 8) != 0) {
        int64_t cv = 0;
        compute(c, x, Yt, vals, &cv);
        memcpy(key, x, (size_t)c->kw * 8);
        *cov = (uint64_t)cv;
        *gen = c->gen;
    }
    *cover = (int64_t)*cov;
    return vals;
}
