/* libptrain: train the tutorials' neural networks in parallel, from C.
 *
 *   pt_net *net;  pt_data *train, *test;  pt_config cfg;  pt_result r;
 *   pt_net_preset("fmnist-mlp", &net);
 *   pt_data_load("fashion-mnist", NULL, PT_TRAIN, &train);
 *   pt_data_load("fashion-mnist", NULL, PT_TEST, &test);
 *   pt_config_defaults(&cfg);
 *   cfg.epochs = 2;
 *   pt_train(net, train, test, &cfg, &r);   // net now holds the trained weights
 *   pt_net_save(net, "model.safetensors");  // PyTorch's load_state_dict takes it
 *
 * Every call that can fail returns a pt_status; PT_OK is 0. On failure
 * pt_error_message() gives, for the calling thread, what went wrong, naming
 * the file, flag or value and what was expected. The library never calls
 * exit() and prints nothing unless a pt_config asks it to (cfg.log), with
 * one exception: a rank that fails inside a "ddp" run stops every rank
 * through MPI_Abort, saying why, since MPI cannot leave collectives that
 * are in flight (docs/library.md).
 *
 * Thread safety: handles are not shared between threads while in use;
 * different handles may be used from different threads, but one run
 * trains at a time in a process (another gets PT_ERR_STATE). Training
 * uses its own threads (cfg.threads, cfg.workers) and returns when they
 * are done. The threads that compute for pt_evaluate and pt_predict are a
 * pool of the calling thread's own: pt_evaluate's threads (and pt_train's
 * cfg.threads) resize that thread's pool and no other, and a net runs on
 * whatever pool the thread that uses it has. The pool ends with its thread.
 * A pt_evaluate inside a run's callback leaves the run's threads, and so
 * its weights, as they were.
 *
 * Determinism: with the same seed, configuration, device and number of
 * workers, training gives the same bits, whatever the thread timing.
 *
 * ABI: libptrain.so.0.3. The structs below (pt_config, pt_result, pt_step,
 * pt_epoch, pt_eval) are part of the ABI: a release that changes them
 * changes the soname (before 1.0 it carries the minor version). PTRAIN_VERSION_* name the headers' version,
 * pt_version() the library's.
 */
#ifndef PTRAIN_H
#define PTRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PTRAIN_VERSION_MAJOR 0
#define PTRAIN_VERSION_MINOR 3
#define PTRAIN_VERSION_PATCH 0

#if defined(__GNUC__)
#define PT_API __attribute__((visibility("default")))
#else
#define PT_API
#endif

/* ---- Errors ---------------------------------------------------------- */

typedef enum {
  PT_OK = 0,
  PT_ERR_ARG,      /* a value out of range, or settings that do not fit together */
  PT_ERR_IO,       /* open, read, write or rename failed (a full disk included) */
  PT_ERR_FORMAT,   /* a file's content is malformed */
  PT_ERR_NOMEM,
  PT_ERR_NET,      /* a download failed */
  PT_ERR_CHECKSUM,
  PT_ERR_STATE,    /* an operation out of order, or an internal invariant broke */
  PT_ERR_COMM,     /* a peer was lost or a collective failed */
  PT_ERR_DEVICE,   /* an accelerator or its driver failed or is missing */
} pt_status;

/* The calling thread's message for its last failure ("no error" if none). */
PT_API const char *pt_error_message(void);
/* "malformed input" for PT_ERR_FORMAT, and so on. */
PT_API const char *pt_status_name(pt_status code);
/* The library's version, "MAJOR.MINOR.PATCH" ("0.3.0"). */
PT_API const char *pt_version(void);

/* ---- Models ---------------------------------------------------------- */

/* A model: its layers (a spec, docs/models.md) and, once trained or
 * loaded, its weights. A net made from a preset or a spec has no weights
 * yet: training initialises them from cfg.seed as PyTorch does. */
typedef struct pt_net pt_net;

