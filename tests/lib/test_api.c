/* The public API (include/ptrain.h) as a C program sees it: this test
 * links libptrain.so and includes nothing else of ptrain's. A synthetic
 * task (a bright square whose place is the class) stands in for a dataset,
 * so training must learn it, fast. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptrain.h"
#include "../tmpdir.h"

#define N 400
#define SIDE 12
#define CLASSES 4

static const char *spec_text =
    "name squares\n"
    "input 1 12 12\n"
    "flatten\n"
    "linear fc1 out=32\n"
    "relu\n"
    "linear fc2 out=4\n"
    "loss cross-entropy\n"
    "defaults dataset=fashion-mnist optimizer=adam lr=0.01 batch=20 test-batch=100\n";

/* Image i: noise, and a bright 4x4 square in the quadrant of its class. */
static void make_data(uint8_t *images, uint8_t *labels, int n, unsigned seed) {
  for (int i = 0; i < n; i++) {
    const int k = (int)((i * 7u + seed) % CLASSES);
    labels[i] = (uint8_t)k;
    uint8_t *im = images + (size_t)i * SIDE * SIDE;
    for (int p = 0; p < SIDE * SIDE; p++) im[p] = (uint8_t)((p * 31u + (unsigned)i * 17u + seed) % 60u);
    const int y0 = (k / 2) * 6 + 1, x0 = (k % 2) * 6 + 1;
    for (int y = y0; y < y0 + 4; y++)
      for (int x = x0; x < x0 + 4; x++) im[y * SIDE + x] = 250;
  }
}

static pt_data *train_data, *test_data;
static uint8_t test_images[N * SIDE * SIDE], test_labels[N];

static int setup(void **state) {
  static uint8_t im[N * SIDE * SIDE], lb[N];
  make_data(im, lb, N, 1);
  make_data(test_images, test_labels, N, 2);
  if (pt_data_from_arrays(im, lb, N, 1, SIDE, SIDE, CLASSES, &train_data) ||
      pt_data_from_arrays(test_images, test_labels, N, 1, SIDE, SIDE, CLASSES, &test_data))
    return -1;
  return tmpdir_setup(state);
}

static int teardown(void **state) {
  pt_data_free(train_data);
  pt_data_free(test_data);
  return tmpdir_teardown(state);
}

static void config(pt_config *c) {
  pt_config_defaults(c);
  c->epochs = 3;
  c->threads = 1;
}

static void test_train_learns_and_predict_agrees_with_evaluate(void **state) {
  (void)state;
  pt_net *net;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_string_equal(pt_net_name(net), "squares");
  assert_false(pt_net_has_weights(net));
  assert_int_equal(pt_net_parameters(net), 144 * 32 + 32 + 32 * 4 + 4);
  pt_config c;
  config(&c);
  pt_result r;
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_true(pt_net_has_weights(net));
  assert_int_equal(r.epochs_done, 3);
  assert_int_equal(r.steps, 3 * N / 20);
  assert_int_equal(r.stopped, 0);
  assert_true(r.test_acc > 0.95);
  pt_eval ev;
  assert_int_equal(pt_evaluate(net, test_data, NULL, 1, &ev), PT_OK);
  assert_int_equal(ev.count, N);
  assert_float_equal(ev.accuracy, r.test_acc, 1e-9);
  static float x[N * SIDE * SIDE], p[N * CLASSES];
  for (int i = 0; i < N * SIDE * SIDE; i++) x[i] = test_images[i] / 255.0f;
  assert_int_equal(pt_predict(net, x, N, p), PT_OK);
  int correct = 0;
  for (int i = 0; i < N; i++) {
    double sum = 0;
    int best = 0;
    for (int k = 0; k < CLASSES; k++) {
      sum += p[i * CLASSES + k];
      if (p[i * CLASSES + k] > p[i * CLASSES + best]) best = k;
    }
    assert_float_equal(sum, 1.0, 1e-5);
    correct += best == test_labels[i];
  }
  assert_int_equal(correct, ev.correct);
  pt_net_free(net);
}

/* Same seed, same settings: the same bits. */
static void test_deterministic(void **state) {
  (void)state;
  float p[2][8 * CLASSES], x[8 * SIDE * SIDE];
  for (int i = 0; i < 8 * SIDE * SIDE; i++) x[i] = test_images[i] / 255.0f;
  for (int t = 0; t < 2; t++) {
    pt_net *net;
    pt_config c;
    config(&c);
    c.epochs = 1;
    c.seed = 7;
    assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
    assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_OK);
    assert_int_equal(pt_predict(net, x, 8, p[t]), PT_OK);
    pt_net_free(net);
  }
  assert_memory_equal(p[0], p[1], sizeof p[0]);
}

/* A batch larger than the data holds the data: the same step as a batch
 * of exactly the data, in the memory that takes. At the flag's upper
 * bound (2^20) it was the memory of a million images, a few gigabytes
 * here, and an out-of-memory kill on the docs' models. */
static void test_batch_larger_than_the_data(void **state) {
  (void)state;
  float p[2][8 * CLASSES], x[8 * SIDE * SIDE];
  for (int i = 0; i < 8 * SIDE * SIDE; i++) x[i] = test_images[i] / 255.0f;
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  for (int t = 0; t < 2; t++) {
    pt_net *net;
    pt_config c;
    config(&c);
    c.max_steps = 1;
    c.batch_size = t ? 1 << 20 : N;
    assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
    assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_OK);
    assert_int_equal(pt_predict(net, x, 8, p[t]), PT_OK);
    pt_net_free(net);
  }
  getrusage(RUSAGE_SELF, &after);
  assert_memory_equal(p[0], p[1], sizeof p[0]);
  const long grew_mib = (after.ru_maxrss - before.ru_maxrss) / 1024; /* KiB on Linux */
  if (grew_mib > 200) fail_msg("a batch of 2^20 over %d samples took %ld MiB more", N, grew_mib);
}

