/* In-memory image classification datasets.
 *
 * A dataset is the raw uint8 pixels and labels of one split, exactly as the
 * files store them: (N, C, H, W) bytes plus N labels. Conversion to float,
 * normalisation and augmentation happen per batch in the loader, so the
 * 60,000 Fashion-MNIST images stay at 47 MB instead of 188 MB.
 */
#ifndef PT_DATA_DATASET_H
#define PT_DATA_DATASET_H

#include <stdint.h>
#include "util/error.h"

typedef enum { PT_DS_MNIST, PT_DS_FASHION_MNIST, PT_DS_CIFAR10 } pt_dataset_kind;

typedef struct {
  int n;           /* samples */
  int c, h, w;     /* per-sample shape */
  int num_classes; /* 10 for all three */
  uint8_t *images; /* (n, c, h, w) */
  uint8_t *labels; /* (n) */
} pt_dataset;

/* "mnist", "fashion-mnist", "cifar10" -> kind; PT_ERR_ARG naming the choices otherwise. */
#define PT_DATASET_NAMES "fashion-mnist|mnist|cifar10"
pt_status pt_dataset_kind_parse(const char *name, pt_dataset_kind *out);
const char *pt_dataset_kind_name(pt_dataset_kind kind);
/* The name of class label ("Ankle boot"), or NULL out of range. */
const char *pt_dataset_class_name(pt_dataset_kind kind, int label);
/* Default directory: /usr/share/datasets/fashion-mnist for fashion-mnist (Debian's
 * dataset-fashion-mnist), data/<name> otherwise. */
const char *pt_dataset_default_dir(pt_dataset_kind kind);
/* How many files kind's two splits are. */
int pt_dataset_files(pt_dataset_kind kind);
/* How many of kind's files (both splits) dir lacks, the first of them
 * named in first (may be NULL with first_size 0). */
int pt_dataset_missing(pt_dataset_kind kind, const char *dir, char *first, size_t first_size);
/* Whether dir holds all of kind's files. */
int pt_dataset_present(pt_dataset_kind kind, const char *dir);
/* The first of dirs holding all of an MNIST-style dataset's files (each
 * gzipped or not); dirs[0] where none does. */
const char *pt_dataset_first_present(const char *const *dirs, int n);
/* How to get the dataset into dir: "run `ptrain data fetch NAME --dir DIR`"
 * (and the Debian package where there is one), the second half of a
 * missing-file message. */
void pt_dataset_fetch_hint(char *out, size_t cap, pt_dataset_kind kind, const char *dir);

/* PT_ERR_ARG unless ds's labels are all among a model's outputs: a label
 * past them would index an output that does not exist. model and what
 * name the two in the message ("the test split of fashion-mnist"). */
pt_status pt_dataset_check_classes(const pt_dataset *ds, int outputs, const char *model, const char *what);

/* Loads the train (train != 0) or test split from dir. IDX files may be raw or
 * gzipped (name or name.gz); CIFAR-10 reads data_batch_1..5.bin / test_batch.bin,
 * directly in dir or in dir/cifar-10-batches-bin. */
pt_status pt_dataset_load(pt_dataset *ds, pt_dataset_kind kind, const char *dir, int train);
void pt_dataset_free(pt_dataset *ds);

/* Readers, exposed for tests and fuzzing. */
pt_status pt_idx_read_images(const char *path, pt_dataset *ds); /* fills n, c=1, h, w, images */
pt_status pt_idx_read_labels(const char *path, int expect_n, int num_classes, uint8_t **labels);
/* Parse from memory (already decompressed); name is used in messages. */
pt_status pt_idx_parse_images(const uint8_t *buf, size_t len, const char *name, pt_dataset *ds);
/* pt_idx_parse_images without the copy: on success buf (malloc'd) becomes
 * ds->images; on failure it stays the caller's. */
pt_status pt_idx_adopt_images(uint8_t *buf, size_t len, const char *name, pt_dataset *ds);
pt_status pt_idx_parse_labels(const uint8_t *buf, size_t len, const char *name, int expect_n,
                              int num_classes, uint8_t **labels);
/* One CIFAR-10 binary batch: records of 1 label byte + 3072 pixel bytes. Appends. */
pt_status pt_cifar_parse_batch(const uint8_t *buf, size_t len, const char *name, pt_dataset *ds);

#endif
