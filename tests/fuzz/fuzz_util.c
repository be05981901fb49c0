/* The fuzz targets' shared harness (fuzz_util.h). */
#define _GNU_SOURCE
#include "fuzz_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

/* One allocation over 1 GiB is a finding at once, with its stack: libFuzzer's
 * -malloc_limit_mb looks only after the allocation, which for many gigabytes can outlast
 * -timeout. */
const char *__asan_default_options(void)
{
    return "max_allocation_size_mb=1024";
}

const char *__ubsan_default_options(void)
{
    return "print_stacktrace=1:halt_on_error=1";
}

mf_ctx *fuzz_ctx;
char fuzz_fd_path[64];
bool fuzz_verbose;

static const char *harness = "fuzz";
static void (*describe)(void);
static int memfd = -1;

void fuzz_init(const char *name, void (*print_case)(void))
{
    harness = name;
    describe = print_case;
    fuzz_verbose = getenv("MFACT_FUZZ_VERBOSE") && atoi(getenv("MFACT_FUZZ_VERBOSE")) > 0;
    mf_ctx_opts co;
    mf_ctx_opts_init(&co);
    co.backend = MF_BACKEND_CPU;
    co.cpu_threads = 1;
    if (mf_ctx_create(&fuzz_ctx, &co) != MF_OK) {
        fprintf(stderr, "%s: mf_ctx_create: %s\n", harness, mf_ctx_last_error(NULL));
        abort();
    }
    memfd = memfd_create(name, MFD_CLOEXEC);
    if (memfd < 0) {
        fprintf(stderr, "%s: ", harness);
        perror("memfd_create");
        abort();
    }
    snprintf(fuzz_fd_path, sizeof fuzz_fd_path, "/proc/self/fd/%d", memfd);
}

void fuzz_write(const uint8_t *data, size_t size)
{
    if (ftruncate(memfd, 0) != 0)
        goto fail;
    for (size_t done = 0; done < size;) {
        ssize_t n = pwrite(memfd, data + done, size - done, (off_t)done);
        if (n <= 0)
            goto fail;
        done += (size_t)n;
    }
    return;
fail:
    fprintf(stderr, "%s: ", harness);
    perror("writing the memfd");
    abort();
}

void fuzz_print_escaped(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p >= 0x20 && *p < 0x7f && *p != '\\')
            fputc(*p, stderr);
        else
            fprintf(stderr, "\\x%02x", *p);
}

void fuzz_finding(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mfact fuzz finding: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (describe)
        describe();
    abort();
}

void fuzz_check_message(const char *path, const char *sentinel)
{
    const char *msg = mf_ctx_last_error(fuzz_ctx);
    if (strcmp(msg, "no error") == 0 || strcmp(msg, sentinel) == 0)
        fuzz_finding("the failure left the context's message as it was");
    size_t len = strlen(msg);
    if (len >= FUZZ_MESSAGE_LIMIT + strlen(path))
        fuzz_finding("message of %zu bytes", len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] >= 0x7f)
            fuzz_finding("message byte %zu is 0x%02x, not printable ASCII", i,
                         (unsigned char)msg[i]);
}