typedef struct {
  int steps, epochs, stop_at_step, stop_at_epoch;
  int64_t last_step;
  pt_net *other; /* trained from inside a callback: refused */
} counts;

static int on_step(const pt_step *s, void *user) {
  counts *k = user;
  k->steps++;
  assert_int_equal(s->step, k->last_step + 1);
  k->last_step = s->step;
  assert_int_equal(s->batches, N / 20);
  assert_true(isfinite(s->loss));
  if (k->other && s->step == 1) {
    pt_config c;
    pt_config_defaults(&c);
    assert_int_equal(pt_train(k->other, train_data, test_data, &c, NULL), PT_ERR_STATE);
    assert_non_null(strstr(pt_error_message(), "one trains at a time"));
  }
  return k->stop_at_step && s->step >= k->stop_at_step;
}

static int on_epoch(const pt_epoch *e, void *user) {
  counts *k = user;
  k->epochs++;
  assert_int_equal(e->epoch, k->epochs);
  assert_true(e->test_acc >= 0 && e->test_acc <= 1);
  return k->stop_at_epoch && e->epoch >= k->stop_at_epoch;
}

static void test_callbacks_see_every_step_and_stop_the_run(void **state) {
  (void)state;
  pt_net *net;
  pt_config c;
  pt_result r;
  counts k = {0};
  config(&c);
  c.on_step = on_step;
  c.on_epoch = on_epoch;
  c.user = &k;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_int_equal(k.steps, 3 * N / 20);
  assert_int_equal(k.epochs, 3);
  /* A step callback stops the run after its step; a second run cannot
   * start while this one trains. */
  pt_net *other;
  assert_int_equal(pt_net_spec(spec_text, &other), PT_OK);
  k = (counts){.stop_at_step = 5, .other = other};
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_int_equal(r.steps, 5);
  assert_int_equal(r.stopped, 1);
  pt_net_free(other);
  /* An epoch callback after its epoch. */
  k = (counts){.stop_at_epoch = 2};
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_int_equal(r.epochs_done, 2);
  assert_int_equal(r.steps, 2 * N / 20);
  assert_int_equal(r.stopped, 1);
  assert_int_equal(k.epochs, 2);
  pt_net_free(net);
}

/* What a library user's signal handler asks: the run stops after the
 * step, writes a checkpoint, says it was signalled, and resumes. */
static int request_stop_at_3(const pt_step *s, void *user) {
  (void)user;
  if (s->step == 3) pt_request_stop(SIGUSR1);
  return 0;
}

/* Trains with c (its callbacks asking to stop) into tmpdir/sub: stopped
 * by the request after step `at`, with that step's checkpoint; resumed
 * without the callbacks, to the end (all 3 epochs). */
static void stop_and_resume(pt_config *c, const char *sub, int at) {
  char dir[128], state_file[200];
  snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
  c->checkpoint_dir = dir;
  pt_net *net;
  pt_result r;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(pt_train(net, train_data, test_data, c, &r), PT_OK);
  assert_int_equal(r.stopped, PT_RUN_STOPPED_SIGNAL);
  assert_int_equal(r.steps, at);
  snprintf(state_file, sizeof state_file, "%s/step-%012d/state.safetensors", dir, at);
  struct stat sb;
  assert_int_equal(stat(state_file, &sb), 0);
  /* The request was this run's: the resumed run goes to the end. */
  c->on_step = NULL;
  c->on_epoch = NULL;
  c->resume = 1;
  assert_int_equal(pt_train(net, train_data, test_data, c, &r), PT_OK);
  assert_int_equal(r.stopped, PT_RUN_COMPLETE);
  assert_int_equal(r.steps, 3 * N / 20);
  /* The checkpoint's epochs count, as its steps do; a resume with nothing
   * left evaluated nothing, and says so rather than an accuracy of 0. */
  assert_int_equal(r.epochs_done, 3);
  if (at == 3 * N / 20) {
    assert_true(isnan(r.train_loss) && isnan(r.test_loss) && isnan(r.test_acc));
  } else {
    assert_true(isfinite(r.train_loss) && isfinite(r.test_acc) && r.test_acc > 0);
  }
  pt_net_free(net);
}

static void test_request_stop(void **state) {
  (void)state;
  pt_config c;
  config(&c);
  c.on_step = request_stop_at_3;
  /* Asked from step 3's callback, after that step looked for a request. */
  stop_and_resume(&c, "stop", 4);
}

/* A request that comes after the run's last step, during its last
 * evaluation (the epoch callback runs after it): the run ends checkpointed
 * and says it was signalled, as the request's message promised, rather
 * than completing with nothing saved; resumed, nothing is left to do. */
static int request_stop_after_last(const pt_epoch *e, void *user) {
  (void)user;
  if (e->epoch == 3) pt_request_stop(SIGTERM);
  return 0;
}

static void test_request_stop_after_the_last_step(void **state) {
  (void)state;
  pt_config c;
  config(&c);
  c.on_epoch = request_stop_after_last;
  stop_and_resume(&c, "stop-last", 3 * N / 20);
}

/* A stop request during an epoch's evaluation (a batch system's SIGTERM,
 * which a long evaluation once held up until SIGKILL) cuts it short: no
 * result from part of the test split, a checkpoint of the epoch's end, and
 * the resumed run evaluates that epoch again and trains on to the bits of
 * a run never stopped. */
static int epochs_seen[4];
static int count_epochs(const pt_epoch *e, void *user) {
  (void)user;
  if (e->epoch >= 1 && e->epoch <= 3) epochs_seen[e->epoch]++;
  return 0;
}

