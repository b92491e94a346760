/* The model-spec parser. Line-oriented: a directive, then a name for layers
 * that own parameters, then key=value options. Every error carries
 * "origin:line:" and names what was expected, because this is the file format
 * users write by hand. */
#include "nn/spec.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "optim/optimizer.h"
#include "util/float_narrow.h"
#include "util/list.h"
#include "util/stop.h"

#define MAX_TOKENS 16

typedef struct {
  const char *origin;
  int line;
} ctx_t;

static pt_status err(const ctx_t *c, const char *fmt, const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
  return pt_fail(PT_ERR_FORMAT, "%s:%d: %s", c->origin, c->line, msg);
}

static pt_status parse_int(const ctx_t *c, const char *key, const char *v, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    char range[64];
    snprintf(range, sizeof range, "an integer in [%d, %d]", lo, hi);
    return pt_fail(PT_ERR_FORMAT, "%s:%d: %s=%s: expected %s", c->origin, c->line, key, v, range);
  }
  *out = (int)x;
  return PT_OK;
}

static pt_status parse_float(const ctx_t *c, const char *key, const char *v, double lo, double hi,
                             float *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !isfinite(x) || x < lo || x > hi)
    return pt_fail(PT_ERR_FORMAT, "%s:%d: %s=%s: expected a number in [%g, %g]", c->origin, c->line,
                   key, v, lo, hi);
  /* Checked in double, kept as a float: lr=1e-50 would train at lr 0. */
  const char *lost = pt_float_narrow(x, out);
  if (lost) {
    char range[160];
    pt_float_range_text(range, sizeof range, lo, hi);
    return pt_fail(PT_ERR_FORMAT, "%s:%d: %s=%s: expected %s (it is %s as a float)", c->origin, c->line, key, v, range,
                   lost);
  }
  return PT_OK;
}

/* "a" or "a,b,c" into out[3] (one value is repeated over the channels);
 * *count gets how many were given, which the input's channels must allow. */
static pt_status parse_triple(const ctx_t *c, const char *key, const char *v, double lo, float out[3], int *count) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", v);
  if (pt_list_has_empty(v))
    return pt_fail(PT_ERR_FORMAT, "%s:%d: %s=%s: an empty value; expected 1 or 3 numbers separated by commas",
                   c->origin, c->line, key, v);
  int n = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (n == 3) return pt_fail(PT_ERR_FORMAT, "%s:%d: %s: at most 3 values", c->origin, c->line, key);
    PT_TRY(parse_float(c, key, t, lo, 1e6, &out[n++]));
  }
  if (n == 2 || n == 0) return pt_fail(PT_ERR_FORMAT, "%s:%d: %s=%s: expected 1 or 3 values", c->origin, c->line, key, v);
  for (int i = n; i < 3; i++) out[i] = out[n - 1];
  *count = n;
  return PT_OK;
}

/* Module names as PyTorch allows them in a state_dict key: letters, digits,
 * '_' and the '.' of nesting. Model names may also use '-'. The length is
 * checked apart, for its own message. */
static int valid_chars(const char *s, const char *extra) {
  if (!*s) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          strchr(extra, *p)))
      return 0;
  return 1;
}
/* Every part between the dots names a module: "..", ".a" or "a." would
 * make keys such as "..weight" that PyTorch cannot load. */
static int valid_name(const char *s) {
  return valid_chars(s, "_.") && s[0] != '.' && s[strlen(s) - 1] != '.' && !strstr(s, "..");
}

static pt_status name_too_long(const ctx_t *c, const char *what, const char *name) {
  return pt_fail(PT_ERR_FORMAT, "%s:%d: %s '%.20s...' is %zu characters long; at most %d", c->origin, c->line, what,
                 name, strlen(name), PT_NAME_LEN - 1);
}

/* Splits "key=value"; returns 0 if tok has no '='. */
static int split_kv(char *tok, char **key, char **val) {
  char *eq = strchr(tok, '=');
  if (!eq) return 0;
  *eq = 0;
  *key = tok;
  *val = eq + 1;
  return 1;
}

/* Whether key was given before tok[i] on the line, from tok[from]: split_kv
 * has cut those tokens to their keys. Given twice, one value would be
 * dropped without a word. */
static int given_before(char **tok, int from, int i, const char *key) {
  for (int j = from; j < i; j++)
    if (!strcmp(tok[j], key)) return 1;
  return 0;
}

