/* ptrain eval: test loss and accuracy of a checkpoint. The model comes from
 * the checkpoint's own metadata when ptrain wrote it, or from --model /
 * --model-file for weights saved elsewhere (PyTorch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "data/loader.h"
#include "nn/presets.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/trainer.h"
#include "util/fpmode.h"

/* --device -> a backend bound on this thread. */
static pt_status eval_backend(const char *device, const pt_backend **be, int *gpu) {
  pt_backend_kind kind;
  PT_TRY(pt_device_parse(device, "--device", &kind, gpu));
  if (kind == PT_BACKEND_CPU) {
    *be = pt_backend_cpu();
    return PT_OK;
  }
  if (!(*be = pt_backend_cuda())) return pt_wrap(PT_ERR_DEVICE, "evaluating on cuda:%d", *gpu);
  return pt_backend_bind(*be, *gpu);
}

int pt_cmd_eval(int argc, char **argv) {
  const char *ckpt = NULL, *model = NULL, *model_file = NULL, *dataset = NULL, *data_dir = NULL, *device = "cpu";
  int batch = 1000, threads = 0, keep_denormals = 0;
  const pt_arg flags[] = {
      {"--checkpoint", ARG_STR, &ckpt, 0, 0, NULL, "FILE", "weights to evaluate (model.safetensors)"},
      {"--model", ARG_STR, &model, 0, 0, NULL, "NAME", "preset (default: the one recorded in the checkpoint)"},
      {"--model-file", ARG_STR, &model_file, 0, 0, NULL, "SPEC", "model spec file"},
      {"--dataset", ARG_CHOICE, &dataset, 0, 0, "fashion-mnist|mnist|cifar10", "NAME", "dataset (default: the model's)"},
      {"--data-dir", ARG_STR, &data_dir, 0, 0, NULL, "DIR", "where the dataset files are"},
      {"--test-batch-size", ARG_INT, &batch, 1, 1 << 16, NULL, "N", "evaluation batch size (default 1000)"},
      {"--threads", ARG_INT, &threads, 1, 1024, NULL, "N", "CPU threads (default: all cores)"},
      {"--device", ARG_STR, &device, 0, 0, NULL, "DEV", "cpu (default), cuda or cuda:N"},
      {"--keep-denormals", ARG_FLAG, &keep_denormals, 0, 0, NULL, NULL,
       "compute with denormal floats as IEEE 754 asks (default: flush them to zero, which is faster)"},
  };
  const int n = (int)(sizeof flags / sizeof flags[0]);
  int help;
  int rc = pt_args_parse("eval", flags, n, argc, argv, 2, &help, NULL, 0, NULL);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain eval --checkpoint FILE [options]", "Print the test loss and accuracy of saved weights.",
                       flags, n);
    return 0;
  }
  if (!ckpt) {
    fprintf(stderr, "ptrain eval: --checkpoint FILE is required (see 'ptrain eval --help')\n");
    return PT_USAGE_ERROR;
  }
  pt_model_spec spec;
  pt_status st;
  char *text = (model || model_file) ? NULL : pt_checkpoint_spec_text(ckpt);
  if (text) st = pt_spec_parse(text, ckpt, &spec);
  else if (model || model_file) st = pt_train_load_spec(model, model_file, &spec);
  else st = pt_fail(PT_ERR_ARG, "%s records no model; name it with --model or --model-file", ckpt);
  free(text);
  if (st != PT_OK) return pt_cli_fail("eval");
  pt_fp_set_flush(!keep_denormals); /* as training computed */
  if (threads > 0) pt_ops_set_threads(threads);
  pt_dataset_kind kind;
  pt_dataset ds = {0};
  pt_model *m = NULL;
  pt_loader *l = NULL;
  st = pt_dataset_kind_parse(dataset ? dataset : spec.defaults.dataset, &kind);
  if (st == PT_OK) st = pt_dataset_load(&ds, kind, data_dir ? data_dir : pt_dataset_default_dir(kind), 0);
  if (st == PT_OK && (ds.c != spec.in_c || ds.h != spec.in_h || ds.w != spec.in_w))
    st = pt_fail(PT_ERR_ARG, "model %s takes %dx%dx%d input but the %s images are %dx%dx%d", spec.name, spec.in_c,
                 spec.in_h, spec.in_w, pt_dataset_kind_name(kind), ds.c, ds.h, ds.w);
  const pt_backend *be = NULL;
  int gpu = 0;
  if (st == PT_OK) st = eval_backend(device, &be, &gpu);
  if (st == PT_OK) st = pt_model_create_on(&m, &spec, batch, be);
  if (st == PT_OK) st = pt_checkpoint_load_weights(ckpt, m);
  pt_loader_config lc;
  pt_train_loader_config(&spec, batch, 0, &lc);
  lc.prefetch = 1;
  lc.indices_only = be && be->kind != PT_BACKEND_CPU; /* the GPU makes the images */
  if (st == PT_OK) st = pt_loader_create(&l, &ds, &lc);
  pt_eval_sums ev;
  pt_device_data dd = {0};
  if (st == PT_OK) st = pt_device_data_init(&dd, m->be, &ds, &lc, batch);
  if (st == PT_OK) st = pt_evaluate(m, l, &dd, &ev);
  pt_device_data_free(&dd);
  if (be && be->kind != PT_BACKEND_CPU) { /* the GPU memory before the thread's stream and handles */
    pt_model_destroy(m);
    m = NULL;
    /* A fault in the evaluation's last kernels shows only here. */
    const pt_status ust = pt_backend_unbind(be);
    if (st == PT_OK) st = ust;
  }
  if (st == PT_OK)
    printf("%s on %s test: loss %.4f, accuracy %.4f (%lld/%lld)\n", spec.name, pt_dataset_kind_name(kind),
           ev.loss_sum / (double)ev.count, (double)ev.correct / (double)ev.count, (long long)ev.correct,
           (long long)ev.count);
  pt_loader_destroy(l);
  pt_model_destroy(m);
  pt_dataset_free(&ds);
  return st == PT_OK ? 0 : pt_cli_fail("eval");
}
