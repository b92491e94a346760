/* A sweep judges only from figures it can trust. Constructed measurements,
 * no timing: runs too short to outweigh noise, and speed-ups no workers
 * can give, are rough; a rough configuration is never said to pay, and no
 * recommendation rests on it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "scale/scale.h"

static void assert_has(const char *s, const char *part) {
  if (!strstr(s, part)) fail_msg("'%s' lacks '%s'", s, part);
}

static void test_steady_runs(void **st) {
  (void)st;
  char why[200] = "x";
  const pt_scale_totals a = {0.120, 300, 3}, b = {1.120, 1300, 13};
  assert_int_equal(pt_scale_steadiness_of(&a, &b, why, sizeof why), PT_SCALE_STEADY);
  assert_string_equal(why, "");
}

/* The sweep that reported 5.12x: 10 steps of a small MLP, 30 ms in all. */
static void test_too_little_time_measured_is_rough(void **st) {
  (void)st;
  char why[200];
  const pt_scale_totals a = {0.050, 300, 3}, b = {0.080, 1300, 13};
  assert_int_equal(pt_scale_steadiness_of(&a, &b, why, sizeof why), PT_SCALE_ROUGH_SHORT);
  assert_has(why, "10 measured steps took 30 ms");
  assert_has(why, "raise --steps");
  /* Just enough time is steady. */
  const pt_scale_totals c = {0.050, 300, 3}, d = {0.050 + PT_SCALE_MIN_MEASURED_S, 1300, 13};
  assert_int_equal(pt_scale_steadiness_of(&c, &d, why, sizeof why), PT_SCALE_STEADY);
}

/* Too little time measured: as many steps as twice the minimum takes at
 * the rate seen, bounded; enough time, or no rate, keeps the steps asked. */
static void test_steps_for(void **st) {
  (void)st;
  const pt_scale_totals a = {0.050, 300, 5}, b = {0.080, 3300, 35}; /* 30 steps in 30 ms */
  assert_int_equal(pt_scale_steps_for(&a, &b, 30), (int)ceil(30 * 2 * PT_SCALE_MIN_MEASURED_S / 0.030 - 1e-9));
  const pt_scale_totals fast = {0.050, 300, 5}, fast_b = {0.0503, 3300, 35}; /* 0.3 ms: the bound */
  assert_int_equal(pt_scale_steps_for(&fast, &fast_b, 30), 30 * PT_SCALE_MAX_STEPS_FACTOR);
  const pt_scale_totals slow = {0.5, 300, 5}, slow_b = {1.5, 3300, 35};
  assert_int_equal(pt_scale_steps_for(&slow, &slow_b, 30), 30);
  const pt_scale_totals none = {0.5, 300, 5}, none_b = {0.4, 3300, 35}; /* the longer took no longer */
  assert_int_equal(pt_scale_steps_for(&none, &none_b, 30), 30);
}

static void test_no_difference_is_rough(void **st) {
  (void)st;
  char why[200];
  const pt_scale_totals a = {0.090, 300, 3}, b = {0.085, 1300, 13};
  assert_int_equal(pt_scale_steadiness_of(&a, &b, why, sizeof why), PT_SCALE_ROUGH_NO_DIFF);
  assert_has(why, "took no longer");
  const pt_scale_totals c = {0.090, 300, 3}, d = {0.900, 300, 3};
  assert_int_equal(pt_scale_steadiness_of(&c, &d, why, sizeof why), PT_SCALE_ROUGH_NO_DIFF);
}

