/* Dataset names, default directories, and loading MNIST-style splits from a
 * directory (src/data/dataset.c): file discovery (plain before .gz), the
 * missing-file message a new user sees, and cross-file checks. The real
 * Fashion-MNIST from Debian's dataset-fashion-mnist is loaded when installed.
 */
#include "fixture.h"
#include "../tmpdir.h"

#include <sys/stat.h>

#include "data/dataset.h"


/* A fresh subdirectory of the scratch dir. */
static void subdir(char out[128], const char *name) {
  snprintf(out, 128, "%s/%s", tmpdir, name);
  assert_int_equal(mkdir(out, 0755), 0);
}

static void test_kind_names(void **state) {
  (void)state;
  const char *names[] = {"mnist", "fashion-mnist", "cifar10"};
  pt_dataset_kind kinds[] = {PT_DS_MNIST, PT_DS_FASHION_MNIST, PT_DS_CIFAR10};
  for (int i = 0; i < 3; i++) {
    pt_dataset_kind k = (pt_dataset_kind)-1;
    assert_int_equal(pt_dataset_kind_parse(names[i], &k), PT_OK);
    assert_int_equal(k, kinds[i]);
    assert_string_equal(pt_dataset_kind_name(kinds[i]), names[i]);
  }
  pt_dataset_kind k;
  assert_int_equal(pt_dataset_kind_parse("imagenet", &k), PT_ERR_ARG);
  assert_error_contains("imagenet");
  assert_error_contains("mnist, fashion-mnist, cifar10");
  assert_int_equal(pt_dataset_kind_parse("MNIST2", &k), PT_ERR_ARG);
  assert_int_equal(pt_dataset_kind_parse("", &k), PT_ERR_ARG);
  assert_int_equal(pt_dataset_kind_parse(NULL, &k), PT_ERR_ARG);
}

static void test_default_dirs(void **state) {
  (void)state;
  /* Fashion-MNIST: Debian's where installed, else where data fetch puts it */
  const char *fm = pt_dataset_default_dir(PT_DS_FASHION_MNIST);
  if (strcmp(fm, "/usr/share/datasets/fashion-mnist") && strcmp(fm, "data/fashion-mnist")) fail_msg("%s", fm);
  assert_string_equal(pt_dataset_default_dir(PT_DS_MNIST), "data/mnist");
  assert_string_equal(pt_dataset_default_dir(PT_DS_CIFAR10), "data/cifar10");
  /* The first directory holding all four files, each plain or gzipped;
   * the first of all where none does. One holding some of them (a fetch
   * cut short) is not a dataset, and says which file it lacks. */
  char a[128], b[128], c[128], d[128];
  subdir(a, "first-empty");
  subdir(b, "first-plain");
  subdir(c, "first-gz");
  subdir(d, "first-part");
  static const char *const files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                      "t10k-labels-idx1-ubyte"};
  char path[200];
  for (int i = 0; i < 4; i++) {
    const char *in[3] = {b, c, d};
    for (int k = 0; k < 3; k++) {
      if (k == 2 && i == 3) continue; /* d lacks the test labels */
      snprintf(path, sizeof path, "%s/%s%s", in[k], files[i], k == 1 || (k == 2 && i == 0) ? ".gz" : "");
      FILE *f = fopen(path, "w");
      assert_non_null(f);
      fclose(f);
    }
  }
  const char *const ab[2] = {a, b}, *const ca[2] = {c, a}, *const aa[2] = {a, a}, *const db[2] = {d, b};
  assert_ptr_equal(pt_dataset_first_present(ab, 2), ab[1]);
  assert_ptr_equal(pt_dataset_first_present(ca, 2), ca[0]);
  assert_ptr_equal(pt_dataset_first_present(aa, 2), aa[0]);
  assert_ptr_equal(pt_dataset_first_present(db, 2), db[1]);
  char first[64];
  assert_int_equal(pt_dataset_missing(PT_DS_MNIST, d, first, sizeof first), 1);
  assert_string_equal(first, "t10k-labels-idx1-ubyte");
  assert_int_equal(pt_dataset_missing(PT_DS_MNIST, a, first, sizeof first), 4);
  assert_string_equal(first, "train-images-idx3-ubyte");
  /* Debian's directory is not one to fetch into: the hint names the
   * package and the fetch's own directory, searched too. */
  char hint[512];
  pt_dataset_fetch_hint(hint, sizeof hint, PT_DS_FASHION_MNIST, "/usr/share/datasets/fashion-mnist");
  assert_string_equal(hint, "neither there nor in data/fashion-mnist; run `apt-get install dataset-fashion-mnist`, "
                            "or `ptrain data fetch fashion-mnist` (into data/fashion-mnist)");
  pt_dataset_fetch_hint(hint, sizeof hint, PT_DS_MNIST, "data/mnist");
  assert_string_equal(hint, "run `ptrain data fetch mnist --dir data/mnist`");
}

