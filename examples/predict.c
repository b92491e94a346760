/* Classifies PNG or JPEG images with a saved model.
 *   cc predict.c $(pkg-config --cflags --libs ptrain) -o predict
 *   ./predict fmnist-mlp.safetensors shoe.png bag.jpg */
#include <ptrain.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s CHECKPOINT IMAGE...\n", argv[0]);
    return 2;
  }
  pt_net *net;
  if (pt_net_load(argv[1], NULL, &net)) {
    fprintf(stderr, "predict: %s\n", pt_error_message());
    return 1;
  }
  int c, h, w, classes, failed = 0;
  pt_net_shape(net, &c, &h, &w, &classes);
  float *x = malloc(sizeof(float) * c * h * w), *p = malloc(sizeof(float) * classes);
  for (int i = 2; i < argc && x && p; i++) {
    char note[256];
    if (pt_image_load(argv[i], net, x, note, sizeof note) || pt_predict(net, x, 1, p)) {
      fprintf(stderr, "predict: %s\n", pt_error_message());
      failed = 1;
      continue;
    }
    int best = 0;
    for (int k = 1; k < classes; k++)
      if (p[k] > p[best]) best = k;
    printf("%s: %s (%.1f%%)%s%s\n", argv[i], pt_net_class_name(net, best), 100.0 * p[best], note[0] ? "; " : "", note);
  }
  free(x);
  free(p);
  pt_net_free(net);
  return failed || !x || !p;
}
