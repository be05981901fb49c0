/* The sparse-matrix handle: canonical CSR on the host, plus device copies made on first use
 * and freed with the matrix, and a keyed cache for whatever a user of the matrix derives
 * from it once and keeps (an algorithm's plan, a library's offsets, the device transpose). */
#ifndef MF_CORE_SPARSE_H
#define MF_CORE_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/device_memory.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mf_sparse {
    mf_ctx *ctx;
    int32_t rows, cols;
    int64_t nnz;
    int64_t *row_ptr; /* rows + 1 */
    int32_t *col;     /* nnz, sorted within each row, no duplicates */
    float *val;       /* nnz, or NULL for a pattern */
    struct {
        mf_dbuf row_ptr, col, val; /* val empty for a pattern */
    } device;
    /* The transpose as CSR (S's CSC), built on the host on first use by S^T products. */
    struct {
        int64_t *ptr; /* cols + 1 */
        int32_t *idx; /* row of each entry, ascending within a column */
        float *val;   /* NULL for a pattern */
    } transpose;
    /* The columns' offsets alone (cols + 1), without the transpose: what a group's shares
     * and ALS's start need, for a fraction of the transpose's memory and time. */
    int64_t *col_ptr;
    struct mf_sparse_cache_entry *cache; /* see mf_sparse_cache_get */
    int index_base; /* the base mf_sparse_read read the file with; 0 when built from arrays */
    int is_part;    /* this rank's part of a matrix split over a group (mf_sparse_set_part) */
    /* A part read from a file (mf_read_opts.part_index/part_count): which one of how many,
     * so that a fit can refuse a group of another size (entries would go missing); 0 parts:
     * marked by mf_sparse_set_part, unknown. */
    int part_index, part_count;
    /* The ids of the rows and columns (id_map.h), owned; NULL when the file had indices. */
    struct mf_id_map *row_ids, *col_ids;
};

/* Host COO arrays as a builder hands them over: the matrix takes ownership of nothing. */
typedef struct mf_coo_view {
    int32_t rows, cols;
    int64_t nnz;
    const int32_t *row, *col;
    const float *val; /* NULL: pattern */
} mf_coo_view;

/* Validate host COO arrays (indices in range, values finite). `fn` names the public
 * function in messages, which name the offending position: "row[17] = 1000 ...". */
mf_status mf_coo_validate(mf_ctx *ctx, const mf_coo_view *coo, const char *fn);

/* Build the canonical matrix from validated host COO data. When repeats are rejected (or
 * sum to a value that is not finite), dup (NULL: not wanted) gets the first one's 0-based
 * row and column, so that a reader can name where the file gives them. */
mf_status mf_sparse_build_coo(mf_ctx *ctx, mf_sparse **out, const mf_coo_view *coo, unsigned flags,
                              const char *fn, int32_t *dup);

/* Validate host CSR arrays: row_ptr starts at 0, never decreases, ends at nnz; columns in
 * range; values finite. */
mf_status mf_csr_validate(mf_ctx *ctx, int32_t rows, int32_t cols, int64_t nnz,
                          const int64_t *row_ptr, const int32_t *col, const float *val,
                          const char *fn);

/* Build the canonical matrix from validated host CSR data (columns in any order). */
mf_status mf_sparse_build_csr(mf_ctx *ctx, mf_sparse **out, int32_t rows, int32_t cols, int64_t nnz,
                              const int64_t *row_ptr, const int32_t *col, const float *val,
                              unsigned flags, const char *fn);

/* The seeded hash of an entry's coordinates that splits a matrix (sparse_split.c), and
 * whether it falls in the held-out fraction: (hash >> 11) * 2^-53 < fraction. */
uint64_t mf_split_hash(int32_t row, int32_t col, uint64_t seed);
int mf_split_held_out(int32_t row, int32_t col, uint64_t seed, double fraction);
/* R's entries in two matrices of R's shape: *held those mf_split_held_out picks, *kept the
 * rest. On failure neither is made. */
mf_status mf_sparse_split(mf_ctx *ctx, const mf_sparse *R, double fraction, uint64_t seed,
                          const char *fn, mf_sparse **kept, mf_sparse **held);
/* The mean of the stored values (a pattern's are 1; 0 without entries), summed in double. */
double mf_sparse_mean(const mf_sparse *R);

/* The matrix's CSR in device memory, uploaded through the memory manager on first use.
 * val is NULL for a pattern. CUDA contexts only. */
mf_status mf_sparse_device_csr(mf_sparse *m, const int64_t **row_ptr, const int32_t **col,
                               const float **val);

/* The transpose (S's CSC) in device memory, from the host transpose, uploaded on first
 * use. val is NULL for a pattern. CUDA contexts only. */
mf_status mf_sparse_device_csc(mf_sparse *m, const int64_t **col_ptr, const int32_t **row,
                               const float **val);
/* A pattern's values on the device: nnz ones, made on first use. CUDA contexts only. */
mf_status mf_sparse_device_ones(mf_sparse *m, const float **ones);

/* A shard of R for a group's rank (sparse_shard.c): the entries of R whose row (side 0) or
 * column (side 1) lies in [lo, hi), in a matrix of R's shape, in R's order. A rank keeps
 * only what the lines it solves need, so that the device holds its share, not all of R. */
mf_status mf_sparse_block(mf_ctx *ctx, const mf_sparse *R, int side, int32_t lo, int32_t hi,
                          const char *fn, mf_sparse **out);

/* Rows [lo, hi) of R (of R's shape or a shard of it) as a matrix of their own: hi - lo rows
 * by R's columns, row r of R as row r - lo, in R's order. ALS's sharded users solve such a
 * local problem (als.c). */
mf_status mf_sparse_rows_local(mf_ctx *ctx, const mf_sparse *R, int32_t lo, int32_t hi,
                               const char *fn, mf_sparse **out);

/* The host transpose (see struct mf_sparse), built on first use. */
mf_status mf_sparse_host_transpose(mf_sparse *m);
/* The columns' offsets (cols + 1; the transpose's ptr when it is built, else counted once
 * and kept in m->col_ptr): column j holds entries [ptr[j], ptr[j + 1]) of the transpose. */
mf_status mf_sparse_col_ptr(mf_sparse *m, const int64_t **out);

/* Free everything the handle holds on the device, and every cache entry. */
void mf_sparse_release_device(mf_sparse *m);

/* The keyed cache. A key is the address of a static object of the file that owns the entry,
 * so keys of different owners never collide and the matrix needs to know none of them. An
 * entry lives until the matrix is destroyed or releases its device memory; then `free_fn`
 * gets it back (with the matrix, whose context frees device memory). */
typedef void (*mf_sparse_cache_free_fn)(mf_sparse *m, void *value);

/* The value put under `key`, or NULL. */
void *mf_sparse_cache_get(const mf_sparse *m, const void *key);

/* Keep `value` under `key`, which must not be in the cache yet. On failure (host memory)
 * `value` has been given to free_fn already, so the caller only propagates the status. */
mf_status mf_sparse_cache_put(mf_sparse *m, const void *key, void *value,
                              mf_sparse_cache_free_fn free_fn);

/* Give every entry back to its free function, newest first (mf_sparse_release_device). */
void mf_sparse_cache_clear(mf_sparse *m);

#ifdef __cplusplus
}
#endif
#endif
