/* A toolkit library reached through dlopen() instead of a link-time dependency (cuSPARSE,
 * NCCL): the first of its names that loads, and every symbol of a table resolved, or why
 * not. Plain C. */
#ifndef MF_CUDA_DYNAMIC_LIBRARY_H
#define MF_CUDA_DYNAMIC_LIBRARY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_dl_symbol {
    void **slot;
    const char *symbol;
} mf_dl_symbol;

/* Open the first of names[0..n_names) (NULL or empty entries skipped) that dlopen loads and
 * set every table[i].slot to its symbol. Returns 1; or 0 with the reason in why (dlerror's,
 * or the missing symbol) and the library closed again. */
int mf_dl_load(const char *const *names, int n_names, const mf_dl_symbol *table, int n, char *why,
               size_t why_len);

#ifdef __cplusplus
}
#endif
#endif
