#include "cli/job_request.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/commands.h"
#include "nn/model.h"
#include "train/trainer.h"
#include "util/error.h"

const char pt_job_safe_word[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-";

int pt_job_check_token(const char *cmd, const char *flag, const char *v) {
  if (v && strspn(v, pt_job_safe_word) != strlen(v))
    return pt_cli_usage(cmd, "%s: expected letters, digits and _@%%+=:,./- only, got '%s'", flag, v);
  return 0;
}

/* The one-letter sbatch options that take no value, which sbatch reads
 * bundled in front of another (-vN2 is -v -N2). */
static const char kSbatchBare[] = "hHkOQsuVvW";

int pt_job_check_sbatch(const char *cmd, const char *v, const pt_job_sbatch_owned *owned, size_t n) {
  int rc = pt_job_check_token(cmd, "--sbatch", v);
  if (rc) return rc;
  const int long_form = !strncmp(v, "--", 2) && isalpha((unsigned char)v[2]);
  if (!long_form && !(v[0] == '-' && isalpha((unsigned char)v[1])))
    return pt_cli_usage(cmd, "--sbatch '%s': expected one sbatch option, as --account=proj or --qos=high", v);
  if (long_form) {
    const size_t len = strcspn(v, "=");
    for (size_t k = 0; k < n; k++)
      if (strlen(owned[k].name) == len && !strncmp(v, owned[k].name, len))
        return pt_cli_usage(cmd, "--sbatch %s: %s", v, owned[k].why);
    /* sbatch takes any unambiguous beginning of a long option. */
    for (size_t k = 0; k < n; k++)
      if (strlen(owned[k].name) > len && !strncmp(v, owned[k].name, len))
        return pt_cli_usage(cmd, "--sbatch %s: sbatch reads %.*s as %s: %s", v, (int)len, v, owned[k].name,
                            owned[k].why);
    return 0;
  }
  const char *p = v + 1;
  while (*p && strchr(kSbatchBare, *p)) p++;
  for (size_t k = 0; *p && k < n; k++)
    if (owned[k].letter == *p) return pt_cli_usage(cmd, "--sbatch %s: -%c is %s: %s", v, *p, owned[k].name, owned[k].why);
  return 0;
}

/* condor_submit's other spellings of the commands a generated file may
 * own (its submit_utils.h): matched as the command they stand for, so
 * that no table of owned commands need list them. */
static const struct {
  const char *alias, *command;
} kSubmitAliases[] = {
    {"arguments2", "arguments"},
    {"stdout", "output"},
    {"stderr", "error"},
    {"initial_dir", "initialdir"},
    {"TransferInputFiles", "transfer_input_files"},
    {"TransferOutputFiles", "transfer_output_files"},
};

int pt_job_check_submit(const char *cmd, const char *v, const pt_job_submit_owned *owned, size_t n) {
  static const char key_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.";
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p > 0x7e) /* named by its code: printed, it could end the message's line */
      return pt_cli_usage(cmd, "--submit: expected one line of printable ASCII (tabs allowed), got byte 0x%02x at %d",
                          *p, (int)((const char *)p - v) + 1);
  size_t end = strlen(v);
  while (end && (v[end - 1] == ' ' || v[end - 1] == '\t')) end--;
  if (end && v[end - 1] == '\\')
    return pt_cli_usage(cmd, "--submit '%s': a backslash at the end continues the line onto the next, the file's "
                             "own (its queue); end the line otherwise", v);
  /* A job attribute set directly: +Name or MY.Name. */
  const char *key = v + (v[0] == '+' ? 1 : !strncasecmp(v, "MY.", 3) ? 3 : 0);
  size_t klen = strspn(key, key_chars);
  const char *eq = key + klen + strspn(key + klen, " \t");
  const char *value = *eq == '=' ? eq + 1 + strspn(eq + 1, " \t") : NULL;
  if (!klen || !value || !*value)
    return pt_cli_usage(cmd, "--submit '%s': expected KEY = VALUE, as 'requirements = (OpSysMajorVer == 12)'", v);
  for (size_t k = 0; k < sizeof kSubmitAliases / sizeof kSubmitAliases[0]; k++)
    if (strlen(kSubmitAliases[k].alias) == klen && !strncasecmp(key, kSubmitAliases[k].alias, klen)) {
      key = kSubmitAliases[k].command;
      klen = strlen(key);
      break;
    }
  for (size_t k = 0; k < n; k++) {
    const char *attr = owned[k].attribute;
    if ((strlen(owned[k].name) == klen && !strncasecmp(key, owned[k].name, klen)) ||
        (attr && strlen(attr) == klen && !strncasecmp(key, attr, klen)))
      return pt_cli_usage(cmd, "--submit '%s': %s", v, owned[k].why);
  }
  return 0;
}

