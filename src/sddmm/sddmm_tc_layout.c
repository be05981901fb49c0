#include "sddmm/sddmm_tc_layout.h"

#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"

void mf_tc_layout_free(mf_tc_layout *l)
{
    free(l->tiles);
    free(l->units);
    memset(l, 0, sizeof *l);
}

/* The merge of one window's rows: the heads of up to 8 sorted column lists. */
typedef struct window_merge {
    int n;
    int32_t row[MF_TC_WINDOW];
    int64_t p[MF_TC_WINDOW], end[MF_TC_WINDOW];
} window_merge;

static void merge_start(const mf_sparse *S, const int32_t *rows, int n, window_merge *w)
{
    w->n = n;
    for (int r = 0; r < MF_TC_WINDOW; r++) {
        w->row[r] = rows[r < n ? r : 0];
        w->p[r] = r < n ? S->row_ptr[rows[r]] : 0;
        w->end[r] = r < n ? S->row_ptr[rows[r] + 1] : 0;
    }
}

/* The next condensed column and which rows hold it (advancing them); -1 when done. */
static int32_t merge_next(const mf_sparse *S, window_merge *w, unsigned *mask)
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

static int64_t window_columns(const mf_sparse *S, const int32_t *rows, int n)
{
    window_merge w;
    unsigned mask;
    int64_t d = 0;
    merge_start(S, rows, n, &w);
    while (merge_next(S, &w, &mask) >= 0)
        d++;
    return d;
}

/* Fill the window's tiles and units, from tile t0 and unit u0 on. */
static void window_fill(const mf_sparse *S, const int32_t *rows, int n, int64_t window,
                        mf_tc_layout *l, int64_t t0, int64_t u0)
{
    window_merge w;
    unsigned mask;
    merge_start(S, rows, n, &w);
    int64_t t = t0 - 1, u = u0 - 1;
    int c = MF_TC_TILE, tiles_in_unit = MF_TC_UNIT_TILES;
    int32_t col;
    while ((col = merge_next(S, &w, &mask)) >= 0 || c < MF_TC_TILE) {
        if (c == MF_TC_TILE) { /* a new tile, and a new unit every MF_TC_UNIT_TILES */
            c = 0;
            t++;
            memset(&l->tiles[t], 0, sizeof l->tiles[t]);
            if (tiles_in_unit == MF_TC_UNIT_TILES) {
                tiles_in_unit = 0;
                u++;
                mf_tc_unit *un = &l->units[u];
                memset(un, 0, sizeof *un);
                for (int r = 0; r < MF_TC_WINDOW; r++) {
                    un->row[r] = w.row[r];
                    /* where row r stands now: before this column's advance */
                    un->pos[r] = r < n ? w.p[r] - ((mask >> r) & 1u) : 0;
                }
                un->tile_begin = t;
                un->window = (int32_t)window;
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
                    l->tiles[t].rowmask[r] |= (uint16_t)(1u << c);
        }
        c++;
        if (col < 0 && c == MF_TC_TILE)
            break;
    }
}

/* How many rows window wi holds: 8, fewer in the last. */
static int window_rows(int64_t n, int64_t wi)
{
    return (int)(n - wi * MF_TC_WINDOW < MF_TC_WINDOW ? n - wi * MF_TC_WINDOW : MF_TC_WINDOW);
}

/* The tiles of each window of `rows` (n rows, consecutive 8 a window) in tiles[wi + 1];
 * returns their sum. */
static int64_t count_tiles(mf_ctx *ctx, const mf_sparse *S, const int32_t *rows, int64_t n,
                           int64_t *tiles)
{
    const int64_t windows = (n + MF_TC_WINDOW - 1) / MF_TC_WINDOW;
    int64_t total = 0;
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 64) reduction(+ : total)
    for (int64_t wi = 0; wi < windows; wi++) {
        int64_t d = window_columns(S, rows + wi * MF_TC_WINDOW, window_rows(n, wi));
        tiles[wi + 1] = (d + MF_TC_TILE - 1) / MF_TC_TILE;
        total += tiles[wi + 1];
    }
    return total;
}

/* The row order and each window's tiles: `order`'s, or under AUTO the order with the fewest
 * tiles (natural unless another saves MF_TC_ORDER_MIN_GAIN of them); rows and tiles hold the
 * winner. The second pair of arrays is the candidates' scratch. */
