/* Model specifications: a short text that describes a sequential model, its
 * input, its loss, its data preparation and its training defaults.
 *
 * The presets are written in this same text (presets.c), so the parser that
 * users' --model-file goes through is the one every preset test exercises.
 * docs/models.md documents the grammar; in short, one directive per line:
 *
 *   input 1 28 28
 *   conv2d conv1 out=32 kernel=3 [stride=1] [padding=0] [bias=1]
 *   batchnorm2d bn1 [eps=1e-5] [momentum=0.1]
 *   relu | flatten | logsoftmax | dropout p=0.25 | maxpool2d kernel=2 [stride=2]
 *   linear fc1 out=128 [bias=1]
 *   loss nll | cross-entropy
 *   normalize mean=0.1307 std=0.3081
 *   augment crop=4 flip=1
 *   defaults dataset=fashion-mnist optimizer=adadelta lr=1.0 batch=64 ...
 *
 * Layers with parameters carry the PyTorch module path as their name
 * ("conv1", or "conv1.0" for a layer inside an nn.Sequential), so tensor
 * names come out as the PyTorch state_dict's: "conv1.0.weight".
 */
#ifndef PT_NN_SPEC_H
#define PT_NN_SPEC_H

#include "util/error.h"

#define PT_MAX_LAYERS 64
#define PT_NAME_LEN 48

typedef enum {
  PT_L_CONV2D,
  PT_L_LINEAR,
  PT_L_BATCHNORM2D,
  PT_L_MAXPOOL2D,
  PT_L_RELU,
  PT_L_DROPOUT,
  PT_L_FLATTEN,
  PT_L_LOGSOFTMAX,
} pt_layer_kind;

typedef enum { PT_LOSS_NLL, PT_LOSS_CROSS_ENTROPY } pt_loss_kind;

typedef struct {
  pt_layer_kind kind;
  char name[PT_NAME_LEN]; /* module path; empty for layers without parameters */
  int out;                /* conv2d: channels; linear: features */
  int kernel, stride, padding, bias;
  float p;                /* dropout */
  float eps, momentum;    /* batch-norm */
  int line;               /* where it was declared, for messages */
} pt_layer_spec;

/* A spec's rate for its default optimizer, SGD, where it names neither. */
#define PT_SPEC_SGD_LR 0.01f

/* Training defaults a preset brings; flags override them. */
typedef struct {
  char dataset[24];
  char optimizer[16];
  float lr; /* NaN: not given (PT_SPEC_SGD_LR for SGD, else PyTorch's default for the optimizer) */
  int batch, test_batch;
  char scheduler[16];
  float gamma;
  float momentum, weight_decay;
} pt_train_defaults;

#define PT_ORIGIN_LEN 512

typedef struct {
  char name[PT_NAME_LEN];
  /* What the text came from ("model.txt", a preset's or a checkpoint's
   * name): shape errors found when the model is built name it and the
   * layer's line, as the parser's own errors do. */
  char origin[PT_ORIGIN_LEN];
  int in_c, in_h, in_w;
  int nlayers;
  pt_layer_spec layers[PT_MAX_LAYERS];
  pt_loss_kind loss;
  float mean[3], std[3]; /* normalisation per input channel (0, 1 = none) */
  int crop_pad, hflip;   /* training augmentation */
  pt_train_defaults defaults;
} pt_model_spec;

/* Parses text; origin names it in messages ("model.txt"). */
pt_status pt_spec_parse(const char *text, const char *origin, pt_model_spec *spec);
pt_status pt_spec_parse_file(const char *path, pt_model_spec *spec);
/* A spec file's text (malloc'd, NUL-terminated; at most 64 KiB, no binary). */
pt_status pt_spec_read_file(const char *path, char **text);
const char *pt_layer_kind_name(pt_layer_kind kind);
const char *pt_loss_kind_name(pt_loss_kind kind);

#endif
