/* The ptrain subcommands. Each returns the process exit status:
 * 0 success, 1 a runtime failure (its message already printed), 2 a usage error. */
#ifndef PT_CLI_COMMANDS_H
#define PT_CLI_COMMANDS_H

int pt_cmd_train(int argc, char **argv);
int pt_cmd_eval(int argc, char **argv);
int pt_cmd_predict(int argc, char **argv);
int pt_cmd_models(int argc, char **argv);
int pt_cmd_info(int argc, char **argv);
int pt_cmd_data(int argc, char **argv);
int pt_cmd_bench(int argc, char **argv);
int pt_cmd_jobscript(int argc, char **argv);
int pt_cmd_scale(int argc, char **argv);
int pt_cmd_plot(int argc, char **argv);
/* Prints "ptrain CMD: error: message" and returns 1. */
int pt_cli_fail(const char *cmd);
/* The same for a usage error: a flag's value, or flags that do not fit
 * together, as the library's PT_ERR_ARG reports them; returns 2. */
int pt_cli_usage_fail(const char *cmd);
/* A usage error in the command's own words: "ptrain CMD: <fmt...> (see
 * 'ptrain CMD --help')"; returns 2. */
int pt_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "unknown model NAME", listing the presets, as a usage error (2). */
int pt_cli_unknown_model(const char *cmd, const char *name);
/* eval's and predict's --model (a preset or an existing spec file) and
 * --model-file (an existing file), checked before anything is read: 0, or
 * the exit status with the message printed. */
int pt_cli_check_model(const char *cmd, const char *model, const char *model_file);

#endif
