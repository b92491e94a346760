/* ptrain predict: the classes a trained model sees in images. PNG and JPEG
 * files are fitted to the model's input (grey or colour, resized) and the
 * conversion is said; IDX and CIFAR-10 files give images by --index, with
 * their labels where they are known. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "data/blob.h"
#include "data/dataset.h"
#include "image/image.h"
#include "ops/cpu/ops.h"
#include "util/error.h"
#include "util/cores.h"

typedef struct {
  pt_net *net;
  const char *ckpt; /* as given, for the errors about its weights */
  int top, json, classes;
  float *probs; /* (classes) */
  int *order;   /* (classes) */
} predictor;

/* The dataset's name of class k, or "class k" (written into buf). */
static const char *class_name(const predictor *P, int k, char buf[16]) {
  const char *name = pt_net_class_name(P->net, k);
  if (name) return name;
  snprintf(buf, 16, "class %d", k);
  return buf;
}

/* Prints one image's top classes; label < 0: unknown. */
static void report(predictor *P, const char *file, int index, int label, const char *note) {
  int *ord = P->order;
  for (int k = 0; k < P->classes; k++) ord[k] = k;
  for (int i = 0; i < P->top && i < P->classes; i++) /* a partial selection sort: top is small */
    for (int j = i + 1; j < P->classes; j++)
      if (P->probs[ord[j]] > P->probs[ord[i]]) {
        int t = ord[i];
        ord[i] = ord[j];
        ord[j] = t;
      }
  const int top = P->top < P->classes ? P->top : P->classes;
  char buf[16]; /* each name is used before the next is made */
  if (P->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", file);
    if (index >= 0) cJSON_AddNumberToObject(o, "index", index);
    if (label >= 0) cJSON_AddStringToObject(o, "label", class_name(P, label, buf));
    if (note && note[0]) cJSON_AddStringToObject(o, "converted", note);
    cJSON *arr = cJSON_AddArrayToObject(o, "top");
    for (int i = 0; i < top; i++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "class", class_name(P, ord[i], buf));
      cJSON_AddNumberToObject(e, "index", ord[i]);
      char p[32];
      snprintf(p, sizeof p, "%.6g", P->probs[ord[i]]);
      cJSON_AddRawToObject(e, "probability", p);
      cJSON_AddItemToArray(arr, e);
    }
    char *text = cJSON_PrintUnformatted(o);
    if (text) puts(text);
    free(text);
    cJSON_Delete(o);
    return;
  }
  if (index >= 0) printf("%s[%d]:", file, index);
  else printf("%s:", file);
  for (int i = 0; i < top; i++) printf("%s %s %.1f%%", i ? "," : "", class_name(P, ord[i], buf), 100.0 * P->probs[ord[i]]);
  if (label >= 0) printf(" (label: %s)", class_name(P, label, buf));
  if (note && note[0]) printf(" (%s)", note);
  printf("\n");
}

/* One image's class probabilities, which must be finite: weights that
 * overflow float arithmetic make NaN or infinity, which no ranking means
 * and JSON cannot hold. index < 0: file is the image itself. */
static pt_status predict_one(predictor *P, const float *x, const char *file, int index) {
  PT_TRY(pt_predict(P->net, x, 1, P->probs));
  for (int k = 0; k < P->classes; k++)
    if (!isfinite(P->probs[k])) {
      char at[32] = "";
      if (index >= 0) snprintf(at, sizeof at, "[%d]", index);
      return pt_fail(PT_ERR_FORMAT, "%s: the model's outputs for %s%s are not finite (NaN or infinity): these weights "
                     "overflow float arithmetic", P->ckpt, file, at);
    }
  return PT_OK;
}

static int is_picture(const char *path) {
  unsigned char sig[8] = {0};
  /* Only a regular file is opened: opening a FIFO waits for a writer. The
   * reader then refuses anything else by name. */
  struct stat sb;
  if (stat(path, &sb) || !S_ISREG(sb.st_mode)) return 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = fread(sig, 1, sizeof sig, f);
  fclose(f);
  if (n >= 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8)) return 1;
  return n >= 3 && sig[0] == 0xFF && sig[1] == 0xD8 && sig[2] == 0xFF;
}

