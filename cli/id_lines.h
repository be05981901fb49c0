/* Ids from a text file, one record a line: the (user, item) pairs of mfact predict and the
 * users of mfact recommend --users. */
#ifndef MFACT_CLI_ID_LINES_H
#define MFACT_CLI_ID_LINES_H

#include <stdint.h>

/* The first `fields` integers of each line of `path` (the rest of a line is ignored, so a
 * ratings file's "user item rating" lines serve as pairs), separated by spaces, tabs,
 * commas or "::". Blank lines, lines starting with '#' or '%', and a first line that does
 * not start with a number (a header) are skipped; a MatrixMarket file (its banner) is
 * 1-based and its size line is skipped. `base` is the ids' index base: 0 or 1, or -1 for
 * the readers' convention (MatrixMarket 1; else 0 when any id is 0, else 1). The ids minus
 * the base go to *ids (`fields` a line, *n lines; the caller frees it). Prints the problem
 * (with the file's line) and returns CLI_FAILED; CLI_OK when read. */
int cli_read_ids(const char *cmd, const char *path, int fields, int base, int32_t **ids,
                 int64_t *n);

#endif
