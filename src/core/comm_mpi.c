/* The exchange of cuda/comm.h over MPI: CPU contexts in several processes or hosts, one rank
 * each (mf_ctx_set_mpi_comm), host buffers. Every op is an MPI collective over the
 * library's own duplicate of the caller's communicator (MPI_Comm_dup at the join,
 * MPI_Comm_free at the release), so that no message of the library ever matches a receive
 * of the caller's. Its error handler is MPI_ERRORS_RETURN: a failed MPI call comes back as a
 * status (MF_ERR_IO, MPI's message), never as an abort.
 *
 * Sums: MPI requires MPI_Allreduce to give every rank the same result, but leaves the
 * order in which a commutative operation such as MPI_SUM combines the ranks' values to the
 * implementation (which may change the rounding of floating-point sums with the algorithm
 * it picks for a message size or a placement of processes: reproducibility is only
 * "strongly recommended"). So the sums here are made by hand, in a fixed order: each rank
 * takes a slice of the elements, receives every rank's values of its slice (MPI_Alltoallv),
 * adds them in rank order starting from zero, and sends its slice of sums to every rank
 * (MPI_Allgatherv). Each element is summed by one rank, in the order the in-process
 * stand-in (comm_local.c) sums it: the same bits on every rank, from one run to the next,
 * and as a group of threads of the same size gets. */
#include "core/comm_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"

/* A sum goes through in chunks of at most this many elements, so that the scratch that
 * receives a rank's slice from every rank stays small, and is allocated with the rank: a
 * sum never allocates, so it never fails on one rank while the others wait in a collective. */
#define SUM_CHUNK ((size_t)1 << 18)

typedef struct mpi_rank {
    mf_comm base;
    MPI_Comm comm; /* the library's duplicate of the caller's communicator */
    /* size ints each: the slices of a sum's chunk (start, length), this rank's slice as
     * received from each rank (length, offset in scratch), and allgatherv's blocks by
     * contributing rank (rows, first row) */
    int *start, *len, *mine_len, *mine_at, *rows, *first;
    void *scratch; /* SUM_CHUNK + size doubles: this rank's slice from every rank */
} mpi_rank;

static mf_status mpi_fail(mf_ctx *ctx, int err, const char *call)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", err);
    return mf_fail(ctx, MF_ERR_IO, "%s failed: %s", call, text);
}

#define MPI_TRY(ctx, name, call)                                                                   \
    do {                                                                                           \
        int mpi_err_ = (call);                                                                     \
        if (mpi_err_ != MPI_SUCCESS)                                                               \
            return mpi_fail((ctx), mpi_err_, (name));                                              \
    } while (0)

/* In place: block b (rows [bounds[b], bounds[b + 1]) of row_bytes each) is rank owner[b]'s
 * (rank b's when owner is NULL), so owner[b]'s contribution to one MPI_Allgatherv sits where
 * every rank receives it (MPI_IN_PLACE). Counts and offsets are in rows of one contiguous
 * type, so that they fit MPI's ints (a matrix's rows do). */
static mf_status mpi_allgatherv(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                                size_t row_bytes, const int *owner)
{
    mpi_rank *m = (mpi_rank *)c;
    if (row_bytes == 0 || bounds[c->size] == bounds[0])
        return MF_OK; /* nothing to move, on every rank alike */
    if (row_bytes > INT_MAX)
        return mf_fail(ctx, MF_ERR_INTERNAL, "MPI allgatherv: rows of %zu bytes", row_bytes);
    for (int b = 0; b < c->size; b++) {
        const int from = owner ? owner[b] : b;
        m->rows[from] = (int)(bounds[b + 1] - bounds[b]);
        m->first[from] = (int)bounds[b];
    }
    MPI_Datatype row;
    MPI_TRY(ctx, "MPI_Type_contiguous", MPI_Type_contiguous((int)row_bytes, MPI_BYTE, &row));
    int err = MPI_Type_commit(&row);
    if (err == MPI_SUCCESS)
        err = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, m->rows, m->first, row,
                             m->comm);
    MPI_Type_free(&row);
    return err == MPI_SUCCESS ? MF_OK : mpi_fail(ctx, err, "MPI_Allgatherv");
}

/* The maximum is exact: MPI's own reduction gives every rank the same values. */
static mf_status mpi_max_i64(mf_comm *c, mf_ctx *ctx, int64_t *v, int n)
{
    if (n < 0 || n > MF_COMM_MAX_VALUES)
        return mf_fail(ctx, MF_ERR_INTERNAL, "a reduction of %d values", n);
    MPI_TRY(ctx, "MPI_Allreduce",
            MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_MAX, ((mpi_rank *)c)->comm));
    return MF_OK;
}

