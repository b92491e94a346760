/* A library program under mpirun -np 2, parallel "ddp": "ok" trains on
 * both ranks; "badlr" gives rank 1 alone a learning rate out of bounds.
 * Each rank prints its status and message, for test_api_ddp.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ddp_start ok|badlr CHECKPOINT_DIR\n");
    return 2;
  }
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  const int rank = r ? atoi(r) : 0;
  enum { N = 64 };
  static uint8_t images[N * 28 * 28], labels[N];
  for (int i = 0; i < N; i++) {
    labels[i] = (uint8_t)(i % 10);
    for (int p = 0; p < 28 * 28; p++) images[i * 28 * 28 + p] = (uint8_t)((p * 7 + i * 13) % 256);
  }
  pt_net *net = NULL;
  pt_data *data = NULL;
  pt_status st = pt_net_preset("fmnist-mlp", &net);
  if (st == PT_OK) st = pt_data_from_arrays(images, labels, N, 1, 28, 28, 10, &data);
  if (st == PT_OK) {
    pt_config c;
    pt_config_defaults(&c);
    c.parallel = "ddp";
    c.threads = 1;
    c.batch_size = 16;
    c.max_steps = 2;
    c.timeout_s = 20;
    c.checkpoint_dir = argv[2];
    if (!strcmp(argv[1], "badlr") && rank == 1) c.lr = 5000;
    pt_result res;
    st = pt_train(net, data, data, &c, &res);
  }
  printf("rank %d: status %d: %s\n", rank, (int)st, st == PT_OK ? "trained" : pt_error_message());
  pt_data_free(data);
  pt_net_free(net);
  return st == PT_OK ? 0 : 1;
}