static void test_stop_during_evaluation(void **state) {
  (void)state;
  char dir[128], straight[128];
  snprintf(dir, sizeof dir, "%s/eval-cut", tmpdir);
  snprintf(straight, sizeof straight, "%s/eval-straight", tmpdir);
  pt_config c;
  config(&c);
  c.test_batch_size = 100; /* 4 batches: the stop comes after the 2nd */
  c.checkpoint_dir = dir;
  c.on_epoch = count_epochs;
  memset(epochs_seen, 0, sizeof epochs_seen);
  pt_net *net, *ref;
  pt_result r;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(setenv("PTRAIN_TEST_STOP_IN_EVAL", "2", 1), 0);
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_int_equal(unsetenv("PTRAIN_TEST_STOP_IN_EVAL"), 0);
  assert_int_equal(r.stopped, PT_RUN_STOPPED_SIGNAL);
  assert_int_equal(r.steps, N / 20);
  assert_true(isnan(r.test_acc) && isnan(r.test_loss));
  assert_int_equal(epochs_seen[1], 0); /* nothing reported from part of the split */
  c.resume = 1;
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_int_equal(r.stopped, PT_RUN_COMPLETE);
  assert_int_equal(r.steps, 3 * N / 20);
  assert_int_equal(epochs_seen[1], 1); /* evaluated again on resuming */
  assert_int_equal(epochs_seen[2], 1);
  assert_int_equal(epochs_seen[3], 1);
  /* The same bits as a run never stopped. */
  config(&c);
  c.test_batch_size = 100;
  c.checkpoint_dir = straight;
  pt_result s;
  assert_int_equal(pt_net_spec(spec_text, &ref), PT_OK);
  assert_int_equal(pt_train(ref, train_data, test_data, &c, &s), PT_OK);
  assert_true(s.test_acc == r.test_acc && s.test_loss == r.test_loss);
  float x[SIDE * SIDE], p1[CLASSES], p2[CLASSES];
  for (int i = 0; i < SIDE * SIDE; i++) x[i] = (float)(i % 7) / 7.0f;
  assert_int_equal(pt_predict(net, x, 1, p1), PT_OK);
  assert_int_equal(pt_predict(ref, x, 1, p2), PT_OK);
  assert_memory_equal(p1, p2, sizeof p1);
  pt_net_free(net);
  pt_net_free(ref);
}

/* A second run starts from the weights the first ended with. */
static pt_epoch last_epoch_seen;
static int keep_epoch(const pt_epoch *e, void *user) {
  (*(int *)user)++;
  last_epoch_seen = *e;
  return 0;
}

/* A target met inside an epoch ends the run there, and the epoch callback
 * hears of it, with the evaluation that met it, as the epoch line does. */
static void test_target_met_inside_an_epoch_reaches_the_epoch_callback(void **state) {
  (void)state;
  pt_config c;
  config(&c);
  c.target_accuracy = 0.01;
  c.eval_every = 3; /* of 20 steps an epoch */
  int calls = 0;
  c.on_epoch = keep_epoch;
  c.user = &calls;
  pt_net *net;
  pt_result r;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_int_equal(r.target_step, 3);
  assert_int_equal(r.steps, 3);
  assert_int_equal(calls, 1);
  assert_int_equal(last_epoch_seen.epoch, 1);
  assert_int_equal(last_epoch_seen.step, 3);
  assert_true(last_epoch_seen.test_acc == r.test_acc);
  assert_true(last_epoch_seen.test_loss == r.test_loss);
  pt_net_free(net);
}

static void test_training_continues_from_the_nets_weights(void **state) {
  (void)state;
  pt_net *net;
  pt_config c;
  pt_result r1, r2;
  config(&c);
  c.epochs = 1;
  c.lr = 0.001f;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r1), PT_OK);
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r2), PT_OK);
  assert_true(r2.train_loss < r1.train_loss);
  pt_net_free(net);
}

static void test_save_and_load(void **state) {
  (void)state;
  pt_net *net, *back;
  pt_config c;
  config(&c);
  c.epochs = 1;
  char path[128];
  snprintf(path, sizeof path, "%s/squares.safetensors", tmpdir);
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(pt_net_save(net, path), PT_ERR_STATE); /* no weights yet */
  assert_non_null(strstr(pt_error_message(), "no weights"));
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_OK);
  assert_int_equal(pt_net_save(net, path), PT_OK);
  assert_int_equal(pt_net_load(path, NULL, &back), PT_OK); /* the layers come from the file */
  assert_string_equal(pt_net_name(back), "squares");
  assert_string_equal(pt_net_spec_text(back), spec_text);
  float x[4 * SIDE * SIDE], p1[4 * CLASSES], p2[4 * CLASSES];
  for (int i = 0; i < 4 * SIDE * SIDE; i++) x[i] = test_images[i] / 255.0f;
  assert_int_equal(pt_predict(net, x, 4, p1), PT_OK);
  assert_int_equal(pt_predict(back, x, 4, p2), PT_OK);
  assert_memory_equal(p1, p2, sizeof p1);
  /* The weights under another model's layers do not load. */
  pt_net *wrong;
  assert_int_not_equal(pt_net_load(path, "fmnist-mlp", &wrong), PT_OK);
  assert_non_null(strstr(pt_error_message(), "lin1.weight"));
  pt_net_free(back);
  /* Trained on the caller's arrays, the weights record no data set of
   * ours: loaded under a spec whose default is MNIST, MNIST it is. */
  char digits[160];
  snprintf(digits, sizeof digits, "%s/digits.txt", tmpdir);
  FILE *f = fopen(digits, "w");
  assert_non_null(f);
  fputs("name squares\ninput 1 12 12\nflatten\nlinear fc1 out=32\nrelu\nlinear fc2 out=4\nloss cross-entropy\n"
        "defaults dataset=mnist\n", f);
  fclose(f);
  assert_string_equal(pt_net_dataset(net), "fashion-mnist"); /* its spec's default still */
  assert_int_equal(pt_net_load(path, digits, &back), PT_OK);
  assert_string_equal(pt_net_dataset(back), "mnist");
  pt_net_free(back);
  pt_net_free(net);
}

