#include "sddmm/sddmm_tcg_layout.h"

#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"

void mf_tcg_layout_free(mf_tcg_layout *l)
{
    free(l->tiles);
    free(l->units);
    free(l->ent);
    memset(l, 0, sizeof *l);
}

/* The merge of one group's rows: the heads of up to MF_TCG_ROWS sorted column lists. */
typedef struct group_merge {
    int n;
    int32_t row[MF_TCG_ROWS];
    int64_t p[MF_TCG_ROWS], end[MF_TCG_ROWS];
} group_merge;

static void merge_start(const mf_sparse *S, const int32_t *rows, int n, group_merge *w)
{
    w->n = n;
    for (int r = 0; r < MF_TCG_ROWS; r++) {
        w->row[r] = rows[r < n ? r : 0];
        w->p[r] = r < n ? S->row_ptr[rows[r]] : 0;
        w->end[r] = r < n ? S->row_ptr[rows[r] + 1] : 0;
    }
}

/* The group's next distinct column and which rows hold it (advancing them); -1 when done. */
static int32_t merge_next(const mf_sparse *S, group_merge *w, uint32_t *mask)
{
    int32_t c = -1;
    for (int r = 0; r < w->n; r++)
        if (w->p[r] < w->end[r] && (c < 0 || S->col[w->p[r]] < c))
            c = S->col[w->p[r]];
    *mask = 0;
    if (c < 0)
        return -1;
    for (int r = 0; r < w->n; r++)
        if (w->p[r] < w->end[r] && S->col[w->p[r]] == c) {
            *mask |= 1u << r;
            w->p[r]++;
        }
    return c;
}

/* Walk one group's tiles and cut them into units: a new unit when the current one holds
 * MF_TCG_UNIT_TILES tiles or the next tile would take it past MF_TCG_UNIT_NNZ entries (a tile
 * holds at most 256). With l NULL, only count: *tiles and *units. Else fill them from tile
 * t0 and unit u0 on. */
static void group_walk(const mf_sparse *S, const int32_t *rows, int n, int64_t group,
                       mf_tcg_layout *l, int64_t t0, int64_t u0, int64_t *tiles, int64_t *units)
{
    group_merge w;
    uint32_t mask;
    merge_start(S, rows, n, &w);
    int64_t t = t0 - 1, u = u0 - 1, start[MF_TCG_ROWS];
    int unit_tiles = 0, unit_nnz = 0;
    for (;;) {
        for (int r = 0; r < MF_TCG_ROWS; r++)
            start[r] = w.p[r];
        mf_tcg_tile tile;
        memset(&tile, 0, sizeof tile);
        int c = 0, tile_nnz = 0;
        int32_t col;
        while (c < MF_TCG_TILE && (col = merge_next(S, &w, &mask)) >= 0) {
            tile.col[c] = col;
            for (int r = 0; r < n; r++)
                if ((mask >> r) & 1u)
                    tile.word[r % MF_TCG_TILE] |= 1u << (8 * (r / MF_TCG_TILE) + c);
            tile_nnz += __builtin_popcount(mask);
            c++;
        }
        if (c == 0)
            break;
        for (int p = c; p < MF_TCG_TILE; p++) /* padding: the first column again, no rows */
            tile.col[p] = tile.col[0];
        if (u < u0 || unit_tiles == MF_TCG_UNIT_TILES || unit_nnz + tile_nnz > MF_TCG_UNIT_NNZ) {
            u++;
            unit_tiles = unit_nnz = 0;
            if (l) {
                mf_tcg_unit *un = &l->units[u];
                memset(un, 0, sizeof *un);
                for (int r = 0; r < MF_TCG_ROWS; r++) {
                    un->row[r] = w.row[r];
                    un->pos[r] = r < n ? start[r] : 0;
                }
                un->tile_begin = t + 1;
                un->group = (int32_t)group;
            }
        }
        t++;
        unit_tiles++;
        unit_nnz += tile_nnz;
        if (l) {
            l->tiles[t] = tile;
            mf_tcg_unit *un = &l->units[u];
            un->n_tiles = unit_tiles;
            for (int r = 0; r < n; r++)
                un->cnt[r] = (uint16_t)(un->cnt[r] + __builtin_popcount(mf_tcg_mask(&tile, r)));
        }
        if (c < MF_TCG_TILE)
            break;
    }
    *tiles = t - t0 + 1;
    *units = u - u0 + 1;
}