/* "3", "0,5,17", "0-9", or a mix: the indices, each below n. With out
 * NULL, the syntax alone, before any file is read. */
static pt_status parse_indices(const char *spec, int n, int **out, int *count) {
  int *none = NULL;
  if (!out) out = &none;
  *out = NULL;
  *count = 0;
  int cap = 0;
  const char *p = spec;
  while (*p) {
    char *end;
    errno = 0;
    long a = strtol(p, &end, 10), b = a;
    if (end == p || a < 0) goto bad;
    if (*end == '-') {
      const char *q = end + 1;
      b = strtol(q, &end, 10);
      if (end == q || b < a) goto bad;
    }
    /* Past a long, strtol says LONG_MAX: not the number typed. */
    if (errno == ERANGE || b > INT_MAX)
      return pt_fail(PT_ERR_ARG, "--index %s: an index past %d, the most a file can hold", spec, INT_MAX);
    if (*end && *end != ',') goto bad;
    if (out != &none && b >= n)
      return pt_fail(PT_ERR_ARG, "--index %s: %ld is past the file's last image, %d", spec, b, n - 1);
    if (out == &none) {
      *count = 1; /* a valid item; nothing kept */
      p = *end ? end + 1 : end;
      continue;
    }
    for (long i = a; i <= b; i++) {
      if (*count == cap) {
        cap = cap ? 2 * cap : 16;
        int *grown = realloc(*out, sizeof(int) * (size_t)cap);
        if (!grown) {
          free(*out);
          *out = NULL;
          return pt_fail(PT_ERR_NOMEM, "out of memory for --index %s", spec);
        }
        *out = grown;
      }
      (*out)[(*count)++] = (int)i;
    }
    p = *end ? end + 1 : end;
  }
  if (*count) return PT_OK;
bad:
  free(*out);
  *out = NULL;
  return pt_fail(PT_ERR_ARG, "--index %s: expected image numbers from 0, as 3, 0,5,17 or 0-9", spec);
}

/* The labels beside an IDX image file (t10k-images-idx3-ubyte.gz ->
 * t10k-labels-idx1-ubyte.gz, or the other of plain and gzipped, as the
 * training reader takes them), or NULL where there are none. Labels that
 * are there but do not fit (another count, a label the model has no
 * class for) are said, not dropped unseen. */
static uint8_t *idx_labels_beside(const char *path, int n, int classes) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *at = strstr(base, "images-idx3");
  if (!at) return NULL;
  const char *rest = at + strlen("images-idx3");
  const size_t rl = strlen(rest);
  const int gz = rl >= 3 && !strcmp(rest + rl - 3, ".gz");
  char lpath[2][4200];
  snprintf(lpath[0], sizeof lpath[0], "%.*slabels-idx1%s", (int)(at - path), path, rest);
  snprintf(lpath[1], sizeof lpath[1], "%.*slabels-idx1%.*s%s", (int)(at - path), path, (int)(gz ? rl - 3 : rl), rest,
           gz ? "" : ".gz");
  for (int k = 0; k < 2; k++) {
    if (access(lpath[k], F_OK)) continue;
    uint8_t *labels = NULL;
    if (pt_idx_read_labels(lpath[k], n, classes, &labels) == PT_OK) return labels;
    fprintf(stderr, "ptrain predict: warning: labels not shown: %s\n", pt_error_message());
    return NULL;
  }
  return NULL;
}

