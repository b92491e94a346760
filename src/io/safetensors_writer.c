/* safetensors writer (the reader is safetensors.c).
 *
 * Tensors are referenced, not copied, so saving a model costs no extra memory;
 * the caller keeps the data alive and unchanged until write returns.
 *
 * Layout: tensors with larger elements come first (stable in insertion order
 * otherwise), and the header is padded with spaces to a multiple of 8. With
 * the data buffer starting 8-aligned, every tensor then starts at a multiple
 * of its element size, so a reader that maps the file can use it in place.
 * This is the same choice the reference implementation makes.
 *
 * The header is built with cJSON so names and metadata are escaped correctly,
 * but integers are inserted as raw text: cJSON prints numbers via doubles and
 * may switch to exponent notation ("1e+15"), which strict readers such as the
 * Rust safetensors crate reject for sizes.
 *
 * The file goes through pt_atomic_file, so an interrupted or failed save
 * never destroys the previous checkpoint.
 *
 * A checksum (pt_st_writer_checksum) covers the whole file, header
 * included, so that a flipped bit in a metadata value (a step, a seed) is
 * caught as surely as one in the weights. The header cannot hold its own
 * CRC, so the CRC is taken over the file with the value's 8 hex digits
 * written as "00000000", then the digits are put in: the reader zeroes
 * them again to check (pt_st_verify_checksum).
 */
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/atomic_file.h"

#define PT_STW_MAX_HEADER 100000000ull  /* what our reader and the reference accept */
#define PT_STW_MAX_DIM 9007199254740992ll /* 2^53: larger cannot be read back exactly */

typedef struct {
  char *name;
  pt_st_dtype dtype;
  int ndim;
  int64_t shape[PT_ST_MAX_DIMS];
  const void *data;
  size_t nbytes;
  int index; /* insertion order, to make the layout sort stable */
} entry;

typedef struct {
  char *key, *value;
} meta_kv;

struct pt_st_writer {
  entry *t;
  int count, cap;
  meta_kv *meta;
  int mcount, mcap;
  char *checksum_key; /* metadata key of the file's CRC-32, or NULL */
};

pt_st_writer *pt_st_writer_new(void) { return pt_calloc(1, sizeof(pt_st_writer)); }

void pt_st_writer_free(pt_st_writer *w) {
  if (!w) return;
  for (int i = 0; i < w->count; i++) free(w->t[i].name);
  for (int i = 0; i < w->mcount; i++) {
    free(w->meta[i].key);
    free(w->meta[i].value);
  }
  free(w->t);
  free(w->meta);
  free(w->checksum_key);
  free(w);
}

/* Returns arr with room for count + 1 elem-sized items (cap doubles), or
 * NULL with a message, arr then being unchanged and still owned by the caller. */
static void *grow(void *arr, int *cap, int count, size_t elem) {
  if (count < *cap) return arr;
  if (*cap > INT32_MAX / 2) {
    pt_fail(PT_ERR_NOMEM, "safetensors writer: too many entries");
    return NULL;
  }
  int ncap = *cap ? *cap * 2 : 16;
  void *p = realloc(arr, (size_t)ncap * elem);
  if (!p) {
    pt_fail(PT_ERR_NOMEM, "safetensors writer: out of memory");
    return NULL;
  }
  *cap = ncap;
  return p;
}

