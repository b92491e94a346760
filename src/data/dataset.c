/* Dataset names, default locations and loading a split from a directory.
 *
 * Loading only finds files and hands them to the format readers (idx.c,
 * cifar.c). Its own job is the error a user sees first on a fresh machine, a
 * missing file, so that message lists every path tried and the command that
 * would fetch the data, instead of a bare "No such file or directory".
 *
 * IDX files are looked for plain first, then gzipped, since the plain name is
 * what an unpacked copy has and the .gz what a mirror or Debian's
 * dataset-fashion-mnist package ships. Images load before labels so the label
 * reader can check the count against the image count.
 */
#include "data/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/blob.h"
#include "util/file.h"

#define PT_NUM_CLASSES 10

static const char *const kind_names[] = {
    [PT_DS_MNIST] = "mnist",
    [PT_DS_FASHION_MNIST] = "fashion-mnist",
    [PT_DS_CIFAR10] = "cifar10",
};
#define NUM_KINDS ((int)(sizeof kind_names / sizeof kind_names[0]))

pt_status pt_dataset_kind_parse(const char *name, pt_dataset_kind *out) {
  for (int k = 0; k < NUM_KINDS; k++) {
    if (name && strcmp(name, kind_names[k]) == 0) {
      *out = (pt_dataset_kind)k;
      return PT_OK;
    }
  }
  return pt_fail(PT_ERR_ARG, "unknown dataset '%s', expected one of: mnist, fashion-mnist, cifar10",
                 name ? name : "(null)");
}

const char *pt_dataset_kind_name(pt_dataset_kind kind) {
  if ((int)kind < 0 || (int)kind >= NUM_KINDS) return "unknown";
  return kind_names[kind];
}

/* As the datasets' own documentation names them (torchvision's classes). */
static const char *const class_names[][10] = {
    [PT_DS_MNIST] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
    [PT_DS_FASHION_MNIST] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"},
    [PT_DS_CIFAR10] = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"},
};

const char *pt_dataset_class_name(pt_dataset_kind kind, int label) {
  if ((int)kind < 0 || (int)kind >= NUM_KINDS || label < 0 || label >= 10) return NULL;
  return class_names[kind][label];
}

static int is_file(const char *path);

/* Both splits' files, each plain or gzipped (IDX), or in dir or its
 * archive's subdirectory (CIFAR-10): as the loader finds them. */
