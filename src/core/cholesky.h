/* Small dense SPD solves in double, for the CPU engines and the host-side solvers. */
#ifndef MF_CORE_CHOLESKY_H
#define MF_CORE_CHOLESKY_H

#ifdef __cplusplus
extern "C" {
#endif

/* Solve A x = b for the n x n SPD A (row-major, leading dimension n; only the lower triangle
 * read, and overwritten by L of A = L L^T); b becomes x. Returns -1, or the first pivot that
 * was not positive (or not finite), leaving b unspecified. */
int mf_cholesky_solve(int n, double *A, double *b);

#ifdef __cplusplus
}
#endif
#endif
