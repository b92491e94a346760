/* The model-spec language and the presets built from it: shapes, parameter
 * names and counts as PyTorch's modules have them, initialisation bounds,
 * and clear errors for malformed specs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "nn/model.h"
#include "nn/presets.h"

static pt_model *build(const char *preset) {
  pt_model_spec spec;
  assert_int_equal(pt_preset_spec(preset, &spec), PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  return m;
}

static void test_param_counts(void **s) {
  (void)s;
  /* Counts as sum(p.numel() for p in model.parameters()) in PyTorch. */
  struct { const char *name; size_t params; int tensors; } want[] = {
      {"mnist-cnn", 1199882, 8},
      {"tutorial-cnn", 28938, 6},
      {"fmnist-mlp", 159010, 4},
      {"cifar-convnet", 140902954, 18},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    pt_model_spec spec;
    assert_int_equal(pt_preset_spec(want[i].name, &spec), PT_OK);
    pt_model *m;
    /* cifar-convnet is 572 MB of parameters: check the count from the spec walk
     * of a batch-1 model without touching the memory. */
    assert_int_equal(pt_model_create(&m, &spec, 1), PT_OK);
    if (m->nparam_total != want[i].params)
      print_error("%s: %zu parameters, PyTorch has %zu\n", want[i].name, m->nparam_total, want[i].params);
    assert_int_equal(m->nparam_total, want[i].params);
    assert_int_equal(m->nparams, want[i].tensors);
    /* The allocation-free summary agrees with the built model. */
    pt_model_summary sum;
    assert_int_equal(pt_model_summarize(&spec, &sum), PT_OK);
    assert_int_equal(sum.nparams, want[i].params);
    assert_true(sum.flops == pt_model_flops(m));
    size_t act = 0;
    for (int l = 0; l < m->nlayers; l++) act += (size_t)m->layers[l].out_c * m->layers[l].out_h * m->layers[l].out_w;
    assert_int_equal(sum.activation_floats, act);
    pt_model_destroy(m);
  }
}

static void test_pytorch_names(void **s) {
  (void)s;
  pt_model *m = build("tutorial-cnn");
  const char *names[] = {"conv1.0.weight", "conv1.0.bias", "conv2.0.weight", "conv2.0.bias", "out.weight", "out.bias"};
  for (int i = 0; i < 6; i++) assert_string_equal(m->params[i].name, names[i]);
  assert_int_equal(m->params[4].shape[0], 10);
  assert_int_equal(m->params[4].shape[1], 1568);
  pt_model_destroy(m);
  m = build("mnist-cnn");
  assert_string_equal(m->params[4].name, "fc1.weight");
  assert_int_equal(m->params[4].shape[1], 9216);
  /* about 12 M multiply-adds forward */
  assert_true(fabs(pt_model_flops(m) - 2 * 12.0e6) < 2 * 0.3e6);
  pt_model_destroy(m);
}

static void test_init_bounds(void **s) {
  (void)s;
  pt_model *m = build("mnist-cnn");
  pt_model_init(m, 1);
  const pt_tensor_info *w = &m->params[4]; /* fc1.weight, fan_in 9216 */
  float bound = 1.0f / sqrtf(9216.0f), mx = 0.0f;
  double mean = 0.0, sq = 0.0;
  for (size_t i = 0; i < w->numel; i++) {
    float v = m->param[w->offset + i];
    mx = fmaxf(mx, fabsf(v));
    mean += v;
    sq += (double)v * v;
  }
  mean /= (double)w->numel;
  sq /= (double)w->numel;
  assert_true(mx <= bound);
  assert_true(mx > 0.99f * bound);
  assert_true(fabs(mean) < 0.01 * bound);
  /* uniform(-b, b) has variance b^2 / 3 */
  assert_true(fabs(sq / (bound * bound / 3.0) - 1.0) < 0.01);
  /* same seed, same weights; other seed, other weights */
  float first = m->param[0];
  pt_model_init(m, 1);
  assert_true(m->param[0] == first);
  pt_model_init(m, 2);
  assert_true(m->param[0] != first);
  pt_model_destroy(m);
}

/* A UTF-8 byte-order mark is skipped, as CRLF line ends are taken; a
 * batch norm after a convolution's 1x1 output is 4-D, and taken. */
