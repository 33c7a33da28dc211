// dlscale models: the model zoo as a table (or JSON).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/text_table.h"
#include "models/model.h"

namespace dlscale::cli {
namespace {

struct ModelsOptions {
  int64_t image_size = 0;
  int64_t num_classes = 0;
  bool json = false;
};

void run_models(const ModelsOptions& o) {
  TextTable table({"model", "params", "GFLOPs/sample", "input", "min size", "description"},
                  {Align::kLeft, Align::kRight, Align::kRight, Align::kLeft, Align::kRight,
                   Align::kLeft});
  nlohmann::json records = nlohmann::json::array();
  for (const auto& spec : models::model_specs()) {
    models::ModelOptions mo;
    mo.image_size = o.image_size;
    mo.num_classes = o.num_classes;
    const int64_t size = o.image_size ? o.image_size : spec.default_image_size;
    if (size < spec.min_image_size) {  // this listing shows the limit instead of failing
      table.add_row({spec.name, "-", "-", fmt::format("{}x{}x{}", spec.channels, size, size),
                     std::to_string(spec.min_image_size), "too small for this model"});
      records.push_back({{"name", spec.name}, {"error", "image size below minimum"},
                         {"min_image_size", spec.min_image_size}});
      continue;
    }
    const models::ModelFacts f = models::describe_model(spec, mo);
    table.add_row({spec.name, with_thousands(f.parameters),
                   fmt::format("{:.3f}", f.flops_per_sample() / 1e9),
                   fmt::format("{}x{}x{}", f.channels, f.image_size, f.image_size),
                   std::to_string(spec.min_image_size), spec.description});
    records.push_back({{"name", spec.name},
                       {"parameters", f.parameters},
                       {"macs_per_sample", f.macs_per_sample},
                       {"forward_flops_per_sample", f.flops_per_sample()},
                       {"input_shape", {f.channels, f.image_size, f.image_size}},
                       {"num_classes", f.num_classes},
                       {"min_image_size", spec.min_image_size},
                       {"description", spec.description}});
  }
  if (o.json) {
    std::cout << records.dump(2) << '\n';
  } else {
    table.print(std::cout);
    std::cout << "GFLOPs/sample: forward pass, 2 x multiply-accumulates of conv and FC layers.\n";
  }
}

}  // namespace

void add_models_command(CLI::App& app) {
  auto opts = std::make_shared<ModelsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "models", "List the model zoo: parameters, forward GFLOPs per sample, default input size.");
  cmd->add_option("--image-size", opts->image_size,
                  "Compute at this input height = width; 0 = each model's default")
      ->capture_default_str();
  cmd->add_option("--classes", opts->num_classes, "Output classes; 0 = each model's default")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  cmd->callback([opts] { run_models(*opts); });
}

}  // namespace dlscale::cli