/* A named preset ("mnist-cnn", "fmnist-mlp", ...; pt_preset_name lists them). */
PT_API pt_status pt_net_preset(const char *name, pt_net **out);
/* A spec given as text, or read from a file. */
PT_API pt_status pt_net_spec(const char *text, pt_net **out);
PT_API pt_status pt_net_spec_file(const char *path, pt_net **out);
/* Weights from a checkpoint: a .safetensors file (ptrain's or PyTorch's
 * state_dict) or a checkpoint directory (its newest complete save). The
 * layers are the ones the checkpoint records; model (a preset's name or
 * a spec file's path, as any name with a dot or a slash is taken; NULL:
 * the recorded ones) names them for files that record none, such as
 * PyTorch's. A file whose CRC-32 (ptrain's files
 * carry one) does not match, or weights holding NaN or infinity, are
 * refused with PT_ERR_FORMAT. */
PT_API pt_status pt_net_load(const char *checkpoint, const char *model, pt_net **out);
/* The weights as safetensors under PyTorch's state_dict names, with the
 * spec in the metadata (so pt_net_load and `ptrain eval` find the layers).
 * The file is replaced atomically. */
PT_API pt_status pt_net_save(const pt_net *net, const char *path);
PT_API void pt_net_free(pt_net *net);

PT_API const char *pt_net_name(const pt_net *net);
/* Input (channels, height, width) and number of classes. */
PT_API void pt_net_shape(const pt_net *net, int *c, int *h, int *w, int *classes);
PT_API size_t pt_net_parameters(const pt_net *net);
/* Whether the net holds weights (trained or loaded). */
PT_API int pt_net_has_weights(const pt_net *net);
/* The dataset the model is made for ("fashion-mnist", ...). */
PT_API const char *pt_net_dataset(const pt_net *net);
/* The spec's text, as a spec file holds it ("name mnist-cnn\ninput 1 28 28\n
 * conv2d conv1 out=32 kernel=3\n...", see docs/models.md). */
PT_API const char *pt_net_spec_text(const pt_net *net);

/* The name of class label in the dataset the net is made for ("Ankle
 * boot" for Fashion-MNIST's 9); NULL out of range. */
PT_API const char *pt_net_class_name(const pt_net *net, int label);

/* The i-th preset's name, i from 0; NULL past the last. */
PT_API const char *pt_preset_name(int i);

/* ---- Data ------------------------------------------------------------ */

/* One split of a dataset: n images of (c, h, w) bytes and their labels. */
typedef struct pt_data pt_data;

enum { PT_TEST = 0, PT_TRAIN = 1 };

/* "mnist", "fashion-mnist" or "cifar10" from dir (NULL: the default,
 * /usr/share/datasets/fashion-mnist for Debian's dataset-fashion-mnist,
 * data/<name> otherwise; "" is refused, not searched as the root); split
 * is PT_TRAIN or PT_TEST. */
PT_API pt_status pt_data_load(const char *name, const char *dir, int split, pt_data **out);
/* The caller's arrays, copied: images (n, c, h, w) bytes (0..255, as the
 * files store them; the model's normalisation is applied per batch), and
 * labels (n) each below classes. */
PT_API pt_status pt_data_from_arrays(const uint8_t *images, const uint8_t *labels, int n, int c, int h, int w,
                                     int classes, pt_data **out);
PT_API void pt_data_free(pt_data *data);
PT_API int pt_data_count(const pt_data *data);
/* The dataset's class names ("T-shirt/top", ...): NULL for data from
 * arrays, or past the last class. */
PT_API const char *pt_data_class_name(const pt_data *data, int label);

/* ---- Training ---------------------------------------------------------- */

/* What the callbacks receive. */
typedef struct {
  int epoch;           /* from 1 */
  int64_t step;        /* optimizer steps so far, all epochs */
  int batch, batches;  /* batches done in this epoch, of */
  double loss;         /* mean training loss of this epoch so far (on a GPU: as of the last read) */
  double lr;
  double images_per_s; /* this epoch so far */
} pt_step;

typedef struct {
  int epoch;            /* from 1 */
  int64_t step;
  double train_loss, test_loss, test_acc;
  double images_per_s;
  double seconds;       /* of training in this epoch */
  double lr;
} pt_epoch;

/* Return nonzero to stop the run: after this step (with several workers,
 * after the next, which all of them agree on), or after this epoch. The
 * weights the net gets are those at the stop. Called on the calling thread. */
typedef int (*pt_step_fn)(const pt_step *step, void *user);
typedef int (*pt_epoch_fn)(const pt_epoch *epoch, void *user);

