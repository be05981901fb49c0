/*
 * mfact: matrix factorization on NVIDIA GPUs, and on the CPU where no GPU is present.
 *
 * This is the one public header. It is plain C99 and needs no CUDA header: CUDA streams
 * and device pointers cross the interface as `void *`.
 *
 * Conventions that hold for every function below
 * ----------------------------------------------
 * - Every function that can fail returns an `mf_status`. On failure the message of the
 *   failure is `mf_ctx_last_error(ctx)`, and the caller's output buffers are left untouched
 *   (an output handle pointer keeps the value it had).
 * - The library never prints, never exits, never aborts. Diagnostics go to the optional log
 *   callback of the context.
 * - Indices are `int32_t` row/column ids; counts of nonzeros and offsets are `int64_t`;
 *   values are `float`. Dense matrices are row-major with an explicit leading dimension
 *   ld >= the row's length; a matrix of r rows spans (r - 1) * ld + length floats, and a
 *   leading dimension whose span passes PTRDIFF_MAX bytes is MF_ERR_INVALID_ARGUMENT.
 * - A context is used by one thread at a time. Separate contexts are independent.
 * - Option structs start with `size_t struct_size` and are filled by their `*_init()`
 *   macro, which passes the struct's `sizeof` in the caller's header to `*_init_sized()`:
 *   the library writes no byte past it and reads only the fields that fit in
 *   `struct_size`, so a program compiled against an older header keeps working when
 *   fields are added at the end. (The `*_init()` functions of the same names stay
 *   exported for binaries built before 0.4's `_sized` initializers, and fill exactly the
 *   struct those binaries knew. Bindings that call the library by symbol, such as ctypes,
 *   call `*_init_sized()` with their size.) A `struct_size` that is neither a multiple of
 *   the struct's alignment nor what those older `*_init()` functions wrote would end inside
 *   a field, and is MF_ERR_INVALID_ARGUMENT.
 *
 * Stability
 * ---------
 * Everything in this header outside the section marked EXPERIMENTAL is stable: within one
 * major version (the SONAME, `libmfact.so.<major>`) no function is removed or changes its
 * signature, no enum value is renumbered, and option structs only grow at the end.
 * EXPERIMENTAL are the knobs whose shape may still change (the EXPERIMENTAL section at the
 * end of this header, and the option fields from an "EXPERIMENTAL" line to the end of their
 * struct or to a "Stable again" line): they may change or go in a minor release. A program
 * that leaves them at their defaults is not affected; one built with a field a later version
 * dropped gets MF_ERR_UNSUPPORTED when it sets that field, never a different meaning (a
 * dropped field keeps its slot, so the fields after it do not move).
 */
#ifndef MFACT_H
#define MFACT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------- */
/* Version and export macros                                                            */
/* ------------------------------------------------------------------------------------- */

#define MF_VERSION_MAJOR 0
#define MF_VERSION_MINOR 4
#define MF_VERSION_PATCH 0
/* One number that orders versions: 10000 * major + 100 * minor + patch. */
#define MF_VERSION_NUMBER (MF_VERSION_MAJOR * 10000 + MF_VERSION_MINOR * 100 + MF_VERSION_PATCH)

#if defined(MFACT_BUILDING_LIBRARY) && defined(__GNUC__)
#define MF_API __attribute__((visibility("default")))
#else
#define MF_API
#endif

/* The version of the library linked at run time, as MF_VERSION_NUMBER computes it. */
MF_API unsigned mf_version(void);
/* The same as "major.minor.patch". Static storage; never NULL. */
MF_API const char *mf_version_string(void);
/* A one-line description of how the library was built: version, CUDA toolkit and
 * architectures (or "cuda off"), OpenMP. Static storage; never NULL. */
MF_API const char *mf_build_info(void);

/* ------------------------------------------------------------------------------------- */
/* Status codes                                                                         */
/* ------------------------------------------------------------------------------------- */

/* Values are part of the ABI: never renumbered, only added to. */
typedef enum mf_status {
    MF_OK = 0,
    MF_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, a size out of range, a bad option      */
    MF_ERR_INVALID_DATA = 2,     /* input data that breaks a rule: index out of range, NaN  */
    MF_ERR_OUT_OF_MEMORY = 3,    /* host or device allocation failed, or the context limit */
    MF_ERR_NO_DEVICE = 4,        /* CUDA asked for, but no usable device (or built without) */
    MF_ERR_UNSUPPORTED = 5,      /* valid request this build or backend cannot do          */
    MF_ERR_CUDA = 6,             /* a CUDA runtime or library call failed                  */
    MF_ERR_IO = 7,               /* a file could not be opened or read                     */
    MF_ERR_CANCELLED = 8,        /* a progress callback asked to stop                      */
    MF_ERR_NUMERIC = 9,          /* the computation broke down (NaN, non-SPD system, ...)  */
    MF_ERR_INTERNAL = 10         /* a bug in mfact: please report it with the message      */
} mf_status;

/* A short constant English description of a status ("invalid argument"). Never NULL; an
 * unknown value gives "unknown status". */
MF_API const char *mf_status_string(mf_status status);

/* ------------------------------------------------------------------------------------- */
/* Context                                                                              */
/* ------------------------------------------------------------------------------------- */

typedef struct mf_ctx mf_ctx; /* opaque */

typedef enum mf_backend {
    MF_BACKEND_AUTO = 0, /* CUDA when a usable device exists, else CPU */
    MF_BACKEND_CPU = 1,
    MF_BACKEND_CUDA = 2
} mf_backend;

/* Where a caller's arrays live. Every function that takes arrays takes this as a
 * parameter (never as an option field), after the arrays it describes; MF_MEMORY_DEVICE
 * needs a CUDA context. Device arrays are used in place, never copied to the host unless
 * the operation says so. */
typedef enum mf_memory { MF_MEMORY_HOST = 0, MF_MEMORY_DEVICE = 1 } mf_memory;

typedef enum mf_log_level {
    MF_LOG_ERROR = 1,
    MF_LOG_WARNING = 2,
    MF_LOG_INFO = 3,
    MF_LOG_DEBUG = 4
} mf_log_level;

/* Called by the library, on the thread that called into it, for each message at or below
 * the context's log level. `message` is valid only during the call. */
typedef void (*mf_log_fn)(void *user, mf_log_level level, const char *message);

/* Optional device allocator of the host application. `stream` is the context's CUDA
 * stream (a cudaStream_t). Return memory aligned to at least 16 bytes (cudaMalloc, its pools
 * and RMM give 256; mfact's kernels load 16-byte vectors, and it refuses a misaligned block
 * with MF_ERR_INVALID_ARGUMENT), or NULL when the request cannot be served; mfact then
 * reports MF_ERR_OUT_OF_MEMORY. `free` receives the size that was allocated, and may be
 * called while work that uses the memory is still queued on `stream`: release it in stream
 * order (as cudaFreeAsync and RMM do) or synchronize the stream first. */
typedef void *(*mf_device_alloc_fn)(void *user, size_t bytes, void *stream);
typedef void (*mf_device_free_fn)(void *user, void *ptr, size_t bytes, void *stream);

/* A context's CPU threads, asked for or OpenMP's default, are at most this many per
 * processor of the machine. */
#define MF_THREADS_PER_PROCESSOR 4

typedef struct mf_ctx_opts {
    size_t struct_size;              /* sizeof(mf_ctx_opts), set by mf_ctx_opts_init          */
    mf_backend backend;              /* default MF_BACKEND_AUTO                               */
    int device;                      /* CUDA device ordinal, default 0                        */
    size_t device_memory_limit;      /* bytes mfact may hold on the device; 0 = no limit      */
    int cpu_threads;                 /* OpenMP threads for the CPU backend; 0 = OpenMP default */
                                     /* (both at most MF_THREADS_PER_PROCESSOR per processor;  */
                                     /* more is MF_ERR_INVALID_ARGUMENT)                        */
    uint64_t seed;                   /* seed of every random choice the library makes; 0     */
    mf_log_fn log;                   /* NULL = no logging                                     */
    void *log_user;                  /* passed to log                                         */
    mf_log_level log_level;          /* most verbose level passed to log; MF_LOG_WARNING      */
    mf_device_alloc_fn device_alloc; /* both NULL (mfact's own stream-ordered pool) or   */
    mf_device_free_fn device_free;   /* both set                                          */
    void *allocator_user;            /* passed to device_alloc and device_free            */
} mf_ctx_opts;

/* Fill `opts` with the defaults above, struct_size included. */
MF_API void mf_ctx_opts_init(mf_ctx_opts *opts);
MF_API void mf_ctx_opts_init_sized(mf_ctx_opts *opts, size_t size);
#define mf_ctx_opts_init(opts) mf_ctx_opts_init_sized((opts), sizeof(mf_ctx_opts))

/* Create a context. `opts` NULL means the defaults. On success *ctx is set; on failure it
 * is left untouched and the message is mf_ctx_last_error(NULL) on the same thread.
 * MF_BACKEND_CUDA with no usable device (or a build without CUDA) is MF_ERR_NO_DEVICE. */
MF_API mf_status mf_ctx_create(mf_ctx **ctx, const mf_ctx_opts *opts);

/* Destroy a context and release its device memory pool. Destroy every mf_sparse made with
 * it first. NULL is a no-op. */
MF_API void mf_ctx_destroy(mf_ctx *ctx);

/* The message of the most recent failed call on `ctx` (or "no error"), valid until the next
 * call on `ctx`. With ctx NULL: the message of the most recent failure on this thread that
 * had no context to hold it (mf_ctx_create, or a call passed a NULL context). Never NULL. */
MF_API const char *mf_ctx_last_error(const mf_ctx *ctx);

/* The backend the context resolved to: MF_BACKEND_CPU or MF_BACKEND_CUDA, never AUTO. */
MF_API mf_backend mf_ctx_backend(const mf_ctx *ctx);

/* Use the caller's CUDA stream (a cudaStream_t) for all work of this context; NULL goes
 * back to the context's own stream. The previous stream is synchronized first. The caller
 * keeps ownership of its stream and must not destroy it while the context uses it.
 * MF_ERR_UNSUPPORTED on a CPU context. */
MF_API mf_status mf_ctx_set_stream(mf_ctx *ctx, void *cuda_stream);
/* The stream in use (the context's own unless set); NULL on a CPU context. */
MF_API void *mf_ctx_stream(const mf_ctx *ctx);

typedef struct mf_device_info {
    size_t struct_size; /* set by the caller: sizeof(mf_device_info)             */
    char name[256];     /* "NVIDIA H100 80GB HBM3"; "cpu" on a CPU context        */
    int device;         /* ordinal, -1 on a CPU context                          */
    int compute_major, compute_minor;
    int multiprocessors;
    size_t total_memory; /* bytes of device memory                                */
    size_t free_memory;  /* bytes free on the device at the time of the call      */
    size_t l2_cache_bytes;
    size_t shared_memory_per_block_optin;
    int cpu_threads; /* threads the CPU backend uses                          */
} mf_device_info;

/* Describe the context's device (or the CPU). */
MF_API mf_status mf_ctx_device_info(mf_ctx *ctx, mf_device_info *info);

/* ------------------------------------------------------------------------------------- */
/* Device memory                                                                        */
/* ------------------------------------------------------------------------------------- */

/* Every device allocation mfact makes goes through one manager per context: a
 * stream-ordered pool (or the caller's hooks), accounted against the context's limit. */
typedef struct mf_memory_stats {
    size_t struct_size;          /* set by the caller: sizeof(mf_memory_stats)                 */
    size_t current_bytes;        /* held by mfact now                                          */
    size_t peak_bytes;           /* most held at once since creation or mf_ctx_reset_peak_memory */
    size_t limit_bytes;          /* the context's limit; 0 = none                              */
    uint64_t allocations;        /* successful allocations so far                              */
    uint64_t failed_allocations; /* refused by the limit, the pool or the hooks           */
} mf_memory_stats;

/* All zeros on a CPU context. */
MF_API mf_status mf_ctx_memory_stats(const mf_ctx *ctx, mf_memory_stats *stats);
/* Start peak_bytes again from current_bytes. */
MF_API mf_status mf_ctx_reset_peak_memory(mf_ctx *ctx);
/* Give memory cached by the pool back to the device (what mfact holds stays). */
MF_API mf_status mf_ctx_release_cached_memory(mf_ctx *ctx);

/* ------------------------------------------------------------------------------------- */
/* Sparse matrices                                                                      */
/* ------------------------------------------------------------------------------------- */

