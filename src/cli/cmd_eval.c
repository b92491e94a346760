/* ptrain eval: test loss and accuracy of a checkpoint. The model comes from
 * the checkpoint's own metadata when ptrain wrote it, or from --model /
 * --model-file for weights saved elsewhere (PyTorch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "train/config_bounds.h"
#include "util/notice.h"
#include "util/cores.h"

int pt_cmd_eval(int argc, char **argv) {
  const char *ckpt = NULL, *model = NULL, *model_file = NULL, *dataset = NULL, *data_dir = NULL, *device = "cpu";
  int batch = 1000, threads = 0, keep_denormals = 0;
  const pt_arg flags[] = {
      {"--checkpoint", ARG_STR, &ckpt, 0, 0, NULL, "FILE",
       "weights to evaluate (model.safetensors, or a checkpoint directory)"},
      {"--model", ARG_STR, &model, 0, 0, NULL, "NAME", "preset (default: the one recorded in the checkpoint)"},
      {"--model-file", ARG_STR, &model_file, 0, 0, NULL, "SPEC", "model spec file"},
      {"--dataset", ARG_CHOICE, &dataset, 0, 0, "fashion-mnist|mnist|cifar10", "NAME", "dataset (default: the model's)"},
      {"--data-dir", ARG_STR, &data_dir, 0, 0, NULL, "DIR", "where the dataset files are"},
      {"--test-batch-size", ARG_INT, &batch, 1, PT_BATCH_MAX, NULL, "N", "evaluation batch size (default 1000)"},
      {"--threads", ARG_INT, &threads, 1, 1024, NULL, "N", "CPU threads (default: the cores this process may use)"},
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
  if (model && model_file) {
    fprintf(stderr, "ptrain eval: --model and --model-file: give one, not both (see 'ptrain eval --help')\n");
    return PT_USAGE_ERROR;
  }
  if ((rc = pt_cli_check_model("eval", model, model_file))) return rc;
  /* A mistyped --device is said before the checkpoint is read. */
  pt_backend_kind kind;
  int index;
  if (pt_device_parse_one(device, "--device", &kind, &index) != PT_OK) return pt_cli_usage_fail("eval");
  pt_net *net = NULL;
  pt_data *data = NULL;
  pt_eval ev;
  pt_status st = pt_net_load(ckpt, model ? model : model_file, &net);
  if (st == PT_OK) st = pt_data_load(dataset ? dataset : pt_net_dataset(net), data_dir, PT_TEST, &data);
  /* The library's 0 keeps the calling thread's pool (one thread here): the
   * flag's default is every core. */
  if (threads == 0) threads = pt_cores_usable();
  /* --dataset naming images the model cannot take is a usage error, as in
   * ptrain train; the library's message says which sizes. */
  int usage = 0;
  if (st == PT_OK && dataset) {
    int mc, mh, mw;
    pt_net_shape(net, &mc, &mh, &mw, NULL);
    usage = data->ds.c != mc || data->ds.h != mh || data->ds.w != mw;
  }
  if (st == PT_OK) st = pt_evaluate_with(net, data, device, threads, batch, !keep_denormals, &ev);
  /* Finite weights can still overflow float arithmetic: a NaN loss is no
   * measure of the model, and is said as predict says it. */
  if (st == PT_OK && !isfinite(ev.loss))
    st = pt_fail(PT_ERR_FORMAT, "%s: the model's test loss is not finite (NaN or infinity): these weights overflow "
                 "float arithmetic", ckpt);
  pt_notice_flush(stderr); /* a backend's fallback to a slower path */
  if (st == PT_OK)
    printf("%s on %s test: loss %.4f, accuracy %.4f (%lld/%lld)\n", pt_net_name(net),
           pt_dataset_kind_name((pt_dataset_kind)data->kind), ev.loss, ev.accuracy, (long long)ev.correct,
           (long long)ev.count);
  pt_data_free(data);
  pt_net_free(net);
  return st == PT_OK ? 0 : usage && st == PT_ERR_ARG ? pt_cli_usage_fail("eval") : pt_cli_fail("eval");
}