static void test_impossible_speedups(void **st) {
  (void)st;
  char why[200];
  assert_int_equal(pt_scale_impossible_speedup(5.12, 2, why, sizeof why), 1);
  assert_has(why, "256% efficiency, more than 2 workers can give");
  assert_int_equal(pt_scale_impossible_speedup(2.30, 2, why, sizeof why), 1);
  /* Up to the tolerance a superlinear speed-up can be real (the cache). */
  assert_int_equal(pt_scale_impossible_speedup(2.10, 2, why, sizeof why), 0);
  assert_string_equal(why, "");
  assert_int_equal(pt_scale_impossible_speedup(1.60, 2, why, sizeof why), 0);
  assert_int_equal(pt_scale_impossible_speedup(4.0, 4, why, sizeof why), 0);
  assert_int_equal(pt_scale_impossible_speedup(NAN, 2, why, sizeof why), 0);
}

/* One worker and dp with 2, measured at the given rates. */
static void sweep(pt_scale_config c[2], double base_rate, double dp_rate) {
  memset(c, 0, 2 * sizeof c[0]);
  for (int i = 0; i < 2; i++) {
    c[i].runnable = c[i].ran = 1;
    c[i].threads = 1;
    c[i].batch = c[i].worker_batch = 100;
    c[i].bubble = c[i].target_s = NAN;
    c[i].ms_per_step = 20;
    c[i].forward_ms = 20;
  }
  c[0].strategy = PT_SCALE_NONE, c[0].workers = 1, c[0].baseline = -1, c[0].images_per_s = base_rate;
  c[1].strategy = PT_SCALE_DP, c[1].workers = 2, c[1].baseline = 0, c[1].images_per_s = dp_rate;
  c[1].worker_batch = 50;
}

static void test_judge_trusts_steady_figures(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[400];
  sweep(c, 1000, 1900);
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_false(c[1].rough);
  assert_has(c[1].verdict, "dp, 2 workers: 1.90x, 95% efficiency: pays");
  assert_has(rec, "use dp with 2 workers");
}

/* Two workers at 1.05x: the recommendation stays on one worker, quoting
 * one worker's rate, not the faster two's. */
static void test_judge_stay_quotes_one_worker(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[400];
  sweep(c, 1000, 1050);
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_has(rec, "stay on one worker (1 thread, global batch 100): 1000 images/s, and no parallel configuration "
                  "was 1.1x faster");
  /* A sweep of one worker alone compares nothing. */
  pt_scale_judge(c, 1, 2, 0, rec, sizeof rec);
  assert_has(rec, "stay on one worker (1 thread, global batch 100): 1000 images/s (the sweep had no parallel "
                  "configuration to compare)");
}

/* 5.12x from 2 workers: rough, not "pays", and no recommendation. */
static void test_judge_refuses_a_superlinear_speedup(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[400];
  sweep(c, 1000, 5120);
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_true(c[1].rough);
  assert_has(c[1].rough_why, "256% efficiency");
  assert_has(c[1].verdict, "dp, 2 workers: 5.12x, 256% efficiency: rough, not to be trusted");
  assert_null(strstr(c[1].verdict, "pays"));
  assert_has(rec, "none to trust: 1 of 2 measurements are rough (dp, 2 workers: 256% efficiency");
  assert_null(strstr(rec, "use dp"));
}

/* Rough runs of the baseline make every ratio to it rough, and one rough
 * configuration, even a slow one, leaves no recommendation. */
static void test_judge_rough_runs(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[400];
  sweep(c, 1000, 1600);
  c[0].rough = 1;
  strcpy(c[0].rough_why, "its 10 measured steps took 30 ms in all");
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_has(c[0].verdict, "the baseline: one worker, 1 thread (rough: its 10 measured steps took 30 ms");
  assert_true(c[1].rough);
  assert_has(c[1].verdict, "rough, not to be trusted: the one-worker figures it is compared with are rough");
  assert_has(rec, "none to trust: 2 of 2 measurements are rough (none, 1 worker: its 10 measured steps");

  sweep(c, 1000, 700);
  c[1].rough = 1;
  strcpy(c[1].rough_why, "the longer run took no longer");
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_has(c[1].verdict, "0.70x, 35% efficiency: rough, not to be trusted: the longer run took no longer");
  assert_has(rec, "none to trust: 1 of 2");
}