/* An immutable sparse matrix owned by the library, kept as CSR with the columns of each
 * row sorted ascending and no duplicates. That row-major, column-sorted order is the
 * "canonical order": per-nonzero results of every algorithm come in it. A matrix may cache
 * device copies and plans; it belongs to the context that made it and must be destroyed
 * before that context.
 *
 * Patterns, one rule for every function: values are optional, and a matrix without values
 * is a pattern. Wherever a function reads a matrix's values, a pattern's stored entries
 * read as 1. A pattern is made by passing no values (val NULL), or from valued input with
 * MF_SPARSE_PATTERN (building or reading). Two functions look at positions alone: mf_bmf_run
 * always factors the pattern of C, and mf_sddmm does on request (MF_SDDMM_PATTERN), so that
 * products at the positions of a rated matrix need no second copy of it. */
typedef struct mf_sparse mf_sparse;

/* Ids as users have them: a map between dense indices 0..count-1 and distinct
 * text ids ("193609", "alice"), as mf_sparse_read builds it for a file's rows and columns
 * and a model file keeps it for its users and items. Opaque and immutable once made. */
typedef struct mf_id_map mf_id_map;

typedef enum mf_sparse_flags {
    MF_SPARSE_DEFAULT = 0,
    /* Duplicate (row, col) entries are summed (patterns: merged). Without this flag a
     * duplicate is MF_ERR_INVALID_DATA naming its coordinates. */
    MF_SPARSE_SUM_DUPLICATES = 1,
    /* Keep no values: the matrix is a pattern of the given positions (values given are
     * not read; a repeated position is an error unless MF_SPARSE_SUM_DUPLICATES merges it). */
    MF_SPARSE_PATTERN = 2,
    /* Duplicate (row, col) entries keep the value given last (in the order of the input
     * arrays, or of the file's lines): a rating entered again replaces the earlier one.
     * Not together with MF_SPARSE_SUM_DUPLICATES. Since 0.2. */
    MF_SPARSE_KEEP_LAST = 4
} mf_sparse_flags;

/* Build from coordinate arrays of length nnz (0-based). `val` NULL makes a pattern.
 * rows, cols > 0; nnz >= 0. Indices must lie in range and values be finite: a violation is
 * MF_ERR_INVALID_DATA naming the offending position. `where` says where the three arrays
 * live; the matrix keeps its own copy either way. */
MF_API mf_status mf_sparse_from_coo(mf_ctx *ctx, mf_sparse **out, int32_t rows, int32_t cols,
                                    int64_t nnz, const int32_t *row, const int32_t *col,
                                    const float *val, mf_memory where, unsigned flags);

/* Build from CSR arrays: row_ptr has rows + 1 entries, starting at 0, non-decreasing, ending
 * at nnz; columns within a row may come in any order (they are sorted). */
MF_API mf_status mf_sparse_from_csr(mf_ctx *ctx, mf_sparse **out, int32_t rows, int32_t cols,
                                    int64_t nnz, const int64_t *row_ptr, const int32_t *col,
                                    const float *val, mf_memory where, unsigned flags);

/* NULL is a no-op. */
MF_API void mf_sparse_destroy(mf_sparse *m);

/* Input split over a group of contexts (mf_ctx_join_local, mf_ctx_set_nccl_comm,
 * mf_ctx_set_mpi_comm, mf_ctx_join_launched): is_part 1 marks m as this rank's part of one
 * matrix. Every rank's part has the whole matrix's shape and holds only its own entries;
 * no entry is in two parts (an overlap is an error of the fit, naming the entry), and the
 * parts all have values or are all patterns. The ranks need not split by rows or columns:
 * the fit moves each entry to the rank that solves its line, so no rank ever holds the whole
 * matrix. mf_als_run and (since 0.5) mf_sgd_hogwild_run, mf_asd_run and mf_ials_run take
 * parts: their results are the whole matrix's, to rounding (the mean, the norms and the
 * train RMSE are sums over the ranks; mf_sgd_hogwild_run gathers each rank's users' ratings,
 * and its report's rate counts the whole matrix's; mf_asd_run each rank's rows and columns,
 * and refuses the spectral start, which needs the whole matrix, with MF_ERR_UNSUPPORTED;
 * mf_ials_run each rank's users' rows and items' columns, its factors and loss the whole
 * matrix's bit for bit). Outside a group a part is simply the matrix. is_part 0 unmarks it.
 * Since 0.4. */
MF_API mf_status mf_sparse_set_part(mf_sparse *m, int is_part);
/* 1 when m is marked a part, 0 when not, -1 for NULL. Since 0.4. */
MF_API int mf_sparse_is_part(const mf_sparse *m);

/* Any of rows, cols, nnz may be NULL. */
MF_API mf_status mf_sparse_shape(const mf_sparse *m, int32_t *rows, int32_t *cols, int64_t *nnz);
/* 1 when the matrix stores values, 0 for a pattern, -1 for NULL. */
MF_API int mf_sparse_has_values(const mf_sparse *m);

/* Copy the entries out in canonical order into arrays of length nnz in `where` memory.
 * Any of row, col, val may be NULL to skip it; a pattern's values read as 1. */
MF_API mf_status mf_sparse_get_coo(const mf_sparse *m, int32_t *row, int32_t *col, float *val,
                                   mf_memory where);
/* The same as CSR: row_ptr has rows + 1 entries. */
MF_API mf_status mf_sparse_get_csr(const mf_sparse *m, int64_t *row_ptr, int32_t *col, float *val,
                                   mf_memory where);

/* ------------------------------------------------------------------------------------- */
/* Reading files                                                                        */
/* ------------------------------------------------------------------------------------- */

typedef enum mf_format {
    /* From the content ("%%MatrixMarket" first line) and the extension (.mtx, .in, .bin);
     * anything else is read as MF_FORMAT_TRIPLETS. */
    MF_FORMAT_AUTO = 0,
    /* MatrixMarket coordinate: real, integer or pattern; general or symmetric (the other
     * triangle is filled in). 1-based. */
    MF_FORMAT_MATRIX_MARKET = 1,
    /* Text lines "row col [value [more fields...]]" separated by spaces, tabs, commas or
     * "::" (MovieLens). Fields after the third are ignored; two fields make a pattern.
     * Blank lines and lines starting with '#' or '%' are skipped; a first line holding
     * anything but numbers is taken as a header and skipped. */
    MF_FORMAT_TRIPLETS = 2,
    /* A first line "rows cols nnz" (or "n nnz" for an n x n graph), then nnz lines
     * "row col", 0-based unless index_base says otherwise: the BMF data sets' .in files
     * and SNAP edge lists with a count line. Every pair is a 1 of a Boolean matrix, so a
     * repeated pair is the same 1: repeats merge (as MF_SPARSE_SUM_DUPLICATES would). */
    MF_FORMAT_PAIRS = 3,
    /* Packed little-endian records of int32 row, int32 col, float32 value, no header. */
    MF_FORMAT_BINARY_TRIPLETS = 4
} mf_format;

typedef struct mf_read_opts {
    size_t struct_size; /* sizeof(mf_read_opts), set by mf_read_opts_init                 */
    mf_format format;   /* default MF_FORMAT_AUTO                                          */
    /* Index base of the file: 0 or 1, or -1 for the format's convention (MatrixMarket 1;
     * pairs and binary 0; triplets 0 if any index is 0, else 1). Default -1. */
    int index_base;
    /* Shape: 0 means the file's header, else one more than the largest index. A value
     * given here must cover every index in the file. */
    int32_t rows, cols;
    unsigned flags; /* mf_sparse_flags (MF_SPARSE_PATTERN: ignore the file's values);   */
                    /* default MF_SPARSE_DEFAULT                                        */
    /* Ids as users have them. A delimited text file (CSV, TSV, "::", spaces)
     * whose rows and columns are ids, integer or string ("193609", "u17"), not indices: each
     * distinct id gets the next dense index in the order of first appearance, and the
     * matrix keeps both maps (mf_sparse_row_ids, mf_sparse_col_ids). Ids are mapped when
     * map_ids is nonzero or any field below is set; then index_base is not used and the
     * matrix's is 0. The columns: by name in the file's header line (row_column, ...; a
     * first line is then the header), or by 1-based position (row_field, ...), never both
     * for one; the defaults are positions 1 and 2 and, when the first entry has a third
     * field, 3 for the value (none: a pattern). Without names, a first line whose value
     * field is not a number is a header. An unknown name, a name the header repeats, one
     * column for two roles or a line lacking a chosen field is MF_ERR_INVALID_DATA with
     * the file and line. Fields are separated by what the first line has: a tab, else a
     * comma, else ";", else "::", else spaces; "double-quoted" fields may hold the
     * separator. An id is 1 to 4096 bytes, none below 0x20. */
    int map_ids;
    const char *row_column, *col_column, *value_column; /* header names, or NULL */
    int row_field, col_field, value_field;              /* 1-based positions, or 0 */
    /* Start from these maps (NULL: empty): their ids keep their indices, ids new to them
     * follow (index >= mf_id_map_count), so that a test set is numbered as its training
     * set and its unseen users and items lie past the model's (mf_predict). The shape is
     * at least each map's count. */
    const mf_id_map *row_ids, *col_ids;
    /* This rank's part of a matrix split over a group (mf_sparse_set_part): with part_count
     * > 1, only the file's entries i (0-based, in file order; a triplet file's first line
     * of numbers, which auto-detection may take as a count line, has number 0 either way)
     * with i % part_count == part_index are kept, and the matrix is marked a part. Every
     * entry is still read and checked, so the shape, the index base, the id maps and the
     * limit on a shape the file gives are the whole file's on every rank. A repeated entry
     * that falls in two parts is an error of the fit (parts must not overlap), not of the
     * read. Default 0 and 0: the whole file. Since 0.4. */
    int part_index, part_count;
} mf_read_opts;

MF_API void mf_read_opts_init(mf_read_opts *opts);
MF_API void mf_read_opts_init_sized(mf_read_opts *opts, size_t size);
#define mf_read_opts_init(opts) mf_read_opts_init_sized((opts), sizeof(mf_read_opts))

/* Read a matrix file into a new mf_sparse. `opts` NULL means the defaults. A file that
 * cannot be opened or read is MF_ERR_IO; malformed content is MF_ERR_INVALID_DATA with the
 * file name and line number (record number for binary) in the message. The file is read
 * in blocks: its text is never held in memory whole. */
MF_API mf_status mf_sparse_read(mf_ctx *ctx, mf_sparse **out, const char *path,
                                const mf_read_opts *opts);
/* The index base (0 or 1) that mf_sparse_read read m's file with: index_base as given, or
 * the one the format's convention or the data decided. Read a second file of the same
 * numbering (a test set) with it, so that a file that happens to hold no 0 index is not
 * taken as 1-based. 0 for a matrix built from arrays; -1 for NULL. */
MF_API int mf_sparse_index_base(const mf_sparse *m);
/* The id maps of m's rows and columns, owned by m (valid until it is destroyed): what
 * mf_sparse_read mapped (mf_read_opts.map_ids), else NULL (also for NULL m). */
MF_API const mf_id_map *mf_sparse_row_ids(const mf_sparse *m);
MF_API const mf_id_map *mf_sparse_col_ids(const mf_sparse *m);

/* ------------------------------------------------------------------------------------- */
/* Id maps                                                                              */
/* ------------------------------------------------------------------------------------- */

/* A new map of n ids: ids[i] gets index i. Each id is 1 to 4096 bytes with none below 0x20
 * (no tab, no newline), and no id repeats: else MF_ERR_INVALID_DATA naming it ("ids[4] =
 * \"b\" repeats ids[1]"). n = 0 makes an empty map. NULL ctx, out or (n > 0) ids, or
 * n < 0: MF_ERR_INVALID_ARGUMENT. The map copies the text; it does not depend on ctx. */
MF_API mf_status mf_id_map_create(mf_ctx *ctx, mf_id_map **out, int32_t n, const char *const *ids);
/* NULL is a no-op. Only maps from mf_id_map_create. */
MF_API void mf_id_map_destroy(mf_id_map *map);
/* The number of ids (0 for NULL). */
MF_API int32_t mf_id_map_count(const mf_id_map *map);
/* The id of index i, owned by the map; NULL when i is outside 0..count-1 or map is NULL. */
MF_API const char *mf_id_map_id(const mf_id_map *map, int32_t i);
/* The index of id, or -1 when the map does not hold it (or an argument is NULL). */
MF_API int32_t mf_id_map_index(const mf_id_map *map, const char *id);

/* ------------------------------------------------------------------------------------- */
/* Random numbers                                                                       */
/* ------------------------------------------------------------------------------------- */

/* Fill out[0..n) with uniform floats in [lo, hi): element i is a pure function of
 * (seed, stream, i) through Philox4x32-10, bit-identical on the CPU and the GPU and for any
 * thread count. `out` lives in `where` memory (device needs a CUDA context). Algorithms
 * draw their initial factors the same way, so CPU and GPU runs start alike. */
MF_API mf_status mf_random_uniform(mf_ctx *ctx, float *out, int64_t n, float lo, float hi,
                                   uint64_t seed, uint64_t stream, mf_memory where);

/* ------------------------------------------------------------------------------------- */
/* Sampled dense-dense products, sparse-dense products, RMSE                             */
/* ------------------------------------------------------------------------------------- */

