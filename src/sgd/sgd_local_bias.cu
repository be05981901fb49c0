/* The CUDA engine of Hogwild SGD (sgd_engine.cuh): block-local item biases
 * (sgd_local_bias.cuh) at the start: which items get a slot in each block's shared memory,
 * and where they do not all fit, the rows renumbered, the most rated first, and the chunks
 * split in two passes. */
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "sgd/sgd_engine.cuh"
#include "sgd/sgd_hot.cuh" /* count_items_kernel */

namespace mf_sgd_gpu
{

namespace
{

/* The rest turned around (sgd_local_bias.cuh): the entries of rows [slots, nb) (rest, their
 * users in user; nrest of them, host) as chunks of one row's entries, at most MF_SGD_CHUNK:
 * entry i of t_entry names the user and rating, t_row[i] the row. A row with more entries
 * than a chunk holds has pieces 0, 1, ...; the runs [begin, end) go to list (begin at
 * list[i], end at list[cap + i]) piece by piece: every row's piece 0, then every piece 1, and
 * so on, piece j's runs from sub[j] to sub[j + 1] (sub has *passes + 1 entries, at most
 * nrest + 1). Each piece runs in a launch of its own: two pieces of a row in flight at once
 * would each store the row they hold, and the last store would drop the other's steps. */
void turn_rest(const mf_sgd_entry *rest, const int32_t *user, int64_t nrest, int32_t slots,
               int64_t nb, int64_t *at, mf_sgd_entry *t_entry, int32_t *t_row, int64_t *list,
               int64_t cap, int64_t *sub, int *passes)
{
    const int64_t rows = nb - slots;
    memset(at, 0, ((size_t)rows + 1) * sizeof *at);
    for (int64_t i = 0; i < nrest; i++)
        at[rest[i].item - slots + 1]++;
    int64_t most = 0; /* pieces of the row with the most */
    for (int64_t r = 0; r < rows; r++) {
        most = std::max(most, (at[r + 1] + MF_SGD_CHUNK - 1) / MF_SGD_CHUNK);
        at[r + 1] += at[r];
    }
    /* sub[j + 1] - sub[j]: the rows with more than j pieces */
    memset(sub, 0, ((size_t)most + 1) * sizeof *sub);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j * MF_SGD_CHUNK < at[r + 1] - at[r]; j++)
            sub[j + 1]++;
    for (int64_t j = 0; j < most; j++)
        sub[j + 1] += sub[j];
    for (int64_t r = 0; r < rows; r++) /* sub[j] moves to piece j's end */
        for (int64_t j = 0, b = at[r]; b < at[r + 1]; j++, b += MF_SGD_CHUNK) {
            const int64_t n = sub[j]++;
            list[n] = b, list[cap + n] = std::min(at[r + 1], b + MF_SGD_CHUNK);
        }
    for (int64_t j = most; j > 0; j--) /* back to the starts */
        sub[j] = sub[j - 1];
    sub[0] = 0;
    *passes = (int)most;
    for (int64_t i = 0; i < nrest; i++) { /* at[r] moves to the row's end */
        const int64_t to = at[rest[i].item - slots]++;
        t_entry[to].item = user[i], t_entry[to].rating = rest[i].rating;
        t_row[to] = rest[i].item;
    }
}

/* Renumbered rows (one part, local_bias_setup): every chunk's entries reordered on the
 * device, those of rows below e->slots first, the rest gathered and turned around (turn_rest)
 * into e->rest and e->rest_row, and the chunks of both passes listed (split, n1, n2). nb: the
 * rows. */
mf_status split_chunks(cuda_engine *e, const mf_sgd_plan *plan, int64_t nb)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    const int64_t nchunks = plan->nchunks, *begin = plan->chunk_begin;
    mf_dbuf counts = {NULL, 0}, rest_at_dev = {NULL, 0}, rest = {NULL, 0}, rest_user = {NULL, 0};
    int32_t *owners = (int32_t *)malloc((size_t)(nchunks > 0 ? nchunks : 1) * sizeof *owners);
    int64_t *rest_at = (int64_t *)malloc(((size_t)nchunks + 1) * sizeof *rest_at);
    mf_status st = owners && rest_at ? MF_OK
                                     : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                                               "mf_sgd_hogwild_run: out of host memory");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &counts, (size_t)nchunks * sizeof(int32_t), "SGD chunk owners");
    cudaError_t err = cudaSuccess;
    if (st == MF_OK && nchunks > 0) {
        sgd::partition_local_kernel<<<mf_cuda_grid(ctx->link.cuda, nchunks * 32, 256, 8), 256, 0,
                                      stream>>>((mf_sgd_entry *)e->entries.ptr,
                                                (const int64_t *)e->chunk_begin.ptr, nchunks,
                                                e->slots, (int32_t *)counts.ptr);
        err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(owners, counts.ptr, counts.bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
    }
    /* The rest: each chunk's second half, at rest_at[c] of one array, to the host */
    int64_t nrest = 0;
    mf_sgd_entry *host_rest = NULL, *t_entry = NULL;
    int32_t *host_user = NULL, *t_row = NULL;
    int64_t *at = NULL, *list = NULL, *sub = NULL;
    if (st == MF_OK && err == cudaSuccess) {
        rest_at[0] = 0;
        for (int64_t c = 0; c < nchunks; c++)
            rest_at[c + 1] = rest_at[c] + (begin[c + 1] - begin[c] - owners[c]);
        nrest = rest_at[nchunks];
        mf_sgd_debug_local_rest = nrest;
        st = mf_dmem_alloc(ctx, &rest_at_dev, ((size_t)nchunks + 1) * sizeof *rest_at,
                           "SGD rest offsets");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &rest, (size_t)nrest * sizeof(mf_sgd_entry), "SGD rest");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &rest_user, (size_t)nrest * sizeof(int32_t), "SGD rest users");
        if (st == MF_OK && nrest > 0) {
            err = cudaMemcpyAsync(rest_at_dev.ptr, rest_at, rest_at_dev.bytes,
                                  cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess) {
                sgd::gather_rest_kernel<<<mf_cuda_grid(ctx->link.cuda, nchunks * 32, 256, 8), 256,
                                          0, stream>>>(
                    (const mf_sgd_entry *)e->entries.ptr, (const int32_t *)e->user.ptr,
                    (const int64_t *)e->chunk_begin.ptr, nchunks, (const int32_t *)counts.ptr,
                    (const int64_t *)rest_at_dev.ptr, (mf_sgd_entry *)rest.ptr,
                    (int32_t *)rest_user.ptr);
                err = cudaGetLastError();
            }
        }
    }
    /* The lists: the first pass's begins at list[0] and ends at list[cap] (the chunks' first
     * halves, at most nchunks), the second's at list[nchunks] and list[cap + nchunks] (the
     * rest's rows' runs, at most nrest); then packed, each list's begins and ends. */
    const int64_t cap = nchunks + nrest;
    int64_t *packed = NULL;
    if (st == MF_OK && err == cudaSuccess) {
        host_rest = (mf_sgd_entry *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *host_rest);
        t_entry = (mf_sgd_entry *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *t_entry);
        host_user = (int32_t *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *host_user);
        t_row = (int32_t *)malloc((size_t)(nrest > 0 ? nrest : 1) * sizeof *t_row);
        at = (int64_t *)malloc(((size_t)(nb - e->slots) + 1) * sizeof *at);
        list = (int64_t *)malloc((size_t)(cap > 0 ? cap : 1) * 2 * sizeof *list);
        packed = (int64_t *)malloc((size_t)(cap > 0 ? cap : 1) * 2 * sizeof *packed);
        sub = (int64_t *)malloc(((size_t)nrest + 1) * sizeof *sub);
        if (!host_rest || !t_entry || !host_user || !t_row || !at || !list || !packed || !sub)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    }
    if (st == MF_OK && err == cudaSuccess && nrest > 0) {
        err = cudaMemcpyAsync(host_rest, rest.ptr, rest.bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(host_user, rest_user.ptr, rest_user.bytes, cudaMemcpyDeviceToHost,
                                  stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
    }
    if (st == MF_OK && err == cudaSuccess) {
        int64_t n1 = 0, n2 = 0;
        for (int64_t c = 0; c < nchunks; c++)
            if (owners[c] > 0)
                list[n1] = begin[c], list[cap + n1] = begin[c] + owners[c], n1++;
        int passes = 0;
        turn_rest(host_rest, host_user, nrest, e->slots, nb, at, t_entry, t_row, list + nchunks,
                  cap, sub, &passes);
        n2 = sub[passes];
        memcpy(packed, list, (size_t)n1 * sizeof *list);
        memcpy(packed + n1, list + cap, (size_t)n1 * sizeof *list);
        memcpy(packed + 2 * n1, list + nchunks, (size_t)n2 * sizeof *list);
        memcpy(packed + 2 * n1 + n2, list + cap + nchunks, (size_t)n2 * sizeof *list);
        e->n1 = n1, e->n2 = n2;
        e->rest_sub = (int64_t *)malloc(((size_t)passes + 1) * sizeof *e->rest_sub);
        if (!e->rest_sub)
            st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
        else
            memcpy(e->rest_sub, sub, ((size_t)passes + 1) * sizeof *sub), e->rest_passes = passes;
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &e->split, (size_t)(2 * (n1 + n2)) * sizeof *list,
                               "SGD split chunks");
        if (st == MF_OK && nrest > 0) /* the rest arrays, turned around, in place */
            err = cudaMemcpyAsync(rest.ptr, t_entry, rest.bytes, cudaMemcpyHostToDevice, stream);
        if (st == MF_OK && err == cudaSuccess && nrest > 0)
            err = cudaMemcpyAsync(rest_user.ptr, t_row, rest_user.bytes, cudaMemcpyHostToDevice,
                                  stream);
        if (st == MF_OK && err == cudaSuccess && e->split.bytes > 0)
            err = cudaMemcpyAsync(e->split.ptr, packed, e->split.bytes, cudaMemcpyHostToDevice,
                                  stream);
        if (st == MF_OK && err == cudaSuccess) /* the host arrays are freed below */
            err = cudaStreamSynchronize(stream);
    }
    if (st == MF_OK && err == cudaSuccess) {
        e->rest = rest, e->rest_row = rest_user;
        rest.ptr = rest_user.ptr = NULL;
    }
    mf_dmem_free(ctx, &rest);
    mf_dmem_free(ctx, &rest_user);
    mf_dmem_free(ctx, &rest_at_dev);
    mf_dmem_free(ctx, &counts);
    free(owners), free(rest_at), free(host_rest), free(t_entry), free(host_user), free(t_row);
    free(at), free(list), free(packed), free(sub);
    MF_TRY(st);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD split chunks", __FILE__, __LINE__);
    return MF_OK;
}

} // namespace

