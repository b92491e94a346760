/* Downloading dataset files with libcurl and checking their MD5 with OpenSSL.
 *
 * Design:
 *  - One curl easy handle is reused for every file of a dataset so that the
 *    connection to the mirror is kept alive between files.
 *  - Bytes are hashed in the write callback as they arrive, so a 170 MB
 *    archive is read from the network once and never re-read from disk.
 *  - Each download goes to "<file>.part", opened with O_TRUNC (no resume: the
 *    files are small enough, and resuming would need trusting a stale prefix).
 *    Only after the MD5 matched is it fsync'ed and renamed over the final
 *    name, and the directory fsync'ed, so a file under its final name is
 *    always complete and verified. On any failure the .part is removed.
 *  - All file operations are relative to a descriptor of the target
 *    directory, so the directory cannot be swapped out between the check and
 *    the rename, and no path strings need to be rebuilt per operation.
 *  - Network failures are PT_ERR_NET with the URL and curl's own message;
 *    a failed write to disk inside the callback is reported as PT_ERR_IO with
 *    errno, not as a network error, since retrying the download won't help.
 *  - Redirects are followed (the S3 mirrors redirect), but only to http(s):
 *    a mirror must not be able to bounce the request to file:// or another
 *    local scheme.
 */
#include "fetch/fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "util/error.h"
#include "util/stop.h"
#include "util/timer.h"

/* ---- built-in datasets ------------------------------------------------- */

/* MD5s as published by the dataset authors and used by torchvision. */
static const pt_fetch_file mnist_files[] = {
    {"train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
    {"train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"},
    {"t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"},
    {"t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"},
};

static const pt_fetch_file fashion_files[] = {
    {"train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"},
    {"train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"},
    {"t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"},
    {"t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"},
};

static const pt_fetch_file cifar10_files[] = {
    {"cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530"},
};

#define PT_NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const pt_fetch_spec builtin_specs[] = {
    {"mnist", "https://ossci-datasets.s3.amazonaws.com/mnist/", mnist_files,
     PT_NELEM(mnist_files), 0},
    {"fashion-mnist", "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
     fashion_files, PT_NELEM(fashion_files), 0},
    {"cifar10", "https://www.cs.toronto.edu/~kriz/", cifar10_files, PT_NELEM(cifar10_files), 1},
};

const pt_fetch_spec *pt_fetch_spec_find(const char *dataset) {
  if (!dataset) return NULL;
  for (int i = 0; i < PT_NELEM(builtin_specs); i++)
    if (strcmp(builtin_specs[i].name, dataset) == 0) return &builtin_specs[i];
  return NULL;
}

/* ---- MD5 ----------------------------------------------------------------- */

static pt_status md5_begin(EVP_MD_CTX **out) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx) return pt_fail(PT_ERR_NOMEM, "md5: out of memory");
  if (EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
    EVP_MD_CTX_free(ctx);
    /* Happens when OpenSSL runs with only the FIPS provider loaded. */
    return pt_fail(PT_ERR_STATE, "md5: not available from OpenSSL (FIPS-only configuration?)");
  }
  *out = ctx;
  return PT_OK;
}

static pt_status md5_end(EVP_MD_CTX *ctx, char hex[33]) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx, d, &n) != 1 || n != 16)
    return pt_fail(PT_ERR_STATE, "md5: digest computation failed");
  static const char digits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < 16; i++) {
    hex[2 * i] = digits[d[i] >> 4];
    hex[2 * i + 1] = digits[d[i] & 15];
  }
  hex[32] = 0;
  return PT_OK;
}

/* name is only for messages. */
static pt_status md5_fd(int fd, const char *name, char hex[33]) {
  EVP_MD_CTX *ctx = NULL;
  PT_TRY(md5_begin(&ctx));
  enum { CHUNK = 1 << 16 };
  unsigned char *buf = pt_malloc(CHUNK);
  pt_status st = PT_OK;
  if (!buf) {
    st = PT_ERR_NOMEM;
    goto done;
  }
  for (;;) {
    ssize_t r = read(fd, buf, CHUNK);
    if (r < 0) {
      if (errno == EINTR) continue;
      st = pt_fail_errno(PT_ERR_IO, "reading %s", name);
      goto done;
    }
    if (r == 0) break;
    if (EVP_DigestUpdate(ctx, buf, (size_t)r) != 1) {
      st = pt_fail(PT_ERR_STATE, "md5: digest update failed");
      goto done;
    }
  }
  st = md5_end(ctx, hex);
done:
  free(buf);
  EVP_MD_CTX_free(ctx);
  return st;
}

