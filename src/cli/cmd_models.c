/* ptrain models: the presets with their size and cost, or one preset's spec. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nn/model.h"
#include "nn/presets.h"

int pt_cmd_models(int argc, char **argv) {
  int help;
  const char *pos[1];
  int npos;
  int rc = pt_args_parse("models", NULL, 0, argc, argv, 2, &help, pos, 1, &npos);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain models [NAME]",
                       "List the model presets with parameter count and forward FLOPs per sample\n"
                       "(2 per multiply-add), or print the spec of one (a starting point for --model-file).",
                       NULL, 0);
    return 0;
  }
  if (npos) {
    const pt_preset *p = pt_preset_find(pos[0]);
    if (!p) {
      pt_model_spec s;
      pt_preset_spec(pos[0], &s);
      return pt_cli_fail("models");
    }
    printf("# %s: %s\n%s", p->name, p->summary, p->text);
    return 0;
  }
  printf("%-14s %12s %14s  %-14s %s\n", "model", "parameters", "MFLOP/sample", "dataset", "from");
  for (int i = 0; i < pt_preset_count(); i++) {
    const pt_preset *p = pt_preset_at(i);
    pt_model_spec s;
    pt_model_summary sum;
    if (pt_spec_parse(p->text, p->name, &s) != PT_OK || pt_model_summarize(&s, &sum) != PT_OK)
      return pt_cli_fail("models");
    printf("%-14s %12zu %14.2f  %-14s %s\n", p->name, sum.nparams, sum.flops / 1e6, s.defaults.dataset, p->summary);
  }
  return 0;
}