typedef enum mf_sddmm_flags {
    MF_SDDMM_DEFAULT = 0,
    /* S's positions alone: every stored entry counts as 1, as a pattern's always do. */
    MF_SDDMM_PATTERN = 1
} mf_sddmm_flags;

/* Sampled dense-dense matrix multiplication. For every stored entry p = (i, j) of S
 * (rows x cols), in canonical order:
 *
 *     out[p] = alpha * S_ij * dot(A[i, 0..k), B[j, 0..k)) + beta * out[p]
 *
 * A is rows x k and B is cols x k, both row-major with leading dimensions lda, ldb >= k.
 * out has nnz entries. With beta == 0, out is only written (it may hold NaN), as in BLAS.
 * A, B and out live in `where` memory: device pointers are used in place on a CUDA
 * context; host arrays are staged through the context's memory manager. On a CPU context
 * `where` must be MF_MEMORY_HOST. With device arrays the call is stream-ordered, like
 * cuBLAS: it returns once the work is queued on the context's stream (mf_ctx_stream), so
 * synchronize that stream before reading out elsewhere. With host arrays it returns when
 * out holds the result.
 *
 * Accuracy: dot products accumulate in float. Each entry satisfies
 * |out - exact| <= alpha * |S_ij| * k * 2^-23 * sum_t |A_it * B_jt| (plus beta's rounding),
 * the usual gamma_k bound for a float dot product; GPU and CPU results agree to that bound,
 * not bit for bit.
 *
 * The first CUDA call on a matrix with a given k builds a tiling plan (the scheme and tile
 * sizes, picked by timing a few candidates; under 200,000 or over 2^29 entries, where timing
 * means little or costs more than it saves, by rule alone) and caches it on S with the
 * device copy of S; later calls pay nothing for it. mf_sparse_destroy frees both. The plan's
 * INFO log line ("mf_sddmm: plan for k = ...") names the pick and what picking it cost
 * (candidates timed, milliseconds). Bad arguments (k < 1, lda < k, ldb < k, NULL arrays,
 * non-finite alpha or beta) are MF_ERR_INVALID_ARGUMENT and leave out untouched. */
MF_API mf_status mf_sddmm(mf_ctx *ctx, const mf_sparse *S, int k, const float *A, int64_t lda,
                          const float *B, int64_t ldb, float alpha, float beta, float *out,
                          mf_memory where, unsigned flags);

/* The arithmetic of a sampled product (mf_sddmm_ex). Values are part of the ABI. With a reduced
 * precision the factors' entries are rounded to the narrower format on the way into the
 * arithmetic, the tensor cores' or the float kernel's (round to nearest: TF32 ties away from
 * zero, as the hardware's conversion does; bf16 and fp16 ties to even), their products are
 * exact, and the sums accumulate in float. Bounds per entry, relative to
 * m = |alpha * S_ij| * sum_t |A_it * B_jt|, with u = 2^-24 (float's unit roundoff):
 *   FP32    2 k u m: today's CUDA-core (and CPU) float dot product, the default.
 *   3XTF32  (4 k + 16) u m: each entry split as big + small, big = tf32(x), small =
 *           tf32(x - big), and big*big + big*small + small*big summed on the tensor cores;
 *           only small*small and small's own rounding (2^-22 each) are dropped, and the
 *           three products per term double the float sums: fp32-like. The default CUDA
 *           route computes float's own product instead (FP32's bound, inside this one).
 *   TF32    (2^-10 + 2^-22 + 2 k u) m: 10 stored mantissa bits, 2^-11 per input.
 *   BF16    (2^-7 + 2^-16 + 2 k u) m: 7 stored mantissa bits, 2^-8 per input.
 *   FP16    (2^-10 + 2^-22 + 2 k u) m, while every |A_it|, |B_jt| is in [2^-14, 65504]:
 *           10 stored mantissa bits, 2^-11 per input. Smaller entries lose relative precision
 *           (an absolute 2^-25 per input: fp16's subnormals); entries of magnitude 65520 or
 *           more become infinite, and so do the products they enter. Scale the factors first
 *           when they may be that large.
 * The CPU backend rounds the inputs the same way, so CPU and GPU results of one precision
 * differ by the float accumulation alone (2 k u times the rounded inputs' m). */
typedef enum mf_precision {
    MF_PRECISION_FP32 = 0,
    MF_PRECISION_3XTF32 = 1,
    MF_PRECISION_TF32 = 2,
    MF_PRECISION_BF16 = 3,
    MF_PRECISION_FP16 = 4
} mf_precision;

/* mf_sddmm with a choice of arithmetic: mf_sddmm(...) is mf_sddmm_ex(..., MF_PRECISION_FP32).
 * On a CUDA context each precision runs where it was measured fastest (bench/README.md; the
 * products are gathers of factor rows before they are arithmetic). 3XTF32 asks for float's
 * accuracy and gets float's own product, the FP32 kernel (its bound is well inside
 * 3XTF32's; the CPU backend sums the split's three products, so the two differ by the
 * split's dropped terms too, 3 * 2^-22 m at most). TF32 on the CUDA cores, where S has
 * at least 16 entries per column and entries * k is at least 1.5e8, takes
 * cols * ((k rounded up to 32) * 2 + 1) + rows bytes
 * of device memory for the call: B rounded to TF32 and held as fp16 scaled by one power of
 * two, which holds a TF32 value exactly, while the float kernel's variants round A's floats
 * as they load them; from 64 entries per row of A on it copies A's rows too, each scaled by
 * its own power ((rows + cols) * ((k rounded up to 32) * 2 + 1) bytes in all). The entries
 * of a row that does not fit (a value of B more than 28 binades below B's largest, or such a
 * largest outside [2^-64, 2^64); a value of A outside [2^-64, 2^64) other than 0, or with
 * A's copy more than 28 binades below its row's largest or such a largest outside it; a
 * value not finite) are computed apart from the float factors, more slowly. BF16 and FP16,
 * where S has at least 16 entries per column, take cols * (k rounded up to 32) * 2 bytes of
 * device memory for the call, for B's 16-bit copy, which the float kernel's variants read,
 * widening each value to float (half the bytes of the gathers that bound them), while they
 * round A's floats as they load them, once per run of a row's entries. With factor rows that
 * are not 16-byte vectors they take, whatever S holds, (rows + cols) * (k rounded up to 32) *
 * 2 bytes, for copies of both. With fewer entries (TF32: or less work; and factor rows that
 * are 16-byte vectors) the three take no copies: the float kernel's variants round each value
 * as it loads. Every way exact products of the
 * rounded inputs and float sums: the precision's bound, tuned per matrix and k as for FP32. The
 * tensor cores take TF32 when the factors' rows are not 16-byte vectors (k or a leading dimension
 * not a multiple of 4, or unaligned arrays), TF32 below 200,000 entries up to k = 128 and BF16 and
 * FP16 below 200,000 entries (where they were the faster on the small graphs measured) or where no
 * variant applies, and every reduced precision when the environment variable MFACT_SDDMM_HALF is
 * "tensor-cores" ("cuda-cores" forces the other way where a variant applies; a measuring knob).
 * Their first call on a matrix builds its condensed-column plan (one per matrix, for every k
 * and precision; the INFO log line "mf_sddmm: tensor-core plan ..." reports its size and
 * build time, about 0.9 s for 74 million entries) and caches it on S (about 80 bytes per 16
 * condensed columns of each 8-row window). A precision that is not one of mf_precision's
 * values is MF_ERR_INVALID_ARGUMENT and leaves out untouched; other arguments as mf_sddmm. */
MF_API mf_status mf_sddmm_ex(mf_ctx *ctx, const mf_sparse *S, int k, const float *A, int64_t lda,
                             const float *B, int64_t ldb, float alpha, float beta, float *out,
                             mf_memory where, unsigned flags, mf_precision precision);

typedef enum mf_op {
    MF_OP_N = 0, /* S as it is   */
    MF_OP_T = 1  /* S transposed */
} mf_op;

/* Sparse times dense: Y = alpha * op(S) * X + beta * Y, where op(S) is p x q (S's shape,
 * or its transpose), X is q x n and Y is p x n, both row-major with leading dimensions
 * ldx, ldy >= n. With beta == 0, Y is only written. Uses cuSPARSE's generic SpMM on a CUDA
 * context and OpenMP on the CPU. A pattern's entries count as 1. */
MF_API mf_status mf_spmm(mf_ctx *ctx, mf_op op, const mf_sparse *S, int64_t n, float alpha,
                         const float *X, int64_t ldx, float beta, float *Y, int64_t ldy,
                         mf_memory where);

/* Root mean square error of a factorization over the stored entries of `ratings`:
 * sqrt(mean over (i, j) of (r_ij - dot(A[i, 0..k), B[j, 0..k)))^2), with A (rows x k) and
 * B (cols x k) row-major with leading dimensions lda, ldb >= k, in `where` memory, as
 * mf_sddmm takes them. Residuals come from mf_sddmm; their squares are summed in double.
 * A matrix with no entries gives 0. Returns when *rmse holds the result. Bad arguments
 * (k < 1, lda < k, ldb < k, NULL pointers) are MF_ERR_INVALID_ARGUMENT. */
MF_API mf_status mf_rmse(mf_ctx *ctx, const mf_sparse *ratings, int k, const float *A, int64_t lda,
                         const float *B, int64_t ldb, mf_memory where, double *rmse);

/* mf_rmse with the residuals' sampled products in a chosen arithmetic (mf_precision; its
 * bounds apply to each product, the squares are still summed in double): mf_rmse(...) is
 * mf_rmse_ex(..., MF_PRECISION_FP32). An evaluation that tolerates the products' rounding
 * (an RMSE printed to three digits) runs faster at BF16 or FP16 on a CUDA context (the
 * gathers of B's rows carry half the bytes; bench/README.md says by how much). A precision
 * outside mf_precision is MF_ERR_INVALID_ARGUMENT. Since 0.5. */
MF_API mf_status mf_rmse_ex(mf_ctx *ctx, const mf_sparse *ratings, int k, const float *A,
                            int64_t lda, const float *B, int64_t ldb, mf_memory where,
                            mf_precision precision, double *rmse);

/* ------------------------------------------------------------------------------------- */
/* Explicit-ratings models: biases and predictions                                       */
/* ------------------------------------------------------------------------------------- */

/* Where a run hands over the bias terms it fitted (mf_als_opts.bias_out,
 * mf_sgd_opts.bias_out). The run writes `mean` and, where the arrays are not NULL, the
 * per-user and per-item biases (users and items floats in the run's `where` memory), on
 * success and on cancellation, like the factors; a failed run writes nothing. */
typedef struct mf_biases {
    float mean;  /* mu: the mean of the training ratings                                   */
    float *user; /* b_u, users entries, or NULL                                            */
    float *item; /* b_i, items entries, or NULL                                            */
} mf_biases;

/* A trained explicit-ratings model, as mf_als_run and mf_sgd_hogwild_run produce it:
 *     r_ui ~ mean + user_bias[u] + item_bias[i] + dot(U[u, 0..k), V[i, 0..k))
 * Every array lives in `where` memory; a NULL bias array counts as zeros (a model without
 * biases: mean 0 and both NULL). The model only points at the caller's arrays. */
typedef struct mf_model {
    size_t struct_size;     /* sizeof(mf_model), set by mf_model_init                    */
    int32_t users, items;   /* rows of U and V; >= 1                                      */
    int k;                  /* >= 1                                                      */
    const float *U;         /* users x k, leading dimension ldu >= k                      */
    int64_t ldu;            /*                                                            */
    const float *V;         /* items x k, leading dimension ldv >= k                      */
    int64_t ldv;            /*                                                            */
    float mean;             /* mu; must be finite                                         */
    const float *user_bias; /* users entries, or NULL                                     */
    const float *item_bias; /* items entries, or NULL                                     */
    mf_memory where;        /* where U, V, the biases and the predictions live            */
    /* Since 0.5: the arithmetic of U_u . V_i in mf_predict, mf_predict_pairs and
     * mf_model_rmse (mf_precision and its bounds); default (0) MF_PRECISION_FP32. The
     * entries of a matrix within the model's shape go through mf_sddmm_ex; pairs, and a
     * matrix with unseen users or items, round U's and V's entries the same way (TF32, BF16,
     * FP16) and sum in float, 3XTF32 there being float's own product. */
    mf_precision precision;
} mf_model;

/* Zeroes the model and sets struct_size and where (MF_MEMORY_HOST). */
MF_API void mf_model_init(mf_model *model);
MF_API void mf_model_init_sized(mf_model *model, size_t size);
#define mf_model_init(model) mf_model_init_sized((model), sizeof(mf_model))

