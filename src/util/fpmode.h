/* Denormal floats: flushed to zero, or kept as IEEE 754 asks.
 *
 * A float below 1.2e-38 is denormal, and x86 CPUs compute with one through
 * a microcode assist that costs around a hundred cycles. Training drives
 * some values there: Adam's first moment decays by beta1 each step where a
 * gradient is exactly zero (an input pixel that is always 0), and
 * log-softmax outputs underflow as a model grows confident. fmnist-mlp then
 * ran at half speed after a few epochs (71,000 images/s in epoch 8 of 15,
 * 145,000 with flushing). Flushing (FTZ and DAZ in MXCSR, FZ in Arm's
 * FPCR) changes only
 * values that small, far below anything a loss or accuracy shows; the
 * default is to flush, as TensorFlow does and as PyTorch offers with
 * torch.set_flush_denormal(True).
 *
 * The mode is per thread, in hardware and here: pt_fp_set_flush sets the
 * calling thread's. A thread started later inherits its creator's (POSIX
 * has pthread_create pass the floating-point environment on), and a thread
 * pool's workers take their caller's with each job (pt_fp_follow), so a
 * run's mode reaches every thread that computes for it and no other: a
 * pt_evaluate in one thread leaves a training run's mode in another alone.
 * Elsewhere than x86-64 and aarch64 both are no-ops and denormals are kept.
 */
#ifndef PT_UTIL_FPMODE_H
#define PT_UTIL_FPMODE_H

/* Returns this thread's mode before, for a caller that puts it back. */
int pt_fp_set_flush(int flush);
int pt_fp_flushing(void); /* this thread's mode as the CPU has it */
/* Brings this thread to mode flush; a compare when it is there already. */
void pt_fp_follow(int flush);

#endif
