/* Whole files as bytes, gunzipped when they are gzip.
 *
 * The dataset files are small enough (at most a few hundred MB) to hold in
 * memory whole, so the readers parse from a buffer rather than a stream: that
 * keeps one code path for files and for fuzzing, and lets a parser check the
 * exact length before it trusts a header. Gzip is recognised by its magic
 * (1f 8b), not by the file name, so a renamed file still loads.
 *
 * Decompression is bounded by max_out: a gzip member's size trailer is only
 * the size mod 2^32 and comes from the file itself, so it cannot be trusted to
 * bound the allocation of a hostile or corrupt file.
 */
#ifndef PT_DATA_BLOB_H
#define PT_DATA_BLOB_H

#include <stddef.h>
#include <stdint.h>
#include "util/error.h"

/* Largest decompressed file the readers accept: far above the largest real
 * dataset file (CIFAR-10's 150 MB of test+train batches), far below what
 * would exhaust memory by accident. */
#define PT_BLOB_MAX_BYTES ((size_t)1 << 32)

/* 1 when buf starts with the gzip magic. */
int pt_blob_is_gzip(const uint8_t *buf, size_t len);

/* Decompresses a gzip file (one or more concatenated members) into *out
 * (malloc'ed, free with free()). Any corruption, a truncated stream, bytes
 * after the last member, or output above max_out is PT_ERR_FORMAT naming
 * name. */
pt_status pt_blob_gunzip(const uint8_t *in, size_t len, const char *name, size_t max_out,
                         uint8_t **out, size_t *out_len);

/* Reads path whole into *out (malloc'ed), gunzipping it if it is gzip. A
 * missing or unreadable file is PT_ERR_IO naming path. */
pt_status pt_blob_read(const char *path, size_t max_out, uint8_t **out, size_t *out_len);

#endif