/* Predictions at every stored entry of `at` (its values are not read), in canonical order,
 * into out (nnz floats in model->where memory). `at` may be larger than the model: a user
 * (row) >= model->users or an item (column) >= model->items is one the model has not seen,
 * and its terms count as zero, so such a prediction is mean + the known bias (mean alone
 * when both are unseen); never NaN for finite inputs. Factors and dot products as
 * mf_sddmm computes them. Bad arguments (a NULL pointer, k < 1, ld < k, users or items < 1,
 * a non-finite mean, arrays in the wrong memory) are MF_ERR_INVALID_ARGUMENT and leave out
 * untouched. Returns when out holds the result. */
MF_API mf_status mf_predict(mf_ctx *ctx, const mf_model *model, const mf_sparse *at, float *out);

/* Predictions for n (user, item) pairs: out[p] for (user[p], item[p]). user, item and out
 * live in model->where memory. A user >= model->users or an item >= model->items is unseen
 * and predicted as in mf_predict; a negative index is MF_ERR_INVALID_DATA naming the pair,
 * and leaves out untouched. n = 0 does nothing. Returns when out holds the result. */
MF_API mf_status mf_predict_pairs(mf_ctx *ctx, const mf_model *model, int64_t n,
                                  const int32_t *user, const int32_t *item, float *out);

/* RMSE of the model's predictions (as mf_predict) over the stored entries of `ratings` (a
 * pattern's count as 1): the squared residuals summed in double. A matrix with no entries
 * gives 0. Arguments as mf_predict. */
MF_API mf_status mf_model_rmse(mf_ctx *ctx, const mf_model *model, const mf_sparse *ratings,
                               double *rmse);

/* ------------------------------------------------------------------------------------- */
/* Saved models                                                                          */
/* ------------------------------------------------------------------------------------- */

/* A model file holds an mf_model (factors, mean, biases) and what made it: the algorithm's
 * name, the caller's options as text and the library version that wrote it. The format
 * (docs/model-file.md) is little-endian, versioned, and checksummed section by section and
 * as a whole, so that any truncated or altered file is refused with a message naming what
 * is wrong; it has room for sections that later versions add (a reader skips those it does
 * not know unless the file marks them required). */
typedef struct mf_saved_model mf_saved_model; /* opaque; owns host copies of its arrays */

typedef struct mf_model_save_opts {
    size_t struct_size;    /* sizeof(mf_model_save_opts), set by mf_model_save_opts_init  */
    const char *algorithm; /* NULL or "" (none), or 1..63 of [A-Za-z0-9._-]: "als"        */
    const char *options;   /* NULL or "" (none), or up to 1 MiB of text: "rank=32 lambda=15" */
    /* The ids of the model's users and items: NULL (none), or a map of exactly
     * model->users (items) ids, such as the training matrix's mf_sparse_row_ids
     * (col_ids). Saved with the model; mf_saved_model_user_ids gives them back. */
    const mf_id_map *user_ids, *item_ids;
} mf_model_save_opts;

MF_API void mf_model_save_opts_init(mf_model_save_opts *opts);
MF_API void mf_model_save_opts_init_sized(mf_model_save_opts *opts, size_t size);
#define mf_model_save_opts_init(opts)                                                              \
    mf_model_save_opts_init_sized((opts), sizeof(mf_model_save_opts))

/* Write `model` (its arrays in host memory, or device memory on a CUDA context: copied to
 * the host first) to the file `path`, with opts's metadata (NULL: none). The file is written
 * under a temporary name in the same directory, flushed to disk and renamed over `path`, so
 * that `path` holds the old file or the whole new one, never a part. Errors: a bad model
 * (as mf_predict), NULL ctx or path, an empty path, a bad struct_size or an algorithm name
 * outside the rule above or options over 1 MiB: MF_ERR_INVALID_ARGUMENT; the file cannot be
 * created, written or renamed: MF_ERR_IO naming it (the temporary file removed). */
MF_API mf_status mf_model_save(mf_ctx *ctx, const mf_model *model, const mf_model_save_opts *opts,
                               const char *path);

/* Read the model file `path` into a new handle *out. Every size the file states is checked
 * against the file's real size before anything is allocated, and every checksum before the
 * call returns: a file that is not a model, truncated, altered (any byte) or inconsistent
 * is MF_ERR_INVALID_DATA with the path and what is wrong ("model.mfm: section 4 (V)
 * checksum mismatch", "model.mfm: truncated at byte 100: the header says the file has
 * 4160 bytes"); one written in a newer format version, or with a required section this
 * version does not know, is MF_ERR_UNSUPPORTED; a file that cannot be opened or read (or
 * is not a regular file) is MF_ERR_IO; NULL arguments are MF_ERR_INVALID_ARGUMENT. *out is
 * untouched on failure. The handle does not depend on ctx. */
MF_API mf_status mf_model_load(mf_ctx *ctx, const char *path, mf_saved_model **out);

/* An mf_model (out->struct_size set by mf_model_init) over the handle's arrays, in host
 * memory (where = MF_MEMORY_HOST, ldu = ldv = k, NULL biases where the file has none),
 * valid until the handle is destroyed. NULL arguments, or out->struct_size too small:
 * MF_ERR_INVALID_ARGUMENT, message in mf_ctx_last_error(NULL), out untouched. */
MF_API mf_status mf_saved_model_view(const mf_saved_model *saved, mf_model *out);

/* What the file says besides the model, owned by the handle: the algorithm's name and the
 * options text as saved ("" where none was saved, and for a NULL handle), and the version
 * of the library that wrote it ("0.4.0"). Never NULL. */
MF_API const char *mf_saved_model_algorithm(const mf_saved_model *saved);
MF_API const char *mf_saved_model_options(const mf_saved_model *saved);
MF_API const char *mf_saved_model_library_version(const mf_saved_model *saved);
/* The id maps saved with the model (mf_model_save_opts.user_ids, item_ids), owned by the
 * handle; NULL where the file has none (and for NULL). */
MF_API const mf_id_map *mf_saved_model_user_ids(const mf_saved_model *saved);
MF_API const mf_id_map *mf_saved_model_item_ids(const mf_saved_model *saved);

/* Release the handle and its arrays (views onto it become invalid). NULL is a no-op. */
MF_API void mf_saved_model_destroy(mf_saved_model *saved);

/* ------------------------------------------------------------------------------------- */
/* Progress of iterative algorithms                                                      */
/* ------------------------------------------------------------------------------------- */

/* What an iterative algorithm reports after each completed iteration. Fields an algorithm
 * does not compute are NaN. The library may add fields at the end; it owns the struct,
 * which is valid only during the callback. */
typedef struct mf_progress {
    int iteration;     /* 1 after the first completed iteration                     */
    double seconds;    /* since the run started, setup included                     */
    double train_rmse; /* RMSE over the training entries                            */
    double test_rmse;  /* RMSE over the held-out entries, NaN without a test set     */
} mf_progress;

/* Called on the caller's thread after each iteration; return nonzero to stop. The run then
 * returns MF_ERR_CANCELLED and the factors hold the last completed iteration. */
typedef int (*mf_progress_fn)(void *user, const mf_progress *progress);

/* ------------------------------------------------------------------------------------- */
/* ALS-WR: alternating least squares with weighted-lambda regularization                 */
/* ------------------------------------------------------------------------------------- */

/* What mf_als_opts.tune and mf_sgd_opts.tune search (flags; 0: nothing, the default). The
 * run holds out a validation part of the training ratings (a seeded 10 %, chosen by a hash
 * of each rating's position), fits every candidate on the rest, keeps the candidate with
 * the lowest validation RMSE, and then fits it on all the training ratings. The report
 * says what was chosen. Candidates: lambda at 1/4, 1/2, 1, 2 and 4 times the option's
 * value; with MF_TUNE_RANK also the ranks 1/4 and 1/2 of opts.rank (at least 1), the
 * chosen rank's factors written in the first columns of U and V and the rest zero (a warm
 * start, whose given factors have opts.rank columns, keeps its rank). */
typedef enum mf_tune { MF_TUNE_NONE = 0, MF_TUNE_LAMBDA = 1, MF_TUNE_RANK = 2 } mf_tune;

typedef enum mf_als_init {
    /* Zhou et al.: V's first column is the item's mean rating, the other columns uniform
     * in [-0.1, 0.1) drawn from the context's seed (the same on CPU and GPU). */
    MF_ALS_INIT_MEAN = 0,
    /* Warm start: V as the caller passes it. U is not read (the first half-step solves it). */
    MF_ALS_INIT_GIVEN = 1,
    /* cuMF_als's start, the default: every entry of V uniform in [0, 0.1) from the
     * context's seed (items without ratings: a zero row). After 10 iterations it reached a
     * lower test RMSE than MF_ALS_INIT_MEAN on every data set measured (docs/api.md). */
    MF_ALS_INIT_UNIFORM = 2
} mf_als_init;

/* How mf_als_opts.lambda (and lambda_bias) scale with a row's number of ratings n. */
typedef enum mf_als_weighting {
    /* lambda * n: ALS-WR's weighted-lambda regularization (Zhou et al.; cuMF_als's). */
    MF_ALS_WEIGHT_COUNT = 0,
    /* lambda alone, whatever n (the usual ridge penalty; cmfrec's default). */
    MF_ALS_WEIGHT_NONE = 1
} mf_als_weighting;

/* How an ALS half-step solves each row's regularized least-squares system. */
typedef enum mf_als_solver {
    /* CG for rank 64 and above (while rank + biases <= 127), EXACT below: at k = 100 the
     * exact solves took a fifth of each iteration on an H100, CG steps a twentieth, at the
     * same test RMSE (docs/api.md has the measurements). */
    MF_ALS_SOLVER_AUTO = 0,
    /* LDL^T of the k x k (k + 1 with biases) system: the exact least-squares row. */
    MF_ALS_SOLVER_EXACT = 1,
    /* cg_steps conjugate-gradient steps started from the row's factors (and bias) of the
     * previous iteration, as cuMF_als solves: k^2 work a step instead of k^3 / 6, and ALS
     * does not need the exact minimizer of a subproblem it revisits next iteration. Needs
     * rank + biases <= 127. */
    MF_ALS_SOLVER_CG = 2
} mf_als_solver;

/* In a group of contexts, how ALS holds the users' factor table U (mf_als_opts.layout).
 * REPLICATED: every rank holds all of U and V, solves its share of each side, and gathers
 * the others' shares after each half step; the factors are one context's bit for bit.
 * USERS_SHARDED: each rank holds only its users' rows of U (and their ratings); V stays
 * whole on every rank. The items' half step forms each item's system from the rank's own
 * users, sums the systems over the ranks (an all-reduce of about items x (k + 1)^2 / 2
 * floats, the systems' lower triangles) and every rank solves every item, so U never
 * travels until the end, when every rank's U receives all of it as with REPLICATED. The
 * sums' order differs from one context's: the factors match one context's to rounding
 * (more loosely with the CG solver, whose few steps amplify it; docs/api.md), the same bits
 * on every rank. For a user table too large to copy to every rank (Hugewiki's 50M users:
 * 20 GB at k = 100). AUTO takes USERS_SHARDED when gathering U would move more bytes than
 * summing the item systems (users x k > 2 x items x (k + 1)^2). Either way it needs every
 * rank to have users: with fewer users than ranks the fit is REPLICATED (the report's
 * layout says which ran). Alone (no group) every layout is the same fit. */
typedef enum mf_als_layout {
    MF_ALS_LAYOUT_AUTO = 0,
    MF_ALS_LAYOUT_REPLICATED = 1,
    MF_ALS_LAYOUT_USERS_SHARDED = 2
} mf_als_layout;

typedef struct mf_als_opts {
    size_t struct_size;      /* sizeof(mf_als_opts), set by mf_als_opts_init               */
    int rank;                /* k, 1..256; default 32                                       */
    float lambda;            /* >= 0; default 15 (see weighting)                            */
    int iterations;          /* >= 1 full sweeps (users, then items); default 10            */
    mf_als_init init;        /* default MF_ALS_INIT_UNIFORM                                 */
    const mf_sparse *test;   /* optional held-out ratings of the same shape, or NULL        */
    mf_progress_fn progress; /* optional; also turns on the per-iteration train RMSE        */
    void *progress_user;     /* passed to progress                                          */
    /* Since 0.2. */
    int biases;                 /* 1 (default): fit mean + user and item biases; 0: U V^T alone */
    float lambda_bias;          /* >= 0: the biases' lambda, weighted like lambda; default 5    */
    mf_biases *bias_out;        /* optional: receives the mean and the biases (mf_biases)       */
    unsigned tune;              /* mf_tune flags; default 0                                     */
    mf_als_weighting weighting; /* of lambda and lambda_bias by a row's count (see above) */
    mf_als_solver solver;       /* default MF_ALS_SOLVER_AUTO                                */
    int cg_steps;               /* CG steps per row and half-step, 1..64; default 6          */
    /* 1 (default): where the solver is CG, on a GPU with tensor cores (sm_80 and later), each
     * rating's products in the Gram matrices are taken in TF32 (10 mantissa bits, sums in
     * FP32): CG's few steps are approximate anyway, and this is 1.6x faster per iteration
     * at k = 100 with the same test RMSE to 4 digits (docs/api.md). 0: products to float
     * accuracy always (3xTF32 or FP32). The exact solver and the CPU ignore it. */
    int tf32;
    /* Since 0.5: the arithmetic of the sampled products in the RMSEs the run reports (the
     * per-iteration train RMSE that opts.progress turns on, the final train and test RMSEs):
     * an mf_precision, default MF_PRECISION_FP32. The fit itself is unchanged (opts.tune's
     * validation RMSEs, which pick the fit, stay float): BF16 or FP16 makes the evaluations
     * cheaper on a CUDA context, with each product within its bound. */
    mf_precision rmse_precision;
    /* Since 0.5: in a group, how U is held (mf_als_layout); default AUTO. */
    mf_als_layout layout;
} mf_als_opts;

