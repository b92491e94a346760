/* The progress bar as a terminal shows it: one line, redrawn in place,
 * never wider than the terminal (a wrapped line leaves rows behind at each
 * redraw); no escape sequences for TERM=dumb; the time left judged by this
 * run's pace where it resumed inside the epoch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/progress.h"

/* What the last redraw left on screen: the text after the last \r, with
 * the erase sequence taken out. */
static void last_line(FILE *f, char *out, size_t cap) {
  static char buf[1 << 16];
  rewind(f);
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  const char *start = buf;
  for (const char *p = buf; *p; p++)
    if (*p == '\r' && p[1] && p[1] != '\r' && strncmp(p + 1, "\033[K", 3)) start = p + 1;
    else if (*p == '\r' && !strncmp(p + 1, "\033[K", 3)) start = p + 4;
  const size_t len = strlen(start) < cap - 1 ? strlen(start) : cap - 1;
  memcpy(out, start, len);
  out[len] = 0;
}

static void draw(const char *columns, const char *term, char *line, size_t cap, FILE **kept) {
  setenv("COLUMNS", columns, 1);
  if (term) setenv("TERM", term, 1);
  else unsetenv("TERM");
  FILE *f = tmpfile();
  assert_non_null(f);
  pt_progress p;
  pt_progress_start(&p, f, 1, 10, 3, 10, 60000);
  pt_progress_set_extra(&p, "gpu 97% 3959 MiB");
  pt_progress_update(&p, 59999, 123456, 1.23456789e32, 123456.0);
  last_line(f, line, cap);
  if (kept) *kept = f;
  else fclose(f);
}

static void test_fits_the_terminal(void **state) {
  (void)state;
  char line[1024];
  draw("200", "xterm", line, sizeof line, NULL);
  assert_non_null(strstr(line, "[#######################.]")); /* 24 wide where it fits */
  assert_non_null(strstr(line, "gpu 97% 3959 MiB"));
  assert_non_null(strstr(line, "loss 1.235e+32")); /* not 33 digits */
  const char *widths[] = {"80", "60", "40", "20"};
  for (int i = 0; i < 4; i++) {
    draw(widths[i], "xterm", line, sizeof line, NULL);
    if ((int)strlen(line) > atoi(widths[i]) - 1) fail_msg("%s columns: a line of %zu: '%s'", widths[i], strlen(line), line);
  }
  draw("80", "xterm", line, sizeof line, NULL);
  assert_non_null(strstr(line, "epoch 3/10 ["));
}

static void test_dumb_terminal_gets_no_escapes(void **state) {
  (void)state;
  char line[1024];
  FILE *f;
  draw("100", "dumb", line, sizeof line, &f);
  static char buf[4096];
  rewind(f);
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  assert_null(strchr(buf, '\033'));
  pt_progress p = {.out = f, .tty = 1, .dumb = 1, .drawn = 10};
  pt_progress_finish(&p); /* spaces over what was drawn */
  rewind(f);
  const size_t m = fread(buf, 1, sizeof buf - 1, f);
  buf[m] = 0;
  assert_null(strchr(buf, '\033'));
  assert_non_null(strstr(buf, "\r          \r"));
  fclose(f);
}

/* Resumed at batch 500 of 600, 10 batches in 1 s: 90 left take 9 s, not
 * the 0.2 s that counting the earlier run's 500 as this one's would say. */
static void test_time_left_by_this_runs_pace(void **state) {
  (void)state;
  unsetenv("COLUMNS");
  setenv("TERM", "xterm", 1);
  FILE *f = tmpfile();
  pt_progress p;
  pt_progress_start(&p, f, 1, 10, 1, 1, 600);
  pt_progress_update(&p, 501, 501, 1.0, 100.0);
  p.t0 -= 1.0; /* a second later */
  p.last_draw = 0;
  pt_progress_update(&p, 510, 510, 1.0, 100.0);
  char line[1024];
  last_line(f, line, sizeof line);
  assert_non_null(strstr(line, "0:01<0:09"));
  fclose(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fits_the_terminal),
      cmocka_unit_test(test_dumb_terminal_gets_no_escapes),
      cmocka_unit_test(test_time_left_by_this_runs_pace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