/* The settings of `ptrain train`'s flags, with its defaults from
 * pt_config_defaults. 0, NULL and NaN mean "the preset's" where the flag's
 * help says "default: the preset's". */
typedef struct {
  int epochs;                 /* total, counting resumed ones (1) */
  int batch_size;             /* per worker (-1: the preset's) */
  int test_batch_size;        /* -1: the preset's */
  float lr;                   /* NaN: the preset's */
  const char *optimizer;      /* "sgd", "adam", "adamw", "adadelta" (NULL: the preset's) */
  float momentum;             /* SGD (NaN: the preset's) */
  int nesterov;
  float weight_decay;         /* NaN: the preset's */
  const char *scheduler;      /* "step", "cosine", "none" (NULL: the preset's) */
  float gamma;                /* StepLR decay per epoch (NaN: the preset's) */
  uint64_t seed;              /* 1 */
  int threads;                /* CPU threads per worker (0: the cores, shared among local workers) */
  int shuffle;                /* 1: reshuffle every epoch */
  int dropout;                /* 1; 0 turns dropout layers off */
  int64_t max_steps;          /* stop after this many optimizer steps (0: no limit) */
  int accum_steps;            /* micro-batches per optimizer step (1) */
  int drop_last;
  /* Parallelism: "none", "dp" (workers are threads), "ddp" (one process
   * per rank, started by mpirun or srun), "model", "pipeline". */
  const char *parallel;       /* NULL: "none" */
  int workers;                /* dp: replicas (0: from devices, else 2) */
  const char *device;         /* "cpu" (NULL), "cuda", "cuda:N" */
  const char *devices;        /* dp: "cpu:0,cpu:1" or "cuda:0,cuda:1"; model, pipeline: a stage each */
  const char *precision;      /* GPUs: "fp32" (NULL), "tf32" or "bf16" */
  int cuda_graphs;            /* one GPU: run the training step as a CUDA graph, the same bits: 0 where
                               * the run allows it (the default), 1 always (an error where not), -1 never;
                               * any other value is refused */
  int stages;                 /* model, pipeline under mpirun: ranks per replica (0: all) */
  int micro_batches;          /* pipeline (0: 4) */
  const char *schedule;       /* pipeline: "gpipe" or "1f1b" (NULL: 1f1b) */
  const char *split;          /* first layers of stages 2.. (NULL: balance FLOPs) */
  double bucket_mb;           /* gradient bucket size (25) */
  int sync_bn;
  double timeout_s;           /* how long a collective waits for the other workers (300) */
  /* Checkpoints (docs/checkpoints.md). */
  const char *checkpoint_dir; /* "checkpoints" */
  int save_model;             /* save after every epoch and at the end */
  int keep_checkpoints;       /* complete saves kept (2) */
  int64_t checkpoint_every;   /* also every N steps (0: no) */
  double checkpoint_interval; /* also every this many seconds (0: no) */
  int exit_after_checkpoint;  /* stop after the first of those saves */
  int resume;                 /* continue from the newest save in checkpoint_dir; saves as save_model */
  const char *init_from;      /* start from these weights (.safetensors) instead of the net's; with resume,
                               * only where checkpoint_dir holds no checkpoint yet */
  /* Evaluation. */
  int64_t eval_every;         /* also evaluate every N steps (0: at epoch ends only) */
  double target_accuracy;     /* stop at the first evaluation this accurate (0: no) */
  /* Output: nothing is printed unless log is set. */
  FILE *log;                  /* per-epoch lines and the summary (NULL: silent) */
  int progress;               /* with log: a progress bar on stderr (a terminal) rather than step lines,
                               * which go to stderr too, as ptrain train's do */
  int log_interval;           /* steps between step lines (10) */
  int quiet;                  /* with log: only the final epoch's line */
  const char *metrics_path;   /* append JSON lines (docs/parallelism.md) */
  int profile;                /* with log: time per layer and phase at the end */
  const char *trace_path;     /* a Chrome trace of the run */
  int prefetch;               /* 1: prepare batches on their own thread when cores allow */
  int keep_denormals;         /* 0: flush denormal floats to zero (faster) */
  /* Callbacks (NULL: none), given user. */
  pt_step_fn on_step;
  pt_epoch_fn on_epoch;
  void *user;
} pt_config;

