/* safetensors reader (the writer is safetensors_writer.c).
 *
 * The whole file is read into one buffer that the pt_st_file owns, and tensor
 * data pointers point into it, so a loaded checkpoint costs one allocation and
 * no copies. Those pointers may be unaligned (the header length is whatever
 * the producer chose), so element access always goes through memcpy.
 *
 * Validation is complete before anything is handed out: every entry is
 * checked for types, dtype, shape and byte count, offsets must stay inside the
 * data buffer, names must be unique and byte ranges must not overlap. Offsets
 * and dimensions arrive as JSON numbers, which cJSON keeps as doubles, so
 * integers above 2^53 are rejected rather than silently rounded. Uniqueness
 * and overlap are checked by sorting, not pairwise, so a hostile header with
 * millions of entries costs n log n, not n^2.
 *
 * cJSON is given a NUL-terminated private copy of the header: its parser is
 * bounded by the length, but the extra terminator makes any slip in that
 * bound harmless.
 */
#include "io/safetensors.h"

#include "util/file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader copies it without swapping"
#endif

/* The reference implementation's limit; a larger header is an attack, not a model. */
#define PT_ST_MAX_HEADER 100000000ull
/* Largest integer every JSON number (a double in cJSON) represents exactly. */
#define PT_ST_MAX_JSON_INT 9007199254740992ull

static const char *const dtype_names[] = {"F32", "F64", "I64", "I32", "U8", "F16", "BF16"};
static const size_t dtype_sizes[] = {4, 8, 8, 4, 1, 2, 2};
#define PT_ST_NDTYPES ((int)(sizeof dtype_sizes / sizeof dtype_sizes[0]))

const char *pt_st_dtype_name(pt_st_dtype dtype) {
  return (int)dtype >= 0 && (int)dtype < PT_ST_NDTYPES ? dtype_names[dtype] : NULL;
}

size_t pt_st_dtype_size(pt_st_dtype dtype) {
  return (int)dtype >= 0 && (int)dtype < PT_ST_NDTYPES ? dtype_sizes[dtype] : 0;
}

/* "[32,1,3,3]"; truncated with "..." if it does not fit, never overflowing. */
static void format_shape(char *out, size_t cap, const int64_t *shape, int ndim) {
  size_t n = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%" PRId64, i ? "," : "", shape[i]);
  if (n < cap) snprintf(out + n, cap - n, "]");
  else if (cap >= 4) strcpy(out + cap - 4, "...");
}

size_t pt_st_numel(const pt_st_tensor *t) {
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  return n;
}

/* A JSON number that is a non-negative integer exactly representable. */
static int json_uint(const cJSON *v, uint64_t *out) {
  if (!cJSON_IsNumber(v)) return 0;
  double d = v->valuedouble;
  if (!(d >= 0.0) || d > (double)PT_ST_MAX_JSON_INT) return 0; /* also rejects NaN */
  uint64_t u = (uint64_t)d;
  if ((double)u != d) return 0;
  *out = u;
  return 1;
}

static const char *json_kind(const cJSON *v) {
  if (!v) return "missing";
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsNull(v)) return "null";
  return "of an unknown kind";
}

/* Validates one header entry against a data buffer of data_len bytes and fills
 * t (except data) and the entry's byte range. */