static const struct {
  const char *word;
  pt_layer_kind kind;
  int named;          /* owns parameters, so needs a module name */
  const char *options;
} layer_words[] = {
    {"conv2d", PT_L_CONV2D, 1, "out, kernel, stride, padding, bias"},
    {"linear", PT_L_LINEAR, 1, "out, bias"},
    {"batchnorm2d", PT_L_BATCHNORM2D, 1, "eps, momentum"},
    {"maxpool2d", PT_L_MAXPOOL2D, 0, "kernel, stride"},
    {"relu", PT_L_RELU, 0, "none"},
    {"dropout", PT_L_DROPOUT, 0, "p"},
    {"flatten", PT_L_FLATTEN, 0, "none"},
    {"logsoftmax", PT_L_LOGSOFTMAX, 0, "none"},
};

/* Whether key is one of options ("out, kernel, stride") as a whole word:
 * "p" is not an option of conv2d for being inside "padding". */
static int has_option(const char *options, const char *key) {
  const size_t n = strlen(key);
  for (const char *o = options; n && *o;) {
    const size_t len = strcspn(o, ",");
    if (len == n && !strncmp(o, key, n)) return 1;
    o += len;
    o += strspn(o, ", ");
  }
  return 0;
}

const char *pt_layer_kind_name(pt_layer_kind kind) {
  for (size_t i = 0; i < sizeof layer_words / sizeof layer_words[0]; i++)
    if (layer_words[i].kind == kind) return layer_words[i].word;
  return "?";
}

const char *pt_loss_kind_name(pt_loss_kind kind) {
  return kind == PT_LOSS_NLL ? "nll" : "cross-entropy";
}

static pt_status parse_layer(const ctx_t *c, int w, char **tok, int ntok, pt_layer_spec *L) {
  memset(L, 0, sizeof *L);
  L->kind = layer_words[w].kind;
  L->line = c->line;
  L->stride = 0; /* 0 = default: 1 for conv, kernel for pooling */
  L->bias = 1;
  L->eps = 1e-5f;
  L->momentum = 0.1f;
  L->p = -1.0f;
  int i = 1;
  if (layer_words[w].named) {
    if (i >= ntok || strchr(tok[i], '='))
      return err(c, "%s needs a module name first, as in PyTorch (e.g. '%s conv1 ...')", tok[0], tok[0]);
    if (strlen(tok[i]) >= PT_NAME_LEN) return name_too_long(c, "module name", tok[i]);
    if (!valid_name(tok[i]))
      return err(c, "'%s' is not a valid module name (letters, digits, '_', and '.' between parts)", tok[i], NULL);
    snprintf(L->name, sizeof L->name, "%s", tok[i]);
    i++;
  }
  for (const int first = i; i < ntok; i++) {
    char *k, *v;
    if (!split_kv(tok[i], &k, &v))
      return err(c, "unexpected '%s': options are written key=value (%s)", tok[i], layer_words[w].options);
    if (!has_option(layer_words[w].options, k)) goto unknown;
    if (given_before(tok, first, i, k)) return err(c, "option '%s' given twice%s", k, "");
    if (!strcmp(k, "out")) PT_TRY(parse_int(c, k, v, 1, 1 << 20, &L->out));
    else if (!strcmp(k, "kernel")) PT_TRY(parse_int(c, k, v, 1, 1024, &L->kernel));
    else if (!strcmp(k, "stride")) PT_TRY(parse_int(c, k, v, 1, 1024, &L->stride));
    else if (!strcmp(k, "padding")) PT_TRY(parse_int(c, k, v, 0, 1024, &L->padding));
    else if (!strcmp(k, "bias")) PT_TRY(parse_int(c, k, v, 0, 1, &L->bias));
    else if (!strcmp(k, "p")) PT_TRY(parse_float(c, k, v, 0.0, 0.999999, &L->p));
    else if (!strcmp(k, "eps")) PT_TRY(parse_float(c, k, v, 1e-12, 1.0, &L->eps));
    else if (!strcmp(k, "momentum")) PT_TRY(parse_float(c, k, v, 0.0, 1.0, &L->momentum));
    else goto unknown;
    continue;
  unknown:
    return err(c, "unknown option '%s' (expected: %s)", k, layer_words[w].options);
  }
  switch (L->kind) {
    case PT_L_CONV2D:
      if (!L->out || !L->kernel) return err(c, "conv2d %s needs out= and kernel=", L->name, NULL);
      if (!L->stride) L->stride = 1;
      break;
    case PT_L_LINEAR:
      if (!L->out) return err(c, "linear %s needs out=", L->name, NULL);
      break;
    case PT_L_MAXPOOL2D:
      if (!L->kernel) return err(c, "maxpool2d needs kernel=", NULL, NULL);
      if (!L->stride) L->stride = L->kernel;
      break;
    case PT_L_DROPOUT:
      if (L->p < 0) return err(c, "dropout needs p= (a probability in [0, 1))", NULL, NULL);
      break;
    default: break;
  }
  return PT_OK;
}

