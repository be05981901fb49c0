// mf_cuda_csr_transpose: a CSR matrix's CSC built on the device. A stable radix sort of the
// entries' positions by column (cub) keeps each column's rows ascending, as the host's
// counting sort does, so the two transposes are identical; then a gather of rows and
// values, and the column offsets from the sorted columns' boundaries.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/cuda_internal.h"

namespace
{

__global__ void iota_kernel(int32_t *out, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = (int32_t)i;
}

// The row of CSR position p: the last row whose offset is <= p (binary search).
__device__ int32_t row_of(const int64_t *row_ptr, int32_t rows, int64_t p)
{
    int32_t lo = 0, hi = rows - 1;
    while (lo < hi) {
        int32_t mid = (int32_t)(((int64_t)lo + hi + 1) / 2);
        if (row_ptr[mid] <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__global__ void gather_kernel(const int32_t *perm, const int64_t *row_ptr, int32_t rows,
                              const float *val, int64_t n, int32_t *row_out, float *val_out)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n;
         t += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = perm[t];
        row_out[t] = row_of(row_ptr, rows, p);
        if (val)
            val_out[t] = val[p];
    }
}

// col_ptr[c] = the first sorted position whose column is >= c, for c in 0..cols.
__global__ void offsets_kernel(const int32_t *sorted_col, int64_t n, int32_t cols, int64_t *col_ptr)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t <= n;
         t += (int64_t)gridDim.x * blockDim.x) {
        int32_t prev = t == 0 ? -1 : sorted_col[t - 1];
        int32_t here = t == n ? cols : sorted_col[t];
        for (int32_t c = prev + 1; c <= here; c++)
            col_ptr[c] = t;
    }
}

int key_bits(int32_t cols)
{
    int bits = 1;
    while (bits < 31 && (1ll << bits) < (long long)cols)
        bits++;
    return bits;
}

// The scratch layout: sorted columns, positions in, positions out, cub's temporary storage.
size_t align256(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

size_t cub_bytes(int64_t nnz, int32_t cols)
{
    size_t bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const int32_t *)nullptr, (int32_t *)nullptr,
                                    (const int32_t *)nullptr, (int32_t *)nullptr, (int)nnz, 0,
                                    key_bits(cols));
    return bytes;
}

} // namespace

extern "C" size_t mf_cuda_csr_transpose_scratch(int64_t nnz, int32_t cols)
{
    if (nnz <= 0 || nnz > INT32_MAX)
        return 0;
    return 3 * align256((size_t)nnz * sizeof(int32_t)) + align256(cub_bytes(nnz, cols));
}

extern "C" mf_status mf_cuda_csr_transpose(mf_ctx *ctx, const mf_cuda_csr *a, void *scratch,
                                           int64_t *col_ptr, int32_t *row, float *val)
{
    mf_cuda *c = mf_cuda_of(ctx);
    mf_device_guard guard(c->device);
    const int64_t n = a->nnz;
    if (n == 0) {
        MF_CUDA_TRY(
            ctx, cudaMemsetAsync(col_ptr, 0, ((size_t)a->cols + 1) * sizeof *col_ptr, c->stream));
        return MF_OK;
    }
    if (n > INT32_MAX)
        return mf_device_fail(ctx, MF_ERR_UNSUPPORTED,
                              "device transpose of %lld entries (at most 2^31 - 1)", (long long)n);
    const size_t slab = align256((size_t)n * sizeof(int32_t));
    char *s = (char *)scratch;
    int32_t *sorted_col = (int32_t *)s, *pos_in = (int32_t *)(s + slab),
            *pos_out = (int32_t *)(s + 2 * slab);
    void *temp = s + 3 * slab;
    size_t temp_bytes = cub_bytes(n, a->cols);
    const unsigned grid = mf_cuda_grid(c, n + 1, 256, 16);
    iota_kernel<<<grid, 256, 0, c->stream>>>(pos_in, n);
    mf_status st = MF_CUDA_LAUNCHED(ctx, "iota_kernel");
    if (st != MF_OK)
        return st;
    MF_CUDA_TRY(ctx,
                cub::DeviceRadixSort::SortPairs(temp, temp_bytes, a->col, sorted_col, pos_in,
                                                pos_out, (int)n, 0, key_bits(a->cols), c->stream));
    gather_kernel<<<grid, 256, 0, c->stream>>>(pos_out, a->row_ptr, a->rows, a->val, n, row, val);
    st = MF_CUDA_LAUNCHED(ctx, "gather_kernel");
    if (st != MF_OK)
        return st;
    offsets_kernel<<<grid, 256, 0, c->stream>>>(sorted_col, n, a->cols, col_ptr);
    return MF_CUDA_LAUNCHED(ctx, "offsets_kernel");
}
