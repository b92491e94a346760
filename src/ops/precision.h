/* The arithmetic a backend's GEMMs and convolutions may use (--precision). */
#ifndef PT_OPS_PRECISION_H
#define PT_OPS_PRECISION_H

/* --precision: what a GEMM or convolution may round its fp32 inputs to
 * before multiplying. Sums, stored activations, gradients, parameters and
 * optimizer state stay fp32 in every mode. */
typedef enum {
  PT_PRECISION_FP32 = 0, /* full fp32 (the CPU's only mode) */
  PT_PRECISION_TF32,     /* TF32 tensor-core math, as PyTorch's allow_tf32 */
  PT_PRECISION_BF16      /* GEMMs multiply bf16-rounded inputs and sum in fp32 */
} pt_precision;

#endif
