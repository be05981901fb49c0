/* What the format readers share: one job per mf_sparse_read call. A reader parses its file
 * and hands every entry to mf_read_add() with its line (or record) number; mf_read_add
 * checks it against what is known of the shape and base, so errors name the exact place. */
#ifndef MF_CORE_READERS_H
#define MF_CORE_READERS_H

#include <stdbool.h>
#include <stdint.h>

#include "mfact/mfact.h"

typedef struct mf_read_job {
    mf_ctx *ctx;
    const char *path;
    const char *unit;   /* "line" or "record", for messages */
    int base;           /* 0 or 1; -1 while it is to be decided from the data (triplets) */
    int32_t rows, cols; /* known shape (options, else header); 0 = from the data */
    bool rows_from_opts, cols_from_opts;
    bool pattern; /* drop values */
    /* Entries, indices already made 0-based unless base is -1. */
    int32_t *row, *col;
    float *val;
    int64_t nnz, cap;
    /* Largest row and column seen and where, to explain shape errors found at the end. */
    int64_t max_row, max_col, max_row_at, max_col_at;
    int64_t min_index;
} mf_read_job;

/* Room for n more entries (a hint from a header; growth is automatic). */
mf_status mf_read_reserve(mf_read_job *job, int64_t n);
/* One entry at line/record `at`, raw indices as written in the file. */
mf_status mf_read_add(mf_read_job *job, int64_t at, int64_t row, int64_t col, float val);
/* A message "path:at: ..." of MF_ERR_INVALID_DATA. */
mf_status mf_read_bad(mf_read_job *job, int64_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

mf_status mf_read_matrix_market(mf_read_job *job);
mf_status mf_read_triplets(mf_read_job *job);
mf_status mf_read_pairs(mf_read_job *job);
mf_status mf_read_binary_triplets(mf_read_job *job);

#endif