static void test_parallel_dp(void **state) {
  (void)state;
  pt_net *net;
  pt_config c;
  pt_result r;
  config(&c);
  c.parallel = "dp";
  c.workers = 2;
  c.batch_size = 10; /* per worker: the same global batch */
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_OK);
  assert_int_equal(r.steps, 3 * N / 20);
  assert_true(r.test_acc > 0.95);
  pt_eval ev;
  assert_int_equal(pt_evaluate(net, test_data, "cpu", 0, &ev), PT_OK);
  assert_float_equal(ev.accuracy, r.test_acc, 1e-9);
  pt_net_free(net);
}

/* Nothing on stdout or stderr unless cfg.log asks. */
static void test_silent(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/out.txt", tmpdir);
  fflush(stdout);
  fflush(stderr);
  const int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600), o1 = dup(1), o2 = dup(2);
  assert_true(fd >= 0);
  dup2(fd, 1);
  dup2(fd, 2);
  pt_net *net;
  pt_config c;
  config(&c);
  c.epochs = 1;
  pt_status st = pt_net_spec(spec_text, &net);
  if (st == PT_OK) st = pt_train(net, train_data, test_data, &c, NULL);
  fflush(stdout);
  fflush(stderr);
  dup2(o1, 1);
  dup2(o2, 2);
  close(fd);
  assert_int_equal(st, PT_OK);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_size, 0);
  pt_net_free(net);
}

static void test_errors_name_the_thing(void **state) {
  (void)state;
  pt_net *net = (pt_net *)1;
  assert_int_equal(pt_net_preset("no-such-model", &net), PT_ERR_ARG);
  assert_null(net);
  assert_non_null(strstr(pt_error_message(), "fmnist-mlp")); /* lists the presets */
  assert_int_equal(pt_net_spec("name x\ninput 1 4 4\nwobble\n", &net), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "wobble"));
  assert_int_not_equal(pt_net_load("/nonexistent/model.safetensors", "fmnist-mlp", &net), PT_OK);
  assert_non_null(strstr(pt_error_message(), "/nonexistent/model.safetensors"));
  /* *out is NULL after any failure, a NULL checkpoint's too */
  net = (pt_net *)1;
  assert_int_equal(pt_net_load(NULL, NULL, &net), PT_ERR_ARG);
  assert_null(net);
  /* a model that names a file (a dot or a slash) that is missing: said as a file, not an unknown preset */
  assert_int_equal(pt_net_load("/nonexistent/model.safetensors", "my-model.txt", &net), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "cannot open model file my-model.txt"));
  pt_data *d = (pt_data *)1;
  uint8_t im[16] = {0}, lb[1] = {9};
  assert_int_equal(pt_data_from_arrays(im, lb, 1, 1, 4, 4, 4, &d), PT_ERR_ARG);
  assert_null(d);
  assert_non_null(strstr(pt_error_message(), "label 9"));
  assert_int_equal(pt_data_load("imagenet", NULL, PT_TRAIN, &d), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "fashion-mnist"));
  /* A NULL name is said as such. */
  assert_int_equal(pt_data_load(NULL, NULL, PT_TRAIN, &d), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "pt_data_load: name is NULL"));
  net = (pt_net *)1;
  assert_int_equal(pt_net_preset(NULL, &net), PT_ERR_ARG);
  assert_null(net);
  assert_non_null(strstr(pt_error_message(), "pt_net_preset: name is NULL"));
  assert_int_equal(pt_data_load("mnist", "/nonexistent", PT_TRAIN, &d), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "/nonexistent"));
  /* An empty path is a slip, not the root or the current directory. */
  d = (pt_data *)1;
  assert_int_equal(pt_data_load("fashion-mnist", "", PT_TEST, &d), PT_ERR_ARG);
  assert_null(d);
  assert_non_null(strstr(pt_error_message(), "pt_data_load: empty dir"));
  net = (pt_net *)1;
  assert_int_equal(pt_net_load("", NULL, &net), PT_ERR_ARG);
  assert_null(net);
  assert_non_null(strstr(pt_error_message(), "pt_net_load: empty checkpoint"));
  assert_int_equal(pt_net_load("/nonexistent/model.safetensors", "", &net), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "pt_net_load: empty model"));
  net = (pt_net *)1;
  assert_int_equal(pt_net_spec_file("", &net), PT_ERR_ARG);
  assert_null(net);
  assert_non_null(strstr(pt_error_message(), "pt_net_spec_file: empty path"));
  {
    pt_net *mlp;
    static float px[28 * 28];
    char note[64] = "x";
    assert_int_equal(pt_net_preset("fmnist-mlp", &mlp), PT_OK);
    assert_int_equal(pt_image_load("", mlp, px, note, sizeof note), PT_ERR_ARG);
    assert_non_null(strstr(pt_error_message(), "pt_image_load: empty path"));
    assert_string_equal(note, "");
    assert_int_equal(pt_net_save(mlp, ""), PT_ERR_ARG);
    assert_non_null(strstr(pt_error_message(), "pt_net_save: empty path"));
    pt_net_free(mlp);
  }
  /* Settings that do not fit together, and a run trained twice. */
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  float x[SIDE * SIDE] = {0}, p[CLASSES];
  assert_int_equal(pt_predict(net, x, 1, p), PT_ERR_STATE);
  assert_int_equal(pt_predict(net, x, -1, p), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "pt_predict: -1 images: expected a count of 0 or more"));
  /* Pixels out of [0, 1]: refused, not NaN probabilities or a confident guess. */
  x[5] = NAN;
  assert_int_equal(pt_predict(net, x, 1, p), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "pt_predict: image 0, value 5 is nan: expected pixels scaled to [0, 1]"));
  x[5] = 255.0f;
  assert_int_equal(pt_predict(net, x, 1, p), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "value 5 is 255"));
  x[5] = 0.0f;
  pt_config c;
  config(&c);
  c.parallel = "ddp"; /* not started by mpirun */
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "mpirun"));
  config(&c);
  c.optimizer = "rmsprop";
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "rmsprop"));
  /* Starting weights that cannot be read say they were the starting weights. */
  config(&c);
  c.init_from = "";
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "--init-from: empty path"));
  c.init_from = "/nonexistent/w.safetensors";
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "--init-from: /nonexistent/w.safetensors"));
  config(&c);
  c.epochs = 1;
  pt_run *run;
  assert_int_equal(pt_run_create(net, train_data, test_data, &c, &run), PT_OK);
  assert_int_equal(pt_run_train(run), PT_OK);
  assert_int_equal(pt_run_result(run)->epochs_done, 1);
  assert_int_equal(pt_run_train(run), PT_ERR_STATE);
  pt_run_free(run);
  /* Images of another shape than the model's input. */
  pt_net *mlp;
  assert_int_equal(pt_net_preset("fmnist-mlp", &mlp), PT_OK);
  assert_int_equal(pt_train(mlp, train_data, test_data, &c, NULL), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "1x28x28"));
  assert_string_equal(pt_status_name(PT_ERR_FORMAT), "malformed input");
  pt_net_free(mlp);
  pt_net_free(net);
}

