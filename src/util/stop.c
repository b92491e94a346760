/* The stop request: lock-free atomics, which a signal handler may
 * touch (C11 7.14.1.1 allows lock-free atomic objects there). */
#include "util/stop.h"

#include <stdatomic.h>

static atomic_int first_signal;
static atomic_int requests;
static atomic_int saved;

int pt_train_stop_request(int sig) {
  int none = 0;
  atomic_compare_exchange_strong(&first_signal, &none, sig);
  return atomic_fetch_add(&requests, 1) + 1;
}

int pt_train_stop_signal(void) { return atomic_load(&first_signal); }

void pt_train_stop_saved(void) { atomic_store(&saved, 1); }

int pt_train_stop_is_saved(void) { return atomic_load(&saved); }

int pt_train_stop_take(void) {
  const int sig = atomic_exchange(&first_signal, 0);
  atomic_store(&requests, 0);
  atomic_store(&saved, 0);
  return sig;
}
