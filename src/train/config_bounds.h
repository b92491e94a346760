/* The ranges of a run's numeric settings: one table for ptrain train's
 * flags (cli/train_args.c) and for a library caller's pt_config
 * (config_check.c), so that the two cannot drift apart. Bounds keep a
 * run's memory, threads and loops to what a machine can hold and turn a
 * slip (an extra zero, a field left uninitialised) into a message. */
#ifndef PT_TRAIN_CONFIG_BOUNDS_H
#define PT_TRAIN_CONFIG_BOUNDS_H

#define PT_EPOCHS_MAX 100000
#define PT_BATCH_MAX (1 << 20)
#define PT_LR_MAX 1e3
#define PT_MOMENTUM_MAX 0.999999
#define PT_WEIGHT_DECAY_MAX 1.0
#define PT_THREADS_MAX 1024
#define PT_LOG_INTERVAL_MAX (1 << 30)
#define PT_KEEP_CHECKPOINTS_MAX 1000000
#define PT_CHECKPOINT_INTERVAL_MAX 1e9 /* seconds */
#define PT_WORKERS_MAX 1024
#define PT_STAGES_MAX 1024
#define PT_MICRO_BATCHES_MAX 16000
#define PT_ACCUM_STEPS_MAX (1 << 20)
#define PT_BUCKET_MB_MIN 0.001
#define PT_BUCKET_MB_MAX 1e6
#define PT_TIMEOUT_MIN 0.1 /* seconds */
#define PT_TIMEOUT_MAX 1e7
#define PT_COUNT_MAX 9.2e18 /* steps: int64's range */

#endif
