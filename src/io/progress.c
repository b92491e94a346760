#include "io/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

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
  p->base = -1;
  p->drawn = 0;
  /* A terminal that takes no escape sequences (TERM=dumb: an editor's
   * shell) gets the line overwritten with spaces instead. */
  const char *term = getenv("TERM");
  p->dumb = term && !strcmp(term, "dumb");
}

void pt_progress_set_extra(pt_progress *p, const char *text) { snprintf(p->extra, sizeof p->extra, "%s", text); }

static void fmt_time(char *buf, size_t n, double s) {
  int t = (int)(s + 0.5);
  if (t >= 3600) snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

/* The terminal's width, or 0 where it cannot say (then COLUMNS, if set). */
static int columns(FILE *out) {
  struct winsize ws;
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  const char *c = getenv("COLUMNS");
  const int n = c ? atoi(c) : 0;
  return n > 0 ? n : 0;
}

/* Clears what the last draw left: the escape that erases the line, or on
 * a dumb terminal as many spaces. */
static void clear(pt_progress *p) {
  if (!p->dumb) {
    fputs("\r\033[K", p->out);
  } else if (p->drawn) {
    fprintf(p->out, "\r%*s\r", p->drawn, "");
  }
  p->drawn = 0;
}

void pt_progress_update(pt_progress *p, int done, int64_t step, double loss, double images_per_s) {
  if (!p->out) return;
  /* Where the epoch stood at this run's first batch (a resumed run starts
   * inside it): the time left is judged by this run's pace alone. */
  if (p->base < 0) p->base = done > 0 ? done - 1 : 0;
  if (p->tty) {
    double now = pt_now();
    /* Redraw at most 10 times a second: a terminal is slower than a step. */
    if (done < p->total && now - p->last_draw < 0.1) return;
    p->last_draw = now;
    double elapsed = now - p->t0;
    double eta = done > p->base ? elapsed * (p->total - done) / (done - p->base) : 0.0;
    char el[16], et[16];
    fmt_time(el, sizeof el, elapsed);
    fmt_time(et, sizeof et, eta);
    /* A GPU run knows its loss only from its first read of the epoch on. */
    char ls[32] = "-";
    if (!isnan(loss)) snprintf(ls, sizeof ls, "%.4g", loss);
    char head[64], tail[320];
    snprintf(head, sizeof head, "epoch %d/%d ", p->epoch, p->epochs);
    snprintf(tail, sizeof tail, " %d/%d loss %s %.0f img/s %s<%s%s%s", done, p->total, ls, images_per_s, el, et,
             p->extra[0] ? " " : "", p->extra);
    /* The line never wider than the terminal: a wrapped line leaves its
     * first rows behind at each redraw. The bar gives way first (down to
     * 8), then the line is cut. */
    enum { WIDTH = 24, MIN_WIDTH = 8 };
    const int cols = columns(p->out);
    int width = WIDTH;
    const int fixed = (int)(strlen(head) + strlen(tail)) + 2;
    if (cols > 0 && fixed + width > cols - 1) width = cols - 1 - fixed > MIN_WIDTH ? cols - 1 - fixed : MIN_WIDTH;
    char bar[WIDTH + 1];
    const int fill = p->total ? (int)((int64_t)width * done / p->total) : width;
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    char line[512];
    int n = snprintf(line, sizeof line, "%s[%s]%s", head, bar, tail);
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    if (cols > 0 && n > cols - 1) n = cols - 1;
    clear(p);
    fwrite(line, 1, (size_t)n, p->out);
    p->drawn = n;
    fflush(p->out);
  } else if (done % p->log_interval == 0 || done == p->total) {
    fprintf(p->out, "epoch %d/%d step %lld batch %d/%d (%.0f%%) loss %.6g %.0f img/s%s%s\n", p->epoch, p->epochs,
            (long long)step, done, p->total, p->total ? 100.0 * done / p->total : 100.0, loss, images_per_s,
            p->extra[0] ? " " : "", p->extra);
    fflush(p->out);
  }
}

void pt_progress_finish(pt_progress *p) {
  if (p->out && p->tty) {
    clear(p);
    fflush(p->out);
  }
}