static mf_status choose_order(mf_ctx *ctx, const mf_sparse *S, mf_tc_order order, int64_t n,
                              int32_t **rows, int64_t **tiles, int32_t **rows2, int64_t **tiles2,
                              mf_tc_layout *out)
{
    const int automatic = order == MF_TC_ORDER_AUTO;
    MF_TRY(mf_tc_order_rows(ctx, S, automatic ? MF_TC_ORDER_NATURAL : order, *rows, n));
    int64_t best = count_tiles(ctx, S, *rows, n, *tiles);
    out->order = automatic ? MF_TC_ORDER_NATURAL : order;
    out->natural_tiles = out->order == MF_TC_ORDER_NATURAL ? best : -1;
    if (!automatic)
        return MF_OK;
    const double goal = (1.0 - MF_TC_ORDER_MIN_GAIN) * (double)best;
    for (int o = MF_TC_ORDER_LENGTH_MINHASH; o <= MF_TC_ORDER_MINHASH; o++) {
        MF_TRY(mf_tc_order_rows(ctx, S, (mf_tc_order)o, *rows2, n));
        int64_t t = count_tiles(ctx, S, *rows2, n, *tiles2);
        if ((double)t <= goal && t < best) {
            int32_t *r = *rows;
            int64_t *c = *tiles;
            *rows = *rows2, *tiles = *tiles2;
            *rows2 = r, *tiles2 = c;
            best = t;
            out->order = (mf_tc_order)o;
        }
    }
    return MF_OK;
}

mf_status mf_tc_layout_build(mf_ctx *ctx, const mf_sparse *S, mf_tc_order order, mf_tc_layout *out)
{
    memset(out, 0, sizeof *out);
    const int64_t nonempty = mf_tc_rows_with_entries(S);
    const int64_t windows = (nonempty + MF_TC_WINDOW - 1) / MF_TC_WINDOW;
    const int two = order == MF_TC_ORDER_AUTO; /* a candidate's arrays beside the best's */
    const size_t rows_bytes = (size_t)(nonempty > 0 ? nonempty : 1) * sizeof(int32_t),
                 tiles_bytes = (size_t)(windows + 1) * sizeof(int64_t);
    int32_t *rows = malloc(rows_bytes), *rows2 = two ? malloc(rows_bytes) : NULL;
    int64_t *tile_first = malloc(tiles_bytes), *tiles2 = two ? malloc(tiles_bytes) : NULL;
    int64_t *unit_first = malloc(tiles_bytes);
    mf_status st = MF_OK;
    if (!rows || !tile_first || !unit_first || (two && (!rows2 || !tiles2))) {
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        goto done;
    }
    st = choose_order(ctx, S, order, nonempty, &rows, &tile_first, &rows2, &tiles2, out);
    if (st != MF_OK)
        goto done;
    tile_first[0] = unit_first[0] = 0;
    for (int64_t wi = 0; wi < windows; wi++) {
        int64_t tiles = tile_first[wi + 1];
        unit_first[wi + 1] = unit_first[wi] + (tiles + MF_TC_UNIT_TILES - 1) / MF_TC_UNIT_TILES;
        tile_first[wi + 1] = tile_first[wi] + tiles;
    }
    out->n_windows = windows;
    out->n_tiles = tile_first[windows];
    out->n_units = unit_first[windows];
    out->tiles = malloc((size_t)(out->n_tiles > 0 ? out->n_tiles : 1) * sizeof *out->tiles);
    out->units = malloc((size_t)(out->n_units > 0 ? out->n_units : 1) * sizeof *out->units);
    if (!out->tiles || !out->units) {
        st = mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_sddmm: out of host memory for the plan");
        goto done;
    }
#pragma omp parallel for num_threads(mf_ctx_threads(ctx)) schedule(dynamic, 64)
    for (int64_t wi = 0; wi < windows; wi++)
        window_fill(S, rows + wi * MF_TC_WINDOW, window_rows(nonempty, wi), wi, out, tile_first[wi],
                    unit_first[wi]);
done:
    if (st != MF_OK)
        mf_tc_layout_free(out);
    free(rows);
    free(rows2);
    free(tile_first);
    free(tiles2);
    free(unit_first);
    return st;
}