/* value is one of "a|b|c", copied into out; or an error naming the line. */
static pt_status parse_word(const ctx_t *c, const char *key, const char *v, const char *words, char *out,
                            size_t size) {
  const size_t n = strlen(v);
  for (const char *p = words; *p;) {
    const char *bar = strchr(p, '|');
    const size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && !strncmp(p, v, n) && n < size) {
      memcpy(out, v, n + 1);
      return PT_OK;
    }
    if (!bar) break;
    p = bar + 1;
  }
  return pt_fail(PT_ERR_FORMAT, "%s:%d: defaults: %s=%s: expected one of %s", c->origin, c->line, key, v, words);
}

/* The keys of 'defaults', which may come on several lines. */
enum { DK_DATASET, DK_OPTIMIZER, DK_SCHEDULER, DK_LR, DK_GAMMA, DK_MOMENTUM, DK_WEIGHT_DECAY, DK_BATCH,
       DK_TEST_BATCH, NDEFAULT_KEYS };
static const char *const default_keys[NDEFAULT_KEYS] = {
    [DK_DATASET] = "dataset", [DK_OPTIMIZER] = "optimizer", [DK_SCHEDULER] = "scheduler",
    [DK_LR] = "lr",           [DK_GAMMA] = "gamma",         [DK_MOMENTUM] = "momentum",
    [DK_WEIGHT_DECAY] = "weight-decay", [DK_BATCH] = "batch", [DK_TEST_BATCH] = "test-batch"};

/* The names are those the dataset, optimizer and scheduler parsers take:
 * checked here so that a typo is reported with its file and line rather
 * than by the trainer, which no longer knows where the name came from.
 * key_line[k]: the line that gave default_keys[k], so that a key given
 * again, on this line or a later one, is named rather than one value
 * dropped without a word. */
static pt_status parse_defaults(const ctx_t *c, char **tok, int ntok, pt_train_defaults *d,
                                int key_line[NDEFAULT_KEYS]) {
  for (int i = 1; i < ntok; i++) {
    char *k, *v;
    if (!split_kv(tok[i], &k, &v)) return err(c, "defaults: expected key=value, got '%s'", tok[i], NULL);
    int key = 0;
    while (key < NDEFAULT_KEYS && strcmp(k, default_keys[key])) key++;
    if (key == NDEFAULT_KEYS)
      return err(c, "defaults: unknown key '%s' (expected dataset, optimizer, lr, batch, test-batch, "
                 "scheduler, gamma, momentum, weight-decay)%s", k, NULL);
    if (key_line[key] == c->line) return err(c, "defaults: '%s' given twice%s", k, "");
    if (key_line[key])
      return pt_fail(PT_ERR_FORMAT, "%s:%d: defaults: '%s' given twice (first on line %d)", c->origin, c->line, k,
                     key_line[key]);
    key_line[key] = c->line;
    switch (key) {
      case DK_DATASET: PT_TRY(parse_word(c, k, v, PT_DATASET_NAMES, d->dataset, sizeof d->dataset)); break;
      case DK_OPTIMIZER: PT_TRY(parse_word(c, k, v, PT_OPT_NAMES, d->optimizer, sizeof d->optimizer)); break;
      case DK_SCHEDULER: PT_TRY(parse_word(c, k, v, PT_SCHED_NAMES, d->scheduler, sizeof d->scheduler)); break;
      case DK_LR: PT_TRY(parse_float(c, k, v, 0.0, 1e3, &d->lr)); break;
      case DK_GAMMA: PT_TRY(parse_float(c, k, v, 0.0, 1.0, &d->gamma)); break;
      case DK_MOMENTUM: PT_TRY(parse_float(c, k, v, 0.0, 1.0, &d->momentum)); break;
      case DK_WEIGHT_DECAY: PT_TRY(parse_float(c, k, v, 0.0, 1.0, &d->weight_decay)); break;
      case DK_BATCH: PT_TRY(parse_int(c, k, v, 1, 1 << 20, &d->batch)); break;
      default: PT_TRY(parse_int(c, k, v, 1, 1 << 20, &d->test_batch)); break;
    }
  }
  return PT_OK;
}

