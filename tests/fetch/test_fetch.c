/* Tests for src/fetch: downloads, checksums, error reporting, archive safety.
 *
 * Design:
 *  - Every download comes from a python3 http.server child that this test
 *    starts, bound to 127.0.0.1 only, serving files generated into a fresh
 *    mkdtemp directory. No test names any other host, and proxy variables are
 *    cleared so curl cannot route a loopback request through a proxy.
 *  - The server is a small SimpleHTTPRequestHandler subclass rather than bare
 *    `-m http.server`, so the same child can also answer with a redirect, a
 *    redirect to file://, and a truncated body.
 *  - The port is found by binding port 0; if another process takes it before
 *    the server binds, the child exits and we retry on a new port. Readiness
 *    is a bounded connect() poll.
 *  - The server can never outlive the test: it runs in its own process group
 *    that teardown (and an atexit hook) kills with SIGTERM then SIGKILL, and
 *    it carries PR_SET_PDEATHSIG so even a crashed test (ASan abort) takes it
 *    down.
 *  - "Nothing listening" is a socket bound but never listen()ed: connecting
 *    to it is refused at once, and the port stays ours for the whole run.
 *  - Archive safety is also tested by calling pt_fetch_extract_tar_gz
 *    directly, so those checks do not need python3 at all.
 *  - Only a missing python3 skips (with a printed reason); a python3 that is
 *    present but whose server fails to start is a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fetch/fetch.h"
#include "util/error.h"

static const char server_script[] =
    "import functools, http.server, sys\n"
    "class H(http.server.SimpleHTTPRequestHandler):\n"
    "    def log_message(self, *a):\n"
    "        pass\n"
    "    def do_GET(self):\n"
    "        if self.path.startswith('/redirect/'):\n"
    "            self.send_response(302)\n"
    "            self.send_header('Location', self.path[len('/redirect'):])\n"
    "            self.send_header('Content-Length', '0')\n"
    "            self.end_headers()\n"
    "            return\n"
    "        if self.path.startswith('/to-file/'):\n"
    "            self.send_response(302)\n"
    "            self.send_header('Location', 'file:///etc/hostname')\n"
    "            self.send_header('Content-Length', '0')\n"
    "            self.end_headers()\n"
    "            return\n"
    "        if self.path.startswith('/short/'):\n"
    "            self.send_response(200)\n"
    "            self.send_header('Content-Length', '100000')\n"
    "            self.end_headers()\n"
    "            self.wfile.write(b'x' * 10)\n"
    "            self.close_connection = True\n"
    "            return\n"
    "        super().do_GET()\n"
    "srv = http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])),\n"
    "                                      functools.partial(H, directory=sys.argv[2]))\n"
    "srv.serve_forever()\n";

#define IMG "train-images-idx3-ubyte.gz"
#define LBL "train-labels-idx1-ubyte.gz"
#define TGZ "cifar-10-binary.tar.gz"
#define BATCH_DIR "cifar-10-batches-bin"
#define WRONG_MD5 "0123456789abcdef0123456789abcdef"

static struct {
  char root[1024];      /* everything lives under this mkdtemp directory */
  char serve[PATH_MAX]; /* document root of the server */
  char python[PATH_MAX];
  int have_python;
  int server_ok;
  pid_t server; /* also its process group id */
  int port;
  int dead_fd, dead_port;
  char base[128];      /* http://127.0.0.1:PORT */
  char dead_base[128]; /* nothing listening there */
  char img_md5[33], lbl_md5[33], tgz_md5[33], evil_md5[33];
} F;

/* ---- small helpers ------------------------------------------------------- */

static void pathf(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pathf(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, PATH_MAX, fmt, ap);
  va_end(ap);
  assert_true(n > 0 && n < PATH_MAX);
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

static int files_equal(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  int eq = fa && fb;
  while (eq) {
    int ca = fgetc(fa), cb = fgetc(fb);
    if (ca != cb) eq = 0;
    if (ca == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return eq;
}

static void make_dir(const char *path) { assert_int_equal(mkdir(path, 0755), 0); }

static int part_found;
static int find_part(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)type;
  (void)ftw;
  size_t n = strlen(path);
  if (n >= 5 && strcmp(path + n - 5, ".part") == 0) {
    print_error("stray temporary file %s\n", path);
    part_found = 1;
  }
  return 0;
}

static int has_part_files(const char *dir) {
  part_found = 0;
  nftw(dir, find_part, 16, FTW_PHYS);
  return part_found;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)type;
  (void)ftw;
  remove(path);
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define assert_msg_has(s)                                               \
  do {                                                                  \
    const char *m_ = pt_error_message();                                \
    if (!strstr(m_, (s))) {                                             \
      print_error("error message \"%s\" lacks \"%s\"\n", m_, (s));      \
      fail();                                                           \
    }                                                                   \
  } while (0)

#define require_server()                                                        \
  do {                                                                          \
    if (!F.have_python) {                                                       \
      print_message("SKIPPED: python3 not found in PATH; cannot serve files\n"); \
      skip();                                                                   \
    }                                                                           \
    if (!F.server_ok) fail_msg("the local python3 http.server did not start");  \
  } while (0)

/* Deterministic filler so contents differ between files. */
static void fill(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)x;
  }
}

