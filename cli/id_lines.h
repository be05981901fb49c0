/* Ids in text files, one record a line: read (the (user, item) pairs of mfact predict and the
 * users of mfact recommend --users) and written (the rows of a factor, each line starting
 * with its row's id when the input file had ids). */
#ifndef MFACT_CLI_ID_LINES_H
#define MFACT_CLI_ID_LINES_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"

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

/* The same for a model with ids (cli_names.users/items, the model file's maps): each line's
 * user and item ids (fields 1 and 2, or --user-col/--item-col of `common`: a position, or a
 * header name, which makes the first line the header; without names a first line whose
 * third field is not a number is a header), separated by the first line's separator (a
 * tab, else a comma, else ';', else '::', else spaces), "quoted" where they hold it. An id
 * the map holds is its index; one it lacks is count + k for the k-th such id of its side,
 * its text kept in names->unseen for the users (the caller frees it with cli_names_free).
 * Prints the problem with the line; returns CLI_OK or CLI_FAILED. */
int cli_read_named_ids(const char *cmd, const char *path, int fields, const cli_common *common,
                       cli_names *names, int32_t **ids, int64_t *n);
void cli_names_free(cli_names *names);

/* Writes line i's text after its id and a space (nothing before it when ids is NULL). */
typedef void (*cli_line_fn)(FILE *f, int32_t i, const void *user);
/* `lines` lines to path, line i starting with mf_id_map_id(ids, i) and a space when ids is
 * given (the matrix's row or column map: the file's ids), then body's text and a newline;
 * without ids the lines are body's alone, as before ids existed. Prints the failure (with
 * the system's reason) and returns -1; 0 when written. */
int cli_write_id_lines(const char *cmd, const char *path, int32_t lines, const mf_id_map *ids,
                       cli_line_fn body, const void *user);

#endif
