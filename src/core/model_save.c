/* mf_model_save: an mf_model and its metadata into a model file (core/model_format.h),
 * written under a temporary name beside the target, flushed to disk, then renamed over it:
 * the target is the old file or the whole new one, never a part. */
#define _POSIX_C_SOURCE 200809L /* fdopen, fsync, strnlen */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crc32.h"
#include "core/ctx.h"
#include "core/id_map.h"
#include "core/model.h"
#include "core/model_format.h"
#include "core/opts.h"
#include "core/staging.h"
#include "cuda/cuda_backend.h"

static void save_defaults(mf_model_save_opts *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

MF_OPTS_INITIALIZERS(mf_model_save_opts, mf_model_save_opts_init, save_defaults, options)

/* Algorithm, options, U, V, two biases, two id maps. */
#define MAX_SECTIONS 8

/* One section's payload: text, a rows x k float matrix with leading dimension ld, or an
 * id map (its ids, each followed by a NUL: the map's own text). */
typedef struct payload {
    uint32_t kind, flags;
    const char *text;
    const float *X;
    int64_t rows, k, ld;
    const mf_id_map *ids;
} payload;

static uint64_t payload_bytes(const payload *p)
{
    if (p->ids)
        return (uint64_t)p->ids->text_len;
    return p->text ? (uint64_t)strlen(p->text) : (uint64_t)p->rows * (uint64_t)p->k * 4u;
}

/* The file being written: every byte goes through put(), which keeps the whole-file CRC. */
typedef struct writer {
    FILE *f;
    uint32_t crc;
    int err; /* errno of the first failed write, else 0 */
} writer;

static void put(writer *w, const void *data, size_t n)
{
    if (w->err || n == 0)
        return;
    if (fwrite(data, 1, n, w->f) != n)
        w->err = errno ? errno : EIO;
    w->crc = mf_crc32(w->crc, data, n);
}

/* The payload's bytes in file order, a chunk at a time, to put() and the section's CRC. */
static uint32_t put_payload(writer *w, const payload *p)
{
    if (p->ids) {
        put(w, p->ids->text, (size_t)p->ids->text_len);
        return mf_crc32(0, p->ids->text, (size_t)p->ids->text_len);
    }
    if (p->text) {
        size_t n = strlen(p->text);
        put(w, p->text, n);
        return mf_crc32(0, p->text, n);
    }
    enum { CHUNK = 8192 };
    unsigned char buf[CHUNK * 4];
    uint32_t crc = 0;
    size_t held = 0;
    for (int64_t r = 0; r < p->rows; r++)
        for (int64_t t = 0; t < p->k; t++) {
            mf_put_f32(buf + 4 * held, p->X[r * p->ld + t]);
            if (++held == CHUNK || (r + 1 == p->rows && t + 1 == p->k)) {
                put(w, buf, 4 * held);
                crc = mf_crc32(crc, buf, 4 * held);
                held = 0;
            }
        }
    return crc;
}

static void put_section(writer *w, const payload *p)
{
    static const unsigned char zeros[8] = {0};
    const uint64_t n = payload_bytes(p);
    unsigned char head[MF_MODEL_SECTION_BYTES] = {0}, foot[MF_MODEL_FOOTER_BYTES] = {0};
    mf_put_u32(head, p->kind);
    mf_put_u32(head + 4, p->flags);
    mf_put_u64(head + 8, n);
    mf_put_u32(head + 20, mf_crc32(0, head, 20));
    put(w, head, sizeof head);
    mf_put_u32(foot, put_payload(w, p));
    put(w, zeros, (size_t)(mf_model_align8(n) - n));
    put(w, foot, sizeof foot);
}

static void put_header(writer *w, const mf_model *m, uint64_t file_bytes, uint32_t sections)
{
    unsigned char h[MF_MODEL_HEADER_BYTES] = {0};
    memcpy(h, MF_MODEL_MAGIC, MF_MODEL_MAGIC_BYTES);
    mf_put_u32(h + MF_MH_VERSION, MF_MODEL_VERSION);
    mf_put_u32(h + MF_MH_HEADER_BYTES, MF_MODEL_HEADER_BYTES);
    mf_put_u64(h + MF_MH_FILE_BYTES, file_bytes);
    mf_put_u32(h + MF_MH_SECTIONS, sections);
    mf_put_u32(h + MF_MH_WRITER, mf_version());
    mf_put_u32(h + MF_MH_USERS, (uint32_t)m->users);
    mf_put_u32(h + MF_MH_ITEMS, (uint32_t)m->items);
    mf_put_u32(h + MF_MH_K, (uint32_t)m->k);
    mf_put_u32(h + MF_MH_FLAGS,
               (m->user_bias ? MF_MODEL_USER_BIAS : 0u) | (m->item_bias ? MF_MODEL_ITEM_BIAS : 0u));
    mf_put_f32(h + MF_MH_MEAN, m->mean);
    mf_put_u32(h + MF_MH_CRC, mf_crc32(0, h, MF_MH_CRC));
    put(w, h, sizeof h);
}

static void put_trailer(writer *w)
{
    unsigned char t[MF_MODEL_TRAILER_BYTES] = {0};
    memcpy(t, MF_MODEL_END_MAGIC, MF_MODEL_MAGIC_BYTES);
    put(w, t, MF_MODEL_MAGIC_BYTES);
    mf_put_u32(t + 8, w->crc);
    put(w, t + 8, 8);
}

/* The sections of model m (host arrays) and opts, in file order; returns their number. */
static uint32_t sections_of(const mf_model *m, const mf_model_save_opts *o, payload s[MAX_SECTIONS])
{
    uint32_t n = 0;
    const uint32_t req = MF_SECTION_REQUIRED;
    if (o->algorithm && *o->algorithm)
        s[n++] = (payload){MF_SECTION_ALGORITHM, 0, o->algorithm, NULL, 0, 0, 0, NULL};
    if (o->options && *o->options)
        s[n++] = (payload){MF_SECTION_OPTIONS, 0, o->options, NULL, 0, 0, 0, NULL};
    s[n++] = (payload){MF_SECTION_U, req, NULL, m->U, m->users, m->k, m->ldu, NULL};
    s[n++] = (payload){MF_SECTION_V, req, NULL, m->V, m->items, m->k, m->ldv, NULL};
    if (m->user_bias)
        s[n++] = (payload){MF_SECTION_USER_BIAS, req, NULL, m->user_bias, m->users, 1, 1, NULL};
    if (m->item_bias)
        s[n++] = (payload){MF_SECTION_ITEM_BIAS, req, NULL, m->item_bias, m->items, 1, 1, NULL};
    /* Required: a reader that ignored them would read the file's ids as indices. */
    if (o->user_ids)
        s[n++] = (payload){MF_SECTION_USER_IDS, req, NULL, NULL, 0, 0, 0, o->user_ids};
    if (o->item_ids)
        s[n++] = (payload){MF_SECTION_ITEM_IDS, req, NULL, NULL, 0, 0, 0, o->item_ids};
    return n;
}

/* Create path's temporary sibling, exclusively, with the permissions a new file gets (the
 * umask's), not mkstemp's 0600. */
static FILE *create_temporary(const char *path, char *tmp, size_t cap)
{
    static atomic_uint counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, cap, "%s.%ld-%u.tmp", path, (long)getpid(),
                 atomic_fetch_add_explicit(&counter, 1u, memory_order_relaxed));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "wb");
            if (!f) {
                int e = errno;
                close(fd);
                unlink(tmp);
                errno = e;
            }
            return f;
        }
        if (errno != EEXIST)
            return NULL;
    }
    return NULL;
}