static pt_status parse_entry(const cJSON *e, const char *file, uint64_t data_len,
                             pt_st_tensor *t, uint64_t range[2]) {
  const char *name = t->name;
  if (!cJSON_IsObject(e))
    return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s': entry is %s, expected an object", file, name,
                   json_kind(e));

  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  if (!cJSON_IsString(dt) || !dt->valuestring)
    return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s': dtype is %s, expected a string", file, name,
                   json_kind(dt));
  int d = 0;
  while (d < PT_ST_NDTYPES && strcmp(dt->valuestring, dtype_names[d]) != 0) d++;
  if (d == PT_ST_NDTYPES)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: tensor '%s': unknown dtype \"%.32s\", expected F32, F64, F16, BF16, I64, I32 or U8",
                   file, name, dt->valuestring);
  t->dtype = (pt_st_dtype)d;

  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
  if (!cJSON_IsArray(shape))
    return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s': shape is %s, expected an array", file, name,
                   json_kind(shape));
  uint64_t numel = 1;
  int overflow = 0, has_zero = 0;
  const cJSON *dim;
  t->ndim = 0;
  cJSON_ArrayForEach(dim, shape) {
    if (t->ndim == PT_ST_MAX_DIMS)
      return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s': shape has more than %d dims", file, name,
                     PT_ST_MAX_DIMS);
    uint64_t v;
    if (!json_uint(dim, &v)) {
      if (cJSON_IsNumber(dim))
        return pt_fail(PT_ERR_FORMAT,
                       "%s: tensor '%s': shape dim %d is %.17g, expected a non-negative integer "
                       "up to 2^53",
                       file, name, t->ndim, dim->valuedouble);
      return pt_fail(PT_ERR_FORMAT,
                     "%s: tensor '%s': shape dim %d is %s, expected a non-negative integer", file,
                     name, t->ndim, json_kind(dim));
    }
    t->shape[t->ndim++] = (int64_t)v;
    overflow |= __builtin_mul_overflow(numel, v, &numel);
    has_zero |= v == 0;
  }
  /* A zero dim makes the tensor empty however large the others are; the
   * running product may have overflowed before reaching it. */
  if (has_zero) {
    numel = 0;
    overflow = 0;
  }
  char shp[128];
  format_shape(shp, sizeof shp, t->shape, t->ndim);
  uint64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(numel, (uint64_t)dtype_sizes[d], &nbytes);
  if (overflow)
    return pt_fail(PT_ERR_FORMAT, "%s: tensor '%s': shape %s has more bytes than 2^64", file, name,
                   shp);

  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets is %s, expected an array [begin, end]", file,
                   name, cJSON_IsArray(offs) ? "an array of the wrong length" : json_kind(offs));
  for (int i = 0; i < 2; i++) {
    const cJSON *v = cJSON_GetArrayItem(offs, i);
    if (json_uint(v, &range[i])) continue;
    if (cJSON_IsNumber(v))
      return pt_fail(PT_ERR_FORMAT,
                     "%s: tensor '%s': data_offsets[%d] is %.17g, expected a non-negative "
                     "integer up to 2^53",
                     file, name, i, v->valuedouble);
    return pt_fail(PT_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets[%d] is %s, expected a non-negative integer",
                   file, name, i, json_kind(v));
  }
  if (range[0] > range[1])
    return pt_fail(PT_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] has begin > end",
                   file, name, range[0], range[1]);
  if (range[1] > data_len)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets end %" PRIu64
                   " is past the data buffer of %" PRIu64 " bytes (truncated file?)",
                   file, name, range[1], data_len);
  if (range[1] - range[0] != nbytes)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                   " bytes, expected %" PRIu64 " (%s shape %s)",
                   file, name, range[0], range[1], range[1] - range[0], nbytes, dtype_names[d],
                   shp);
  t->nbytes = (size_t)nbytes;
  return PT_OK;
}