static void be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* ---- tar.gz generation --------------------------------------------------- */

typedef struct {
  const char *name;
  char type; /* 'f' file, 'd' dir, 'l' symlink, 'h' hard link, 'p' fifo */
  const void *data;
  size_t size;
  const char *target; /* for links */
} tar_ent;

static void write_tar_gz(const char *path, const tar_ent *ents, int n) {
  struct archive *a = archive_write_new();
  assert_non_null(a);
  assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
  assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
  for (int i = 0; i < n; i++) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, ents[i].name);
    archive_entry_set_mtime(e, 1700000000, 0);
    switch (ents[i].type) {
      case 'f':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)ents[i].size);
        break;
      case 'd':
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0755);
        break;
      case 'l':
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_perm(e, 0777);
        archive_entry_set_symlink(e, ents[i].target);
        break;
      case 'h':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_hardlink(e, ents[i].target);
        archive_entry_set_size(e, 0);
        break;
      case 'p':
        archive_entry_set_filetype(e, AE_IFIFO);
        archive_entry_set_perm(e, 0644);
        break;
    }
    if (archive_write_header(a, e) != ARCHIVE_OK) fail_msg("tar header: %s", archive_error_string(a));
    if (ents[i].type == 'f' && ents[i].size)
      assert_int_equal(archive_write_data(a, ents[i].data, ents[i].size), (la_ssize_t)ents[i].size);
    archive_entry_free(e);
  }
  assert_int_equal(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

/* ---- server -------------------------------------------------------------- */

static int find_in_path(const char *prog, char *out) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  while (*path) {
    const char *e = strchr(path, ':');
    size_t n = e ? (size_t)(e - path) : strlen(path);
    if (n > 0 && n + strlen(prog) + 2 < PATH_MAX) {
      memcpy(out, path, n);
      out[n] = '/';
      strcpy(out + n + 1, prog);
      if (access(out, X_OK) == 0) return 1;
    }
    path += n;
    if (*path == ':') path++;
  }
  return 0;
}

static int loopback_socket(int port, struct sockaddr_in *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons((uint16_t)port);
  sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

/* Bound to 127.0.0.1:0; returns the fd, *port the number picked. */
static int bind_any(int *port) {
  struct sockaddr_in sa;
  int fd = loopback_socket(0, &sa);
  if (fd < 0) return -1;
  socklen_t len = sizeof sa;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

static int can_connect(int port) {
  struct sockaddr_in sa;
  int fd = loopback_socket(port, &sa);
  if (fd < 0) return 0;
  int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

static void stop_server(void) {
  if (F.server <= 0) return;
  pid_t pid = F.server;
  F.server = 0;
  kill(-pid, SIGTERM);
  int reaped = 0;
  for (int i = 0; i < 100 && !reaped; i++) { /* up to 5 s */
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) reaped = 1;
    else usleep(50 * 1000);
  }
  /* Also catches anything the interpreter (or a pyenv shim) left in the group. */
  kill(-pid, SIGKILL);
  if (!reaped) waitpid(pid, NULL, 0);
}

static pid_t spawn_server(int port) {
  char portstr[16], log[PATH_MAX];
  snprintf(portstr, sizeof portstr, "%d", port);
  snprintf(log, sizeof log, "%s/server.log", F.root);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) setpgid(pid, pid); /* both sides set it: no race with kill(-pid) */
    return pid;
  }
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127); /* parent died before prctl */
  int in = open("/dev/null", O_RDONLY);
  int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in >= 0) dup2(in, 0);
  if (out >= 0) {
    dup2(out, 1);
    dup2(out, 2);
  }
  execl(F.python, F.python, "-c", server_script, portstr, F.serve, (char *)NULL);
  _exit(127);
}

static int start_server(void) {
  for (int attempt = 0; attempt < 5; attempt++) {
    int port = 0;
    int fd = bind_any(&port);
    if (fd < 0) return 0;
    close(fd); /* the server must bind it; a thief makes the child exit and we retry */
    pid_t pid = spawn_server(port);
    if (pid < 0) return 0;
    F.server = pid;
    double t0 = now_s();
    while (now_s() - t0 < 10.0) {
      if (waitpid(pid, NULL, WNOHANG) == pid) {
        F.server = 0; /* exited: port taken, or python broken */
        break;
      }
      if (can_connect(port)) {
        F.port = port;
        return 1;
      }
      usleep(50 * 1000);
    }
    stop_server();
  }
  return 0;
}

/* ---- fixture ------------------------------------------------------------- */

