/* mf_model_load: a model file (core/model_format.h) into an mf_saved_model. The file is read
 * once, front to back. Every size it states is checked against its real size before
 * anything is allocated, so no file, however altered, makes the reader allocate more than
 * the file holds; every checksum is checked before the call returns. Messages start with
 * the path and say what is wrong and where. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32.h"
#include "core/error.h"
#include "core/id_map.h"
#include "core/input_file.h"
#include "core/model_format.h"
#include "core/saved_model.h"

typedef struct reader {
    mf_ctx *ctx;
    mf_input in;
    uint64_t pos;   /* bytes read */
    uint64_t bytes; /* the file's size (the header says the same) */
    uint32_t crc;   /* of every byte read */
    /* From the header. */
    int32_t users, items, k;
    uint32_t flags;
} reader;

static mf_status fail_at(reader *r, mf_status status, const char *fmt, ...) MF_PRINTF(3, 4);
static mf_status fail_at(reader *r, mf_status status, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mf_fail(r->ctx, status, "%s: %s", r->in.path, what);
}

#define BAD(r, ...) fail_at((r), MF_ERR_INVALID_DATA, __VA_ARGS__)

/* n bytes into dst (NULL: read and drop), through the whole-file CRC and, when `also` is
 * given, that one too. The sizes were checked against the file's: a short read means it
 * shrank meanwhile, or the system failed. */
static mf_status take_crc(reader *r, void *dst, uint64_t n, uint32_t *also)
{
    unsigned char scratch[4096];
    while (n > 0) {
        size_t want = n < sizeof scratch || dst ? (size_t)n : sizeof scratch;
        unsigned char *to = dst ? (unsigned char *)dst : scratch;
        size_t got = mf_input_read(&r->in, to, want);
        r->crc = mf_crc32(r->crc, to, got);
        if (also)
            *also = mf_crc32(*also, to, got);
        r->pos += got;
        if (got < want) {
            if (mf_input_error(&r->in))
                return fail_at(r, MF_ERR_IO, "reading failed at byte %llu",
                               (unsigned long long)r->pos);
            return BAD(r, "truncated at byte %llu (the file shrank while it was read)",
                       (unsigned long long)r->pos);
        }
        n -= got;
        if (dst)
            dst = (unsigned char *)dst + got;
    }
    return MF_OK;
}