/* Write the file; MF_ERR_IO with the reason when the system refuses. */
static mf_status write_file(mf_ctx *ctx, const char *path, const mf_model *m,
                            const mf_model_save_opts *o)
{
    payload s[MAX_SECTIONS];
    const uint32_t n = sections_of(m, o, s);
    uint64_t bytes = MF_MODEL_HEADER_BYTES + MF_MODEL_TRAILER_BYTES;
    for (uint32_t i = 0; i < n; i++)
        bytes +=
            MF_MODEL_SECTION_BYTES + mf_model_align8(payload_bytes(&s[i])) + MF_MODEL_FOOTER_BYTES;
    struct stat st_path;
    if (stat(path, &st_path) == 0 && S_ISDIR(st_path.st_mode))
        return mf_fail(ctx, MF_ERR_IO, "%s: is a directory", path);
    size_t cap = strlen(path) + 48;
    char *tmp = malloc(cap);
    if (!tmp)
        return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "mf_model_save: out of host memory");
    writer w = {create_temporary(path, tmp, cap), 0, 0};
    if (!w.f) {
        mf_status st =
            mf_fail(ctx, MF_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return st;
    }
    put_header(&w, m, bytes, n);
    for (uint32_t i = 0; i < n; i++)
        put_section(&w, &s[i]);
    put_trailer(&w);
    if (!w.err && fflush(w.f) != 0)
        w.err = errno;
    if (!w.err && fsync(fileno(w.f)) != 0)
        w.err = errno;
    if (fclose(w.f) != 0 && !w.err)
        w.err = errno;
    const char *step = "writing";
    if (!w.err && rename(tmp, path) != 0)
        w.err = errno, step = "renaming it over";
    mf_status st = MF_OK;
    if (w.err) {
        st = mf_fail(ctx, MF_ERR_IO, "%s: %s %s failed: %s", path, step, tmp, strerror(w.err));
        unlink(tmp);
    }
    free(tmp);
    return st;
}

