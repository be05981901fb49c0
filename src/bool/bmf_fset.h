/* What a line's factor set covers on the other side, cached by factor set (CPU engine).
 *
 * A single-bit move of line x (a row of A, or a column of B) changes the cells of factor
 * l's other-side set Y_l: adding l covers the cells of Y_l that no factor of x covers yet,
 * removing it uncovers the cells that only l covers. Those counts depend on x's factor set
 * alone, not on which cells of x's line are ones, and the lines of a matrix share few
 * factor sets (every line without factors shares the empty one). So they are computed once
 * per factor set and half-sweep, densely over the other side's bits, and each line adds
 * only its ones (bmf_cpu.c): the cost of a sweep follows the ones and the distinct factor
 * sets instead of rows x columns. */
#ifndef MF_BMF_FSET_H
#define MF_BMF_FSET_H
#include <stdint.h>

typedef struct bmf_fset_cache bmf_fset_cache;

/* A cache for rank k (kw words a factor set) over an other side of nw words a factor; NULL
 * when out of memory. Its entries hold for one other side (Yt): a new cache per half-sweep. */
bmf_fset_cache *bmf_fset_cache_new(int k, int kw, int64_t nw);
void bmf_fset_cache_free(bmf_fset_cache *c);

/* For factor set x (kw words) against Yt (k rows of nw words: factor l's other-side
 * cells, zero past the end): vals[l] is, for l not in x, the cells of Y_l that no factor
 * of x covers and, for l in x, the cells of Y_l that l alone covers; *cover is the cells x
 * covers. The array stays valid until the next call. */
const int64_t *bmf_fset_counts(bmf_fset_cache *c, const uint64_t *x, const uint64_t *Yt,
                               int64_t *cover);

#endif
