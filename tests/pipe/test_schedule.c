/* Pipeline schedules: every micro-batch's forward and backward once, in an
 * order the stages can run without deadlock, backwards in the same order
 * under both schedules (so their gradients are summed alike), 1F1B holding
 * at most S - s micro-batches, and, simulated with unit-time passes, a
 * bubble equal to (S-1)/(M+S-1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pipe/schedule.h"

#define MAXS 8
#define MAXM 16

static void test_each_pass_once_in_order(void **state) {
  (void)state;
  pt_pipe_op ops[2 * MAXM];
  for (int kind = 0; kind < 2; kind++)
    for (int S = 1; S <= MAXS; S++)
      for (int M = 1; M <= MAXM; M++)
        for (int s = 0; s < S; s++) {
          assert_int_equal(pt_pipe_schedule_ops((pt_pipe_schedule)kind, S, s, M, ops), 2 * M);
          int seen_f[MAXM] = {0}, next_b = 0, live = 0, live_max = 0;
          for (int i = 0; i < 2 * M; i++) {
            if (ops[i].forward) {
              assert_int_equal(seen_f[ops[i].mb]++, 0);
              if (++live > live_max) live_max = live;
            } else {
              assert_int_equal(ops[i].mb, next_b++); /* backwards in order 0..M-1 */
              assert_true(seen_f[ops[i].mb]);        /* after their forward */
              live--;
            }
          }
          assert_int_equal(next_b, M);
          assert_int_equal(live_max, pt_pipe_schedule_live((pt_pipe_schedule)kind, S, s, M));
          if (kind == PT_PIPE_GPIPE) assert_int_equal(live_max, M);
          else assert_true(live_max <= S - s);
        }
}

/* Runs all stages' op lists with unit-time passes: F(k) on stage s waits
 * for F(k) on s-1, B(k) for B(k) on s+1, and each stage runs its ops in
 * order. Returns the makespan, or -1 if the stages deadlock. */
static int simulate(pt_pipe_schedule kind, int S, int M) {
  pt_pipe_op ops[MAXS][2 * MAXM];
  int pos[MAXS] = {0}, fdone[MAXS][MAXM], bdone[MAXS][MAXM];
  for (int s = 0; s < S; s++) pt_pipe_schedule_ops(kind, S, s, M, ops[s]);
  memset(fdone, -1, sizeof fdone);
  memset(bdone, -1, sizeof bdone);
  int t = 0, left = S * 2 * M;
  while (left > 0) {
    int progressed = 0;
    int start[MAXS];
    for (int s = 0; s < S; s++) {
      start[s] = 0;
      if (pos[s] == 2 * M) continue;
      pt_pipe_op op = ops[s][pos[s]];
      int ready = op.forward ? (s == 0 || (fdone[s - 1][op.mb] >= 0 && fdone[s - 1][op.mb] <= t))
                             : (s == S - 1 || (bdone[s + 1][op.mb] >= 0 && bdone[s + 1][op.mb] <= t));
      start[s] = ready;
    }
    for (int s = 0; s < S; s++)
      if (start[s]) {
        pt_pipe_op op = ops[s][pos[s]++];
        if (op.forward) fdone[s][op.mb] = t + 1;
        else bdone[s][op.mb] = t + 1;
        left--;
        progressed = 1;
      }
    t++;
    if (!progressed && t > 4 * S * M + 8) return -1;
  }
  return t;
}

static void test_bubble_is_ideal(void **state) {
  (void)state;
  for (int kind = 0; kind < 2; kind++)
    for (int S = 1; S <= MAXS; S++)
      for (int M = 1; M <= MAXM; M++) {
        int span = simulate((pt_pipe_schedule)kind, S, M);
        assert_true(span > 0);
        /* Each stage is busy 2M of the span; the rest is the bubble. */
        double bubble = 1.0 - (double)(2 * M) / span;
        assert_float_equal(bubble, pt_pipe_ideal_bubble(S, M), 1e-12);
      }
}

static void test_parse(void **state) {
  (void)state;
  pt_pipe_schedule k;
  assert_int_equal(pt_pipe_schedule_parse("gpipe", &k), PT_OK);
  assert_int_equal(k, PT_PIPE_GPIPE);
  assert_int_equal(pt_pipe_schedule_parse("1f1b", &k), PT_OK);
  assert_int_equal(k, PT_PIPE_1F1B);
  assert_int_not_equal(pt_pipe_schedule_parse("zb", &k), PT_OK);
  assert_non_null(strstr(pt_error_message(), "gpipe or 1f1b"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_pass_once_in_order),
      cmocka_unit_test(test_bubble_is_ideal),
      cmocka_unit_test(test_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
