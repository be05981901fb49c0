#include "cuda/dynamic_library.h"

#include <dlfcn.h>
#include <stdio.h>

int mf_dl_load(const char *const *names, int n_names, const mf_dl_symbol *table, int n, char *why,
               size_t why_len)
{
    void *lib = NULL;
    const char *first = NULL, *opened = NULL;
    for (int i = 0; i < n_names && !lib; i++)
        if (names[i] && *names[i]) {
            first = first ? first : names[i];
            if ((lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) != NULL)
                opened = names[i];
        }
    if (!lib) {
        const char *err = dlerror();
        snprintf(why, why_len, "%s", err ? err : first ? first : "no library named");
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (!(*table[i].slot = dlsym(lib, table[i].symbol))) {
            snprintf(why, why_len, "%s lacks %s", opened, table[i].symbol);
            dlclose(lib);
            return 0;
        }
    return 1;
}