PT_API void pt_config_defaults(pt_config *cfg);

/* How the run went. Before a run trains, and after one that could not
 * (pt_train's or pt_run_train's failure), the losses, the accuracy and
 * target_seconds are NaN, target_step -1 and the rest 0. */
typedef struct {
  int epochs_done;                        /* a resumed run's include the checkpoint's, as steps do */
  int64_t steps;
  double train_loss, test_loss, test_acc; /* of the last epoch evaluated; NaN where this run ran none */
  double images_per_s, seconds;
  double target_seconds;  /* time to target_accuracy; NaN: not reached or not asked */
  int64_t target_step;    /* -1: not reached or not asked */
  int stopped;            /* one of the below */
} pt_result;

enum {
  PT_RUN_COMPLETE = 0,           /* ran to the end (epochs, max_steps or target_accuracy) */
  PT_RUN_STOPPED_CALLBACK = 1,   /* a callback asked */
  PT_RUN_STOPPED_SIGNAL = 2,     /* a signal to the process (a checkpoint was written) */
  PT_RUN_STOPPED_CHECKPOINT = 3, /* after a save, by exit_after_checkpoint */
};

/* A training run: a net, its data and its settings. */
typedef struct pt_run pt_run;

/* test is the split evaluated after every epoch. cfg is copied (its strings
 * are not: they must outlive the run). The net and data must outlive it. */
PT_API pt_status pt_run_create(pt_net *net, const pt_data *train, const pt_data *test, const pt_config *cfg,
                               pt_run **out);
/* Trains; afterwards the net holds the weights the run ended with. Under
 * "ddp" every rank calls it; rank 0's net gets the weights, and so does
 * every other's. A run trains once: create another to go on (resume). */
PT_API pt_status pt_run_train(pt_run *run);
PT_API const pt_result *pt_run_result(const pt_run *run);
PT_API void pt_run_free(pt_run *run);

/* pt_run_create, pt_run_train and pt_run_free in one call; result may be
 * NULL, and is filled in whatever the status (see pt_result). */
PT_API pt_status pt_train(pt_net *net, const pt_data *train, const pt_data *test, const pt_config *cfg,
                          pt_result *result);
/* Asks this process's training run to stop after its current step, as
 * ptrain train does on SIGTERM (a batch system's time limit or
 * preemption): it writes a checkpoint into cfg.checkpoint_dir, whether or
 * not cfg.save_model asks for saves, and returns PT_OK with stopped =
 * PT_RUN_STOPPED_SIGNAL; a run with cfg.resume then goes on bit for bit.
 * sig: the signal's number (SIGTERM where it is not above 0). Safe to call
 * from a signal handler. A request made before a run starts stops that
 * run after its first step. */
PT_API void pt_request_stop(int sig);

/* ---- Using a model ----------------------------------------------------- */

typedef struct {
  double loss;          /* mean cross-entropy */
  double accuracy;
  int64_t correct, count;
} pt_eval;

/* Loss and accuracy on data, with dropout off and batch norm on its
 * running statistics, on device ("cpu" or NULL, "cuda", "cuda:N").
 * threads: the calling thread's CPU threads from this call on, for its
 * pt_predict calls too (0: as they are, one in a thread that never set
 * them); threads 1 also ends the pool's other threads, which otherwise
 * end when the thread does. Called from a training run's callback
 * (cfg.on_step, cfg.on_epoch), threads are this call's alone: the run goes
 * on with the threads it had, and its weights are those it would have had
 * without the call. */
PT_API pt_status pt_evaluate(pt_net *net, const pt_data *data, const char *device, int threads, pt_eval *out);
/* Class probabilities (n, classes) for n images of (c, h, w) floats in
 * [0, 1] (pixel / 255); the model's normalisation is applied here. */
PT_API pt_status pt_predict(pt_net *net, const float *images, int n, float *probs);

/* A PNG or JPEG image as the net's input: (c, h, w) floats in [0, 1],
 * turned grey or colour and resized as needed. note (NULL: not wanted)
 * gets what was converted ("converted 640x480 RGB to 28x28 grey"), or ""
 * when the image fitted as it was. */
PT_API pt_status pt_image_load(const char *path, const pt_net *net, float *pixels, char *note, size_t note_size);

#ifdef __cplusplus
}
#endif

#endif
