/* mfact demo's helpers: progress lines, checked allocations, and a buffered stream of the
 * library's seeded uniforms. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "demo.h"

/* The subcommand that failures name: demo's helpers also serve `mfact complete`. */
static const char *command = "demo";

void demo_set_command(const char *cmd)
{
    command = cmd;
}

const char *demo_command(void)
{
    return command;
}

void demo_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout); /* the results so far first, where both go to one file */
    fputs("== ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
}

/* "1.5 GB", "12.0 MB", "512 bytes". */
static void human_bytes(char *buf, size_t n, double bytes)
{
    if (bytes >= 1e12)
        snprintf(buf, n, "%.3g TB", bytes / 1e12);
    else if (bytes >= 1e9)
        snprintf(buf, n, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6)
        snprintf(buf, n, "%.1f MB", bytes / 1e6);
    else
        snprintf(buf, n, "%.0f bytes", bytes);
}

void *demo_alloc(const char *what, int64_t count, size_t size)
{
    double bytes = (double)count * (double)size;
    void *p = NULL;
    if (count >= 0 && bytes < (double)SIZE_MAX / 2)
        p = malloc(count ? (size_t)count * size : 1);
    if (!p) {
        char b[32];
        human_bytes(b, sizeof b, bytes);
        cli_error(command, "out of host memory: %s for %s (%lld x %zu bytes)", b, what,
                  (long long)count, size);
    }
    return p;
}

bool demo_fits(const char *what, double bytes)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : INFINITY;
    if (bytes <= 0.9 * have)
        return true;
    char need[32], has[32];
    human_bytes(need, sizeof need, bytes);
    human_bytes(has, sizeof has, have);
    cli_error(command, "%s needs about %s of host memory; this machine has %s", what, need, has);
    return false;
}

enum { RNG_BLOCK = 1 << 18 }; /* above 65536: mf_random_uniform then uses every thread */

bool demo_rng_init(demo_rng *r, mf_ctx *ctx, uint64_t seed, uint64_t stream)
{
    r->ctx = ctx, r->seed = seed, r->stream = stream;
    r->len = r->pos = 0;
    r->failed = false;
    r->spare = NAN;
    r->buf = demo_alloc("random numbers", RNG_BLOCK, sizeof *r->buf);
    return r->buf != NULL;
}

void demo_rng_free(demo_rng *r)
{
    free(r->buf);
    r->buf = NULL;
}

double demo_rng_uniform(demo_rng *r)
{
    if (r->pos == r->len) {
        /* Element i of a stream is fixed by (seed, stream, i): each block takes the next
         * stream, so blocks never repeat. */
        if (r->failed || mf_random_uniform(r->ctx, r->buf, RNG_BLOCK, 0.0f, 1.0f, r->seed,
                                           r->stream++, MF_MEMORY_HOST) != MF_OK) {
            r->failed = true;
            return 0.5;
        }
        r->len = RNG_BLOCK, r->pos = 0;
    }
    return r->buf[r->pos++];
}

double demo_rng_normal(demo_rng *r)
{
    if (!isnan(r->spare)) {
        double z = r->spare;
        r->spare = NAN;
        return z;
    }
    /* Box-Muller; 1 - u lies in (0, 1], so the logarithm is finite. */
    double radius = sqrt(-2.0 * log(1.0 - demo_rng_uniform(r)));
    double angle = 6.283185307179586 * demo_rng_uniform(r);
    r->spare = radius * sin(angle);
    return radius * cos(angle);
}
