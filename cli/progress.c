#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

double cli_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void cli_progress_begin(cli_progress *p)
{
    p->start = p->last = cli_seconds();
    p->shown = false;
    p->enabled = isatty(STDERR_FILENO);
}

void cli_progress_update(cli_progress *p, const char *what, double fraction)
{
    if (!p->enabled)
        return;
    double now = cli_seconds();
    /* Quiet for the first second, then at most ten updates a second. */
    if (now - p->start < 1.0 || now - p->last < 0.1)
        return;
    p->last = now;
    p->shown = true;
    fprintf(stderr, "\r%-24s %5.1f%%  %6.1f s", what, 100.0 * fraction, now - p->start);
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (p->shown)
        fputs("\r\033[K", stderr);
}