static int ends_with(const char *s, const char *end) {
  const size_t n = strlen(s), k = strlen(end);
  return n >= k && !strcmp(s + n - k, end);
}

/* A long path is legal (PATH_MAX is 4096), and a message that names one
 * still ends with why; one too long for any buffer loses its middle. */
static void test_long_messages_keep_the_reason(void **state) {
  (void)state;
  static char path[4096], name[100 * 1024];
  /* 1023 characters of directories that do not exist, none past NAME_MAX */
  memset(path, 'd', 1023);
  for (size_t i = 0; i < 1023; i += 200) path[i] = '/';
  snprintf(path + 1023, sizeof path - 1023, "/nope.safetensors");
  pt_net *net;
  assert_int_equal(pt_net_load(path, "fmnist-mlp", &net), PT_ERR_IO);
  if (!ends_with(pt_error_message(), strerror(ENOENT))) fail_msg("%.300s", pt_error_message());
  assert_non_null(strstr(pt_error_message(), path)); /* the whole path, where it fits */
  /* PATH_MAX's worth, with its terminating 0 */
  memset(path, 'p', sizeof path - 1);
  for (size_t i = 0; i < sizeof path - 1; i += 200) path[i] = '/';
  path[sizeof path - 1] = 0;
  assert_int_equal(pt_net_load(path, "fmnist-mlp", &net), PT_ERR_IO);
  if (!ends_with(pt_error_message(), strerror(ENOENT))) fail_msg("%.300s", pt_error_message());
  memset(name, 'x', sizeof name - 1);
  name[sizeof name - 1] = 0;
  assert_int_equal(pt_net_preset(name, &net), PT_ERR_ARG);
  const char *m = pt_error_message();
  assert_true(strncmp(m, "unknown model 'xxx", 18) == 0);
  assert_non_null(strstr(m, " [...] "));
  if (!ends_with(m, "or --model-file FILE)")) fail_msg("%s", m + strlen(m) - 200);
}

/* A pt_train from inside a run's callback, refused, its result into user;
 * stops the run where that went otherwise. */
static int train_inside(const pt_step *s, void *user) {
  (void)s;
  pt_config c;
  config(&c);
  pt_net *other;
  if (pt_net_spec(spec_text, &other) != PT_OK) return 1;
  const pt_status st = pt_train(other, train_data, test_data, &c, user);
  pt_net_free(other);
  return st != PT_ERR_STATE;
}

static void assert_no_result(const pt_result *r) {
  assert_true(isnan(r->train_loss) && isnan(r->test_loss) && isnan(r->test_acc) && isnan(r->target_seconds));
  assert_int_equal(r->epochs_done, 0);
  assert_int_equal(r->steps, 0);
  assert_int_equal(r->target_step, -1);
}

/* A result is defined whenever the caller asks for one: NaN for what no
 * run computed, not zeros, and never what the memory held. */
static void test_result_of_a_run_that_did_not_train(void **state) {
  (void)state;
  pt_net *net;
  pt_config c;
  config(&c);
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  pt_run *run;
  assert_int_equal(pt_run_create(net, train_data, test_data, &c, &run), PT_OK);
  assert_no_result(pt_run_result(run)); /* before pt_run_train */
  pt_run_free(run);
  pt_result r;
  /* refused with PT_ERR_STATE while another run trains */
  memset(&r, 0x55, sizeof r);
  c.max_steps = 1;
  c.on_step = train_inside;
  c.user = &r;
  pt_result outer;
  assert_int_equal(pt_train(net, train_data, test_data, &c, &outer), PT_OK);
  assert_int_equal(outer.stopped, PT_RUN_COMPLETE); /* the refusal was PT_ERR_STATE */
  assert_no_result(&r);
  /* refused by pt_run_create */
  memset(&r, 0x55, sizeof r);
  config(&c);
  c.parallel = "ddp"; /* not started by mpirun */
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_ERR_ARG);
  assert_no_result(&r);
  memset(&r, 0x55, sizeof r);
  config(&c);
  c.lr = INFINITY;
  assert_int_equal(pt_train(net, train_data, test_data, &c, &r), PT_ERR_ARG);
  assert_no_result(&r);
  pt_net_free(net);
}

