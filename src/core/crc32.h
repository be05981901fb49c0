/* CRC-32 (the IEEE 802.3 / zlib / PNG polynomial, reflected, 0xEDB88320) of byte runs, for
 * the checksums of model files. No dependency: zlib's crc32() computes the same numbers. */
#ifndef MF_CORE_CRC32_H
#define MF_CORE_CRC32_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CRC of the bytes so far (0 before the first) extended by data[0..n): a run's CRC is
 * mf_crc32(0, run, n), and mf_crc32(mf_crc32(0, a, n), b, m) that of a followed by b. */
uint32_t mf_crc32(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
