/* Whether two parsed specs describe the same computation (see the .c). */
#ifndef PT_NN_SPEC_COMPARE_H
#define PT_NN_SPEC_COMPARE_H

#include <stddef.h>
#include "nn/spec.h"

/* 0 if the same; else 1, with what says how b differs from a
 * ("layer 3 (linear fc2) has out=20, not 10"). */
int pt_spec_differs(const pt_model_spec *a, const pt_model_spec *b, char *what, size_t n);

#endif
