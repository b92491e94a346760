/* Safe .tar.gz extraction for downloaded datasets (CIFAR-10).
 *
 * Design:
 *  - libarchive only reads; files are written by this code. That keeps the
 *    rules in one place instead of depending on archive_write_disk flags:
 *    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS cannot be combined with prefixing
 *    the target directory, and ARCHIVE_EXTRACT_SECURE_SYMLINKS would refuse a
 *    target directory that the user reached through a symlink.
 *  - Two passes. The first validates every entry name before anything is
 *    written, so a hostile archive is refused as a whole rather than after
 *    half of it landed. It also compares each regular file with what is on
 *    disk; when all are present with the archived size, the archive was
 *    already extracted (its MD5 was verified just before) and the 180 MB are
 *    not rewritten on every `data fetch`.
 *  - Names are normalised component by component: empty and "." components
 *    are dropped, an absolute name or any ".." component refuses the archive.
 *  - Directories are walked with openat(O_NOFOLLOW | O_DIRECTORY) from a
 *    descriptor of the target directory, so a symlink inside the tree (planted
 *    or from an earlier archive) cannot carry a write outside it. The target
 *    directory itself may be a symlink: the user chose it.
 *  - Only regular files and directories are created; symlinks, hard links,
 *    devices and FIFOs are skipped. Modes are fixed (0644 / 0755) rather than
 *    taken from the archive, and ownership is never changed.
 *  - Each file is written as "<name>.part", fsync'ed, then renamed, like the
 *    downloads, so an interrupted extraction never leaves a short file under a
 *    name the size check (or the loader) would accept.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fetch/fetch.h"
#include "util/error.h"
#include "util/stop.h"

/* Normalises an entry name into out. Returns 0 on success (out may be empty,
 * meaning the target directory itself), -1 if the name is absolute, has a ".."
 * component, or does not fit. */
static int clean_entry_path(const char *name, char *out, size_t cap) {
  if (name[0] == '/') return -1;
  size_t len = 0;
  const char *p = name;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return -1;
    if (n > 0 && !(n == 1 && p[0] == '.')) {
      if (len + (len > 0) + n + 1 > cap) return -1;
      if (len > 0) out[len++] = '/';
      memcpy(out + len, p, n);
      len += n;
    }
    p += n;
    if (*p == '/') p++;
  }
  out[len] = 0;
  return 0;
}

static pt_status open_archive(const char *path, struct archive **out) {
  struct archive *a = archive_read_new();
  if (!a) return pt_fail(PT_ERR_NOMEM, "%s: cannot allocate archive reader", path);
  archive_read_support_filter_gzip(a);
  archive_read_support_format_tar(a);
  if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
    pt_status st = pt_fail(PT_ERR_FORMAT, "%s: %s", path, archive_error_string(a));
    archive_read_free(a);
    return st;
  }
  *out = a;
  return PT_OK;
}

/* Entries we write; everything else is skipped. A tar hard link is reported
 * as a regular file with a link target and no data. */
static int is_regular(struct archive_entry *e) {
  return archive_entry_filetype(e) == AE_IFREG && archive_entry_hardlink(e) == NULL;
}

static int is_dir(struct archive_entry *e) { return archive_entry_filetype(e) == AE_IFDIR; }

/* Walks rel (mutable, '/'-separated, already cleaned) below dfd, creating
 * directories. With want_last the last component is a directory too and
 * *out_fd is it; otherwise *out_fd is the parent and *last the file name. */
