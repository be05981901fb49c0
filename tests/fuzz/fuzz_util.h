/* What the fuzz targets share: a CPU context of one thread, the memfd an input is written to
 * (read back through /proc/self/fd/N, so nothing touches a disk), the report of a finding
 * (the broken rule, then the target's own description of the case, then abort()), and the
 * rule every failure's message keeps; and the sanitizers' options (one allocation over 1 GiB
 * is a finding, UBSan stops at the first report with its stack). */
#ifndef MFACT_FUZZ_UTIL_H
#define MFACT_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mfact/mfact.h>

#define FUZZ_MESSAGE_LIMIT 400 /* message bytes besides the path */

/* Set up by fuzz_init. */
extern mf_ctx *fuzz_ctx;
extern char fuzz_fd_path[64]; /* /proc/self/fd/N of the memfd */
extern bool fuzz_verbose;     /* MFACT_FUZZ_VERBOSE=1: print every input's outcome */

/* The context and the memfd; `name` prefixes the harness's own failures. `print_case`
 * describes the current case in a finding's report. */
void fuzz_init(const char *name, void (*print_case)(void));
/* The memfd's content becomes data[0..size). */
void fuzz_write(const uint8_t *data, size_t size);
/* s on stderr with every byte outside printable ASCII (and '\\') as \xNN. */
void fuzz_print_escaped(const char *s);
/* Report a broken rule and abort. */
void fuzz_finding(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The context's message after a failure on `path`: not `sentinel` (the message of a call
 * that failed on purpose just before) nor "no error", shorter than FUZZ_MESSAGE_LIMIT bytes
 * besides the path, printable ASCII. */
void fuzz_check_message(const char *path, const char *sentinel);

#endif