/* Totals of a run, filled on success and on cancellation. */
typedef struct mf_als_report {
    size_t struct_size;       /* set by the caller: sizeof(mf_als_report)                   */
    int iterations;           /* completed                                                  */
    double seconds;           /* the whole call: setup, iterations, final RMSEs             */
    double iteration_seconds; /* the iterations alone (per-iteration RMSEs excluded; in a   */
                              /* group, each iteration's closing agreement included)        */
    double gram_seconds;      /* of which building the Gram matrices and right-hand sides   */
    double solve_seconds;     /* of which the batched solves                                */
    double train_rmse;        /* after the last completed iteration                         */
    double test_rmse;         /* NaN without a test set                                     */
    size_t peak_device_bytes; /* the context's peak during the call; 0 on the CPU           */
    /* Since 0.2: what the run fitted (with opts.tune, what it chose). */
    float lambda;           /* the lambda of the final fit                                */
    int rank;               /* the rank of the final fit                                  */
    double validation_rmse; /* with opts.tune: the chosen candidate's; else NaN           */
    mf_als_solver solver;   /* the final fit's: EXACT or CG (AUTO resolved)               */
    /* Since 0.5, in a group (zeros alone): of the final fit's iterations (the per-iteration
     * RMSEs excluded), this rank's host time in the agreement that closes each iteration,
     * which includes waiting for the slowest rank, and the device time of the factor
     * exchanges, waiting for the other ranks to join them included (mf_group_stats has the
     * same over the context's life). */
    double group_wait_seconds;
    double group_exchange_seconds;
    /* Since 0.5: how the final fit held U (REPLICATED alone; AUTO resolved). */
    mf_als_layout layout;
} mf_als_report;

MF_API void mf_als_opts_init(mf_als_opts *opts);
MF_API void mf_als_opts_init_sized(mf_als_opts *opts, size_t size);
#define mf_als_opts_init(opts) mf_als_opts_init_sized((opts), sizeof(mf_als_opts))

/* Alternating least squares (ALS-WR: Zhou et al., "Large-scale Parallel Collaborative
 * Filtering for the Netflix Prize"), with biases by default: minimize
 *     sum over stored (u, i) of (r_ui - mean - bu_u - bi_i - U_u . V_i)^2
 *         + lambda (sum_u w_u |U_u|^2 + sum_i w_i |V_i|^2)
 *         + lambda_bias (sum_u w_u bu_u^2 + sum_i w_i bi_i^2)
 * where mean is the mean training rating and w is 1 (MF_ALS_WEIGHT_NONE, the default) or the
 * row's count of ratings n (MF_ALS_WEIGHT_COUNT, ALS-WR's and cuMF_als's weighted lambda).
 * opts.biases = 0 drops mean and biases: the model is U_u . V_i. Each half-step solves every
 * user's factors and bias together by exact least squares (V_O^T V_O + lambda w_u I on the
 * factors, one more unknown whose feature is 1 for the bias), then the same for every item.
 * `ratings` is users x items (a pattern's ratings are 1); U is users x k and V items x k,
 * row-major with leading dimension k, in `where` memory. On success both hold the result
 * and opts.bias_out (when given) the mean and the biases. A user or item without ratings
 * gets a zero row and bias, so that it is predicted from what is known (mf_predict). A
 * warm start (MF_ALS_INIT_GIVEN) passes V alone: the biases start at zero. Each system is
 * solved by an LDL^T factorization without pivoting; a pivot that is not positive (lambda
 * = 0 with fewer ratings than k, or overflow) stops the run with MF_ERR_NUMERIC naming the
 * row.
 *
 * Defaults (rank 32, lambda 15, lambda_bias 5, unweighted, 10 iterations) were chosen on
 * MovieLens 100K and FilmTrust against Surprise and cmfrec (bench/quality.py; docs/api.md);
 * data with many more ratings per row may want MF_ALS_WEIGHT_COUNT with a lambda near 0.05
 * (the benches' and cuMF_als's). opts.tune searches lambda (and the rank) on a validation
 * split.
 *
 * Errors (U and V untouched): NULL arguments, rank outside 1..256, lambda or lambda_bias < 0
 * or not finite, iterations < 1, an unknown enum value or tune flag, biases not 0 or 1, a
 * test set of another shape: MF_ERR_INVALID_ARGUMENT. The run works on its own copies of the
 * factors and writes U and V once at the end, so a failed run leaves them as they were; a
 * cancelled one leaves the last completed iteration. (A failure while they are written,
 * a device or exchange error in that last step, may leave them part written: in a group
 * with sharded users this step gathers U from every rank.) `report` may be NULL. On a CUDA
 * context the call returns when U and V hold the result. */
MF_API mf_status mf_als_run(mf_ctx *ctx, const mf_sparse *ratings, const mf_als_opts *opts,
                            float *U, float *V, mf_memory where, mf_als_report *report);

/* ------------------------------------------------------------------------------------- */
/* Lock-free (Hogwild) SGD                                                               */
/* ------------------------------------------------------------------------------------- */

typedef enum mf_sgd_schedule {
    /* lr_t = learning_rate / (1 + decay * t^1.5) in epoch t = 0, 1, ... (cuMF_SGD, LIBMF) */
    MF_SGD_SCHEDULE_INVERSE_TIME = 0,
    /* lr_t = learning_rate */
    MF_SGD_SCHEDULE_CONSTANT = 1
} mf_sgd_schedule;

typedef enum mf_sgd_storage {
    MF_SGD_STORAGE_FP32 = 0,
    /* The working factors are IEEE half (round to nearest even); the arithmetic is float
     * and the caller's U and V stay float. Halves the memory traffic of an update. */
    MF_SGD_STORAGE_FP16 = 1
} mf_sgd_storage;

typedef enum mf_sgd_init {
    /* Every element uniform in [0, 1/sqrt(k)), drawn from the context's seed (the same on
     * the CPU and the GPU). */
    MF_SGD_INIT_RANDOM = 0,
    /* Warm start: U and V as the caller passes them. */
    MF_SGD_INIT_GIVEN = 1
} mf_sgd_init;

typedef struct mf_sgd_opts {
    size_t struct_size;       /* sizeof(mf_sgd_opts), set by mf_sgd_opts_init               */
    int rank;                 /* k, 1..512; default 100                                      */
    float learning_rate;      /* > 0; default 0.05                                           */
    mf_sgd_schedule schedule; /* default MF_SGD_SCHEDULE_INVERSE_TIME                        */
    float decay;              /* >= 0, the schedule's beta; default 0.3                      */
    float lambda_u, lambda_v; /* >= 0; default 0.03 each                                     */
    int epochs;               /* >= 0 passes over the ratings; default 20                    */
    mf_sgd_storage storage;   /* default MF_SGD_STORAGE_FP32                                 */
    mf_sgd_init init;         /* default MF_SGD_INIT_RANDOM                                  */
    int workers;              /* concurrent updates (CPU threads, GPU warps); 0 = all, and    */
                              /* never more than one per 128 chunks (see below)               */
    const mf_sparse *test;    /* optional held-out ratings of the same shape, or NULL        */
    mf_progress_fn progress;  /* optional; also turns on the per-epoch RMSEs                 */
    void *progress_user;      /* passed to progress                                          */
    /* EXPERIMENTAL (the section at the end of this header): */
    int order; /* an mf_sgd_order; default MF_SGD_ORDER_USER_CHUNKS                       */
    /* Stable again, since 0.2. */
    int biases;          /* 1 (default): fit mean + user and item biases; 0: U V^T alone  */
    float lambda_bias;   /* >= 0: the biases' lambda (per update, like lambda_u); 0.05    */
    mf_biases *bias_out; /* optional: receives the mean and the biases (mf_biases)        */
    unsigned tune;       /* mf_tune flags; default 0                                      */
} mf_sgd_opts;

/* Totals of a run, filled on success and on cancellation. */
typedef struct mf_sgd_report {
    size_t struct_size;        /* set by the caller: sizeof(mf_sgd_report)                  */
    int epochs;                /* completed                                                 */
    int workers;               /* concurrent updates the run used                           */
    double seconds;            /* the whole call: setup, epochs, final RMSEs                */
    double epoch_seconds;      /* the epochs alone (per-epoch RMSEs excluded)               */
    double updates_per_second; /* ratings * epochs / epoch_seconds                          */
    double train_rmse;         /* after the last completed epoch                            */
    double test_rmse;          /* NaN without a test set                                    */
    size_t peak_device_bytes;  /* the context's peak during the call; 0 on the CPU          */
    /* Since 0.2: what the run fitted (with opts.tune, what it chose). */
    float lambda;           /* lambda_u of the final fit (lambda_v scaled alike)            */
    int rank;               /* the rank of the final fit                                    */
    double validation_rmse; /* with opts.tune: the chosen candidate's; else NaN             */
} mf_sgd_report;

MF_API void mf_sgd_opts_init(mf_sgd_opts *opts);
MF_API void mf_sgd_opts_init_sized(mf_sgd_opts *opts, size_t size);
#define mf_sgd_opts_init(opts) mf_sgd_opts_init_sized((opts), sizeof(mf_sgd_opts))

/* Stochastic gradient descent without locks (Hogwild!, Recht et al.; the GPU design of
 * cuMF_SGD, Xie et al.), with Koren's biases by default. For each visited rating (u, i, r),
 * with every update computed from the old values:
 *     e = r - mean - bu_u - bi_i - U_u . V_i;
 *     bu_u += lr (e - lambda_bias bu_u);  bi_i += lr (e - lambda_bias bi_i);
 *     U_u += lr (e V_i - lambda_u U_u);  V_i += lr (e U_u - lambda_v V_i)
 * (mean: the mean training rating; opts.biases = 0 drops mean and biases). With biases, a
 * user or item without ratings starts (and stays) at a zero row and bias.
 * Every epoch visits each stored rating of `ratings` (users x items; a pattern's ratings
 * are 1) once, in the order opts->order (EXPERIMENTAL) describes; `workers` updates run at once and
 * overwrite each other's rows without locks, as Hogwild does. So that an epoch never runs
 * as a single wave of stale updates, there is at most one worker per 128 chunks (64
 * ratings each): small data sets run with fewer workers than asked (report->workers).
 * U (users x k) and V (items x k) are row-major with leading dimension k in `where`
 * memory. A user or item without ratings keeps its starting row.
 *
 * Defaults: learning_rate 0.05, decay 0.3, lambdas 0.03, lambda_bias 0.03, rank 100, 20 epochs,
 * chosen on MovieLens 100K and FilmTrust (docs/api.md gives what they reach). Netflix-sized data
 * with more ratings per row takes smaller lambdas (cuMF_SGD's 0.08, 0.3 and 0.05, as bench_sgd).
 *
 * Reproducibility: with one worker a run is a pure function of the seed and the inputs
 * (on the CPU it is bit-for-bit the sequence of updates above, in float). With more than
 * one, conflicting updates race by design and results vary from run to run.
 *
 * A rating's squared errors are summed during each epoch; a sum that is not finite (the
 * rate is too large for the data) stops the run with MF_ERR_NUMERIC.
 * Errors (U and V untouched): NULL arguments, rank outside 1..512, learning_rate not
 * finite and > 0, decay or lambdas negative or not finite, epochs < 0, workers < 0, an
 * unknown enum value, a test set of another shape: MF_ERR_INVALID_ARGUMENT; a given U or
 * V with a non-finite element: MF_ERR_INVALID_DATA. The run works on its own copies of the
 * factors and writes U and V once at the end, so a failed run leaves them as they were
 * and a cancelled one leaves the last completed epoch. `report` may be NULL. On a CUDA
 * context the call returns when U and V hold the result. */
MF_API mf_status mf_sgd_hogwild_run(mf_ctx *ctx, const mf_sparse *ratings, const mf_sgd_opts *opts,
                                    float *U, float *V, mf_memory where, mf_sgd_report *report);