/* A program's pt_config can hold what no flag allows: each out-of-range
 * number is refused before training, naming it, and the net keeps no
 * weights from a run that never started. */
static void test_config_numbers_out_of_range(void **state) {
  (void)state;
  pt_net *net;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  static const struct {
    const char *field, *says;
  } cases[] = {{"lr", "--lr inf: expected a number in [0, 1000]"},
               {"weight_decay", "--weight-decay -1"},
               {"gamma", "--gamma inf"},
               {"target_accuracy", "--target-accuracy 2"},
               {"keep_checkpoints", "--keep-checkpoints 0"},
               {"log_interval", "--log-interval 0"},
               {"checkpoint_every", "--checkpoint-every -1"},
               {"checkpoint_interval", "--checkpoint-interval -1"},
               {"eval_every", "--eval-every -1"},
               {"workers", "--workers -1"},
               /* upper bounds, the flags' own (a million threads, a
                * billion epochs: a machine's resources, not a run) */
               {"epochs", "--epochs 100001: expected a number in [1, 100000]"},
               {"threads", "--threads 1025: expected 0 (the cores) or a number in [1, 1024]"},
               {"batch_size", "--batch-size 2000000: expected 1 to 1048576 (or -1 for the preset's)"},
               {"batch_size_negative", "--batch-size -5"},
               {"test_batch_size", "--test-batch-size 2000000"},
               {"keep_checkpoints_max", "--keep-checkpoints 1000001"},
               {"log_interval_max", "--log-interval 2147483647"},
               {"checkpoint_interval_max", "--checkpoint-interval 1000000000000: expected 0 (none) or a number in [1, 1000000000]"},
               {"bucket_mb", "--bucket-mb nan"},
               {"timeout_s", "--timeout inf"},
               {"accum_steps", "--accum-steps 2000000"},
               {"micro_batches", "--micro-batches 20000"},
               {"cuda_graphs", "cuda_graphs 7: expected -1, 0 or 1"},
               {"cuda_graphs_negative", "cuda_graphs -5: expected -1, 0 or 1"},
               {"cuda_graphs_min", "cuda_graphs -2147483648: expected -1, 0 or 1"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pt_config c;
    config(&c);
    const char *f = cases[i].field;
    if (!strcmp(f, "lr")) c.lr = INFINITY;
    else if (!strcmp(f, "weight_decay")) c.weight_decay = -1;
    else if (!strcmp(f, "gamma")) c.gamma = INFINITY;
    else if (!strcmp(f, "target_accuracy")) c.target_accuracy = 2;
    else if (!strcmp(f, "keep_checkpoints")) c.keep_checkpoints = 0;
    else if (!strcmp(f, "log_interval")) c.log_interval = 0;
    else if (!strcmp(f, "checkpoint_every")) c.checkpoint_every = -1;
    else if (!strcmp(f, "checkpoint_interval")) c.checkpoint_interval = -1;
    else if (!strcmp(f, "eval_every")) c.eval_every = -1;
    else if (!strcmp(f, "epochs")) c.epochs = 100001;
    else if (!strcmp(f, "threads")) c.threads = 1025;
    else if (!strcmp(f, "batch_size")) c.batch_size = 2000000;
    else if (!strcmp(f, "batch_size_negative")) c.batch_size = -5;
    else if (!strcmp(f, "test_batch_size")) c.test_batch_size = 2000000;
    else if (!strcmp(f, "keep_checkpoints_max")) c.keep_checkpoints = 1000001;
    else if (!strcmp(f, "log_interval_max")) c.log_interval = 2147483647;
    else if (!strcmp(f, "checkpoint_interval_max")) c.checkpoint_interval = 1e12;
    else if (!strcmp(f, "bucket_mb")) c.bucket_mb = NAN;
    else if (!strcmp(f, "timeout_s")) c.timeout_s = INFINITY;
    else if (!strcmp(f, "accum_steps")) c.accum_steps = 2000000;
    else if (!strcmp(f, "micro_batches")) c.micro_batches = 20000;
    else if (!strcmp(f, "cuda_graphs")) c.cuda_graphs = 7;
    else if (!strcmp(f, "cuda_graphs_negative")) c.cuda_graphs = -5;
    else if (!strcmp(f, "cuda_graphs_min")) c.cuda_graphs = INT_MIN;
    else c.workers = -1, c.parallel = "dp";
    if (pt_train(net, train_data, test_data, &c, NULL) != PT_ERR_ARG) fail_msg("%s: accepted", f);
    if (!strstr(pt_error_message(), cases[i].says)) fail_msg("%s: %s", f, pt_error_message());
    assert_false(pt_net_has_weights(net));
  }
  pt_net_free(net);
  /* pt_evaluate's threads are held to the same bound. */
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  pt_config c;
  config(&c);
  c.max_steps = 1;
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_OK);
  pt_eval ev;
  assert_int_equal(pt_evaluate(net, test_data, NULL, 3000, &ev), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "threads 3000: expected 0 (the cores) to 1024"));
  /* The CPU is one device; a misspelt one is named. */
  assert_int_equal(pt_evaluate(net, test_data, "cpu:2", 1, &ev), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "'cpu:2': the CPU is one device"));
  assert_int_equal(pt_evaluate(net, test_data, "gpu", 1, &ev), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "'gpu' is not a device"));
  assert_int_equal(pt_evaluate(net, test_data, "cpu:0", 1, &ev), PT_OK);
  pt_net_free(net);
}