static void test_spec_bom_and_bn_after_1x1(void **s) {
  (void)s;
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse("\xef\xbb\xbfinput 1 28 28\r\nflatten\r\nlinear fc out=10\r\n", "bom.txt", &spec),
                   PT_OK);
  assert_int_equal(spec.in_c, 1);
  /* A line of 1,023 characters is taken with either line end: the \r of
   * CRLF is not counted; one more character is refused with both. */
  for (int crlf = 0; crlf < 2; crlf++) {
    const char *eol = crlf ? "\r\n" : "\n";
    char text[1200], x[1022];
    memset(x, 'x', 1021);
    x[1021] = 0;
    snprintf(text, sizeof text, "# %s%sinput 1 28 28%sflatten%slinear fc out=10%s", x, eol, eol, eol, eol);
    assert_int_equal(pt_spec_parse(text, "long.txt", &spec), PT_OK);
    char longer[1201] = "# x";
    memcpy(longer + 3, text + 2, strlen(text + 2) + 1);
    assert_int_not_equal(pt_spec_parse(longer, "long.txt", &spec), PT_OK);
    assert_non_null(strstr(pt_error_message(), "long.txt:1: line longer than 1023 characters"));
  }
  assert_int_equal(pt_spec_parse("input 1 28 28\nconv2d c out=4 kernel=28\nbatchnorm2d bn\nflatten\nlinear fc out=10\n",
                                 "bn.txt", &spec),
                   PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, 2), PT_OK);
  pt_model_destroy(m);
  /* Comments may hold any text; the directives are ASCII. */
  assert_int_equal(
      pt_spec_parse("# caf\xc3\xa9\ninput 1 28 28\nflatten # na\xc3\xafve\nlinear fc out=10\n", "utf8.txt", &spec),
      PT_OK);
  assert_int_equal(spec.nlayers, 2);
}

static void expect_error(const char *text, const char *needle) {
  pt_model_spec spec;
  pt_status st = pt_spec_parse(text, "model.txt", &spec);
  if (st == PT_OK) {
    pt_model *m;
    st = pt_model_create(&m, &spec, 2);
    if (st == PT_OK) pt_model_destroy(m);
  }
  assert_int_not_equal(st, PT_OK);
  if (!strstr(pt_error_message(), needle)) {
    print_error("message '%s' lacks '%s'\n", pt_error_message(), needle);
    fail();
  }
}

