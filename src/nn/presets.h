/* The tutorials' models, by name. */
#ifndef PT_NN_PRESETS_H
#define PT_NN_PRESETS_H

#include "nn/spec.h"

typedef struct {
  const char *name;
  const char *summary; /* one line: where it comes from */
  const char *text;    /* the model spec */
} pt_preset;

int pt_preset_count(void);
const pt_preset *pt_preset_at(int i);
const pt_preset *pt_preset_find(const char *name);
/* Parses a preset's spec; PT_ERR_ARG listing the presets if name is unknown. */
pt_status pt_preset_spec(const char *name, pt_model_spec *spec);

#endif