pt_status pt_md5_file(const char *path, char hex[33]) {
  if (!path || !hex) return pt_fail(PT_ERR_ARG, "pt_md5_file: NULL argument");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return pt_fail_errno(PT_ERR_IO, "%s", path);
  pt_status st = md5_fd(fd, path, hex);
  close(fd);
  return st;
}

static int is_md5_hex(const char *s) {
  if (!s) return 0;
  for (int i = 0; i < 32; i++) {
    char c = s[i];
    int ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!ok) return 0; /* also stops at a short string's NUL */
  }
  return s[32] == 0;
}

/* Published checksums are sometimes upper-case; ours are lower-case. */
static int md5_equal(const char *ours, const char *expected) {
  for (int i = 0; i < 32; i++) {
    char e = expected[i];
    if (e >= 'A' && e <= 'F') e = (char)(e - 'A' + 'a');
    if (ours[i] != e) return 0;
  }
  return 1;
}

/* ---- paths ----------------------------------------------------------------- */

static char *join3(const char *a, const char *sep, const char *b) {
  size_t na = strlen(a), ns = strlen(sep), nb = strlen(b);
  char *s = pt_malloc(na + ns + nb + 1);
  if (!s) return NULL;
  memcpy(s, a, na);
  memcpy(s + na, sep, ns);
  memcpy(s + na + ns, b, nb + 1);
  return s;
}

/* mkdir -p. A component that exists but is not a directory surfaces as
 * ENOTDIR from the next mkdir, or from the final check. *created is the
 * length of the longest prefix of dir that existed before (0 when all of
 * it did, or nothing was made), for remove_made. */
static pt_status mkdir_p(const char *dir, size_t *created) {
  *created = 0;
  size_t n = strlen(dir);
  char *p = pt_malloc(n + 1);
  if (!p) return PT_ERR_NOMEM;
  memcpy(p, dir, n + 1);
  pt_status st = PT_OK;
  size_t existed = 0;
  int made = 0;
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != 0) continue;
    char c = p[i];
    p[i] = 0;
    if (mkdir(p, 0755) == 0) {
      made = 1;
    } else if (errno != EEXIST) {
      st = pt_fail_errno(PT_ERR_IO, "creating directory %s", p);
      break;
    } else if (!made) {
      existed = i;
    }
    p[i] = c;
  }
  free(p);
  if (made) *created = existed ? existed : 1;
  if (st != PT_OK) return st;
  struct stat sb;
  if (stat(dir, &sb) != 0) return pt_fail_errno(PT_ERR_IO, "%s", dir);
  if (!S_ISDIR(sb.st_mode)) return pt_fail(PT_ERR_IO, "%s: exists and is not a directory", dir);
  return PT_OK;
}

/* After a failed fetch: removes the directories mkdir_p made for dir
 * (those past its first created bytes), deepest first, where they are
 * still empty, so that a failure leaves no empty data directory behind
 * for `ptrain info` or a later run to take for a data set. rmdir refuses
 * a directory that holds anything. */
static void remove_made(const char *dir, size_t created) {
  if (!created) return;
  size_t n = strlen(dir);
  char *p = pt_malloc(n + 1);
  if (!p) return;
  memcpy(p, dir, n + 1);
  while (n > 1 && p[n - 1] == '/') p[--n] = 0;
  while (n > created && n > 0) {
    if (rmdir(p) != 0) break;
    while (n > 0 && p[n - 1] != '/') n--; /* drop the last component */
    while (n > 1 && p[n - 1] == '/') n--;
    p[n] = 0;
  }
  free(p);
}

/* File names come from tables, but they are joined to the user's directory,
 * so anything that could name another directory is refused. */
static int is_plain_name(const char *f) {
  return f && f[0] && strchr(f, '/') == NULL && strcmp(f, ".") != 0 && strcmp(f, "..") != 0;
}

