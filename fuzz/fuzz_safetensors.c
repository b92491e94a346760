/* libFuzzer target for the safetensors reader.
 *
 * Parses arbitrary bytes and, when they are accepted, converts every tensor to
 * f32: the conversion reads each tensor's full byte range, so an offset or
 * byte count that validation let through wrongly shows up as an ASan
 * out-of-bounds read rather than passing silently. Also asks for a wrong
 * element count, whose error path formats the shape.
 *
 * Seed with any valid file, e.g. one written by pt_st_writer_write.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pt_st_file f;
  if (pt_st_parse(data, size, "fuzz.safetensors", &f) != PT_OK) return 0;
  for (int i = 0; i < f.count; i++) {
    const pt_st_tensor *t = &f.tensors[i];
    size_t n = pt_st_numel(t);
    /* numel * 4 cannot overflow: validation tied numel to bytes in the input. */
    float *dst = malloc(n ? n * sizeof(float) : 1);
    if (!dst) break;
    if (pt_st_get_f32(&f, t->name, dst, n) != PT_OK) abort(); /* validated, must convert */
    (void)pt_st_get_f32(&f, t->name, dst, n + 1);
    free(dst);
  }
  for (int i = 0; i < f.meta_count; i++)
    if (pt_st_meta(&f, f.meta_keys[i]) == NULL) abort();
  pt_st_free(&f);
  return 0;
}
