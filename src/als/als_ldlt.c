/* LDL^T solve of one small SPD system: the CPU engine's solver and the tests' reference
 * for the batched GPU solver. Crout order (left-looking) keeps each original diagonal
 * entry until its pivot is formed, which the breakdown test compares against: a pivot that
 * lost all but k ulps of its diagonal means the system is singular to float precision. */
#include <float.h>
#include <math.h>

#include "als/als_internal.h"

int mf_ldlt_solve(int k, float *A, int64_t lda, float *b)
{
    /* Column j: d_j = A_jj - sum_m L_jm^2 d_m; L_ij = (A_ij - sum_m L_im L_jm d_m) / d_j.
     * The diagonal of A ends up holding d, the strict lower triangle L. */
    for (int j = 0; j < k; j++) {
        float *aj = A + (int64_t)j * lda;
        float d = aj[j];
        for (int m = 0; m < j; m++)
            d -= aj[m] * aj[m] * A[(int64_t)m * lda + m];
        if (!(d > (float)k * FLT_EPSILON * aj[j]) || !isfinite(d))
            return j;
        aj[j] = d;
        for (int i = j + 1; i < k; i++) {
            float *ai = A + (int64_t)i * lda;
            float s = ai[j];
            for (int m = 0; m < j; m++)
                s -= ai[m] * aj[m] * A[(int64_t)m * lda + m];
            ai[j] = s / d;
        }
    }
    /* L y = b, z = D^-1 y, L^T x = z. */
    for (int i = 0; i < k; i++) {
        const float *ai = A + (int64_t)i * lda;
        float s = b[i];
        for (int m = 0; m < i; m++)
            s -= ai[m] * b[m];
        b[i] = s;
    }
    for (int i = 0; i < k; i++)
        b[i] /= A[(int64_t)i * lda + i];
    for (int i = k - 1; i >= 0; i--) {
        float x = b[i];
        const float *ai = A + (int64_t)i * lda;
        for (int m = 0; m < i; m++)
            b[m] -= ai[m] * x;
    }
    return -1;
}
