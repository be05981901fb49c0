/* Implicit-feedback ALS inside the library: the driver (ials.c) runs half-steps against an
 * engine, the CPU one (ials_cpu.c) or the CUDA one (ials.cu), which owns working copies of
 * both factors. Both build each row's system the same way (ials_confidence below). */
#ifndef MF_IALS_INTERNAL_H
#define MF_IALS_INTERNAL_H
#include <math.h>
#include <stdint.h>

#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA engine's CG cuts a row of more than IALS_SEGMENT interactions into segments
 * (ials_kernels.cuh, cg_args): short enough that the heaviest row's warps finish with the
 * rest, long enough that a partial sum (kp floats) costs little beside its items' rows. */
#define IALS_SEGMENT 64

/* The users or the items: which half of an iteration. */
typedef enum mf_ials_side { MF_IALS_USERS = 0, MF_IALS_ITEMS = 1 } mf_ials_side;

/* What both engines start from: the checked options and the starts (host, rows x k). */
typedef struct mf_ials_setup {
    mf_ctx *ctx;
    const char *fn; /* the public function, for messages */
    mf_sparse *R;   /* users x items; caches (transpose, device copies) may be added */
    int k;
    float lambda, alpha, epsilon;
    int log_confidence; /* MF_IALS_CONFIDENCE_LOG */
    int cg_steps;       /* 0: exact (Cholesky); n > 0: n CG steps from the current row */
    int fp16;           /* factors stored in half precision (mf_ials_opts.fp16) */
    const float *U0;    /* users x k, or NULL: zeros (fold-in solves U from V alone) */
    const float *V0;    /* items x k */
    /* The rows half_step solves, [lo[side], hi[side]) of each side: every row, or a rank's
     * share in a group (core/ranks.h). */
    int32_t lo[2], hi[2];
    /* The interactions each side reads: part[MF_IALS_USERS] those of users [lo, hi) (its
     * CSR), part[MF_IALS_ITEMS] those of items [lo, hi) (its transpose), each of R's shape
     * and in R's order: a rank of a group holds its shards only (cut from R, or gathered
     * from every rank's part of split input, where no rank holds R). NULL: R itself, whose
     * shape alone is read then. */
    mf_sparse *part[2];
} mf_ials_setup;

/* The matrix whose interactions side w reads (mf_ials_setup.part, else R). */
static inline mf_sparse *mf_ials_part(const mf_ials_setup *s, int w)
{
    return s->part[w] ? s->part[w] : s->R;
}

typedef struct mf_ials_engine mf_ials_engine;
/* A half step of `side` solves its rows against G = F^T F of the other side's factors F.
 * The engine cuts F's rows into chunks that depend only on the row count and the rank,
 * never on the device or the group, forms each chunk's partial Gram, and adds the partials
 * in chunk order: so a group whose ranks each form a share of the chunks and exchange them
 * (ials.c) has one context's G bit for bit, and with it one context's factors. */
struct mf_ials_engine {
    /* Where the partials of the Gram that `side` is solved against lie: *chunks rows of
     * *row_bytes at *parts (device memory on the CUDA engine), which a group's ranks
     * exchange. */
    void (*gram_parts)(mf_ials_engine *e, mf_ials_side side, void **parts, size_t *row_bytes,
                       int64_t *chunks);
    /* Form the partials of chunks [first, last). */
    mf_status (*gram)(mf_ials_engine *e, mf_ials_side side, int64_t first, int64_t last);
    /* G from every chunk's partial, then the rows [lo[side], hi[side]) solved. A system that
     * breaks down may come out only at the next check (the CUDA engine's word stays on the
     * device). */
    mf_status (*solve)(mf_ials_engine *e, mf_ials_side side);
    /* The first breakdown of the solves since the last check, users before items; *broke:
     * the side it was on. */
    mf_status (*check)(mf_ials_engine *e, mf_ials_side *broke);
    /* The objective's terms (mfact.h's mf_ials_run) of the current factors, in double,
     * against V's Gram (formed here whole, as every rank holds all of V): each user of
     * [lo[users], hi[users]) its x^T G x + lambda |x|^2 + its stored pairs' terms, into
     * row[0 .. hi - lo); and *items, the items' penalty lambda |V|^2. */
    mf_status (*loss_terms)(mf_ials_engine *e, double *row, double *items);
    /* The objective per pair from every user's terms (row[0 .. users)) and the items'
     * penalty, added in this engine's fixed order: so the ranks of a group, each with its
     * users' terms and the others' gathered, all get one context's loss bit for bit. */
    double (*loss_total)(const mf_ials_engine *e, const double *row, double items);
    /* The working factors into the caller's U and V (rows x k; either may be NULL), in
     * `where` memory. */
    mf_status (*finish)(mf_ials_engine *e, float *U, float *V, mf_memory where);
    /* The working factors of `side` (rows of row_bytes; device memory on the CUDA engine),
     * which a group's ranks exchange after a half step. */
    void (*shared)(mf_ials_engine *e, mf_ials_side side, void **factors, size_t *row_bytes);
    void (*destroy)(mf_ials_engine *e);
};

mf_status mf_ials_cpu_engine(const mf_ials_setup *s, mf_ials_engine **out);
/* CUDA builds: ials.cu; without CUDA the stub in ials_absent.c. The exact solver keeps a
 * row's system in shared memory: a rank past what the device holds (224 on Hopper, 199 on
 * the A100, 154 on sm_86/89) is MF_ERR_UNSUPPORTED. */
mf_status mf_cuda_ials_engine(const mf_ials_setup *s, mf_ials_engine **out);

/* x rounded to the nearest IEEE binary16 value (ties to even; overflow to infinity), as a
 * float: the CPU engine's twin of the CUDA engine's half-precision stores. */
float mf_ials_round_half(float x);

/* c - 1 for a stored value r: the weight of the row's correction term. */
#ifdef __CUDACC__
__host__ __device__
#endif
    static inline float
    mf_ials_weight(float r, float alpha, float epsilon, int log_confidence)
{
    return log_confidence ? alpha * log1pf(r / epsilon) : alpha * r;
}

#ifdef __cplusplus
}
#endif
#endif