/* ---- curl ------------------------------------------------------------------ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct {
  int fd;
  EVP_MD_CTX *md;
  int write_errno; /* set when the disk, not the network, failed */
  int md_failed;
  const char *name;
  int verbose, tty;
  double last_print;
  curl_off_t now, total;
} dl_state;

static size_t on_data(char *data, size_t size, size_t nmemb, void *user) {
  dl_state *s = user;
  size_t n = size * nmemb, off = 0;
  while (off < n) {
    ssize_t w = write(s->fd, data + off, n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      s->write_errno = errno;
      return 0; /* makes curl abort with CURLE_WRITE_ERROR */
    }
    off += (size_t)w;
  }
  if (EVP_DigestUpdate(s->md, data, n) != 1) {
    s->md_failed = 1;
    return 0;
  }
  return n;
}

static void print_progress(const dl_state *s, int final) {
  /* "\r" redraws in place on a terminal; in a log file it would only be
   * noise, so there only the final line is written. */
  const char *lead = s->tty ? "\r" : "";
  const char *end = final ? "\n" : "";
  if (s->total > 0) {
    int pct = (int)(100.0 * (double)s->now / (double)s->total);
    fprintf(stderr, "%s  %s: %" CURL_FORMAT_CURL_OFF_T " / %" CURL_FORMAT_CURL_OFF_T
                    " bytes (%d%%)%s",
            lead, s->name, s->now, s->total, pct, end);
  } else {
    fprintf(stderr, "%s  %s: %" CURL_FORMAT_CURL_OFF_T " bytes%s", lead, s->name, s->now, end);
  }
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
  (void)ultotal;
  (void)ulnow;
  dl_state *s = user;
  s->now = dlnow;
  s->total = dltotal;
  /* A stop request (SIGTERM, Ctrl-C) ends the transfer: the caller then
   * removes the part file, as after any failure. curl calls this about
   * once a second even while no byte comes. */
  if (pt_train_stop_signal()) return 1;
  if (s->verbose && s->tty) {
    double t = pt_now();
    if (t - s->last_print >= 0.25) {
      s->last_print = t;
      print_progress(s, 0);
    }
  }
  return 0;
}

