/* Batch loader: epoch order, sharding, normalisation, augmentation, prefetch.
 *
 * Everything random is a pure function of the seed and of where it is used:
 * the epoch's permutation is a Fisher-Yates shuffle drawn from the stream
 * (key(seed, SHUFFLE), c0 = epoch), and a sample's crop and flip from
 * (key(seed, AUGMENT), c0 = epoch << 32 | dataset index). So a batch's content
 * depends neither on which thread prepares it nor on what came before it in
 * the epoch, which is what lets start_epoch(e, b) resume mid-epoch and keeps
 * prefetch on and off bit-identical (both run the same prepare()).
 *
 * Normalisation goes through a 256-entry table per channel, filled with
 * ((float)p / 255.0f - mean) / std: the same float expression torchvision's
 * ToTensor + Normalize evaluates, done once per byte value instead of per
 * pixel. Padding for the random crop is the table's entry for byte 0, i.e.
 * zero padding applied to the raw image before normalisation, as
 * RandomCrop(padding=p) on a PIL image followed by Normalize does.
 *
 * Without prefetch the caller's threads prepare each batch when asked,
 * split by samples where the caller gives its pool (cfg.parallel).
 *
 * Prefetch is a ring of slots filled by one worker thread: batch b lives in
 * slot b % nslots. The caller holds at most one slot (the batch it was last
 * given, valid until its next call) while the worker fills the others with
 * the batches that follow, in order, up to nslots - 1 ahead. Slot states
 * move EMPTY -> QUEUED (caller asks) -> FILLING (worker took it) -> READY ->
 * HELD (given to the caller) -> EMPTY (caller's next call), all under one
 * mutex; the worker works with the mutex released, on a slot nobody else
 * touches while it is FILLING. start_epoch must rewrite the index list the
 * worker reads, so it first cancels queued work and waits out a batch being
 * filled; the worker never sees a half-written order. All buffers are
 * allocated at create time.
 *
 * Why more than two slots, and why the caller wakes the worker only every
 * other batch: on a virtual machine an idle core sleeps in the hypervisor,
 * and waking the worker there took 47 us at the median and over 1 ms in one
 * wake of ten (2-core AMD EPYC VM, fmnist-mlp at 1 thread, whose step is
 * under 1 ms). With two slots the caller then waited for data in one step of
 * four; three batches ahead cover such a wake, and a wake per two batches
 * halves the signalling the caller pays (about 20 us a wake there). A
 * batch the worker has not started when the caller asks for it is prepared
 * by the caller, so a worker whose core the host has taken away costs at
 * most the preparation, never the wait for the core.
 */
#include "data/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/draws.h"
#include "util/philox.h"
#include "util/timer.h"
#include "util/trace.h"

enum { SLOT_EMPTY, SLOT_QUEUED, SLOT_FILLING, SLOT_READY, SLOT_HELD };
enum { PT_LOADER_MAX_SLOTS = 4 };
/* Two slots for batches over this: the ring's depth is for short steps,
 * whose batches are small (a training batch of 100 Fashion-MNIST images is
 * 313 KB, of 64 CIFAR-10 images 786 KB), while an evaluation's batches of
 * 1,000 (3 to 12 MB) take long enough for two. */
#define PT_LOADER_DEEP_BYTES ((size_t)2 << 20)

typedef struct {
  int state;
  int batch;      /* batch index in the epoch that it holds or will hold */
  int n;          /* samples in it */
  float *x;       /* (batch_size, c, h, w) */
  int32_t *y;     /* (batch_size) */
  int32_t *index; /* (batch_size) */
} slot;

struct pt_loader {
  const pt_dataset *ds; /* borrowed: must outlive the loader */
  pt_loader_config cfg;
  size_t sample_elems; /* c * h * w */
  int num_samples, num_batches;
  uint64_t shuffle_key, augment_key;
  int augment;
  float lut[3][256]; /* normalised value of each byte, per channel */
  int32_t *perm;     /* (ds->n) the epoch's permutation of dataset indices */
  int32_t *order;    /* (num_samples) this rank's dataset indices, in order */
  int epoch;         /* -1 until the first start_epoch */
  int next_batch;    /* what the caller's next pt_loader_next returns */
  int queued_to;     /* threaded: batches [next_batch, queued_to) are in slots */
  int held;          /* slot the caller holds, or -1 */
  int nslots;
  slot slots[PT_LOADER_MAX_SLOTS];
  double wait_s;

