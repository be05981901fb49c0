/* mfact info: what this build is and what it would run on. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "options.h"

int cmd_info(int argc, char **argv)
{
    cli_common c;
    cli_common_init(&c);
    const cli_spec s = {"info",
                        "info [options]",
                        "Prints the version, how the library was built, and the backend and "
                        "device a context gets.",
                        NULL,
                        0,
                        NULL,
                        0,
                        "no FILE"};
    const int parsed = cli_parse_command(&s, &c, argc, argv);
    if (parsed != 0)
        return parsed < 0 ? CLI_USAGE : CLI_OK;
    mf_ctx *ctx = cli_make_ctx("info", &c);
    if (!ctx)
        return CLI_FAILED;
    mf_device_info d = {.struct_size = sizeof d};
    mf_status st = mf_ctx_device_info(ctx, &d);
    if (st != MF_OK) {
        cli_error("info", "%s", mf_ctx_last_error(ctx));
        mf_ctx_destroy(ctx);
        return CLI_FAILED;
    }
    cli_out o;
    cli_out_begin(&o, c.json);
    cli_out_str(&o, "version", mf_version_string());
    cli_out_str(&o, "build", mf_build_info());
    cli_out_str(&o, "backend", mf_ctx_backend(ctx) == MF_BACKEND_CUDA ? "cuda" : "cpu");
    if (mf_ctx_backend(ctx) == MF_BACKEND_CPU && cli_cpu_reason()[0])
        cli_out_str(&o, "why not cuda", cli_cpu_reason());
    cli_out_int(&o, "cpu threads", d.cpu_threads);
    if (mf_ctx_backend(ctx) == MF_BACKEND_CUDA) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", d.compute_major, d.compute_minor);
        cli_out_str(&o, "device", d.name);
        cli_out_int(&o, "device ordinal", d.device);
        cli_out_str(&o, "compute capability", cc);
        cli_out_int(&o, "multiprocessors", d.multiprocessors);
        cli_out_num(&o, "memory GiB", (double)d.total_memory / (1 << 30));
        cli_out_num(&o, "free memory GiB", (double)d.free_memory / (1 << 30));
        cli_out_num(&o, "L2 MiB", (double)d.l2_cache_bytes / (1 << 20));
    }
    cli_out_end(&o);
    mf_ctx_destroy(ctx);
    return CLI_OK;
}