/* ------------------------------------------------------------------------------------- */
/* Boolean matrix factorization                                                          */
/* ------------------------------------------------------------------------------------- */

/* Bit order of the factors. A (rows x k) and B (k x cols) are kept by lines of
 * w = (k + 63) / 64 uint64_t words: row i of A is A_bits[i * w .. i * w + w), column j of B
 * is B_bits[j * w .. j * w + w), and factor l of a line is bit l % 64 (least significant
 * first) of its word l / 64. Bits at l >= k are zero. */

typedef enum mf_bmf_init {
    /* Data-driven: factor l of B starts as a row of C drawn at random (a pattern that
     * occurs in the data), and A starts at zero, so the first sweep assigns rows to the
     * patterns that cover them. Each instance draws its own rows. */
    MF_BMF_INIT_SAMPLE = 0,
    /* Every bit of A and B is 1 with the density-matched probability
     * p = sqrt(1 - (1 - d)^(1/k)), d the density of C: the reconstruction then has
     * density d on average. */
    MF_BMF_INIT_RANDOM = 1,
    /* The caller's A_bits and B_bits, for every instance. */
    MF_BMF_INIT_GIVEN = 2,
    /* Asso's greedy cover (Miettinen et al.), one association threshold tau per instance
     * (0.5, 0.55, 0.45, 0.6, ... from 0.05 to 1): candidates are the columns that occur in
     * at least a fraction tau of the rows of one of the 512 most frequent columns, and k
     * greedy rounds each take the candidate that lowers fp + fn the most, in the rows
     * where it does. The search then only improves on it: unless the caller sets a
     * weight, the false-negative weight is 1 from the first sweep, so the result is never
     * worse than Asso's cover at the best tau. Costs instances * k rounds, each
     * rows * cols * seeds bit operations on the GPU (tensor-core b1 MMA on sm_80 and later);
     * the CPU walks only the rows a candidate touches, and a CUDA context takes the CPU's
     * cover where that is estimated faster (the same cover). */
    MF_BMF_INIT_ASSO = 3,
    /* The default: MF_BMF_INIT_ASSO when its cover is estimated to take at most about 2
     * seconds here (sparse matrices such as the Amazon sets and 20News), else
     * MF_BMF_INIT_SAMPLE. The estimate follows the cover's work: on the CPU each column's
     * ones times the candidates holding it, on the GPU rows x cols x seeds per round. */
    MF_BMF_INIT_AUTO = 4
} mf_bmf_init;

/* What a Boolean factorization reports after each sweep, about the best instance so far.
 * Valid only during the callback. */
typedef struct mf_bmf_progress {
    int sweep;             /* 1 after the first completed sweep (rows of A, then columns of B) */
    double seconds;        /* since the run started, setup included                     */
    int64_t error;         /* fp + fn of the best factorization found so far            */
    double relative_error; /* error / (rows * cols)                                      */
    double precision, recall, f1;
    double weight; /* the false-negative weight this sweep used                          */
    /* Since 0.4: the share of the Asso start's greedy rounds done. A run with that start
     * (MF_BMF_INIT_ASSO, or AUTO choosing it) calls the callback while it builds it, with
     * sweep 0, start_done in [0, 1] and the counts of the empty factorization; from the
     * first sweep on start_done is 1. */
    double start_done;
} mf_bmf_progress;

/* Return nonzero to stop: the run then returns MF_ERR_CANCELLED with the best factors so
 * far written out and the report filled (stopped during the Asso start: the factors of the
 * greedy rounds done). */
typedef int (*mf_bmf_progress_fn)(void *user, const mf_bmf_progress *progress);

typedef struct mf_bmf_opts {
    size_t struct_size; /* sizeof(mf_bmf_opts), set by mf_bmf_opts_init                  */
    int rank;           /* k, 1..1024; default 20                                          */
    int instances;      /* independent searches run together, best kept; 1..1024; 16       */
    int max_sweeps;     /* >= 1; default 1000                                              */
    /* Stop after this many sweeps without a better error, counted once the weight has
     * reached its floor (while it decays, the error it weighs is another one); 0 = never.
     * Default 30. */
    int patience;
    double target_error; /* stop at a relative error <= this; default 0 (only an exact fit) */
    double time_limit;   /* seconds, 0 = none; checked after each half-sweep (CPU) or   */
                         /* sweep (GPU): a run ends within one sweep of it; the Asso   */
                         /* start checks it after each greedy round and then keeps the */
                         /* rounds done (the run still makes one sweep)                */
    /* The error minimized is weight * fn + fp, with weight = max(floor, w0 * decay^s) in
     * sweep s (0-based): a high early weight keeps the search from collapsing to the
     * all-zero factorization of sparse data. 0 picks the cuTeBool defaults:
     * w0 = max(3, min(ones / min(rows, cols), 50)), decay 0.98, floor 1 (for inputs with
     * rows * cols >= 2^32 and density below 0.1 %: max(3, min(1000 * density, 10))).
     * The weight is used in steps of 1/256. */
    float weight, weight_decay, weight_floor;
    mf_bmf_init init;            /* default MF_BMF_INIT_AUTO                                */
    mf_bmf_progress_fn progress; /* optional, called after every sweep (and Asso start round) */
    void *progress_user;
    /* EXPERIMENTAL (the section at the end of this header): the moves of the search. */
    int flip;               /* an mf_bmf_flip; default MF_BMF_FLIP_SINGLE                   */
    float flip_probability; /* MF_BMF_FLIP_PER_BIT: in (0, 1]; 0 means 1 / k               */
    /* Metropolis acceptance: a move that raises the weighted error by d is taken with
     * probability exp(-d / T), T = temperature * temperature_decay^s. 0 = off (default):
     * only moves that lower the error are taken. */
    float temperature, temperature_decay; /* decay default 0.95                          */
} mf_bmf_opts;

/* The best factorization of a run: counts against C, filled on success and on
 * cancellation. */
typedef struct mf_bmf_report {
    size_t struct_size;    /* set by the caller: sizeof(mf_bmf_report)                     */
    int64_t tp, fp, fn;    /* true positives, false positives, false negatives              */
    int64_t error;         /* fp + fn                                                      */
    double relative_error; /* error / (rows * cols)                                        */
    double precision;      /* tp / (tp + fp), 1 when A∘B is all zero                       */
    double recall;         /* tp / (tp + fn), 1 when C is all zero                         */
    double f1;
    int sweeps;               /* completed                                                 */
    int best_instance;        /* which instance found the factors returned                */
    double seconds;           /* the whole call                                           */
    size_t peak_device_bytes; /* the context's peak during the call; 0 on the CPU         */
} mf_bmf_report;

MF_API void mf_bmf_opts_init(mf_bmf_opts *opts);
MF_API void mf_bmf_opts_init_sized(mf_bmf_opts *opts, size_t size);
#define mf_bmf_opts_init(opts) mf_bmf_opts_init_sized((opts), sizeof(mf_bmf_opts))

/* Boolean matrix factorization: find A (rows x k) and B (k x cols) over ({0,1}, OR, AND)
 * minimizing the Hamming distance fp + fn between the pattern C and A∘B. C is an
 * mf_sparse whose stored entries are its ones (values, if any, are ignored). The search
 * alternates a sweep over the rows of A with one over the columns of B: within a sweep
 * every line moves at once, since it is independent of the others given the other factor,
 * and each move's change of the weighted error is exact, so the error is kept
 * incrementally. `instances` searches run together, each with its own random choices
 * drawn from the context's seed (mf_ctx_opts.seed); the factors returned are the best any
 * instance found at the end of a sweep. Runs are deterministic: the same seed and options
 * give the same factors on the CPU and on the GPU, for any thread count (a time_limit aside: it
 * stops at whichever sweep the clock reaches).
 *
 * The CUDA backend holds C twice (by rows and by columns), each side in bits (rows * cols
 * / 8 bytes) or as its nonzero 64-bit words with their indices (12 bytes each, at most 12
 * bytes a one), whichever is smaller, plus (rows + cols) * k / 2 bytes per instance and
 * the matrix's CSR and CSC. Sparse C thus costs at most about 33 bytes a one in all
 * (2M x 1M at 0.01 %, 2e8 ones, took 6.6 GB at k = 128 with one instance): a 16 GB device
 * fits about 4e8 ones, an 80 GB one about 2e9, whatever the shape, less the factors. A
 * request beyond the context's limit is MF_ERR_OUT_OF_MEMORY.
 *
 * A_bits and B_bits are (rows + cols) * ((k + 63) / 64) words in `where` memory (see
 * the bit order above): read with MF_BMF_INIT_GIVEN, written with the result.
 * Errors (buffers untouched): NULL arguments, rank outside 1..1024, an option out of
 * range: MF_ERR_INVALID_ARGUMENT; given factors with bits set past k: MF_ERR_INVALID_DATA.
 * (A matrix with no rows or columns cannot be built; an all-zero C is valid and gives
 * error 0.) `report` may be NULL. */
MF_API mf_status mf_bmf_run(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *opts,
                            uint64_t *A_bits, uint64_t *B_bits, mf_memory where,
                            mf_bmf_report *report);

/* ------------------------------------------------------------------------------------- */
/* Matrix completion: alternating steepest descent                                       */
/* ------------------------------------------------------------------------------------- */

typedef enum mf_asd_variant {
    /* Steepest descent on X, then on Y, each with its exact line search (Tanner & Wei). */
    MF_ASD_PLAIN = 0,
    /* Scaled ASD: the directions preconditioned by the r x r Gram inverses, G_X (Y^T Y)^-1
     * and G_Y (X^T X)^-1; far fewer iterations on ill-conditioned matrices. */
    MF_ASD_SCALED = 1
} mf_asd_variant;

typedef enum mf_asd_init {
    /* X and Y uniform in [-1, 1) from the context's seed, scaled together so that
     * |P(X Y^T)| = |P(M)| over the observed entries. */
    MF_ASD_INIT_RANDOM = 0,
    /* X and Y as the caller passes them. */
    MF_ASD_INIT_GIVEN = 1,
    /* The top-r singular subspace of the zero-filled P(M) / p (p the observed fraction),
     * from 4 rounds of subspace iteration. */
    MF_ASD_INIT_SPECTRAL = 2
} mf_asd_init;

/* Why a completion run stopped. */
typedef enum mf_asd_stop {
    MF_ASD_STOP_TOLERANCE = 0,      /* relative residual <= tolerance                      */
    MF_ASD_STOP_STAGNATION = 1,     /* (res_k / res_{k-w})^(1/w) > 1 - stagnation_rate     */
    MF_ASD_STOP_MAX_ITERATIONS = 2, /* max_iterations done                                 */
    MF_ASD_STOP_TIME_LIMIT = 3,     /* time_limit reached                                  */
    MF_ASD_STOP_CANCELLED = 4       /* the progress callback asked                         */
} mf_asd_stop;

typedef struct mf_asd_opts {
    size_t struct_size;      /* sizeof(mf_asd_opts), set by mf_asd_opts_init               */
    int rank;                /* r, 1..512 and at most min(rows, cols); default 10           */
    mf_asd_variant variant;  /* default MF_ASD_SCALED                                       */
    double tolerance;        /* > 0: stop at |R| / |P(M)| <= this; default 1e-5              */
    int stagnation_window;   /* w, default 15; 0: no stagnation test                        */
    double stagnation_rate;  /* in (0, 1); default 1e-4                                     */
    int max_iterations;      /* >= 1; default 1000                                          */
    double time_limit;       /* seconds, 0 = none; checked after each iteration             */
    mf_asd_init init;        /* default MF_ASD_INIT_RANDOM                                  */
    const mf_sparse *test;   /* optional held-out entries of the same shape, or NULL        */
    mf_progress_fn progress; /* optional; train_rmse carries the relative residual          */
    void *progress_user;     /* passed to progress                                          */
    /* Rank continuation, 0 (off, the default) or 1: fit rank 1, then add one column at a time
     * (started small and random) up to `rank`, each intermediate rank run until it stagnates. Costs
     * more iterations on well-conditioned matrices; recovers ill-conditioned ones where a
     * random start stalls. Iterations, the time limit and progress count over all ranks. */
    int rank_continuation;
    /* Since 0.5: MF_PRECISION_BF16 or MF_PRECISION_FP16 starts the run with the gathered
     * factor rows (the other side's row of every sampled product and gradient term) read
     * from a 16-bit copy, made once per half step, sums in float: half the bytes gathered
     * per observed entry, which bound an iteration's passes. The reduced phase ends when the
     * relative residual reaches 4 units of the format's rounding (2^-6 for BF16, 2^-9 for
     * FP16; its rounding holds it near 0.4 of a unit), or the tolerance, or when it
     * stagnates (the window and rate above; a window of 15 where stagnation_window is 0);
     * the run then goes on in float, so the stopping rules judge float residuals and the
     * result meets the same tolerance. The iteration cap, the time limit and a cancel end
     * the run in the reduced phase too (the report's residual is then recomputed in
     * float). With rank_continuation the reduced phase spans the ranks until it ends.
     * Default MF_PRECISION_FP32 (float throughout); other values are
     * MF_ERR_INVALID_ARGUMENT. The CPU rounds the same way. */
    mf_precision precision;
} mf_asd_opts;

