#ifndef PT_TRAIN_WARM_UP_H
#define PT_TRAIN_WARM_UP_H

#include "nn/model.h"
#include "util/error.h"

/* One forward and backward pass over a batch of n zeros, on a GPU only,
 * before the first epoch: what the CUDA libraries do on first use (cuDNN
 * loading its engines, cuBLAS its kernels, each convolution's algorithm
 * choice and workspace) then happens before the epoch's clock starts, as
 * PyTorch benchmarks leave their warm-up steps out. It leaves no trace:
 * batch-norm statistics and counts are put back, no hook (gradient
 * buckets, synchronised statistics) fires, and the first real step
 * overwrites the gradients. A CPU model is left alone. */
pt_status pt_train_warm_up(pt_model *m, int n);

#endif