static void gen_files(void) {
  char p[PATH_MAX];
  /* IDX-looking images: magic 0x803, 5 images of 28x28. */
  static uint8_t img[16 + 5 * 784];
  be32(img, 0x803);
  be32(img + 4, 5);
  be32(img + 8, 28);
  be32(img + 12, 28);
  fill(img + 16, sizeof img - 16, 1);
  static uint8_t lbl[8 + 5];
  be32(lbl, 0x801);
  be32(lbl + 4, 5);
  for (int i = 0; i < 5; i++) lbl[8 + i] = (uint8_t)i;
  pathf(p, "%s/%s", F.serve, IMG);
  write_file(p, img, sizeof img);
  assert_int_equal(pt_md5_file(p, F.img_md5), PT_OK);
  pathf(p, "%s/%s", F.serve, LBL);
  write_file(p, lbl, sizeof lbl);
  assert_int_equal(pt_md5_file(p, F.lbl_md5), PT_OK);

  /* The same files under sub/ for base-URL joining. */
  pathf(p, "%s/sub", F.serve);
  make_dir(p);
  pathf(p, "%s/sub/%s", F.serve, IMG);
  write_file(p, img, sizeof img);

  /* For the /short/ handler path nothing needs to exist. */

  /* CIFAR-like archive: two records per batch, plus a "./"-prefixed name. */
  static uint8_t b1[2 * 3073], tb[2 * 3073];
  fill(b1, sizeof b1, 2);
  fill(tb, sizeof tb, 3);
  static const char meta[] = "airplane\nautomobile\n";
  tar_ent cifar[] = {
      {BATCH_DIR "/", 'd', NULL, 0, NULL},
      {BATCH_DIR "/data_batch_1.bin", 'f', b1, sizeof b1, NULL},
      {BATCH_DIR "/test_batch.bin", 'f', tb, sizeof tb, NULL},
      {"./" BATCH_DIR "/batches.meta.txt", 'f', meta, sizeof meta - 1, NULL},
  };
  pathf(p, "%s/%s", F.serve, TGZ);
  write_tar_gz(p, cifar, 4);
  assert_int_equal(pt_md5_file(p, F.tgz_md5), PT_OK);
  /* Reference copies of the members, to compare the extraction against. */
  pathf(p, "%s/ref_data_batch_1.bin", F.root);
  write_file(p, b1, sizeof b1);
  pathf(p, "%s/ref_test_batch.bin", F.root);
  write_file(p, tb, sizeof tb);

  /* A harmless first member, then one that climbs out of the target. */
  tar_ent evil[] = {
      {BATCH_DIR "/ok.bin", 'f', "ok", 2, NULL},
      {"../evil", 'f', "pwned", 5, NULL},
  };
  pathf(p, "%s/evil.tar.gz", F.serve);
  write_tar_gz(p, evil, 2);
  assert_int_equal(pt_md5_file(p, F.evil_md5), PT_OK);
}

