/* The handle of a loaded model file (mf_saved_model): host copies of the model's arrays and
 * the file's metadata. Internal; the public type is opaque. */
#ifndef MF_CORE_SAVED_MODEL_H
#define MF_CORE_SAVED_MODEL_H

#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mf_saved_model {
    int32_t users, items;
    int k;
    float mean;
    float *U, *V;                   /* users x k, items x k, leading dimension k */
    float *user_bias, *item_bias;   /* NULL where the file has none */
    char *algorithm, *options;      /* NUL-terminated; "" where the file has none */
    char version[32];               /* the writer's "major.minor.patch" */
    mf_id_map *user_ids, *item_ids; /* NULL where the file has none */
};

/* A handle with nothing in it (every pointer NULL), or NULL when out of memory. */
mf_saved_model *mf_saved_model_new(void);

#ifdef __cplusplus
}
#endif
#endif