/* Block-local item biases (sgd_local_bias.cuh) where the model has biases, the order keeps a
 * user's row resident (the kernels that have them) and each block's copy would see
 * MF_SGD_LOCAL_BIAS_RATINGS ratings an epoch or more (below that the biases cost little
 * time, and a copy's share of an item is too small to learn from alone);
 * mf_sgd_debug_local_bias 0 turns them off, 1 on whatever the size. All of them where the
 * items and working rows fit in one block's shared memory (about 58,000 on an H100), else
 * the rows with the most ratings, as many as fit, renumbered to come first (row_of). Counts
 * the entries of every part, picks the owners on the host, shapes the grid anew, and where it
 * renumbers, rewrites the entries' rows and splits the chunks (split_chunks). A group's ranks
 * (several parts) exchange item blocks in the items' own numbers (mf_shares_gather), so there
 * the rows are never renumbered: the item biases stay global where they do not all fit. */
int64_t local_bias_room(const cuda_engine *e, int64_t nnz)
{
    const mf_cuda *cuda = e->ctx->link.cuda;
    const double sms = cuda->prop.multiProcessorCount;
    const bool wanted = mf_sgd_debug_local_bias == 1 ||
                        (mf_sgd_debug_local_bias < 0 && nnz >= MF_SGD_LOCAL_BIAS_RATINGS * sms);
    if (!e->biases || !e->resident || !wanted || nnz == 0)
        return 0;
    return (int64_t)(cuda->prop.sharedMemPerBlockOptin / sizeof(float)) - MF_SGD_LOCAL_SINK;
}

