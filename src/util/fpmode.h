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
 * The mode is per thread in hardware and per process here: pt_fp_set_flush
 * sets the process's mode and this thread's; every other thread that runs
 * ops takes it up with pt_fp_follow, which the thread pool calls before
 * each job. Elsewhere than x86-64 and aarch64 both are no-ops and
 * denormals are kept.
 */
#ifndef PT_UTIL_FPMODE_H
#define PT_UTIL_FPMODE_H

/* Returns this thread's mode before, for a caller that puts it back. */
int pt_fp_set_flush(int flush);
int pt_fp_flushing(void); /* this thread's mode as the CPU has it */
/* Brings this thread to the process's mode; a load and a compare when it
 * is there already. */
void pt_fp_follow(void);

#endif