static int group_setup(void **state) {
  (void)state;
  memset(&F, 0, sizeof F);
  F.dead_fd = -1;
  /* Loopback must never go through a proxy. */
  const char *proxies[] = {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                           "all_proxy",  "ALL_PROXY",  "ftp_proxy"};
  for (size_t i = 0; i < sizeof proxies / sizeof *proxies; i++) unsetenv(proxies[i]);
  setenv("no_proxy", "*", 1);
  setenv("NO_PROXY", "*", 1);

  const char *tmp = getenv("TMPDIR");
  int rn = snprintf(F.root, sizeof F.root, "%s/pt_fetch_test.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (rn <= 0 || (size_t)rn >= sizeof F.root) return -1;
  if (!mkdtemp(F.root)) return -1;
  snprintf(F.serve, sizeof F.serve, "%s/serve", F.root);
  if (mkdir(F.serve, 0755) != 0) return -1;
  gen_files();

  F.dead_fd = bind_any(&F.dead_port);
  if (F.dead_fd < 0) return -1;
  snprintf(F.dead_base, sizeof F.dead_base, "http://127.0.0.1:%d/", F.dead_port);

  F.have_python = find_in_path("python3", F.python);
  if (F.have_python) {
    F.server_ok = start_server();
    snprintf(F.base, sizeof F.base, "http://127.0.0.1:%d", F.port);
    if (!F.server_ok) fprintf(stderr, "python3 http.server failed to start; see %s/server.log\n", F.root);
  } else {
    fprintf(stderr, "python3 not found in PATH: network tests will be skipped\n");
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  stop_server();
  if (F.dead_fd >= 0) close(F.dead_fd);
  F.dead_fd = -1;
  if (F.root[0]) nftw(F.root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

static void at_exit_cleanup(void) { stop_server(); }

/* ---- tests: no network --------------------------------------------------- */

static void test_md5_known_answers(void **state) {
  (void)state;
  char p[PATH_MAX], hex[33];
  pathf(p, "%s/abc.txt", F.root);
  write_file(p, "abc", 3);
  assert_int_equal(pt_md5_file(p, hex), PT_OK);
  assert_string_equal(hex, "900150983cd24fb0d6963f7d28e17f72"); /* RFC 1321 */
  pathf(p, "%s/empty.txt", F.root);
  write_file(p, "", 0);
  assert_int_equal(pt_md5_file(p, hex), PT_OK);
  assert_string_equal(hex, "d41d8cd98f00b204e9800998ecf8427e");
  /* Larger than one read chunk. */
  static uint8_t big[200000];
  memset(big, 'a', sizeof big);
  pathf(p, "%s/big.txt", F.root);
  write_file(p, big, sizeof big);
  assert_int_equal(pt_md5_file(p, hex), PT_OK);
  assert_int_equal(strlen(hex), 32);
  pathf(p, "%s/does-not-exist", F.root);
  assert_int_equal(pt_md5_file(p, hex), PT_ERR_IO);
  assert_msg_has("does-not-exist");
}

static void test_spec_table(void **state) {
  (void)state;
  assert_null(pt_fetch_spec_find(NULL));
  assert_null(pt_fetch_spec_find("imagenet"));
  assert_null(pt_fetch_spec_find("MNIST"));

  const pt_fetch_spec *m = pt_fetch_spec_find("mnist");
  assert_non_null(m);
  assert_string_equal(m->name, "mnist");
  assert_string_equal(m->default_mirror, "https://ossci-datasets.s3.amazonaws.com/mnist/");
  assert_int_equal(m->nfiles, 4);
  assert_int_equal(m->is_tar_gz, 0);
  assert_string_equal(m->files[0].file, "train-images-idx3-ubyte.gz");
  assert_string_equal(m->files[0].md5, "f68b3c2dcbeaaa9fbdd348bbdeb94873");
  assert_string_equal(m->files[1].file, "train-labels-idx1-ubyte.gz");
  assert_string_equal(m->files[1].md5, "d53e105ee54ea40749a09fcbcd1e9432");
  assert_string_equal(m->files[2].file, "t10k-images-idx3-ubyte.gz");
  assert_string_equal(m->files[2].md5, "9fb629c4189551a2d022fa330f9573f3");
  assert_string_equal(m->files[3].file, "t10k-labels-idx1-ubyte.gz");
  assert_string_equal(m->files[3].md5, "ec29112dd5afa0611ce80d1b7f02629c");

  const pt_fetch_spec *f = pt_fetch_spec_find("fashion-mnist");
  assert_non_null(f);
  assert_string_equal(f->default_mirror,
                      "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/");
  assert_int_equal(f->nfiles, 4);
  assert_int_equal(f->is_tar_gz, 0);
  assert_string_equal(f->files[0].md5, "8d4fb7e6c68d591d4c3dfef9ec88bf0d");
  assert_string_equal(f->files[1].md5, "25c81989df183df01b3e8a0aad5dffbe");
  assert_string_equal(f->files[2].md5, "bef4ecab320f06d8554ea6380940ec79");
  assert_string_equal(f->files[3].md5, "bb300cfdad3c16e7a12a480ee83cd310");
  for (int i = 0; i < 4; i++) assert_string_equal(f->files[i].file, m->files[i].file);

  const pt_fetch_spec *c = pt_fetch_spec_find("cifar10");
  assert_non_null(c);
  assert_string_equal(c->default_mirror, "https://www.cs.toronto.edu/~kriz/");
  assert_int_equal(c->nfiles, 1);
  assert_int_equal(c->is_tar_gz, 1);
  assert_string_equal(c->files[0].file, "cifar-10-binary.tar.gz");
  assert_string_equal(c->files[0].md5, "c32a1d4ab5d03f1284b67883e8d87530");
}

static void test_bad_arguments(void **state) {
  (void)state;
  char out[PATH_MAX];
  pathf(out, "%s/out_args", F.root);
  pt_fetch_file ok = {IMG, WRONG_MD5};
  assert_int_equal(pt_fetch_files(F.dead_base, &ok, 1, NULL, 0, 0), PT_ERR_ARG);
  assert_int_equal(pt_fetch_files(F.dead_base, &ok, 1, "", 0, 0), PT_ERR_ARG);
  assert_int_equal(pt_fetch_files(NULL, &ok, 1, out, 0, 0), PT_ERR_ARG);
  assert_int_equal(pt_fetch_files("", &ok, 1, out, 0, 0), PT_ERR_ARG);
  assert_int_equal(pt_fetch_files(F.dead_base, NULL, 1, out, 0, 0), PT_ERR_ARG);
  assert_int_equal(pt_fetch_files(F.dead_base, &ok, -1, out, 0, 0), PT_ERR_ARG);
  const pt_fetch_file bad_names[] = {{"../x", WRONG_MD5}, {"a/b", WRONG_MD5}, {"..", WRONG_MD5},
                                     {"", WRONG_MD5},     {NULL, WRONG_MD5}};
  for (int i = 0; i < 5; i++)
    assert_int_equal(pt_fetch_files(F.dead_base, &bad_names[i], 1, out, 0, 0), PT_ERR_ARG);
  const pt_fetch_file bad_md5[] = {{IMG, "0123"},
                                   {IMG, "0123456789abcdef0123456789abcdeg"},
                                   {IMG, WRONG_MD5 "0"},
                                   {IMG, NULL}};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pt_fetch_files(F.dead_base, &bad_md5[i], 1, out, 0, 0), PT_ERR_ARG);
    assert_msg_has(IMG);
  }
  assert_false(exists(out)); /* arguments are checked before anything is created */
  assert_int_equal(pt_fetch(NULL, out, NULL, 0), PT_ERR_ARG);
  assert_int_equal(pt_fetch(pt_fetch_spec_find("mnist"), out, "", 0), PT_ERR_ARG);
  assert_int_equal(pt_fetch(pt_fetch_spec_find("mnist"), NULL, F.dead_base, 0), PT_ERR_ARG);
  /* An empty table is trivially done, and only creates the directory. */
  assert_int_equal(pt_fetch_files(F.dead_base, NULL, 0, out, 0, 0), PT_OK);
  assert_true(exists(out));
  /* The directory path runs through a regular file. */
  char p[PATH_MAX];
  pathf(p, "%s/afile", F.root);
  write_file(p, "x", 1);
  pathf(p, "%s/afile/sub", F.root);
  assert_int_equal(pt_fetch_files(F.dead_base, &ok, 1, p, 0, 0), PT_ERR_IO);
}

static void test_extract_rejects_traversal(void **state) {
  (void)state;
  char arc[PATH_MAX], out[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/x_trav", F.root);
  make_dir(out);

  /* "../" directly, after a valid member. */
  pathf(arc, "%s/serve/evil.tar.gz", F.root);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_ERR_FORMAT);
  assert_msg_has("../evil");
  pathf(p, "%s/evil", F.root);
  assert_false(exists(p));
  pathf(p, "%s/" BATCH_DIR, out);
  assert_false(exists(p)); /* refused as a whole: the valid member was not written */

  /* ".." hidden in the middle. */
  tar_ent nested[] = {{"a/b/../../../evil2", 'f', "x", 1, NULL}};
  pathf(arc, "%s/nested.tar.gz", F.root);
  write_tar_gz(arc, nested, 1);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_ERR_FORMAT);
  assert_msg_has("evil2");
  pathf(p, "%s/evil2", F.root);
  assert_false(exists(p));
  pathf(p, "%s/a", out);
  assert_false(exists(p));

  /* Absolute path, aimed inside our own temporary tree. */
  char abs_target[PATH_MAX];
  pathf(abs_target, "%s/abs_evil", F.root);
  tar_ent absolute[] = {{abs_target, 'f', "x", 1, NULL}};
  pathf(arc, "%s/abs.tar.gz", F.root);
  write_tar_gz(arc, absolute, 1);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_ERR_FORMAT);
  assert_msg_has("abs_evil");
  assert_false(exists(abs_target));
  pathf(p, "%s/%s", out, abs_target + 1);
  assert_false(exists(p));

  /* A name that merely contains dots is fine. */
  tar_ent dots[] = {{"d/..x/...y", 'f', "z", 1, NULL}};
  pathf(arc, "%s/dots.tar.gz", F.root);
  write_tar_gz(arc, dots, 1);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_OK);
  pathf(p, "%s/d/..x/...y", out);
  assert_true(exists(p));
  assert_false(has_part_files(out));
}

