#include "train_config.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <functional>
#include <map>
#include <sstream>

namespace ddprun::train {
namespace {

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) {
    return "a boolean";
  } else if constexpr (std::is_integral_v<T>) {
    return "an integer";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "a number";
  } else {
    return "a string";
  }
}

// Reads a scalar of type T; yaml-cpp would accept "1.5" as a string or 3 as a bool-ish value, so
// the checks here are explicit about what each key takes.
template <typename T>
T read_scalar(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) {
    throw ConfigError("configuration key '" + key + "' must be " + type_name<T>() + ", got a " +
                      (node.IsMap()        ? "mapping"
                       : node.IsSequence() ? "list"
                                           : "null"));
  }
  const std::string& text = node.Scalar();
  if constexpr (std::is_same_v<T, std::string>) {
    return text;
  } else {
    T value{};
    if (!YAML::convert<T>::decode(node, value)) {
      throw ConfigError("configuration key '" + key + "' must be " + type_name<T>() + ", got '" +
                        text + "'");
    }
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // yaml-cpp truncates "2.5" to 2 for integers on some versions; reject anything non-integral.
      if (text.find_first_of(".eE") != std::string::npos) {
        throw ConfigError("configuration key '" + key + "' must be an integer, got '" + text + "'");
      }
    }
    return value;
  }
}

using Setter = std::function<void(TrainConfig&, const YAML::Node&, const std::string&)>;

template <typename T, typename Section>
Setter field(Section TrainConfig::* section, T Section::* member) {
  return [section, member](TrainConfig& config, const YAML::Node& node, const std::string& key) {
    (config.*section).*member = read_scalar<T>(node, key);
  };
}

void set_precision(TrainConfig& config, const YAML::Node& node, const std::string& key) {
  const auto text = read_scalar<std::string>(node, key);
  const auto precision = parse_precision(text);
  if (!precision) {
    std::string expected;
    for (const auto& name : precision_names()) {
      expected += (expected.empty() ? "" : ", ") + name;
    }
    throw ConfigError("configuration key '" + key + "' must be one of " + expected + ", got '" +
                      text + "'");
  }
  config.trainer.precision = *precision;
}

void set_stop_after(TrainConfig& config, const YAML::Node& node, const std::string& key) {
  const auto text = read_scalar<std::string>(node, key);
  const auto colon = text.find(':');
  int64_t epoch = 0;
  int64_t step = -1;
  if (colon != std::string::npos) {
    const char* end = text.data() + text.size();
    const auto [epoch_end, epoch_error] = std::from_chars(text.data(), text.data() + colon, epoch);
    const auto [step_end, step_error] = std::from_chars(text.data() + colon + 1, end, step);
    if (epoch_error != std::errc() || epoch_end != text.data() + colon ||
        step_error != std::errc() || step_end != end) {
      epoch = 0;
    }
  }
  if (epoch < 1 || step < 0) {
    throw ConfigError("configuration key '" + key +
                      "' must be EPOCH:STEP (epoch 1 or more, step 0 or more), got '" + text + "'");
  }
  config.trainer.stop_after_epoch = epoch;
  config.trainer.stop_after_step = step;
}