/* Momentum is SGD's: with another default optimizer, a run without
 * --optimizer sgd would be refused, far from the line that caused it. */
static pt_status check_defaults(const char *origin, const pt_train_defaults *d, const int key_line[NDEFAULT_KEYS]) {
  if (d->momentum <= 0 || !strcmp(d->optimizer, "sgd")) return PT_OK;
  char where[48] = "";
  if (key_line[DK_OPTIMIZER] != key_line[DK_MOMENTUM])
    snprintf(where, sizeof where, " (line %d)", key_line[DK_OPTIMIZER]);
  return pt_fail(PT_ERR_FORMAT, "%s:%d: defaults: momentum=%g applies to optimizer sgd, not %s%s: drop momentum, or "
                 "make sgd the default", origin, key_line[DK_MOMENTUM], d->momentum, d->optimizer, where);
}

static void spec_reset(pt_model_spec *s) {
  memset(s, 0, sizeof *s);
  s->loss = PT_LOSS_CROSS_ENTROPY;
  for (int i = 0; i < 3; i++) s->std[i] = 1.0f;
  pt_train_defaults *d = &s->defaults;
  snprintf(d->dataset, sizeof d->dataset, "fashion-mnist");
  snprintf(d->optimizer, sizeof d->optimizer, "sgd");
  snprintf(d->scheduler, sizeof d->scheduler, "none");
  d->lr = NAN; /* not given: the trainer picks by the optimizer */
  d->batch = 64;
  d->test_batch = 1000;
  d->gamma = 0.7f;
}

