#include "io/progress.h"

#include <math.h>
#include <stdio.h>

#include "util/timer.h"

void pt_progress_start(pt_progress *p, FILE *out, int tty, int log_interval, int epoch, int epochs, int total) {
  p->out = out;
  p->tty = tty;
  p->log_interval = log_interval > 0 ? log_interval : 10;
  p->epoch = epoch;
  p->epochs = epochs;
  p->total = total;
  p->t0 = pt_now();
  p->last_draw = 0.0;
  p->extra[0] = 0;
}

void pt_progress_set_extra(pt_progress *p, const char *text) { snprintf(p->extra, sizeof p->extra, "%s", text); }

static void fmt_time(char *buf, size_t n, double s) {
  int t = (int)(s + 0.5);
  if (t >= 3600) snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

void pt_progress_update(pt_progress *p, int done, int64_t step, double loss, double images_per_s) {
  if (!p->out) return;
  if (p->tty) {
    double now = pt_now();
    /* Redraw at most 10 times a second: a terminal is slower than a step. */
    if (done < p->total && now - p->last_draw < 0.1) return;
    p->last_draw = now;
    double elapsed = now - p->t0;
    double eta = done > 0 ? elapsed * (p->total - done) / done : 0.0;
    char el[16], et[16];
    fmt_time(el, sizeof el, elapsed);
    fmt_time(et, sizeof et, eta);
    enum { WIDTH = 24 };
    char bar[WIDTH + 1];
    int fill = p->total ? (int)((int64_t)WIDTH * done / p->total) : WIDTH;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = 0;
    /* A GPU run knows its loss only from its first read of the epoch on. */
    char ls[32] = "-";
    if (!isnan(loss)) snprintf(ls, sizeof ls, "%.4f", loss);
    fprintf(p->out, "\r\033[Kepoch %d/%d [%s] %d/%d loss %s %.0f img/s %s<%s%s%s", p->epoch, p->epochs, bar, done,
            p->total, ls, images_per_s, el, et, p->extra[0] ? " " : "", p->extra);
    fflush(p->out);
  } else if (done % p->log_interval == 0 || done == p->total) {
    fprintf(p->out, "epoch %d/%d step %lld batch %d/%d (%.0f%%) loss %.6f %.0f img/s%s%s\n", p->epoch, p->epochs,
            (long long)step, done, p->total, p->total ? 100.0 * done / p->total : 100.0, loss, images_per_s,
            p->extra[0] ? " " : "", p->extra);
    fflush(p->out);
  }
}

void pt_progress_finish(pt_progress *p) {
  if (p->out && p->tty) {
    fputs("\r\033[K", p->out);
    fflush(p->out);
  }
}
