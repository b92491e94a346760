/* Trains fmnist-mlp on Fashion-MNIST, prints its test accuracy and saves it.
 *   cc train.c $(pkg-config --cflags --libs ptrain) -o train && ./train [DATA_DIR] */
#include <ptrain.h>
#include <stdio.h>

static int on_epoch(const pt_epoch *e, void *user) {
  (void)user;
  printf("epoch %d: train loss %.4f, test accuracy %.4f\n", e->epoch, e->train_loss, e->test_acc);
  return 0; /* nonzero would stop the run */
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : NULL; /* NULL: Debian's dataset-fashion-mnist */
  pt_net *net = NULL;
  pt_data *train = NULL, *test = NULL;
  pt_config cfg;
  pt_result r;
  pt_config_defaults(&cfg);
  cfg.epochs = 2;
  cfg.on_epoch = on_epoch;
  pt_status st = pt_net_preset("fmnist-mlp", &net);
  if (!st) st = pt_data_load("fashion-mnist", dir, PT_TRAIN, &train);
  if (!st) st = pt_data_load("fashion-mnist", dir, PT_TEST, &test);
  if (!st) st = pt_train(net, train, test, &cfg, &r);
  if (!st) st = pt_net_save(net, "fmnist-mlp.safetensors");
  if (!st) printf("test accuracy %.4f after %lld steps; saved fmnist-mlp.safetensors\n", r.test_acc, (long long)r.steps);
  else fprintf(stderr, "train: %s\n", pt_error_message());
  pt_data_free(train);
  pt_data_free(test);
  pt_net_free(net);
  return st ? 1 : 0;
}