/* Writes one split: n images of h x w and n labels, gzipped or not. */
static void write_split(const char *d, const char *prefix, uint32_t n, uint32_t h, uint32_t w,
                        int gz_images, int gz_labels) {
  char name[64];
  fx_buf im = fx_idx_images(n, h, w), lb = fx_idx_labels(n, 10);
  snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", prefix, gz_images ? ".gz" : "");
  if (gz_images)
    fx_write_gz(d, name, im, NULL);
  else
    fx_write_buf(d, name, im, NULL);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", prefix, gz_labels ? ".gz" : "");
  if (gz_labels)
    fx_write_gz(d, name, lb, NULL);
  else
    fx_write_buf(d, name, lb, NULL);
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void check_split(const pt_dataset *ds, int n, int h, int w) {
  assert_int_equal(ds->n, n);
  assert_int_equal(ds->c, 1);
  assert_int_equal(ds->h, h);
  assert_int_equal(ds->w, w);
  assert_int_equal(ds->num_classes, 10);
  for (int i = 0; i < n; i++) assert_int_equal(ds->labels[i], i % 10);
  for (int i = 0; i < h * w; i++)
    assert_int_equal(ds->images[(size_t)(n - 1) * h * w + i], fx_pixel((uint32_t)n - 1, (uint32_t)i));
}

static void test_load_plain_gz_mixed(void **state) {
  (void)state;
  char d[128];
  subdir(d, "mnist");
  write_split(d, "train", 12, 28, 28, 0, 0);
  write_split(d, "t10k", 5, 28, 28, 1, 1);
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 1), PT_OK);
  check_split(&ds, 12, 28, 28);
  pt_dataset_free(&ds);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 0), PT_OK);
  check_split(&ds, 5, 28, 28);
  pt_dataset_free(&ds);

  char m[128];
  subdir(m, "mixed");
  write_split(m, "train", 9, 7, 5, 1, 0);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_FASHION_MNIST, m, 1), PT_OK);
  check_split(&ds, 9, 7, 5);
  pt_dataset_free(&ds);
}

static void test_plain_preferred_over_gz(void **state) {
  (void)state;
  char d[128];
  subdir(d, "both");
  write_split(d, "train", 3, 4, 4, 0, 0);
  write_split(d, "train", 4, 4, 4, 1, 1);
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 1), PT_OK);
  assert_int_equal(ds.n, 3);
  pt_dataset_free(&ds);
}

