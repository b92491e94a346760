/* ptrain data fetch: download and verify a dataset. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "data/dataset.h"
#include "fetch/fetch.h"
#include "util/stop.h"

/* The first signal ends the download in hand, which removes its part file;
 * a second ends the process at once. */
static void on_stop(int sig) {
  if (pt_train_stop_request(sig) > 1) _exit(128 + sig);
}

int pt_cmd_data(int argc, char **argv) {
  const char *dir = NULL, *mirror = NULL;
  const pt_arg flags[] = {
      {"--dir", ARG_STR, &dir, 0, 0, NULL, "DIR", "where to put the files (default data/NAME)"},
      {"--mirror", ARG_STR, &mirror, 0, 0, NULL, "URL", "download from this base URL instead"},
  };
  const int n = 2;
  const char *pos[2];
  int npos, help;
  int rc = pt_args_parse("data", flags, n, argc, argv, 2, &help, pos, 2, &npos);
  if (rc) return rc;
  if (help || npos == 0) {
    pt_args_print_help("ptrain data fetch mnist|fashion-mnist|cifar10 [--dir DIR] [--mirror URL]",
                       "Download a dataset from its usual location and verify its checksums.", flags, n);
    return help ? 0 : PT_USAGE_ERROR;
  }
  if (strcmp(pos[0], "fetch")) {
    fprintf(stderr, "ptrain data: unknown action '%s' (expected 'fetch')\n", pos[0]);
    return PT_USAGE_ERROR;
  }
  if (npos < 2) {
    fprintf(stderr, "ptrain data fetch: missing dataset (expected mnist, fashion-mnist or cifar10)\n");
    return PT_USAGE_ERROR;
  }
  const pt_fetch_spec *spec = pt_fetch_spec_find(pos[1]);
  if (!spec) {
    fprintf(stderr, "ptrain data fetch: unknown dataset '%s' (expected mnist, fashion-mnist or cifar10)\n", pos[1]);
    return PT_USAGE_ERROR;
  }
  /* A local directory given as a path is the common slip: say so before
   * anything is created, rather than pass curl what it cannot read. */
  if (mirror && !strstr(mirror, "://")) {
    if (mirror[0] == '/')
      fprintf(stderr, "ptrain data fetch: --mirror %s: expected a URL (https://..., or file://%s for that "
                      "directory)\n", mirror, mirror);
    else
      fprintf(stderr, "ptrain data fetch: --mirror %s: expected a URL (https://..., or file:// and a directory's "
                      "absolute path)\n", mirror);
    return PT_USAGE_ERROR;
  }
  /* The schemes that can serve the files; file:// takes an absolute path
   * (file://mir would name a host, mir). */
  if (mirror && strncmp(mirror, "https://", 8) && strncmp(mirror, "http://", 7) && strncmp(mirror, "file:///", 8)) {
    fprintf(stderr, "ptrain data fetch: --mirror %s: expected https://, http:// or file:// and a directory's absolute "
                    "path (file:///srv/mnist)\n", mirror);
    return PT_USAGE_ERROR;
  }
  char def[64];
  snprintf(def, sizeof def, "data/%s", pos[1]);
  /* A download cut by a signal removes its part file before the exit. */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) /* one ignored (nohup) stays ignored */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
  const pt_status st = pt_fetch(spec, dir ? dir : def, mirror, isatty(fileno(stderr)) ? 1 : 1);
  const int sig = pt_train_stop_signal();
  if (st != PT_OK) {
    pt_cli_fail("data fetch");
    return sig ? 128 + sig : 1;
  }
  /* A signal while checksums were checked: the files are whole, but the
   * fetch was asked to stop, not to succeed. */
  if (sig) {
    fprintf(stderr, "ptrain data fetch: stopped by %s; the files fetched are complete and verified\n", strsignal(sig));
    return 128 + sig;
  }
  printf("%s is ready in %s\n", pos[1], dir ? dir : def);
  return 0;
}
