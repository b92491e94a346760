/* ptrain bench: steady-state training throughput, or the machine's SGEMM
 * rate, as a line of text or of JSON (for bench/cpu.sh). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cuda/device.h"
#include "data/dataset.h"
#include "ops/cpu/isa/cpu_level.h"
#include "train/bench.h"
#include "util/cores.h"

/* A number as the JSON line always wrote it: decimals fixed (%.Nf), or
 * for negative N, N significant digits (%.Ng). */
typedef struct {
  char s[48];
} number_text;
static number_text fixed(int decimals, double v) {
  number_text t;
  if (decimals >= 0) snprintf(t.s, sizeof t.s, "%.*f", decimals, v);
  else snprintf(t.s, sizeof t.s, "%.*g", -decimals, v);
  return t;
}

int pt_cmd_bench(int argc, char **argv) {
  pt_train_config c;
  pt_train_config_defaults(&c);
  int steps = 50, warmup = 5, json = 0, sgemm = 0, size = 2048, profile = 0, no_graphs = 0;
  float min_seconds = 0.0f;
  const pt_arg flags[] = {
      {"--model", ARG_STR, &c.model, 0, 0, NULL, "NAME", "model preset (default mnist-cnn)"},
      {"--model-file", ARG_STR, &c.model_file, 0, 0, NULL, "SPEC", "model spec file"},
      {"--dataset", ARG_CHOICE, &c.dataset, 0, 0, PT_DATASET_NAMES, "NAME",
       "fashion-mnist, mnist or cifar10 (default: the preset's)"},
      {"--data-dir", ARG_STR, &c.data_dir, 0, 0, NULL, "DIR", "where the dataset files are"},
      {"--batch-size", ARG_INT, &c.batch_size, 1, 1 << 20, NULL, "N", "batch size (default: the preset's)"},
      {"--optimizer", ARG_CHOICE, &c.optimizer, 0, 0, "sgd|adam|adamw|adadelta", "NAME", "optimizer (default: the preset's)"},
      {"--threads", ARG_INT, &c.threads, 1, 1024, NULL, "N", "CPU threads (default: the cores this process may use)"},
      {"--device", ARG_STR, &c.device, 0, 0, NULL, "DEV",
       "cpu (default) or cuda[:N]: on a GPU the data is in its memory and the steps are queued as training "
       "queues them"},
      {"--precision", ARG_CHOICE, &c.precision, 0, 0, "fp32|tf32|bf16", "P", "on a GPU, as for train (default fp32)"},
      {"--no-cuda-graphs", ARG_FLAG, &no_graphs, 0, 0, NULL, NULL,
       "on a GPU, launch each step's kernels one by one instead of replaying the step as a CUDA graph, as train's "
       "flag does"},
      {"--steps", ARG_INT, &steps, 1, 1 << 20, NULL, "N", "timed steps (default 50)"},
      {"--warmup", ARG_INT, &warmup, 0, 1 << 20, NULL, "N", "untimed steps first (default 5)"},
      {"--min-seconds", ARG_FLOAT, &min_seconds, 0, 86400, NULL, "S",
       "repeat the timed steps, N at a time, until at least S seconds have passed (default 0: once)"},
      {"--sgemm", ARG_FLAG, &sgemm, 0, 0, NULL, NULL, "measure SGEMM GFLOP/s instead"},
      {"--size", ARG_INT, &size, 64, 16384, NULL, "N", "SGEMM size (default 2048)"},
      {"--json", ARG_FLAG, &json, 0, 0, NULL, NULL, "print one JSON line"},
      {"--profile", ARG_FLAG, &profile, 0, 0, NULL, NULL, "print where the time goes, per layer and phase (stderr)"},
      {"--keep-denormals", ARG_FLAG, &c.keep_denormals, 0, 0, NULL, NULL,
       "compute with denormal floats as IEEE 754 asks (default: flush them to zero, which is faster)"},
  };
  const int n = (int)(sizeof flags / sizeof flags[0]);
  int help;
  int rc = pt_args_parse("bench", flags, n, argc, argv, 2, &help, NULL, 0, NULL);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain bench [options]",
                       "Measure steady-state training throughput (forward, backward, optimizer) on batches\n"
                       "staged in memory beforehand, or the SGEMM rate with --sgemm.",
                       flags, n);
    return 0;
  }
  /* Each mode's flags, given to the other, would be ignored: a slip (a
   * forgotten --sgemm, a model for the SGEMM rate) must not pass as a
   * setting that took effect. --threads and --json serve both. */
  const struct {
    int given;
    const char *flag;
  } training_flags[] = {
      {c.model != NULL, "--model"},
      {c.model_file != NULL, "--model-file"},
      {c.dataset != NULL, "--dataset"},
      {c.data_dir != NULL, "--data-dir"},
      {c.batch_size != PT_UNSET_INT, "--batch-size"},
      {c.optimizer != NULL, "--optimizer"},
      {c.precision != NULL, "--precision"},
      {no_graphs, "--no-cuda-graphs"},
      {steps != 50, "--steps"},
      {warmup != 5, "--warmup"},
      {min_seconds != 0.0f, "--min-seconds"},
      {profile, "--profile"},
      {c.keep_denormals, "--keep-denormals"},
  };
  for (size_t i = 0; sgemm && i < sizeof training_flags / sizeof training_flags[0]; i++)
    if (training_flags[i].given)
      return pt_cli_usage("bench", "%s is for the training benchmark; --sgemm measures SGEMM alone (it takes --size, "
                          "--threads and --json)", training_flags[i].flag);
  if (!sgemm && size != 2048) return pt_cli_usage("bench", "--size is the SGEMM's: give --sgemm too");
  if (sgemm) {
    if (c.device && strcmp(c.device, "cpu") != 0)
      return pt_cli_usage("bench", "--sgemm measures this CPU's SGEMM; not with --device %s", c.device);
    /* No model is read: the default is every core, as for training. */
    const int threads = c.threads > 0 ? c.threads : pt_cores_usable();
    if (pt_ops_set_threads(threads)) return pt_cli_fail("bench");
    double g;
    if (pt_bench_sgemm(size, &g) != PT_OK) return pt_cli_fail("bench");
    if (json) { /* the CPU named, as in train's line; cJSON escapes its name */
      cJSON *o = cJSON_CreateObject();
      cJSON_AddRawToObject(o, "sgemm_gflops", fixed(2, g).s);
      cJSON_AddNumberToObject(o, "size", size);
      cJSON_AddNumberToObject(o, "threads", threads);
      cJSON_AddStringToObject(o, "cpu", pt_cpu_model());
      cJSON_AddStringToObject(o, "cpu_level", pt_cpu_level_name(pt_cpu_level_current()));
      char *text = cJSON_PrintUnformatted(o);
      if (text) puts(text);
      cJSON_free(text);
      cJSON_Delete(o);
      if (!text) return pt_cli_fail("bench");
    } else printf("SGEMM %dx%dx%d, %d thread%s: %.1f GFLOP/s\n", size, size, size, threads, threads == 1 ? "" : "s", g);
    return 0;
  }
  if (no_graphs) c.cuda_graphs = -1;
  pt_bench_result r;
  /* An unknown model, or flags that do not fit together: usage errors, as in train. */
  const pt_status st = pt_bench_train(&c, warmup, steps, min_seconds, profile, &r);
  if (st != PT_OK) return st == PT_ERR_ARG ? pt_cli_usage_fail("bench") : pt_cli_fail("bench");
  const char *name = c.model_file ? c.model_file : c.model ? c.model : "mnist-cnn";
  if (r.graphs_off[0]) fprintf(stderr, "ptrain bench: note: the steps went back to eager launches: %s\n", r.graphs_off);
  /* Where it ran: the CPU and its kernels, or the GPU by name. */
  char where[320];
  pt_cuda_device gpu;
  if (r.device >= 0 && pt_cuda_device_info(r.device, &gpu) == PT_OK)
    snprintf(where, sizeof where, "cuda:%d (%s)", r.device, gpu.name);
  else if (r.device >= 0)
    snprintf(where, sizeof where, "cuda:%d", r.device);
  else
    snprintf(where, sizeof where, "%s, %s kernels", pt_cpu_model(), pt_cpu_level_name(pt_cpu_level_current()));
  if (json) {
    /* cJSON escapes what a spec file's path may hold (quotes, backslashes). */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "framework", "ptrain");
    cJSON_AddStringToObject(o, "model", name);
    cJSON_AddNumberToObject(o, "batch", r.batch);
    cJSON_AddNumberToObject(o, "threads", r.threads);
    cJSON_AddNumberToObject(o, "steps", r.steps);
    cJSON_AddRawToObject(o, "images_per_s", fixed(2, r.images_per_s).s);
    cJSON_AddRawToObject(o, "step_ms", fixed(3, r.step_ms).s);
    cJSON_AddRawToObject(o, "flops_per_image", fixed(-6, r.flops_per_image).s);
    cJSON_AddRawToObject(o, "gflops", fixed(2, r.gflops).s);
    cJSON_AddRawToObject(o, "peak_rss_mb", fixed(1, r.peak_rss_mb).s);
    cJSON_AddStringToObject(o, "cpu", pt_cpu_model());
    cJSON_AddStringToObject(o, "cpu_level", pt_cpu_level_name(pt_cpu_level_current()));
    if (r.device >= 0) {
      char dev[16];
      snprintf(dev, sizeof dev, "cuda:%d", r.device);
      cJSON_AddStringToObject(o, "device", dev);
      cJSON_AddStringToObject(o, "gpu", where);
      cJSON_AddStringToObject(o, "precision", c.precision ? c.precision : "fp32");
      cJSON_AddNumberToObject(o, "cuda_graph_steps", (double)r.graph_steps);
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text) {
      pt_fail(PT_ERR_NOMEM, "out of memory for the JSON line");
      return pt_cli_fail("bench");
    }
    puts(text);
    cJSON_free(text);
  } else if (r.device >= 0) {
    char launch[64];
    if (r.graph_steps == r.steps) snprintf(launch, sizeof launch, "a CUDA graph");
    else if (r.graph_steps > 0)
      snprintf(launch, sizeof launch, "a CUDA graph in %lld of %d steps", (long long)r.graph_steps, r.steps);
    else snprintf(launch, sizeof launch, "eager");
    printf("%s: batch %d, %s, %s, %s: %.0f images/s (%.2f ms/step), %.1f MFLOP/image, %.1f GFLOP/s\n", name, r.batch,
           where, c.precision ? c.precision : "fp32", launch, r.images_per_s, r.step_ms, r.flops_per_image / 1e6,
           r.gflops);
  } else
    printf("%s: batch %d, %d thread%s: %.0f images/s (%.2f ms/step), %.1f MFLOP/image, %.1f GFLOP/s, peak %.0f MiB; "
           "%s\n",
           name, r.batch, r.threads, r.threads == 1 ? "" : "s", r.images_per_s, r.step_ms, r.flops_per_image / 1e6,
           r.gflops, r.peak_rss_mb, where);
  return 0;
}