static void test_missing_files(void **state) {
  (void)state;
  char d[128], msg[600];
  subdir(d, "none");
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 1), PT_ERR_IO);
  snprintf(msg, sizeof msg, "%s/train-images-idx3-ubyte and %s/train-images-idx3-ubyte.gz", d, d);
  assert_error_contains(msg);
  snprintf(msg, sizeof msg, "`ptrain data fetch mnist --dir %s`", d);
  assert_error_contains(msg);
  assert_error_lacks("apt-get");
  assert_null(ds.images);

  assert_int_equal(pt_dataset_load(&ds, PT_DS_FASHION_MNIST, d, 0), PT_ERR_IO);
  assert_error_contains("t10k-images-idx3-ubyte.gz");
  snprintf(msg, sizeof msg, "`ptrain data fetch fashion-mnist --dir %s`", d);
  assert_error_contains(msg);
  assert_error_contains("apt-get install dataset-fashion-mnist");

  /* Images present, labels missing: the message is about the labels. */
  fx_buf im = fx_idx_images(2, 3, 3);
  fx_write_buf(d, "train-images-idx3-ubyte", im, NULL);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 1), PT_ERR_IO);
  assert_error_contains("train-labels-idx1-ubyte.gz");
  assert_error_contains("ptrain data fetch mnist");
  assert_null(ds.images);
  assert_int_equal(ds.n, 0);
  fx_buf_free(&im);

  /* A directory where the labels file should be: said as such, not "not found". */
  char path[200];
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", d);
  assert_int_equal(mkdir(path, 0755), 0);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 1), PT_ERR_IO);
  snprintf(msg, sizeof msg, "%s: a directory, expected a file (mnist's train-labels-idx1-ubyte)", path);
  assert_error_contains(msg);
  assert_error_lacks("not found");
  /* A link to a device, and a loop of links: what is there, not "not found". */
  assert_int_equal(rmdir(path), 0);
  assert_int_equal(symlink("/dev/null", path), 0);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 1), PT_ERR_IO);
  snprintf(msg, sizeof msg, "%s: a link to a character device, expected a file", path);
  assert_error_contains(msg);
  assert_int_equal(unlink(path), 0);
  char loop[200];
  snprintf(loop, sizeof loop, "%s/loop", d);
  assert_int_equal(symlink(loop, loop), 0);
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, loop, 1), PT_ERR_IO);
  assert_error_contains("Too many levels of symbolic links");
  assert_error_lacks("not found");
}

static void test_count_mismatch(void **state) {
  (void)state;
  char d[128];
  subdir(d, "mismatch");
  fx_buf im = fx_idx_images(6, 3, 3), lb = fx_idx_labels(5, 10);
  fx_write_buf(d, "train-images-idx3-ubyte", im, NULL);
  fx_write_gz(d, "train-labels-idx1-ubyte.gz", lb, NULL);
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_MNIST, d, 1), PT_ERR_FORMAT);
  assert_error_contains("train-labels-idx1-ubyte.gz");
  assert_error_contains("5 labels, expected 6");
  assert_null(ds.images);
  assert_null(ds.labels);
  assert_int_equal(ds.n, 0);
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void test_bad_label_in_split(void **state) {
  (void)state;
  char d[128];
  subdir(d, "badlabel");
  fx_buf im = fx_idx_images(20, 2, 2), lb = fx_idx_labels(20, 10);
  lb.p[8 + 12] = 11;
  fx_write_buf(d, "t10k-images-idx3-ubyte", im, NULL);
  fx_write_gz(d, "t10k-labels-idx1-ubyte.gz", lb, NULL);
  pt_dataset ds;
  assert_int_equal(pt_dataset_load(&ds, PT_DS_FASHION_MNIST, d, 0), PT_ERR_FORMAT);
  assert_error_contains("t10k-labels-idx1-ubyte.gz: label at index 12 is 11, expected < 10");
  fx_buf_free(&im);
  fx_buf_free(&lb);
}

static void test_real_fashion_mnist(void **state) {
  (void)state;
  const char *d = pt_dataset_default_dir(PT_DS_FASHION_MNIST);
  struct stat sb;
  if (stat(d, &sb) != 0) {
    print_message("%s absent (apt-get install dataset-fashion-mnist): skipping\n", d);
    skip();
  }
  pt_dataset ds;
  const int expect[2] = {10000, 60000};
  for (int train = 0; train < 2; train++) {
    pt_status st = pt_dataset_load(&ds, PT_DS_FASHION_MNIST, d, train);
    if (st != PT_OK) fail_msg("%s", pt_error_message());
    assert_int_equal(ds.n, expect[train]);
    assert_int_equal(ds.c, 1);
    assert_int_equal(ds.h, 28);
    assert_int_equal(ds.w, 28);
    int count[10] = {0};
    for (int i = 0; i < ds.n; i++) count[ds.labels[i]]++;
    for (int k = 0; k < 10; k++) assert_int_equal(count[k], ds.n / 10); /* balanced classes */
    pt_dataset_free(&ds);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kind_names),
      cmocka_unit_test(test_default_dirs),
      cmocka_unit_test(test_load_plain_gz_mixed),
      cmocka_unit_test(test_plain_preferred_over_gz),
      cmocka_unit_test(test_missing_files),
      cmocka_unit_test(test_count_mismatch),
      cmocka_unit_test(test_bad_label_in_split),
      cmocka_unit_test(test_real_fashion_mnist),
  };
  return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
