#include "util/fpmode.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define FTZ_DAZ 0x8040u /* MXCSR: flush to zero (bit 15), denormals are zero (bit 6) */

static void apply(int flush) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(flush ? csr | FTZ_DAZ : csr & ~FTZ_DAZ);
}
int pt_fp_flushing(void) { return (_mm_getcsr() & FTZ_DAZ) == FTZ_DAZ; }
#elif defined(__aarch64__)
/* FPCR.FZ flushes denormal inputs and results alike, as FTZ and DAZ do. */
#define FPCR_FZ (1ull << 24)

static unsigned long long fpcr(void) {
  unsigned long long r;
  __asm__ volatile("mrs %0, fpcr" : "=r"(r));
  return r;
}
static void apply(int flush) {
  const unsigned long long r = flush ? fpcr() | FPCR_FZ : fpcr() & ~FPCR_FZ;
  __asm__ volatile("msr fpcr, %0" : : "r"(r));
}
int pt_fp_flushing(void) { return (fpcr() & FPCR_FZ) != 0; }
#else
static void apply(int flush) { (void)flush; }
int pt_fp_flushing(void) { return 0; }
#endif

/* What this thread last applied; -1: nothing yet, and a new thread starts
 * with its creator's mode, whatever it is. */
static _Thread_local int thread_mode = -1;

int pt_fp_set_flush(int flush) {
  const int was = pt_fp_flushing();
  flush = flush != 0;
  apply(flush);
  thread_mode = flush;
  return was;
}

void pt_fp_follow(int flush) {
  flush = flush != 0;
  if (flush != thread_mode) {
    apply(flush);
    thread_mode = flush;
  }
}