/* With a target accuracy the recommendation rests on the runs to it,
 * which are runs of their own: rough throughput does not void it. */
static void test_judge_target_recommendation_stands(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[400];
  sweep(c, 1000, 5120);
  c[0].target_s = 12.0;
  c[1].target_s = 9.0;
  pt_scale_judge(c, 2, 2, 0.8, rec, sizeof rec);
  assert_true(c[1].rough);
  assert_has(rec, "use dp with 2 workers x 1 thread, global batch 100: it reaches 0.8 test accuracy soonest");
}

/* Two workers reaching the target within 1.1x of one: a margin a single
 * run's noise can make, so the recommendation stays on one worker; at
 * 1.2x it goes to the two. */
static void test_judge_target_tie_keeps_fewer_workers(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[400];
  sweep(c, 1000, 1900);
  c[0].target_s = 10.5;
  c[1].target_s = 10.0;
  pt_scale_judge(c, 2, 2, 0.8, rec, sizeof rec);
  assert_has(rec, "stay on one worker (1 thread, global batch 100): it reaches 0.8 test accuracy in 10.5 s");
  assert_has(rec, "the soonest, dp with 2 workers x 1 thread, global batch 100, was not 1.1x sooner (10.0 s)");
  c[0].target_s = 12.0;
  pt_scale_judge(c, 2, 2, 0.8, rec, sizeof rec);
  assert_has(rec, "use dp with 2 workers x 1 thread, global batch 100: it reaches 0.8 test accuracy soonest, in 10.0 s");
  /* Equal workers (another optimizer, say): the sooner, however close. */
  c[1].workers = 1;
  c[1].target_s = 11.9;
  pt_scale_judge(c, 2, 2, 0.8, rec, sizeof rec);
  assert_has(rec, "it reaches 0.8 test accuracy soonest, in 11.9 s");
}

/* Only the baseline measured (the other tasks' results missing, or their
 * runs failed): nothing to compare with, so no conclusion, whether on
 * throughput or on time to accuracy. */
static void test_judge_no_parallel_measured(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[600];
  for (int t = 0; t < 2; t++) {
    sweep(c, 1000, 1900);
    if (t) c[0].target_s = 12.0;
    c[1].ran = 0;
    strcpy(c[1].why, "no result: scale/task-1.jsonl is missing (the task did not finish)");
    pt_scale_judge(c, 2, 2, t ? 0.8 : 0, rec, sizeof rec);
    assert_has(c[1].verdict, "dp, 2 workers: failed: no result: scale/task-1.jsonl is missing");
    assert_has(rec, "no recommendation: no parallel configuration was measured (1 without a measurement; dp, 2 "
                    "workers: failed: no result: scale/task-1.jsonl is missing (the task did not finish))");
    assert_has(rec, "; one worker (1 thread, global batch 100) ran at 1000 images/s, with nothing to compare it with");
    assert_null(strstr(rec, "stay on"));
    assert_null(strstr(rec, "1.1x faster"));
    assert_null(strstr(rec, "soonest"));
  }
}

/* The baseline failed (a sweep stopped by Ctrl-C once took its exit 85 for
 * a failure and went on): no "stay on" the one worker, which has no rate,
 * nor a speed-up that was never measured. */
static void test_judge_baseline_failed(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[600];
  sweep(c, 1000, 1900);
  c[0].ran = 0;
  c[0].images_per_s = 0;
  strcpy(c[0].why, "its run exited 1: out of memory");
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_has(c[0].verdict, "none, 1 worker: failed: its run exited 1: out of memory");
  assert_has(c[1].verdict, "no baseline to compare with");
  assert_has(rec, "no recommendation: the one-worker baseline (1 thread) failed: its run exited 1: out of memory; "
                  "dp with 2 workers x 1 thread");
  assert_has(rec, "ran at 1900 images/s, with nothing to compare it with");
  assert_null(strstr(rec, "stay on"));
  assert_null(strstr(rec, " 0 images/s"));
}

