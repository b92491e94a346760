#include "train/grad_sync.h"

#include <string.h>

#include "util/timer.h"
#include "util/trace.h"

#define FIRST_BUCKET_BYTES (1u << 20)

static void layer_range(const pt_model *m, const pt_layer *L, size_t *lo, size_t *hi) {
  *lo = (size_t)-1;
  *hi = 0;
  const int idx[2] = {L->w, L->b};
  for (int k = 0; k < 2; k++) {
    if (idx[k] < 0) continue;
    const pt_tensor_info *t = &m->params[idx[k]];
    if (t->offset < *lo) *lo = t->offset;
    if (t->offset + t->numel > *hi) *hi = t->offset + t->numel;
  }
}

static void on_grad_ready(void *ctx, int layer) {
  pt_grad_sync *s = ctx;
  if (!s->active) return;
  const double t0 = pt_now();
  const int b = s->bucket_of[layer];
  if (b >= 0 && s->status == PT_OK) {
    const pt_bucket *B = &s->buckets[b];
    s->comm->what = "the gradient allreduce";
    s->status = pt_comm_iallreduce_f32(s->comm, s->grad + B->lo, B->hi - B->lo);
  } else {
    pt_comm_progress(s->comm);
  }
  if (b >= 0) pt_trace_span("allreduce start", "comm", t0, pt_now());
}

pt_status pt_grad_sync_init(pt_grad_sync *s, pt_model *m, pt_comm *c, double bucket_mb) {
  memset(s, 0, sizeof *s);
  s->comm = c;
  s->grad = m->grad;
  s->status = PT_OK;
  for (int i = 0; i < PT_MAX_LAYERS; i++) s->bucket_of[i] = -1;
  const size_t cap = bucket_mb > 0 ? (size_t)(bucket_mb * 1048576.0) : 1;
  size_t open_hi = 0, open_lo = 0;
  int open = 0;
  for (int i = m->nlayers - 1; i >= 0; i--) {
    const pt_layer *L = &m->layers[i];
    if (L->w < 0 && L->b < 0) continue;
    size_t lo, hi;
    layer_range(m, L, &lo, &hi);
    if (!open) {
      open = 1;
      open_hi = hi;
    }
    open_lo = lo;
    const size_t limit = s->nbuckets == 0 && cap > FIRST_BUCKET_BYTES ? FIRST_BUCKET_BYTES : cap;
    if ((open_hi - open_lo) * sizeof(float) >= limit) {
      s->buckets[s->nbuckets] = (pt_bucket){open_lo, open_hi, i};
      s->bucket_of[i] = s->nbuckets++;
      open = 0;
    }
  }
  if (open) {
    /* The rest closes at the lowest layer with parameters. */
    int low = 0;
    while (low < m->nlayers && m->layers[low].w < 0 && m->layers[low].b < 0) low++;
    s->buckets[s->nbuckets] = (pt_bucket){open_lo, open_hi, low};
    s->bucket_of[low] = s->nbuckets++;
  }
  if (s->nbuckets > PT_COMM_MAX_PENDING - 2)
    return pt_fail(PT_ERR_ARG, "--bucket-mb %g makes %d buckets; at most %d fit: use larger buckets", bucket_mb,
                   s->nbuckets, PT_COMM_MAX_PENDING - 2);
  if (c->size > 1) {
    m->grad_ready = on_grad_ready;
    m->grad_ready_ctx = s;
  }
  return PT_OK;
}

pt_status pt_grad_sync_finish(pt_grad_sync *s) {
  const double t0 = pt_now();
  pt_status st = s->status;
  s->status = PT_OK;
  s->comm->what = "the gradient allreduce";
  pt_status w = pt_comm_wait_all(s->comm);
  const double t1 = pt_now();
  s->wait_s += t1 - t0;
  pt_trace_span("allreduce wait", "comm", t0, t1);
  return st != PT_OK ? st : w;
}