// One table of every accepted key; unknown keys are errors so typos never pass silently.
const std::map<std::string, std::map<std::string, Setter>>& key_table() {
  static const std::map<std::string, std::map<std::string, Setter>> table = {
      {"data_config",
       {{"path", field(&TrainConfig::data, &DataConfig::path)},
        {"block_size", field(&TrainConfig::data, &DataConfig::block_size)},
        {"train_split", field(&TrainConfig::data, &DataConfig::train_split)},
        {"truncate", field(&TrainConfig::data, &DataConfig::truncate)}}},
      {"gpt_config",
       {{"n_layer", field(&TrainConfig::gpt, &GptConfig::n_layer)},
        {"n_head", field(&TrainConfig::gpt, &GptConfig::n_head)},
        {"n_embd", field(&TrainConfig::gpt, &GptConfig::n_embd)},
        {"embd_pdrop", field(&TrainConfig::gpt, &GptConfig::embd_pdrop)},
        {"resid_pdrop", field(&TrainConfig::gpt, &GptConfig::resid_pdrop)},
        {"attn_pdrop", field(&TrainConfig::gpt, &GptConfig::attn_pdrop)}}},
      {"trainer_config",
       {{"max_epochs", field(&TrainConfig::trainer, &TrainerConfig::max_epochs)},
        {"batch_size", field(&TrainConfig::trainer, &TrainerConfig::batch_size)},
        {"data_loader_workers", field(&TrainConfig::trainer, &TrainerConfig::data_loader_workers)},
        {"grad_norm_clip", field(&TrainConfig::trainer, &TrainerConfig::grad_norm_clip)},
        {"snapshot_path", field(&TrainConfig::trainer, &TrainerConfig::snapshot_path)},
        {"save_every", field(&TrainConfig::trainer, &TrainerConfig::save_every)},
        {"use_amp", field(&TrainConfig::trainer, &TrainerConfig::use_amp)},
        {"seed", field(&TrainConfig::trainer, &TrainerConfig::seed)},
        {"steps_per_epoch", field(&TrainConfig::trainer, &TrainerConfig::steps_per_epoch)},
        {"eval_batches", field(&TrainConfig::trainer, &TrainerConfig::eval_batches)},
        {"log_every", field(&TrainConfig::trainer, &TrainerConfig::log_every)},
        {"metrics_path", field(&TrainConfig::trainer, &TrainerConfig::metrics_path)},
        {"precision", set_precision},
        {"sample_tokens", field(&TrainConfig::trainer, &TrainerConfig::sample_tokens)},
        {"sample_every", field(&TrainConfig::trainer, &TrainerConfig::sample_every)},
        {"save_every_steps", field(&TrainConfig::trainer, &TrainerConfig::save_every_steps)},
        {"save_every_seconds", field(&TrainConfig::trainer, &TrainerConfig::save_every_seconds)},
        {"keep_snapshots", field(&TrainConfig::trainer, &TrainerConfig::keep_snapshots)},
        {"stop_after", set_stop_after}}},
      {"optimizer_config",
       {{"weight_decay", field(&TrainConfig::optimizer, &OptimizerConfig::weight_decay)},
        {"learning_rate", field(&TrainConfig::optimizer, &OptimizerConfig::learning_rate)}}},
  };
  return table;
}

void set_key(TrainConfig& config, const std::string& section, const std::string& key,
             const YAML::Node& value) {
  const auto& table = key_table();
  const auto section_it = table.find(section);
  if (section_it == table.end()) {
    throw ConfigError("unknown configuration section '" + section +
                      "' (expected data_config, gpt_config, trainer_config or optimizer_config)");
  }
  const auto key_it = section_it->second.find(key);
  if (key_it == section_it->second.end()) {
    throw ConfigError("unknown configuration key '" + section + "." + key + "'");
  }
  key_it->second(config, value, section + "." + key);
}

}  // namespace

std::vector<std::string> preset_names() {
  return {"default", "mingpt"};
}

TrainConfig preset(std::string_view name) {
  if (name == "default") {
    TrainConfig config;
    config.trainer.steps_per_epoch = 75;
    config.trainer.eval_batches = 8;
    config.optimizer.learning_rate = 3e-3;
    return config;
  }
  if (name == "mingpt") {
    // gpt2_train_cfg.yaml, except that the data is read from a local file (no HTTP here).
    TrainConfig config;
    config.data = DataConfig{"input.txt", 128, 0.9, 0.05};
    config.gpt = GptConfig{8, 8, 512, 0.1, 0.1, 0.1};
    config.trainer.max_epochs = 10;
    config.trainer.batch_size = 216;
    config.trainer.data_loader_workers = 4;
    config.trainer.grad_norm_clip = 1.0;
    config.trainer.snapshot_path = "gpt_snapshot.pt";
    config.trainer.save_every = 3;
    config.trainer.use_amp = true;
    config.trainer.log_every = 100;
    config.optimizer = OptimizerConfig{0.1, 3e-4};
    return config;
  }
  throw ConfigError("unknown preset '" + std::string(name) + "' (expected default or mingpt)");
}

TrainConfig apply_document(TrainConfig base, std::string_view text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& error) {
    throw ConfigError(std::string(source) + ": not valid YAML or JSON: " + error.what());
  }
  if (root.IsNull()) {
    return base;
  }
  if (!root.IsMap()) {
    throw ConfigError(std::string(source) + ": the top level must be a mapping of sections");
  }
  try {
    for (const auto& section : root) {
      const auto section_name = section.first.as<std::string>();
      if (section_name == "hydra" || section_name == "defaults") {
        continue;  // Hydra's own settings (run dir, defaults list) mean nothing here.
      }
      if (!section.second.IsMap()) {
        throw ConfigError("configuration section '" + section_name + "' must be a mapping");
      }
      for (const auto& entry : section.second) {
        set_key(base, section_name, entry.first.as<std::string>(), entry.second);
      }
    }
  } catch (const ConfigError& error) {
    throw ConfigError(std::string(source) + ": " + error.what());
  }
  return base;
}