static void test_spec_errors(void **s) {
  (void)s;
  expect_error("conv2d c out=3 kernel=3\nflatten\nlinear l out=2\n", "no 'input C H W'");
  expect_error("input 1 28 28\nconv2d c out=3 kernal=3\n", "model.txt:2: unknown option 'kernal'");
  expect_error("input 1 28 28\nconv2d out=3 kernel=3\n", "needs a module name");
  expect_error("input 1 28 28\nconv2d c out=3\n", "needs out= and kernel=");
  expect_error("input 1 28 28\nconv2d c out=-3 kernel=3\n", "out=-3: expected an integer");
  expect_error("input 1 28 28\nlinear l out=10\n", "add 'flatten' before it");
  /* A 1x1 map is still (N, C, 1, 1), which PyTorch's Linear does not take
   * as C features; nor the model's input. */
  expect_error("input 1 28 28\nconv2d c out=8 kernel=28\nlinear l out=10\n",
               "model.txt:3: linear l: input 8x1x1: linear takes flat input: add 'flatten' before it");
  expect_error("input 1 28 28\nconv2d c out=8 kernel=27\nrelu\nmaxpool2d kernel=2\nlinear l out=10\n",
               "model.txt:5: linear l: input 8x1x1: linear takes flat input");
  expect_error("input 3 1 1\nlinear l out=10\n", "model.txt:2: linear l: input 3x1x1: linear takes flat input");
  expect_error("input 1 28 28\nconv2d c out=10 kernel=28\n",
               "model.txt:2: the last layer's output is 10x1x1; a classifier must end flat (add 'flatten')");
  expect_error("input 1 28 28\nconv2d c out=10 kernel=28\nlogsoftmax\n", "a classifier must end flat");
  /* Bytes that are not printable ASCII are named, not echoed. */
  expect_error("input 1 28 28\nflatten\nlinear l out=10\x1b[2J\n",
               "model.txt:3: column 16, byte 0x1b: expected printable ASCII outside comments");
  expect_error("input 1 28 28\nflatten\nlinear l\xc3\xa9 out=10\n", "model.txt:3: column 9, byte 0xc3");
  expect_error("input 1 4 4\nconv2d c out=2 kernel=7\n", "kernel larger than the padded input");
  expect_error("input 1 28 28\nconv2d c out=2 kernel=3\n", "a classifier must end flat");
  expect_error("input 1 28 28\nflatten\nlinear l out=1\n",
               "model.txt:3: the model has 1 output; a classifier needs at least 2");
  expect_error("input 1 28 28\nflatten\nlinear a out=5\nlinear a out=3\n", "'a' is already used");
  expect_error("input 1 28 28\nsoftmax\n", "unknown directive 'softmax'");
  expect_error("input 1 28 28\nflatten\nlinear l out=2\nloss mse\n", "unknown loss 'mse'");
  expect_error("input 1 28 28\nflatten\nlinear l out=2\ndropout p=1.5\n", "p=1.5");
  expect_error("input 1 28 28\nflatten\nlinear l out=1\n", "at least 2");
  /* NLL on raw scores has no floor: only logsoftmax makes log-probabilities. */
  expect_error("input 1 28 28\nloss nll\nflatten\nlinear l out=10\n",
               "model.txt:2: loss nll expects log-probabilities, but the model ends with linear: end it with "
               "logsoftmax, or use 'loss cross-entropy'");
  expect_error("input 1 28 28\nflatten\nlinear l out=10\nlogsoftmax\ndropout p=0.5\nloss nll\n",
               "model.txt:6: loss nll expects log-probabilities, but the model ends with dropout");
  /* Given twice, one value would be dropped without a word. */
  expect_error("input 1 28 28\nflatten\nlinear fc out=10 out=20\n", "model.txt:3: option 'out' given twice");
  expect_error("input 1 28 28\ninput 1 28 28\nflatten\nlinear fc out=10\n",
               "model.txt:2: 'input' given twice (first on line 1)");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\naugment crop=4 crop=0\n",
               "model.txt:4: augment: 'crop' given twice");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\nnormalize mean=0.1 mean=0.5 std=0.3\n",
               "model.txt:4: normalize: 'mean' given twice");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\naugment\n", "model.txt:4: augment: expected crop=PAD");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\nnormalize\n", "model.txt:4: normalize: expected mean=");
  expect_error("input 3 32 32\nflatten\nlinear fc out=10\nnormalize mean=0.1,0.2,0.3, std=0.3\n",
               "model.txt:4: mean=0.1,0.2,0.3,: an empty value");
  /* In range as typed, but 0 or a denormal as the float it is kept in. */
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\ndefaults lr=1e-50\n",
               "model.txt:4: lr=1e-50: expected 0 or a number in [1.17549435e-38, 1000] (it is 0 as a float)");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\ndefaults weight-decay=1e-40\n",
               "model.txt:4: weight-decay=1e-40: expected 0 or a number in [1.17549435e-38, 1] (it is a denormal as a float)");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\ndropout p=1e-45\n", "p=1e-45: expected 0 or");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\nnormalize mean=1e-40 std=1\n",
               "0 or at least 1.17549435e-38 in size (it is a denormal as a float)");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\ndefaults lr=0.1 lr=0.2\n",
               "model.txt:4: defaults: 'lr' given twice");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\ndefaults lr=0.1\ndefaults batch=32 lr=0.2\n",
               "model.txt:5: defaults: 'lr' given twice (first on line 4)");
  /* Momentum is SGD's: a default optimizer that is not would make every
   * run without --optimizer sgd fail, far from this line. */
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\ndefaults optimizer=adam\ndefaults momentum=0.9\n",
               "model.txt:5: defaults: momentum=0.9 applies to optimizer sgd, not adam (line 4): drop momentum");
  /* batchnorm2d on flat input, after a linear as after a flatten, as
   * PyTorch's BatchNorm2d refuses 2-D input; after a convolution's 1x1
   * output it is 4-D and taken (below). */
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\nbatchnorm2d bn\n",
               "model.txt:4: batchnorm2d bn: input 10: batchnorm2d needs (C, H, W) input, not flat");
  /* conv2d and maxpool2d take (N, C, H, W) in PyTorch, so not the (N, C)
   * a flatten or a linear makes, even where a ReLU is between. */
  expect_error("input 1 28 28\nflatten\nconv2d c out=2 kernel=1\nflatten\nlinear a out=10\n",
               "model.txt:3: conv2d c: input 784: conv2d needs an image input (C x H x W); the input here is flat "
               "(784)");
  expect_error("input 1 28 28\nflatten\nlinear a out=16\nrelu\nconv2d c out=2 kernel=1\nflatten\nlinear b out=10\n",
               "model.txt:5: conv2d c: input 16: conv2d needs an image input (C x H x W); the input here is flat (16)");
  expect_error("input 1 28 28\nflatten\nmaxpool2d kernel=2\nlinear a out=10\n",
               "model.txt:3: maxpool2d: input 784: maxpool2d needs an image input (C x H x W); the input here is flat "
               "(784)");
  expect_error("input 1 28 28\nflatten\nmaxpool2d kernel=1\nlinear a out=10\n",
               "maxpool2d needs an image input");
  /* Shape errors name the file and line, with or without a 'name' line. */
  expect_error("input 1 28 28\nconv2d c out=4 kernel=3\nlinear fc out=10\n",
               "model.txt:3: linear fc: input 4x26x26: linear takes flat input");
  expect_error("name tiny\ninput 1 28 28\nconv2d c out=4 kernel=3\nlinear fc out=10\n", "model.txt:4: linear fc:");
  expect_error("name tiny\ninput 1 28 28\nconv2d c out=2 kernel=3\n", "model.txt:3: the last layer's output");
  expect_error("input 1 28 28\nflatten\nlinear l out=2\ndefaults optimizer=rmsprop\n",
               "model.txt:4: defaults: optimizer=rmsprop: expected one of sgd|adam|adamw|adadelta");
  expect_error("input 1 28 28\nflatten\nlinear l out=2\ndefaults dataset=imagenet\n",
               "model.txt:4: defaults: dataset=imagenet: expected one of");
  expect_error("input 1 28 28\nflatten\nlinear l out=2\ndefaults scheduler=linear\n",
               "model.txt:4: defaults: scheduler=linear");
  /* Sizes past what an int indexes, named with the layer (they once wrapped
   * around: a flatten of 0 values). */
  expect_error("input 3 65536 65536\nflatten\nlinear fc out=10\n",
               "model.txt:2: flatten: input 3x65536x65536: output of 12884901888 values: at most 2147483647");
  expect_error("input 3 4096 4096\nconv2d c out=1048576 kernel=1\nflatten\nlinear fc out=10\n",
               "model.txt:2: conv2d c: input 3x4096x4096: output of 17592186044416 values");
  expect_error("input 1 28 28\nconv2d c out=1048576 kernel=1\nflatten\nlinear fc out=10\n",
               "model.txt:4: linear fc: input 822083584: weight of 8220835840 values");
  expect_error("input 1 28 28\nflatten\nlinear fc out=1048576\nlinear fc2 out=1048576\n",
               "model.txt:4: linear fc2: input 1048576: weight of 1099511627776 values");
  /* Normalisation, the loader and images know grey and colour only. */
  expect_error("name c4\ninput 4 8 8\nflatten\nlinear l out=2\n", "model.txt:2: input C=4: expected an integer in [1, 3]");
}