static void test_extract_only_files_and_dirs(void **state) {
  (void)state;
  char arc[PATH_MAX], out[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/x_types", F.root);
  make_dir(out);
  tar_ent ents[] = {
      {"d/", 'd', NULL, 0, NULL},
      {"d/file", 'f', "hello", 5, NULL},
      {"d/link", 'l', NULL, 0, "/etc/passwd"},
      {"d/hard", 'h', NULL, 0, "d/file"},
      {"d/fifo", 'p', NULL, 0, NULL},
      {"d/empty/", 'd', NULL, 0, NULL},
  };
  pathf(arc, "%s/types.tar.gz", F.root);
  write_tar_gz(arc, ents, 6);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 1), PT_OK);
  pathf(p, "%s/d/file", out);
  struct stat sb;
  assert_int_equal(lstat(p, &sb), 0);
  assert_true(S_ISREG(sb.st_mode));
  assert_int_equal(sb.st_size, 5);
  pathf(p, "%s/d/empty", out);
  assert_int_equal(lstat(p, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  pathf(p, "%s/d/link", out);
  assert_false(exists(p));
  pathf(p, "%s/d/hard", out);
  assert_false(exists(p));
  pathf(p, "%s/d/fifo", out);
  assert_false(exists(p));
}

static void test_extract_refuses_symlinked_subdir(void **state) {
  (void)state;
  char out[PATH_MAX], elsewhere[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/x_symdir", F.root);
  pathf(elsewhere, "%s/elsewhere", F.root);
  make_dir(out);
  make_dir(elsewhere);
  pathf(p, "%s/" BATCH_DIR, out);
  assert_int_equal(symlink(elsewhere, p), 0);
  char arc[PATH_MAX];
  pathf(arc, "%s/" TGZ, F.serve);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_ERR_IO);
  assert_msg_has(BATCH_DIR);
  pathf(p, "%s/test_batch.bin", elsewhere);
  assert_false(exists(p));
  pathf(p, "%s/data_batch_1.bin", elsewhere);
  assert_false(exists(p));
}

static void test_extract_corrupt_archive(void **state) {
  (void)state;
  char src[PATH_MAX], arc[PATH_MAX], out[PATH_MAX];
  pathf(src, "%s/" TGZ, F.serve);
  pathf(arc, "%s/truncated.tar.gz", F.root);
  pathf(out, "%s/x_corrupt", F.root);
  make_dir(out);
  FILE *f = fopen(src, "rb");
  assert_non_null(f);
  static uint8_t buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_true(n > 200);
  write_file(arc, buf, n / 2);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_ERR_FORMAT);
  assert_msg_has("truncated.tar.gz");
  /* Not an archive at all. */
  write_file(arc, "this is not gzip", 16);
  assert_int_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_ERR_FORMAT);
  pathf(arc, "%s/missing.tar.gz", F.root);
  assert_int_not_equal(pt_fetch_extract_tar_gz(arc, out, 0), PT_OK);
}

