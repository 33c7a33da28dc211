// dlscale models: the model zoo as a table (or JSON).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/torch_commands.h"
#include "libtorch/compute/dtype_name.h"
#include "core/error.h"
#include "core/text.h"
#include "core/text_table.h"
#include "libtorch/models/model.h"

namespace dlscale::cli {
namespace {

struct ModelsOptions {
  std::vector<std::string> names;  ///< empty = the whole zoo
  std::string task_file;           ///< the task of TorchScript models among the names
  bool tensors = false;            ///< also each parameter tensor's shape, dtype and bytes
  int64_t image_size = 0;
  int64_t num_classes = 0;
  bool json = false;
};

nlohmann::json facts_json(const models::ModelSpec& spec, const models::ModelFacts& f) {
  nlohmann::json j{{"name", spec.name},
                   {"family", spec.family},
                   {"task", f.task},
                   {"unit", f.unit.name},
                   {"items_per_sample", f.unit.items_per_sample},
                   {"parameters", f.parameters},
                   {"macs_per_sample", f.macs_per_sample},
                   {"forward_flops_per_sample", f.flops_per_sample()},
                   {"inputs", nlohmann::json::object()},
                   {"description", spec.description}};
  for (const auto& t : f.inputs) j["inputs"][t.name] = t.shape;
  if (!f.uncounted_layers.empty()) j["uncounted"] = f.uncounted_layers;
  if (spec.takes_flag("--image-size")) {
    j["input_shape"] = {f.channels, f.image_size, f.image_size};
    j["num_classes"] = f.num_classes;
    j["min_image_size"] = spec.min_image_size;
  }
  if (spec.takes_flag("--vocab")) {
    j["vocab"] = f.vocab;
    j["seq_len"] = f.seq_len;
  }
  if (spec.takes_flag("--hidden")) j["hidden"] = f.hidden;
  return j;
}

/// Each parameter tensor of `model`: name, shape, dtype and bytes, in the
/// order of parameters() (the order the strategies bucket them in).
nlohmann::json tensors_json(const models::Model& model) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : model.named_parameters()) {
    const torch::Tensor& t = p.value();
    list.push_back({{"name", p.key()},
                    {"shape", t.sizes().vec()},
                    {"dtype", dtype_name(t.scalar_type())},
                    {"bytes", t.numel() * static_cast<int64_t>(t.element_size())}});
  }
  return list;
}

void print_tensors(const std::string& model, const nlohmann::json& tensors) {
  TextTable table({"tensor", "shape", "dtype", "bytes"},
                  {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight});
  int64_t total = 0;
  for (const auto& t : tensors) {
    const std::string shape = models::shape_text(t["shape"].get<std::vector<int64_t>>());
    table.add_row({t["name"].get<std::string>(), shape.empty() ? "-" : shape,
                   t["dtype"].get<std::string>(), with_thousands(t["bytes"].get<int64_t>())});
    total += t["bytes"].get<int64_t>();
  }
  std::cout << fmt::format("\n{}: {} parameter tensor(s), {} bytes\n", model, tensors.size(),
                           with_thousands(total));
  table.print(std::cout);
}

void run_models(const ModelsOptions& o) {
  TextTable table({"model", "family", "params", "GFLOPs/sample", "input", "unit", "min size", "description"},
                  {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kLeft, Align::kLeft,
                   Align::kRight, Align::kLeft});
  nlohmann::json records = nlohmann::json::array();
  std::vector<const models::ModelSpec*> specs;
  for (const auto& name : o.names) {
    models::ModelOptions mo;
    mo.name = name;
    mo.task_file = o.task_file;
    mo.image_size = o.image_size;
    specs.push_back(&models::model_spec(mo));  // an unknown name or a bad module: one line, exit 2
  }
  if (o.names.empty()) {
    for (const auto& spec : models::model_specs()) specs.push_back(&spec);
  }
  for (const models::ModelSpec* listed : specs) {
    const models::ModelSpec& spec = *listed;
    const bool image = spec.takes_flag("--image-size");
    models::ModelOptions mo;
    if (image) {  // --image-size and --classes are the image models' (the others at their defaults)
      mo.image_size = o.image_size;
      mo.num_classes = o.num_classes;
    }
    const int64_t size = o.image_size ? o.image_size : spec.default_image_size;
    if (image && size < spec.min_image_size) {  // this listing shows the limit instead of failing
      table.add_row({spec.name, spec.family, "-", "-", fmt::format("{}x{}x{}", spec.channels, size, size), "-",
                     std::to_string(spec.min_image_size), "too small for this model"});
      records.push_back({{"name", spec.name}, {"error", "image size below minimum"},
                         {"min_image_size", spec.min_image_size}});
      continue;
    }
    const models::ModelOptions resolved = models::resolve_options(spec, mo);
    const std::shared_ptr<models::Model> net = spec.make(resolved);
    const models::ModelFacts f = models::measure_model(spec, resolved, *net);
    table.add_row({spec.name, spec.family, with_thousands(f.parameters),
                   fmt::format("{:.3f}", f.flops_per_sample() / 1e9), models::input_text(f.inputs),
                   f.unit.items_per_sample == 1 ? f.unit.name
                                                : fmt::format("{} ({}/sample)", f.unit.name, f.unit.items_per_sample),
                   image ? std::to_string(spec.min_image_size) : "-", spec.description});
    records.push_back(facts_json(spec, f));
    if (o.tensors) records.back()["tensors"] = tensors_json(*net);
  }
  if (o.json) {
    std::cout << dump_json(records, 2) << '\n';
  } else {
    table.print(std::cout);
    std::cout << "GFLOPs/sample: forward pass, 2 x multiply-accumulates of conv, FC, LSTM and attention layers "
                 "(embedding look-ups count none).\n";
    for (const auto& r : records) {
      if (r.contains("tensors")) print_tensors(r["name"].get<std::string>(), r["tensors"]);
    }
  }
}

}  // namespace

void add_models_command(CLI::App& app, const std::vector<std::string>&) {
  auto opts = std::make_shared<ModelsOptions>();
  CLI::App* cmd = app.add_subcommand("models", kModelsAbout);
  cmd->add_option("names", opts->names,
                  "Only these models, in this order (each is built and run once to count its FLOPs: "
                  "the whole zoo takes about 30 s on 2 cores, one model a second or two)");
  cmd->add_option("--image-size", opts->image_size,
                  "Image models: compute at this input height = width; 0 = each model's default")
      ->capture_default_str();
  cmd->add_option("--classes", opts->num_classes, "Image models: output classes; 0 = each model's default")
      ->capture_default_str();
  cmd->add_option("--task-file", opts->task_file,
                  "The task of the TorchScript models (PATH.pt) named: YAML (docs/models.md, "
                  "'Your own model'); without it they are image classifiers");
  cmd->add_flag("--tensors", opts->tensors,
                "Also list each parameter tensor (name, shape, dtype, bytes) in the order the "
                "strategies bucket them");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  cmd->callback([opts] { run_models(*opts); });
}

}  // namespace dlscale::cli
