/* One configuration's measurements as a file, for sweeps run as a cluster's
 * tasks (ptrain scale --task) and gathered afterwards (--collect). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "io/metrics.h"
#include "scale/scale.h"

/* What else makes a configuration this sweep's, beside its place in it. */
static const char *optimizer_of(const pt_scale_config *c) { return c->optimizer ? c->optimizer : "the model's"; }

pt_status pt_scale_result_write(const char *path, int index, const char *model, const pt_scale_config *c) {
  pt_metrics *m;
  PT_TRY(pt_metrics_open(path, 0, &m));
  pt_metrics_begin(m, "result");
  pt_metrics_int(m, "index", index);
  pt_metrics_str(m, "strategy", pt_scale_strategy_name(c->strategy));
  pt_metrics_int(m, "workers", c->workers);
  pt_metrics_int(m, "threads", c->threads);
  pt_metrics_str(m, "model", model);
  pt_metrics_int(m, "batch", c->batch);
  pt_metrics_int(m, "worker_batch", c->worker_batch);
  pt_metrics_str(m, "optimizer", optimizer_of(c));
  pt_metrics_bool(m, "ran", c->ran);
  pt_metrics_str(m, "why", c->why);
  pt_metrics_num(m, "images_per_s", c->images_per_s);
  pt_metrics_num(m, "ms_per_step", c->ms_per_step);
  pt_metrics_int(m, "steps_measured", c->steps_measured);
  pt_metrics_int(m, "cores", c->cores);
  pt_metrics_num(m, "data_ms", c->data_ms);
  pt_metrics_num(m, "forward_ms", c->forward_ms);
  pt_metrics_num(m, "backward_ms", c->backward_ms);
  pt_metrics_num(m, "optimizer_ms", c->optimizer_ms);
  pt_metrics_num(m, "comm_ms", c->comm_ms);
  pt_metrics_num(m, "other_ms", c->other_ms);
  pt_metrics_num(m, "bubble", c->bubble);
  pt_metrics_num(m, "peak_rss_mb", c->peak_rss_mb);
  pt_metrics_num(m, "target_seconds", c->target_s);
  pt_metrics_bool(m, "rough", c->rough);
  if (c->rough) pt_metrics_str(m, "rough_why", c->rough_why);
  pt_status st = pt_metrics_end(m);
  for (int i = 0; i < c->curve_n && st == PT_OK; i++) {
    pt_metrics_begin(m, "curve");
    pt_metrics_num(m, "seconds", c->curve_t[i]);
    pt_metrics_num(m, "test_loss", c->curve_loss[i]);
    pt_metrics_num(m, "test_acc", c->curve_acc[i]);
    st = pt_metrics_end(m);
  }
  const pt_status cl = pt_metrics_close(m);
  return st != PT_OK ? st : cl;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int same_str(const cJSON *o, const char *key, const char *want) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && !strcmp(v->valuestring, want);
}