static pt_status parse_metadata(const cJSON *m, const char *file, pt_st_file *f) {
  if (!cJSON_IsObject(m))
    return pt_fail(PT_ERR_FORMAT, "%s: __metadata__ is %s, expected an object of strings", file,
                   json_kind(m));
  size_t n = 0;
  const cJSON *kv;
  cJSON_ArrayForEach(kv, m) n++;
  f->meta_keys = pt_calloc(n, sizeof(char *));
  f->meta_values = pt_calloc(n, sizeof(char *));
  if (!f->meta_keys || !f->meta_values) return PT_ERR_NOMEM;
  cJSON_ArrayForEach(kv, m) {
    if (!cJSON_IsString(kv) || !kv->valuestring)
      return pt_fail(PT_ERR_FORMAT, "%s: __metadata__ value of '%s' is %s, expected a string",
                     file, kv->string ? kv->string : "", json_kind(kv));
    int i = f->meta_count;
    f->meta_keys[i] = strdup(kv->string ? kv->string : "");
    f->meta_values[i] = strdup(kv->valuestring);
    if (!f->meta_keys[i] || !f->meta_values[i]) {
      free(f->meta_keys[i]);
      free(f->meta_values[i]);
      return pt_fail(PT_ERR_NOMEM, "%s: out of memory copying metadata", file);
    }
    f->meta_count++;
  }
  return PT_OK;
}

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sets *dup to a string that occurs twice among strs, or NULL if all differ. */
static pt_status find_duplicate(char **strs, int n, const char **dup) {
  *dup = NULL;
  if (n < 2) return PT_OK;
  char **sorted = pt_malloc((size_t)n * sizeof *sorted);
  if (!sorted) return PT_ERR_NOMEM;
  memcpy(sorted, strs, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
  for (int i = 1; i < n && !*dup; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) *dup = sorted[i];
  free(sorted);
  return PT_OK;
}

typedef struct {
  uint64_t begin, end;
  int index;
} byte_range;

static int cmp_range(const void *a, const void *b) {
  const byte_range *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->index - y->index;
}

/* Empty tensors occupy no bytes, so they overlap nothing wherever they point. */
static pt_status check_ranges(const pt_st_file *f, const uint64_t *ranges, uint64_t data_len, const char *file) {
  byte_range *r = pt_malloc((size_t)(f->count ? f->count : 1) * sizeof *r);
  if (!r) return PT_ERR_NOMEM;
  int n = 0;
  for (int i = 0; i < f->count; i++)
    if (ranges[2 * i] < ranges[2 * i + 1])
      r[n++] = (byte_range){ranges[2 * i], ranges[2 * i + 1], i};
  qsort(r, (size_t)n, sizeof *r, cmp_range);
  pt_status st = PT_OK;
  /* Sorted by begin and pairwise disjoint so far, so the previous range has
   * the largest end seen: comparing neighbours suffices. */
  for (int i = 1; i < n; i++) {
    if (r[i].begin < r[i - 1].end) {
      st = pt_fail(PT_ERR_FORMAT,
                   "%s: tensor '%s' (bytes [%" PRIu64 ", %" PRIu64 "]) overlaps tensor '%s' "
                   "(bytes [%" PRIu64 ", %" PRIu64 "]), expected disjoint data_offsets",
                   file, f->tensors[r[i].index].name, r[i].begin, r[i].end,
                   f->tensors[r[i - 1].index].name, r[i - 1].begin, r[i - 1].end);
      break;
    }
  }
  /* Bytes after the last tensor's data: the reference reader refuses such
   * a file (its buffer must be covered), and they are at best a leftover of
   * a longer file written over in place. */
  uint64_t last = 0;
  for (int i = 0; i < n; i++)
    if (r[i].end > last) last = r[i].end;
  if (st == PT_OK && last < data_len)
    st = pt_fail(PT_ERR_FORMAT, "%s: %" PRIu64 " bytes after the last tensor's data, expected none (the data "
                 "ends at byte %" PRIu64 " of %" PRIu64 ")", file, data_len - last, last, data_len);
  free(r);
  return st;
}

static pt_status parse_header(const cJSON *root, const char *file, uint64_t data_off,
                              pt_st_file *f) {
  if (!cJSON_IsObject(root))
    return pt_fail(PT_ERR_FORMAT, "%s: header is %s, expected a JSON object", file,
                   json_kind(root));
  uint64_t data_len = f->len - data_off;
  size_t n = 0;
  int have_meta = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, root) {
    if (e->string && strcmp(e->string, "__metadata__") == 0) {
      if (have_meta) return pt_fail(PT_ERR_FORMAT, "%s: header has two __metadata__ keys", file);
      have_meta = 1;
      PT_TRY(parse_metadata(e, file, f));
    } else {
      n++;
    }
  }
  if (n > (size_t)INT32_MAX) return pt_fail(PT_ERR_FORMAT, "%s: too many tensors", file);
  f->tensors = pt_calloc(n, sizeof *f->tensors);
  uint64_t *ranges = pt_calloc(n, 2 * sizeof *ranges);
  char **names = pt_calloc(n, sizeof *names);
  pt_status st = (f->tensors && ranges && names) ? PT_OK : PT_ERR_NOMEM;
  cJSON_ArrayForEach(e, root) {
    if (st != PT_OK) break;
    if (e->string && strcmp(e->string, "__metadata__") == 0) continue;
    pt_st_tensor *t = &f->tensors[f->count];
    t->name = strdup(e->string ? e->string : "");
    if (!t->name) {
      st = pt_fail(PT_ERR_NOMEM, "%s: out of memory copying tensor names", file);
      break;
    }
    names[f->count] = t->name;
    f->count++; /* counted before validation so pt_st_free releases the name */
    uint64_t *range = &ranges[2 * (f->count - 1)];
    st = parse_entry(e, file, data_len, t, range);
    if (st == PT_OK) t->data = f->buf + data_off + range[0];
  }
  if (st == PT_OK) {
    const char *dup;
    st = find_duplicate(names, f->count, &dup);
    if (st == PT_OK && dup)
      st = pt_fail(PT_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", file, dup);
  }
  if (st == PT_OK && f->meta_count > 1) {
    const char *dup;
    st = find_duplicate(f->meta_keys, f->meta_count, &dup);
    if (st == PT_OK && dup)
      st = pt_fail(PT_ERR_FORMAT, "%s: __metadata__ key '%s' appears twice", file, dup);
  }
  if (st == PT_OK) st = check_ranges(f, ranges, data_len, file);
  free(ranges);
  free(names);
  return st;
}

/* Takes ownership of buf whatever happens. */
static pt_status parse_owned(uint8_t *buf, size_t len, const char *file, pt_st_file *f) {
  memset(f, 0, sizeof *f);
  f->buf = buf;
  f->len = len;
  if (len < 8) {
    pt_st_free(f);
    return pt_fail(PT_ERR_FORMAT, "%s: file is %zu bytes, expected at least the 8-byte header length",
                   file, len);
  }
  /* PyTorch's own formats, which users hand over for safetensors most
   * often: said as such, rather than as an absurd header length. */
  /* A safetensors header length can begin with the same bytes (0x280 is
   * 80 02): its JSON's '{' right after the length tells them apart. */
  const int json_next = len > 8 && buf[8] == '{';
  const char *torch_kind = json_next                                      ? NULL
                           : !memcmp(buf, "PK\3\4", 4)                    ? "a zip archive"
                           : buf[0] == 0x80 && buf[1] >= 2 && buf[1] <= 5 ? "a Python pickle"
                                                                          : NULL;
  if (torch_kind) {
    pt_st_free(f);
    return pt_fail(PT_ERR_FORMAT,
                   "%s: %s, as torch.save writes (.pt, .pth), not safetensors; in PyTorch, "
                   "safetensors.torch.save_file(model.state_dict(), \"model.safetensors\") converts it",
                   file, torch_kind);
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n |= (uint64_t)buf[i] << (8 * i);
  /* A length past the file, and no '{' where the JSON would open: some
   * other file, said as what it looks like rather than as an absurd
   * length. */
  if (!json_next && (n > PT_ST_MAX_HEADER || n > len - 8)) {
    const char *kind = buf[0] == 0x1f && buf[1] == 0x8b                 ? "gzip data"
                       : !memcmp(buf, "\x89PNG", 4)                     ? "a PNG image"
                       : buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff ? "a JPEG image"
                       : !memcmp(buf, "\0\0\x08\x03", 4)                 ? "an IDX image file"
                       : !memcmp(buf, "\0\0\x08\x01", 4)                 ? "an IDX label file"
                                                                          : NULL;
    int text = 1;
    for (size_t i = 0; i < 8; i++) text &= buf[i] == '\n' || buf[i] == '\t' || (buf[i] >= 0x20 && buf[i] < 0x7f);
    pt_st_free(f);
    return pt_fail(PT_ERR_FORMAT, "%s: not a safetensors file: %s (a safetensors file begins with its header's length "
                   "and then its JSON, '{')", file, kind ? kind : text ? "text" : "its 9th byte is not '{'");
  }
  if (n > PT_ST_MAX_HEADER) {
    pt_st_free(f);
    return pt_fail(PT_ERR_FORMAT, "%s: header length %" PRIu64 " exceeds the limit of %llu bytes",
                   file, n, PT_ST_MAX_HEADER);
  }
  if (n > len - 8) {
    pt_st_free(f);
    return pt_fail(PT_ERR_FORMAT,
                   "%s: header length %" PRIu64 " is more than the %zu bytes after it (truncated file?)",
                   file, n, len - 8);
  }
  char *hdr = pt_malloc((size_t)n + 1);
  if (!hdr) {
    pt_st_free(f);
    return PT_ERR_NOMEM;
  }
  memcpy(hdr, buf + 8, (size_t)n);
  hdr[n] = 0;
  const char *end = NULL;
  /* cJSON writes a global error position on every parse: two threads
   * loading files at once (the library allows it) would race on it. */
  static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&parse_lock);
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
  pthread_mutex_unlock(&parse_lock);
  pt_status st = PT_OK;
  if (!root) {
    size_t at = end && end >= hdr && end <= hdr + n ? (size_t)(end - hdr) : 0;
    st = pt_fail(PT_ERR_FORMAT, "%s: header is not valid JSON (error near byte %zu of %" PRIu64 ")",
                 file, at, n);
  } else {
    /* Writers pad the header with spaces; anything else after the object
     * means the producer and we disagree about where the header ends. */
    for (const char *p = end; p < hdr + n; p++) {
      if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
        st = pt_fail(PT_ERR_FORMAT,
                     "%s: header has trailing bytes after the JSON object at byte %zu, expected only "
                     "space padding",
                     file, (size_t)(p - hdr));
        break;
      }
    }
  }
  if (st == PT_OK) st = parse_header(root, file, 8 + n, f);
  cJSON_Delete(root);
  free(hdr);
  if (st != PT_OK) pt_st_free(f);
  return st;
}

