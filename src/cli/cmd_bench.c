/* ptrain bench: steady-state training throughput, or the machine's SGEMM
 * rate, as a line of text or of JSON (for bench/cpu.sh). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "ops/cpu/isa/cpu_level.h"
#include "train/bench.h"

int pt_cmd_bench(int argc, char **argv) {
  pt_train_config c;
  pt_train_config_defaults(&c);
  int steps = 50, warmup = 5, json = 0, sgemm = 0, size = 2048, profile = 0;
  float min_seconds = 0.0f;
  const pt_arg flags[] = {
      {"--model", ARG_STR, &c.model, 0, 0, NULL, "NAME", "model preset (default mnist-cnn)"},
      {"--model-file", ARG_STR, &c.model_file, 0, 0, NULL, "SPEC", "model spec file"},
      {"--data-dir", ARG_STR, &c.data_dir, 0, 0, NULL, "DIR", "where the dataset files are"},
      {"--batch-size", ARG_INT, &c.batch_size, 1, 1 << 20, NULL, "N", "batch size (default: the preset's)"},
      {"--optimizer", ARG_CHOICE, &c.optimizer, 0, 0, "sgd|adam|adamw|adadelta", "NAME", "optimizer (default: the preset's)"},
      {"--threads", ARG_INT, &c.threads, 1, 1024, NULL, "N", "CPU threads (default: all cores)"},
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
  if (sgemm) {
    int threads = c.threads > 0 ? c.threads : 0;
    pt_train_plan plan;
    if (pt_train_plan_make(&c, &plan) != PT_OK) return pt_cli_fail("bench");
    if (!threads) threads = plan.threads;
    if (pt_ops_set_threads(threads)) return pt_cli_fail("bench");
    double g;
    if (pt_bench_sgemm(size, &g) != PT_OK) return pt_cli_fail("bench");
    if (json) printf("{\"sgemm_gflops\":%.2f,\"size\":%d,\"threads\":%d}\n", g, size, threads);
    else printf("SGEMM %dx%dx%d, %d thread%s: %.1f GFLOP/s\n", size, size, size, threads, threads == 1 ? "" : "s", g);
    return 0;
  }
  pt_bench_result r;
  if (pt_bench_train(&c, warmup, steps, min_seconds, profile, &r) != PT_OK) return pt_cli_fail("bench");
  const char *name = c.model_file ? c.model_file : c.model ? c.model : "mnist-cnn";
  if (json)
    printf("{\"framework\":\"ptrain\",\"model\":\"%s\",\"batch\":%d,\"threads\":%d,\"steps\":%d,\"images_per_s\":%.2f,"
           "\"step_ms\":%.3f,\"flops_per_image\":%.6g,\"gflops\":%.2f,\"peak_rss_mb\":%.1f,\"cpu\":\"%s\","
           "\"cpu_level\":\"%s\"}\n",
           name, r.batch, r.threads, r.steps, r.images_per_s, r.step_ms, r.flops_per_image, r.gflops, r.peak_rss_mb,
           pt_cpu_model(), pt_cpu_level_name(pt_cpu_level_current()));
  else
    printf("%s: batch %d, %d thread%s: %.0f images/s (%.2f ms/step), %.1f MFLOP/image, %.1f GFLOP/s, peak %.0f MiB; "
           "%s, %s kernels\n",
           name, r.batch, r.threads, r.threads == 1 ? "" : "s", r.images_per_s, r.step_ms, r.flops_per_image / 1e6,
           r.gflops, r.peak_rss_mb, pt_cpu_model(), pt_cpu_level_name(pt_cpu_level_current()));
  return 0;
}
