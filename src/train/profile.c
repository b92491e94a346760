#include "train/profile.h"

#include <math.h>

#include "io/metrics.h"

#include <string.h>

void pt_profile_reset(pt_model *m, pt_phase_times *t) {
  memset(t, 0, sizeof *t);
  for (int i = 0; i < m->nlayers; i++) m->layers[i].fwd_ms = m->layers[i].bwd_ms = 0.0;
}

double pt_profile_layer_gflops(const pt_layer *L, double images, double fwd_ms, double bwd_ms) {
  const double flops = pt_layer_flops(L) * images * (L->bwd_dx ? 3.0 : 2.0);
  return fwd_ms + bwd_ms > 0.0 && flops > 0.0 ? flops / ((fwd_ms + bwd_ms) * 1e-3) / 1e9 : 0.0;
}

void pt_profile_print(FILE *out, const pt_model *m, const pt_phase_times *t, int replicas, int stages) {
  if (t->steps == 0) return;
  const double steps = (double)t->steps, step_ms = 1e3 * t->total_s / steps;
  const double per_step_images = (double)t->images / steps; /* this worker's: its layers' work */
  if (replicas < 1) replicas = 1;
  /* The run's rate, as the epoch line and the metrics' profile record give
   * it: every replica's images. */
  fprintf(out, "\nprofile: %lld steps, %.2f ms/step, %.0f images/s", (long long)t->steps, step_ms,
          (double)t->images * replicas / t->total_s);
  if (replicas > 1) fprintf(out, " (%d replicas; the layers and phases below are the first's)", replicas);
  fputc('\n', out);
  /* Stages run side by side: their layers' shares of one step add up to
   * more than it, and stage 0's phases count its waits for the others. */
  if (stages > 1)
    fprintf(out, "(%d stages at once: each layer's share is of a step's time, and the stages' shares overlap; the "
                 "phases are stage 0's, its waits for the other stages in communication; see the stage table)\n",
            stages);
  fprintf(out, "%-22s %10s %10s %7s %9s\n", "layer", "fwd ms", "bwd ms", "share", "GFLOP/s");
  for (int i = 0; i < m->nlayers; i++) {
    const pt_layer *L = &m->layers[i];
    if (L->spec.kind == PT_L_FLATTEN) continue;
    char name[96];
    snprintf(name, sizeof name, "%s%s", L->label, L->fused ? " (fused)" : "");
    double f = L->fwd_ms / steps, b = L->bwd_ms / steps;
    const double gf = pt_profile_layer_gflops(L, per_step_images, f, b);
    fprintf(out, "%-22s %10.3f %10.3f %6.1f%% ", name, f, b, 100.0 * (f + b) / step_ms);
    if (gf > 0) fprintf(out, "%9.1f\n", gf);
    else fprintf(out, "%9s\n", "-");
  }
  double other = t->total_s - t->data_s - t->forward_s - t->backward_s - t->optimizer_s - t->comm_s;
  fprintf(out, "%-22s %10s %10s %7s\n", "phase", "ms/step", "", "share");
  const struct { const char *name; double s; } ph[] = {
      {"waiting for data", t->data_s}, {"forward", t->forward_s},   {"backward", t->backward_s},
      {"optimizer", t->optimizer_s},   {"communication", t->comm_s}, {"other (loss, idle)", other},
  };
  for (size_t k = 0; k < sizeof ph / sizeof ph[0]; k++)
    fprintf(out, "%-22s %10.3f %10s %6.1f%%\n", ph[k].name, 1e3 * ph[k].s / steps, "", 100.0 * ph[k].s / t->total_s);
}

pt_status pt_profile_metrics(struct pt_metrics *mt, const pt_phase_times *t, int replicas, double bubble,
                             double peak_rss_mb) {
  const double steps = t->steps > 0 ? (double)t->steps : 1.0, ms = 1e3 / steps;
  const int64_t images = t->images * (replicas > 0 ? replicas : 1);
  const double other = t->total_s - t->data_s - t->forward_s - t->backward_s - t->optimizer_s - t->comm_s;
  pt_metrics_begin(mt, "profile");
  pt_metrics_int(mt, "steps", t->steps);
  pt_metrics_int(mt, "images", images);
  pt_metrics_num(mt, "seconds", t->total_s);
  pt_metrics_num(mt, "images_per_s", t->total_s > 0 ? (double)images / t->total_s : NAN);
  pt_metrics_num(mt, "ms_per_step", t->total_s * ms);
  pt_metrics_num(mt, "data_ms", t->data_s * ms);
  pt_metrics_num(mt, "forward_ms", t->forward_s * ms);
  pt_metrics_num(mt, "backward_ms", t->backward_s * ms);
  pt_metrics_num(mt, "optimizer_ms", t->optimizer_s * ms);
  pt_metrics_num(mt, "comm_ms", t->comm_s * ms);
  pt_metrics_num(mt, "other_ms", other * ms);
  pt_metrics_num(mt, "bubble", bubble);
  pt_metrics_num(mt, "peak_rss_mb", peak_rss_mb);
  return pt_metrics_end(mt);
}