static void test_spec_strict_options_and_names(void **s) {
  (void)s;
  /* Options are whole words: "p" is in "padding" and "eps", but not theirs. */
  expect_error("input 1 28 28\nconv2d c out=4 kernel=3 p=0.5\n", "model.txt:2: unknown option 'p'");
  expect_error("input 1 28 28\nbatchnorm2d bn p=0.3\n", "model.txt:2: unknown option 'p'");
  expect_error("input 1 28 28\nconv2d c out=4 kernel=3 pad=1\n", "model.txt:2: unknown option 'pad'");
  /* One normalisation value, or one per channel. */
  expect_error("input 3 28 28\nflatten\nlinear fc out=10\nnormalize mean=0.1,0.2 std=1,2\n",
               "model.txt:4: mean=0.1,0.2: expected 1 or 3 values");
  expect_error("input 1 28 28\nflatten\nlinear fc out=10\nnormalize mean=0.1,0.2,0.3 std=1\n",
               "model.txt:4: normalize: 3 values for an input of 1 channel");
  expect_error("normalize std=1,2,3\ninput 1 28 28\nflatten\nlinear fc out=10\n",
               "model.txt:1: normalize: 3 values for an input of 1 channel");
  /* Every part of a dotted module name is a name. */
  expect_error("input 1 28 28\nflatten\nlinear . out=10\n", "model.txt:3: '.' is not a valid module name");
  expect_error("input 1 28 28\nflatten\nlinear .. out=10\n", "'..' is not a valid module name");
  expect_error("input 1 28 28\nflatten\nlinear a..b out=10\n", "'a..b' is not a valid module name");
  expect_error("input 1 28 28\nflatten\nlinear fc. out=10\n", "'fc.' is not a valid module name");
  expect_error("input 1 28 28\nflatten\nlinear l01234567890123456789012345678901234567890123456 out=10\n",
               "model.txt:3: module name 'l0123456789012345678...' is 48 characters long; at most 47");
  expect_error("name m01234567890123456789012345678901234567890123456\ninput 1 28 28\n",
               "model.txt:1: name 'm0123456789012345678...' is 48 characters long; at most 47");
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse("input 1 28 28\nflatten\nlinear features.0 out=10\nnormalize mean=0.5 std=0.25\n",
                                 "t", &spec), PT_OK);
  assert_float_equal(spec.std[0], 0.25, 0);
}