/* Host copies of a device model's arrays into bufs (4), and m pointed at them. */
static mf_status download(mf_ctx *ctx, mf_model *m, float *bufs[4])
{
    const float **src[4] = {&m->U, &m->V, &m->user_bias, &m->item_bias};
    const size_t bytes[4] = {mf_matrix_bytes(m->users, m->k, m->ldu),
                             mf_matrix_bytes(m->items, m->k, m->ldv),
                             (size_t)m->users * sizeof(float), (size_t)m->items * sizeof(float)};
    for (int i = 0; i < 4; i++) {
        if (!*src[i])
            continue;
        bufs[i] = malloc(bytes[i]);
        if (!bufs[i])
            return mf_fail(ctx, MF_ERR_OUT_OF_MEMORY,
                           "mf_model_save: out of host memory for a copy of %zu bytes", bytes[i]);
        MF_TRY(mf_cuda_copy(ctx, bufs[i], *src[i], bytes[i]));
        *src[i] = bufs[i];
    }
    return MF_OK;
}

static int algorithm_ok(const char *a)
{
    size_t n = strnlen(a, MF_MODEL_ALGORITHM_MOST + 1);
    if (n > MF_MODEL_ALGORITHM_MOST)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", a[i]))
            return 0;
    return 1;
}

mf_status mf_model_save(mf_ctx *ctx, const mf_model *model, const mf_model_save_opts *opts,
                        const char *path)
{
    static const char fn[] = "mf_model_save";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    mf_model m;
    MF_TRY(mf_model_check(ctx, model, fn, &m));
    MF_REQUIRE(ctx, path && *path, "%s: path is %s", fn, path ? "empty" : "NULL");
    mf_model_save_opts o;
    save_defaults(&o);
    if (opts)
        MF_TRY(MF_OPTS_LOAD(ctx, mf_model_save_opts, &o, opts));
    MF_REQUIRE(ctx, !o.algorithm || algorithm_ok(o.algorithm),
               "%s: the algorithm name must be at most %u of A-Z, a-z, 0-9, '.', '_' and '-'", fn,
               MF_MODEL_ALGORITHM_MOST);
    MF_REQUIRE(ctx,
               !o.options || strnlen(o.options, MF_MODEL_OPTIONS_MOST + 1) <= MF_MODEL_OPTIONS_MOST,
               "%s: the options text is longer than %u bytes", fn, MF_MODEL_OPTIONS_MOST);
    MF_REQUIRE(ctx, !o.user_ids || mf_id_map_count(o.user_ids) == m.users,
               "%s: user_ids holds %d ids for the model's %d users", fn,
               mf_id_map_count(o.user_ids), m.users);
    MF_REQUIRE(ctx, !o.item_ids || mf_id_map_count(o.item_ids) == m.items,
               "%s: item_ids holds %d ids for the model's %d items", fn,
               mf_id_map_count(o.item_ids), m.items);
    float *bufs[4] = {NULL, NULL, NULL, NULL};
    mf_status st = m.where == MF_MEMORY_DEVICE ? download(ctx, &m, bufs) : MF_OK;
    if (st == MF_OK)
        st = write_file(ctx, path, &m, &o);
    for (int i = 0; i < 4; i++)
        free(bufs[i]);
    return st;
}