/* ---- tests: local HTTP server -------------------------------------------- */

static void test_fetch_then_skip(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], p[PATH_MAX], ref[PATH_MAX];
  pathf(out, "%s/out_ok/a/b", F.root); /* parents are created too */
  pt_fetch_file files[] = {{IMG, F.img_md5}, {LBL, F.lbl_md5}};
  assert_int_equal(pt_fetch_files(F.base, files, 2, out, 0, 1), PT_OK);
  pathf(p, "%s/" IMG, out);
  pathf(ref, "%s/" IMG, F.serve);
  assert_true(files_equal(p, ref));
  struct stat first;
  assert_int_equal(stat(p, &first), 0);
  pathf(p, "%s/" LBL, out);
  pathf(ref, "%s/" LBL, F.serve);
  assert_true(files_equal(p, ref));
  assert_false(has_part_files(out));

  /* Second run: both present with the right md5, so the (dead) mirror is
   * never asked and the file is not replaced. */
  assert_int_equal(pt_fetch_files(F.dead_base, files, 2, out, 0, 1), PT_OK);
  struct stat second;
  pathf(p, "%s/" IMG, out);
  assert_int_equal(stat(p, &second), 0);
  assert_int_equal(first.st_ino, second.st_ino);

  /* Upper-case expected checksums are accepted. */
  char upper[33];
  for (int i = 0; i < 33; i++)
    upper[i] = (char)(F.img_md5[i] >= 'a' && F.img_md5[i] <= 'f' ? F.img_md5[i] - 32 : F.img_md5[i]);
  pt_fetch_file up = {IMG, upper};
  assert_int_equal(pt_fetch_files(F.dead_base, &up, 1, out, 0, 0), PT_OK);
}

static void test_redownload_corrupt_and_stale_part(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], p[PATH_MAX], ref[PATH_MAX];
  pathf(out, "%s/out_corrupt", F.root);
  make_dir(out);
  pathf(p, "%s/" IMG ".part", out);
  write_file(p, "stale partial download", 22);
  pathf(p, "%s/" IMG, out);
  write_file(p, "garbage", 7);
  pt_fetch_file files[] = {{IMG, F.img_md5}};
  assert_int_equal(pt_fetch_files(F.base, files, 1, out, 0, 1), PT_OK);
  pathf(ref, "%s/" IMG, F.serve);
  assert_true(files_equal(p, ref));
  assert_false(has_part_files(out));
}

/* A FIFO or a directory at a file's name: refused at once, not opened for
 * a read that waits for a writer (the fetch hung until killed). Needs no
 * server: the name is looked at before any download. */
static void test_not_a_file_at_the_name(void **state) {
  (void)state;
  char out[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/out_fifo", F.root);
  make_dir(out);
  pathf(p, "%s/" IMG, out);
  assert_int_equal(mkfifo(p, 0600), 0);
  pt_fetch_file files[] = {{IMG, F.img_md5}};
  assert_int_equal(pt_fetch_files(F.dead_base, files, 1, out, 0, 0), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "is a FIFO, not a file"));
  assert_int_equal(unlink(p), 0);
  assert_int_equal(mkdir(p, 0700), 0);
  assert_int_equal(pt_fetch_files(F.dead_base, files, 1, out, 0, 0), PT_ERR_IO);
  assert_non_null(strstr(pt_error_message(), "is a directory, not a file"));
  assert_false(has_part_files(out));
}

