/* Recommendations inside the library: recommend.c checks the public calls and hands a
 * checked mf_rec_call to the CPU engine (recommend_cpu.c) or the CUDA one (recommend.cu);
 * metrics.c evaluates rankings through the same call. */
#ifndef MF_RECOMMEND_INTERNAL_H
#define MF_RECOMMEND_INTERNAL_H
#include <stdint.h>

#include "core/sparse.h"
#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mf_rec_kind {
    MF_REC_USERS = 0,  /* mf_recommend: top-N items by the model's score for users   */
    MF_REC_SIMILAR = 1 /* mf_similar_items: top-N items by the cosine of V's rows    */
} mf_rec_kind;

/* One checked call: the model's arrays in model.where memory, the ids and the outputs in
 * `where` memory (which may differ: ranking evaluation asks for host outputs of a device
 * model). Ids are in range for MF_REC_SIMILAR and >= 0 for MF_REC_USERS. */
typedef struct mf_rec_call {
    mf_model model;
    mf_rec_kind kind;
    int64_t n;
    const int32_t *ids;
    mf_sparse *exclude; /* users x items, or NULL (MF_REC_USERS only) */
    int N;
    int32_t *out_items;
    float *out_scores;
    mf_memory where;
} mf_rec_call;

mf_status mf_recommend_cpu(mf_ctx *ctx, const mf_rec_call *c);
/* CUDA builds: recommend.cu; without CUDA the stub in recommend_absent.c. */
mf_status mf_cuda_recommend(mf_ctx *ctx, const mf_rec_call *c);

/* A host copy of `bytes` at *p when `where` is the device (*p then points at it, and
 * *owned is what to free; both unchanged for host memory or a NULL *p). */
mf_status mf_rec_host_copy(mf_ctx *ctx, const void **p, size_t bytes, mf_memory where,
                           void **owned);

/* The CPU engine on a CUDA context (N beyond the fused kernel's): device arrays are copied
 * to the host and the outputs back. */
mf_status mf_recommend_cpu_staged(mf_ctx *ctx, const mf_rec_call *c);

/* The engine for the context's backend. */
mf_status mf_recommend_dispatch(mf_ctx *ctx, const mf_rec_call *c);

/* Whether candidate (sa, ia) ranks before (sb, ib): the higher score, then the smaller id. */
#ifdef __CUDACC__
__host__ __device__
#endif
    static inline int
    mf_rec_before(float sa, int32_t ia, float sb, int32_t ib)
{
    return sa > sb || (sa == sb && ia < ib);
}

#ifdef __cplusplus
}
#endif
#endif