/* A completion run's totals, filled on success and on cancellation. */
typedef struct mf_asd_report {
    size_t struct_size;       /* set by the caller: sizeof(mf_asd_report)                */
    int iterations;           /* completed (an iteration updates X, then Y)              */
    mf_asd_stop stopped;      /* why the run ended                                       */
    double relative_residual; /* |P(X Y^T - M)| / |P(M)| at the end                      */
    double test_rmse;         /* over opts.test; NaN without one                         */
    int singular_steps;       /* Scaled ASD steps whose Gram matrix was singular (those  */
                              /* took the plain steepest-descent direction)              */
    double seconds;           /* the whole call                                          */
    size_t peak_device_bytes; /* the context's peak during the call; 0 on the CPU        */
    int reduced_iterations;   /* since 0.5: of `iterations`, those run in opts.precision  */
} mf_asd_report;

MF_API void mf_asd_opts_init(mf_asd_opts *opts);
MF_API void mf_asd_opts_init_sized(mf_asd_opts *opts, size_t size);
#define mf_asd_opts_init(opts) mf_asd_opts_init_sized((opts), sizeof(mf_asd_opts))

/* Low-rank matrix completion (Tanner & Wei, "Low rank matrix completion by alternating
 * steepest descent methods", 2016): find X (rows x r) and Y (cols x r) minimizing
 *     f(X, Y) = 1/2 |P(M) - P(X Y^T)|^2
 * over the observed entries of `observed` (M's values on the set it stores; a pattern's
 * are 1). X Y^T is never formed: the residual lives on the observed entries, the
 * gradients are sparse-dense products, and each step's length is the exact minimizer
 * along its direction (f is quadratic in each factor). X and Y are row-major with leading
 * dimension r in `where` memory; read with MF_ASD_INIT_GIVEN, written with the result.
 * Errors (X and Y untouched): NULL arguments, rank outside 1..min(512, rows, cols), a
 * tolerance <= 0, a stagnation rate outside (0, 1), max_iterations < 1, a negative time
 * limit, a test set of another shape: MF_ERR_INVALID_ARGUMENT; no observed entries, or a
 * given factor with a non-finite element: MF_ERR_INVALID_DATA. A cancelled run hands over
 * its last completed iteration. (A failure while X and Y are written at the end, a device
 * or exchange error in that last step, may leave them part written: in a group this step
 * gathers X's rows from every rank, into host X directly.) */
MF_API mf_status mf_asd_run(mf_ctx *ctx, const mf_sparse *observed, const mf_asd_opts *opts,
                            float *X, float *Y, mf_memory where, mf_asd_report *report);

/* ------------------------------------------------------------------------------------- */
/* Implicit feedback: confidence-weighted ALS (since 0.3)                                */
/* ------------------------------------------------------------------------------------- */

/* How a stored interaction's value r (a play count, a click count; a pattern's are 1)
 * becomes its confidence c. Unstored pairs have confidence 1 and preference 0. */
typedef enum mf_ials_confidence {
    /* c = 1 + alpha r (Hu, Koren & Volinsky). implicit (0.5 and later) uses alpha r itself
     * as the confidence: its model is this one on values (alpha r - 1) / alpha. */
    MF_IALS_CONFIDENCE_LINEAR = 0,
    MF_IALS_CONFIDENCE_LOG = 1 /* c = 1 + alpha log(1 + r / epsilon)                    */
} mf_ials_confidence;

typedef enum mf_ials_init {
    /* Every entry of U and V uniform in [0, 0.01) from the context's seed (implicit's). */
    MF_IALS_INIT_RANDOM = 0,
    /* U and V as the caller passes them: a warm start that continues a run. */
    MF_IALS_INIT_GIVEN = 1
} mf_ials_init;

typedef struct mf_ials_opts {
    size_t struct_size;            /* sizeof(mf_ials_opts), set by mf_ials_opts_init       */
    int rank;                      /* k, 1..512; default 64                                */
    float lambda;                  /* >= 0, the ridge penalty of every row; default 0.01   */
    float alpha;                   /* >= 0, the confidence scale; default 1                */
    mf_ials_confidence confidence; /* default MF_IALS_CONFIDENCE_LINEAR                    */
    float epsilon;                 /* > 0, MF_IALS_CONFIDENCE_LOG's scale; default 1       */
    int iterations;                /* >= 1 full sweeps (users, then items); default 15     */
    mf_ials_init init;             /* default MF_IALS_INIT_RANDOM                          */
    /* MF_ALS_SOLVER_EXACT: each row's k x k system solved by Cholesky; CG: cg_steps
     * conjugate-gradient steps from the row's previous factors, never forming the system
     * (implicit's solver); AUTO (default): CG. */
    mf_als_solver solver;
    int cg_steps;            /* 1..64; default 3 (implicit's)                               */
    mf_progress_fn progress; /* optional; train_rmse carries the loss per pair (below)      */
    void *progress_user;     /* passed to progress                                          */
    /* 1: U and V are kept in half precision (IEEE binary16) during the run, the arithmetic
     * in float: half the memory and the bandwidth of the factors, for matrices whose
     * factors would not fit otherwise. Every stored value is rounded to half (the CPU
     * engine rounds where the CUDA one stores), so the result is a half-precision model
     * handed over as floats. 0 (default): float. */
    int fp16;
} mf_ials_opts;

typedef struct mf_ials_report {
    size_t struct_size;       /* set by the caller: sizeof(mf_ials_report)                 */
    int iterations;           /* completed                                                 */
    double seconds;           /* the whole call                                            */
    double iteration_seconds; /* the iterations alone                                      */
    double loss;              /* the objective over users x items pairs, after the last    */
                              /* completed iteration (NaN: not computed, no progress fn;   */
                              /* in a group computed on every rank when any rank has one)  */
    mf_als_solver solver;     /* EXACT or CG (AUTO resolved)                               */
    size_t peak_device_bytes; /* the context's peak during the call; 0 on the CPU          */
} mf_ials_report;

MF_API void mf_ials_opts_init(mf_ials_opts *opts);
MF_API void mf_ials_opts_init_sized(mf_ials_opts *opts, size_t size);
#define mf_ials_opts_init(opts) mf_ials_opts_init_sized((opts), sizeof(mf_ials_opts))

/* Implicit-feedback ALS (Hu, Koren & Volinsky, "Collaborative Filtering for Implicit
 * Feedback Datasets", 2008): minimize over U (users x k) and V (items x k)
 *     sum over ALL (u, i) of c_ui (p_ui - U_u . V_i)^2 + lambda (|U|^2 + |V|^2)
 * where p_ui = 1 and c_ui the confidence of a stored interaction, p_ui = 0 and c_ui = 1
 * elsewhere. The users x items pairs are never formed: a half-step builds V^T V once and
 * adds each row's sparse correction sum (c - 1) V_i V_i^T over its stored items. A row
 * without interactions gets zeros. U and V are row-major with leading dimension k in `where`
 * memory, read with MF_IALS_INIT_GIVEN and written with the result. The loss reported
 * (report->loss, progress's train_rmse) is the objective divided by users x items.
 *
 * Errors (U and V untouched): NULL arguments, rank outside 1..512, lambda or alpha < 0 or not
 * finite, epsilon <= 0, iterations < 1, cg_steps outside 1..64, an unknown enum value:
 * MF_ERR_INVALID_ARGUMENT; a stored value that is negative (it would make a confidence
 * below 1 or not a number) or whose confidence is not finite, or a given factor that is
 * not finite: MF_ERR_INVALID_DATA naming it; a system that is not positive definite
 * (lambda = 0): MF_ERR_NUMERIC naming the row; MF_ALS_SOLVER_EXACT on a CUDA context at a
 * rank whose system does not fit the device's shared memory (past 224 on Hopper, 199 on
 * the A100, 154 on sm_86/89): MF_ERR_UNSUPPORTED. A cancelled run hands over its last
 * completed iteration. Collective over a group of contexts (below): each rank keeps only the
 * interactions its rows' solves read (its users' rows, its items' columns), and takes input
 * already split over the ranks (mf_sparse_set_part): the factors and the loss are one
 * context's bit for bit either way, the loss the same on every rank. */
MF_API mf_status mf_ials_run(mf_ctx *ctx, const mf_sparse *interactions, const mf_ials_opts *opts,
                             float *U, float *V, mf_memory where, mf_ials_report *report);

/* Factors for users the model has not seen (fold-in): each row of `interactions` (new
 * users x the model's items) is solved exactly against the trained item factors V (items x
 * k, leading dimension k) under opts's rank, lambda, alpha, confidence and epsilon (the
 * other fields are not read), into the row of U (rows x k, leading dimension k): what an
 * exact user half-step computes from V (implicit's recalculate_user; a run with the CG
 * solver stops short of it). U and V in `where` memory. On a CUDA context a rank past the
 * device's exact solver runs on the CPU. Errors as mf_ials_run's on those fields; U
 * untouched on failure. */
MF_API mf_status mf_ials_fold_in(mf_ctx *ctx, const mf_sparse *interactions,
                                 const mf_ials_opts *opts, const float *V, float *U,
                                 mf_memory where);

/* ------------------------------------------------------------------------------------- */
/* Recommendations and ranking metrics (since 0.3)                                       */
/* ------------------------------------------------------------------------------------- */

/* Factors for users an explicit-ratings model has not seen (fold-in): each row of `ratings`
 * (new users x the model's items) solved exactly against the model's V, mean and item
 * biases, minimizing
 *     sum over the row's ratings of (r - mean - b_i - b_u - x . V_i)^2 + lambda |x|^2
 *         + lambda_bias b_u^2
 * (b_u and lambda_bias only when the model has user biases), into U (rows x model->k,
 * leading dimension k) and user_bias (rows floats; required exactly when the model has user
 * biases) in model->where memory. This is mf_als_run's user half-step with unweighted
 * penalties (MF_ALS_WEIGHT_NONE); a row without ratings gets zeros. U is not read; model->U
 * must still be a valid array. On a CUDA context the solves run on the CPU (staged). Errors
 * (outputs untouched): a bad model (as mf_predict) or one with k > 1024, ratings with another
 * number of columns, lambda or lambda_bias < 0 or not finite: MF_ERR_INVALID_ARGUMENT; a
 * value of V or of the item biases that is not finite: MF_ERR_INVALID_DATA naming it; a
 * system that is not positive definite (lambda = 0 with too few ratings): MF_ERR_NUMERIC
 * naming the row. */
MF_API mf_status mf_fold_in_users(mf_ctx *ctx, const mf_model *model, const mf_sparse *ratings,
                                  float lambda, float lambda_bias, float *U, float *user_bias);

/* Top-N items for each of n users: out_items[b * N + j] is user users[b]'s j-th best item
 * by the model's score (mf_predict's: mean + biases + U_u . V_i; implicit models have no
 * biases), out_scores the same places' scores. Ties order by the smaller item id. With
 * `exclude` (NULL: none), a matrix whose row u lists user u's items to leave out (the
 * training interactions; rows past its end exclude nothing), those items are never
 * returned. A user with fewer than N candidates gets item -1 and score -INFINITY in the
 * places left. users, out_items and out_scores live in model->where memory. A user >=
 * model->users is unseen: scored by mean + item bias. Errors (outputs untouched): bad
 * model (as mf_predict), n < 0, N < 1, NULL arrays when n > 0, `exclude` whose columns are
 * not the model's items: MF_ERR_INVALID_ARGUMENT; a negative user id: MF_ERR_INVALID_DATA
 * naming its position. On a CUDA context N up to 128 runs in one fused kernel (as far as
 * the device's shared memory holds the lists), larger N on the CPU. */
MF_API mf_status mf_recommend(mf_ctx *ctx, const mf_model *model, int64_t n, const int32_t *users,
                              const mf_sparse *exclude, int N, int32_t *out_items,
                              float *out_scores);

/* Top-N most similar items to each of n items by the cosine of their rows of V (an item
 * with a zero row has similarity 0 to all), the item itself left out; layout, ties and
 * padding as mf_recommend. Item ids >= model->items or negative: MF_ERR_INVALID_DATA. */
MF_API mf_status mf_similar_items(mf_ctx *ctx, const mf_model *model, int64_t n,
                                  const int32_t *items, int N, int32_t *out_items,
                                  float *out_scores);

/* Ranking quality of a model on held-out interactions, as implicit's ranking_metrics_at_k
 * computes it, so that the numbers compare: for each user with held-out items T_u (a row
 * of `test`), the top N recommendations excluding the user's `train` items; precision@N
 * is the hits over sum min(N, |T_u|); MAP@N and NDCG@N average per user (AP over
 * min(N, |T_u|); DCG with 1 / log2(rank + 1) over the ideal); AUC per user from the top-N
 * list, the unlisted positives counted as ranked in the middle of the rest. */