mf_status local_bias_setup(cuda_engine *e, const mf_sgd_setup *s, int64_t spare)
{
    mf_ctx *ctx = e->ctx;
    cudaStream_t stream = ctx->link.cuda->stream;
    e->local = sgd::LOCAL_NONE;
    mf_sgd_debug_local_items = 0;
    mf_sgd_debug_local_rest = 0;
    const int64_t nb = (int64_t)e->cols + spare, nnz = s->plan->nnz;
    const int64_t fit = local_bias_room(e, nnz);
    const bool renumber = nb > fit;
    if (fit <= 0 || nb == 0 || (renumber && e->nparts > 1))
        return MF_OK;
    const int32_t slots = (int32_t)(renumber ? fit : nb);
    /* The largest shared size once, for every local kernel: a context in another thread never
     * lowers it under this one's launch. */
    MF_CUDA_TRY(ctx, cudaFuncSetAttribute(epoch_kernel_for(e, sgd::LOCAL_ALL),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)ctx->link.cuda->prop.sharedMemPerBlockOptin));
    e->slots = slots;
    MF_TRY(launch_shape(e, s, sgd::LOCAL_ALL));
    const int np = e->nparts;
    const int64_t *begin = s->plan->chunk_begin;
    mf_dbuf counts = {NULL, 0};
    unsigned *host = (unsigned *)calloc((size_t)np * nb, sizeof *host);
    int32_t *owner = (int32_t *)malloc((size_t)slots * sizeof *owner);
    unsigned *total = (unsigned *)calloc((size_t)nb, sizeof *total);
    int32_t *rank = (int32_t *)malloc((size_t)nb * sizeof *rank);
    unsigned *per = (unsigned *)calloc((size_t)np * slots, sizeof *per);
    int32_t *row_of = (int32_t *)malloc((size_t)nb * sizeof *row_of);
    mf_status st =
        host && owner && total && rank && per && row_of
            ? MF_OK
            : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sgd_hogwild_run: out of host memory");
    if (st == MF_OK)
        st = mf_dmem_alloc(ctx, &counts, (size_t)np * nb * sizeof(unsigned), "SGD item counts");
    cudaError_t err = cudaSuccess;
    if (st == MF_OK) {
        err = cudaMemsetAsync(counts.ptr, 0, counts.bytes, stream);
        for (int p = 0; p < np && err == cudaSuccess; p++) {
            const int64_t from = begin[e->parts[p]], to = begin[e->parts[p + 1]];
            if (to > from)
                sgd::count_items_kernel<<<mf_cuda_grid(ctx->link.cuda, to - from, 256, 8), 256, 0,
                                          stream>>>((const mf_sgd_entry *)e->entries.ptr + from,
                                                    to - from, (unsigned *)counts.ptr + p * nb);
            err = cudaGetLastError();
        }
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(host, counts.ptr, counts.bytes, cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(stream);
    }
    if (st == MF_OK && err == cudaSuccess) {
        /* Slot = row. Renumbered: the rows with the most ratings over all parts (the lower
         * number on ties) first, rank[t] becoming row t. */
        for (int64_t i = 0; i < nb; i++) {
            for (int p = 0; p < np; p++)
                total[i] += host[(size_t)p * nb + i];
            rank[i] = (int32_t)i;
        }
        if (renumber)
            std::sort(rank, rank + nb, [total](int32_t x, int32_t y) {
                return total[x] != total[y] ? total[x] > total[y] : x < y;
            });
        for (int32_t t = 0; t < nb; t++)
            row_of[rank[t]] = t;
        for (int32_t t = 0; t < slots; t++) {
            owner[t] = total[rank[t]] > 0 ? t : -1;
            for (int p = 0; p < np && owner[t] >= 0; p++)
                per[(size_t)p * slots + t] = host[(size_t)p * nb + rank[t]];
        }
        if (renumber)
            st =
                mf_dmem_alloc(ctx, &e->row_of, (size_t)nb * sizeof *row_of, "SGD item row numbers");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &e->local_owner, (size_t)slots * sizeof(int32_t),
                               "SGD local item owners");
        if (st == MF_OK)
            st = mf_dmem_alloc(ctx, &e->local_count, (size_t)np * slots * sizeof(unsigned),
                               "SGD local item counts");
        if (st == MF_OK)
            /* at most the device's shared memory (30 MB on an H100) */
            st = mf_dmem_alloc(ctx, &e->local_copies, (size_t)e->blocks * slots * sizeof(float),
                               "SGD local item copies");
        if (st == MF_OK) {
            err = cudaMemcpyAsync(e->local_owner.ptr, owner, e->local_owner.bytes,
                                  cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess && renumber) {
                err = cudaMemcpyAsync(e->row_of.ptr, row_of, e->row_of.bytes,
                                      cudaMemcpyHostToDevice, stream);
                if (err == cudaSuccess)
                    sgd::renumber_kernel<<<mf_cuda_grid(ctx->link.cuda, nnz, 256, 8), 256, 0,
                                           stream>>>((mf_sgd_entry *)e->entries.ptr, nnz,
                                                     (const int32_t *)e->row_of.ptr);
                if (err == cudaSuccess)
                    err = cudaGetLastError();
            }
            if (err == cudaSuccess)
                err = cudaMemcpyAsync(e->local_count.ptr, per, e->local_count.bytes,
                                      cudaMemcpyHostToDevice, stream);
            if (err == cudaSuccess) /* the host arrays are freed below */
                err = cudaStreamSynchronize(stream);
        }
    }
    if (st == MF_OK && err == cudaSuccess && renumber)
        st = split_chunks(e, s->plan, nb);
    mf_dmem_free(ctx, &counts);
    free(host), free(owner), free(total), free(rank), free(per), free(row_of);
    MF_TRY(st);
    if (err != cudaSuccess)
        return mf_cuda_fail(ctx, err, "SGD local item biases", __FILE__, __LINE__);
    e->local = sgd::LOCAL_ALL;
    mf_sgd_debug_local_items = slots;
    return MF_OK;
}

} // namespace mf_sgd_gpu
