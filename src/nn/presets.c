/* The tutorials' models, written in the model-spec language (spec.h), with
 * module names as in the PyTorch code each comes from so that checkpoints load
 * into that code with load_state_dict. */
#include "nn/presets.h"

#include <string.h>

static const pt_preset presets[] = {
    {"mnist-cnn", "pytorch/examples/mnist Net (the DataParallel and DDP tutorials)",
     "name mnist-cnn\n"
     "input 1 28 28\n"
     "conv2d conv1 out=32 kernel=3\n"
     "relu\n"
     "conv2d conv2 out=64 kernel=3\n"
     "relu\n"
     "maxpool2d kernel=2\n"
     "dropout p=0.25          # dropout1\n"
     "flatten\n"
     "linear fc1 out=128\n"
     "relu\n"
     "dropout p=0.5           # dropout2\n"
     "linear fc2 out=10\n"
     "logsoftmax\n"
     "loss nll\n"
     "normalize mean=0.1307 std=0.3081\n"
     "defaults dataset=fashion-mnist optimizer=adadelta lr=1.0 batch=64 test-batch=1000 "
     "scheduler=step gamma=0.7\n"},
    {"tutorial-cnn", "the MNIST CNN of the DataParallel tutorial (conv1/conv2 are nn.Sequential)",
     "name tutorial-cnn\n"
     "input 1 28 28\n"
     "conv2d conv1.0 out=16 kernel=5 padding=2\n"
     "relu\n"
     "maxpool2d kernel=2\n"
     "conv2d conv2.0 out=32 kernel=5 padding=2\n"
     "relu\n"
     "maxpool2d kernel=2\n"
     "flatten\n"
     "linear out out=10\n"
     "logsoftmax\n"
     "loss cross-entropy\n"
     "defaults dataset=fashion-mnist optimizer=adam lr=0.01 batch=100 test-batch=1000\n"},
    {"fmnist-mlp", "the model-parallel tutorial's SeqNet, as written (log-softmax between the layers)",
     "name fmnist-mlp\n"
     "input 1 28 28\n"
     "flatten\n"
     "linear lin1 out=200\n"
     "logsoftmax\n"
     "linear lin2 out=10\n"
     "loss cross-entropy\n"
     "defaults dataset=fashion-mnist optimizer=adam lr=0.01 batch=100 test-batch=1000\n"},
    {"cifar-convnet", "the CIFAR-10 CNN of the HTCondor multi-GPU tutorial",
     "name cifar-convnet\n"
     "input 3 32 32\n"
     "conv2d conv1 out=48 kernel=3 padding=1\n"
     "relu\n"
     "conv2d conv2 out=96 kernel=3 padding=1\n"
     "relu\n"
     "maxpool2d kernel=2\n"
     "dropout p=0.25\n"
     "conv2d conv3 out=192 kernel=3 padding=1\n"
     "relu\n"
     "conv2d conv4 out=256 kernel=3 padding=1\n"
     "relu\n"
     "conv2d conv5 out=512 kernel=3 padding=1\n"
     "relu\n"
     "conv2d conv6 out=1024 kernel=3 padding=1\n"
     "relu\n"
     "maxpool2d kernel=2\n"
     "dropout p=0.25\n"
     "flatten\n"
     "linear fc1 out=2048\n"
     "relu\n"
     "linear fc2 out=64\n"
     "relu\n"
     "dropout p=0.25\n"
     "linear fc3 out=10\n"
     "loss cross-entropy\n"
     "normalize mean=0.4914,0.4822,0.4465 std=0.2023,0.1994,0.2010\n"
     "augment crop=4 flip=1\n"
     "defaults dataset=cifar10 optimizer=adam lr=0.001 batch=64 test-batch=1000\n"},
};

int pt_preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }
const pt_preset *pt_preset_at(int i) { return i >= 0 && i < pt_preset_count() ? &presets[i] : NULL; }

const pt_preset *pt_preset_find(const char *name) {
  for (int i = 0; i < pt_preset_count(); i++)
    if (!strcmp(presets[i].name, name)) return &presets[i];
  return NULL;
}

pt_status pt_preset_spec(const char *name, pt_model_spec *spec) {
  const pt_preset *p = pt_preset_find(name);
  if (!p) {
    char list[256] = "";
    for (int i = 0; i < pt_preset_count(); i++) {
      strcat(list, i ? ", " : "");
      strcat(list, presets[i].name);
    }
    return pt_fail(PT_ERR_ARG, "unknown model '%s' (expected one of: %s; or --model-file FILE)", name, list);
  }
  return pt_spec_parse(p->text, p->name, spec);
}
