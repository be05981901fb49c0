/* The model file's layout (docs/model-file.md), shared by its writer (model_save.c) and its
 * reader (model_load.c). Everything is little-endian; every section starts 8-byte aligned.
 *
 *   header (64 bytes)   magic "MFACTMDL", format version, header bytes, file bytes, section
 *                       count, writer version, users, items, k, flags, mean, zeros, CRC-32
 *                       of the 60 bytes before it
 *   sections            each: kind, flags, payload length, zeros, CRC-32 of those 20 bytes
 *                       (24 bytes); the payload and zeros to a multiple of 8; the payload's
 *                       CRC-32 and 4 zero bytes
 *   trailer (16 bytes)  magic "MFACTEND", CRC-32 of every byte before it and the magic, zeros
 *
 * Kept by every later format version, so that a reader can tell "newer" from "damaged":
 * the magic, the version and the header's size at bytes 0..16, and the header's CRC-32 in
 * its last 4 bytes. */
#ifndef MF_CORE_MODEL_FORMAT_H
#define MF_CORE_MODEL_FORMAT_H

#include <stdint.h>
#include <string.h>

#define MF_MODEL_MAGIC         "MFACTMDL"
#define MF_MODEL_END_MAGIC     "MFACTEND"
#define MF_MODEL_MAGIC_BYTES   8
#define MF_MODEL_VERSION       1u
#define MF_MODEL_HEADER_BYTES  64u
#define MF_MODEL_HEADER_MOST   4096u /* what any version's header may grow to */
#define MF_MODEL_SECTION_BYTES 24u
#define MF_MODEL_FOOTER_BYTES  8u /* after each payload: its CRC-32 and zeros */
#define MF_MODEL_TRAILER_BYTES 16u
/* The trailer's CRC covers the bytes before it and its magic: all but its last 8 bytes. */
#define MF_MODEL_CRC_TAIL 8u

/* Header fields: byte offsets. */
enum {
    MF_MH_VERSION = 8,
    MF_MH_HEADER_BYTES = 12,
    MF_MH_FILE_BYTES = 16,
    MF_MH_SECTIONS = 24,
    MF_MH_WRITER = 28,
    MF_MH_USERS = 32,
    MF_MH_ITEMS = 36,
    MF_MH_K = 40,
    MF_MH_FLAGS = 44,
    MF_MH_MEAN = 48,
    MF_MH_CRC = 60
};

/* Header flags. */
enum { MF_MODEL_USER_BIAS = 1u, MF_MODEL_ITEM_BIAS = 2u, MF_MODEL_FLAGS_KNOWN = 3u };

/* Section kinds. The id maps (string or integer user and item ids of the data, mapped to
 * the dense indices of the factors) are written required: a reader that skipped them would
 * read the file's ids as indices. */
enum {
    MF_SECTION_ALGORITHM = 1, /* text: "als", "sgd", "ials", ...            */
    MF_SECTION_OPTIONS = 2,   /* text: the caller's options                 */
    MF_SECTION_U = 3,         /* users x k floats, row-major                */
    MF_SECTION_V = 4,         /* items x k floats, row-major                */
    MF_SECTION_USER_BIAS = 5, /* users floats                               */
    MF_SECTION_ITEM_BIAS = 6, /* items floats                               */
    MF_SECTION_USER_IDS = 7,  /* users ids, each followed by a NUL          */
    MF_SECTION_ITEM_IDS = 8,  /* items ids, each followed by a NUL          */
    MF_SECTION_KINDS = 9
};

/* Section flags: a reader that does not know a section's kind skips it, unless it is
 * marked required (then the file needs a newer reader). Other bits are ignored. */
enum { MF_SECTION_REQUIRED = 1u };

/* The longest algorithm name and options text a file may hold. */
#define MF_MODEL_ALGORITHM_MOST 63u
#define MF_MODEL_OPTIONS_MOST   (1u << 20)

static inline uint64_t mf_model_align8(uint64_t n)
{
    return (n + 7u) & ~(uint64_t)7u;
}

static inline void mf_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void mf_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void mf_put_f32(unsigned char *p, float f)
{
    uint32_t v;
    memcpy(&v, &f, sizeof v);
    mf_put_u32(p, v);
}

static inline uint32_t mf_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t mf_get_u64(const unsigned char *p)
{
    return (uint64_t)mf_get_u32(p) | (uint64_t)mf_get_u32(p + 4) << 32;
}

static inline float mf_get_f32(const unsigned char *p)
{
    uint32_t v = mf_get_u32(p);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}

/* A section kind's name in messages ("V"), or "unknown". */
static inline const char *mf_section_name(uint32_t kind)
{
    static const char *const names[MF_SECTION_KINDS] = {"unknown",   "algorithm", "options",
                                                        "U",         "V",         "user bias",
                                                        "item bias", "user ids",  "item ids"};
    return kind < MF_SECTION_KINDS ? names[kind] : "unknown";
}

#endif
