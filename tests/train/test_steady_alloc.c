/* No memory allocation in the steady-state training step: mnist-cnn,
 * tutorial-cnn, fmnist-mlp and a small CIFAR model with batch norm, at 1
 * and 2 threads, take their batches from the loader (prefetching on its
 * thread), run forward, loss, backward and the optimizer, and after
 * a few warm-up steps not one call to malloc, calloc, realloc or the aligned
 * allocators happens on any thread, the BLAS's included.
 *
 * The allocator functions are replaced in this program by counting
 * wrappers around glibc's. A sanitizer build brings its own allocator,
 * which these would bypass, so there the test reports itself skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "data/loader.h"
#include "nn/model.h"
#include "ops/cpu/ops.h"
#include "optim/optimizer.h"
#include "train/step.h"
#include "train/trainer.h"

#include "../tmpdir.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t a, size_t n);
extern void __libc_free(void *p);

static atomic_int counting;
static atomic_long calls;

static void note(void) {
  if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
}
void *malloc(size_t n) {
  note();
  return __libc_malloc(n);
}
void *calloc(size_t k, size_t n) {
  note();
  return __libc_calloc(k, n);
}
void *realloc(void *p, size_t n) {
  note();
  return __libc_realloc(p, n);
}
void *aligned_alloc(size_t a, size_t n) {
  note();
  return __libc_memalign(a, n);
}
void *memalign(size_t a, size_t n) {
  note();
  return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
  note();
  void *p = __libc_memalign(a, n);
  if (!p) return 12; /* ENOMEM */
  *out = p;
  return 0;
}
void free(void *p) { __libc_free(p); }
#endif

/* A dataset of the model's input shape in memory, 10 batches long. */
static void synthetic(pt_dataset *ds, const pt_model_spec *spec, int batch) {
  memset(ds, 0, sizeof *ds);
  ds->n = 10 * batch;
  ds->c = spec->in_c;
  ds->h = spec->in_h;
  ds->w = spec->in_w;
  ds->num_classes = 10;
  const size_t px = (size_t)ds->n * ds->c * ds->h * ds->w;
  ds->images = malloc(px);
  ds->labels = malloc((size_t)ds->n);
  assert_non_null(ds->images);
  assert_non_null(ds->labels);
  for (size_t i = 0; i < px; i++) ds->images[i] = (uint8_t)(i * 2654435761u >> 24);
  for (int i = 0; i < ds->n; i++) ds->labels[i] = (uint8_t)(i % 10);
}

static long steady_allocations(const char *preset, const char *spec_file, int batch, int threads) {
  pt_train_config cfg;
  pt_train_config_defaults(&cfg);
  cfg.model = preset;
  cfg.model_file = spec_file;
  cfg.batch_size = batch;
  cfg.threads = threads;
  pt_train_plan plan;
  assert_int_equal(pt_train_plan_make(&cfg, &plan), PT_OK);
  assert_int_equal(pt_ops_set_threads(threads), 0);
  pt_dataset ds;
  synthetic(&ds, &plan.spec, batch);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &plan.spec, batch), PT_OK);
  pt_model_init(m, 1);
  pt_optimizer opt;
  assert_int_equal(pt_optimizer_init(&opt, &plan.opt, m->nparam_total), PT_OK);
  pt_loader_config lc;
  pt_train_loader_config(&plan.spec, batch, 1, &lc);
  lc.prefetch = 1;
  pt_loader *l;
  assert_int_equal(pt_loader_create(&l, &ds, &lc), PT_OK);
  assert_int_equal(pt_loader_start_epoch(l, 0, 0), PT_OK);
  long during = 0;
  for (int step = 0; step < 8; step++) { /* 3 to warm up, 5 counted; one epoch is 10 */
#if !SANITIZED
    if (step == 3) atomic_store(&counting, 1);
#endif
    pt_batch b;
    assert_int_equal(pt_loader_next(l, &b), PT_OK);
    assert_int_equal(b.n, batch);
    pt_train_step(m, &opt, b.x, b.y, b.n, (uint64_t)step, plan.opt.lr, NULL);
  }
