/* Dataset download: `ptrain data fetch mnist|fashion-mnist|cifar10`.
 *
 * A dataset is a small table of files, each with the MD5 that torchvision and
 * the dataset authors publish. Fetching a table means, per file: skip it if it
 * is already in the directory with the right MD5, otherwise download it to
 * "<file>.part" while hashing the bytes as they arrive, and rename it into
 * place only after the hash matched and the data reached the disk. A crash or
 * a bad mirror therefore never leaves a file under its final name that the
 * loader would trust. MD5 is used because it is what the publishers list; it
 * guards against corruption and truncation, not against an attacker who
 * controls the mirror.
 *
 * Archives (CIFAR-10) are extracted with libarchive into the same directory.
 * Every entry name is checked before anything is written, so an archive with
 * an absolute path or a ".." component is refused as a whole, and only regular
 * files and directories are created (links and devices are skipped).
 *
 * This module deliberately knows nothing about pt_data: it keeps its own name
 * table so that the downloader can be linked without the loaders.
 */
#ifndef PT_FETCH_FETCH_H
#define PT_FETCH_FETCH_H

#include "util/error.h"

typedef struct {
  const char *file; /* plain file name, no '/' */
  const char *md5;  /* 32 hex digits, either case */
} pt_fetch_file;

typedef struct {
  const char *name;           /* "mnist", "fashion-mnist", "cifar10" */
  const char *default_mirror; /* base URL the file names are appended to */
  const pt_fetch_file *files;
  int nfiles;
  int is_tar_gz;              /* extract each file into the directory after download */
} pt_fetch_spec;

/* Built-in spec for a dataset name; NULL if unknown (or name is NULL). */
const pt_fetch_spec *pt_fetch_spec_find(const char *dataset);

/* Downloads (and if spec->is_tar_gz extracts) the dataset into dir, creating
 * dir and its parents. mirror replaces spec->default_mirror when not NULL.
 * verbose prints one progress line per file to stderr.
 * Errors: PT_ERR_ARG (bad arguments), PT_ERR_NET (connection, HTTP >= 400,
 * timeout; the message names the URL), PT_ERR_CHECKSUM (names the file and
 * both MD5s; the download is deleted), PT_ERR_IO (disk), PT_ERR_FORMAT (an
 * archive that is corrupt or tries to write outside dir). */
pt_status pt_fetch(const pt_fetch_spec *spec, const char *dir, const char *mirror, int verbose);

/* The engine behind pt_fetch, exposed so tests can use their own file table:
 * fetches base_url + "/" + file for each entry (the '/' is added only when
 * base_url lacks one) into dir. */
pt_status pt_fetch_files(const char *base_url, const pt_fetch_file *files, int nfiles,
                         const char *dir, int extract_tar_gz, int verbose);

/* MD5 of a file's content as 32 lower-case hex digits plus NUL. */
pt_status pt_md5_file(const char *path, char hex[33]);

/* Extracts a .tar.gz into dir (which must exist), used by pt_fetch_files and
 * exposed for tests. The archive is read twice: the first pass validates every
 * entry name (PT_ERR_FORMAT naming the entry if one is absolute or has a ".."
 * component, before anything is written) and notes whether every regular file
 * is already present with the archived size, in which case nothing is
 * rewritten; the second pass writes regular files (via "<name>.part" and a
 * rename) and directories, skipping every other entry type. */
pt_status pt_fetch_extract_tar_gz(const char *archive_path, const char *dir, int verbose);

#endif
