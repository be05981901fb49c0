/* What the format readers share: one job per mf_sparse_read call. A reader parses its file
 * and hands every entry to mf_read_add() with its line (or record) number; mf_read_add
 * checks it against what is known of the shape and base, so errors name the exact place. */
#ifndef MF_CORE_READERS_H
#define MF_CORE_READERS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/id_map.h"
#include "core/input_file.h"
#include "mfact/mfact.h"

/* The most entries a file may hold: keeps every size computation far from overflow. */
#define MF_READ_MAX_ENTRIES ((int64_t)1 << 40)
/* A shape taken from a file (its header or its largest index) may be at most this plus
 * MF_READ_EXTENT_PER_ENTRY per entry read: per-row and per-column arrays scale with the
 * shape, and must stay proportional to the input (docs/formats.md). */
#define MF_READ_FREE_EXTENT      ((int64_t)1 << 20)
#define MF_READ_EXTENT_PER_ENTRY 16
/* A bad token is quoted by its first MF_EXCERPT_BYTES bytes, non-printable ones escaped. */
#define MF_EXCERPT_BYTES 24
#define MF_EXCERPT_CAP   (4 * MF_EXCERPT_BYTES + 8)

typedef struct mf_read_job {
    mf_ctx *ctx;
    const char *path;
    mf_input *in;       /* open, detection's bytes still unread: the reader reads it once */
    const char *unit;   /* "line" or "record", for messages */
    int64_t size;       /* the file's size in bytes, -1 unknown (in->size) */
    int base;           /* 0 or 1; -1 while it is to be decided from the data (triplets) */
    int32_t rows, cols; /* known shape (options, else header); 0 = from the data */
    bool rows_from_opts, cols_from_opts;
    int64_t shape_at; /* line of the header that gave the shape */
    bool pattern;     /* drop values */
    /* Triplets read by auto-detection: a first line "n nnz" or "rows cols nnz" whose nnz
     * is the number of entries that follow (and whose shape holds them) is a count line,
     * as SNAP edge lists and .in files write it. */
    bool count_line;
    bool count_line_taken; /* the first pass took the first line as a count line */
    /* Entries, indices already made 0-based unless base is -1. */
    int32_t *row, *col;
    float *val;
    int64_t nnz, cap;
    /* Largest row and column seen and where, to explain shape errors found at the end. */
    int64_t max_row, max_col, max_row_at, max_col_at;
    int part_index, part_count; /* mf_read_opts': keep entry i when i % count == index */
    int64_t entry_no;           /* a part's numbering: the next entry's number in the file */
    int64_t entries;            /* entries read, kept or not (all of them: the extent rule) */
    int64_t min_index;
    /* Ids as users have them (read_ids.c): the maps being built, NULL when the file holds
     * indices; the caller's options say which fields hold what. */
    mf_id_map *row_ids, *col_ids;
    const mf_read_opts *opts;
    /* A second pass that only looks for the lines of the repeated entry dup (0-based). */
    bool locate;
    int32_t dup[2];
    int dup_seen;
    int64_t dup_at[2];
} mf_read_job;

/* A header at line `at` (the `what`, e.g. "size line") claims `entries`: refuse a claim
 * the file's size cannot hold (each entry takes at least min_bytes, its newline counted),
 * else make room for it. Growth beyond, or without a known size, follows what is read. */
mf_status mf_read_expect(mf_read_job *job, int64_t at, int64_t entries, int min_bytes,
                         const char *what);
/* One entry at line/record `at`, raw indices as written in the file. */
mf_status mf_read_add(mf_read_job *job, int64_t at, int64_t row, int64_t col, float val);
/* The bytes [s, e) quoted for a message: at most MF_EXCERPT_BYTES of them, non-printable
 * ones as \xNN, "..." after a longer token. Returns buf. */
const char *mf_read_excerpt(char buf[MF_EXCERPT_CAP], const char *s, const char *e);
/* A message "path:at: ..." of MF_ERR_INVALID_DATA. */
mf_status mf_read_bad(mf_read_job *job, int64_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

mf_status mf_read_matrix_market(mf_read_job *job);
mf_status mf_read_triplets(mf_read_job *job);
mf_status mf_read_pairs(mf_read_job *job);
mf_status mf_read_binary_triplets(mf_read_job *job);
/* Delimited text whose rows and columns are ids (mf_read_opts.map_ids): job->row_ids and
 * job->col_ids are the maps to extend. */
mf_status mf_read_ids(mf_read_job *job);

#endif