static pt_status walk_dirs(int dfd, const char *dir, char *rel, int want_last, int *out_fd,
                           const char **last) {
  int cur = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cur < 0) return pt_fail_errno(PT_ERR_IO, "opening %s", dir);
  char *p = rel;
  for (;;) {
    char *slash = strchr(p, '/');
    if (!slash && !want_last) {
      *last = p;
      *out_fd = cur;
      return PT_OK;
    }
    if (slash) *slash = 0;
    pt_status st = PT_OK;
    if (mkdirat(cur, p, 0755) != 0 && errno != EEXIST) {
      st = pt_fail_errno(PT_ERR_IO, "creating directory %s/%s", dir, rel);
    } else {
      int next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0) {
        /* ELOOP / ENOTDIR: a symlink or a file where a directory should be. */
        st = pt_fail_errno(PT_ERR_IO, "%s/%s: not a plain directory", dir, rel);
      } else {
        close(cur);
        cur = next;
      }
    }
    if (slash) *slash = '/';
    if (st != PT_OK) {
      close(cur);
      return st;
    }
    if (!slash) {
      *last = NULL;
      *out_fd = cur;
      return PT_OK;
    }
    p = slash + 1;
  }
}

static pt_status write_entry(struct archive *a, int dfd, const char *dir, char *rel,
                             const char *archive_path) {
  int parent = -1, fd = -1;
  const char *name = NULL;
  char *part = NULL;
  PT_TRY(walk_dirs(dfd, dir, rel, 0, &parent, &name));
  pt_status st = PT_OK;
  size_t n = strlen(name);
  part = pt_malloc(n + sizeof ".part");
  enum { CHUNK = 1 << 16 };
  char *buf = pt_malloc(CHUNK);
  if (!part || !buf) {
    st = PT_ERR_NOMEM;
    goto done;
  }
  memcpy(part, name, n);
  memcpy(part + n, ".part", sizeof ".part");
  fd = openat(parent, part, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    st = pt_fail_errno(PT_ERR_IO, "creating %s/%s.part", dir, rel);
    goto done;
  }
  for (;;) {
    /* archive_read_data (not _block) so sparse entries come back with their
     * holes filled and the writes stay sequential. */
    la_ssize_t r = archive_read_data(a, buf, CHUNK);
    if (r < 0) {
      st = pt_fail(PT_ERR_FORMAT, "%s: reading entry %s: %s", archive_path, rel,
                   archive_error_string(a));
      goto fail;
    }
    if (r == 0) break;
    if (pt_train_stop_signal()) { /* SIGTERM, Ctrl-C: the part file goes, as after any failure */
      st = pt_fail(PT_ERR_STATE, "%s: stopped by %s while extracting %s", archive_path,
                   strsignal(pt_train_stop_signal()), rel);
      goto fail;
    }
    for (la_ssize_t off = 0; off < r;) {
      ssize_t w = write(fd, buf + off, (size_t)(r - off));
      if (w < 0) {
        if (errno == EINTR) continue;
        st = pt_fail_errno(PT_ERR_IO, "writing %s/%s.part", dir, rel);
        goto fail;
      }
      off += w;
    }
  }
  if (fsync(fd) != 0) {
    st = pt_fail_errno(PT_ERR_IO, "syncing %s/%s.part", dir, rel);
    goto fail;
  }
  int rc = close(fd);
  fd = -1;
  if (rc != 0) {
    st = pt_fail_errno(PT_ERR_IO, "closing %s/%s.part", dir, rel);
    goto fail;
  }
  if (renameat(parent, part, parent, name) != 0) {
    st = pt_fail_errno(PT_ERR_IO, "renaming %s/%s.part", dir, rel);
    goto fail;
  }
  if (fsync(parent) != 0) st = pt_fail_errno(PT_ERR_IO, "syncing directory of %s/%s", dir, rel);
  goto done;
fail:
  if (fd >= 0) close(fd);
  fd = -1;
  unlinkat(parent, part, 0);
done:
  free(buf);
  free(part);
  close(parent);
  return st;
}

/* Reads the next entry header into *e and its cleaned relative path into
 * rel: PT_OK with *e NULL at the end of the archive. An entry without a
 * name, or whose path is absolute or climbs out with '..', refuses the
 * whole archive. Both passes read entries through here, so the extracting
 * pass stays safe on its own should the archive change after the scan. */