  int threaded, stop, worker_idle;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* worker: a slot was queued, or stop */
  pthread_cond_t done_cv; /* caller: a slot became READY */
};

/* One sample, normalised and (maybe) augmented, into out: (c, h, w). */
static void prepare_sample(const pt_loader *l, int32_t idx, float *out) {
  const pt_dataset *ds = l->ds;
  const int C = ds->c, H = ds->h, W = ds->w;
  const uint8_t *img = ds->images + (size_t)idx * l->sample_elems; /* (c, h, w) */
  if (!l->augment) {
    for (int ch = 0; ch < C; ch++) {
      const float *lut = l->lut[ch];
      size_t plane = (size_t)H * W, base = (size_t)ch * plane;
      for (size_t p = 0; p < plane; p++) out[base + p] = lut[img[base + p]];
    }
    return;
  }

  /* (dy, dx): where the crop window's corner lands relative to the original
   * image; the padded image has corners at -pad..pad. */
  const pt_augment a = pt_augment_draw(l->augment_key, l->epoch, idx, l->cfg.crop_pad, l->cfg.hflip);
  const int dy = a.dy, dx = a.dx, flip = a.flip;

  for (int ch = 0; ch < C; ch++) {
    const float *lut = l->lut[ch];
    const float zero = lut[0];
    for (int y = 0; y < H; y++) {
      float *o = out + ((size_t)ch * H + y) * W;
      int sy = y + dy;
      if (sy < 0 || sy >= H) {
        for (int x = 0; x < W; x++) o[x] = zero;
        continue;
      }
      const uint8_t *row = img + ((size_t)ch * H + sy) * W;
      /* Flip after crop (RandomCrop then RandomHorizontalFlip): output
       * column x shows cropped column W-1-x. */
      for (int x = 0; x < W; x++) {
        int sx = (flip ? W - 1 - x : x) + dx;
        o[x] = (sx >= 0 && sx < W) ? lut[row[sx]] : zero;
      }
    }
  }
}

/* Batch b of the current epoch into s. Reads order[] and epoch, which only
 * start_epoch writes, and only while no batch is being prepared. */
static int batch_samples(const pt_loader *l, int b) {
  const int bs = l->cfg.batch_size, start = b * bs;
  return l->num_samples - start < bs ? l->num_samples - start : bs;
}

/* Samples [lo, hi) of batch b into s. The next sample's bytes are
 * requested before this one is converted: the samples of a shuffled batch
 * are scattered over the whole split, so each is a run of cache misses,
 * and a batch of 100 Fashion-MNIST images took 46 us instead of 69 with
 * the next one on its way (Zen 3, alone, caches flushed between batches). */
static void prepare_range(const pt_loader *l, slot *s, int b, int lo, int hi) {
  const int start = b * l->cfg.batch_size;
  for (int i = lo; i < hi; i++) {
    int32_t idx = l->order[start + i];
    if (i + 1 < hi && !l->cfg.indices_only) {
      const uint8_t *next = l->ds->images + (size_t)l->order[start + i + 1] * l->sample_elems;
      for (size_t q = 0; q < l->sample_elems; q += 64) __builtin_prefetch(next + q);
    }
    s->index[i] = idx;
    s->y[i] = l->ds->labels[idx];
    if (!l->cfg.indices_only) prepare_sample(l, idx, s->x + (size_t)i * l->sample_elems);
  }
}

static void prepare(const pt_loader *l, slot *s, int b) {
  const double t0 = pt_trace_enabled() ? pt_now() : 0.0;
  const int n = batch_samples(l, b);
  prepare_range(l, s, b, 0, n);
  s->n = n;
  if (t0 > 0.0) pt_trace_span("prepare batch", "data", t0, pt_now());
}

typedef struct {
  const pt_loader *l;
  slot *s;
  int b, n;
} share_job;

static void prepare_share(void *ctx, int tid, int nt) {
  const share_job *j = ctx;
  const int lo = (int)((long)j->n * tid / nt), hi = (int)((long)j->n * (tid + 1) / nt);
  prepare_range(j->l, j->s, j->b, lo, hi);
}

