/* Batch loader (src/data/loader.c).
 *
 * The loader's promises are about determinism, so most tests compare two
 * ways of getting the same epoch (prefetch on/off, resumed/uninterrupted,
 * different batch sizes) bit for bit, and pin the documented random streams
 * by recomputing the shuffle and the augmentation here from philox.h: if the
 * loader drew its numbers any other way, reference runs against PyTorch-side
 * tooling and old checkpoints would silently diverge.
 */
#include "fixture.h"

#include <math.h>
#include <time.h>

#include "data/loader.h"
#include "util/philox.h"

/* An in-memory dataset: pixel i of sample k is fx_pixel(k, i), label k % 10. */
static pt_dataset make_ds(int n, int c, int h, int w) {
  pt_dataset ds = {.n = n, .c = c, .h = h, .w = w, .num_classes = 10};
  size_t elems = (size_t)c * h * w;
  ds.images = malloc((size_t)n * elems);
  ds.labels = malloc((size_t)n);
  assert_non_null(ds.images);
  assert_non_null(ds.labels);
  for (int k = 0; k < n; k++) {
    ds.labels[k] = (uint8_t)(k % 10);
    for (size_t i = 0; i < elems; i++) ds.images[(size_t)k * elems + i] = fx_pixel((uint32_t)k, (uint32_t)i);
  }
  return ds;
}

static pt_loader_config base_cfg(int batch_size) {
  pt_loader_config cfg = {
      .batch_size = batch_size,
      .shuffle = 1,
      .seed = 1234,
      .rank = 0,
      .world = 1,
      .mean = {0.f, 0.f, 0.f},
      .std = {1.f, 1.f, 1.f},
  };
  return cfg;
}

/* Everything one rank got in one epoch, batches concatenated. */
typedef struct {
  int nb;           /* batches */
  int ns;           /* samples */
  int sizes[1024];  /* (nb) */
  int32_t *idx, *y; /* (ns) */
  float *x;         /* (ns, c, h, w) */
} epoch_run;

static void run_free(epoch_run *r) {
  free(r->idx);
  free(r->y);
  free(r->x);
}

/* Runs epoch from start_batch to the end; checks the end-of-epoch signal. */
static epoch_run collect(pt_loader *l, const pt_dataset *ds, int epoch, int start_batch) {
  size_t elems = (size_t)ds->c * ds->h * ds->w;
  epoch_run r = {0};
  int cap = pt_loader_num_samples(l) + 1;
  r.idx = malloc(sizeof(int32_t) * (size_t)cap);
  r.y = malloc(sizeof(int32_t) * (size_t)cap);
  r.x = malloc(sizeof(float) * elems * (size_t)cap);
  assert_int_equal(pt_loader_start_epoch(l, epoch, start_batch), PT_OK);
  for (;;) {
    pt_batch b;
    assert_int_equal(pt_loader_next(l, &b), PT_OK);
    if (b.n == 0) break;
    assert_true(r.nb < 1024);
    assert_true(r.ns + b.n < cap);
    r.sizes[r.nb++] = b.n;
    memcpy(r.idx + r.ns, b.index, sizeof(int32_t) * (size_t)b.n);
    memcpy(r.y + r.ns, b.y, sizeof(int32_t) * (size_t)b.n);
    memcpy(r.x + (size_t)r.ns * elems, b.x, sizeof(float) * elems * (size_t)b.n);
    r.ns += b.n;
  }
  /* Stays at the end. */
  pt_batch b;
  assert_int_equal(pt_loader_next(l, &b), PT_OK);
  assert_int_equal(b.n, 0);
  assert_int_equal(r.nb, pt_loader_num_batches(l) - start_batch);
  return r;
}

static epoch_run collect_cfg(const pt_dataset *ds, const pt_loader_config *cfg, int epoch) {
  pt_loader *l;
  assert_int_equal(pt_loader_create(&l, ds, cfg), PT_OK);
  epoch_run r = collect(l, ds, epoch, 0);
  pt_loader_destroy(l);
  return r;
}

static void assert_runs_equal(const epoch_run *a, const epoch_run *b, size_t elems) {
  assert_int_equal(a->nb, b->nb);
  assert_int_equal(a->ns, b->ns);
  assert_memory_equal(a->sizes, b->sizes, sizeof(int) * (size_t)a->nb);
  assert_memory_equal(a->idx, b->idx, sizeof(int32_t) * (size_t)a->ns);
  assert_memory_equal(a->y, b->y, sizeof(int32_t) * (size_t)a->ns);
  assert_memory_equal(a->x, b->x, sizeof(float) * elems * (size_t)a->ns);
}

