#include "cli/job_request.h"

#include <errno.h>
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

int pt_job_check_sbatch(const char *cmd, const char *v, const pt_job_owned *owned, size_t n) {
  int rc = pt_job_check_token(cmd, "--sbatch", v);
  if (rc) return rc;
  const int long_form = !strncmp(v, "--", 2) && v[2] && v[2] != '=';
  if (!long_form && !(v[0] == '-' && v[1] && v[1] != '-'))
    return pt_cli_usage(cmd, "--sbatch '%s': expected one sbatch option, as --account=proj or --qos=high", v);
  const size_t len = long_form ? strcspn(v, "=") : 0;
  for (size_t k = 0; k < n; k++) {
    const int same = long_form ? strlen(owned[k].name) == len && !strncmp(v, owned[k].name, len)
                               : owned[k].letter && v[1] == owned[k].letter;
    if (same) return pt_cli_usage(cmd, "--sbatch %s: the script writes %s itself%s", v, owned[k].name, owned[k].hint);
  }
  return 0;
}

int pt_job_check_submit(const char *cmd, const char *v, const pt_job_owned *owned, size_t n) {
  static const char key_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+";
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if (*p < 0x20 || *p > 0x7e)
      return pt_cli_usage(cmd, "--submit: expected one line of printable text, got a control character in '%s'", v);
  const size_t klen = strspn(v, key_chars);
  const char *eq = v + klen + strspn(v + klen, " ");
  const char *value = *eq == '=' ? eq + 1 + strspn(eq + 1, " ") : NULL;
  if (!klen || !value || !*value)
    return pt_cli_usage(cmd, "--submit '%s': expected KEY = VALUE, as 'requirements = (OpSysMajorVer == 12)'", v);
  for (size_t k = 0; k < n; k++)
    if (strlen(owned[k].name) == klen && !strncasecmp(v, owned[k].name, klen))
      return pt_cli_usage(cmd, "--submit '%s': the submit file sets %s itself%s", v, owned[k].name, owned[k].hint);
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

pt_job_need pt_job_estimate(const char *model, const char *model_file, const char *dataset, int batch_size,
                            int test_batch_size, int keep_checkpoints, char *dataset_out, size_t dataset_len) {
  pt_model_spec spec;
  pt_model_summary sum;
  pt_job_need need = {0, 0};
  snprintf(dataset_out, dataset_len, "%s", dataset ? dataset : ""); /* the model's, where it is read */
  if (pt_train_load_spec(model, model_file, &spec) != PT_OK || pt_model_summarize(&spec, &sum) != PT_OK) {
    pt_error_clear();
    return need;
  }
  if (!dataset) snprintf(dataset_out, dataset_len, "%s", spec.defaults.dataset);
  const double batch = batch_size > 0 ? batch_size : spec.defaults.batch;
  const double test_batch = test_batch_size > 0 ? test_batch_size : spec.defaults.test_batch;
  const double per_batch = 2 * batch > test_batch ? 2 * batch : test_batch;
  const double data = !strcmp(dataset_out, "cifar10") ? 60000.0 * 3 * 32 * 32 : 70000.0 * 28 * 28;
  const double params = (double)sum.nparams;
  need.memory_mib = (16.0 * params + 4.0 * (double)sum.activation_floats * per_batch + data) / 1048576.0 + 512.0;
  const double kept = (keep_checkpoints > 0 ? keep_checkpoints : 2) + 1;
  need.disk_mib = (kept * 12.0 * params + 4.0 * params + data) / 1048576.0 + 256.0;
  return need;
}