/* Convolutions split their workspace among the calling thread's pool. */
static const char *conv_text =
    "name conv-squares\n"
    "input 1 12 12\n"
    "conv2d c1 out=8 kernel=3 padding=1\n"
    "relu\n"
    "maxpool2d kernel=2\n"
    "conv2d c2 out=16 kernel=3 padding=1\n"
    "relu\n"
    "flatten\n"
    "linear fc out=4\n"
    "defaults dataset=fashion-mnist optimizer=adam lr=0.01 batch=20 test-batch=100\n";

#define PRED 8

static pt_net *trained_conv(void) {
  pt_net *net;
  pt_config c;
  config(&c);
  c.epochs = 1;
  assert_int_equal(pt_net_spec(conv_text, &net), PT_OK);
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_OK);
  return net;
}

static void pred_input(float *x) {
  for (int i = 0; i < PRED * SIDE * SIDE; i++) x[i] = test_images[i] / 255.0f;
}

static void assert_probs_near(const float *a, const float *b) {
  for (int i = 0; i < PRED * CLASSES; i++) assert_float_equal(a[i], b[i], 1e-5);
}

/* A net's model outlives the pool it was built on: pt_evaluate and pt_train
 * give the calling thread another, and predictions must not change. */
static void test_predict_after_the_pool_changes(void **state) {
  (void)state;
  pt_net *net = trained_conv(), *other;
  float x[PRED * SIDE * SIDE], p1[PRED * CLASSES], p2[PRED * CLASSES];
  pred_input(x);
  pt_eval ev;
  assert_int_equal(pt_evaluate(net, test_data, NULL, 1, &ev), PT_OK);
  assert_int_equal(pt_predict(net, x, PRED, p1), PT_OK);
  assert_int_equal(pt_evaluate(net, test_data, NULL, 4, &ev), PT_OK);
  assert_int_equal(pt_predict(net, x, PRED, p2), PT_OK);
  assert_probs_near(p1, p2);
  /* Another net trained on more threads in between. */
  pt_config c;
  config(&c);
  c.epochs = 1;
  c.threads = 3;
  assert_int_equal(pt_net_spec(spec_text, &other), PT_OK);
  assert_int_equal(pt_train(other, train_data, test_data, &c, NULL), PT_OK);
  assert_int_equal(pt_predict(net, x, PRED, p2), PT_OK);
  assert_probs_near(p1, p2);
  assert_int_equal(pt_evaluate(net, test_data, NULL, 1, &ev), PT_OK); /* back to one thread */
  pt_net_free(other);
  pt_net_free(net);
}

typedef struct {
  pt_net *net;
  int threads;  /* evaluations alternate between threads and threads + 1 */
  const float *want; /* (PRED, CLASSES) */
  double loss;
  int fails, differs;
} user_job;

static void *use_net(void *arg) {
  user_job *j = arg;
  float x[PRED * SIDE * SIDE], p[PRED * CLASSES];
  pt_eval ev;
  pred_input(x);
  for (int i = 0; i < 12; i++) {
    if (pt_evaluate(j->net, test_data, NULL, j->threads + (i & 1), &ev) != PT_OK) j->fails++;
    else if (i == 0) j->loss = ev.loss;
    else if (fabs(ev.loss - j->loss) > 1e-6) j->differs++;
    if (pt_predict(j->net, x, PRED, p) != PT_OK) j->fails++;
    else
      for (int k = 0; k < PRED * CLASSES; k++) j->differs += fabsf(p[k] - j->want[k]) > 1e-5f;
  }
  pt_evaluate(j->net, test_data, NULL, 1, &ev); /* ends the thread's pool before the thread */
  return NULL;
}

/* Different nets on different threads, each thread with its own pool. */
static void test_nets_on_threads_with_their_own_pools(void **state) {
  (void)state;
  pt_net *a = trained_conv(), *b = trained_conv();
  float x[PRED * SIDE * SIDE], want_a[PRED * CLASSES], want_b[PRED * CLASSES];
  pred_input(x);
  /* Built here, on this thread's one thread; used below on pools of 2-4. */
  assert_int_equal(pt_predict(a, x, PRED, want_a), PT_OK);
  assert_int_equal(pt_predict(b, x, PRED, want_b), PT_OK);
  user_job ja = {a, 1, want_a, 0, 0, 0}, jb = {b, 3, want_b, 0, 0, 0};
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, use_net, &ja), 0);
  assert_int_equal(pthread_create(&tb, NULL, use_net, &jb), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(ja.fails + jb.fails, 0);
  assert_int_equal(ja.differs + jb.differs, 0);
  pt_net_free(a);
  pt_net_free(b);
}

typedef struct {
  pt_net *other;
  int evaluations, fails;
} eval_in_callback;

static int evaluate_other(const pt_step *s, void *user) {
  (void)s;
  eval_in_callback *e = user;
  pt_eval ev;
  e->evaluations++;
  e->fails += pt_evaluate(e->other, test_data, NULL, 1, &ev) != PT_OK;
  return 0;
}

/* An evaluation inside a run's callback, on another thread count, leaves
 * the run's threads as they were: the weights are those of a run without
 * it, bit for bit. */
static void test_evaluate_in_a_callback_leaves_the_run_alone(void **state) {
  (void)state;
  pt_net *other = trained_conv();
  float x[PRED * SIDE * SIDE], p[2][PRED * CLASSES];
  pred_input(x);
  eval_in_callback e = {other, 0, 0};
  for (int t = 0; t < 2; t++) {
    pt_net *net;
    pt_config c;
    config(&c);
    c.threads = 2;
    c.max_steps = 6;
    if (t == 1) {
      c.on_step = evaluate_other;
      c.user = &e;
    }
    assert_int_equal(pt_net_spec(conv_text, &net), PT_OK);
    assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_OK);
    assert_int_equal(pt_predict(net, x, PRED, p[t]), PT_OK);
    pt_net_free(net);
  }
  assert_int_equal(e.evaluations, 6);
  assert_int_equal(e.fails, 0);
  assert_memory_equal(p[0], p[1], sizeof p[0]);
  pt_net_free(other);
}

