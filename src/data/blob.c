/* Whole-file reads and gzip decompression; see blob.h for the contract.
 *
 * Decompression runs zlib's inflate with gzip framing (windowBits 16+15), so
 * zlib itself verifies each member's CRC-32 and length trailer: a flipped byte
 * anywhere in the compressed data is caught even when the damaged deflate
 * stream still decodes. The output buffer starts at the size the trailer
 * claims (a hint only) and doubles up to max_out. A stream that ends early
 * shows up as inflate asking for input that is not there (Z_BUF_ERROR with
 * output space left), which is reported as truncation rather than looping.
 */
#include "data/blob.h"

#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int pt_blob_is_gzip(const uint8_t *buf, size_t len) {
  return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
}

/* zlib counts in uInt (32 bits); feed it at most this much at a time. */
static uInt clamp_uint(size_t n) { return n > UINT_MAX ? UINT_MAX : (uInt)n; }

/* The uncompressed size the last member's trailer claims, or 0. */
static size_t size_hint(const uint8_t *in, size_t len) {
  if (len < 18) return 0; /* 10-byte header + empty deflate + 8-byte trailer */
  const uint8_t *t = in + len - 4;
  return (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
}

pt_status pt_blob_gunzip(const uint8_t *in, size_t len, const char *name, size_t max_out,
                         uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  if (!pt_blob_is_gzip(in, len))
    return pt_fail(PT_ERR_FORMAT, "%s: not a gzip file (expected magic 1f 8b)", name);
  if (max_out == 0) return pt_fail(PT_ERR_ARG, "%s: gunzip limit must be positive", name);

  /* Deflate expands at most about 1032:1, so a larger claim is a lie and is
   * not allowed to size the first allocation. */
  size_t cap = size_hint(in, len);
  if (cap > (len < SIZE_MAX / 1032 ? len * 1032 : SIZE_MAX)) cap = 0;
  if (cap == 0) cap = len < SIZE_MAX / 4 ? len * 4 : SIZE_MAX;
  if (cap < 4096) cap = 4096;
  /* One spare byte so an exact hint does not force a doubling just to see
   * the end of the stream. */
  cap = cap >= max_out ? max_out : cap + 1;
  uint8_t *buf = pt_malloc(cap);
  if (!buf) return pt_wrap(PT_ERR_NOMEM, "%s: decompressing", name);

  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    free(buf);
    return pt_fail(PT_ERR_NOMEM, "%s: cannot initialise zlib", name);
  }

  const uint8_t *next = in; /* input not yet handed to zlib */
  size_t left = len;
  size_t used = 0;
  pt_status st = PT_OK;
  for (;;) {
    if (zs.avail_in == 0 && left > 0) {
      zs.next_in = (Bytef *)next;
      zs.avail_in = clamp_uint(left);
      next += zs.avail_in;
      left -= zs.avail_in;
    }
    if (used == cap) {
      if (cap == max_out) {
        st = pt_fail(PT_ERR_FORMAT, "%s: decompresses to more than %zu bytes", name, max_out);
        break;
      }
      size_t ncap = cap > max_out / 2 ? max_out : cap * 2;
      uint8_t *nb = realloc(buf, ncap);
      if (!nb) {
        st = pt_fail(PT_ERR_NOMEM, "%s: out of memory decompressing (%zu bytes)", name, ncap);
        break;
      }
      buf = nb;
      cap = ncap;
    }
    zs.next_out = buf + used;
    zs.avail_out = clamp_uint(cap - used);
    uInt before = zs.avail_out;
    int ret = inflate(&zs, Z_NO_FLUSH);
    used += before - zs.avail_out;

    if (ret == Z_STREAM_END) {
      size_t rest = zs.avail_in + left;
      if (rest == 0) break;
      /* gzip allows concatenated members (gzip -c a b > ab.gz). What zlib
       * holds and what it was not yet given are contiguous in `in`. */
      if (!pt_blob_is_gzip(in + (len - rest), rest)) {
        st = pt_fail(PT_ERR_FORMAT, "%s: %zu trailing bytes after the gzip data", name, rest);
        break;
      }
      inflateReset(&zs);
      continue;
    }
    if (ret == Z_OK) continue;
    if (ret == Z_BUF_ERROR) {
      if (zs.avail_out == 0) continue; /* needs more room: grow above */
      /* Room to write and no progress: the input ran out mid-stream (input
       * is refilled before every call, so none is left). */
      st = pt_fail(PT_ERR_FORMAT,
                   "%s: truncated gzip stream (%zu compressed bytes end before the data does)",
                   name, len);
      break;
    }
    if (ret == Z_MEM_ERROR) {
      st = pt_fail(PT_ERR_NOMEM, "%s: out of memory in zlib", name);
      break;
    }
    st = pt_fail(PT_ERR_FORMAT, "%s: corrupt gzip data (%s)", name,
                 zs.msg ? zs.msg : "invalid deflate stream");
    break;
  }
  inflateEnd(&zs);
  if (st != PT_OK) {
    free(buf);
    return st;
  }
  *out = buf;
  *out_len = used;
  return PT_OK;
}

pt_status pt_blob_read(const char *path, size_t max_out, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  uint8_t *raw;
  size_t got;
  /* Bounded before it is read whole: a file past the limit (a sparse
   * 100 GiB one, say) is refused by its size, not by a failed allocation.
   * Compressed, it would only grow past the limit. */
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > max_out)
    return pt_fail(PT_ERR_FORMAT, "%s: %llu bytes, more than the %zu a dataset file may have", path,
                   (unsigned long long)sb.st_size, max_out);
  PT_TRY(pt_read_file(path, &raw, &got));

  if (pt_blob_is_gzip(raw, got)) {
    pt_status st = pt_blob_gunzip(raw, got, path, max_out, out, out_len);
    free(raw);
    return st;
  }
  if (got > max_out) {
    free(raw);
    return pt_fail(PT_ERR_FORMAT, "%s: %zu bytes, more than the %zu a dataset file may have",
                   path, got, max_out);
  }
  *out = raw;
  *out_len = got;
  return PT_OK;
}