/* Options that are the same for every file; set once per handle. */
static pt_status configure(CURL *c, char *errbuf) {
  CURLcode rc = CURLE_OK;
#define PT_SETOPT(opt, val) \
  if (rc == CURLE_OK) rc = curl_easy_setopt(c, opt, val)
  PT_SETOPT(CURLOPT_ERRORBUFFER, errbuf);
  PT_SETOPT(CURLOPT_FOLLOWLOCATION, 1L);
  PT_SETOPT(CURLOPT_MAXREDIRS, 10L);
  PT_SETOPT(CURLOPT_FAILONERROR, 1L);
  PT_SETOPT(CURLOPT_CONNECTTIMEOUT, 30L);
  /* No total timeout: a slow but moving 170 MB download is fine; a stalled
   * one (under 1 KB/s for a minute) is aborted. */
  PT_SETOPT(CURLOPT_LOW_SPEED_LIMIT, 1024L);
  PT_SETOPT(CURLOPT_LOW_SPEED_TIME, 60L);
  PT_SETOPT(CURLOPT_NOSIGNAL, 1L); /* library code must not touch SIGALRM */
  PT_SETOPT(CURLOPT_USERAGENT, "ptrain/" PT_VERSION);
  PT_SETOPT(CURLOPT_WRITEFUNCTION, on_data);
  PT_SETOPT(CURLOPT_XFERINFOFUNCTION, on_progress);
  PT_SETOPT(CURLOPT_NOPROGRESS, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
  /* file:// lets a user point --mirror at a local copy; redirects may only
   * go to http(s). */
  PT_SETOPT(CURLOPT_PROTOCOLS_STR, "http,https,file");
  PT_SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
#undef PT_SETOPT
  if (rc != CURLE_OK) return pt_fail(PT_ERR_NET, "configuring curl: %s", curl_easy_strerror(rc));
  return PT_OK;
}

/* Downloads url into dfd/part_name, hashing it into hex. On failure the
 * caller removes the part file. */
static pt_status download(CURL *c, char *errbuf, const char *url, int pfd, const char *name,
                          const char *part_path, int verbose, char hex[33]) {
  dl_state s = {.fd = pfd, .name = name, .verbose = verbose, .tty = isatty(STDERR_FILENO)};
  PT_TRY(md5_begin(&s.md));
  errbuf[0] = 0;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
  if (verbose) fprintf(stderr, "  %s: downloading %s\n", name, url);
  CURLcode rc = curl_easy_perform(c);
  pt_status st = PT_OK;
  if (rc != CURLE_OK) {
    long http = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    if (s.write_errno)
      st = pt_fail(PT_ERR_IO, "writing %s: %s", part_path, strerror(s.write_errno));
    else if (s.md_failed)
      st = pt_fail(PT_ERR_STATE, "md5: digest update failed");
    else if (rc == CURLE_ABORTED_BY_CALLBACK && pt_train_stop_signal())
      st = pt_fail(PT_ERR_STATE, "%s: stopped by %s; the partial download %s is removed", name,
                   strsignal(pt_train_stop_signal()), part_path);
    else if (rc == CURLE_HTTP_RETURNED_ERROR)
      st = pt_fail(PT_ERR_NET, "%s: HTTP status %ld", url, http);
    else
      st = pt_fail(PT_ERR_NET, "%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    if (verbose && s.tty) fputc('\n', stderr);
  } else {
    if (verbose) print_progress(&s, 1);
    st = md5_end(s.md, hex);
  }
  EVP_MD_CTX_free(s.md);
  return st;
}

static pt_status fetch_one(CURL *c, char *errbuf, int dfd, const char *dir, const char *base_url,
                           const pt_fetch_file *f, int verbose) {
  pt_status st = PT_OK;
  char have[33];
  char *path = join3(dir, "/", f->file);
  char *part = join3(f->file, ".part", "");
  char *part_path = join3(dir, "/", part ? part : "");
  size_t nb = strlen(base_url);
  char *url = join3(base_url, nb && base_url[nb - 1] == '/' ? "" : "/", f->file);
  int pfd = -1;
  if (!path || !part || !part_path || !url) {
    st = PT_ERR_NOMEM;
    goto done;
  }

  /* Non-blocking to open: a FIFO at the name, which no process writes,
   * would otherwise hold the fetch for good. Only a regular file is read. */
  int fd = openat(dfd, f->file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat sb;
  if (fd >= 0 && fstat(fd, &sb) != 0) {
    st = pt_fail_errno(PT_ERR_IO, "%s", path);
    close(fd);
    goto done;
  }
  if (fd >= 0 && !S_ISREG(sb.st_mode)) {
    close(fd);
    st = pt_fail(PT_ERR_IO, "%s is %s, not a file: expected the dataset's file there, or nothing (move it away)", path,
                 S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO" : "a special file");
    goto done;
  }
  if (fd >= 0) {
    st = md5_fd(fd, path, have);
    close(fd);
    if (st != PT_OK) goto done;
    if (md5_equal(have, f->md5)) {
      if (verbose) fprintf(stderr, "  %s: already present, md5 %s ok\n", f->file, have);
      goto done;
    }
    if (verbose)
      fprintf(stderr, "  %s: present but md5 is %s, expected %s; downloading again\n", f->file,
              have, f->md5);
  } else if (errno != ENOENT) {
    st = pt_fail_errno(PT_ERR_IO, "%s", path);
    goto done;
  }

  /* O_NOFOLLOW: a planted symlink at the .part name must not redirect our
   * write elsewhere. */
  pfd = openat(dfd, part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (pfd < 0) {
    st = pt_fail_errno(PT_ERR_IO, "creating %s", part_path);
    goto done;
  }
  st = download(c, errbuf, url, pfd, f->file, part_path, verbose, have);
  if (st != PT_OK) goto fail;
  if (!md5_equal(have, f->md5)) {
    /* The published checksums are of the publishers' compressed bytes; a
     * local copy that was recompressed (Debian's dataset-fashion-mnist) has
     * the same images in other bytes, which nothing published can vouch
     * for. Such a copy needs no fetching: the loaders read it in place. */
    const int local = !strncmp(url, "file://", 7);
    st = pt_fail(PT_ERR_CHECKSUM, "%s: md5 mismatch: expected %s, got %s (downloaded from %s)%s", f->file, f->md5,
                 have, url,
                 local ? "; a local copy may have been recompressed (as Debian's are): train from its directory "
                         "with --data-dir instead of fetching it"
                       : "");
    goto fail;
  }
  if (fsync(pfd) != 0) {
    st = pt_fail_errno(PT_ERR_IO, "syncing %s", part_path);
    goto fail;
  }
  int rc = close(pfd);
  pfd = -1;
  if (rc != 0) {
    st = pt_fail_errno(PT_ERR_IO, "closing %s", part_path);
    goto fail;
  }
  if (renameat(dfd, part, dfd, f->file) != 0) {
    st = pt_fail_errno(PT_ERR_IO, "renaming %s to %s", part_path, path);
    goto fail;
  }
  /* Makes the rename itself durable. */
  if (fsync(dfd) != 0) {
    st = pt_fail_errno(PT_ERR_IO, "syncing directory %s", dir);
    goto done;
  }
  if (verbose) fprintf(stderr, "  %s: md5 %s ok\n", f->file, have);
  goto done;

fail:
  if (pfd >= 0) close(pfd);
  pfd = -1;
  unlinkat(dfd, part, 0);
done:
  free(path);
  free(part);
  free(part_path);
  free(url);
  return st;
}

pt_status pt_fetch_files(const char *base_url, const pt_fetch_file *files, int nfiles,
                         const char *dir, int extract_tar_gz, int verbose) {
  if (!base_url || !base_url[0]) return pt_fail(PT_ERR_ARG, "fetch: empty mirror URL");
  if (!dir || !dir[0]) return pt_fail(PT_ERR_ARG, "fetch: empty target directory");
  if (nfiles < 0 || (nfiles > 0 && !files))
    return pt_fail(PT_ERR_ARG, "fetch: bad file table (%d entries)", nfiles);
  for (int i = 0; i < nfiles; i++) {
    if (!is_plain_name(files[i].file))
      return pt_fail(PT_ERR_ARG, "fetch: file name '%s' must be a plain name without '/'",
                     files[i].file ? files[i].file : "(null)");
    if (!is_md5_hex(files[i].md5))
      return pt_fail(PT_ERR_ARG, "fetch: %s: md5 '%s' is not 32 hex digits", files[i].file,
                     files[i].md5 ? files[i].md5 : "(null)");
  }

  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return pt_fail(PT_ERR_NET, "curl_global_init: %s", curl_easy_strerror(curl_init_rc));

  size_t created = 0;
  PT_TRY(mkdir_p(dir, &created));
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    const pt_status e = pt_fail_errno(PT_ERR_IO, "opening directory %s", dir);
    remove_made(dir, created);
    return e;
  }

  pt_status st = PT_OK;
  char errbuf[CURL_ERROR_SIZE];
  CURL *c = curl_easy_init();
  if (!c) {
    st = pt_fail(PT_ERR_NOMEM, "curl_easy_init failed");
    goto done;
  }
  st = configure(c, errbuf);
  for (int i = 0; st == PT_OK && i < nfiles; i++) {
    st = fetch_one(c, errbuf, dfd, dir, base_url, &files[i], verbose);
    if (st == PT_OK && extract_tar_gz) {
      char *path = join3(dir, "/", files[i].file);
      if (!path) {
        st = PT_ERR_NOMEM;
        break;
      }
      st = pt_fetch_extract_tar_gz(path, dir, verbose);
      free(path);
    }
  }
done:
  if (c) curl_easy_cleanup(c);
  close(dfd);
  if (st != PT_OK) remove_made(dir, created);
  return st;
}

pt_status pt_fetch(const pt_fetch_spec *spec, const char *dir, const char *mirror, int verbose) {
  if (!spec) return pt_fail(PT_ERR_ARG, "fetch: no dataset given");
  const char *base = mirror ? mirror : spec->default_mirror;
  if (verbose)
    fprintf(stderr, "fetching %s from %s into %s\n", spec->name, base ? base : "(none)",
            dir ? dir : "(none)");
  pt_status st = pt_fetch_files(base, spec->files, spec->nfiles, dir, spec->is_tar_gz, verbose);
  if (st != PT_OK) return pt_wrap(st, "fetching %s", spec->name);
  if (verbose) fprintf(stderr, "%s: ready in %s\n", spec->name, dir);
  return PT_OK;
}
