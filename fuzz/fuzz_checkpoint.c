/* libFuzzer target for the checkpoint reader (--resume): a generation
 * directory holding a valid model.safetensors and the input as
 * state.safetensors, or the other way round (the input's first byte
 * chooses), read by pt_checkpoint_resume into a small model and its Adam
 * state. Whatever it is given, it refuses with an error or accepts a
 * position that makes sense; never a memory error (ASan) or a crash.
 *
 * Seed with both files of a real checkpoint (fuzz/corpus/fuzz_checkpoint).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/spec.h"
#include "train/checkpoint.h"
#include "util/file.h"

static char dir[64], gen[128];
static pt_model *model;
static pt_optimizer opt;
static uint8_t *good[2]; /* model.safetensors, state.safetensors of a real save */
static size_t good_size[2];
static const char *const files[2] = {"model.safetensors", "state.safetensors"};

static void put(const char *name, const void *data, size_t size) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", gen, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size) abort();
  fclose(f);
}

static void cleanup(void) {
  char path[256];
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", gen, files[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  unlink(path);
  rmdir(gen);
  rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  pt_model_spec spec;
  if (pt_spec_parse("name fz\ninput 1 4 4\nflatten\nlinear fc out=3\nloss cross-entropy\n", "fuzz", &spec) != PT_OK ||
      pt_model_create(&model, &spec, 4) != PT_OK)
    abort();
  pt_model_init(model, 1);
  pt_opt_config c;
  pt_opt_config_defaults(&c, PT_OPT_ADAM);
  c.lr = 0.01f;
  if (pt_optimizer_init(&opt, &c, model->nparam_total) != PT_OK) abort();
  snprintf(dir, sizeof dir, "/tmp/fuzz_checkpoint.XXXXXX");
  if (!mkdtemp(dir)) abort();
  pt_train_position pos = {.next_epoch = 0, .next_batch = 1, .step = 1, .seed = 1, .batch_size = 4, .world = 1};
  if (pt_checkpoint_save(dir, model, &opt, &pos, NULL, 1, NULL) != PT_OK) abort();
  atexit(cleanup);
  snprintf(gen, sizeof gen, "%s/step-000000000001", dir);
  char path[256];
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", gen, files[i]);
    if (pt_read_file(path, &good[i], &good_size[i]) != PT_OK) abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const int which = data[0] & 1; /* the file the input replaces */
  put(files[which], data + 1, size - 1);
  put(files[!which], good[!which], good_size[!which]);
  pt_train_position pos;
  char note[512];
  if (pt_checkpoint_resume(dir, model, &opt, &pos, note, sizeof note, NULL) == PT_OK) {
    /* accepted: the numbers a resume goes on from are in range */
    if (pos.batch_size < 1 || pos.world < 1 || pos.next_epoch < 0 || pos.next_batch < 0 || pos.step < 0) abort();
  }
  return 0;
}
