#include "sddmm/sddmm_tuning.h"

static int add(mf_sddmm_candidate *cand, int n, int variant, int32_t tj, int64_t block_nnz)
{
    if (n >= MF_SDDMM_MAX_CANDIDATES)
        return n;
    for (int i = 0; i < n; i++)
        if (cand[i].variant == variant && cand[i].tj == tj && cand[i].block_nnz == block_nnz)
            return n;
    mf_sddmm_config c = mf_sddmm_variant_config(variant);
    int32_t item_nnz = mf_sddmm_item_nnz(block_nnz, c.v, mf_sddmm_threads(c));
    cand[n] = (mf_sddmm_candidate){variant, tj, item_nnz, block_nnz};
    return n + 1;
}

/* An SM-SM block's entries: about per_sm blocks per SM over the whole matrix (MF_SDDMM_
 * SM_BLOCKS_PER_SM), at least 16 entries per tile row. */
static int64_t sm_block_nnz(const mf_sddmm_shape *sh, int64_t tj, int per_sm)
{
    int64_t block_nnz = sh->nnz / (per_sm * (int64_t)(sh->sms > 0 ? sh->sms : 1));
    return block_nnz < 16 * tj ? 16 * tj : block_nnz;
}

int mf_sddmm_candidates(const mf_sddmm_shape *sh, mf_sddmm_candidate *cand)
{
    const int nv = mf_sddmm_variant_count();
    const int w = mf_sddmm_unit_width(sh->vec, sh->unit16);
    const int units = (sh->k + w - 1) / w; /* per row of A and B */
    int n = 0;

    /* SM-L2: a virtual warp's registers hold the whole k when some variant is wide enough;
     * among those, the narrowest (v * kr the smallest power of two >= units) wastes no
     * lanes. Without one, the widest variants run k in chunks. */
    int fit = 0, widest = 0;
    for (int i = 0; i < nv; i++) {
        mf_sddmm_config c = mf_sddmm_variant_config(i);
        if (c.smem || c.vec != sh->vec)
            continue;
        int lanes = c.v * c.kr;
        if (lanes > widest)
            widest = lanes;
        if (lanes >= units && (fit == 0 || lanes < fit))
            fit = lanes;
    }
    int level = fit ? fit : widest;
    /* Blocks: about 8 per SM on small matrices, at most MF_SDDMM_L2_BLOCK_NNZ entries. A
     * power of two, so that nearby shapes share a layout. */
    int64_t l2_block = MF_SDDMM_L2_BLOCK_NNZ;
    while (l2_block > 256 && l2_block * 8 * (sh->sms > 0 ? sh->sms : 1) > sh->nnz)
        l2_block /= 2;
    /* Panel width of the L2 model: the panel's B rows fill at most half of L2, so the
     * blocks that run together (they walk the panels in order) keep their B in L2. */
    int64_t b_row = sh->unit16 ? (int64_t)(sh->k + 31) / 32 * 32 * 2 /* padded copies */
                               : (int64_t)sh->k * (int64_t)sizeof(float);
    int64_t tj_l2 = sh->l2_bytes / 2 / (b_row > 0 ? b_row : 1);
    int first_l2 = -1;
    for (int i = 0; i < nv; i++) {
        mf_sddmm_config c = mf_sddmm_variant_config(i);
        if (c.smem || c.vec != sh->vec || c.v * c.kr != level)
            continue;
        n = add(cand, n, i, sh->cols, l2_block);
        if (first_l2 < 0)
            first_l2 = i;
    }
    if (first_l2 >= 0 && tj_l2 >= 64 && tj_l2 < sh->cols)
        n = add(cand, n, first_l2, (int32_t)tj_l2, l2_block);
    /* Large k also in two chunks (a launch each, out accumulating): each pass gathers half of
     * every B row, so L1 holds twice the rows (H200, k = 512: the amazon-like shape of
     * bench/README.md 1.40 -> 1.49x cuSPARSE with the grouped layout; Netflix 1-2%); from
     * k = 512 also in four. */
    for (int parts = 2; fit && parts <= (sh->k >= 512 ? 4 : sh->k >= 256 ? 2 : 1); parts *= 2)
        for (int i = 0; i < nv; i++) {
            mf_sddmm_config c = mf_sddmm_variant_config(i);
            if (!c.smem && c.vec == sh->vec && parts * c.v * c.kr == level)
                n = add(cand, n, i, sh->cols, l2_block);
        }

    /* SM-SM: a B tile of tj rows x Tk columns in shared memory, worth it only when the
     * panels are dense enough that a row has several entries per panel (else the A row is
     * fetched for each one or two entries). Its tiles hold floats: no instance reads the
     * 16-bit copies. */
    if (sh->unit16)
        return n;
    int64_t budget =
        sh->smem_bytes < MF_SDDMM_SMEM_TILE_BYTES ? sh->smem_bytes : MF_SDDMM_SMEM_TILE_BYTES;
    double per_row = sh->rows > 0 ? (double)sh->nnz / sh->rows : 0.0;
    int kround = (sh->k + 31) / 32 * 32;
    for (int i = 0; i < nv; i++) {
        mf_sddmm_config c = mf_sddmm_variant_config(i);
        if (!c.smem || c.vec != sh->vec)
            continue;
        int tk = mf_sddmm_chunk(c);
        if (tk > kround)
            continue;
        int64_t tj = budget / ((int64_t)tk * (int64_t)sizeof(float));
        if (tj > sh->cols)
            tj = sh->cols;
        if (tj < 16)
            continue;
        double per_segment = per_row * (double)tj / (double)sh->cols;
        if (per_segment < 4.0)
            continue;
        n = add(cand, n, i, (int32_t)tj, sm_block_nnz(sh, tj, MF_SDDMM_SM_BLOCKS_PER_SM));
    }
    return n;
}

mf_sddmm_candidate mf_sddmm_fine_candidate(const mf_sddmm_shape *sh, mf_sddmm_candidate c)
{
    mf_sddmm_config cf = mf_sddmm_variant_config(c.variant);
    c.block_nnz = sm_block_nnz(sh, c.tj, MF_SDDMM_SM_FINE_BLOCKS_PER_SM);
    c.item_nnz = mf_sddmm_item_nnz(c.block_nnz, cf.v, mf_sddmm_threads(cf));
    return c;
}

int mf_sddmm_recheck_pair(const float *ms, int n, int *first, int *second)
{
    *first = *second = -1;
    for (int i = 0; i < n; i++)
        if (*first < 0 || ms[i] < ms[*first])
            *second = *first, *first = i;
        else if (*second < 0 || ms[i] < ms[*second])
            *second = i;
    return *second >= 0 && ms[*second] <= MF_SDDMM_RECHECK_MARGIN * ms[*first];
}