static int same_order(const epoch_run *a, const epoch_run *b) {
  return a->ns == b->ns && memcmp(a->idx, b->idx, sizeof(int32_t) * (size_t)a->ns) == 0;
}

/* The documented shuffle, recomputed: Fisher-Yates from the top, j drawn
 * with pt_rng_below from key(seed, SHUFFLE), c0 = epoch. */
static void expected_perm(int32_t *perm, int n, uint64_t seed, int epoch) {
  for (int i = 0; i < n; i++) perm[i] = i;
  pt_rng r;
  pt_rng_init(&r, pt_rng_key(seed, PT_RNG_SHUFFLE), (uint64_t)epoch);
  for (int i = n - 1; i > 0; i--) {
    int j = (int)pt_rng_below(&r, (uint32_t)i + 1);
    int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

static void test_each_sample_once(void **state) {
  (void)state;
  pt_dataset ds = make_ds(103, 1, 4, 3);
  pt_loader_config cfg = base_cfg(10);
  for (int prefetch = 0; prefetch < 2; prefetch++) {
    cfg.prefetch = prefetch;
    pt_loader *l;
    assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
    assert_int_equal(pt_loader_num_batches(l), 11);
    assert_int_equal(pt_loader_num_samples(l), 103);
    for (int epoch = 0; epoch < 3; epoch++) {
      epoch_run r = collect(l, &ds, epoch, 0);
      assert_int_equal(r.ns, 103);
      for (int b = 0; b < 10; b++) assert_int_equal(r.sizes[b], 10);
      assert_int_equal(r.sizes[10], 3);
      int seen[103] = {0};
      for (int i = 0; i < r.ns; i++) {
        int k = r.idx[i];
        assert_in_range(k, 0, 102);
        seen[k]++;
        assert_int_equal(r.y[i], k % 10);
        for (int p = 0; p < 12; p++)
          assert_true(r.x[i * 12 + p] == (float)fx_pixel((uint32_t)k, (uint32_t)p) / 255.0f);
      }
      for (int k = 0; k < 103; k++) assert_int_equal(seen[k], 1);
      run_free(&r);
    }
    pt_loader_destroy(l);
  }
  pt_dataset_free(&ds);
}

static void test_order_seed_and_epoch(void **state) {
  (void)state;
  pt_dataset ds = make_ds(50, 1, 2, 2);
  pt_loader_config cfg = base_cfg(8);
  epoch_run e0 = collect_cfg(&ds, &cfg, 0), e1 = collect_cfg(&ds, &cfg, 1);
  epoch_run again = collect_cfg(&ds, &cfg, 0);
  assert_false(same_order(&e0, &e1));
  assert_runs_equal(&e0, &again, 4);

  int32_t perm[50];
  expected_perm(perm, 50, cfg.seed, 1);
  assert_memory_equal(e1.idx, perm, sizeof perm);

  cfg.seed = 1235;
  epoch_run other = collect_cfg(&ds, &cfg, 0);
  assert_false(same_order(&e0, &other));

  cfg.shuffle = 0;
  for (int epoch = 0; epoch < 2; epoch++) {
    epoch_run id = collect_cfg(&ds, &cfg, epoch);
    for (int i = 0; i < 50; i++) assert_int_equal(id.idx[i], i);
    run_free(&id);
  }
  run_free(&e0);
  run_free(&e1);
  run_free(&again);
  run_free(&other);
  pt_dataset_free(&ds);
}

/* A pool of 3 that runs its shares in reverse order: a batch must not
 * depend on which share is prepared first. */
static void three_shares(void (*fn)(void *ctx, int tid, int nthreads), void *ctx) {
  for (int t = 2; t >= 0; t--) fn(ctx, t, 3);
}

static void test_prefetch_identical(void **state) {
  (void)state;
  pt_dataset ds = make_ds(77, 3, 6, 5);
  size_t elems = 90;
  int batch_sizes[] = {1, 8, 77, 100};
  for (int aug = 0; aug < 2; aug++) {
    for (int bi = 0; bi < 4; bi++) {
      pt_loader_config cfg = base_cfg(batch_sizes[bi]);
      cfg.crop_pad = aug ? 2 : 0;
      cfg.hflip = aug;
      cfg.mean[1] = 0.5f;
      cfg.std[2] = 0.25f;
      cfg.world = 2;
      cfg.rank = 1;
      pt_loader *sync, *pre, *shared;
      assert_int_equal(pt_loader_create(&sync, &ds, &cfg), PT_OK);
      cfg.parallel = three_shares; /* the caller's pool prepares each batch in shares */
      assert_int_equal(pt_loader_create(&shared, &ds, &cfg), PT_OK);
      cfg.parallel = NULL;
      cfg.prefetch = 1;
      assert_int_equal(pt_loader_create(&pre, &ds, &cfg), PT_OK);
      for (int epoch = 0; epoch < 3; epoch++) {
        epoch_run a = collect(sync, &ds, epoch, 0), b = collect(pre, &ds, epoch, 0), c = collect(shared, &ds, epoch, 0);
        assert_runs_equal(&a, &b, elems);
        assert_runs_equal(&a, &c, elems);
        run_free(&a);
        run_free(&b);
        run_free(&c);
      }
      pt_loader_destroy(sync);
      pt_loader_destroy(pre);
      pt_loader_destroy(shared);
    }
  }
  pt_dataset_free(&ds);
}

/* The batch the caller holds stays as given while the worker fills the
 * rest of the ring: the caller here dwells on each batch long enough for
 * the worker to fill every other slot, then checks it against the
 * synchronous loader's. Small batches get the deep ring, batches over its
 * size bound the two-slot one. */
static void test_held_batch_survives_ring(void **state) {
  (void)state;
  /* 48 samples of 3 x 64 x 64 floats are 2.25 MiB, over the deep ring's 2 */
  struct { int n, c, hw, batch; } cases[] = {{60, 1, 4, 5}, {120, 3, 64, 48}};
  for (int ci = 0; ci < 2; ci++) {
    pt_dataset ds = make_ds(cases[ci].n, cases[ci].c, cases[ci].hw, cases[ci].hw);
    const size_t elems = (size_t)cases[ci].c * cases[ci].hw * cases[ci].hw;
    pt_loader_config cfg = base_cfg(cases[ci].batch);
    cfg.crop_pad = 1;
    cfg.hflip = 1;
    epoch_run ref = collect_cfg(&ds, &cfg, 2);
    cfg.prefetch = 1;
    pt_loader *l;
    assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
    assert_int_equal(pt_loader_start_epoch(l, 2, 0), PT_OK);
    int off = 0;
    for (int b = 0; b < ref.nb; b++) {
      pt_batch batch;
      assert_int_equal(pt_loader_next(l, &batch), PT_OK);
      assert_int_equal(batch.n, ref.sizes[b]);
      const struct timespec dwell = {0, 2000000};
      nanosleep(&dwell, NULL);
      assert_memory_equal(batch.index, ref.idx + off, sizeof(int32_t) * (size_t)batch.n);
      assert_memory_equal(batch.x, ref.x + (size_t)off * elems, sizeof(float) * elems * (size_t)batch.n);
      off += batch.n;
    }
    pt_batch end;
    assert_int_equal(pt_loader_next(l, &end), PT_OK);
    assert_int_equal(end.n, 0);
    pt_loader_destroy(l);
    run_free(&ref);
    pt_dataset_free(&ds);
  }
}

static void test_resume_mid_epoch(void **state) {
  (void)state;
  pt_dataset ds = make_ds(45, 1, 3, 3);
  pt_loader_config cfg = base_cfg(7);
  cfg.crop_pad = 1;
  cfg.hflip = 1;
  for (int prefetch = 0; prefetch < 2; prefetch++) {
    cfg.prefetch = prefetch;
    pt_loader *l;
    assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
    int nb = pt_loader_num_batches(l);
    assert_int_equal(nb, 7);
    epoch_run full = collect(l, &ds, 3, 0);
    for (int b = 0; b <= nb; b++) {
      epoch_run part = collect(l, &ds, 3, b);
      int skip = 7 * b < full.ns ? 7 * b : full.ns;
      assert_int_equal(part.ns, full.ns - skip);
      assert_memory_equal(part.idx, full.idx + skip, sizeof(int32_t) * (size_t)part.ns);
      assert_memory_equal(part.x, full.x + (size_t)skip * 9, sizeof(float) * 9 * (size_t)part.ns);
      run_free(&part);
    }
    run_free(&full);
    pt_loader_destroy(l);
  }
  pt_dataset_free(&ds);
}

/* start_epoch while the worker is preparing (or has queued) a batch must
 * neither deadlock nor leak the old epoch's data into the new one. */
static void test_restart_while_prefetching(void **state) {
  (void)state;
  pt_dataset ds = make_ds(300, 3, 16, 16);
  size_t elems = 768;
  pt_loader_config cfg = base_cfg(32);
  cfg.crop_pad = 4;
  cfg.hflip = 1;
  epoch_run ref[4];
  for (int e = 0; e < 4; e++) ref[e] = collect_cfg(&ds, &cfg, e);
  cfg.prefetch = 1;
  pt_loader *l;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
  int nb = pt_loader_num_batches(l);
  for (int it = 0; it < 400; it++) {
    int e = it % 4, start = (it * 7) % (nb + 1), take = it % 3;
    assert_int_equal(pt_loader_start_epoch(l, e, start), PT_OK);
    for (int k = 0; k < take; k++) {
      pt_batch b;
      assert_int_equal(pt_loader_next(l, &b), PT_OK);
      int batch = start + k;
      if (batch >= nb) {
        assert_int_equal(b.n, 0);
        continue;
      }
      int off = batch * 32;
      assert_int_equal(b.n, ref[e].sizes[batch]);
      assert_memory_equal(b.index, ref[e].idx + off, sizeof(int32_t) * (size_t)b.n);
      assert_memory_equal(b.x, ref[e].x + (size_t)off * elems, sizeof(float) * elems * (size_t)b.n);
    }
  }
  /* Destroy with a batch queued or in flight. */
  assert_int_equal(pt_loader_start_epoch(l, 0, 0), PT_OK);
  pt_loader_destroy(l);
  for (int e = 0; e < 4; e++) run_free(&ref[e]);
  pt_dataset_free(&ds);
}

/* DistributedSampler: the world=1 permutation, padded by wrapping to a
 * multiple of world (or cut to one), dealt round-robin to ranks. */
static void check_shards(int n, int world, int drop_last, int batch_size) {
  pt_dataset ds = make_ds(n, 1, 1, 1);
  pt_loader_config cfg = base_cfg(batch_size);
  cfg.drop_last = drop_last;
  cfg.seed = 99;
  int32_t perm[256];
  expected_perm(perm, n, cfg.seed, 5);
  int per_rank = drop_last ? n / world : (n + world - 1) / world;
  int total = per_rank * world;
  int32_t list[512];
  for (int p = 0; p < 512; p++) list[p] = -1;
  int count[256] = {0};
  cfg.world = world;
  for (int rank = 0; rank < world; rank++) {
    cfg.rank = rank;
    cfg.prefetch = rank % 2;
    pt_loader *l;
    assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
    assert_int_equal(pt_loader_num_samples(l), per_rank);
    int nb = drop_last ? per_rank / batch_size : (per_rank + batch_size - 1) / batch_size;
    assert_int_equal(pt_loader_num_batches(l), nb);
    epoch_run r = collect(l, &ds, 5, 0);
    assert_int_equal(r.ns, drop_last ? nb * batch_size : per_rank);
    for (int i = 0; i < r.ns; i++) {
      list[i * world + rank] = r.idx[i];
      count[r.idx[i]]++;
    }
    run_free(&r);
    pt_loader_destroy(l);
  }
  /* When drop_last also cut each shard to whole batches, positions past the
   * cut stay -1. */
  for (int p = 0; p < total; p++)
    if (!drop_last || per_rank % batch_size == 0 || list[p] != -1)
      assert_int_equal(list[p], perm[p % n]);
  if (drop_last) {
    for (int k = 0; k < n; k++) assert_in_range(count[k], 0, 1); /* disjoint */
  } else {
    /* Cover everything; the padding repeats the list's first entries. */
    for (int k = 0; k < n; k++) assert_true(count[k] >= 1);
    int dup = 0;
    for (int k = 0; k < n; k++) dup += count[k] - 1;
    assert_int_equal(dup, total - n);
  }
  pt_dataset_free(&ds);
}

/* Evaluation shards: no padding, so over all ranks every sample is seen
 * exactly once, whatever n and world. */
static void check_uneven(int n, int world, int batch_size) {
  pt_dataset ds = make_ds(n, 1, 1, 1);
  pt_loader_config cfg = base_cfg(batch_size);
  cfg.uneven = 1;
  cfg.world = world;
  int count[256] = {0}, total = 0;
  for (int rank = 0; rank < world; rank++) {
    cfg.rank = rank;
    pt_loader *l;
    assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
    epoch_run r = collect(l, &ds, 0, 0);
    assert_int_equal(r.ns, pt_loader_num_samples(l));
    for (int i = 0; i < r.ns; i++) count[r.idx[i]]++;
    total += r.ns;
    run_free(&r);
    pt_loader_destroy(l);
  }
  assert_int_equal(total, n);
  for (int k = 0; k < n; k++) assert_int_equal(count[k], 1);
  cfg.drop_last = 1;
  pt_loader *l = NULL;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_ERR_ARG);
  pt_dataset_free(&ds);
}

static void test_uneven_shards(void **state) {
  (void)state;
  check_uneven(103, 4, 7);
  check_uneven(10, 3, 100);
  check_uneven(3, 5, 2); /* more ranks than samples: two ranks get none */
}

static void test_shards(void **state) {
  (void)state;
  int ns[] = {10, 11, 103, 2};
  for (int i = 0; i < 4; i++)
    for (int world = 2; world <= 3; world++)
      for (int drop = 0; drop < 2; drop++) check_shards(ns[i], world, drop, 1);
  check_shards(103, 3, 0, 5);
  check_shards(103, 2, 1, 4);
}

static void test_drop_last_batches(void **state) {
  (void)state;
  pt_dataset ds = make_ds(103, 1, 2, 2);
  pt_loader_config cfg = base_cfg(10);
  cfg.drop_last = 1;
  pt_loader *l;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
  assert_int_equal(pt_loader_num_batches(l), 10);
  epoch_run r = collect(l, &ds, 0, 0);
  assert_int_equal(r.ns, 100);
  for (int b = 0; b < 10; b++) assert_int_equal(r.sizes[b], 10);
  run_free(&r);
  pt_loader_destroy(l);
  pt_dataset_free(&ds);
}

static void test_normalisation(void **state) {
  (void)state;
  pt_dataset ds = make_ds(1, 3, 16, 16); /* 768 bytes: every value 0..255 appears */
  pt_loader_config cfg = base_cfg(1);
  const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
  memcpy(cfg.mean, mean, sizeof mean);
  memcpy(cfg.std, std, sizeof std);
  epoch_run r = collect_cfg(&ds, &cfg, 0);
  for (int ch = 0; ch < 3; ch++)
    for (int i = 0; i < 256; i++) {
      uint8_t p = ds.images[ch * 256 + i];
      float x = r.x[ch * 256 + i];
      float want = ((float)p / 255.0f - mean[ch]) / std[ch];
      assert_memory_equal(&x, &want, sizeof x);
      assert_true(fabs((double)x - ((double)p / 255.0 - mean[ch]) / std[ch]) < 1e-5);
    }
  run_free(&r);
  pt_dataset_free(&ds);

  /* MNIST's usual constants on one channel; bytes 0 and 255 explicitly. */
  ds = make_ds(2, 1, 2, 2);
  ds.images[0] = 0;
  ds.images[1] = 255;
  cfg.shuffle = 0;
  cfg.mean[0] = 0.1307f;
  cfg.std[0] = 0.3081f;
  r = collect_cfg(&ds, &cfg, 0);
  assert_true(fabs(r.x[0] - (-0.1307 / 0.3081)) < 1e-6);
  assert_true(fabs(r.x[1] - ((1.0 - 0.1307) / 0.3081)) < 1e-6);
  run_free(&r);
  pt_dataset_free(&ds);
}

/* The documented augmentation, recomputed: dy, dx = below(2*pad+1) - pad,
 * then flip = uniform < 0.5, from key(seed, AUGMENT), c0 = epoch << 32 | k;
 * the crop reads a zero-padded image, the flip mirrors the crop. */
static void expected_sample(const pt_dataset *ds, const pt_loader_config *cfg, int epoch, int k,
                            float *out, int *flipped, int *ody, int *odx) {
  int C = ds->c, H = ds->h, W = ds->w, pad = cfg->crop_pad;
  pt_rng r;
  pt_rng_init(&r, pt_rng_key(cfg->seed, PT_RNG_AUGMENT), (uint64_t)epoch << 32 | (uint64_t)k);
  int dy = 0, dx = 0, flip = 0;
  if (pad > 0) {
    dy = (int)pt_rng_below(&r, (uint32_t)(2 * pad + 1)) - pad;
    dx = (int)pt_rng_below(&r, (uint32_t)(2 * pad + 1)) - pad;
  }
  if (cfg->hflip) flip = pt_rng_uniform(&r) < 0.5f;
  const uint8_t *img = ds->images + (size_t)k * C * H * W;
  for (int c = 0; c < C; c++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
        uint8_t p = (sy >= 0 && sy < H && sx >= 0 && sx < W) ? img[(c * H + sy) * W + sx] : 0;
        out[(c * H + y) * W + x] = ((float)p / 255.0f - cfg->mean[c]) / cfg->std[c];
      }
  *flipped = flip;
  *ody = dy;
  *odx = dx;
}

static void test_augmentation(void **state) {
  (void)state;
  pt_dataset ds = make_ds(200, 3, 8, 6); /* not square: catches h/w mix-ups */
  size_t elems = 144;
  float want[144];
  struct { int pad, flip; } modes[] = {{2, 1}, {1, 0}, {0, 1}};
  for (int m = 0; m < 3; m++) {
    pt_loader_config cfg = base_cfg(16);
    cfg.crop_pad = modes[m].pad;
    cfg.hflip = modes[m].flip;
    cfg.mean[0] = 0.5f;
    cfg.std[0] = 0.5f;
    cfg.mean[2] = 0.25f;
    cfg.std[2] = 2.0f;
    for (int epoch = 0; epoch < 2; epoch++) {
      epoch_run r = collect_cfg(&ds, &cfg, epoch);
      assert_int_equal(r.ns, 200);
      int flips = 0, dys[5] = {0}, dxs[5] = {0}, padded = 0;
      for (int i = 0; i < r.ns; i++) {
        int f, dy, dx;
        expected_sample(&ds, &cfg, epoch, r.idx[i], want, &f, &dy, &dx);
        assert_memory_equal(r.x + (size_t)i * elems, want, sizeof want);
        flips += f;
        dys[dy + 2]++;
        dxs[dx + 2]++;
        if (dy != 0 || dx != 0) {
          /* A padded corner holds normalised zero: (0 - mean) / std. */
          int y = dy > 0 ? 7 : 0, x = dx > 0 ? 5 : 0;
          if (dy == 0) y = 3;
          if (dx == 0) x = 3;
          if (cfg.hflip && f) x = 5 - x;
          float v = r.x[(size_t)i * elems + (size_t)(2 * 48 + y * 6 + x)];
          assert_true(v == (0.0f - 0.25f) / 2.0f);
          padded++;
        }
      }
      if (cfg.hflip) {
        assert_in_range(flips, 50, 150);
      } else {
        assert_int_equal(flips, 0);
      }
      for (int v = -cfg.crop_pad; v <= cfg.crop_pad; v++) {
        assert_true(dys[v + 2] > 0);
        assert_true(dxs[v + 2] > 0);
      }
      if (cfg.crop_pad) assert_true(padded > 100);
      run_free(&r);
    }
  }
  pt_dataset_free(&ds);
}

/* A sample's augmentation depends on (seed, epoch, index) only: not on the
 * batch size, the shuffle, or the shard it lands in; and it changes with the
 * epoch. */
static void test_augmentation_independent_of_batching(void **state) {
  (void)state;
  pt_dataset ds = make_ds(60, 1, 10, 10);
  size_t elems = 100;
  pt_loader_config a = base_cfg(7), b = base_cfg(13);
  a.crop_pad = b.crop_pad = 3;
  a.hflip = b.hflip = 1;
  b.shuffle = 0;
  b.world = 3;
  b.rank = 1;
  b.prefetch = 1;
  epoch_run ra = collect_cfg(&ds, &a, 4), rb = collect_cfg(&ds, &b, 4);
  epoch_run rc = collect_cfg(&ds, &a, 5);
  float *by_index = calloc(60 * elems, sizeof(float));
  for (int i = 0; i < ra.ns; i++)
    memcpy(by_index + (size_t)ra.idx[i] * elems, ra.x + (size_t)i * elems, elems * sizeof(float));
  for (int i = 0; i < rb.ns; i++)
    assert_memory_equal(by_index + (size_t)rb.idx[i] * elems, rb.x + (size_t)i * elems,
                        elems * sizeof(float));
  int differ = 0;
  for (int i = 0; i < rc.ns; i++)
    differ += memcmp(by_index + (size_t)rc.idx[i] * elems, rc.x + (size_t)i * elems,
                     elems * sizeof(float)) != 0;
  assert_true(differ > 30);
  free(by_index);
  run_free(&ra);
  run_free(&rb);
  run_free(&rc);
  pt_dataset_free(&ds);
}

static void test_bad_config_and_state(void **state) {
  (void)state;
  pt_dataset ds = make_ds(10, 1, 2, 2);
  pt_loader *l = (pt_loader *)1;
  pt_loader_config cfg = base_cfg(0);
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_ERR_ARG);
  assert_null(l);
  assert_error_contains("batch_size");
  cfg = base_cfg(4);
  cfg.world = 2;
  cfg.rank = 2;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_ERR_ARG);
  cfg.world = 0;
  cfg.rank = 0;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_ERR_ARG);
  cfg = base_cfg(4);
  cfg.std[0] = 0.0f;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_ERR_ARG);
  assert_error_contains("std[0]");
  cfg = base_cfg(4);
  cfg.crop_pad = -1;
  assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_ERR_ARG);
  pt_dataset empty = {0};
  cfg = base_cfg(4);
  assert_int_equal(pt_loader_create(&l, &empty, &cfg), PT_ERR_ARG);

  for (int prefetch = 0; prefetch < 2; prefetch++) {
    cfg.prefetch = prefetch;
    assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
    pt_batch b;
    assert_int_equal(pt_loader_next(l, &b), PT_ERR_STATE);
    assert_int_equal(pt_loader_start_epoch(l, -1, 0), PT_ERR_ARG);
    assert_int_equal(pt_loader_start_epoch(l, 0, 4), PT_ERR_ARG);
    assert_int_equal(pt_loader_start_epoch(l, 0, -1), PT_ERR_ARG);
    assert_int_equal(pt_loader_start_epoch(l, 0, 3), PT_OK); /* = num_batches: empty rest */
    assert_int_equal(pt_loader_next(l, &b), PT_OK);
    assert_int_equal(b.n, 0);
    pt_loader_destroy(l);
  }
  pt_loader_destroy(NULL);
  pt_dataset_free(&ds);
}