pt_status pt_spec_parse(const char *text, const char *origin, pt_model_spec *spec) {
  spec_reset(spec);
  snprintf(spec->origin, sizeof spec->origin, "%s", origin);
  ctx_t c = {origin, 0};
  int have_input = 0;
  int norm_line = 0, norm_values = 0; /* the first normalize value list of more than one */
  int loss_line = 0;                  /* the loss line, for the check that NLL follows logsoftmax */
  const char *p = text;
  /* A UTF-8 byte-order mark, which some Windows editors write: taken as
   * CRLF line ends are, not as part of the first directive. */
  if (!strncmp(p, "\xef\xbb\xbf", 3)) p += 3;
  /* The lines of directives that a spec gives once: name, input, loss,
   * normalize, augment. A second would silently replace the first. */
  static const char *const once[] = {"name", "input", "loss", "normalize", "augment"};
  int once_line[sizeof once / sizeof once[0]] = {0};
  int default_line[NDEFAULT_KEYS] = {0};
  char line[1024];
  while (*p) {
    c.line++;
    size_t len = strcspn(p, "\n");
    /* A CRLF line's \r is its end, not one of its 1,023 characters. */
    const size_t body = len - (len && p[len - 1] == '\r');
    if (body >= sizeof line) return err(&c, "line longer than %s characters", "1023", NULL);
    memcpy(line, p, body);
    line[body] = 0;
    p += len + (p[len] == '\n');
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    /* Directives are ASCII: any other byte would be echoed raw into the
     * errors below (a terminal's escape sequence, half a UTF-8 letter).
     * Comments may hold any text. */
    for (const unsigned char *b = (const unsigned char *)line; *b; b++)
      if ((*b < 0x20 && *b != '\t' && *b != '\r') || *b >= 0x7f) {
        char at[48];
        snprintf(at, sizeof at, "column %d, byte 0x%02x", (int)(b - (const unsigned char *)line) + 1, *b);
        return err(&c, "%s: expected printable ASCII outside comments ('#' starts one)%s", at, NULL);
      }
    char *tok[MAX_TOKENS];
    int ntok = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
      if (ntok == MAX_TOKENS) return err(&c, "too many words on one line", NULL, NULL);
      tok[ntok++] = t;
    }
    if (!ntok) continue;
    for (size_t d = 0; d < sizeof once / sizeof once[0]; d++) {
      if (strcmp(tok[0], once[d])) continue;
      if (once_line[d]) {
        char first[16];
        snprintf(first, sizeof first, "%d", once_line[d]);
        return err(&c, "'%s' given twice (first on line %s)", once[d], first);
      }
      once_line[d] = c.line;
    }
    if (!strcmp(tok[0], "name")) {
      if (ntok == 2 && strlen(tok[1]) >= PT_NAME_LEN) return name_too_long(&c, "name", tok[1]);
      if (ntok != 2 || !valid_chars(tok[1], "_.-"))
        return err(&c, "expected 'name NAME' (letters, digits, '_', '.', '-')", NULL, NULL);
      snprintf(spec->name, sizeof spec->name, "%s", tok[1]);
    } else if (!strcmp(tok[0], "input")) {
      if (ntok != 4) return err(&c, "expected 'input C H W' (e.g. 'input 1 28 28')", NULL, NULL);
      /* Images are grey or colour: the loader, the image reader and the
       * normalisation (one value, or one per channel) know up to 3. */
      PT_TRY(parse_int(&c, "input C", tok[1], 1, 3, &spec->in_c));
      PT_TRY(parse_int(&c, "H", tok[2], 1, 65536, &spec->in_h));
      PT_TRY(parse_int(&c, "W", tok[3], 1, 65536, &spec->in_w));
      have_input = 1;
    } else if (!strcmp(tok[0], "loss")) {
      if (ntok != 2) return err(&c, "expected 'loss nll' or 'loss cross-entropy'", NULL, NULL);
      loss_line = c.line;
      if (!strcmp(tok[1], "nll")) spec->loss = PT_LOSS_NLL;
      else if (!strcmp(tok[1], "cross-entropy")) spec->loss = PT_LOSS_CROSS_ENTROPY;
      else return err(&c, "unknown loss '%s' (expected nll or cross-entropy)", tok[1], NULL);
    } else if (!strcmp(tok[0], "normalize")) {
      if (ntok == 1) return err(&c, "normalize: expected mean=M[,M,M] std=S[,S,S]", NULL, NULL);
      for (int i = 1; i < ntok; i++) {
        char *k, *v;
        if (!split_kv(tok[i], &k, &v) || (strcmp(k, "mean") && strcmp(k, "std")))
          return err(&c, "normalize: expected mean=M[,M,M] std=S[,S,S], got '%s'", tok[i], NULL);
        if (given_before(tok, 1, i, k)) return err(&c, "normalize: '%s' given twice%s", k, "");
        int n;
        if (!strcmp(k, "mean")) PT_TRY(parse_triple(&c, k, v, -1e6, spec->mean, &n));
        else PT_TRY(parse_triple(&c, k, v, 1e-6, spec->std, &n));
        /* One value per channel, or one for all; checked against the
         * input once both are read, in whichever order. */
        if (n > 1 && !norm_line) {
          norm_line = c.line;
          norm_values = n;
        }
      }
    } else if (!strcmp(tok[0], "augment")) {
      if (ntok == 1) return err(&c, "augment: expected crop=PAD flip=0|1", NULL, NULL);
      for (int i = 1; i < ntok; i++) {
        char *k, *v;
        if (!split_kv(tok[i], &k, &v)) return err(&c, "augment: expected crop=PAD flip=0|1", NULL, NULL);
        if (given_before(tok, 1, i, k)) return err(&c, "augment: '%s' given twice%s", k, "");
        if (!strcmp(k, "crop")) PT_TRY(parse_int(&c, k, v, 0, 64, &spec->crop_pad));
        else if (!strcmp(k, "flip")) PT_TRY(parse_int(&c, k, v, 0, 1, &spec->hflip));
        else return err(&c, "augment: unknown key '%s' (expected crop, flip)", k, NULL);
      }
    } else if (!strcmp(tok[0], "defaults")) {
      PT_TRY(parse_defaults(&c, tok, ntok, &spec->defaults, default_line));
    } else {
      size_t w = 0, nw = sizeof layer_words / sizeof layer_words[0];
      while (w < nw && strcmp(tok[0], layer_words[w].word)) w++;
      if (w == nw)
        return err(&c, "unknown directive '%s' (expected input, conv2d, linear, batchnorm2d, maxpool2d, "
                   "relu, dropout, flatten, logsoftmax, loss, normalize, augment, defaults, name)%s",
                   tok[0], NULL);
      if (spec->nlayers == PT_MAX_LAYERS) return err(&c, "more than %s layers", "64", NULL);
      PT_TRY(parse_layer(&c, (int)w, tok, ntok, &spec->layers[spec->nlayers]));
      for (int i = 0; i < spec->nlayers; i++)
        if (spec->layers[spec->nlayers].name[0] && !strcmp(spec->layers[i].name, spec->layers[spec->nlayers].name))
          return err(&c, "module name '%s' is already used", spec->layers[i].name, NULL);
      spec->nlayers++;
    }
  }
  c.line = 0;
  if (!have_input) return pt_fail(PT_ERR_FORMAT, "%s: no 'input C H W' line", origin);
  if (norm_line && norm_values != spec->in_c)
    return pt_fail(PT_ERR_FORMAT, "%s:%d: normalize: %d values for an input of %d channel%s: give one value, or "
                   "one per channel", origin, norm_line, norm_values, spec->in_c, spec->in_c == 1 ? "" : "s");
  if (!spec->nlayers) return pt_fail(PT_ERR_FORMAT, "%s: no layers", origin);
  /* NLL takes log-probabilities, and of these layers only logsoftmax makes
   * them: on raw scores the loss has no floor and training diverges
   * without a word. */
  if (spec->loss == PT_LOSS_NLL && spec->layers[spec->nlayers - 1].kind != PT_L_LOGSOFTMAX)
    return pt_fail(PT_ERR_FORMAT, "%s:%d: loss nll expects log-probabilities, but the model ends with %s: end it "
                   "with logsoftmax, or use 'loss cross-entropy' (which takes raw scores)", origin, loss_line,
                   pt_layer_kind_name(spec->layers[spec->nlayers - 1].kind));
  PT_TRY(check_defaults(origin, &spec->defaults, default_line));
  if (!spec->name[0]) snprintf(spec->name, sizeof spec->name, "custom");
  return PT_OK;
}

