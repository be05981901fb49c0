#define _XOPEN_SOURCE 700
#include "outputs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* path's directory into dir (cap bytes): "." when it names none. */
static void directory_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == path)
        snprintf(dir, cap, "/");
    else
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

/* A name for path that two spellings of one file share: the resolved path of an existing
 * file, else its resolved directory and its own name. Empty when neither resolves. */
static void canonical(const char *path, char *out, size_t cap)
{
    char resolved[PATH_MAX];
    out[0] = '\0';
    if (realpath(path, resolved)) {
        snprintf(out, cap, "%s", resolved);
        return;
    }
    char dir[PATH_MAX];
    directory_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    if (realpath(dir, resolved))
        snprintf(out, cap, "%s/%s", resolved, slash ? slash + 1 : path);
}

/* Whether a and b are one file: the same device and inode when both exist, else the same
 * canonical name. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ca[PATH_MAX + 256], cb[PATH_MAX + 256];
    canonical(a, ca, sizeof ca);
    canonical(b, cb, sizeof cb);
    return strcmp(a, b) == 0 || (ca[0] && strcmp(ca, cb) == 0);
}

int cli_check_outputs(const char *cmd, const char *const *inputs, int ni,
                      const char *const *outputs, int no)
{
    for (int o = 0; o < no; o++) {
        const char *out = outputs[o];
        if (!out)
            continue;
        for (int i = 0; i < ni; i++)
            if (inputs[i] && same_file(out, inputs[i])) {
                cli_error(cmd, "the output %s is the input %s: it would be overwritten", out,
                          inputs[i]);
                return CLI_USAGE;
            }
        for (int p = 0; p < o; p++)
            if (outputs[p] && same_file(out, outputs[p])) {
                cli_error(cmd, "two outputs go to one file, %s", out);
                return CLI_USAGE;
            }
        struct stat st;
        if (stat(out, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                cli_error(cmd, "the output %s is a directory", out);
                return CLI_FAILED;
            }
            if (access(out, W_OK) != 0) {
                cli_error(cmd, "cannot write %s: %s", out, strerror(errno));
                return CLI_FAILED;
            }
            continue;
        }
        char dir[PATH_MAX];
        directory_of(out, dir, sizeof dir);
        if (access(dir, W_OK | X_OK) != 0) {
            cli_error(cmd, "cannot create %s: %s", out, strerror(errno));
            return CLI_FAILED;
        }
    }
    return CLI_OK;
}
