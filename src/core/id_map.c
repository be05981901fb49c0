/* Id maps (id_map.h): the ids' text in one growing block, their offsets, and a hash table
 * of indices, so that a file of 100M lines interns each id in constant time. */
#include "core/id_map.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* FNV-1a over the id's bytes. */
static uint32_t hash_of(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static const char *id_at(const mf_id_map *m, int32_t i, size_t *len)
{
    *len = (size_t)(m->start[i + 1] - m->start[i] - 1);
    return m->text + m->start[i];
}

mf_id_map *mf_id_map_new(void)
{
    mf_id_map *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->cap = 64;
    m->start = calloc((size_t)m->cap + 1, sizeof *m->start);
    m->text_cap = 1024;
    m->text = malloc((size_t)m->text_cap);
    m->slots = 128;
    m->slot = malloc(m->slots * sizeof *m->slot);
    if (!m->start || !m->text || !m->slot) {
        mf_id_map_destroy(m);
        return NULL;
    }
    memset(m->slot, 0xff, m->slots * sizeof *m->slot);
    return m;
}

void mf_id_map_destroy(mf_id_map *m)
{
    if (!m)
        return;
    free(m->start);
    free(m->text);
    free(m->slot);
    free(m);
}

mf_id_map *mf_id_map_clone(const mf_id_map *src)
{
    mf_id_map *m = mf_id_map_new();
    for (int32_t i = 0; m && src && i < src->n; i++) {
        size_t len;
        const char *s = id_at(src, i, &len);
        if (mf_id_map_intern(m, s, len, NULL, NULL) != MF_OK) {
            mf_id_map_destroy(m);
            return NULL;
        }
    }
    return m;
}

/* The slot that holds s, or the empty one where it would go. */
static uint32_t probe(const mf_id_map *m, const char *s, size_t len, uint32_t h)
{
    const uint32_t mask = m->slots - 1;
    for (uint32_t p = h & mask;; p = (p + 1) & mask) {
        const int32_t i = m->slot[p];
        size_t n;
        if (i < 0)
            return p;
        const char *t = id_at(m, i, &n);
        if (n == len && memcmp(t, s, len) == 0)
            return p;
    }
}

int32_t mf_id_map_find(const mf_id_map *m, const char *s, size_t len)
{
    return m ? m->slot[probe(m, s, len, hash_of(s, len))] : -1;
}

/* Twice the slots, every id placed again: the table stays at most half full. */
static mf_status rehash(mf_id_map *m)
{
    if (m->slots > UINT32_MAX / 4)
        return MF_ERR_OUT_OF_MEMORY;
    int32_t *slot = malloc((size_t)m->slots * 2 * sizeof *slot);
    if (!slot)
        return MF_ERR_OUT_OF_MEMORY;
    free(m->slot);
    m->slot = slot;
    m->slots *= 2;
    memset(m->slot, 0xff, m->slots * sizeof *m->slot);
    for (int32_t i = 0; i < m->n; i++) {
        size_t len;
        const char *s = id_at(m, i, &len);
        m->slot[probe(m, s, len, hash_of(s, len))] = i;
    }
    return MF_OK;
}

static mf_status room(mf_id_map *m, size_t len)
{
    if (m->n == m->cap) {
        if (m->cap >= INT32_MAX / 2)
            return MF_ERR_INVALID_DATA;
        int64_t *start = realloc(m->start, ((size_t)m->cap * 2 + 1) * sizeof *start);
        if (!start)
            return MF_ERR_OUT_OF_MEMORY;
        m->start = start;
        m->cap *= 2;
    }
    if (m->text_len + (int64_t)len + 1 > m->text_cap) {
        int64_t cap = m->text_cap * 2;
        while (cap < m->text_len + (int64_t)len + 1)
            cap *= 2;
        char *text = realloc(m->text, (size_t)cap);
        if (!text)
            return MF_ERR_OUT_OF_MEMORY;
        m->text = text;
        m->text_cap = cap;
    }
    if ((uint64_t)(m->n + 1) * 2 > m->slots)
        return rehash(m);
    return MF_OK;
}

mf_status mf_id_map_intern(mf_id_map *m, const char *s, size_t len, int32_t *index, bool *added)
{
    const uint32_t h = hash_of(s, len);
    uint32_t p = probe(m, s, len, h);
    if (added)
        *added = m->slot[p] < 0;
    if (m->slot[p] < 0) {
        mf_status st = room(m, len);
        if (st != MF_OK)
            return st;
        p = probe(m, s, len, h); /* the table may have grown */
        memcpy(m->text + m->text_len, s, len);
        m->text[m->text_len + (int64_t)len] = '\0';
        m->text_len += (int64_t)len + 1;
        m->slot[p] = m->n;
        m->start[++m->n] = m->text_len;
    }
    if (index)
        *index = m->slot[p];
    return MF_OK;
}

const char *mf_id_check(const char *s, size_t len)
{
    if (len == 0)
        return "is empty";
    if (len > MF_ID_MOST)
        return "is longer than 4096 bytes";
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20)
            return "holds a control byte (below 0x20)";
    return NULL;
}

/* ---- the public functions -------------------------------------------------------------- */

mf_status mf_id_map_create(mf_ctx *ctx, mf_id_map **out, int32_t n, const char *const *ids)
{
    static const char fn[] = "mf_id_map_create";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, out, "%s: out is NULL", fn);
    MF_REQUIRE(ctx, n >= 0, "%s: n = %d is negative", fn, n);
    MF_REQUIRE(ctx, n == 0 || ids, "%s: ids is NULL", fn);
    mf_id_map *m = mf_id_map_new();
    if (!m)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    for (int32_t i = 0; i < n; i++) {
        if (!ids[i]) {
            mf_id_map_destroy(m);
            return mf_fail(ctx, MF_ERR_INVALID_ARGUMENT, "%s: ids[%d] is NULL", fn, i);
        }
        const size_t len = strlen(ids[i]);
        const char *why = mf_id_check(ids[i], len);
        int32_t at = -1;
        bool added = false;
        mf_status st = why ? MF_ERR_INVALID_DATA : mf_id_map_intern(m, ids[i], len, &at, &added);
        if (st == MF_OK && added)
            continue;
        mf_id_map_destroy(m);
        if (st == MF_ERR_OUT_OF_MEMORY)
            return mf_fail(ctx, st, "%s: out of host memory at %d ids", fn, i);
        if (why)
            return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: ids[%d] %s", fn, i, why);
        if (st != MF_OK)
            return mf_fail(ctx, st, "%s: more ids than a map holds (%d)", fn, i);
        return mf_fail(ctx, MF_ERR_INVALID_DATA, "%s: ids[%d] = \"%.64s\" repeats ids[%d]", fn, i,
                       ids[i], at);
    }
    *out = m;
    return MF_OK;
}

int32_t mf_id_map_count(const mf_id_map *map)
{
    return map ? map->n : 0;
}

const char *mf_id_map_id(const mf_id_map *map, int32_t i)
{
    return map && i >= 0 && i < map->n ? map->text + map->start[i] : NULL;
}

int32_t mf_id_map_index(const mf_id_map *map, const char *id)
{
    return map && id ? mf_id_map_find(map, id, strlen(id)) : -1;
}
