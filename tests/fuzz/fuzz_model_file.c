/* libFuzzer harness of mf_model_load (docs/model-file.md). An input is a whole file: it is
 * written to a memfd and loaded through /proc/self/fd/N, so nothing touches a disk but the
 * round trip below.
 *
 * Findings abort() after printing the broken rule, the status and the message.
 * A failure must leave the output as it was, return a data or unsupported status (out of
 * memory only for inputs of 4 KiB or more: the reader allocates no more than the file
 * holds), and set a fresh, short, printable message that starts with the path.
 * A success must give a handle whose view is a valid host model that fits in the input
 * (users, items, k >= 1; the factors and biases no larger than the file; a finite mean),
 * metadata strings within the format's limits, id maps of the model's size whose every id
 * is found at its own index, predictions at two pairs that are finite
 * wherever the model's numbers are moderate, and a round trip: the model saved again (under
 * $TMPDIR) loads as the same model, bit for bit, with the same metadata and ids.
 * Random changes almost never keep a checksum right, so that the checks behind the
 * checksums (sizes, kinds, shapes, duplicates) are reached too, every input is loaded
 * twice: as it is, and with every checksum its structure allows recomputed (fix_checksums).
 * MFACT_FUZZ_VERBOSE=1 prints every input's outcome. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mfact/mfact.h>

#include "core/crc32.h"
#include "core/model_format.h"
#include "fuzz_util.h"

#define SMALL_INPUT 4096 /* out of memory below this many bytes is a finding */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char again_path[PATH_MAX]; /* the round trip's file */
static char sentinel[256];        /* the message of a call that fails on purpose */
static size_t cur_size;
static mf_status cur_status;

static void print_case(void)
{
    fprintf(stderr, "  %zu bytes, status %d (%s)", cur_size, (int)cur_status,
            mf_status_string(cur_status));
    if (cur_status != MF_OK) {
        fputs(", message \"", stderr);
        fuzz_print_escaped(mf_ctx_last_error(fuzz_ctx));
        fputc('"', stderr);
    }
    fputc('\n', stderr);
}

static void remove_again(void)
{
    unlink(again_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_init("fuzz_model_file", print_case);
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(again_path, sizeof again_path, "%s/mfact-fuzz-model-%ld.mfm", tmp, (long)getpid());
    atexit(remove_again);
    /* A call that fails on purpose sets a known message: every load is preceded by one, so
     * a failure that leaves the message alone is seen. */
    if (mf_model_load(fuzz_ctx, fuzz_fd_path, NULL) != MF_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "fuzz_model_file: mf_model_load with out NULL did not fail\n");
        abort();
    }
    snprintf(sentinel, sizeof sentinel, "%s", mf_ctx_last_error(fuzz_ctx));
    return 0;
}

static void check_failure(mf_saved_model *out, const char *path)
{
    if (out)
        fuzz_finding("the output is not NULL after a failure");
    switch (cur_status) {
    case MF_ERR_INVALID_DATA:
    case MF_ERR_UNSUPPORTED: break;
    case MF_ERR_OUT_OF_MEMORY:
        if (cur_size < SMALL_INPUT)
            fuzz_finding("out of memory on a %zu-byte input", cur_size);
        break;
    default: fuzz_finding("unexpected status");
    }
    if (strncmp(mf_ctx_last_error(fuzz_ctx), path, strlen(path)) != 0)
        fuzz_finding("the message does not start with the path");
    fuzz_check_message(path, sentinel);
}

/* An id map of the file: n ids (the model's users or items), each short text with no
 * control byte, found again at its own index. */
static void check_ids(const mf_id_map *ids, int32_t n, const char *what)
{
    if (!ids)
        return;
    if (mf_id_map_count(ids) != n)
        fuzz_finding("%d %s ids for %d %s", mf_id_map_count(ids), what, n, what);
    for (int32_t i = 0; i < n; i++) {
        const char *id = mf_id_map_id(ids, i);
        if (!id || !*id || strlen(id) > 4096 || strlen(id) > cur_size)
            fuzz_finding("%s id %d is missing, empty or too long", what, i);
        for (const char *p = id; *p; p++)
            if ((unsigned char)*p < 0x20)
                fuzz_finding("%s id %d holds a control byte", what, i);
        if (mf_id_map_index(ids, id) != i)
            fuzz_finding("%s id %d is found at %d", what, i, mf_id_map_index(ids, id));
    }
}