static void test_checksum_mismatch(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/out_md5", F.root);
  pt_fetch_file files[] = {{IMG, WRONG_MD5}};
  assert_int_equal(pt_fetch_files(F.base, files, 1, out, 0, 0), PT_ERR_CHECKSUM);
  assert_msg_has(IMG);
  assert_msg_has(WRONG_MD5);
  assert_msg_has(F.img_md5);
  pathf(p, "%s/" IMG, out);
  assert_false(exists(p));
  assert_false(has_part_files(out));

  /* Through pt_fetch with a built-in spec and a local --mirror: the generated
   * file is not the real MNIST, so the first file fails its checksum; this
   * also shows the mirror replaces the default host. */
  char mirror[PATH_MAX];
  pathf(mirror, "%s/", F.base);
  pathf(out, "%s/out_mnist", F.root);
  assert_int_equal(pt_fetch(pt_fetch_spec_find("mnist"), out, mirror, 1), PT_ERR_CHECKSUM);
  assert_msg_has("mnist");
  assert_msg_has(IMG);
  assert_msg_has("f68b3c2dcbeaaa9fbdd348bbdeb94873");
  assert_msg_has(F.img_md5);
  pathf(p, "%s/" IMG, out);
  assert_false(exists(p));
  assert_false(has_part_files(out));

  /* A local copy (file://) that fails the check, as Debian's recompressed
   * files do: the message says to read it in place instead. */
  char local[PATH_MAX];
  pathf(local, "file://%s/", F.serve);
  pathf(out, "%s/out_local", F.root);
  assert_int_equal(pt_fetch_files(local, files, 1, out, 0, 0), PT_ERR_CHECKSUM);
  assert_msg_has(WRONG_MD5);
  assert_msg_has("train from its directory with --data-dir");
  assert_false(has_part_files(out));
}

static void test_http_404(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], url[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/out_404", F.root);
  pt_fetch_file files[] = {{"missing.bin", WRONG_MD5}};
  assert_int_equal(pt_fetch_files(F.base, files, 1, out, 0, 1), PT_ERR_NET);
  pathf(url, "%s/missing.bin", F.base);
  assert_msg_has(url);
  assert_msg_has("404");
  pathf(p, "%s/missing.bin", out);
  assert_false(exists(p));
  assert_false(has_part_files(out));
}

static void test_connection_refused(void **state) {
  (void)state;
  char out[PATH_MAX], url[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/out_refused", F.root);
  pt_fetch_file files[] = {{IMG, F.img_md5}};
  double t0 = now_s();
  assert_int_equal(pt_fetch_files(F.dead_base, files, 1, out, 0, 0), PT_ERR_NET);
  assert_true(now_s() - t0 < 10.0);
  pathf(url, "%s" IMG, F.dead_base);
  assert_msg_has(url);
  pathf(p, "%s/" IMG, out);
  assert_false(exists(p));
  assert_false(has_part_files(out));
  /* The directories the fetch made are gone again, those it found stay. */
  assert_false(exists(out));
  pathf(out, "%s/out_refused_new/a/b/", F.root);
  assert_int_equal(pt_fetch_files(F.dead_base, files, 1, out, 0, 0), PT_ERR_NET);
  pathf(p, "%s/out_refused_new", F.root);
  assert_false(exists(p));
  assert_true(exists(F.root));
  pathf(p, "%s/out_refused_kept", F.root);
  assert_int_equal(mkdir(p, 0755), 0);
  pathf(out, "%s/out_refused_kept/x/y", F.root);
  assert_int_equal(pt_fetch_files(F.dead_base, files, 1, out, 0, 0), PT_ERR_NET);
  pathf(p, "%s/out_refused_kept/x", F.root);
  assert_false(exists(p));
  pathf(p, "%s/out_refused_kept", F.root);
  assert_true(exists(p));
}

static void test_redirects(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], base[PATH_MAX], p[PATH_MAX], ref[PATH_MAX];
  pathf(out, "%s/out_redirect", F.root);
  pt_fetch_file files[] = {{IMG, F.img_md5}};
  pathf(base, "%s/redirect", F.base); /* no trailing '/': the join adds it */
  assert_int_equal(pt_fetch_files(base, files, 1, out, 0, 0), PT_OK);
  pathf(p, "%s/" IMG, out);
  pathf(ref, "%s/" IMG, F.serve);
  assert_true(files_equal(p, ref));

  /* A redirect to file:// must not be followed. */
  pathf(out, "%s/out_redirect_file", F.root);
  pathf(base, "%s/to-file/", F.base);
  assert_int_equal(pt_fetch_files(base, files, 1, out, 0, 0), PT_ERR_NET);
  assert_msg_has(base);
  pathf(p, "%s/" IMG, out);
  assert_false(exists(p));
  assert_false(has_part_files(out));
}

