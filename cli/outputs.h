/* The checks a command's output files get before it reads or trains anything: a fit must
 * not run for minutes and then fail to write, or overwrite its own input. */
#ifndef MFACT_CLI_OUTPUTS_H
#define MFACT_CLI_OUTPUTS_H

/* inputs[0..ni) and outputs[0..no) are paths, NULL where unset. Every output must be a file
 * of its own (not another output, not an input: the same path or the same file through
 * another name) and writable (an existing file writable, a new one's directory present and
 * writable). Prints the problem and returns CLI_USAGE (a clash) or CLI_FAILED (cannot be
 * written, with the system's reason); CLI_OK when all is well. */
int cli_check_outputs(const char *cmd, const char *const *inputs, int ni,
                      const char *const *outputs, int no);

#endif