/* The entries of units u0 .. u0 + units, from e0 on (group_walk has filled the units and
 * their tiles). */
static void group_entries(mf_tcg_layout *l, int64_t u0, int64_t units, int64_t e0)
{
    for (int64_t u = u0; u < u0 + units; u++) {
        mf_tcg_unit *un = &l->units[u];
        un->ent_begin = e0;
        int first[MF_TCG_ROWS], next[MF_TCG_ROWS], sum = 0;
        for (int r = 0; r < MF_TCG_ROWS; r++) {
            first[r] = sum;
            next[r] = 0;
            sum += un->cnt[r];
        }
        for (int32_t t = 0; t < un->n_tiles; t++) {
            const mf_tcg_tile *tile = &l->tiles[un->tile_begin + t];
            for (int r = 0; r < MF_TCG_ROWS; r++) {
                const unsigned m = mf_tcg_mask(tile, r);
                for (int c = 0; c < MF_TCG_TILE; c++)
                    if ((m >> c) & 1u)
                        l->ent[e0++] =
                            (uint32_t)(first[r] + next[r]++) << 8 | (uint32_t)(r * MF_TCG_TILE + c);
            }
        }
    }
}

static int group_rows(int64_t n, int64_t gi)
{
    return (int)(n - gi * MF_TCG_ROWS < MF_TCG_ROWS ? n - gi * MF_TCG_ROWS : MF_TCG_ROWS);
}

mf_status mf_tcg_layout_build(mf_ctx *ctx, const mf_sparse *S, const int32_t *rows, int64_t n,
                              mf_tcg_layout *out)
{
    memset(out, 0, sizeof *out);
    const int64_t groups = (n + MF_TCG_ROWS - 1) / MF_TCG_ROWS;
    const size_t first_bytes = (size_t)(groups + 1) * sizeof(int64_t);
    int64_t *tile_first = malloc(first_bytes), *unit_first = malloc(first_bytes);
    int64_t *ent_first = malloc(first_bytes);
    mf_status st = MF_OK;
    if (!tile_first || !unit_first || !ent_first) {
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        goto done;
    }
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 16)
    for (int64_t gi = 0; gi < groups; gi++)
        group_walk(S, rows + gi * MF_TCG_ROWS, group_rows(n, gi), gi, NULL, 0, 0,
                   &tile_first[gi + 1], &unit_first[gi + 1]);
    tile_first[0] = unit_first[0] = ent_first[0] = 0;
    for (int64_t gi = 0; gi < groups; gi++) {
        tile_first[gi + 1] += tile_first[gi];
        unit_first[gi + 1] += unit_first[gi];
        int64_t e = 0;
        for (int r = 0; r < group_rows(n, gi); r++)
            e +=
                S->row_ptr[rows[gi * MF_TCG_ROWS + r] + 1] - S->row_ptr[rows[gi * MF_TCG_ROWS + r]];
        ent_first[gi + 1] = ent_first[gi] + e;
    }
    out->n_groups = groups;
    out->n_tiles = tile_first[groups];
    out->n_units = unit_first[groups];
    out->n_ent = ent_first[groups];
    out->ent = malloc((size_t)(out->n_ent > 0 ? out->n_ent : 1) * sizeof *out->ent);
    out->tiles = malloc((size_t)(out->n_tiles > 0 ? out->n_tiles : 1) * sizeof *out->tiles);
    out->units = malloc((size_t)(out->n_units > 0 ? out->n_units : 1) * sizeof *out->units);
    if (!out->tiles || !out->units || !out->ent) {
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        goto done;
    }
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 16)
    for (int64_t gi = 0; gi < groups; gi++) {
        int64_t tiles, units;
        group_walk(S, rows + gi * MF_TCG_ROWS, group_rows(n, gi), gi, out, tile_first[gi],
                   unit_first[gi], &tiles, &units);
        group_entries(out, unit_first[gi], units, ent_first[gi]);
    }
done:
    if (st != MF_OK)
        mf_tcg_layout_free(out);
    free(tile_first);
    free(unit_first);
    free(ent_first);
    return st;
}