static pt_status next_entry(struct archive *a, const char *archive_path, const char *dir,
                            struct archive_entry **e, char rel[PATH_MAX]) {
  int r = archive_read_next_header(a, e);
  if (r == ARCHIVE_EOF) {
    *e = NULL;
    return PT_OK;
  }
  if (r < ARCHIVE_WARN) return pt_fail(PT_ERR_FORMAT, "%s: %s", archive_path, archive_error_string(a));
  const char *name = archive_entry_pathname(*e);
  if (!name)
    return pt_fail(PT_ERR_FORMAT, "%s: entry without a usable name; archive refused", archive_path);
  if (clean_entry_path(name, rel, PATH_MAX) != 0)
    return pt_fail(PT_ERR_FORMAT,
                   "%s: entry '%s' is absolute or contains '..' (would escape %s); archive "
                   "refused, nothing extracted",
                   archive_path, name, dir);
  return PT_OK;
}

/* First pass: validate names, decide whether anything needs writing. */
static pt_status scan(const char *archive_path, int dfd, const char *dir, int *need, int *nfiles) {
  struct archive *a = NULL;
  PT_TRY(open_archive(archive_path, &a));
  pt_status st = PT_OK;
  char rel[PATH_MAX];
  struct archive_entry *e;
  *need = 0;
  *nfiles = 0;
  for (;;) {
    st = next_entry(a, archive_path, dir, &e, rel);
    if (st != PT_OK || !e) break;
    if (rel[0] == 0) continue;
    struct stat sb;
    int have = fstatat(dfd, rel, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    if (is_regular(e)) {
      (*nfiles)++;
      if (!have || !S_ISREG(sb.st_mode) || !archive_entry_size_is_set(e) ||
          sb.st_size != archive_entry_size(e))
        *need = 1;
    } else if (is_dir(e)) {
      if (!have || !S_ISDIR(sb.st_mode)) *need = 1;
    }
    /* Pulls the gzip stream past the entry's data; also detects corruption
     * inside the data, which the header walk alone would miss. */
    if (archive_read_data_skip(a) < ARCHIVE_WARN) {
      st = pt_fail(PT_ERR_FORMAT, "%s: %s", archive_path, archive_error_string(a));
      break;
    }
  }
  archive_read_free(a);
  return st;
}

static pt_status extract(const char *archive_path, int dfd, const char *dir, int verbose,
                         int *written) {
  struct archive *a = NULL;
  PT_TRY(open_archive(archive_path, &a));
  pt_status st = PT_OK;
  char rel[PATH_MAX];
  struct archive_entry *e;
  *written = 0;
  for (;;) {
    st = next_entry(a, archive_path, dir, &e, rel);
    if (st != PT_OK || !e) break;
    if (rel[0] == 0) continue;
    if (is_regular(e)) {
      st = write_entry(a, dfd, dir, rel, archive_path);
      if (st != PT_OK) break;
      (*written)++;
    } else if (is_dir(e)) {
      int fd = -1;
      const char *last = NULL;
      st = walk_dirs(dfd, dir, rel, 1, &fd, &last);
      if (st != PT_OK) break;
      close(fd);
    } else if (verbose) {
      fprintf(stderr, "  %s: skipping '%s' (not a regular file or directory)\n", archive_path,
              archive_entry_pathname(e));
    }
  }
  archive_read_free(a);
  return st;
}

pt_status pt_fetch_extract_tar_gz(const char *archive_path, const char *dir, int verbose) {
  if (!archive_path || !dir) return pt_fail(PT_ERR_ARG, "extract: NULL argument");
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return pt_fail_errno(PT_ERR_IO, "opening directory %s", dir);
  int need = 0, nfiles = 0, written = 0;
  pt_status st = scan(archive_path, dfd, dir, &need, &nfiles);
  if (st == PT_OK && !need) {
    if (verbose)
      fprintf(stderr, "  %s: already extracted (%d files)\n", archive_path, nfiles);
  } else if (st == PT_OK) {
    if (verbose) fprintf(stderr, "  %s: extracting into %s\n", archive_path, dir);
    st = extract(archive_path, dfd, dir, verbose, &written);
    if (st == PT_OK && verbose) fprintf(stderr, "  %s: extracted %d files\n", archive_path, written);
  }
  close(dfd);
  return st;
}