TrainConfig config_from_file(std::string_view text, std::string_view source) {
  return apply_document(preset(kDefaultsUnderFile), text, source);
}

TrainConfig apply_override(TrainConfig base, std::string_view assignment) {
  const std::string text(assignment);
  const auto equals = text.find('=');
  const auto dot = text.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot > equals) {
    throw ConfigError("override '" + text + "' must look like section.key=value");
  }
  const std::string section = text.substr(0, dot);
  const std::string key = text.substr(dot + 1, equals - dot - 1);
  const std::string value = text.substr(equals + 1);
  YAML::Node node;
  try {
    node = YAML::Load(value);
  } catch (const YAML::Exception&) {
    node = YAML::Node(value);
  }
  if (node.IsNull() && !value.empty()) {
    node = YAML::Node(value);
  }
  if (value.empty()) {
    node = YAML::Node(std::string());
  }
  set_key(base, section, key, node);
  return base;
}

void validate(const TrainConfig& config) {
  auto require = [](bool ok, const std::string& message) {
    if (!ok) {
      throw ConfigError(message);
    }
  };
  const auto& d = config.data;
  const auto& g = config.gpt;
  const auto& t = config.trainer;
  const auto& o = config.optimizer;
  require(!d.path.empty(), "data_config.path must not be empty");
  require(d.block_size >= 1 && d.block_size <= 65536,
          "data_config.block_size must be between 1 and 65536");
  require(d.train_split > 0.0 && d.train_split < 1.0,
          "data_config.train_split must be strictly between 0 and 1");
  require(d.truncate > 0.0 && d.truncate <= 1.0, "data_config.truncate must be in (0, 1]");
  require(g.n_layer >= 1 && g.n_layer <= 256, "gpt_config.n_layer must be between 1 and 256");
  require(g.n_head >= 1 && g.n_head <= 1024, "gpt_config.n_head must be between 1 and 1024");
  require(g.n_embd >= 1 && g.n_embd <= 65536, "gpt_config.n_embd must be between 1 and 65536");
  if (g.n_embd % g.n_head != 0) {
    std::ostringstream message;
    message << "gpt_config.n_embd (" << g.n_embd << ") must be divisible by gpt_config.n_head ("
            << g.n_head << ")";
    throw ConfigError(message.str());
  }
  for (const auto& [name, p] :
       {std::pair{"embd_pdrop", g.embd_pdrop}, std::pair{"resid_pdrop", g.resid_pdrop},
        std::pair{"attn_pdrop", g.attn_pdrop}}) {
    require(p >= 0.0 && p < 1.0, std::string("gpt_config.") + name + " must be in [0, 1)");
  }
  require(t.max_epochs >= 1 && t.max_epochs <= 1000000,
          "trainer_config.max_epochs must be between 1 and 1000000");
  require(t.batch_size >= 1 && t.batch_size <= 1 << 20,
          "trainer_config.batch_size must be between 1 and 1048576");
  require(t.data_loader_workers >= 0, "trainer_config.data_loader_workers must be >= 0");
  require(t.grad_norm_clip > 0.0, "trainer_config.grad_norm_clip must be > 0");
  require(!t.snapshot_path.empty(), "trainer_config.snapshot_path must not be empty");
  require(t.save_every >= 1, "trainer_config.save_every must be >= 1");
  require(t.seed >= 0, "trainer_config.seed must be >= 0");
  require(t.steps_per_epoch >= 0, "trainer_config.steps_per_epoch must be >= 0");
  require(t.eval_batches >= 0, "trainer_config.eval_batches must be >= 0");
  require(t.log_every >= 1, "trainer_config.log_every must be >= 1");
  require(t.sample_tokens >= 0 && t.sample_tokens <= 100000,
          "trainer_config.sample_tokens must be between 0 and 100000");
  require(t.sample_every >= 0, "trainer_config.sample_every must be >= 0");
  require(t.save_every_steps >= 0, "trainer_config.save_every_steps must be >= 0 (0: off)");
  require(t.save_every_seconds >= 0.0 && t.save_every_seconds <= 1e9,
          "trainer_config.save_every_seconds must be between 0 (off) and 1e9");
  require(t.keep_snapshots >= 1 && t.keep_snapshots <= 1000,
          "trainer_config.keep_snapshots must be between 1 and 1000");
  require(o.learning_rate > 0.0 && o.learning_rate < 10.0,
          "optimizer_config.learning_rate must be in (0, 10)");
  require(o.weight_decay >= 0.0 && o.weight_decay < 10.0,
          "optimizer_config.weight_decay must be in [0, 10)");
}

}  // namespace ddprun::train