pt_status pt_st_writer_add(pt_st_writer *w, const char *name, pt_st_dtype dtype, int ndim,
                           const int64_t *shape, const void *data) {
  if (!w) return pt_fail(PT_ERR_ARG, "safetensors writer: NULL writer");
  if (!name) return pt_fail(PT_ERR_ARG, "safetensors writer: NULL tensor name");
  if (strcmp(name, "__metadata__") == 0)
    return pt_fail(PT_ERR_ARG, "safetensors writer: '__metadata__' is reserved, not a tensor name");
  size_t esize = pt_st_dtype_size(dtype);
  if (!esize) return pt_fail(PT_ERR_ARG, "%s: invalid dtype %d", name, (int)dtype);
  if (ndim < 0 || ndim > PT_ST_MAX_DIMS)
    return pt_fail(PT_ERR_ARG, "%s: %d dims, expected 0 to %d", name, ndim, PT_ST_MAX_DIMS);
  if (ndim > 0 && !shape) return pt_fail(PT_ERR_ARG, "%s: NULL shape with %d dims", name, ndim);
  size_t nbytes = esize;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || shape[i] > PT_STW_MAX_DIM)
      return pt_fail(PT_ERR_ARG, "%s: dim %d is %" PRId64 ", expected 0 to 2^53", name, i,
                     shape[i]);
    if (__builtin_mul_overflow(nbytes, (size_t)shape[i], &nbytes))
      return pt_fail(PT_ERR_ARG, "%s: shape has more bytes than fit in size_t", name);
  }
  if (nbytes && !data) return pt_fail(PT_ERR_ARG, "%s: NULL data for %zu bytes", name, nbytes);
  for (int i = 0; i < w->count; i++)
    if (strcmp(w->t[i].name, name) == 0)
      return pt_fail(PT_ERR_ARG, "%s: tensor added twice", name);
  entry *grown = grow(w->t, &w->cap, w->count, sizeof *w->t);
  if (!grown) return PT_ERR_NOMEM;
  w->t = grown;
  entry *e = &w->t[w->count];
  memset(e, 0, sizeof *e);
  e->name = strdup(name);
  if (!e->name) return pt_fail(PT_ERR_NOMEM, "%s: out of memory", name);
  e->dtype = dtype;
  e->ndim = ndim;
  if (ndim) memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
  e->data = data;
  e->nbytes = nbytes;
  e->index = w->count;
  w->count++;
  return PT_OK;
}

/* A later value for the same key replaces the earlier, like assigning into
 * the dict that Python's save_file takes. */
pt_status pt_st_writer_meta(pt_st_writer *w, const char *key, const char *value) {
  if (!w || !key || !value) return pt_fail(PT_ERR_ARG, "safetensors writer: NULL metadata argument");
  char *v = strdup(value);
  if (!v) return pt_fail(PT_ERR_NOMEM, "metadata %s: out of memory", key);
  for (int i = 0; i < w->mcount; i++) {
    if (strcmp(w->meta[i].key, key) == 0) {
      free(w->meta[i].value);
      w->meta[i].value = v;
      return PT_OK;
    }
  }
  meta_kv *grown = grow(w->meta, &w->mcap, w->mcount, sizeof *w->meta);
  if (!grown) {
    free(v);
    return PT_ERR_NOMEM;
  }
  w->meta = grown;
  char *k = strdup(key);
  if (!k) {
    free(v);
    return pt_fail(PT_ERR_NOMEM, "metadata %s: out of memory", key);
  }
  w->meta[w->mcount++] = (meta_kv){k, v};
  return PT_OK;
}

pt_status pt_st_writer_checksum(pt_st_writer *w, const char *key) {
  if (!w || !key) return pt_fail(PT_ERR_ARG, "safetensors writer: NULL checksum argument");
  /* Characters JSON never escapes: the reader finds the key's bytes as written. */
  if (!*key || strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(key))
    return pt_fail(PT_ERR_ARG, "safetensors writer: checksum key '%s': expected letters, digits, '.', '_', '-'", key);
  char *k = strdup(key);
  if (!k) return pt_fail(PT_ERR_NOMEM, "checksum key %s: out of memory", key);
  pt_status st = pt_st_writer_meta(w, key, PT_ST_CHECKSUM_ZERO);
  if (st != PT_OK) {
    free(k);
    return st;
  }
  free(w->checksum_key);
  w->checksum_key = k;
  return PT_OK;
}

static int cmp_layout(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  size_t sx = pt_st_dtype_size(x->dtype), sy = pt_st_dtype_size(y->dtype);
  if (sx != sy) return sx > sy ? -1 : 1;
  return x->index - y->index;
}

/* cJSON's constructors return NULL on allocation failure and its Add
 * functions report failure; both are folded into one flag so the builder
 * below stays readable. */
static void add_item(cJSON *obj, const char *key, cJSON *item, int *ok) {
  if (!item) {
    *ok = 0;
    return;
  }
  if (!*ok || !(key ? cJSON_AddItemToObject(obj, key, item) : cJSON_AddItemToArray(obj, item))) {
    cJSON_Delete(item);
    *ok = 0;
  }
}

static cJSON *raw_uint(uint64_t v) {
  char s[24];
  snprintf(s, sizeof s, "%" PRIu64, v);
  return cJSON_CreateRaw(s);
}