double pt_job_size_mib(const char *v) {
  const size_t d = strspn(v, "0123456789");
  errno = 0;
  const unsigned long long x = strtoull(v, NULL, 10);
  if (!d || x == 0 || errno == ERANGE) return 0;
  const char *u = v + d;
  double mib = 1.0; /* a bare number */
  if (*u) {
    static const char units[] = "KkMmGgTt";
    static const double unit_mib[] = {1.0 / 1024, 1.0, 1024.0, 1048576.0};
    const char *at = strchr(units, *u);
    if (!at) return 0;
    mib = unit_mib[(at - units) / 2];
    u++;
    if (*u == 'B' || *u == 'b') u++;
    if (*u) return 0;
  }
  /* At most 1 PiB, a machine's memory many times over: more is a slip
   * (a unit typed twice over), which no machine would ever match. */
  return (double)x * mib <= 1073741824.0 ? (double)x * mib : 0;
}

int pt_job_valid_size(const char *v) { return pt_job_size_mib(v) > 0; }

void pt_job_size_text(const char *v, char *out, size_t len) {
  snprintf(out, len, "%s%s", v, v[strspn(v, "0123456789")] ? "" : "MB");
}

/* The optimizer's state, in floats per weight: PyTorch's for each (Adam's
 * and AdamW's two moments, Adadelta's square average and accumulated
 * update, SGD's momentum buffer only with momentum). */
static double state_per_weight(const pt_job_run *run, const pt_train_defaults *d) {
  const char *name = run->optimizer ? run->optimizer : d->optimizer;
  if (strcmp(name, "sgd")) return 2.0;
  /* The model's momentum goes with the model's optimizer only. */
  const int own = !run->optimizer || !strcmp(run->optimizer, d->optimizer);
  const float momentum = !isnan(run->momentum) ? run->momentum : own ? d->momentum : 0.0f;
  return momentum > 0.0f ? 1.0 : 0.0;
}

pt_job_need pt_job_estimate(const pt_job_run *run, char *dataset_out, size_t dataset_len) {
  pt_model_spec spec;
  if (pt_train_load_spec(run->model, run->model_file, &spec) != PT_OK) {
    pt_error_clear();
    snprintf(dataset_out, dataset_len, "%s", run->dataset ? run->dataset : "");
    return (pt_job_need){0, 0};
  }
  return pt_job_estimate_spec(&spec, run, dataset_out, dataset_len);
}

pt_job_need pt_job_estimate_spec(const pt_model_spec *spec, const pt_job_run *run, char *dataset_out,
                                 size_t dataset_len) {
  pt_model_summary sum;
  pt_job_need need = {0, 0};
  snprintf(dataset_out, dataset_len, "%s", run->dataset ? run->dataset : spec->defaults.dataset);
  if (pt_model_summarize(spec, &sum) != PT_OK) {
    pt_error_clear();
    return need;
  }
  const double batch = run->batch > 0 ? run->batch : spec->defaults.batch;
  const double test_batch = run->test_batch > 0 ? run->test_batch : spec->defaults.test_batch;
  const double per_batch = 2 * batch > test_batch ? 2 * batch : test_batch;
  const double data = !strcmp(dataset_out, "cifar10") ? 60000.0 * 3 * 32 * 32 : 70000.0 * 28 * 28;
  const double weights = 4.0 * (double)sum.nparams, state = weights * state_per_weight(run, &spec->defaults);
  need.memory_mib = (2.0 * weights + state + 4.0 * (double)sum.activation_floats * per_batch + data) / 1048576.0 + 512.0;
  const double keep = run->keep_checkpoints > 0 ? run->keep_checkpoints : 2;
  const double kept = keep + 1 + (run->carried ? keep : 0);
  /* The carried directory's final weights too: a file hard-linked to a
   * checkpoint's travels as a copy of its own. */
  const double finals = run->carried ? 2 * weights : weights;
  need.disk_mib = (kept * (weights + state) + finals + data) / 1048576.0 + 256.0;
  return need;
}
