#include "train/graph_step.h"

#include <stdio.h>
#include <string.h>

#include "train/step.h"

void pt_graph_step_init(pt_graph_step *g, int on) {
  memset(g, 0, sizeof *g);
  g->on = on;
}

void pt_graph_step_free(pt_graph_step *g, const pt_backend *be) {
  if (g->graph && be && be->graph_destroy) be->graph_destroy(g->graph);
  g->graph = NULL;
}

static void give_up(pt_graph_step *g, const char *why) {
  g->on = 0;
  snprintf(g->why_off, sizeof g->why_off, "%s", why);
}

pt_graph_action pt_graph_step_plan(pt_graph_step *g, const pt_backend *be, int n, int batch) {
  if (!g->on || !be->graph_begin || n != batch) return PT_GRAPH_EAGER; /* a last, smaller batch runs eagerly */
  if (g->graph && be->memory_generation() != g->generation) pt_graph_step_free(g, be);
  if (g->graph) return PT_GRAPH_REPLAY;
  if (g->captures == 0 && g->warm < PT_GRAPH_WARMUP) {
    g->warm++; /* this step runs eagerly and sets up what it needs */
    return PT_GRAPH_EAGER;
  }
  return PT_GRAPH_CAPTURE;
}

void pt_graph_step_captured(pt_graph_step *g, const pt_backend *be, void *graph) {
  g->graph = graph;
  g->generation = be->memory_generation();
  g->captures++;
}

void pt_graph_step_failed(pt_graph_step *g, const char *why) {
  if (++g->failures >= PT_GRAPH_TRIES) give_up(g, why);
}

/* The step as a graph of its own: captured, then launched for this step
 * (nothing ran during the capture). 0 when the capture failed. */
static int capture(pt_graph_step *g, pt_model *m, pt_optimizer *opt, pt_device_data *dd, const pt_batch *b, int epoch,
                   uint64_t dropout_step, float loss_scale, float lr) {
  const pt_backend *be = m->be;
  if (be->graph_begin() != PT_OK) {
    give_up(g, pt_error_message());
    return 0;
  }
  const int64_t opt_step = opt->step;
  const float *x;
  const int32_t *y;
  pt_device_data_make(dd, b->n, epoch, &x, &y);
  pt_train_micro_step_queued(m, x, y, b->n, dropout_step, 1, loss_scale, NULL, dd->sums);
  pt_train_update(m, opt, lr, NULL);
  void *graph = NULL;
  if (be->graph_end(&graph) != PT_OK) {
    opt->step = opt_step; /* the update was recorded, not run */
    pt_graph_step_failed(g, pt_error_message());
    return 0;
  }
  pt_graph_step_captured(g, be, graph);
  return 1;
}

pt_status pt_graph_step_run(pt_graph_step *g, pt_model *m, pt_optimizer *opt, pt_device_data *dd, const pt_batch *b,
                            int batch, int epoch, uint64_t dropout_step, float loss_scale, float lr, int *done) {
  *done = 0;
  const pt_backend *be = m->be;
  const pt_graph_action what = pt_graph_step_plan(g, be, b->n, batch);
  if (what == PT_GRAPH_EAGER) return PT_OK;
  /* Outside the graph: a copy from host memory would be replayed from the
   * staging slot the capture saw. */
  pt_device_data_upload_index(dd, b);
  if (what == PT_GRAPH_CAPTURE) {
    if (!capture(g, m, opt, dd, b, epoch, dropout_step, loss_scale, lr)) return PT_OK;
  } else {
    /* What the captured calls do on the host, done again. */
    m->step = dropout_step;
    opt->step++;
  }
  const pt_graph_vars v = {dropout_step, opt->step, lr, epoch};
  PT_TRY(be->graph_launch(g->graph, &v));
  g->replays++;
  *done = 1;
  return PT_OK;
}
