/* ptrain models: the presets with their size and cost, one preset's spec,
 * or a model's layers (--show), by the index and name --split takes. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nn/model.h"
#include "nn/presets.h"

/* The layers of a preset, or of a spec file (what --model-file takes). */
static int show_layers(const char *what) {
  const pt_preset *p = pt_preset_find(what);
  pt_model_spec spec;
  if (p) {
    if (pt_spec_parse(p->text, p->name, &spec) != PT_OK) return pt_cli_fail("models");
  } else if (access(what, F_OK) == 0) {
    if (pt_spec_parse_file(what, &spec) != PT_OK) return pt_cli_fail("models");
  } else {
    return pt_cli_unknown_model("models", what);
  }
  pt_model *m;
  if (pt_model_shapes(&m, &spec) != PT_OK) return pt_cli_fail("models");
  printf("%s: input %dx%dx%d, %d layer%s, %zu parameters, %.2f MFLOP/sample\n", spec.name, spec.in_c, spec.in_h,
         spec.in_w, m->nlayers, m->nlayers == 1 ? "" : "s", m->nparam_total, pt_model_flops(m) / 1e6);
  printf("%5s  %-28s %-12s %12s %12s\n", "index", "layer", "output", "parameters", "MFLOP/sample");
  for (int i = 0; i < m->nlayers; i++) {
    const pt_layer *L = &m->layers[i];
    size_t params = 0;
    if (L->w >= 0) params += m->params[L->w].numel;
    if (L->b >= 0) params += m->params[L->b].numel;
    char shape[48];
    /* a 1x1 map stays CxHxW: shown as "C" it would read as flat, and a
     * linear layer after it would fail for want of a flatten */
    if (pt_model_output_flat(m, i)) snprintf(shape, sizeof shape, "%d", L->out_c);
    else snprintf(shape, sizeof shape, "%dx%dx%d", L->out_c, L->out_h, L->out_w);
    printf("%5d  %-28s %-12s %12zu %12.2f\n", i, L->label, shape, params, pt_layer_flops(L) / 1e6);
  }
  free(m); /* shapes only: nothing else was allocated */
  return 0;
}

int pt_cmd_models(int argc, char **argv) {
  const char *show = NULL;
  const pt_arg flags[] = {
      {"--show", ARG_STR, &show, 0, 0, NULL, "MODEL",
       "list the layers of a preset or spec file: index and name (as --split takes them), output shape, "
       "parameters and FLOPs"},
  };
  const int n = (int)(sizeof flags / sizeof flags[0]);
  int help;
  const char *pos[1];
  int npos;
  int rc = pt_args_parse("models", flags, n, argc, argv, 2, &help, pos, 1, &npos);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain models [NAME | --show MODEL]",
                       "List the model presets with parameter count and forward FLOPs per sample\n"
                       "(2 per multiply-add), print the spec of one (a starting point for --model-file),\n"
                       "or list a model's layers.",
                       flags, n);
    return 0;
  }
  if (show && npos) {
    fprintf(stderr, "ptrain models: NAME and --show: give one, not both (see 'ptrain models --help')\n");
    return PT_USAGE_ERROR;
  }
  if (show) return show_layers(show);
  if (npos) {
    const pt_preset *p = pt_preset_find(pos[0]);
    if (!p && !access(pos[0], F_OK)) {
      fprintf(stderr, "ptrain models: %s is a spec file, not a preset: 'ptrain models --show %s' lists its layers\n",
              pos[0], pos[0]);
      return PT_USAGE_ERROR;
    }
    if (!p) return pt_cli_unknown_model("models", pos[0]);
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