/* A spec file up to 64 KiB is read; one byte more is refused. */
static void test_spec_file_size_limit(void **s) {
  (void)s;
  const char *head = "input 1 28 28\nflatten\nlinear fc out=10\n";
  const size_t sizes[3] = {65535, 65536, 65537};
  for (int i = 0; i < 3; i++) {
    char path[] = "/tmp/pt-spec-XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(head, f);
    for (size_t k = strlen(head); k < sizes[i]; k++) fputc(k % 64 == 63 ? '\n' : '#', f);
    fclose(f);
    char *text = NULL;
    const pt_status st = pt_spec_read_file(path, &text);
    unlink(path);
    if (sizes[i] <= 65536) {
      assert_int_equal(st, PT_OK);
      assert_int_equal(strlen(text), sizes[i]);
    } else {
      assert_int_equal(st, PT_ERR_FORMAT);
      assert_non_null(strstr(pt_error_message(), "larger than 64 KiB"));
    }
    free(text);
  }
}

static void test_spec_options(void **s) {
  (void)s;
  pt_model_spec spec;
  const char *text =
      "# a comment line\n"
      "input 3 32 32   # trailing comment\n"
      "conv2d features.0 out=8 kernel=3 stride=2 padding=1 bias=0\n"
      "batchnorm2d bn eps=0.001 momentum=0.2\n"
      "maxpool2d kernel=2\n"
      "flatten\n"
      "linear head out=10\n"
      "normalize mean=0.5 std=0.25,0.5,1\n"
      "augment crop=4 flip=1\n"
      "defaults dataset=cifar10 optimizer=sgd lr=0.1 momentum=0.9 batch=32\n";
  assert_int_equal(pt_spec_parse(text, "t", &spec), PT_OK);
  pt_model *m;
  assert_int_equal(pt_model_create(&m, &spec, 4), PT_OK);
  assert_int_equal(m->layers[0].out_h, 16);
  assert_int_equal(m->layers[2].out_h, 8);
  assert_string_equal(m->params[0].name, "features.0.weight");
  assert_string_equal(m->params[1].name, "bn.weight");  /* no conv bias */
  assert_string_equal(m->buffers[1].name, "bn.running_var");
  assert_float_equal(spec.layers[1].eps, 0.001, 1e-9);
  assert_float_equal(spec.mean[2], 0.5, 0);
  assert_float_equal(spec.std[1], 0.5, 0);
  assert_int_equal(spec.crop_pad, 4);
  assert_int_equal(spec.defaults.batch, 32);
  assert_string_equal(spec.defaults.dataset, "cifar10");
  assert_int_equal(m->num_classes, 10);
  pt_model_destroy(m);
}

static void test_summary_reports_spec_errors(void **s) {
  (void)s;
  pt_model_spec spec;
  assert_int_equal(pt_spec_parse("input 1 28 28\nlinear l out=10\n", "t", &spec), PT_OK);
  pt_model_summary sum;
  assert_int_equal(pt_model_summarize(&spec, &sum), PT_ERR_FORMAT);
  assert_non_null(strstr(pt_error_message(), "add 'flatten' before it"));
}

static void test_unknown_preset(void **s) {
  (void)s;
  pt_model_spec spec;
  assert_int_equal(pt_preset_spec("resnet50", &spec), PT_ERR_ARG);
  assert_non_null(strstr(pt_error_message(), "mnist-cnn"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_param_counts), cmocka_unit_test(test_pytorch_names),
      cmocka_unit_test(test_init_bounds),  cmocka_unit_test(test_spec_errors),
      cmocka_unit_test(test_spec_options), cmocka_unit_test(test_unknown_preset),
      cmocka_unit_test(test_summary_reports_spec_errors),
      cmocka_unit_test(test_spec_strict_options_and_names),
      cmocka_unit_test(test_spec_file_size_limit),
      cmocka_unit_test(test_spec_bom_and_bn_after_1x1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
