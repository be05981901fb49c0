/* The loaded model's handle: its view as an mf_model, its metadata, its release. The file
 * itself is read by model_load.c. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/id_map.h"
#include "core/model.h"
#include "core/opts.h"
#include "core/saved_model.h"

mf_saved_model *mf_saved_model_new(void)
{
    return calloc(1, sizeof(mf_saved_model));
}

mf_status mf_saved_model_view(const mf_saved_model *saved, mf_model *out)
{
    static const char fn[] = "mf_saved_model_view";
    MF_REQUIRE(NULL, saved && out, "%s: saved and out must not be NULL", fn);
    size_t size;
    memcpy(&size, out, sizeof size);
    MF_REQUIRE(NULL, mf_model_size_valid(size),
               "%s: out->struct_size = %zu is not an mf_model's (set it with mf_model_init)", fn,
               size);
    mf_model m;
    mf_model_init(&m);
    m.users = saved->users, m.items = saved->items, m.k = saved->k;
    m.U = saved->U, m.ldu = saved->k;
    m.V = saved->V, m.ldv = saved->k;
    m.mean = saved->mean;
    m.user_bias = saved->user_bias, m.item_bias = saved->item_bias;
    m.where = MF_MEMORY_HOST;
    /* The caller's struct as far as both know it (a longer one keeps its own tail). */
    memcpy((char *)out + sizeof size, (const char *)&m + sizeof size,
           (size < sizeof m ? size : sizeof m) - sizeof size);
    return MF_OK;
}

const char *mf_saved_model_algorithm(const mf_saved_model *saved)
{
    return saved && saved->algorithm ? saved->algorithm : "";
}

const char *mf_saved_model_options(const mf_saved_model *saved)
{
    return saved && saved->options ? saved->options : "";
}

const char *mf_saved_model_library_version(const mf_saved_model *saved)
{
    return saved ? saved->version : "";
}

const mf_id_map *mf_saved_model_user_ids(const mf_saved_model *saved)
{
    return saved ? saved->user_ids : NULL;
}

const mf_id_map *mf_saved_model_item_ids(const mf_saved_model *saved)
{
    return saved ? saved->item_ids : NULL;
}

void mf_saved_model_destroy(mf_saved_model *saved)
{
    if (!saved)
        return;
    free(saved->U);
    free(saved->V);
    free(saved->user_bias);
    free(saved->item_bias);
    free(saved->algorithm);
    free(saved->options);
    mf_id_map_destroy(saved->user_ids);
    mf_id_map_destroy(saved->item_ids);
    free(saved);
}