/* Returns the header JSON (free with cJSON_free), or NULL. */
static char *build_header(const pt_st_writer *w, entry **order) {
  int ok = 1;
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  if (w->mcount) {
    cJSON *meta = cJSON_CreateObject();
    add_item(root, "__metadata__", meta, &ok);
    for (int i = 0; ok && i < w->mcount; i++)
      add_item(meta, w->meta[i].key, cJSON_CreateString(w->meta[i].value), &ok);
  }
  uint64_t off = 0;
  for (int i = 0; ok && i < w->count; i++) {
    const entry *e = order[i];
    cJSON *obj = cJSON_CreateObject();
    add_item(root, e->name, obj, &ok);
    if (!ok) break;
    add_item(obj, "dtype", cJSON_CreateString(pt_st_dtype_name(e->dtype)), &ok);
    cJSON *shape = cJSON_CreateArray();
    add_item(obj, "shape", shape, &ok);
    for (int d = 0; ok && d < e->ndim; d++) add_item(shape, NULL, raw_uint((uint64_t)e->shape[d]), &ok);
    cJSON *offs = cJSON_CreateArray();
    add_item(obj, "data_offsets", offs, &ok);
    if (ok) add_item(offs, NULL, raw_uint(off), &ok);
    off += e->nbytes;
    if (ok) add_item(offs, NULL, raw_uint(off), &ok);
  }
  char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return s;
}

pt_status pt_st_writer_write(pt_st_writer *w, const char *path) {
  if (!w || !path) return pt_fail(PT_ERR_ARG, "safetensors writer: NULL argument");
  uint64_t total = 0;
  for (int i = 0; i < w->count; i++)
    if (__builtin_add_overflow(total, (uint64_t)w->t[i].nbytes, &total))
      return pt_fail(PT_ERR_ARG, "%s: tensors total more than 2^64 bytes", path);
  if (total > (uint64_t)PT_STW_MAX_DIM)
    return pt_fail(PT_ERR_ARG, "%s: %" PRIu64 " bytes of tensors, more than offsets can express",
                   path, total);

  entry **order = pt_malloc((size_t)(w->count ? w->count : 1) * sizeof *order);
  if (!order) return PT_ERR_NOMEM;
  for (int i = 0; i < w->count; i++) order[i] = &w->t[i];
  qsort(order, (size_t)w->count, sizeof *order, cmp_layout);

  char *hdr = build_header(w, order);
  if (!hdr) {
    free(order);
    return pt_fail(PT_ERR_NOMEM, "%s: out of memory building the header", path);
  }
  size_t hlen = strlen(hdr);
  size_t padded = (hlen + 7) & ~(size_t)7;
  if (padded > PT_STW_MAX_HEADER) {
    cJSON_free(hdr);
    free(order);
    return pt_fail(PT_ERR_ARG, "%s: header of %zu bytes exceeds the %llu-byte limit readers accept",
                   path, padded, PT_STW_MAX_HEADER);
  }

  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
  static const char spaces[] = "       "; /* padding is at most 7 */
  if (w->checksum_key) {
    char *digits = pt_st_checksum_digits(hdr, hlen, w->checksum_key);
    if (!digits) { /* the key was replaced by a later pt_st_writer_meta */
      cJSON_free(hdr);
      free(order);
      return pt_fail(PT_ERR_ARG, "%s: metadata '%s' was given a value; it is the file's checksum", path,
                     w->checksum_key);
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32_z(crc, len8, sizeof len8);
    crc = crc32_z(crc, (const Bytef *)hdr, hlen);
    crc = crc32_z(crc, (const Bytef *)spaces, padded - hlen);
    for (int i = 0; i < w->count; i++)
      if (order[i]->nbytes) crc = crc32_z(crc, order[i]->data, order[i]->nbytes);
    char hex[9];
    snprintf(hex, sizeof hex, "%08lx", (unsigned long)crc);
    memcpy(digits, hex, 8);
  }

  pt_atomic_file *af = NULL;
  pt_status st = pt_atomic_file_open(path, &af);
  if (st == PT_OK) st = pt_atomic_file_write(af, len8, sizeof len8);
  if (st == PT_OK) st = pt_atomic_file_write(af, hdr, hlen);
  if (st == PT_OK) st = pt_atomic_file_write(af, spaces, padded - hlen);
  for (int i = 0; st == PT_OK && i < w->count; i++)
    st = pt_atomic_file_write(af, order[i]->data, order[i]->nbytes);
  if (st == PT_OK) st = pt_atomic_file_commit(af);
  else pt_atomic_file_abort(af);
  cJSON_free(hdr);
  free(order);
  return st;
}
