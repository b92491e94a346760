/* JSON-lines metrics log: every line must parse back with cJSON, keep its
 * keys and values exactly (doubles round-trip, big integers are not rounded,
 * non-finite numbers become null), and errors are reported by end without
 * writing a broken line.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/metrics.h"

#include "../tmpdir.h"


/* Reads the file's lines; each must be valid JSON. Returns the count. */
static int read_lines(const char *path, cJSON **out, int max, char raw[][512]) {
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, fp)) {
    assert_true(n < max);
    size_t len = strlen(line);
    assert_true(len > 0 && line[len - 1] == '\n');
    line[len - 1] = 0;
    if (raw) snprintf(raw[n], 512, "%s", line);
    out[n] = cJSON_Parse(line);
    if (!out[n]) fail_msg("line %d is not JSON: %s", n + 1, line);
    n++;
  }
  fclose(fp);
  return n;
}

static void free_lines(cJSON **lines, int n) {
  for (int i = 0; i < n; i++) cJSON_Delete(lines[i]);
}

static const cJSON *get(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) fail_msg("key %s missing", key);
  return v;
}

static void test_lines_parse_back(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/metrics.jsonl", tmpdir);
  pt_metrics *m;
  assert_int_equal(pt_metrics_open(path, 0, &m), PT_OK);
  double losses[] = {0.53, 0.1, 1.0 / 3.0, 1e-300, 123456789.123456789, -0.0, 5e-324, 1.7976931348623157e308};
  for (int i = 0; i < 8; i++) {
    pt_metrics_begin(m, "epoch");
    pt_metrics_int(m, "epoch", i + 1);
    pt_metrics_num(m, "train_loss", losses[i]);
    pt_metrics_bool(m, "best", i == 3);
    assert_int_equal(pt_metrics_end(m), PT_OK);
  }
  pt_metrics_begin(m, "weird \"event\"\n");
  pt_metrics_int(m, "big", ((int64_t)1 << 62) + 1);
  pt_metrics_int(m, "min", INT64_MIN);
  pt_metrics_num(m, "nan", NAN);
  pt_metrics_num(m, "inf", INFINITY);
  pt_metrics_num(m, "ninf", -INFINITY);
  pt_metrics_str(m, "text", "tab\tquote\"back\\slash\x01 \xc3\xa9");
  pt_metrics_str(m, "none", NULL);
  assert_int_equal(pt_metrics_end(m), PT_OK);
  assert_int_equal(pt_metrics_close(m), PT_OK);

  cJSON *lines[16];
  char raw[16][512];
  int n = read_lines(path, lines, 16, raw);
  assert_int_equal(n, 9);
  for (int i = 0; i < 8; i++) {
    assert_string_equal(get(lines[i], "event")->valuestring, "epoch");
    assert_int_equal(get(lines[i], "epoch")->valuedouble, i + 1);
    /* Exact round trip, not approximate. */
    if (get(lines[i], "train_loss")->valuedouble != losses[i])
      fail_msg("line %d: %.17g read back as %.17g (%s)", i, losses[i],
               get(lines[i], "train_loss")->valuedouble, raw[i]);
    assert_true(cJSON_IsBool(get(lines[i], "best")));
    assert_int_equal(cJSON_IsTrue(get(lines[i], "best")), i == 3);
    /* "event" comes first so a reader can dispatch without parsing further. */
    assert_string_equal(lines[i]->child->string, "event");
  }
  const cJSON *last = lines[8];
  assert_string_equal(get(last, "event")->valuestring, "weird \"event\"\n");
  /* cJSON parses into doubles, so check the integers' text. */
  assert_non_null(strstr(raw[8], "\"big\":4611686018427387905"));
  assert_non_null(strstr(raw[8], "\"min\":-9223372036854775808"));
  assert_true(cJSON_IsNull(get(last, "nan")));
  assert_true(cJSON_IsNull(get(last, "inf")));
  assert_true(cJSON_IsNull(get(last, "ninf")));
  assert_true(cJSON_IsNull(get(last, "none")));
  assert_string_equal(get(last, "text")->valuestring, "tab\tquote\"back\\slash\x01 \xc3\xa9");
  free_lines(lines, n);
}

/* Doubles from random bit patterns, across the whole exponent range. */
static void test_random_doubles_round_trip(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/doubles.jsonl", tmpdir);
  pt_metrics *m;
  assert_int_equal(pt_metrics_open(path, 0, &m), PT_OK);
  enum { N = 2000 };
  static double want[N];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N; i++) {
    do {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      memcpy(&want[i], &x, sizeof x);
    } while (!isfinite(want[i]));
    pt_metrics_begin(m, "d");
    pt_metrics_num(m, "v", want[i]);
    assert_int_equal(pt_metrics_end(m), PT_OK);
  }
  assert_int_equal(pt_metrics_close(m), PT_OK);
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  char line[256];
  for (int i = 0; i < N; i++) {
    assert_non_null(fgets(line, sizeof line, fp));
    cJSON *j = cJSON_Parse(line);
    assert_non_null(j);
    double got = get(j, "v")->valuedouble;
    if (memcmp(&got, &want[i], sizeof got) != 0 && !(got == 0 && want[i] == 0))
      fail_msg("%.17g came back as %.17g: %s", want[i], got, line);
    cJSON_Delete(j);
  }
  assert_null(fgets(line, sizeof line, fp));
  fclose(fp);
}