pt_status pt_scale_result_read(const char *path, int index, const char *model, pt_scale_config *c) {
  FILE *f = fopen(path, "r");
  if (!f && errno == ENOENT) {
    snprintf(c->why, sizeof c->why, "no result: %.180s is missing (the task did not finish)", path);
    c->ran = 0;
    return PT_OK;
  }
  if (!f) return pt_fail_errno(PT_ERR_IO, "cannot read the task result %s", path);
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && !S_ISREG(sb.st_mode)) {
    fclose(f);
    return pt_fail(PT_ERR_FORMAT, "%s: a %s, where ptrain scale --task writes its result file", path,
                   S_ISDIR(sb.st_mode) ? "directory" : "special file");
  }
  char line[8192];
  int found = 0, lineno = 0;
  pt_status st = PT_OK;
  c->curve_n = 0;
  while (fgets(line, sizeof line, f) && st == PT_OK) {
    lineno++;
    if (line[strspn(line, " \t\r\n")] == 0) continue; /* a blank line, as an editor leaves at the end */
    cJSON *o = cJSON_Parse(line);
    const cJSON *ev = o ? cJSON_GetObjectItemCaseSensitive(o, "event") : NULL;
    if (!cJSON_IsString(ev)) {
      st = pt_fail(PT_ERR_FORMAT, "%s:%d: not a result line of ptrain scale --task", path, lineno);
    } else if (!strcmp(ev->valuestring, "result")) {
      const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "why");
      if ((int)num(o, "index") != index || num(o, "workers") != c->workers || num(o, "threads") != c->threads ||
          !same_str(o, "strategy", pt_scale_strategy_name(c->strategy))) {
        st = pt_fail(PT_ERR_FORMAT, "%s: the result of another configuration than task %d's (%s, %d x %d): was the "
                     "sweep changed after the jobs were written?", path, index, pt_scale_strategy_name(c->strategy),
                     c->workers, c->threads);
      } else if (!same_str(o, "model", model) || num(o, "batch") != c->batch ||
                 num(o, "worker_batch") != c->worker_batch || !same_str(o, "optimizer", optimizer_of(c))) {
        /* A sweep written again (--force) while a task of the old one ran. */
        st = pt_fail(PT_ERR_FORMAT, "%s: the result of another sweep than this one (%s, batch %d, %s optimizer): run "
                     "its task again", path, model, c->batch, optimizer_of(c));
      } else {
        c->ran = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ran"));
        snprintf(c->why, sizeof c->why, "%s", cJSON_IsString(why) ? why->valuestring : "");
        c->images_per_s = num(o, "images_per_s");
        c->ms_per_step = num(o, "ms_per_step");
        const double measured = num(o, "steps_measured"); /* NaN where absent: casting it is undefined */
        c->steps_measured = measured >= 0 && measured < 1e9 ? (int)measured : 0;
        const double cores = num(o, "cores"); /* absent from results of earlier versions */
        c->cores = cores >= 1 && cores < 1e6 ? (int)cores : 0;
        c->data_ms = num(o, "data_ms");
        c->forward_ms = num(o, "forward_ms");
        c->backward_ms = num(o, "backward_ms");
        c->optimizer_ms = num(o, "optimizer_ms");
        c->comm_ms = num(o, "comm_ms");
        c->other_ms = num(o, "other_ms");
        c->bubble = num(o, "bubble");
        c->peak_rss_mb = num(o, "peak_rss_mb");
        c->target_s = num(o, "target_seconds");
        c->rough = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "rough"));
        const cJSON *rw = cJSON_GetObjectItemCaseSensitive(o, "rough_why");
        snprintf(c->rough_why, sizeof c->rough_why, "%s",
                 !c->rough ? "" : cJSON_IsString(rw) ? rw->valuestring : "the task's runs were rough");
        if (c->ran && !(c->images_per_s > 0 && isfinite(c->images_per_s) && c->ms_per_step > 0 &&
                        isfinite(c->ms_per_step)))
          st = pt_fail(PT_ERR_FORMAT, "%s: a result that ran, but whose images_per_s and ms_per_step are not both "
                       "positive numbers", path);
        found = 1;
      }
    } else if (!strcmp(ev->valuestring, "curve") && c->curve_n < PT_SCALE_MAX_CURVE) {
      c->curve_t[c->curve_n] = num(o, "seconds");
      c->curve_loss[c->curve_n] = num(o, "test_loss");
      c->curve_acc[c->curve_n] = num(o, "test_acc");
      c->curve_n++;
    }
    cJSON_Delete(o);
  }
  if (st == PT_OK && ferror(f)) st = pt_fail_errno(PT_ERR_IO, "cannot read the task result %s", path);
  fclose(f);
  if (st == PT_OK && !found) st = pt_fail(PT_ERR_FORMAT, "%s: no result line (expected ptrain scale --task's)", path);
  return st;
}