/* An IDX or CIFAR-10 file: the images --index names. */
static pt_status predict_dataset_file(predictor *P, const char *path, const char *index) {
  uint8_t *buf;
  size_t len;
  PT_TRY(pt_blob_read(path, PT_BLOB_MAX_BYTES, &buf, &len));
  pt_dataset ds = {0};
  pt_status st;
  int cifar = 0;
  const int idx_magic = len >= 4 && buf[0] == 0 && buf[1] == 0 && buf[2] == 8 && buf[3] == 3;
  if (idx_magic) {
    st = pt_idx_adopt_images(buf, len, path, &ds);
    if (st == PT_OK) buf = NULL; /* now ds.images */
  }
  /* A CIFAR-10 batch's first record may start with those bytes (label 0,
   * three dark red pixels): where the IDX header does not hold, its length
   * decides, and the IDX account is kept for a file that is neither. */
  if ((!idx_magic || st != PT_OK) && len > 0 && len % 3073 == 0) {
    char idx_error[PT_ERROR_MAX] = "";
    if (idx_magic) snprintf(idx_error, sizeof idx_error, "%s", pt_error_message());
    const pt_status cst = pt_cifar_parse_batch(buf, len, path, &ds);
    cifar = cst == PT_OK;
    st = !idx_magic || cst == PT_OK ? cst : pt_fail(st, "%s", idx_error);
  } else if (!idx_magic) {
    /* The image reader's account of the first bytes names what the file is. */
    uint8_t px;
    char what[1024] = "";
    if (pt_image_decode(buf, len, path, 1, 1, 1, &px, NULL) != PT_OK) snprintf(what, sizeof what, "%s", pt_error_message());
    if (!what[0]) /* the bytes decode: a picture, read here only because it came gzipped */
      st = pt_fail(PT_ERR_FORMAT, "%s: a compressed PNG or JPEG: give the image itself (gunzip it first)", path);
    else
      st = pt_fail(PT_ERR_FORMAT, "%s; nor is it an IDX image file (magic 00 00 08 03) or a CIFAR-10 batch (records "
                   "of 3073 bytes)", what);
  }
  free(buf);
  if (st != PT_OK) return st;
  int c, h, w, classes;
  pt_net_shape(P->net, &c, &h, &w, &classes);
  int *idx = NULL, count = 0;
  if (ds.c != c || ds.h != h || ds.w != w)
    st = pt_fail(PT_ERR_ARG, "%s holds %dx%dx%d images but model %s takes %dx%dx%d", path, ds.c, ds.h, ds.w,
                 pt_net_name(P->net), c, h, w);
  else if (!index)
    st = pt_fail(PT_ERR_ARG, "%s holds %d images: choose with --index (3, 0,5,17 or 0-9)", path, ds.n);
  else
    st = parse_indices(index, ds.n, &idx, &count);
  if (st == PT_OK && !cifar) ds.labels = idx_labels_beside(path, ds.n, classes);
  const size_t per = (size_t)c * h * w;
  float *x = st == PT_OK ? pt_malloc(sizeof(float) * per) : NULL; /* (c, h, w) */
  if (st == PT_OK && !x) st = PT_ERR_NOMEM;
  for (int i = 0; i < count && st == PT_OK; i++) {
    const uint8_t *im = ds.images + (size_t)idx[i] * per;
    for (size_t j = 0; j < per; j++) x[j] = im[j] / 255.0f;
    st = predict_one(P, x, path, idx[i]);
    if (st == PT_OK) report(P, path, idx[i], ds.labels ? ds.labels[idx[i]] : -1, NULL);
  }
  free(x);
  free(idx);
  pt_dataset_free(&ds);
  return st;
}

