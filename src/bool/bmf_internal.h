/* Boolean matrix factorization inside the library: the driver (bmf.c) owns the options, the
 * schedule and the stopping rules; an engine (bmf_cpu.c, bmf.cu) owns C in bits and every
 * instance's factors, and runs sweeps. The rules both engines follow are in bmf_rules.h. */
#ifndef MF_BMF_INTERNAL_H
#define MF_BMF_INTERNAL_H
#include <stdint.h>

#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The two half-sweeps: lines are the rows of A, or the columns of B. */
/* How the CUDA engine holds C, per side (by rows, by columns): AUTO takes for each side
 * whichever layout is smaller. DENSE: every line's words of the other side's bits. SPARSE:
 * only a line's nonzero words, with their indices (12 bytes a word), so memory follows the
 * ones rather than rows x columns. The sweeps read either; the counts are the same. */
typedef enum mf_bmf_c_layout {
    MF_BMF_C_AUTO = 0,
    MF_BMF_C_DENSE = 1,
    MF_BMF_C_SPARSE = 2
} mf_bmf_c_layout;

typedef enum mf_bmf_side { MF_BMF_ROWS = 0, MF_BMF_COLS = 1 } mf_bmf_side;

/* What an engine starts from: checked options and, per init, what it needs. */
typedef struct mf_bmf_setup {
    mf_ctx *ctx;
    mf_sparse *C;
    int k, instances;
    uint64_t seed;
    mf_bmf_flip flip;
    uint32_t flip_p24; /* MF_BMF_FLIP_PER_BIT: probability in 2^-24 steps */
    mf_bmf_init init;
    uint32_t init_p24; /* MF_BMF_INIT_RANDOM */
    /* MF_BMF_INIT_SAMPLE: factor l of instance q starts as B's row holding the columns
     * sample_cols[sample_ptr[q k + l] .. sample_ptr[q k + l + 1]), A at zero. NULL when
     * C has no ones (then every factor starts at zero). */
    const int64_t *sample_ptr;
    const int32_t *sample_cols;
    /* MF_BMF_INIT_GIVEN and _ASSO: host copies, one for all instances or (with
     * given_per_instance) instance q's at q * rows * kw and q * cols * kw words. */
    const uint64_t *A0, *B0;
    int given_per_instance;
    mf_bmf_c_layout c_layout; /* how the CUDA engine holds C (the CPU's reads C's ones) */
} mf_bmf_setup;

/* The schedule of one sweep. */
typedef struct mf_bmf_sweep {
    int64_t wq;         /* false-negative weight times BMF_WSCALE */
    double temperature; /* 0: no Metropolis moves */
} mf_bmf_sweep;

typedef struct mf_bmf_engine mf_bmf_engine;
struct mf_bmf_engine {
    int instances;
    /* Counts (fp, fn) of every instance's initial factors: instances x 2. */
    int64_t *initial;
    /* Run sweeps first .. first + count - 1 on every instance (rows of A, then columns of
     * B), writing fp and fn after each into hist (count x instances x 2). After each sweep
     * an instance whose fp + fn is below its best so far keeps a copy of its factors.
     * deadline (mf_seconds(); 0: none) is checked between launches: once it has passed,
     * the sweep under way ends early (the CPU's after an instance's half-sweep, the
     * GPU's after its two half-sweeps), its hist row holding every instance's counts as
     * they stand, and *done says how many sweeps hist holds. */
    mf_status (*sweeps)(mf_bmf_engine *e, int first, int count, const mf_bmf_sweep *plan,
                        double deadline, int64_t *hist, int *done);
    /* Count fp and fn of instance q's current factors from scratch (the debug check). */
    mf_status (*recount)(mf_bmf_engine *e, int q, int64_t *fp, int64_t *fn);
    /* Write instance q's best factors to the caller's A and B in `where` memory. */
    mf_status (*finish)(mf_bmf_engine *e, int q, uint64_t *A, uint64_t *B, mf_memory where);
    void (*destroy)(mf_bmf_engine *e);
};

mf_status mf_bmf_cpu_engine(const mf_bmf_setup *s, mf_bmf_engine **out);
/* CUDA builds: bmf.cu; without CUDA the stub in bmf_absent.c. */
mf_status mf_cuda_bmf_engine(const mf_bmf_setup *s, mf_bmf_engine **out);

/* What tests and benches may ask of one run beyond its options. recount: after every sweep
 * each instance's error is also counted from scratch, and a difference from the incremental
 * count fails the run with MF_ERR_INTERNAL. c_layout: the CUDA engine's layout of C. */
typedef struct mf_bmf_debug {
    int recount;
    mf_bmf_c_layout c_layout;
} mf_bmf_debug;

/* mf_bmf_run with `debug` (NULL: as mf_bmf_run). */
mf_status mf_bmf_run_checked(mf_ctx *ctx, const mf_sparse *C, const mf_bmf_opts *opts,
                             uint64_t *A_bits, uint64_t *B_bits, mf_memory where,
                             mf_bmf_report *report, const mf_bmf_debug *debug);

/* Sweeps an engine is asked to run at once, at most (the driver's group size). */
#define MF_BMF_GROUP_MAX 16

/* The words of one line of a rank-k factor. */
static inline int mf_bmf_words(int k)
{
    return (k + 63) / 64;
}

#ifdef __cplusplus
}
#endif
#endif
