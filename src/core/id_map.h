/* Id maps (mf_id_map): distinct text ids and their dense indices 0..n-1, in the order they
 * were added, with a hash table for the way back. What the readers build for a file's rows
 * and columns (read_ids.c), a matrix and a saved model keep, and the tool prints. */
#ifndef MF_CORE_ID_MAP_H
#define MF_CORE_ID_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mfact/mfact.h"

/* The longest id: a line of a file may be 64 MiB, an id is a name. */
#define MF_ID_MOST 4096

struct mf_id_map {
    int32_t n;
    int64_t *start; /* n + 1 offsets into text; id i is text[start[i], start[i + 1] - 1) */
    char *text;     /* the ids, each followed by a NUL */
    int64_t text_len, text_cap;
    int32_t cap;   /* of start */
    int32_t *slot; /* open addressing: index of an id or -1; slots is a power of two */
    uint32_t slots;
};

/* An empty map; NULL when out of host memory. */
mf_id_map *mf_id_map_new(void);
/* A copy of src (NULL: an empty map); NULL when out of host memory. */
mf_id_map *mf_id_map_clone(const mf_id_map *src);
/* The index of the id s[0..len), or -1. */
int32_t mf_id_map_find(const mf_id_map *m, const char *s, size_t len);
/* The index of s[0..len), added at the end when new (*added says so; NULL: not wanted).
 * MF_ERR_OUT_OF_MEMORY, or MF_ERR_INVALID_DATA past INT32_MAX - 1 ids, with no message:
 * the caller says where. */
mf_status mf_id_map_intern(mf_id_map *m, const char *s, size_t len, int32_t *index, bool *added);
/* Why s[0..len) cannot be an id ("is empty", "holds byte 0x09", ...), or NULL when it can. */
const char *mf_id_check(const char *s, size_t len);

#endif
