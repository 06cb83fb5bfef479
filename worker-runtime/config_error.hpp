#pragma once
// The one error type of the trainer's configuration (train_config, precision, the corpus): the
// message names the key at fault.

#include <stdexcept>

namespace ddprun::train {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ddprun::train