static bool same_ids(const mf_id_map *a, const mf_id_map *b)
{
    if (!a || !b)
        return !a && !b;
    if (mf_id_map_count(a) != mf_id_map_count(b))
        return false;
    for (int32_t i = 0; i < mf_id_map_count(a); i++)
        if (strcmp(mf_id_map_id(a, i), mf_id_map_id(b, i)) != 0)
            return false;
    return true;
}

/* The view of a loaded model: a valid host model no larger than the file. */
static mf_model check_view(const mf_saved_model *s)
{
    mf_model m;
    mf_model_init(&m);
    if (mf_saved_model_view(s, &m) != MF_OK)
        fuzz_finding("mf_saved_model_view failed: %s", mf_ctx_last_error(NULL));
    if (m.users < 1 || m.items < 1 || m.k < 1)
        fuzz_finding("users %d, items %d, k %d", m.users, m.items, m.k);
    if (m.where != MF_MEMORY_HOST || m.ldu != m.k || m.ldv != m.k || !m.U || !m.V)
        fuzz_finding("the view is not a dense host model");
    const double floats = ((double)m.users + m.items) * m.k + (m.user_bias ? m.users : 0) +
                          (m.item_bias ? m.items : 0);
    if (4 * floats > (double)cur_size)
        fuzz_finding("%.0f floats from a %zu-byte file", floats, cur_size);
    if (!isfinite(m.mean))
        fuzz_finding("mean %g", (double)m.mean);
    const char *algorithm = mf_saved_model_algorithm(s), *options = mf_saved_model_options(s);
    if (strlen(algorithm) > 63 ||
        strspn(algorithm, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            strlen(algorithm))
        fuzz_finding("algorithm name \"%s\"", algorithm);
    if (strlen(options) > cur_size)
        fuzz_finding("%zu bytes of options from a %zu-byte file", strlen(options), cur_size);
    if (!*mf_saved_model_library_version(s))
        fuzz_finding("no library version");
    check_ids(mf_saved_model_user_ids(s), m.users, "user");
    check_ids(mf_saved_model_item_ids(s), m.items, "item");
    return m;
}

/* Whether every x[i] is finite and at most 1e15 in magnitude: then a dot product of up to
 * 10^6 terms cannot overflow a float. */
static bool moderate(const float *x, int64_t n)
{
    for (int64_t i = 0; x && i < n; i++)
        if (!(fabsf(x[i]) <= 1e15f))
            return false;
    return true;
}

/* Two predictions (the first and the last pair), finite where the model's numbers are
 * moderate (large finite ones may overflow to infinities of both signs, and so to NaN). */
static void check_predictions(const mf_model *m)
{
    const int32_t user[2] = {0, m->users - 1}, item[2] = {0, m->items - 1};
    float out[2];
    if (mf_predict_pairs(fuzz_ctx, m, 2, user, item, out) != MF_OK)
        fuzz_finding("mf_predict_pairs failed: %s", mf_ctx_last_error(fuzz_ctx));
    const bool fine = moderate(m->U, (int64_t)m->users * m->k) &&
                      moderate(m->V, (int64_t)m->items * m->k) &&
                      moderate(m->user_bias, m->users) && moderate(m->item_bias, m->items) &&
                      moderate(&m->mean, 1);
    if (fine && !(isfinite(out[0]) && isfinite(out[1])))
        fuzz_finding("predictions %g and %g from a model of moderate numbers", (double)out[0],
                     (double)out[1]);
}

static bool same_floats(const float *a, const float *b, int64_t n)
{
    return (!a && !b) || (a && b && memcmp(a, b, (size_t)n * sizeof *a) == 0);
}

/* Saved again and loaded: the same model and metadata. */
static void check_round_trip(const mf_saved_model *s, const mf_model *m)
{
    mf_model_save_opts o;
    mf_model_save_opts_init(&o);
    o.algorithm = mf_saved_model_algorithm(s);
    o.options = mf_saved_model_options(s);
    o.user_ids = mf_saved_model_user_ids(s);
    o.item_ids = mf_saved_model_item_ids(s);
    if (mf_model_save(fuzz_ctx, m, &o, again_path) != MF_OK)
        fuzz_finding("saving the loaded model failed: %s", mf_ctx_last_error(fuzz_ctx));
    mf_saved_model *t = NULL;
    if (mf_model_load(fuzz_ctx, again_path, &t) != MF_OK)
        fuzz_finding("the saved model does not load: %s", mf_ctx_last_error(fuzz_ctx));
    mf_model n;
    mf_model_init(&n);
    if (mf_saved_model_view(t, &n) != MF_OK)
        fuzz_finding("mf_saved_model_view failed");
    if (n.users != m->users || n.items != m->items || n.k != m->k ||
        memcmp(&n.mean, &m->mean, sizeof n.mean) != 0 ||
        !same_floats(n.U, m->U, (int64_t)m->users * m->k) ||
        !same_floats(n.V, m->V, (int64_t)m->items * m->k) ||
        !same_floats(n.user_bias, m->user_bias, m->users) ||
        !same_floats(n.item_bias, m->item_bias, m->items))
        fuzz_finding("the model saved again loads as another model");
    if (strcmp(mf_saved_model_algorithm(t), o.algorithm) != 0 ||
        strcmp(mf_saved_model_options(t), o.options) != 0 ||
        strcmp(mf_saved_model_library_version(t), mf_version_string()) != 0)
        fuzz_finding("the model saved again has other metadata");
    if (!same_ids(mf_saved_model_user_ids(t), o.user_ids) ||
        !same_ids(mf_saved_model_item_ids(t), o.item_ids))
        fuzz_finding("the model saved again has other ids");
    mf_saved_model_destroy(t);
}

/* The input with the header's, every reachable section's and the trailer's CRC-32
 * recomputed, walking the sections by their stated lengths as far as they stay inside. */
static void fix_checksums(uint8_t *f, size_t size)
{
    if (size < MF_MODEL_HEADER_BYTES + MF_MODEL_TRAILER_BYTES)
        return;
    mf_put_u32(f + MF_MH_CRC, mf_crc32(0, f, MF_MH_CRC));
    const uint64_t end = size - MF_MODEL_TRAILER_BYTES;
    for (uint64_t at = MF_MODEL_HEADER_BYTES;
         end - at >= MF_MODEL_SECTION_BYTES + MF_MODEL_FOOTER_BYTES;) {
        uint8_t *h = f + at;
        mf_put_u32(h + 20, mf_crc32(0, h, 20));
        const uint64_t length = mf_get_u64(h + 8), room = end - at - 32;
        if (length > room || mf_model_align8(length) > room)
            break;
        mf_put_u32(h + 24 + mf_model_align8(length), mf_crc32(0, h + 24, (size_t)length));
        at += 32 + mf_model_align8(length);
    }
    mf_put_u32(f + size - 8, mf_crc32(0, f, size - 8));
}

/* Load data[0..size) and check what the load gave. */
static void check_load(const uint8_t *data, size_t size)
{
    cur_size = size;
    fuzz_write(data, size);
    (void)mf_model_load(fuzz_ctx, fuzz_fd_path, NULL);
    mf_saved_model *s = NULL;
    cur_status = mf_model_load(fuzz_ctx, fuzz_fd_path, &s);
    if (fuzz_verbose)
        print_case();
    if (cur_status != MF_OK) {
        check_failure(s, fuzz_fd_path);
        return;
    }
    if (!s)
        fuzz_finding("MF_OK with a NULL handle");
    mf_model m = check_view(s);
    check_predictions(&m);
    check_round_trip(s, &m);
    mf_saved_model_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_load(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    if (!fixed) {
        fprintf(stderr, "fuzz_model_file: the harness is out of memory\n");
        abort();
    }
    memcpy(fixed, data, size);
    fix_checksums(fixed, size);
    if (memcmp(fixed, data, size) != 0)
        check_load(fixed, size);
    free(fixed);
    return 0;
}
