/* safetensors files: an 8-byte little-endian header length, a JSON header
 * mapping tensor names to {dtype, shape, data_offsets}, an optional
 * "__metadata__" object of string values, then the raw little-endian data.
 * This is the format PyTorch's safetensors.torch.load_file reads.
 *
 * The reader trusts nothing: a header that lies about lengths, offsets that
 * overlap or leave the file, a shape that disagrees with its byte count, or
 * an unknown dtype are errors naming the tensor and what was expected.
 */
#ifndef PT_IO_SAFETENSORS_H
#define PT_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "util/error.h"

#define PT_ST_MAX_DIMS 8

typedef enum { PT_ST_F32, PT_ST_F64, PT_ST_I64, PT_ST_I32, PT_ST_U8, PT_ST_F16, PT_ST_BF16 } pt_st_dtype;

typedef struct {
  char *name;
  pt_st_dtype dtype;
  int ndim;
  int64_t shape[PT_ST_MAX_DIMS];
  size_t nbytes;
  const uint8_t *data; /* points into the file buffer */
} pt_st_tensor;

typedef struct {
  uint8_t *buf; size_t len;  /* whole file */
  int count;
  pt_st_tensor *tensors;
  int meta_count;
  char **meta_keys, **meta_values;
} pt_st_file;

pt_status pt_st_read(const char *path, pt_st_file *f);
pt_status pt_st_parse(const uint8_t *buf, size_t len, const char *name, pt_st_file *f); /* copies buf */
void pt_st_free(pt_st_file *f);
const pt_st_tensor *pt_st_find(const pt_st_file *f, const char *name);
const char *pt_st_meta(const pt_st_file *f, const char *key); /* NULL if absent */
size_t pt_st_numel(const pt_st_tensor *t);
/* "F32", "F64", ... as written in headers; NULL for a value outside the enum. */
const char *pt_st_dtype_name(pt_st_dtype dtype);
/* Bytes per element; 0 for a value outside the enum. */
size_t pt_st_dtype_size(pt_st_dtype dtype);
/* Copies tensor name into dst as f32 (converting from f64/i64/i32/u8), checking
 * that it has exactly numel elements. Errors name the tensor and the shapes. */
pt_status pt_st_get_f32(const pt_st_file *f, const char *name, float *dst, size_t numel);

/* Checksums: a writer given pt_st_writer_checksum(w, KEY) stores under
 * metadata KEY the CRC-32 (8 lowercase hex digits) of the whole file as
 * written with those digits as "00000000". pt_st_verify_checksum checks
 * it: PT_OK where it matches or the file has no KEY (files of other
 * writers, and of earlier versions); otherwise PT_ERR_FORMAT naming the
 * file, both CRCs and what that means. KEY: letters, digits, '.', '_', '-'. */
#define PT_ST_CHECKSUM_ZERO "00000000"
pt_status pt_st_verify_checksum(const pt_st_file *f, const char *file, const char *key);
/* The 8 digits of "KEY":"hhhhhhhh" in a header's text, or NULL; for the
 * writer and the reader, which must agree on where they are. */
char *pt_st_checksum_digits(char *header, size_t len, const char *key);

/* Writer: collect tensors (data is referenced, not copied, until write), then
 * write atomically: PATH.tmp, fsync, rename, fsync of the directory. */
typedef struct pt_st_writer pt_st_writer;
pt_st_writer *pt_st_writer_new(void);
pt_status pt_st_writer_add(pt_st_writer *w, const char *name, pt_st_dtype dtype, int ndim,
                           const int64_t *shape, const void *data);
pt_status pt_st_writer_meta(pt_st_writer *w, const char *key, const char *value);
/* Stores the file's CRC-32 under metadata key (see above) when written. */
pt_status pt_st_writer_checksum(pt_st_writer *w, const char *key);
pt_status pt_st_writer_write(pt_st_writer *w, const char *path);
void pt_st_writer_free(pt_st_writer *w);

#endif
