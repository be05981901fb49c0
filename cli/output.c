#include <math.h>
#include <stdio.h>

#include "cli.h"

void cli_out_begin(cli_out *o, bool json)
{
    o->json = json;
    o->items = 0;
}

/* A JSON key from a label: spaces and dashes become underscores. */
static void key(cli_out *o, const char *label)
{
    fputs(o->items++ ? ", \"" : "{\"", stdout);
    for (const char *p = label; *p; p++)
        putchar(*p == ' ' || *p == '-' ? '_' : *p);
    fputs("\": ", stdout);
}

void cli_out_str(cli_out *o, const char *label, const char *value)
{
    if (!o->json) {
        printf("%s %s\n", label, value);
        return;
    }
    key(o, label);
    putchar('"');
    for (const char *p = value; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            printf("\\u%04x", (unsigned char)*p);
        else
            putchar(*p);
    }
    putchar('"');
}

void cli_out_int(cli_out *o, const char *label, long long value)
{
    if (!o->json)
        printf("%s %lld\n", label, value);
    else {
        key(o, label);
        printf("%lld", value);
    }
}

void cli_out_num(cli_out *o, const char *label, double value)
{
    if (!o->json)
        printf("%s %.6g\n", label, value);
    else {
        key(o, label);
        if (isfinite(value))
            printf("%.9g", value);
        else
            fputs("null", stdout); /* JSON has no NaN or infinity */
    }
}

void cli_out_floats(cli_out *o, const char *label, const float *v, int64_t n)
{
    if (!o->json) {
        for (int64_t i = 0; i < n; i++)
            printf("%s %.9g\n", label, (double)v[i]);
        return;
    }
    key(o, label);
    putchar('[');
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(v[i]))
            printf(i ? ", %.9g" : "%.9g", (double)v[i]);
        else
            fputs(i ? ", null" : "null", stdout);
    }
    putchar(']');
}

void cli_out_end(cli_out *o)
{
    if (o->json)
        puts(o->items ? "}" : "{}");
    fflush(stdout);
}