static mf_status take(reader *r, void *dst, uint64_t n)
{
    return take_crc(r, dst, n, NULL);
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* ---- the header ------------------------------------------------------------------------ */

/* The magic, the header and its checksum, the format version, the file's size; then the
 * model's shape, checked against what the file can hold. */
static mf_status read_header(reader *r, uint32_t *sections, float *mean, unsigned *writer)
{
    unsigned char h[MF_MODEL_HEADER_MOST];
    const uint64_t size = r->bytes;
    const uint64_t first = size < 16 ? size : 16;
    MF_TRY(take(r, h, first));
    if (size == 0)
        return BAD(r, "an empty file, not an mfact model file");
    const size_t magic = first < MF_MODEL_MAGIC_BYTES ? (size_t)first : MF_MODEL_MAGIC_BYTES;
    if (memcmp(h, MF_MODEL_MAGIC, magic) != 0)
        return BAD(r, "not an mfact model file (it does not start with \"%s\")", MF_MODEL_MAGIC);
    if (size < 16)
        return BAD(r, "truncated at byte %llu: a model file's header alone has %u bytes",
                   (unsigned long long)size, MF_MODEL_HEADER_BYTES);
    const uint32_t version = mf_get_u32(h + MF_MH_VERSION);
    const uint32_t header = mf_get_u32(h + MF_MH_HEADER_BYTES);
    if (header < MF_MODEL_HEADER_BYTES || header > MF_MODEL_HEADER_MOST || header % 8)
        return BAD(r, "the header's size, %u bytes, is not a model header's", header);
    if (size < header)
        return BAD(r, "truncated at byte %llu: the header alone has %u bytes",
                   (unsigned long long)size, header);
    MF_TRY(take(r, h + 16, header - 16));
    if (mf_crc32(0, h, header - 4) != mf_get_u32(h + header - 4))
        return BAD(r, "header checksum mismatch");
    if (version > MF_MODEL_VERSION)
        return fail_at(r, MF_ERR_UNSUPPORTED,
                       "format version %u is newer than this mfact (%s) reads (%u); load it "
                       "with a newer mfact",
                       version, mf_version_string(), MF_MODEL_VERSION);
    if (version == 0 || header != MF_MODEL_HEADER_BYTES)
        return BAD(r, "format version %u with a %u-byte header is not a model file's", version,
                   header);
    const uint64_t stated = mf_get_u64(h + MF_MH_FILE_BYTES);
    if (size < stated)
        return BAD(r, "truncated at byte %llu: the header says the file has %llu bytes",
                   (unsigned long long)size, (unsigned long long)stated);
    if (size > stated)
        return BAD(r, "%llu bytes past the end of the model (the header says %llu bytes)",
                   (unsigned long long)(size - stated), (unsigned long long)stated);
    if (size < MF_MODEL_HEADER_BYTES + MF_MODEL_TRAILER_BYTES)
        return BAD(r, "the header says the file has %llu bytes, too few for a model",
                   (unsigned long long)stated);
    *sections = mf_get_u32(h + MF_MH_SECTIONS);
    *writer = mf_get_u32(h + MF_MH_WRITER);
    r->users = (int32_t)mf_get_u32(h + MF_MH_USERS);
    r->items = (int32_t)mf_get_u32(h + MF_MH_ITEMS);
    r->k = (int32_t)mf_get_u32(h + MF_MH_K);
    r->flags = mf_get_u32(h + MF_MH_FLAGS);
    *mean = mf_get_f32(h + MF_MH_MEAN);
    if (r->users < 1 || r->items < 1 || r->k < 1)
        return BAD(r, "the header's users = %d, items = %d and k = %d must be at least 1", r->users,
                   r->items, r->k);
    if (r->flags & ~(uint32_t)MF_MODEL_FLAGS_KNOWN)
        return BAD(r, "the header's flags 0x%x hold bits no model has", r->flags);
    if (!isfinite(*mean))
        return BAD(r, "the header's mean is not finite");
    if (!all_zero(h + MF_MH_MEAN + 4, MF_MH_CRC - MF_MH_MEAN - 4))
        return BAD(r, "the header's padding is not zero");
    /* What the model needs, against what the file holds, before any allocation. */
    const uint64_t room = (size - MF_MODEL_HEADER_BYTES - MF_MODEL_TRAILER_BYTES) / 4;
    const uint64_t users = (uint64_t)r->users, items = (uint64_t)r->items, k = (uint64_t)r->k;
    if (users * k > room || items * k > room - users * k ||
        ((r->flags & MF_MODEL_USER_BIAS) ? users : 0) > room - users * k - items * k ||
        ((r->flags & MF_MODEL_ITEM_BIAS) ? items : 0) >
            room - users * k - items * k - ((r->flags & MF_MODEL_USER_BIAS) ? users : 0))
        return BAD(r,
                   "the header's %d users and %d items of rank %d need %.4g GB of factors, "
                   "more than the file's %llu bytes",
                   r->users, r->items, r->k, (double)(users + items) * (double)k * 4e-9,
                   (unsigned long long)size);
    const uint64_t least = MF_MODEL_SECTION_BYTES + MF_MODEL_FOOTER_BYTES;
    if (*sections > (size - MF_MODEL_HEADER_BYTES - MF_MODEL_TRAILER_BYTES) / least)
        return BAD(r, "the header's %u sections cannot fit in %llu bytes", *sections,
                   (unsigned long long)size);
    return MF_OK;
}

/* ---- the sections ---------------------------------------------------------------------- */

typedef struct section {
    unsigned index; /* 1-based, for messages */
    uint32_t kind, flags;
    uint64_t length;
    uint32_t crc; /* of the payload as read */
} section;

/* The floats a known float section must hold, or 0 for the other kinds. */
static uint64_t floats_of(const reader *r, uint32_t kind)
{
    switch (kind) {
    case MF_SECTION_U: return (uint64_t)r->users * (uint64_t)r->k;
    case MF_SECTION_V: return (uint64_t)r->items * (uint64_t)r->k;
    case MF_SECTION_USER_BIAS: return (uint64_t)r->users;
    case MF_SECTION_ITEM_BIAS: return (uint64_t)r->items;
    default: return 0;
    }
}

static mf_status read_section_head(reader *r, section *s)
{
    unsigned char h[MF_MODEL_SECTION_BYTES];
    const uint64_t end = r->bytes - MF_MODEL_TRAILER_BYTES;
    if (end - r->pos < MF_MODEL_SECTION_BYTES + MF_MODEL_FOOTER_BYTES)
        return BAD(r, "section %u at byte %llu runs into the trailer", s->index,
                   (unsigned long long)r->pos);
    const uint64_t at = r->pos;
    MF_TRY(take(r, h, sizeof h));
    if (mf_crc32(0, h, 20) != mf_get_u32(h + 20))
        return BAD(r, "section %u (at byte %llu): header checksum mismatch", s->index,
                   (unsigned long long)at);
    s->kind = mf_get_u32(h);
    s->flags = mf_get_u32(h + 4);
    s->length = mf_get_u64(h + 8);
    if (!all_zero(h + 16, 4))
        return BAD(r, "section %u (%s): its header's padding is not zero", s->index,
                   mf_section_name(s->kind));
    const uint64_t room = end - r->pos - MF_MODEL_FOOTER_BYTES;
    if (s->length > room || mf_model_align8(s->length) > room)
        return BAD(r, "section %u (%s): its %llu bytes run past the end of the file", s->index,
                   mf_section_name(s->kind), (unsigned long long)s->length);
    return MF_OK;
}

/* The padding after the payload and the footer: zeros, and the payload's CRC. */
static mf_status finish_section(reader *r, const section *s)
{
    unsigned char tail[8 + MF_MODEL_FOOTER_BYTES];
    const size_t pad = (size_t)(mf_model_align8(s->length) - s->length);
    MF_TRY(take(r, tail, pad + MF_MODEL_FOOTER_BYTES));
    if (mf_get_u32(tail + pad) != s->crc)
        return BAD(r, "section %u (%s) checksum mismatch", s->index, mf_section_name(s->kind));
    if (!all_zero(tail, pad) || !all_zero(tail + pad + 4, 4))
        return BAD(r, "section %u (%s): its padding is not zero", s->index,
                   mf_section_name(s->kind));
    return MF_OK;
}

/* A float section of the header's size into a new array *out. */
static mf_status read_floats(reader *r, section *s, float **out)
{
    const uint64_t n = floats_of(r, s->kind);
    if (*out)
        return BAD(r, "section %u is a second %s section", s->index, mf_section_name(s->kind));
    if ((s->kind == MF_SECTION_USER_BIAS && !(r->flags & MF_MODEL_USER_BIAS)) ||
        (s->kind == MF_SECTION_ITEM_BIAS && !(r->flags & MF_MODEL_ITEM_BIAS)))
        return BAD(r, "section %u holds %s, but the header says the model has none", s->index,
                   mf_section_name(s->kind));
    if (s->length != 4 * n)
        return BAD(r, "section %u (%s) holds %llu bytes; the header's shape needs %llu", s->index,
                   mf_section_name(s->kind), (unsigned long long)s->length,
                   (unsigned long long)(4 * n));
    unsigned char *bytes = malloc((size_t)s->length);
    if (!bytes)
        return mf_fail(r->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for %llu bytes of %s",
                       r->in.path, (unsigned long long)s->length, mf_section_name(s->kind));
    *out = (float *)(void *)bytes; /* owned by the handle from here on */
    MF_TRY(take_crc(r, bytes, s->length, &s->crc));
    for (uint64_t i = 0; i < n; i++) /* little-endian to the host's order, in place */
        (*out)[i] = mf_get_f32(bytes + 4 * i);
    return MF_OK;
}

/* A text section into a new NUL-terminated string *out: no NUL in it; an algorithm's name
 * short and of the characters mf_model_save allows. */
static mf_status read_text(reader *r, section *s, char **out)
{
    if (*out)
        return BAD(r, "section %u is a second %s section", s->index, mf_section_name(s->kind));
    const int name = s->kind == MF_SECTION_ALGORITHM;
    if (name && (s->length < 1 || s->length > MF_MODEL_ALGORITHM_MOST))
        return BAD(r, "section %u (algorithm) holds %llu bytes, not 1 to %u", s->index,
                   (unsigned long long)s->length, MF_MODEL_ALGORITHM_MOST);
    if (!name && s->length > MF_MODEL_OPTIONS_MOST)
        return BAD(r, "section %u (options) holds %llu bytes, more than %u", s->index,
                   (unsigned long long)s->length, MF_MODEL_OPTIONS_MOST);
    char *text = malloc((size_t)s->length + 1);
    if (!text)
        return mf_fail(r->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for %llu bytes of %s",
                       r->in.path, (unsigned long long)s->length, mf_section_name(s->kind));
    *out = text; /* owned by the handle from here on */
    MF_TRY(take_crc(r, text, s->length, &s->crc));
    text[s->length] = '\0';
    static const char allowed[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
    for (uint64_t i = 0; i < s->length; i++)
        if (text[i] == '\0' || (name && !strchr(allowed, text[i])))
            return BAD(r, "section %u (%s): byte %llu is not allowed there (0x%02x)", s->index,
                       mf_section_name(s->kind), (unsigned long long)i, (unsigned char)text[i]);
    return MF_OK;
}

/* An id map section: the header's count of ids (users or items), each 1 to MF_ID_MOST
 * bytes of no control byte and followed by a NUL, none repeated. */
static mf_status read_ids(reader *r, section *s, mf_id_map **out)
{
    const int32_t n = s->kind == MF_SECTION_USER_IDS ? r->users : r->items;
    const char *name = mf_section_name(s->kind);
    if (*out)
        return BAD(r, "section %u is a second %s section", s->index, name);
    if (s->length < 2 * (uint64_t)n)
        return BAD(r, "section %u (%s) holds %llu bytes, too few for %d ids", s->index, name,
                   (unsigned long long)s->length, n);
    char *text = malloc((size_t)s->length);
    *out = mf_id_map_new();
    mf_status st = text && *out ? take_crc(r, text, s->length, &s->crc)
                                : mf_fail(r->ctx, MF_ERR_OUT_OF_MEMORY,
                                          "%s: out of host memory for %llu bytes of %s", r->in.path,
                                          (unsigned long long)s->length, name);
    uint64_t at = 0;
    for (int32_t i = 0; st == MF_OK && i < n; i++) {
        const char *id = text + at;
        const char *end = memchr(id, '\0', (size_t)(s->length - at));
        if (!end) {
            st = BAD(r, "section %u (%s) ends inside id %d of %d", s->index, name, i + 1, n);
            break;
        }
        const size_t len = (size_t)(end - id);
        const char *why = mf_id_check(id, len);
        bool added = false;
        if (why)
            st = BAD(r, "section %u (%s): id %d %s", s->index, name, i + 1, why);
        else if (mf_id_map_intern(*out, id, len, NULL, &added) != MF_OK)
            st = mf_fail(r->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory for %s", r->in.path,
                         name);
        else if (!added)
            st = BAD(r, "section %u (%s): id %d repeats an earlier one", s->index, name, i + 1);
        at += len + 1;
    }
    if (st == MF_OK && at != s->length)
        st = BAD(r, "section %u (%s): %llu bytes after its %d ids", s->index, name,
                 (unsigned long long)(s->length - at), n);
    free(text);
    return st;
}

/* One section: a known kind into the handle, an unknown one skipped (refused when the
 * file says it is required). */
static mf_status read_section(reader *r, section *s, mf_saved_model *m)
{
    MF_TRY(read_section_head(r, s));
    switch (s->kind) {
    case MF_SECTION_ALGORITHM: MF_TRY(read_text(r, s, &m->algorithm)); break;
    case MF_SECTION_OPTIONS: MF_TRY(read_text(r, s, &m->options)); break;
    case MF_SECTION_U: MF_TRY(read_floats(r, s, &m->U)); break;
    case MF_SECTION_V: MF_TRY(read_floats(r, s, &m->V)); break;
    case MF_SECTION_USER_BIAS: MF_TRY(read_floats(r, s, &m->user_bias)); break;
    case MF_SECTION_ITEM_BIAS: MF_TRY(read_floats(r, s, &m->item_bias)); break;
    case MF_SECTION_USER_IDS: MF_TRY(read_ids(r, s, &m->user_ids)); break;
    case MF_SECTION_ITEM_IDS: MF_TRY(read_ids(r, s, &m->item_ids)); break;
    default:
        if (s->flags & MF_SECTION_REQUIRED)
            return fail_at(r, MF_ERR_UNSUPPORTED,
                           "section %u has kind %u, which this mfact (%s) does not know and the "
                           "file requires; load it with a newer mfact",
                           s->index, s->kind, mf_version_string());
        MF_TRY(take_crc(r, NULL, s->length, &s->crc));
    }
    return finish_section(r, s);
}

/* The trailer: its magic, and the checksum of every byte before it. */
static mf_status read_trailer(reader *r, uint32_t sections)
{
    const uint64_t end = r->bytes - MF_MODEL_TRAILER_BYTES;
    if (r->pos != end)
        return BAD(r, "the %u sections end at byte %llu, but the trailer starts at byte %llu",
                   sections, (unsigned long long)r->pos, (unsigned long long)end);
    unsigned char t[MF_MODEL_TRAILER_BYTES];
    MF_TRY(take(r, t, MF_MODEL_MAGIC_BYTES));
    const uint32_t crc = r->crc;
    MF_TRY(take(r, t + MF_MODEL_MAGIC_BYTES, MF_MODEL_TRAILER_BYTES - MF_MODEL_MAGIC_BYTES));
    if (memcmp(t, MF_MODEL_END_MAGIC, MF_MODEL_MAGIC_BYTES) != 0)
        return BAD(r, "no trailer at byte %llu (\"%s\")", (unsigned long long)end,
                   MF_MODEL_END_MAGIC);
    if (mf_get_u32(t + 8) != crc)
        return BAD(r, "whole-file checksum mismatch");
    if (!all_zero(t + 12, 4))
        return BAD(r, "the trailer's padding is not zero");
    return MF_OK;
}

/* The arrays the header promises, all there. */
static mf_status check_complete(reader *r, const mf_saved_model *m)
{
    if (!m->U || !m->V)
        return BAD(r, "no %s section", m->U ? "V" : "U");
    if ((r->flags & MF_MODEL_USER_BIAS) && !m->user_bias)
        return BAD(r, "the header says the model has user biases, but no section holds them");
    if ((r->flags & MF_MODEL_ITEM_BIAS) && !m->item_bias)
        return BAD(r, "the header says the model has item biases, but no section holds them");
    return MF_OK;
}

static mf_status read_model(reader *r, mf_saved_model *m)
{
    uint32_t sections;
    unsigned writer;
    MF_TRY(read_header(r, &sections, &m->mean, &writer));
    m->users = r->users, m->items = r->items, m->k = r->k;
    snprintf(m->version, sizeof m->version, "%u.%u.%u", writer / 10000, writer / 100 % 100,
             writer % 100);
    for (uint32_t i = 0; i < sections; i++) {
        section s = {i + 1, 0, 0, 0, 0};
        MF_TRY(read_section(r, &s, m));
    }
    MF_TRY(read_trailer(r, sections));
    return check_complete(r, m);
}

mf_status mf_model_load(mf_ctx *ctx, const char *path, mf_saved_model **out)
{
    static const char fn[] = "mf_model_load";
    MF_REQUIRE(NULL, ctx, "%s: ctx is NULL", fn);
    MF_REQUIRE(ctx, path && out, "%s: path and out must not be NULL", fn);
    reader r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    MF_TRY(mf_input_open(ctx, path, &r.in));
    if (r.in.size < 0) {
        mf_input_close(&r.in);
        return mf_fail(ctx, MF_ERR_IO, "%s: not a regular file (a model is read from a file)",
                       path);
    }
    r.bytes = (uint64_t)r.in.size;
    mf_saved_model *m = mf_saved_model_new();
    mf_status st =
        m ? read_model(&r, m) : mf_fail(ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", path);
    mf_input_close(&r.in);
    if (st != MF_OK) {
        mf_saved_model_destroy(m);
        return st;
    }
    *out = m;
    return MF_OK;
}