pt_status pt_st_parse(const uint8_t *buf, size_t len, const char *name, pt_st_file *f) {
  memset(f, 0, sizeof *f);
  if (!name) name = "<buffer>";
  if (!buf && len) return pt_fail(PT_ERR_ARG, "%s: NULL buffer of %zu bytes", name, len);
  uint8_t *copy = pt_malloc(len);
  if (!copy) return PT_ERR_NOMEM;
  if (len) memcpy(copy, buf, len);
  return parse_owned(copy, len, name, f);
}

pt_status pt_st_read(const char *path, pt_st_file *f) {
  memset(f, 0, sizeof *f);
  uint8_t *buf;
  size_t len;
  PT_TRY(pt_read_file(path, &buf, &len));
  return parse_owned(buf, len, path, f);
}

void pt_st_free(pt_st_file *f) {
  if (!f) return;
  for (int i = 0; i < f->count; i++) free(f->tensors[i].name);
  for (int i = 0; i < f->meta_count; i++) {
    free(f->meta_keys[i]);
    free(f->meta_values[i]);
  }
  free(f->tensors);
  free(f->meta_keys);
  free(f->meta_values);
  free(f->buf);
  memset(f, 0, sizeof *f);
}

const pt_st_tensor *pt_st_find(const pt_st_file *f, const char *name) {
  for (int i = 0; i < f->count; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}

const char *pt_st_meta(const pt_st_file *f, const char *key) {
  for (int i = 0; i < f->meta_count; i++)
    if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
  return NULL;
}

/* IEEE half precision, exactly (every half is a float): normal numbers
 * rebias the exponent, subnormals scale, infinities and NaN keep their
 * class and payload's top bits. */
static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h >> 15) << 31, e = h >> 10 & 0x1f, m = h & 0x3ff;
  uint32_t bits;
  if (e == 0x1f) {
    bits = sign | 0x7f800000u | m << 13;
  } else if (e) {
    bits = sign | (e + 112) << 23 | m << 13;
  } else {
    const float v = ldexpf((float)m, -24); /* subnormal, or zero */
    memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

pt_status pt_st_get_f32(const pt_st_file *f, const char *name, float *dst, size_t numel) {
  const pt_st_tensor *t = pt_st_find(f, name);
  if (!t) return pt_fail(PT_ERR_FORMAT, "%s: no such tensor in the file", name);
  size_t have = pt_st_numel(t);
  if (have != numel) {
    char shp[128];
    format_shape(shp, sizeof shp, t->shape, t->ndim);
    return pt_fail(PT_ERR_FORMAT, "%s: has %zu elements (shape %s), expected %zu", name, have, shp,
                   numel);
  }
  if (numel && !dst) return pt_fail(PT_ERR_ARG, "%s: NULL destination", name);
  const uint8_t *p = t->data;
  switch (t->dtype) {
    case PT_ST_F32:
      if (numel) memcpy(dst, p, numel * sizeof(float));
      break;
    case PT_ST_F64:
      for (size_t i = 0; i < numel; i++) {
        double v;
        memcpy(&v, p + 8 * i, 8);
        /* A finite value past float's range would become infinity, and be
         * reported as one the file does not hold. */
        if (isfinite(v) && fabs(v) > FLT_MAX)
          return pt_fail(PT_ERR_FORMAT, "%s: element %zu is %g, beyond the range of float32, to which F64 "
                         "tensors are converted", name, i, v);
        dst[i] = (float)v;
      }
      break;
    case PT_ST_BF16: /* the upper half of a float32 */
      for (size_t i = 0; i < numel; i++) {
        const uint32_t b = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
        memcpy(&dst[i], &b, 4);
      }
      break;
    case PT_ST_F16:
      for (size_t i = 0; i < numel; i++) dst[i] = half_to_float((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
      break;
    case PT_ST_I64:
      for (size_t i = 0; i < numel; i++) {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        dst[i] = (float)v;
      }
      break;
    case PT_ST_I32:
      for (size_t i = 0; i < numel; i++) {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        dst[i] = (float)v;
      }
      break;
    case PT_ST_U8:
      for (size_t i = 0; i < numel; i++) dst[i] = (float)p[i];
      break;
    default:
      return pt_fail(PT_ERR_STATE, "%s: invalid dtype %d", name, (int)t->dtype);
  }
  return PT_OK;
}

char *pt_st_checksum_digits(char *header, size_t len, const char *key) {
  char needle[160];
  const int n = snprintf(needle, sizeof needle, "\"%s\":\"", key);
  if (n < 0 || (size_t)n >= sizeof needle || len < (size_t)n + 9) return NULL;
  for (size_t i = 0; i + (size_t)n + 9 <= len; i++) {
    if (memcmp(header + i, needle, (size_t)n)) continue;
    char *d = header + i + n;
    if (d[8] != '"') return NULL;
    for (int k = 0; k < 8; k++)
      if (!((d[k] >= '0' && d[k] <= '9') || (d[k] >= 'a' && d[k] <= 'f'))) return NULL;
    return d;
  }
  return NULL;
}

pt_status pt_st_verify_checksum(const pt_st_file *f, const char *file, const char *key) {
  const char *want = pt_st_meta(f, key);
  if (!want) return PT_OK;
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->buf[i] << (8 * i);
  /* pt_st_read checked that the header fits in the file */
  char *digits = pt_st_checksum_digits((char *)f->buf + 8, (size_t)hlen, key);
  if (!digits || strlen(want) != 8 || memcmp(digits, want, 8))
    return pt_fail(PT_ERR_FORMAT,
                   "%s: metadata '%s'='%.32s' is not the 8 hex digits of a CRC-32 in the header that ptrain "
                   "writes: the file was damaged, or rewritten by another program",
                   file, key, want);
  const size_t at = (size_t)(digits - (char *)f->buf);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32_z(crc, f->buf, at);
  crc = crc32_z(crc, (const Bytef *)PT_ST_CHECKSUM_ZERO, 8);
  crc = crc32_z(crc, f->buf + at + 8, f->len - at - 8);
  char got[9];
  snprintf(got, sizeof got, "%08lx", (unsigned long)crc);
  if (memcmp(got, want, 8))
    return pt_fail(PT_ERR_FORMAT,
                   "%s: CRC-32 mismatch: the file's bytes give %s, its metadata '%s' records %s: the file was "
                   "damaged (disk, copy or transfer) or changed by another program after it was written",
                   file, got, key, want);
  return PT_OK;
}