typedef struct mf_ranking {
    size_t struct_size; /* set by the caller: sizeof(mf_ranking)                           */
    double precision;   /* precision@N                                                     */
    double map;         /* MAP@N                                                           */
    double ndcg;        /* NDCG@N                                                          */
    double auc;         /* AUC                                                             */
    int64_t users;      /* users with held-out items (those averaged over)                 */
} mf_ranking;

/* `test` and `train` (NULL: nothing excluded) are users x items with the model's items
 * as columns. Errors: as mf_recommend; `out`'s struct_size too small. */
MF_API mf_status mf_ranking_evaluate(mf_ctx *ctx, const mf_model *model, const mf_sparse *train,
                                     const mf_sparse *test, int N, mf_ranking *out);

/* ===================================================================================== */
/* EXPERIMENTAL                                                                          */
/* ===================================================================================== */
/* Knobs whose shape may still change in a minor release (see "Stability" at the top): the
 * values of the option fields below an EXPERIMENTAL line. They are plain ints in their
 * structs, so that the stable part of a struct names no experimental type. */

/* ---- Groups of contexts: one fit over several GPUs or processes --------------------
 * A group's contexts run one fit together. Each context is a rank, driven by its own
 * thread (or process, or host). A collective entry point (mf_als_run, mf_ials_run,
 * mf_sgd_hogwild_run, mf_asd_run) is called on every rank at the same time with the same data (each
 * rank its own mf_sparse of the same entries), the same options and the same context seed,
 * and every rank returns the whole result. mf_als_run and mf_ials_run: each rank solves a
 * contiguous share of the rows, balanced by work, and the ranks exchange the solved
 * factors after every half step (the factors are one context's, bit for bit; over a group,
 * mf_ials_run needs each rank's share of the interactions to fit on its device). mf_als_run
 * with sharded users (mf_als_layout, AUTO's choice for tall shapes) keeps U's rows on their
 * owner and sums the item systems instead: one context's factors to rounding.
 * mf_sgd_hogwild_run: each rank keeps a share of the users and blocks of items rotate between the
 * ranks within an epoch, so no factor row is written by two ranks at once. mf_asd_run: each rank
 * takes a share of the rows of the observed entries (and of X), Y and the step lengths are summed
 * over the ranks; every rank returns the same X and Y, one context's up to the order of
 * the sums (every start and rank continuation included).
 * A collective call first checks that the ranks agree on shapes, options and seed
 * (MF_ERR_INVALID_ARGUMENT on every rank when they do not); a failure on one rank fails
 * the call on every rank. A call made on some ranks only waits for the others forever, as
 * may the others when NCCL or MPI itself fails on one rank. The run that is not collective yet
 * (mf_bmf_run) returns MF_ERR_UNSUPPORTED on a context in a group of more than one; every
 * other call (mf_ials_fold_in among them) works on its own context alone. */

/* Make ctxs[0..n) the ranks 0..n-1 of one group inside this process. CUDA contexts, on n
 * distinct devices, get NCCL communicators (ncclCommInitAll; libnccl.so.2 is loaded on
 * first use, and MFACT_NCCL_LIBRARY may name another file). CPU contexts exchange through
 * shared memory. A context leaves its group when it is destroyed: destroy a group's
 * contexts after its last collective call. Failures are recorded on ctxs[0] (on the
 * thread's slot, mf_ctx_last_error(NULL), when ctxs is NULL, n < 1 or ctxs[0] is NULL):
 * MF_ERR_INVALID_ARGUMENT (n outside 1..1024, a NULL or repeated context, one already in a
 * group, mixed backends, two on one device), MF_ERR_UNSUPPORTED (NCCL not loadable). */
MF_API mf_status mf_ctx_join_local(mf_ctx *const *ctxs, int n);

/* Make ctx a rank of the caller's NCCL communicator: an ncclComm_t on ctx's device, made by
 * the caller's launcher (MPI with ncclCommInitRank, torch.distributed, ...). The rank and
 * size are the communicator's. The caller keeps ownership and destroys the communicator
 * after the context. NULL leaves the group (of either kind); the group does not shrink, so
 * its other ranks must make no collective call after that. MF_ERR_UNSUPPORTED on a CPU
 * context or without NCCL; MF_ERR_INVALID_ARGUMENT when the communicator is on another
 * device. */
MF_API mf_status mf_ctx_set_nccl_comm(mf_ctx *ctx, void *nccl_comm);

/* Make the CPU context ctx a rank of the caller's MPI communicator, one rank per process:
 * mpi_comm points to an MPI_Comm (a pointer to the handle, so that this header needs no
 * mpi.h). Collective: every process of the communicator calls it at once, after MPI_Init.
 * The rank and size are the communicator's. The library works on its own duplicate
 * (MPI_Comm_dup), so its messages never meet the caller's; the caller may free its
 * communicator at once. Host buffers travel through MPI collectives; the sums are made in
 * rank order, so every rank gets the same bits as a group of threads of that size
 * (mf_ctx_join_local). The library calls MPI only from the thread that calls it, never
 * from its worker threads (MPI_THREAD_FUNNELED is enough from the main thread; several
 * threads of one process using mfact's MPI groups at once need MPI_THREAD_MULTIPLE). The
 * context lets go of the duplicate (MPI_Comm_free, collective in MPI) when it is destroyed
 * or leaves: destroy a group's contexts on every rank, before MPI_Finalize. NULL leaves the
 * group (of either kind), as with mf_ctx_set_nccl_comm. A failure on one rank fails the call
 * on every rank (the others: "rank r of n failed"), and no rank joins.
 * MF_ERR_INVALID_ARGUMENT: ctx NULL, already in a group, MPI_COMM_NULL or an
 * intercommunicator. MF_ERR_UNSUPPORTED: a CUDA context (CUDA contexts exchange through
 * NCCL), a library built without MPI (the MFACT_MPI build option), MPI not initialized or
 * already finalized. A failed MPI call, then or during a collective run, is MF_ERR_IO with
 * MPI's message. */
MF_API mf_status mf_ctx_set_mpi_comm(mf_ctx *ctx, const void *mpi_comm);

/* ctx's rank and its group's size: 0 and 1 outside a group. */
MF_API mf_status mf_ctx_rank(const mf_ctx *ctx, int *rank, int *size);

/* What this rank's part in its group's collectives has cost since it joined: read it
 * before and after a call to see that call's share, beside the report's kernel times. */
typedef struct mf_group_stats {
    size_t struct_size; /* set by the caller: sizeof(mf_group_stats) */
    /* Host time in the agreements and reductions of a few values (a failure, a loss, a
     * stop): a round trip between the ranks, plus this rank waiting for the slowest one
     * (and, over NCCL, for the device work it queued before). */
    double wait_seconds;
    /* Time moving data between the ranks (factor gathers, ring shifts, sums of buffers,
     * entries moving to their owners): over NCCL the device time between CUDA events
     * around each exchange (those completed when read), elsewhere the host time. */
    double exchange_seconds;
    int64_t exchange_bytes; /* received from other ranks by those exchanges (a sum: its buffer) */
    int64_t calls;          /* collective calls made */
} mf_group_stats;

/* ctx's mf_group_stats into *stats (stats->struct_size set by the caller: a smaller, older
 * struct gets its prefix, a larger one this version's fields). Zeros outside a group.
 * MF_ERR_INVALID_ARGUMENT: ctx or stats NULL, or struct_size not a struct's size. */
MF_API mf_status mf_ctx_group_stats(const mf_ctx *ctx, mf_group_stats *stats);

/* ---- One process per GPU ----------------------------------------------------------
 * The caller's own hand-over: rank 0 makes an NCCL id (mf_nccl_make_id), the caller carries
 * its MF_NCCL_ID_BYTES bytes to every rank (MPI_Bcast, torch.distributed's
 * broadcast_object_list, a file), and every rank joins with it (mf_ctx_join_nccl_id). */
#define MF_NCCL_ID_BYTES 128

/* A new NCCL id (ncclGetUniqueId) into id[0..bytes), bytes >= MF_NCCL_ID_BYTES (the rest
 * zeroed). ctx takes the failure: MF_ERR_UNSUPPORTED without NCCL or on a CPU context,
 * MF_ERR_INVALID_ARGUMENT for a NULL id or too few bytes. */
MF_API mf_status mf_nccl_make_id(mf_ctx *ctx, void *id, size_t bytes);

/* Make ctx rank `rank` of `size` over rank 0's NCCL id (ncclCommInitRank on ctx's device;
 * collective: it returns once every rank has called it). The communicator is the
 * context's, destroyed with it. MF_ERR_INVALID_ARGUMENT (rank outside 0..size-1, size < 1,
 * NULL id, bytes < MF_NCCL_ID_BYTES, a context already in a group), MF_ERR_UNSUPPORTED (a
 * CPU context, no NCCL), MF_ERR_CUDA (NCCL failed; the other ranks may then wait inside
 * NCCL). */
MF_API mf_status mf_ctx_join_nccl_id(mf_ctx *ctx, const void *id, size_t bytes, int rank, int size);

/* ---- One process per GPU, started by a launcher ------------------------------------
 * What the usual launchers tell each process they start, tried in this order: torchrun
 * (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE,
 * _LOCAL_RANK), MPICH's and Intel MPI's (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID) and Slurm's
 * srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID). MF_OK with rank 0 of size 1
 * (local rank 0) when none is found; MF_ERR_INVALID_ARGUMENT naming the variable when one
 * is malformed (not an integer, a rank outside 0..size-1). Any output may be NULL. The
 * local rank is the usual choice of device (mf_ctx_opts.device). */
MF_API mf_status mf_launch_detect(int *rank, int *size, int *local_rank);

/* Make ctx a rank of the processes a launcher started (mf_launch_detect; MF_OK and no
 * group when it started one). Every rank calls it; on a CUDA context rank 0 makes an NCCL
 * id and writes it to the file `rendezvous` (NULL: the environment's MFACT_RENDEZVOUS),
 * which every rank must see (a path under /tmp on one host, a shared file system across
 * hosts); the other ranks wait for it up to timeout_seconds (0: 300 s) and then every
 * rank joins the communicator (ncclCommInitRank, owned by the context). Rank 0 creates the
 * file exclusively (mode 0600) and removes it once the ranks have joined. A file is taken
 * only when it is a regular file of this user's that no one else may read or write, of
 * this launch (the launcher's job id where it gives a real one: TORCHELASTIC_RUN_ID but
 * "none", Open MPI's job id, PMIX_NAMESPACE, Slurm's job and step, with the restart count;
 * or the caller's MFACT_RUN_ID), and, when written on this host, by a process still alive.
 * A crashed launch's file on this host is replaced; one from another host fails rank 0
 * with MF_ERR_IO naming it, and with no launch id a waiting rank on another host cannot
 * tell a stale file from a fresh one: give such launches a fresh path or MFACT_RUN_ID.
 * MF_ERR_UNSUPPORTED on a CPU context (CPU processes join through mf_ctx_set_mpi_comm) or
 * without NCCL; MF_ERR_IO when the file cannot be written or the wait times out. As with
 * mf_ctx_set_nccl_comm, a rank whose NCCL fails may leave the others waiting inside NCCL. */
MF_API mf_status mf_ctx_join_launched(mf_ctx *ctx, const char *rendezvous, double timeout_seconds);

/* mf_sgd_opts.order: the order in which an epoch visits the ratings. */
typedef enum mf_sgd_order {
    /* Each user's ratings are shuffled once per run and cut into chunks of at most 64;
     * every epoch visits the chunks in a new random order, and a worker keeps the user's
     * factor row in registers (float) through its chunk and stores it once at the end.
     * The item factors are read and written at every update. */
    MF_SGD_ORDER_USER_CHUNKS = 0,
    /* cuMF_SGD's order: the ratings shuffled once per run, cut into chunks of 64
     * consecutive ones, visited in a new random order every epoch; both factor rows are
     * read and written at every update. */
    MF_SGD_ORDER_RATINGS = 1
} mf_sgd_order;

/* mf_bmf_opts.flip: how a line of a Boolean factor moves in a sweep (with
 * flip_probability, and the temperature schedule in mf_bmf_opts). */
typedef enum mf_bmf_flip {
    /* Each line (row of A, column of B) evaluates the exact change of the weighted error
     * for flipping each of its k bits and flips the best one when it lowers the error
     * (ties go to a random bit). */
    MF_BMF_FLIP_SINGLE = 0,
    /* Each bit of a line flips with probability flip_probability; the flips of a line are
     * one move, accepted when its exact change lowers the error. */
    MF_BMF_FLIP_PER_BIT = 1
} mf_bmf_flip;

#ifdef __cplusplus
}
#endif
#endif /* MFACT_H */
