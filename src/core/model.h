/* The caller's mf_model, checked once for every function that takes one. */
#ifndef MF_CORE_MODEL_H
#define MF_CORE_MODEL_H

#include "mfact/mfact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether `size` is a struct_size of an mf_model: at least through `where`, and a sizeof
 * (of this or another version) or what mf_model_init of binaries before 0.4 wrote, never a
 * size ending inside a field. */
int mf_model_size_valid(size_t size);

/* The fields of `model` the caller set (struct_size honoured) into *m, checked: shape,
 * leading dimensions, non-NULL factors, a finite mean, and every array in m->where memory.
 * fn names the public function in messages. */
mf_status mf_model_check(mf_ctx *ctx, const mf_model *model, const char *fn, mf_model *m);

#ifdef __cplusplus
}
#endif
#endif
