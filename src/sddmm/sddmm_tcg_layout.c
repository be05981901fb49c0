#include "sddmm/sddmm_tcg_layout.h"

#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"

void mf_tcg_layout_free(mf_tcg_layout *l)
{
    free(l->tiles);
    free(l->units);
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

static int64_t group_columns(const mf_sparse *S, const int32_t *rows, int n)
{
    group_merge w;
    uint32_t mask;
    int64_t d = 0;
    merge_start(S, rows, n, &w);
    while (merge_next(S, &w, &mask) >= 0)
        d++;
    return d;
}

/* Fill the group's tiles and units, from tile t0 and unit u0 on. */
static void group_fill(const mf_sparse *S, const int32_t *rows, int n, int64_t group,
                       mf_tcg_layout *l, int64_t t0, int64_t u0)
{
    group_merge w;
    uint32_t mask;
    merge_start(S, rows, n, &w);
    int64_t t = t0 - 1, u = u0 - 1;
    int c = MF_TCG_TILE, tiles_in_unit = MF_TCG_UNIT_TILES;
    int32_t col;
    while ((col = merge_next(S, &w, &mask)) >= 0 || c < MF_TCG_TILE) {
        if (c == MF_TCG_TILE) { /* a new tile, and a new unit every MF_TCG_UNIT_TILES */
            c = 0;
            t++;
            memset(&l->tiles[t], 0, sizeof l->tiles[t]);
            if (tiles_in_unit == MF_TCG_UNIT_TILES) {
                tiles_in_unit = 0;
                u++;
                mf_tcg_unit *un = &l->units[u];
                memset(un, 0, sizeof *un);
                for (int r = 0; r < MF_TCG_ROWS; r++) {
                    un->row[r] = w.row[r];
                    /* where row r stands now: before this column's advance */
                    un->pos[r] = r < n ? w.p[r] - ((mask >> r) & 1u) : 0;
                }
                un->tile_begin = t;
                un->group = (int32_t)group;
            }
            tiles_in_unit++;
            l->units[u].n_tiles = tiles_in_unit;
        }
        if (col < 0) { /* padding: repeat the tile's first column, no rows */
            l->tiles[t].col[c] = l->tiles[t].col[0];
        } else {
            l->tiles[t].col[c] = col;
            for (int r = 0; r < n; r++)
                if ((mask >> r) & 1u)
                    l->tiles[t].word[r % MF_TCG_TILE] |= 1u << (8 * (r / MF_TCG_TILE) + c);
        }
        c++;
        if (col < 0 && c == MF_TCG_TILE)
            break;
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
    mf_status st = MF_OK;
    if (!tile_first || !unit_first) {
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        goto done;
    }
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 16)
    for (int64_t gi = 0; gi < groups; gi++) {
        int64_t d = group_columns(S, rows + gi * MF_TCG_ROWS, group_rows(n, gi));
        tile_first[gi + 1] = (d + MF_TCG_TILE - 1) / MF_TCG_TILE;
    }
    tile_first[0] = unit_first[0] = 0;
    for (int64_t gi = 0; gi < groups; gi++) {
        int64_t tiles = tile_first[gi + 1];
        unit_first[gi + 1] = unit_first[gi] + (tiles + MF_TCG_UNIT_TILES - 1) / MF_TCG_UNIT_TILES;
        tile_first[gi + 1] = tile_first[gi] + tiles;
    }
    out->n_groups = groups;
    out->n_tiles = tile_first[groups];
    out->n_units = unit_first[groups];
    out->tiles = malloc((size_t)(out->n_tiles > 0 ? out->n_tiles : 1) * sizeof *out->tiles);
    out->units = malloc((size_t)(out->n_units > 0 ? out->n_units : 1) * sizeof *out->units);
    if (!out->tiles || !out->units) {
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        goto done;
    }
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 16)
    for (int64_t gi = 0; gi < groups; gi++)
        group_fill(S, rows + gi * MF_TCG_ROWS, group_rows(n, gi), gi, out, tile_first[gi],
                   unit_first[gi]);
done:
    if (st != MF_OK)
        mf_tcg_layout_free(out);
    free(tile_first);
    free(unit_first);
    return st;
}