static void test_truncated_transfer(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], base[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/out_short", F.root);
  pathf(base, "%s/short/", F.base);
  pt_fetch_file files[] = {{IMG, F.img_md5}};
  assert_int_equal(pt_fetch_files(base, files, 1, out, 0, 0), PT_ERR_NET);
  assert_msg_has(base);
  pathf(p, "%s/" IMG, out);
  assert_false(exists(p));
  assert_false(has_part_files(out));
}

static void test_mirror_join(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], base[PATH_MAX], p[PATH_MAX], ref[PATH_MAX];
  pt_fetch_file files[] = {{IMG, F.img_md5}};
  pathf(ref, "%s/" IMG, F.serve);
  const char *suffixes[] = {"/sub", "/sub/"};
  for (int i = 0; i < 2; i++) {
    pathf(out, "%s/out_join%d", F.root, i);
    pathf(base, "%s%s", F.base, suffixes[i]);
    assert_int_equal(pt_fetch_files(base, files, 1, out, 0, 0), PT_OK);
    pathf(p, "%s/" IMG, out);
    assert_true(files_equal(p, ref));
  }
}

static void test_fetch_tar_gz(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], p[PATH_MAX], ref[PATH_MAX];
  pathf(out, "%s/out_cifar", F.root);
  pt_fetch_file files[] = {{TGZ, F.tgz_md5}};
  assert_int_equal(pt_fetch_files(F.base, files, 1, out, 1, 1), PT_OK);
  pathf(p, "%s/" BATCH_DIR "/test_batch.bin", out);
  pathf(ref, "%s/ref_test_batch.bin", F.root);
  assert_true(files_equal(p, ref));
  struct stat first;
  assert_int_equal(stat(p, &first), 0);
  pathf(p, "%s/" BATCH_DIR "/data_batch_1.bin", out);
  pathf(ref, "%s/ref_data_batch_1.bin", F.root);
  assert_true(files_equal(p, ref));
  pathf(p, "%s/" BATCH_DIR "/batches.meta.txt", out);
  assert_true(exists(p));
  pathf(p, "%s/" TGZ, out); /* kept, so the next fetch can skip */
  assert_true(exists(p));
  assert_false(has_part_files(out));

  /* Already downloaded and extracted: no network, nothing rewritten. */
  assert_int_equal(pt_fetch_files(F.dead_base, files, 1, out, 1, 1), PT_OK);
  struct stat second;
  pathf(p, "%s/" BATCH_DIR "/test_batch.bin", out);
  assert_int_equal(stat(p, &second), 0);
  assert_int_equal(first.st_ino, second.st_ino);

  /* A damaged member (wrong size) is restored from the kept archive. */
  assert_int_equal(truncate(p, 100), 0);
  assert_int_equal(pt_fetch_files(F.dead_base, files, 1, out, 1, 0), PT_OK);
  pathf(ref, "%s/ref_test_batch.bin", F.root);
  assert_true(files_equal(p, ref));
  assert_false(has_part_files(out));
}

static void test_fetch_evil_tar_gz(void **state) {
  (void)state;
  require_server();
  char out[PATH_MAX], p[PATH_MAX];
  pathf(out, "%s/out_evil", F.root);
  pt_fetch_file files[] = {{"evil.tar.gz", F.evil_md5}};
  assert_int_equal(pt_fetch_files(F.base, files, 1, out, 1, 0), PT_ERR_FORMAT);
  assert_msg_has("../evil");
  pathf(p, "%s/evil", F.root);
  assert_false(exists(p));
  pathf(p, "%s/" BATCH_DIR, out);
  assert_false(exists(p));
}

int main(void) {
  atexit(at_exit_cleanup);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_md5_known_answers),
      cmocka_unit_test(test_spec_table),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_extract_rejects_traversal),
      cmocka_unit_test(test_extract_only_files_and_dirs),
      cmocka_unit_test(test_extract_refuses_symlinked_subdir),
      cmocka_unit_test(test_extract_corrupt_archive),
      cmocka_unit_test(test_connection_refused),
      cmocka_unit_test(test_fetch_then_skip),
      cmocka_unit_test(test_redownload_corrupt_and_stale_part),
      cmocka_unit_test(test_not_a_file_at_the_name),
      cmocka_unit_test(test_checksum_mismatch),
      cmocka_unit_test(test_http_404),
      cmocka_unit_test(test_redirects),
      cmocka_unit_test(test_truncated_transfer),
      cmocka_unit_test(test_mirror_join),
      cmocka_unit_test(test_fetch_tar_gz),
      cmocka_unit_test(test_fetch_evil_tar_gz),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