/* The rank's slice of one chunk: the sum over the ranks, in rank order from zero. */
static void add_slice(const mpi_rank *m, void *chunk, int is_double)
{
    const int n = m->len[m->base.rank], ranks = m->base.size;
    if (is_double) {
        const double *in = m->scratch;
        double *out = (double *)chunk + m->start[m->base.rank];
        for (int i = 0; i < n; i++) {
            double s = 0.0;
            for (int r = 0; r < ranks; r++)
                s += in[(size_t)r * n + i];
            out[i] = s;
        }
    } else {
        const float *in = m->scratch;
        float *out = (float *)chunk + m->start[m->base.rank];
        for (int i = 0; i < n; i++) {
            float s = 0.0f;
            for (int r = 0; r < ranks; r++)
                s += in[(size_t)r * n + i];
            out[i] = s;
        }
    }
}

static mf_status mpi_sum_buffer(mf_comm *c, mf_ctx *ctx, void *buf, size_t count, int is_double)
{
    mpi_rank *m = (mpi_rank *)c;
    const int ranks = c->size;
    const size_t elem = is_double ? sizeof(double) : sizeof(float);
    const MPI_Datatype type = is_double ? MPI_DOUBLE : MPI_FLOAT;
    for (size_t at = 0; at < count; at += SUM_CHUNK) {
        const size_t n = count - at < SUM_CHUNK ? count - at : SUM_CHUNK;
        char *chunk = (char *)buf + at * elem;
        for (int r = 0; r < ranks; r++) {
            m->start[r] = (int)(n * (size_t)r / (size_t)ranks);
            m->len[r] = (int)(n * (size_t)(r + 1) / (size_t)ranks) - m->start[r];
        }
        const int mine = m->len[c->rank];
        for (int r = 0; r < ranks; r++) {
            m->mine_len[r] = mine;
            m->mine_at[r] = r * mine;
        }
        MPI_TRY(ctx, "MPI_Alltoallv",
                MPI_Alltoallv(chunk, m->len, m->start, type, m->scratch, m->mine_len, m->mine_at,
                              type, m->comm));
        add_slice(m, chunk, is_double);
        MPI_TRY(ctx, "MPI_Allgatherv",
                MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, chunk, m->len, m->start, type,
                               m->comm));
    }
    return MF_OK;
}

static mf_status mpi_sum_f64(mf_comm *c, mf_ctx *ctx, double *v, int n)
{
    if (n < 0 || n > MF_COMM_MAX_VALUES)
        return mf_fail(ctx, MF_ERR_INTERNAL, "a reduction of %d values", n);
    return mpi_sum_buffer(c, ctx, v, (size_t)n, 1);
}

/* Pairwise exchanges (step d: to rank + d, from rank - d) in messages of at most 1 GiB,
 * because MPI's counts are ints. A pair's messages keep their order (MPI does not let one
 * overtake another), so each side cuts the same bytes into the same chunks and no empty
 * message is ever sent. */
#define ALLTOALL_CHUNK ((int64_t)1 << 30)

static mf_status mpi_alltoallv(mf_comm *c, mf_ctx *ctx, const void *send, const int64_t *send_bytes,
                               void *recv, const int64_t *recv_bytes)
{
    mpi_rank *m = (mpi_rank *)c;
    const int me = c->rank, size = c->size;
    for (int d = 0; d < size; d++) {
        const int to = (me + d) % size, from = (me - d + size) % size;
        int64_t out_at = 0, in_at = 0;
        for (int r = 0; r < to; r++)
            out_at += send_bytes[r];
        for (int q = 0; q < from; q++)
            in_at += recv_bytes[q];
        int64_t out_left = send_bytes[to], in_left = recv_bytes[from];
        while (out_left > 0 || in_left > 0) {
            MPI_Request req[2];
            int n = 0;
            if (in_left > 0) {
                const int k = (int)(in_left < ALLTOALL_CHUNK ? in_left : ALLTOALL_CHUNK);
                MPI_TRY(ctx, "MPI_Irecv",
                        MPI_Irecv((char *)recv + in_at, k, MPI_BYTE, from, 0, m->comm, &req[n++]));
                in_at += k, in_left -= k;
            }
            if (out_left > 0) {
                const int k = (int)(out_left < ALLTOALL_CHUNK ? out_left : ALLTOALL_CHUNK);
                MPI_TRY(
                    ctx, "MPI_Isend",
                    MPI_Isend((const char *)send + out_at, k, MPI_BYTE, to, 0, m->comm, &req[n++]));
                out_at += k, out_left -= k;
            }
            MPI_TRY(ctx, "MPI_Waitall", MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
        }
    }
    return MF_OK;
}

/* One MPI_Sendrecv: block `send` to rank - 1, block `recv` from rank + 1, in rows of one
 * contiguous type (as mpi_allgatherv's counts). */
static mf_status mpi_shift(mf_comm *c, mf_ctx *ctx, void *buf, const int64_t *bounds,
                           size_t row_bytes, int send, int recv)
{
    mpi_rank *m = (mpi_rank *)c;
    if (row_bytes == 0)
        return MF_OK;
    if (row_bytes > INT_MAX)
        return mf_fail(ctx, MF_ERR_INTERNAL, "MPI shift: rows of %zu bytes", row_bytes);
    const int to = (c->rank - 1 + c->size) % c->size, from = (c->rank + 1) % c->size;
    MPI_Datatype row;
    MPI_TRY(ctx, "MPI_Type_contiguous", MPI_Type_contiguous((int)row_bytes, MPI_BYTE, &row));
    int err = MPI_Type_commit(&row);
    if (err == MPI_SUCCESS)
        err = MPI_Sendrecv(
            (char *)buf + (size_t)bounds[send] * row_bytes, (int)(bounds[send + 1] - bounds[send]),
            row, to, 0, (char *)buf + (size_t)bounds[recv] * row_bytes,
            (int)(bounds[recv + 1] - bounds[recv]), row, from, 0, m->comm, MPI_STATUS_IGNORE);
    MPI_Type_free(&row);
    return err == MPI_SUCCESS ? MF_OK : mpi_fail(ctx, err, "MPI_Sendrecv");
}

static void rank_free(mpi_rank *m)
{
    if (!m)
        return;
    free(m->start);
    free(m->len);
    free(m->mine_len);
    free(m->mine_at);
    free(m->rows);
    free(m->first);
    free(m->scratch);
    free(m);
}

/* The duplicate is freed while MPI is up; after MPI_Finalize (a context destroyed late)
 * MPI has let go of it already and may not be called. */
static void mpi_release(mf_comm *c)
{
    mpi_rank *m = (mpi_rank *)c;
    int finalized = 1;
    if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized)
        MPI_Comm_free(&m->comm);
    rank_free(m);
}

