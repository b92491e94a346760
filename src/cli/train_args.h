/* ptrain train's flags: the table, and the checks of flags against each
 * other, apart from anything that reads a file or starts a run. ptrain
 * train parses with it, and ptrain jobscript checks a script's training
 * arguments with it, so that a script train would refuse is never written. */
#ifndef PT_CLI_TRAIN_ARGS_H
#define PT_CLI_TRAIN_ARGS_H

#include "ptrain.h"

typedef struct {
  pt_config c; /* what the flags set, the library's defaults otherwise */
  const char *model, *model_file, *dataset, *data_dir;
  /* values the table parses before they go into c */
  int no_prefetch, no_shuffle, no_dropout, cuda_graphs, no_cuda_graphs;
  float target_acc, bucket_mb, timeout_s, ckpt_interval;
} pt_train_args;

/* Parses argv[from..argc) as ptrain train does. Returns 0, with *help set
 * where --help was given (nothing else is checked then), or
 * PT_USAGE_ERROR after printing train's own message ("ptrain train: ...")
 * to stderr. */
int pt_train_args_parse(int argc, char **argv, int from, pt_train_args *a, int *help);
void pt_train_args_print_help(void);

/* Whether training arguments name this flag, as "--flag" or "--flag=V". */
int pt_train_args_has(char **v, int n, const char *flag);
/* Another command's training arguments (those after its "--"), with pre
 * before them (what the command adds), checked by train's parser, which
 * reads no files: so that what train would refuse is refused before a job
 * waits in a queue or a sweep runs. 0, or PT_USAGE_ERROR after train's
 * message and one from cmd ("ptrain cmd: ...") saying whose it is. */
int pt_train_args_check(const char *cmd, const char *const *pre, int npre, char **train, int ntrain,
                        pt_train_args *ta);

#endif
