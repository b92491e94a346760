/* When a GPU step is captured, replayed or run eagerly (--cuda-graphs):
 * warm-up steps first, then one capture, then replays; a last, smaller
 * batch eagerly; memory that moved drops the graph and captures again at
 * once; failed captures retried, and after PT_GRAPH_TRIES the run stays
 * eager, keeping why. The backend here is a stand-in with a memory
 * generation and a graph count: the GPU side runs in
 * tests/parallel/test_gpu_training.sh. Also which runs capture by default:
 * one GPU, whole optimizer steps, no per-layer timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "train/graph_step.h"
#include "train/trainer.h"

static uint64_t generation;
static int destroyed;
static uint64_t fake_generation(void) { return generation; }
static void fake_destroy(void *g) {
  (void)g;
  destroyed++;
}
static pt_status fake_begin(void) { return PT_OK; }

static pt_backend fake(void) {
  pt_backend be;
  memset(&be, 0, sizeof be);
  be.kind = PT_BACKEND_CUDA;
  be.graph_begin = fake_begin;
  be.graph_destroy = fake_destroy;
  be.memory_generation = fake_generation;
  return be;
}

static int token;

static void test_warm_up_capture_replay(void **s) {
  (void)s;
  const pt_backend be = fake();
  generation = 7;
  destroyed = 0;
  pt_graph_step g;
  pt_graph_step_init(&g, 1);
  for (int i = 0; i < PT_GRAPH_WARMUP; i++) assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_EAGER);
  /* a last, smaller batch during the warm-up does not count towards it */
  assert_int_equal(pt_graph_step_plan(&g, &be, 32, 64), PT_GRAPH_EAGER);
  assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_CAPTURE);
  pt_graph_step_captured(&g, &be, &token);
  for (int i = 0; i < 5; i++) assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_REPLAY);
  /* the epoch's last batch: eagerly, the graph kept */
  assert_int_equal(pt_graph_step_plan(&g, &be, 32, 64), PT_GRAPH_EAGER);
  assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_REPLAY);
  assert_int_equal(destroyed, 0);
  /* an evaluation grew the workspace: the graph goes, the next step captures at once */
  generation++;
  assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_CAPTURE);
  assert_int_equal(destroyed, 1);
  assert_null(g.graph);
  pt_graph_step_captured(&g, &be, &token);
  assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_REPLAY);
  assert_int_equal(g.captures, 2);
  pt_graph_step_free(&g, &be);
  assert_int_equal(destroyed, 2);
}

static void test_failures_then_eager(void **s) {
  (void)s;
  const pt_backend be = fake();
  pt_graph_step g;
  pt_graph_step_init(&g, 1);
  for (int i = 0; i < PT_GRAPH_WARMUP; i++) assert_int_equal(pt_graph_step_plan(&g, &be, 100, 100), PT_GRAPH_EAGER);
  for (int i = 0; i < PT_GRAPH_TRIES; i++) {
    assert_int_equal(pt_graph_step_plan(&g, &be, 100, 100), PT_GRAPH_CAPTURE);
    assert_int_equal(g.why_off[0], 0);
    pt_graph_step_failed(&g, "the step cannot be captured: an upload from host memory");
  }
  assert_int_equal(g.on, 0);
  assert_string_equal(g.why_off, "the step cannot be captured: an upload from host memory");
  for (int i = 0; i < 3; i++) assert_int_equal(pt_graph_step_plan(&g, &be, 100, 100), PT_GRAPH_EAGER);
}

static void test_off_and_cpu(void **s) {
  (void)s;
  pt_backend be = fake();
  pt_graph_step g;
  pt_graph_step_init(&g, 0);
  for (int i = 0; i < 5; i++) assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_EAGER);
  be.graph_begin = NULL; /* the CPU: no graphs, whatever was asked */
  pt_graph_step_init(&g, 1);
  for (int i = 0; i < 5; i++) assert_int_equal(pt_graph_step_plan(&g, &be, 64, 64), PT_GRAPH_EAGER);
}

/* What pt_train_plan_make decides for the graphs: cuda_graphs 0 (the
 * default) captures where the run allows it, 1 insists, -1 never. Making a
 * plan touches no GPU, so this runs everywhere. */
static int graphs_in_plan(int asked, const char *device, const char *parallel, const char *devices, int accum,
                          int profile, pt_status *st) {
  pt_train_config cfg;
  pt_train_config_defaults(&cfg);
  cfg.model = "fmnist-mlp";
  cfg.device = device;
  cfg.parallel = parallel;
  cfg.devices = devices;
  cfg.accum_steps = accum;
  cfg.profile = profile;
  cfg.cuda_graphs = asked;
  pt_train_plan plan;
  *st = pt_train_plan_make(&cfg, &plan);
  return *st == PT_OK ? plan.cuda_graphs : -1;
}

static void test_plan_default_and_flags(void **s) {
  (void)s;
  pt_status st;
  assert_int_equal(graphs_in_plan(0, "cuda", NULL, NULL, 1, 0, &st), 1);
  assert_int_equal(graphs_in_plan(0, "cuda:0", NULL, NULL, 1, 0, &st), 1);
  assert_int_equal(graphs_in_plan(-1, "cuda", NULL, NULL, 1, 0, &st), 0);
  assert_int_equal(graphs_in_plan(1, "cuda", NULL, NULL, 1, 0, &st), 1);
  /* by default, what cannot be captured runs eagerly without a word */
  assert_int_equal(graphs_in_plan(0, NULL, NULL, NULL, 1, 0, &st), 0);
  assert_int_equal(graphs_in_plan(0, "cuda", NULL, NULL, 2, 0, &st), 0);
  assert_int_equal(graphs_in_plan(0, "cuda", NULL, NULL, 1, 1, &st), 0);
  assert_int_equal(graphs_in_plan(0, NULL, "dp", "cuda:0,cuda:1", 1, 0, &st), 0);
  assert_int_equal(graphs_in_plan(0, NULL, "model", "cuda:0,cuda:0", 1, 0, &st), 0);
  /* asked for, the same runs are errors naming why */
  assert_int_equal(graphs_in_plan(1, NULL, NULL, NULL, 1, 0, &st), -1);
  assert_int_equal(st, PT_ERR_ARG);
  assert_int_equal(graphs_in_plan(1, "cuda", NULL, NULL, 2, 0, &st), -1);
  assert_int_equal(st, PT_ERR_ARG);
  assert_int_equal(graphs_in_plan(1, "cuda", NULL, NULL, 1, 1, &st), -1);
  assert_int_equal(st, PT_ERR_ARG);
  assert_int_equal(graphs_in_plan(1, NULL, "dp", "cuda:0,cuda:1", 1, 0, &st), -1);
  assert_int_equal(st, PT_ERR_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_warm_up_capture_replay),
      cmocka_unit_test(test_failures_then_eager),
      cmocka_unit_test(test_off_and_cpu),
      cmocka_unit_test(test_plan_default_and_flags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