static void test_append_and_truncate(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/append.jsonl", tmpdir);
  for (int run = 0; run < 3; run++) {
    pt_metrics *m;
    assert_int_equal(pt_metrics_open(path, 1, &m), PT_OK);
    pt_metrics_begin(m, "run");
    pt_metrics_int(m, "run", run);
    assert_int_equal(pt_metrics_end(m), PT_OK);
    assert_int_equal(pt_metrics_close(m), PT_OK);
  }
  cJSON *lines[8];
  int n = read_lines(path, lines, 8, NULL);
  assert_int_equal(n, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(get(lines[i], "run")->valueint, i);
  free_lines(lines, n);

  pt_metrics *m;
  assert_int_equal(pt_metrics_open(path, 0, &m), PT_OK);
  assert_int_equal(pt_metrics_close(m), PT_OK);
  n = read_lines(path, lines, 8, NULL);
  assert_int_equal(n, 0);
}

/* An earlier run's last line cut short (a full disk, a kill): the next
 * run's first line starts on a line of its own, so it parses back. */
static void test_append_after_a_cut_line(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/cut.jsonl", tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"run\":0}\n{\"event\":\"epoch\",\"epo", f);
  fclose(f);
  pt_metrics *m;
  assert_int_equal(pt_metrics_open(path, 1, &m), PT_OK);
  pt_metrics_begin(m, "run");
  pt_metrics_int(m, "run", 1);
  assert_int_equal(pt_metrics_end(m), PT_OK);
  assert_int_equal(pt_metrics_close(m), PT_OK);
  char text[256] = "";
  f = fopen(path, "r");
  assert_non_null(f);
  const size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  assert_string_equal(text, "{\"run\":0}\n{\"event\":\"epoch\",\"epo\n{\"event\":\"run\",\"run\":1}\n");
}

/* A FIFO that no process reads: refused at once, not a wait for ever. */
static void test_fifo_without_reader(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/fifo", tmpdir);
  unlink(path);
  assert_int_equal(mkfifo(path, 0600), 0);
  pt_metrics *m = (pt_metrics *)1;
  assert_int_equal(pt_metrics_open(path, 1, &m), PT_ERR_IO);
  assert_null(m);
  assert_non_null(strstr(pt_error_message(), "a FIFO that no process reads"));
  unlink(path);
}

static void test_usage_errors(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/errors.jsonl", tmpdir);
  pt_metrics *m;
  assert_int_equal(pt_metrics_open(path, 0, &m), PT_OK);

  /* A repeated key: end reports it, names the key and writes nothing. */
  pt_metrics_begin(m, "step");
  pt_metrics_int(m, "loss", 1);
  pt_metrics_num(m, "loss", 2.0);
  pt_metrics_num(m, "event", 2.0);
  assert_int_equal(pt_metrics_end(m), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "'loss'"));
  assert_non_null(strstr(pt_error_message(), "'step'"));
  assert_non_null(strstr(pt_error_message(), path));

  /* The error does not leak into the next line. */
  pt_metrics_begin(m, "step");
  pt_metrics_int(m, "loss", 3);
  assert_int_equal(pt_metrics_end(m), PT_OK);

  /* Out-of-order calls. */
  pt_metrics_int(m, "orphan", 1);
  pt_metrics_begin(m, "x");
  assert_int_equal(pt_metrics_end(m), PT_ERR_STATE);
  assert_non_null(strstr(pt_error_message(), "'orphan'"));
  assert_int_equal(pt_metrics_end(m), PT_ERR_STATE);
  pt_metrics_begin(m, "a");
  pt_metrics_begin(m, "b");
  assert_int_equal(pt_metrics_end(m), PT_ERR_STATE);
  pt_metrics_begin(m, "c");
  pt_metrics_num(m, NULL, 1.0);
  assert_int_equal(pt_metrics_end(m), PT_ERR_ARG);
  pt_metrics_begin(m, NULL);
  assert_int_equal(pt_metrics_end(m), PT_ERR_ARG);
  assert_int_equal(pt_metrics_end(NULL), PT_ERR_ARG);
  pt_metrics_int(NULL, "k", 1); /* harmless */

  /* Closing with a line still open is reported, and still frees. */
  pt_metrics_begin(m, "unfinished");
  assert_int_equal(pt_metrics_close(m), PT_ERR_STATE);
  assert_int_equal(pt_metrics_close(NULL), PT_OK);

  cJSON *lines[8];
  int n = read_lines(path, lines, 8, NULL);
  assert_int_equal(n, 1);
  assert_int_equal(get(lines[0], "loss")->valueint, 3);
  free_lines(lines, n);
}

static void test_io_errors(void **state) {
  (void)state;
  pt_metrics *m = (pt_metrics *)1;
  const char *bad = "/nonexistent-dir-pt/metrics.jsonl";
  assert_int_equal(pt_metrics_open(bad, 0, &m), PT_ERR_IO);
  assert_null(m);
  assert_non_null(strstr(pt_error_message(), bad));

  if (access("/dev/full", W_OK) != 0) {
    print_message("no /dev/full; skipping the write-error test\n");
    skip();
  }
  assert_int_equal(pt_metrics_open("/dev/full", 1, &m), PT_OK);
  pt_metrics_begin(m, "epoch");
  pt_metrics_int(m, "epoch", 1);
  assert_int_equal(pt_metrics_end(m), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "/dev/full"));
  assert_non_null(strstr(pt_error_message(), "No space left on device"));
  pt_metrics_begin(m, "epoch");
  assert_int_equal(pt_metrics_end(m), PT_ERR_IO);
  assert_int_equal(pt_metrics_close(m), PT_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lines_parse_back),
      cmocka_unit_test(test_random_doubles_round_trip),
      cmocka_unit_test(test_append_and_truncate),
      cmocka_unit_test(test_append_after_a_cut_line),
      cmocka_unit_test(test_fifo_without_reader),
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_io_errors),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
