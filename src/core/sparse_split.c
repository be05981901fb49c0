/* A matrix's entries split in two by a seeded hash of their coordinates, so that whether an
 * entry is held out depends only on where it is and the seed (not on the order of the
 * entries or on the other entries): the validation part of a tuned run. The CLI's
 * --test-fraction applies the same rule (cli/ratings.c), and bench/quality.py too. */
#include <stdlib.h>

#include "core/ctx.h"
#include "core/sparse.h"

uint64_t mf_split_hash(int32_t row, int32_t col, uint64_t seed)
{
    uint64_t z = (((uint64_t)(uint32_t)row << 32) | (uint32_t)col) ^ (seed * 0x9E3779B97F4A7C15ull);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int mf_split_held_out(int32_t row, int32_t col, uint64_t seed, double fraction)
{
    return (double)(mf_split_hash(row, col, seed) >> 11) * 0x1.0p-53 < fraction;
}

mf_status mf_sparse_split(mf_ctx *ctx, const mf_sparse *R, double fraction, uint64_t seed,
                          const char *fn, mf_sparse **kept, mf_sparse **held)
{
    *kept = *held = NULL;
    size_t n = (size_t)(R->nnz ? R->nnz : 1), rows1 = (size_t)R->rows + 1;
    int64_t *pa = calloc(rows1, sizeof *pa), *pb = calloc(rows1, sizeof *pb);
    int32_t *ca = malloc(n * sizeof *ca), *cb = malloc(n * sizeof *cb);
    float *va = R->val ? malloc(n * sizeof *va) : NULL,
          *vb = R->val ? malloc(n * sizeof *vb) : NULL;
    mf_status st = MF_OK;
    if (!pa || !pb || !ca || !cb || (R->val && (!va || !vb)))
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory to split %lld entries", fn,
                     (long long)R->nnz);
    int64_t a = 0, b = 0;
    for (int32_t i = 0; st == MF_OK && i < R->rows; i++) {
        for (int64_t p = R->row_ptr[i]; p < R->row_ptr[i + 1]; p++) {
            if (mf_split_held_out(i, R->col[p], seed, fraction)) {
                cb[b] = R->col[p];
                if (vb)
                    vb[b] = R->val[p];
                b++;
            } else {
                ca[a] = R->col[p];
                if (va)
                    va[a] = R->val[p];
                a++;
            }
        }
        pa[i + 1] = a;
        pb[i + 1] = b;
    }
    if (st == MF_OK)
        st = mf_sparse_build_csr(ctx, kept, R->rows, R->cols, a, pa, ca, va, 0, fn);
    if (st == MF_OK)
        st = mf_sparse_build_csr(ctx, held, R->rows, R->cols, b, pb, cb, vb, 0, fn);
    if (st != MF_OK) {
        mf_sparse_destroy(*kept);
        *kept = NULL;
    }
    free(pa), free(pb), free(ca), free(cb), free(va), free(vb);
    return st;
}

double mf_sparse_mean(const mf_sparse *R)
{
    if (R->nnz == 0)
        return 0.0;
    if (!R->val)
        return 1.0;
    double s = 0.0;
    for (int64_t p = 0; p < R->nnz; p++)
        s += R->val[p];
    return s / (double)R->nnz;
}