/* A FIFO's open waits for a writer, and the stop signals' handlers restart
 * it: a FIFO that nobody writes would hold the run deaf to SIGTERM. So it
 * is opened without waiting, and the wait is a poll, which a handled
 * signal interrupts whatever SA_RESTART says; the timeout covers a signal
 * that came just before the poll began. Text already written is read
 * whatever the signal: the run's start-up answers the stop after that. */
static pt_status wait_for_writer(int fd, const char *path) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  for (;;) {
    const int ready = poll(&p, 1, 200);
    if (ready > 0) return PT_OK;
    if (ready < 0 && errno != EINTR) return pt_fail_errno(PT_ERR_IO, "model file %s: waiting for a writer", path);
    const int sig = pt_train_stop_signal();
    if (sig && poll(&p, 1, 0) <= 0)
      return pt_fail(PT_ERR_IO, "model file %s is a FIFO that nobody wrote to before %s: expected a spec", path,
                     strsignal(sig));
  }
}

pt_status pt_spec_read_file(const char *path, char **text) {
  *text = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return pt_fail_errno(PT_ERR_IO, "cannot open model file %s", path);
  /* fopen takes a directory on Linux, and reading it then fails with
   * EISDIR, which said only "read error". */
  struct stat sb;
  pt_status st = PT_OK;
  if (fstat(fd, &sb) != 0) st = pt_fail_errno(PT_ERR_IO, "cannot open model file %s", path);
  else if (S_ISDIR(sb.st_mode))
    st = pt_fail(PT_ERR_IO, "model file %s is a directory; expected a spec file (docs/models.md)", path);
  else if (S_ISFIFO(sb.st_mode)) st = wait_for_writer(fd, path);
  const int flags = fcntl(fd, F_GETFL);
  FILE *f = st == PT_OK && flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
  if (!f) {
    if (st == PT_OK) st = pt_fail_errno(PT_ERR_IO, "cannot open model file %s", path);
    close(fd);
    return st;
  }
  /* 64 KiB and a NUL; one byte more is read to see whether there is more. */
  const size_t max = (size_t)1 << 16;
  char *buf = pt_malloc(max + 1);
  if (!buf) {
    fclose(f);
    return PT_ERR_NOMEM;
  }
  size_t n = fread(buf, 1, max + 1, f);
  int too_big = n > max;
  int bad = ferror(f);
  fclose(f);
  if (bad || too_big) {
    free(buf);
    return pt_fail(PT_ERR_FORMAT, "%s: %s", path, bad ? "read error" : "larger than 64 KiB, not a model spec");
  }
  buf[n] = 0;
  if (memchr(buf, 0, n)) {
    free(buf);
    return pt_fail(PT_ERR_FORMAT, "%s: binary data, expected a text model spec", path);
  }
  *text = buf;
  return PT_OK;
}

pt_status pt_spec_parse_file(const char *path, pt_model_spec *spec) {
  char *buf;
  PT_TRY(pt_spec_read_file(path, &buf));
  pt_status st = pt_spec_parse(buf, path, spec);
  free(buf);
  return st;
}