static const mf_comm_ops mpi_ops = {mpi_allgatherv, mpi_max_i64, mpi_sum_f64, mpi_sum_buffer,
                                    mpi_alltoallv,  mpi_shift,   mpi_release, NULL};

static mpi_rank *rank_alloc(int size)
{
    mpi_rank *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    int **arrays[] = {&m->start, &m->len, &m->mine_len, &m->mine_at, &m->rows, &m->first};
    int ok = 1;
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        ok &= (*arrays[i] = malloc((size_t)size * sizeof(int))) != NULL;
    m->scratch = malloc((SUM_CHUNK + (size_t)size) * sizeof(double));
    if (!ok || !m->scratch) {
        rank_free(m);
        return NULL;
    }
    return m;
}

mf_status mf_comm_mpi_join(mf_ctx *ctx, const char *fn, const void *mpi_comm, mf_status st,
                           mf_comm **out)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return st != MF_OK ? st
                           : mf_fail(ctx, MF_ERR_UNSUPPORTED,
                                     "%s: MPI is %s (call it between MPI_Init and MPI_Finalize)",
                                     fn, finalized ? "finalized" : "not initialized");
    const MPI_Comm caller = *(const MPI_Comm *)mpi_comm;
    if (caller == MPI_COMM_NULL)
        return st != MF_OK ? st
                           : mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                                     "%s: the communicator is MPI_COMM_NULL", fn);
    int inter = 0;
    MPI_Comm_test_inter(caller, &inter);
    if (inter) /* the same answer on every rank of it: no rank waits for another */
        return st != MF_OK
                   ? st
                   : mf_fail(ctx, MF_ERR_INVALID_ARGUMENT,
                             "%s: an intercommunicator (the ranks must form one group)", fn);
    /* Collective from here on: every rank goes through the duplicate and the agreement,
     * failing or not, so that none waits for another forever. */
    MPI_Comm dup;
    int err = MPI_Comm_dup(caller, &dup);
    if (err != MPI_SUCCESS) /* the caller's error handler let it return */
        return st != MF_OK ? st : mpi_fail(ctx, err, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(dup, &rank);
    MPI_Comm_size(dup, &size);
    mpi_rank *m = NULL;
    if (st == MF_OK && !(m = rank_alloc(size)))
        st =
            mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for a rank of %d", fn, size);
    /* A failed rank's status and number in one value, so that the maximum names one rank. */
    int64_t failed = st != MF_OK ? (int64_t)st << 32 | (int64_t)rank : -1;
    err = MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT64_T, MPI_MAX, dup);
    if (err == MPI_SUCCESS && failed < 0) {
        m->base = (mf_comm){.ops = &mpi_ops, .rank = rank, .size = size, .device_buffers = 0};
        m->comm = dup;
        *out = &m->base;
        return MF_OK;
    }
    rank_free(m);
    MPI_Comm_free(&dup);
    if (st != MF_OK)
        return st;
    if (err != MPI_SUCCESS)
        return mpi_fail(ctx, err, "MPI_Allreduce");
    const mf_status theirs = (mf_status)(failed >> 32);
    return mf_fail(ctx, theirs, "%s: rank %lld of %d failed (%s); its context holds the message",
                   fn, (long long)(failed & 0xffffffff), size, mf_status_string(theirs));
}