/* The loss the verdict names is the largest measured: a pipeline's bubble
 * of 72% over communication's 29%, also where threads share the cores. */
static void test_judge_names_the_largest_loss(void **st) {
  (void)st;
  pt_scale_config c[2];
  char rec[400];
  sweep(c, 1000, 700);
  c[1].strategy = PT_SCALE_PIPELINE, c[1].workers = 3;
  c[1].bubble = 0.72, c[1].comm_ms = 0.29 * 20;
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_has(c[1].verdict, "pipeline, 3 workers: 0.70x, slower: its 3 threads share 2 cores, and the stages sit "
                           "idle 72% of the time");
  /* A submitted task judged on its own machine's cores, not the judging one's. */
  c[1].cores = 4;
  pt_scale_judge(c, 2, 2, 0, rec, sizeof rec);
  assert_has(c[1].verdict, "slower: the stages sit idle 72% of the time");
  c[1].cores = 0;
  c[1].bubble = 0.25, c[1].comm_ms = 0.40 * 20;
  pt_scale_judge(c, 2, 4, 0, rec, sizeof rec);
  assert_has(c[1].verdict, "slower: 40% of each step is communication");
  c[1].comm_ms = 0.16 * 20, c[1].data_ms = 0.30 * 20;
  pt_scale_judge(c, 2, 4, 0, rec, sizeof rec);
  assert_has(c[1].verdict, "slower: 30% of each step waits for data");
}

/* A sweep of several settings (threads, optimizers): each verdict says
 * which it is about, the rows of one strategy being otherwise alike. */
static void test_judge_names_the_setting(void **st) {
  (void)st;
  pt_scale_config c[4];
  char rec[600];
  sweep(c, 1000, 900);
  sweep(c + 2, 1000, 1900);
  for (int i = 0; i < 4; i++) c[i].optimizer = i < 2 ? "sgd" : "adam";
  c[2].threads = c[3].threads = 2;
  c[3].baseline = 2;
  pt_scale_judge(c, 4, 8, 0, rec, sizeof rec);
  assert_has(c[0].verdict, "the baseline: one worker, 1 thread, global batch 100, sgd");
  assert_has(c[1].verdict, "dp, 2 workers (1 thread, global batch 100, sgd): 0.90x, slower");
  assert_has(c[3].verdict, "dp, 2 workers (2 threads, global batch 100, adam): 1.90x");
  c[2].ran = 0;
  pt_scale_judge(c, 4, 8, 0, rec, sizeof rec);
  assert_has(c[3].verdict, "dp, 2 workers (2 threads, global batch 100, adam): no baseline to compare with");
  /* One setting: the short names, as before. */
  pt_scale_judge(c, 2, 8, 0, rec, sizeof rec);
  assert_has(c[1].verdict, "dp, 2 workers: 0.90x");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steady_runs),
      cmocka_unit_test(test_too_little_time_measured_is_rough),
      cmocka_unit_test(test_steps_for),
      cmocka_unit_test(test_no_difference_is_rough),
      cmocka_unit_test(test_impossible_speedups),
      cmocka_unit_test(test_judge_trusts_steady_figures),
      cmocka_unit_test(test_judge_stay_quotes_one_worker),
      cmocka_unit_test(test_judge_refuses_a_superlinear_speedup),
      cmocka_unit_test(test_judge_rough_runs),
      cmocka_unit_test(test_judge_target_recommendation_stands),
      cmocka_unit_test(test_judge_target_tie_keeps_fewer_workers),
      cmocka_unit_test(test_judge_no_parallel_measured),
      cmocka_unit_test(test_judge_baseline_failed),
      cmocka_unit_test(test_judge_names_the_largest_loss),
      cmocka_unit_test(test_judge_names_the_setting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