static void *worker(void *arg) {
  pt_loader *l = arg;
  pt_trace_thread_name("data loader");
  pthread_mutex_lock(&l->mu);
  for (;;) {
    int s = -1;
    while (!l->stop) {
      /* The earliest queued batch first: the caller needs them in order. */
      for (int i = 0; i < l->nslots; i++)
        if (l->slots[i].state == SLOT_QUEUED && (s < 0 || l->slots[i].batch < l->slots[s].batch)) s = i;
      if (s >= 0) break;
      l->worker_idle = 1;
      pthread_cond_wait(&l->work_cv, &l->mu);
      l->worker_idle = 0;
    }
    if (l->stop) break;
    slot *sl = &l->slots[s];
    sl->state = SLOT_FILLING;
    int b = sl->batch;
    pthread_mutex_unlock(&l->mu);
    prepare(l, sl, b);
    pthread_mutex_lock(&l->mu);
    sl->state = SLOT_READY;
    pthread_cond_broadcast(&l->done_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Caller holds mu. Queues every batch whose slot is free, up to nslots
 * ahead of the caller, and returns how many are queued and not yet taken. */
static int queue_ahead(pt_loader *l) {
  while (l->queued_to < l->num_batches && l->queued_to < l->next_batch + l->nslots) {
    slot *s = &l->slots[l->queued_to % l->nslots];
    if (s->state != SLOT_EMPTY) break;
    s->state = SLOT_QUEUED;
    s->batch = l->queued_to++;
  }
  int queued = 0;
  for (int i = 0; i < l->nslots; i++) queued += l->slots[i].state == SLOT_QUEUED;
  return queued;
}

/* Caller holds mu. Whether to wake a sleeping worker: once half the ring is
 * queued (every other batch with four slots, every batch with two), or for
 * a batch the caller needs (need). The caller signals after releasing mu,
 * so the worker does not wake only to wait for the mutex. */
static int wake_due(const pt_loader *l, int queued, int need) {
  return l->worker_idle && queued >= 1 && (need || queued >= l->nslots / 2);
}

static void compute_order(pt_loader *l, int epoch) {
  int n = l->ds->n;
  int32_t *perm = l->perm; /* (n) */
  for (int i = 0; i < n; i++) perm[i] = i;
  if (l->cfg.shuffle) {
    pt_rng r;
    pt_rng_init(&r, l->shuffle_key, (uint64_t)epoch);
    for (int i = n - 1; i > 0; i--) {
      int j = (int)pt_rng_below(&r, (uint32_t)i + 1);
      int32_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  }
  /* Position p of the padded list is perm[p % n]: padding repeats the list
   * from its start, as many times as needed when world > n. */
  int world = l->cfg.world, rank = l->cfg.rank;
  for (int k = 0; k < l->num_samples; k++)
    l->order[k] = perm[((int64_t)k * world + rank) % n];
}

static pt_status check_config(const pt_dataset *ds, const pt_loader_config *cfg) {
  if (!ds || !cfg) return pt_fail(PT_ERR_ARG, "loader: dataset and config are required");
  if (ds->n <= 0 || !ds->images || !ds->labels)
    return pt_fail(PT_ERR_ARG, "loader: empty dataset (%d samples)", ds->n);
  if (ds->c < 1 || ds->c > 3 || ds->h < 1 || ds->w < 1)
    return pt_fail(PT_ERR_ARG, "loader: sample shape %dx%dx%d, expected 1..3 channels", ds->c,
                   ds->h, ds->w);
  if (cfg->batch_size < 1)
    return pt_fail(PT_ERR_ARG, "loader: batch_size %d, expected >= 1", cfg->batch_size);
  if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world)
    return pt_fail(PT_ERR_ARG, "loader: rank %d of world %d, expected 0 <= rank < world >= 1",
                   cfg->rank, cfg->world);
  if (cfg->uneven && cfg->drop_last)
    return pt_fail(PT_ERR_ARG, "loader: uneven shards keep every sample; drop_last contradicts that");
  if (cfg->crop_pad < 0 || cfg->crop_pad > 4096)
    return pt_fail(PT_ERR_ARG, "loader: crop_pad %d, expected 0..4096", cfg->crop_pad);
  for (int ch = 0; ch < ds->c; ch++)
    if (!(cfg->std[ch] > 0.0f))
      return pt_fail(PT_ERR_ARG, "loader: std[%d] = %g, expected > 0", ch, (double)cfg->std[ch]);
  return PT_OK;
}

pt_status pt_loader_create(pt_loader **out, const pt_dataset *ds, const pt_loader_config *cfg) {
  *out = NULL;
  PT_TRY(check_config(ds, cfg));
  pt_loader *l = pt_calloc(1, sizeof *l);
  if (!l) return PT_ERR_NOMEM;
  l->ds = ds;
  l->cfg = *cfg;
  l->sample_elems = (size_t)ds->c * ds->h * ds->w;
  l->epoch = -1;
  l->held = -1;
  l->shuffle_key = pt_rng_key(cfg->seed, PT_RNG_SHUFFLE);
  l->augment_key = pt_rng_key(cfg->seed, PT_RNG_AUGMENT);
  l->augment = cfg->crop_pad > 0 || cfg->hflip;
  for (int ch = 0; ch < ds->c; ch++)
    for (int p = 0; p < 256; p++)
      l->lut[ch][p] = pt_normalize_byte(p, cfg->mean[ch], cfg->std[ch]);

  int n = ds->n, world = cfg->world;
  if (cfg->uneven) /* positions rank, rank + world, ... below n: every sample once in all */
    l->num_samples = n / world + (cfg->rank < n % world);
  else
    l->num_samples = cfg->drop_last ? n / world : n / world + (n % world != 0);
  int bs = cfg->batch_size;
  l->num_batches = cfg->drop_last ? l->num_samples / bs
                                  : l->num_samples / bs + (l->num_samples % bs != 0);

  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work_cv, NULL);
  pthread_cond_init(&l->done_cv, NULL);

  l->perm = pt_malloc((size_t)n * sizeof *l->perm);
  l->order = pt_malloc((size_t)(l->num_samples ? l->num_samples : 1) * sizeof *l->order);
  if (!l->perm || !l->order) goto nomem;
  /* A batch never holds more than this worker's samples, whatever
   * batch_size says: the slots hold what a batch can. */
  const int room = bs < l->num_samples ? bs : l->num_samples > 0 ? l->num_samples : 1;
  if ((size_t)room > SIZE_MAX / sizeof(float) / l->sample_elems) {
    pt_loader_destroy(l);
    return pt_fail(PT_ERR_ARG, "loader: batch_size %d x %zu floats per sample is too large", bs,
                   l->sample_elems);
  }
  const size_t slot_bytes = (size_t)room * l->sample_elems * sizeof(float);
  l->nslots = !cfg->prefetch ? 1 : slot_bytes <= PT_LOADER_DEEP_BYTES ? PT_LOADER_MAX_SLOTS : 2;
  for (int s = 0; s < l->nslots; s++) {
    l->slots[s].x = pt_alloc_aligned(slot_bytes);
    l->slots[s].y = pt_malloc((size_t)room * sizeof(int32_t));
    l->slots[s].index = pt_malloc((size_t)room * sizeof(int32_t));
    if (!l->slots[s].x || !l->slots[s].y || !l->slots[s].index) goto nomem;
  }
  if (cfg->prefetch) {
    int e = pthread_create(&l->thread, NULL, worker, l);
    if (e != 0) {
      pt_loader_destroy(l);
      return pt_fail(PT_ERR_STATE, "loader: cannot start prefetch thread (error %d)", e);
    }
    l->threaded = 1;
  }
  *out = l;
  return PT_OK;

nomem:
  pt_loader_destroy(l);
  return pt_fail(PT_ERR_NOMEM, "loader: out of memory for batch buffers (batch_size %d)", bs);
}

void pt_loader_destroy(pt_loader *l) {
  if (!l) return;
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
  }
  for (int s = 0; s < PT_LOADER_MAX_SLOTS; s++) {
    free(l->slots[s].x);
    free(l->slots[s].y);
    free(l->slots[s].index);
  }
  free(l->perm);
  free(l->order);
  pthread_cond_destroy(&l->done_cv);
  pthread_cond_destroy(&l->work_cv);
  pthread_mutex_destroy(&l->mu);
  free(l);
}

int pt_loader_num_batches(const pt_loader *l) { return l->num_batches; }
int pt_loader_num_samples(const pt_loader *l) { return l->num_samples; }
double pt_loader_wait_seconds(const pt_loader *l) { return l->wait_s; }

pt_status pt_loader_start_epoch(pt_loader *l, int epoch, int start_batch) {
  if (epoch < 0) return pt_fail(PT_ERR_ARG, "loader: epoch %d, expected >= 0", epoch);
  if (start_batch < 0 || start_batch > l->num_batches)
    return pt_fail(PT_ERR_ARG, "loader: start batch %d, expected 0..%d", start_batch,
                   l->num_batches);
  if (l->threaded) {
    /* Cancel what has not started, wait out what has: the worker reads
     * order[] and epoch while FILLING. */
    pthread_mutex_lock(&l->mu);
    for (int s = 0; s < l->nslots; s++)
      if (l->slots[s].state == SLOT_QUEUED) l->slots[s].state = SLOT_EMPTY;
    for (;;) {
      int filling = 0;
      for (int s = 0; s < l->nslots; s++) filling |= l->slots[s].state == SLOT_FILLING;
      if (!filling) break;
      pthread_cond_wait(&l->done_cv, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
  }
  /* The worker is idle with nothing queued, so these writes race with nothing. */
  compute_order(l, epoch);
  if (l->threaded) pthread_mutex_lock(&l->mu);
  l->epoch = epoch;
  l->next_batch = l->queued_to = start_batch;
  l->held = -1;
  for (int s = 0; s < l->nslots; s++) l->slots[s].state = SLOT_EMPTY;
  if (l->threaded) {
    const int wake = wake_due(l, queue_ahead(l), 1);
    pthread_mutex_unlock(&l->mu);
    if (wake) pthread_cond_signal(&l->work_cv);
  }
  return PT_OK;
}

static void give(const slot *s, pt_batch *batch) {
  batch->n = s->n;
  batch->x = s->x;
  batch->y = s->y;
  batch->index = s->index;
}

static pt_status next_sync(pt_loader *l, pt_batch *batch) {
  /* Preparing in the caller's threads is all waiting for data. */
  double t0 = pt_now();
  if (l->cfg.parallel) {
    const double tt = pt_trace_enabled() ? pt_now() : 0.0;
    share_job j = {l, &l->slots[0], l->next_batch, batch_samples(l, l->next_batch)};
    l->cfg.parallel(prepare_share, &j);
    l->slots[0].n = j.n;
    l->next_batch++;
    if (tt > 0.0) pt_trace_span("prepare batch", "data", tt, pt_now());
  } else {
    prepare(l, &l->slots[0], l->next_batch++);
  }
  l->wait_s += pt_now() - t0;
  give(&l->slots[0], batch);
  return PT_OK;
}

pt_status pt_loader_next(pt_loader *l, pt_batch *batch) {
  memset(batch, 0, sizeof *batch);
  if (l->epoch < 0)
    return pt_fail(PT_ERR_STATE, "loader: pt_loader_next before pt_loader_start_epoch");
  if (!l->threaded) {
    if (l->next_batch >= l->num_batches) return PT_OK;
    return next_sync(l, batch);
  }

  pthread_mutex_lock(&l->mu);
  if (l->held >= 0) {
    l->slots[l->held].state = SLOT_EMPTY;
    l->held = -1;
  }
  if (l->next_batch >= l->num_batches) {
    pthread_mutex_unlock(&l->mu);
    return PT_OK;
  }
  /* The slot just released takes the batch nslots ahead; the batch asked
   * for is always queued by now (queue_ahead runs from next_batch). */
  const int queued = queue_ahead(l);
  const int s = l->next_batch % l->nslots;
  slot *sl = &l->slots[s];
  int wake = 0; /* after the unlock below */
  if (sl->state == SLOT_QUEUED) {
    /* The worker has not started it: prepare it here rather than wait for
     * the worker to be scheduled, which can take longer than the batch. */
    double t0 = pt_now();
    sl->state = SLOT_FILLING;
    const int wake_now = wake_due(l, queued - 1, 0);
    pthread_mutex_unlock(&l->mu);
    if (wake_now) pthread_cond_signal(&l->work_cv);
    prepare(l, sl, l->next_batch);
    pthread_mutex_lock(&l->mu);
    l->wait_s += pt_now() - t0;
  } else if (sl->state != SLOT_READY) {
    double t0 = pt_now();
    while (sl->state != SLOT_READY) pthread_cond_wait(&l->done_cv, &l->mu);
    l->wait_s += pt_now() - t0;
  } else {
    wake = wake_due(l, queued, 0);
  }
  sl->state = SLOT_HELD;
  l->held = s;
  l->next_batch++;
  pthread_mutex_unlock(&l->mu);
  if (wake) pthread_cond_signal(&l->work_cv);
  give(&l->slots[s], batch);
  return PT_OK;
}
