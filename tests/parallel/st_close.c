/* st_close A.safetensors B.safetensors RTOL: exits 0 when both files hold
 * the same tensors (names, types, shapes), integer ones equal, and each float32 tensor of A is
 * within RTOL of B's, as the relative error of numerical linear algebra:
 * ||a - b|| / ||b|| (2-norms over the tensor); else prints the worst
 * tensor and exits 1. An elementwise ratio would be dominated by the few
 * weights whose gradients are sums that nearly cancel: there the order of
 * a float sum, which differs between batch splits, shows up most, and
 * Adam's normalised step amplifies it. The equivalence tests compare
 * checkpoints of differently parallel runs with it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: st_close A.safetensors B.safetensors RTOL\n");
    return 2;
  }
  const double rtol = strtod(argv[3], NULL);
  pt_st_file a, b;
  if (pt_st_read(argv[1], &a) != PT_OK || pt_st_read(argv[2], &b) != PT_OK) {
    fprintf(stderr, "st_close: %s\n", pt_error_message());
    return 2;
  }
  int bad = a.count != b.count;
  if (bad) fprintf(stderr, "st_close: %d tensors in %s, %d in %s\n", a.count, argv[1], b.count, argv[2]);
  double worst = 0.0;
  const char *worst_name = "";
  for (int i = 0; i < a.count && !bad; i++) {
    const pt_st_tensor *ta = &a.tensors[i], *tb = pt_st_find(&b, ta->name);
    if (!tb || tb->dtype != ta->dtype || tb->nbytes != ta->nbytes) {
      fprintf(stderr, "st_close: %s: missing from %s or of another type or size\n", ta->name, argv[2]);
      bad = 1;
      break;
    }
    if (ta->dtype != PT_ST_F32) { /* counters such as num_batches_tracked: exactly equal */
      if (memcmp(ta->data, tb->data, ta->nbytes)) {
        fprintf(stderr, "st_close: %s differs\n", ta->name);
        bad = 1;
      }
      continue;
    }
    const size_t n = pt_st_numel(ta);
    double diff = 0.0, scale = 0.0;
    for (size_t k = 0; k < n; k++) {
      float x, y;
      memcpy(&x, ta->data + 4 * k, 4);
      memcpy(&y, tb->data + 4 * k, 4);
      if (!isfinite(x) || !isfinite(y)) diff = INFINITY;
      else diff += ((double)x - y) * ((double)x - y);
      scale += (double)y * y;
    }
    const double rel = scale > 0 ? sqrt(diff / scale) : sqrt(diff);
    if (!(rel <= worst)) {
      worst = rel;
      worst_name = ta->name;
    }
  }
  if (!bad) {
    printf("largest relative difference %.3g (%s), limit %.3g\n", worst, worst_name, rtol);
    bad = !(worst <= rtol);
  }
  pt_st_free(&a);
  pt_st_free(&b);
  return bad ? 1 : 0;
}