int pt_cmd_predict(int argc, char **argv) {
  const char *ckpt = NULL, *model = NULL, *model_file = NULL, *index = NULL;
  int top = 3, json = 0, threads = 0;
  const pt_arg flags[] = {
      {"--checkpoint", ARG_STR, &ckpt, 0, 0, NULL, "FILE", "the model's weights (model.safetensors, or a checkpoint directory)"},
      {"--model", ARG_STR, &model, 0, 0, NULL, "NAME", "preset (default: the one recorded in the checkpoint)"},
      {"--model-file", ARG_STR, &model_file, 0, 0, NULL, "SPEC", "model spec file"},
      {"--index", ARG_STR, &index, 0, 0, NULL, "LIST",
       "images of IDX and CIFAR-10 files to classify: 3, 0,5,17 or 0-9"},
      {"--top", ARG_INT, &top, 1, 256, NULL, "K", "classes to show per image (default 3)"},
      {"--json", ARG_FLAG, &json, 0, 0, NULL, NULL, "one JSON object per image"},
      {"--threads", ARG_INT, &threads, 1, 1024, NULL, "N", "CPU threads (default: the cores this process may use)"},
  };
  const int n = (int)(sizeof flags / sizeof flags[0]);
  const char *files[4096];
  int nfiles = 0, help;
  int rc = pt_args_parse("predict", flags, n, argc, argv, 2, &help, files, 4096, &nfiles);
  if (rc) return rc;
  if (help) {
    pt_args_print_help("ptrain predict --checkpoint FILE [options] IMAGE...",
                       "Print the likeliest classes of each image, with their probabilities. PNG and JPEG\n"
                       "images are turned grey or colour and resized to the model's input as needed;\n"
                       "IDX and CIFAR-10 files give images by --index.",
                       flags, n);
    return 0;
  }
  if (!ckpt) {
    fprintf(stderr, "ptrain predict: --checkpoint FILE is required (see 'ptrain predict --help')\n");
    return PT_USAGE_ERROR;
  }
  if (model && model_file) {
    fprintf(stderr, "ptrain predict: --model and --model-file: give one, not both (see 'ptrain predict --help')\n");
    return PT_USAGE_ERROR;
  }
  if ((rc = pt_cli_check_model("predict", model, model_file))) return rc;
  if (!nfiles) {
    fprintf(stderr, "ptrain predict: no image given: name PNG, JPEG, IDX or CIFAR-10 files (see 'ptrain predict --help')\n");
    return PT_USAGE_ERROR;
  }
  int ignored;
  if (index && parse_indices(index, 0, NULL, &ignored) != PT_OK) return pt_cli_usage_fail("predict");
  int tables = 0;
  for (int i = 0; i < nfiles; i++) tables += !is_picture(files[i]);
  if (index && !tables) {
    fprintf(stderr, "ptrain predict: --index picks images of IDX and CIFAR-10 files, and none is given (see 'ptrain predict "
                    "--help')\n");
    return PT_USAGE_ERROR;
  }
  /* The flag's default is every core; a fresh pool has one thread. */
  pt_ops_set_threads(threads == 0 ? pt_cores_usable() : threads);
  predictor P = {.ckpt = ckpt, .top = top, .json = json};
  if (pt_net_load(ckpt, model ? model : model_file, &P.net) != PT_OK) return pt_cli_fail("predict");
  pt_net_shape(P.net, NULL, NULL, NULL, &P.classes);
  P.probs = malloc(sizeof(float) * (size_t)P.classes);
  P.order = malloc(sizeof(int) * (size_t)P.classes);
  int c, h, w;
  pt_net_shape(P.net, &c, &h, &w, NULL);
  float *x = malloc(sizeof(float) * (size_t)c * h * w); /* (c, h, w) */
  int failed = 0;
  for (int i = 0; i < nfiles && P.probs && P.order && x; i++) {
    pt_status st;
    if (is_picture(files[i])) {
      char note[256];
      st = pt_image_load(files[i], P.net, x, note, sizeof note);
      if (st == PT_OK) st = predict_one(&P, x, files[i], -1);
      if (st == PT_OK) report(&P, files[i], -1, -1, note);
    } else {
      st = predict_dataset_file(&P, files[i], index);
    }
    if (st != PT_OK) {
      /* --index missing for a file of many images, or past its last one:
       * the flag's error, as the other --index errors are (exit 2). */
      if (st == PT_ERR_ARG) {
        pt_cli_usage_fail("predict");
        failed = PT_USAGE_ERROR;
      } else {
        pt_cli_fail("predict"); /* the others are still classified */
        if (!failed) failed = 1;
      }
    }
  }
  if (!P.probs || !P.order || !x) {
    pt_fail(PT_ERR_NOMEM, "out of memory for a model of %d classes", P.classes);
    failed = pt_cli_fail("predict");
  }
  free(x);
  free(P.probs);
  free(P.order);
  pt_net_free(P.net);
  return failed;
}