static int threads_now(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void *train_once(void *arg) {
  int *st = arg;
  pt_net *net;
  pt_config c;
  config(&c);
  c.threads = 2;
  c.max_steps = 2;
  *st = pt_net_spec(spec_text, &net);
  if (*st == PT_OK) *st = pt_train(net, train_data, test_data, &c, NULL);
  pt_net_free(net);
  return NULL; /* with the pool pt_train gave this thread */
}

/* A thread that trained takes its pool's threads with it when it ends. */
static void test_threads_that_trained_leave_no_threads(void **state) {
  (void)state;
  if (threads_now() < 1) skip(); /* no /proc */
  const int before = threads_now();
  for (int i = 0; i < 6; i++) {
    pthread_t t;
    int st = -1;
    assert_int_equal(pthread_create(&t, NULL, train_once, &st), 0);
    pthread_join(t, NULL);
    assert_int_equal(st, PT_OK);
  }
  /* A joined thread leaves /proc a moment after its join returns. */
  int after = threads_now();
  for (int i = 0; i < 200 && after > before; i++) {
    usleep(10000);
    after = threads_now();
  }
  assert_int_equal(after, before);
}

/* Labels past the model's outputs are refused, whichever split has them:
 * they would index outputs that do not exist. */
static void test_more_classes_than_outputs(void **state) {
  (void)state;
  static uint8_t lb[N];
  for (int i = 0; i < N; i++) lb[i] = (uint8_t)(i % 10);
  pt_data *ten;
  assert_int_equal(pt_data_from_arrays(test_images, lb, N, 1, SIDE, SIDE, 10, &ten), PT_OK);
  pt_net *net;
  pt_config c;
  config(&c);
  c.epochs = 1;
  assert_int_equal(pt_net_spec(spec_text, &net), PT_OK);
  assert_int_equal(pt_train(net, train_data, ten, &c, NULL), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "model squares has 4 outputs, but the test split of"));
  assert_non_null(strstr(pt_error_message(), "has labels up to 9 (10 classes at least)"));
  assert_int_equal(pt_train(net, ten, test_data, &c, NULL), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "the training split of"));
  assert_int_equal(pt_train(net, train_data, test_data, &c, NULL), PT_OK);
  pt_eval ev;
  assert_int_equal(pt_evaluate(net, ten, NULL, 1, &ev), PT_ERR_ARG);
  assert_non_null(
      strstr(pt_error_message(), "model squares has 4 outputs, but the given data has labels up to 9"));
  /* Data that could hold 10 classes but whose labels stay below the model's
   * 4 outputs (the user's own two- or four-class set in MNIST's format). */
  for (int i = 0; i < N; i++) lb[i] = (uint8_t)(i % 4);
  pt_data *four;
  assert_int_equal(pt_data_from_arrays(test_images, lb, N, 1, SIDE, SIDE, 10, &four), PT_OK);
  assert_int_equal(pt_evaluate(net, four, NULL, 1, &ev), PT_OK);
  pt_data_free(four);
  pt_net_free(net);
  pt_data_free(ten);
}

static void test_names(void **state) {
  (void)state;
  int n = 0;
  while (pt_preset_name(n)) n++;
  assert_true(n >= 4);
  assert_null(pt_preset_name(-1));
  pt_net *net;
  assert_int_equal(pt_net_preset("fmnist-mlp", &net), PT_OK);
  assert_string_equal(pt_net_class_name(net, 9), "Ankle boot");
  assert_null(pt_net_class_name(net, 10));
  assert_string_equal(pt_net_dataset(net), "fashion-mnist");
  int c, h, w, k;
  pt_net_shape(net, &c, &h, &w, &k);
  assert_int_equal(c * 1000 + h * 10 + w, 1000 + 280 + 28);
  assert_int_equal(k, 10);
  assert_null(pt_data_class_name(train_data, 0)); /* arrays have no class names */
  /* the header's version is the library's */
  char header_version[32];
  snprintf(header_version, sizeof header_version, "%d.%d.%d", PTRAIN_VERSION_MAJOR, PTRAIN_VERSION_MINOR,
           PTRAIN_VERSION_PATCH);
  assert_string_equal(pt_version(), header_version);
  pt_net_free(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train_learns_and_predict_agrees_with_evaluate),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_batch_larger_than_the_data),
      cmocka_unit_test(test_request_stop),
      cmocka_unit_test(test_request_stop_after_the_last_step),
      cmocka_unit_test(test_stop_during_evaluation),
      cmocka_unit_test(test_target_met_inside_an_epoch_reaches_the_epoch_callback),
      cmocka_unit_test(test_callbacks_see_every_step_and_stop_the_run),
      cmocka_unit_test(test_training_continues_from_the_nets_weights),
      cmocka_unit_test(test_save_and_load),
      cmocka_unit_test(test_parallel_dp),
      cmocka_unit_test(test_silent),
      cmocka_unit_test(test_errors_name_the_thing),
      cmocka_unit_test(test_long_messages_keep_the_reason),
      cmocka_unit_test(test_result_of_a_run_that_did_not_train),
      cmocka_unit_test(test_config_numbers_out_of_range),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_predict_after_the_pool_changes),
      cmocka_unit_test(test_nets_on_threads_with_their_own_pools),
      cmocka_unit_test(test_evaluate_in_a_callback_leaves_the_run_alone),
      cmocka_unit_test(test_threads_that_trained_leave_no_threads),
      cmocka_unit_test(test_more_classes_than_outputs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
