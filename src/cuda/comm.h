/* The exchange between the ranks of a group of contexts (mf_ctx_join_local,
 * mf_ctx_set_nccl_comm): the few collectives a distributed fit needs, behind one table so
 * that the algorithms run the same code over NCCL (src/cuda/nccl_comm.cu, device buffers)
 * and over the in-process stand-in (src/core/comm_local.c, host buffers: CPU contexts, and
 * the tests of CI, which has no GPU). Plain C; it lives at the floor (src/cuda) because
 * its NCCL implementation does, and src/core includes it from above. */
#ifndef MF_CUDA_COMM_H
#define MF_CUDA_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most values one max_i64 or sum_f64 call carries. */
#define MF_COMM_MAX_VALUES 64

typedef struct mf_comm mf_comm;

typedef struct mf_comm_ops {
    /* In place on every rank: bounds (size + 1 entries, the same on every rank) cut buf
     * into `size` blocks of rows, row_bytes each; block b, as its owner holds it, is copied
     * into every other rank's buf. The owner of block b is owner[b] (a permutation of the
     * ranks), or rank b when owner is NULL. Device memory over NCCL, host memory over the
     * stand-in; queued on ctx's stream over NCCL. */
    mf_status (*allgatherv)(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                            size_t row_bytes, const int *owner);
    /* v[0..n) (host, n <= MF_COMM_MAX_VALUES) becomes the maximum over the ranks. */
    mf_status (*max_i64)(mf_comm *c, mf_ctx *ctx, int64_t *v, int n);
    /* v[0..n) (host) becomes the sum over the ranks, the same bits on every rank. */
    mf_status (*sum_f64)(mf_comm *c, mf_ctx *ctx, double *v, int n);
    /* buf[0..count), floats (is_double 0) or doubles, becomes in place the sum over the
     * ranks, the same bits on every rank: device memory over NCCL, queued on ctx's stream
     * (nothing waits for it); host memory over the stand-in. */
    mf_status (*sum_buffer)(mf_comm *c, mf_ctx *ctx, void *buf, size_t count, int is_double);
    /* Host memory on every backend (NCCL stages it through the device): send holds one
     * block for each rank in rank order, send_bytes[r] bytes for rank r; recv receives
     * every rank's block for this one in rank order, recv_bytes[q] bytes from rank q (which
     * must be q's send_bytes[this rank]). A group's ratings move to their owners with it. */
    mf_status (*alltoallv)(mf_comm *c, mf_ctx *ctx, const void *send, const int64_t *send_bytes,
                           void *recv, const int64_t *recv_bytes);
    /* In place, a step of a ring: bounds (size + 1 entries, the same on every rank) cut buf
     * into `size` blocks of rows, row_bytes each; this rank sends its block `send` to rank
     * - 1 and receives block `recv` from rank + 1 (mod size), where that rank sends it (its
     * `send`). Memory as allgatherv's, queued on ctx's stream over NCCL. One block moves
     * a step: SGD's item blocks travel with it (a broadcast of every block had moved size
     * - 1 times more). */
    mf_status (*shift)(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds, size_t row_bytes,
                       int send, int recv);
    /* The context lets go of its rank (its destruction, or leaving the group). */
    void (*release)(mf_comm *c);
    /* Optional (NULL where every op is synchronous on the host): the device seconds that the
     * queued exchanges (allgatherv, sum_buffer, shift) took so far, those that completed,
     * timed by events around each. Their host time is then not an exchange's cost. */
    double (*device_seconds)(mf_comm *c);
} mf_comm_ops;

/* What the ranks' exchanges cost (mf_ctx_group_stats): kept by core/comm_timed.c, which
 * stands between the algorithms and the implementation's ops. */
typedef struct mf_comm_stats {
    double wait_seconds;     /* host time in max_i64 and sum_f64 */
    double exchange_seconds; /* host time of the other ops, except queued ones (see above) */
    int64_t exchange_bytes;  /* bytes received by gathers, shifts and alltoallv; a sum's buffer */
    int64_t calls;
} mf_comm_stats;

struct mf_comm {
    const mf_comm_ops *ops;
    int rank, size;
    int device_buffers; /* allgatherv takes device memory (NCCL) rather than host memory */
    /* Set by mf_comm_timed: ops times each call and forwards it to inner (the
     * implementation's table), with this same mf_comm. */
    const mf_comm_ops *inner;
    mf_comm_stats stats;
};

/* Put the timing table in front of c's ops (core/comm_timed.c; c NULL or already timed:
 * nothing). Called by mf_ranks_attach (core/ranks.h), the one way into a group. */
void mf_comm_timed(mf_comm *c);

/* NCCL (nccl_comm.cu; libnccl.so.2 loaded with dlopen on first use, so that libmfact.so
 * needs no NCCL to load). wrap: the caller's ncclComm_t for ctx's device, which the caller
 * keeps owning. init_all: one communicator per context of one process (ncclCommInitAll
 * over their devices), each owned by its rank. Builds without CUDA: MF_ERR_UNSUPPORTED. */
mf_status mf_nccl_comm_wrap(mf_ctx *ctx, void *nccl_comm, mf_comm **out);
mf_status mf_nccl_comm_init_all(mf_ctx *const *ctxs, int n, mf_comm **out);

/* MF_NCCL_ID_BYTES (mfact.h): the bytes of an NCCL unique id (ncclUniqueId:
 * NCCL_UNIQUE_ID_BYTES, 128 since NCCL 2.0). */

/* One process per GPU: rank 0 makes the id (ncclGetUniqueId) and hands it to the others by
 * any means; every rank then makes its communicator on ctx's device (ncclCommInitRank,
 * collective: it returns once all `size` ranks called it), owned by the rank. */
mf_status mf_nccl_unique_id(mf_ctx *ctx, unsigned char id[MF_NCCL_ID_BYTES]);
mf_status mf_nccl_comm_init_rank(mf_ctx *ctx, const unsigned char id[MF_NCCL_ID_BYTES], int rank,
                                 int size, mf_comm **out);

#ifdef __cplusplus
}
#endif
#endif