static void test_wait_seconds(void **state) {
  (void)state;
  pt_dataset ds = make_ds(64, 3, 32, 32);
  for (int prefetch = 0; prefetch < 2; prefetch++) {
    pt_loader_config cfg = base_cfg(16);
    cfg.prefetch = prefetch;
    cfg.crop_pad = 4;
    pt_loader *l;
    assert_int_equal(pt_loader_create(&l, &ds, &cfg), PT_OK);
    assert_true(pt_loader_wait_seconds(l) == 0.0);
    epoch_run r = collect(l, &ds, 0, 0);
    double w = pt_loader_wait_seconds(l);
    /* Without prefetching, every batch is prepared while the caller waits.
     * With it, the worker may have the first batch ready before it is asked
     * for, so all that holds is that nothing negative is counted. */
    if (prefetch) assert_true(w >= 0.0);
    else assert_true(w > 0.0);
    assert_true(w < 60.0);
    run_free(&r);
    r = collect(l, &ds, 1, 0);
    assert_true(pt_loader_wait_seconds(l) >= w);
    run_free(&r);
    pt_loader_destroy(l);
  }
  pt_dataset_free(&ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_sample_once),
      cmocka_unit_test(test_order_seed_and_epoch),
      cmocka_unit_test(test_prefetch_identical),
      cmocka_unit_test(test_held_batch_survives_ring),
      cmocka_unit_test(test_resume_mid_epoch),
      cmocka_unit_test(test_restart_while_prefetching),
      cmocka_unit_test(test_shards),
      cmocka_unit_test(test_uneven_shards),
      cmocka_unit_test(test_drop_last_batches),
      cmocka_unit_test(test_normalisation),
      cmocka_unit_test(test_augmentation),
      cmocka_unit_test(test_augmentation_independent_of_batching),
      cmocka_unit_test(test_bad_config_and_state),
      cmocka_unit_test(test_wait_seconds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
