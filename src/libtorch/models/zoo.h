#pragma once
// Specs of each model family; collected into the registry by model.cpp.
#include <vector>

#include "libtorch/models/model.h"

namespace dlscale::models {

ModelSpec lenet_spec();
ModelSpec tinycnn_spec();
ModelSpec alexnet_spec();
std::vector<ModelSpec> vgg_specs();
std::vector<ModelSpec> resnet_specs();
ModelSpec googlenet_spec();
ModelSpec inception3_spec();
std::vector<ModelSpec> transformer_specs();
ModelSpec gnmt_spec();
ModelSpec ncf_spec();
ModelSpec ssd300_spec();
ModelSpec maskrcnn_spec();

}  // namespace dlscale::models
