/* Packed binary triplets: 12-byte little-endian records (int32 row, int32 col, float32
 * value), no header. The fast format for 100M-rating sets: read in blocks, no parsing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "core/readers.h"

#define MF_RECORD_BYTES      12
#define MF_RECORDS_PER_BLOCK 65536

static uint32_t load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

mf_status mf_read_binary_triplets(mf_read_job *job)
{
    mf_input *in = job->in;
    if (job->base < 0)
        job->base = 0;
    mf_status st = MF_OK;
    if (job->size >= 0 && job->size % MF_RECORD_BYTES != 0)
        st = mf_fail(job->ctx, MF_ERR_INVALID_DATA,
                     "%s: size %lld bytes is not a multiple of %d: record %lld is incomplete",
                     job->path, (long long)job->size, MF_RECORD_BYTES,
                     (long long)(job->size / MF_RECORD_BYTES + 1));
    else if (job->size > 0)
        st = mf_read_expect(job, 0, job->size / MF_RECORD_BYTES, MF_RECORD_BYTES, "file size");
    unsigned char *block = malloc(MF_RECORD_BYTES * MF_RECORDS_PER_BLOCK);
    if (st == MF_OK && !block)
        st = mf_fail(job->ctx, MF_ERR_OUT_OF_MEMORY, "%s: out of host memory", job->path);
    int64_t record = 0;
    while (st == MF_OK) {
        size_t got = mf_input_read(in, block, MF_RECORD_BYTES * MF_RECORDS_PER_BLOCK);
        if (got % MF_RECORD_BYTES != 0 && !mf_input_error(in))
            st = mf_fail(job->ctx, MF_ERR_INVALID_DATA, "%s: record %lld is incomplete", job->path,
                         (long long)(record + (int64_t)(got / MF_RECORD_BYTES) + 1));
        for (size_t k = 0; st == MF_OK && k + MF_RECORD_BYTES <= got; k += MF_RECORD_BYTES) {
            uint32_t bits = load_le32(block + k + 8);
            float v;
            memcpy(&v, &bits, sizeof v);
            record++;
            st = mf_read_add(job, record, (int32_t)load_le32(block + k),
                             (int32_t)load_le32(block + k + 4), v);
        }
        if (st != MF_OK)
            break;
        if (got < MF_RECORD_BYTES * MF_RECORDS_PER_BLOCK) {
            if (mf_input_error(in))
                st = mf_fail(job->ctx, MF_ERR_IO, "%s: read error after record %lld: %s", job->path,
                             (long long)record, strerror(errno));
            break;
        }
    }
    free(block);
    return st;
}