#if !SANITIZED
  atomic_store(&counting, 0);
  during = atomic_exchange(&calls, 0);
#endif
  pt_loader_destroy(l);
  pt_optimizer_free(&opt);
  pt_model_destroy(m);
  free(ds.images);
  free(ds.labels);
  return during;
}

static void check_preset(const char *preset, int batch) {
  for (int threads = 1; threads <= 2; threads++) {
    const long n = steady_allocations(preset, NULL, batch, threads);
    if (n) fail_msg("%s, %d thread(s): %ld allocations in 5 steady-state steps", preset, threads, n);
  }
}

static void test_mnist_cnn(void **s) { (void)s; check_preset("mnist-cnn", 64); }
static void test_tutorial_cnn(void **s) { (void)s; check_preset("tutorial-cnn", 100); }
static void test_fmnist_mlp(void **s) { (void)s; check_preset("fmnist-mlp", 100); }
/* cifar-convnet's 134 million parameters make a step take seconds; a
 * small CIFAR model brings what it adds to the others: batch norm, the
 * crop-and-flip augmentation, three channels, and SGD with momentum. */
static void test_cifar_small(void **s) {
  (void)s;
  char path[128];
  snprintf(path, sizeof path, "%s/cifar-small.spec", tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("name cifar-small\n"
        "input 3 32 32\n"
        "conv2d conv1 out=16 kernel=3 padding=1\n"
        "batchnorm2d bn1\n"
        "relu\n"
        "maxpool2d kernel=2\n"
        "dropout p=0.25\n"
        "conv2d conv2 out=32 kernel=3 padding=1\n"
        "batchnorm2d bn2\n"
        "relu\n"
        "maxpool2d kernel=2\n"
        "flatten\n"
        "linear fc1 out=64\n"
        "relu\n"
        "linear fc2 out=10\n"
        "loss cross-entropy\n"
        "normalize mean=0.4914,0.4822,0.4465 std=0.2023,0.1994,0.2010\n"
        "augment crop=4 flip=1\n"
        "defaults dataset=cifar10 optimizer=sgd lr=0.01 momentum=0.9 batch=32 test-batch=100\n",
        f);
  assert_int_equal(fclose(f), 0);
  for (int threads = 1; threads <= 2; threads++) {
    const long n = steady_allocations(NULL, path, 32, threads);
    if (n) fail_msg("cifar-small, %d thread(s): %ld allocations in 5 steady-state steps", threads, n);
  }
}

/* The counter counts: the same wrappers see the allocations a model makes
 * when it is built, so a zero above is not a wrapper that never runs. */
static void test_counter_counts(void **s) {
  (void)s;
#if !SANITIZED
  atomic_store(&counting, 1);
  void *p = malloc(100);
  void *q = NULL;
  assert_int_equal(posix_memalign(&q, 64, 100), 0);
  atomic_store(&counting, 0);
  free(p);
  free(q);
  assert_int_equal(atomic_exchange(&calls, 0), 2);
  /* and the library's: building a model allocates */
  pt_model_spec spec;
  assert_int_equal(pt_train_load_spec("fmnist-mlp", NULL, &spec), PT_OK);
  pt_model *m;
  atomic_store(&counting, 1);
  assert_int_equal(pt_model_create(&m, &spec, 4), PT_OK);
  atomic_store(&counting, 0);
  pt_model_destroy(m);
  assert_true(atomic_exchange(&calls, 0) > 0);
#endif
}

int main(void) {
  if (SANITIZED) {
    printf("skipped: a sanitizer's allocator replaces the counting wrappers\n");
    return 77; /* ctest: skipped */
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counter_counts), cmocka_unit_test(test_fmnist_mlp),   cmocka_unit_test(test_mnist_cnn),
      cmocka_unit_test(test_tutorial_cnn),   cmocka_unit_test(test_cifar_small),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
