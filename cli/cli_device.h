/* Device buffers for subcommands that time GPU work on device-resident arrays. The public
 * API has no allocator (callers bring their own memory), so the tool uses the CUDA runtime
 * directly when it was built with it (cli_device.c); without it MF_MEMORY_DEVICE never
 * occurs because every context is a CPU context. */
#ifndef MFACT_CLI_DEVICE_H
#define MFACT_CLI_DEVICE_H

#include <stddef.h>

#include "mfact/mfact.h"

/* bytes of `where` memory, or NULL. */
void *cli_alloc(mf_memory where, size_t bytes);
void cli_free(mf_memory where, void *p);
/* Wait for the context's stream (a no-op on the CPU); 0 on success. */
int cli_sync(mf_ctx *ctx);
/* CUDA devices this process sees (0 without the runtime or a driver). */
int cli_device_count(void);

#endif