static const char *const idx_files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
static const char *const cifar_files[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                          "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

int pt_dataset_files(pt_dataset_kind kind) {
  return kind == PT_DS_CIFAR10 ? (int)(sizeof cifar_files / sizeof cifar_files[0])
                               : (int)(sizeof idx_files / sizeof idx_files[0]);
}

int pt_dataset_missing(pt_dataset_kind kind, const char *dir, char *first, size_t first_size) {
  const int is_cifar = kind == PT_DS_CIFAR10, n = pt_dataset_files(kind);
  const char *const *names = is_cifar ? cifar_files : idx_files;
  int missing = 0;
  if (first_size) first[0] = 0;
  for (int i = 0; i < n; i++) {
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/%s", dir, names[i]);
    if (is_cifar) snprintf(b, sizeof b, "%s/cifar-10-batches-bin/%s", dir, names[i]);
    else snprintf(b, sizeof b, "%s/%s.gz", dir, names[i]);
    if (is_file(a) || is_file(b)) continue;
    if (!missing++ && first_size) snprintf(first, first_size, "%s", names[i]);
  }
  return missing;
}

int pt_dataset_present(pt_dataset_kind kind, const char *dir) { return pt_dataset_missing(kind, dir, NULL, 0) == 0; }

const char *pt_dataset_first_present(const char *const *dirs, int n) {
  for (int i = 0; i < n; i++)
    if (pt_dataset_present(PT_DS_MNIST, dirs[i])) return dirs[i];
  return n > 0 ? dirs[0] : NULL;
}

/* Debian's package first (dataset-fashion-mnist: a first run needs no
 * download), then where 'ptrain data fetch fashion-mnist' puts it; with
 * neither, Debian's, which the missing-file error then names. */
#define FASHION_DEBIAN "/usr/share/datasets/fashion-mnist"
#define FASHION_FETCHED "data/fashion-mnist"

static const char *fashion_dir(void) {
  static const char *const dirs[2] = {FASHION_DEBIAN, FASHION_FETCHED};
  return pt_dataset_first_present(dirs, 2);
}

const char *pt_dataset_default_dir(pt_dataset_kind kind) {
  switch (kind) {
    case PT_DS_MNIST: return "data/mnist";
    case PT_DS_FASHION_MNIST: return fashion_dir();
    case PT_DS_CIFAR10: return "data/cifar10";
  }
  return "data";
}

void pt_dataset_free(pt_dataset *ds) {
  if (!ds) return;
  free(ds->images);
  free(ds->labels);
  memset(ds, 0, sizeof *ds);
}

static int is_file(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static pt_status join(char *out, size_t cap, const char *dir, const char *sub, const char *name,
                      const char *suffix) {
  int r = sub ? snprintf(out, cap, "%s/%s/%s%s", dir, sub, name, suffix)
              : snprintf(out, cap, "%s/%s%s", dir, name, suffix);
  if (r < 0 || (size_t)r >= cap) return pt_fail(PT_ERR_ARG, "%s: path too long", dir);
  return PT_OK;
}

void pt_dataset_fetch_hint(char *out, size_t cap, pt_dataset_kind kind, const char *dir) {
  /* Debian's directory is the package's to fill: a user cannot write it,
   * and root should not. The fetch's own default is searched too. */
  if (kind == PT_DS_FASHION_MNIST && !strcmp(dir, FASHION_DEBIAN)) {
    if (pt_dataset_present(kind, FASHION_FETCHED))
      snprintf(out, cap, FASHION_FETCHED " has it: give --data-dir " FASHION_FETCHED ", or run `apt-get install "
               "dataset-fashion-mnist`");
    else
      snprintf(out, cap, "neither there nor in " FASHION_FETCHED "; run `apt-get install dataset-fashion-mnist`, or "
               "`ptrain data fetch fashion-mnist` (into " FASHION_FETCHED ")");
    return;
  }
  int r = snprintf(out, cap, "run `ptrain data fetch %s --dir %s`", pt_dataset_kind_name(kind),
                   dir);
  if (kind == PT_DS_FASHION_MNIST && r >= 0 && (size_t)r < cap)
    snprintf(out + r, cap - (size_t)r, " or `apt-get install dataset-fashion-mnist`");
}

/* Why path, where is_file found no file, has none: PT_OK where nothing is
 * there, so that the caller says so (with where to get the data); else
 * what is there, or why it cannot be looked at (a directory that may not
 * be searched, a loop of links), which no download would mend. what: the
 * file's role, for the message. */
static pt_status why_no_file(const char *path, const char *what) {
  struct stat sb;
  if (lstat(path, &sb) != 0)
    return errno == ENOENT ? PT_OK : pt_fail_errno(PT_ERR_IO, "%s (%s): cannot look at it", path, what);
  if (!S_ISLNK(sb.st_mode))
    return pt_fail(PT_ERR_IO, "%s: %s, expected a file (%s)", path, pt_file_kind(sb.st_mode), what);
  if (stat(path, &sb) != 0) return pt_fail_errno(PT_ERR_IO, "%s (%s): a link whose target cannot be read", path, what);
  return pt_fail(PT_ERR_IO, "%s: a link to %s, expected a file (%s)", path, pt_file_kind(sb.st_mode), what);
}

/* Finds dir/base or dir/base.gz. */
static pt_status find_idx(char *path, size_t cap, pt_dataset_kind kind, const char *dir,
                          const char *base) {
  PT_TRY(join(path, cap, dir, NULL, base, ""));
  if (is_file(path)) return PT_OK;
  PT_TRY(join(path, cap, dir, NULL, base, ".gz"));
  if (is_file(path)) return PT_OK;
  /* Something there that is no file (a directory, a dangling link, a
   * directory that may not be searched) is not a missing download. */
  char what[160];
  snprintf(what, sizeof what, "%s's %s", pt_dataset_kind_name(kind), base);
  for (int gz = 0; gz < 2; gz++) {
    PT_TRY(join(path, cap, dir, NULL, base, gz ? ".gz" : ""));
    PT_TRY(why_no_file(path, what));
  }
  char hint[512];
  pt_dataset_fetch_hint(hint, sizeof hint, kind, dir);
  return pt_fail(PT_ERR_IO, "%s: %s not found (tried %s/%s and %s/%s.gz); %s",
                 pt_dataset_kind_name(kind), base, dir, base, dir, base, hint);
}

static pt_status load_idx(pt_dataset *ds, pt_dataset_kind kind, const char *dir, int train) {
  const char *prefix = train ? "train" : "t10k";
  char base[64], path[4096];
  snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
  PT_TRY(find_idx(path, sizeof path, kind, dir, base));
  PT_TRY(pt_idx_read_images(path, ds));
  snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
  PT_TRY(find_idx(path, sizeof path, kind, dir, base));
  return pt_idx_read_labels(path, ds->n, PT_NUM_CLASSES, &ds->labels);
}

static pt_status load_cifar(pt_dataset *ds, const char *dir, int train) {
  static const char *const train_files[] = {"data_batch_1.bin", "data_batch_2.bin",
                                            "data_batch_3.bin", "data_batch_4.bin",
                                            "data_batch_5.bin"};
  static const char *const test_files[] = {"test_batch.bin"};
  const char *const *files = train ? train_files : test_files;
  int nfiles = train ? 5 : 1;
  /* The official tarball unpacks into cifar-10-batches-bin/; accept both that
   * and the files placed directly in dir. Where data_batch_1.bin is decides
   * for all six, so that the test batch never comes from another copy than
   * the training batches; a directory with the test batch alone (for eval)
   * is decided by it. */
  const char *sub = NULL, *decider = train_files[0];
  char path[4096];
  if (!train) {
    char probe[4096];
    PT_TRY(join(path, sizeof path, dir, NULL, decider, ""));
    PT_TRY(join(probe, sizeof probe, dir, "cifar-10-batches-bin", decider, ""));
    if (!is_file(path) && !is_file(probe)) decider = test_files[0];
  }
  PT_TRY(join(path, sizeof path, dir, NULL, decider, ""));
  if (!is_file(path)) {
    PT_TRY(why_no_file(path, "a CIFAR-10 batch"));
    sub = "cifar-10-batches-bin";
    PT_TRY(join(path, sizeof path, dir, sub, decider, ""));
    if (!is_file(path)) {
      PT_TRY(why_no_file(path, "a CIFAR-10 batch"));
      char hint[512];
      pt_dataset_fetch_hint(hint, sizeof hint, PT_DS_CIFAR10, dir);
      return pt_fail(PT_ERR_IO, "cifar10: %s not found (tried %s/%s and %s/%s/%s); %s", decider,
                     dir, decider, dir, sub, decider, hint);
    }
  }
  for (int i = 0; i < nfiles; i++) {
    PT_TRY(join(path, sizeof path, dir, sub, files[i], ""));
    if (!is_file(path)) {
      PT_TRY(why_no_file(path, "a CIFAR-10 batch"));
      /* In the other of the two places: the batches are split between them. */
      char other[4096];
      PT_TRY(join(other, sizeof other, dir, sub ? NULL : "cifar-10-batches-bin", files[i], ""));
      if (is_file(other))
        return pt_fail(PT_ERR_IO, "cifar10: %s not found, but %s is there: the batches are split between %s and "
                       "%s/cifar-10-batches-bin (%s decides); put all six in one of them",
                       path, other, dir, dir, decider);
      char hint[512];
      pt_dataset_fetch_hint(hint, sizeof hint, PT_DS_CIFAR10, dir);
      return pt_fail(PT_ERR_IO, "cifar10: %s not found (%s is there: incomplete download?); %s",
                     path, decider, hint);
    }
    uint8_t *buf;
    size_t len;
    PT_TRY(pt_blob_read(path, PT_BLOB_MAX_BYTES, &buf, &len));
    pt_status st = pt_cifar_parse_batch(buf, len, path, ds);
    free(buf);
    PT_TRY(st);
  }
  return PT_OK;
}

pt_status pt_dataset_check_classes(const pt_dataset *ds, int outputs, const char *model, const char *what) {
  /* Every reader checks its labels against num_classes, so that bound is
   * safe; within it, the labels themselves decide: a 2-output model on an
   * MNIST-format set of two classes is the user's own data, as in PyTorch. */
  if (ds->num_classes <= outputs) return PT_OK;
  int top = 0;
  for (int i = 0; i < ds->n; i++)
    if (ds->labels[i] > top) top = ds->labels[i];
  if (top < outputs) return PT_OK;
  return pt_fail(PT_ERR_ARG, "model %s has %d outputs, but %s has labels up to %d (%d classes at least)", model,
                 outputs, what, top, top + 1);
}

pt_status pt_dataset_load(pt_dataset *ds, pt_dataset_kind kind, const char *dir, int train) {
  memset(ds, 0, sizeof *ds);
  if (!dir) dir = pt_dataset_default_dir(kind);
  pt_status st;
  switch (kind) {
    case PT_DS_MNIST:
    case PT_DS_FASHION_MNIST: st = load_idx(ds, kind, dir, train); break;
    case PT_DS_CIFAR10: st = load_cifar(ds, dir, train); break;
    default: return pt_fail(PT_ERR_ARG, "unknown dataset kind %d", (int)kind);
  }
  if (st != PT_OK) {
    pt_dataset_free(ds);
    return st;
  }
  ds->num_classes = PT_NUM_CLASSES;
  return PT_OK;
}
