#include "core/cholesky.h"

#include <math.h>
#include <stddef.h>

int mf_cholesky_solve(int n, double *A, double *b)
{
    for (int j = 0; j < n; j++) {
        double d = A[(size_t)j * n + j];
        for (int t = 0; t < j; t++)
            d -= A[(size_t)j * n + t] * A[(size_t)j * n + t];
        if (!(d > 0.0) || !isfinite(d))
            return j;
        d = sqrt(d);
        A[(size_t)j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[(size_t)i * n + j];
            for (int t = 0; t < j; t++)
                s -= A[(size_t)i * n + t] * A[(size_t)j * n + t];
            A[(size_t)i * n + j] = s / d;
        }
    }
    for (int i = 0; i < n; i++) { /* L y = b */
        double s = b[i];
        for (int t = 0; t < i; t++)
            s -= A[(size_t)i * n + t] * b[t];
        b[i] = s / A[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) { /* L^T x = y */
        double s = b[i];
        for (int t = i + 1; t < n; t++)
            s -= A[(size_t)t * n + i] * b[t];
        b[i] = s / A[(size_t)i * n + i];
    }
    return -1;
}
