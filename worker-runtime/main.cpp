// ddprun-train: `ddprun [launcher options] train [config] [section.key=value ...]`.
// Reads the torchrun worker environment, the configuration (a preset, a YAML/JSON file, and
// overrides), and trains; SIGTERM (or SIGINT) stops at the ranks' next vote with a snapshot.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "heap_tuning.hpp"
#include "snapshot_io.hpp"
#include "trainer.hpp"

namespace ddprun::train {
std::string_view embedded_corpus();  // embedded_corpus.cpp, generated from data/
}

namespace {

using namespace ddprun::train;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

const char* const kUsage =
    "usage: ddprun-train [CONFIG] [section.key=value ...] [--metrics PATH]\n"
    "  CONFIG   a YAML or JSON file in minGPT-ddp's gpt2_train_cfg.yaml layout, or a preset:\n"
    "           'default' (small, trains on 2 CPU cores in about a minute) or 'mingpt'\n"
    "           (minGPT-ddp's values; reads data_config.path, default input.txt)\n"
    "           A file means its settings; keys it omits take minGPT-ddp's defaults (the\n"
    "           'mingpt' preset). Without CONFIG the 'default' preset applies.\n"
    "  overrides, e.g. trainer_config.max_epochs=2 gpt_config.n_layer=4\n"
    "  --metrics PATH   append progress as JSON lines (trainer_config.metrics_path)\n"
    "Run under ddprun/torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) or alone.\n"
    "  trainer_config.precision=auto|fp32|tf32|bf16|fp16   auto: use_amp's choice (bf16 on\n"
    "           GPUs of compute capability 8.0+ and CPUs with native bf16, fp16 with loss\n"
    "           scaling on older GPUs, fp32 otherwise); the start line says what runs and why\n"
    "SIGTERM: the ranks agree to stop at their next vote (after the current step, or within\n"
    "about half a second of short steps), write the snapshot, exit 143.\n"
    "Snapshots (trainer_config.snapshot_path) are minGPT-ddp's: either program resumes the\n"
    "other's. On resume the optimizer's learning rate and weight decay come from the snapshot.\n";

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(
        what + " " + path + " cannot be read: " +
        (std::filesystem::exists(path) ? "permission denied or not a file" : "no such file"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct CommandLine {
  TrainConfig config;
  bool help = false;
};

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine parsed;
  std::string source;
  std::vector<std::string> overrides;
  std::string metrics;
  for (int k = 1; k < argc; ++k) {
    const std::string arg = argv[k];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      return parsed;
    }
    if (arg == "--metrics" || arg.rfind("--metrics=", 0) == 0) {
      if (arg == "--metrics") {
        if (k + 1 >= argc) {
          throw ConfigError("--metrics needs a path");
        }
        metrics = argv[++k];
      } else {
        metrics = arg.substr(10);
      }
    } else if (arg.rfind("--", 0) == 0) {
      throw ConfigError("unknown option " + arg + " (see --help)");
    } else if (arg.find('=') != std::string::npos) {
      overrides.push_back(arg);
    } else if (source.empty()) {
      source = arg;
    } else {
      throw ConfigError("more than one configuration given: " + source + " and " + arg);
    }
  }
  const auto names = preset_names();
  if (source.empty()) {
    parsed.config = preset(kPresetWithoutFile);
  } else if (std::find(names.begin(), names.end(), source) != names.end() &&
             !std::filesystem::exists(source)) {
    parsed.config = preset(source);
  } else {
    parsed.config = config_from_file(read_file(source, "configuration file"), source);
  }
  for (const auto& assignment : overrides) {
    parsed.config = apply_override(parsed.config, assignment);
  }
  if (!metrics.empty()) {
    parsed.config.trainer.metrics_path = metrics;
  }
  validate(parsed.config);
  return parsed;
}

// SIGTERM/SIGINT are blocked in every thread (before LibTorch or Gloo start any) and read from a
// signalfd between steps, so no handler and no global flag are needed.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    fd_ = signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
  }
  ~StopSignals() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() {
    signalfd_siginfo info{};
    while (fd_ >= 0 && ::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      received_ = static_cast<int>(info.ssi_signo);
    }
    return received_ != 0;
  }
  int exit_status() const { return 128 + (received_ != 0 ? received_ : SIGTERM); }

 private:
  sigset_t set_{};
  int fd_ = -1;
  int received_ = 0;
};

int run(int argc, char** argv, StopSignals& signals) {
  const auto command = parse_command_line(argc, argv);
  if (command.help) {
    std::cout << kUsage;
    return 0;
  }
  TrainerInputs inputs;
  inputs.config = command.config;
  const auto& path = inputs.config.data.path;
  if (path == kEmbeddedCorpusPath) {
    inputs.corpus_text = std::string(embedded_corpus());
    inputs.corpus_name = "the embedded default corpus";
  } else {
    if (path.find("://") != std::string::npos) {
      throw ConfigError("data_config.path " + path +
                        " is a URL; download it and pass data_config.path=<local file>");
    }
    inputs.corpus_text = read_file(path, "data_config.path");
    inputs.corpus_name = path;
  }
  inputs.env = read_run_environment([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  });
  inputs.stop_requested = [&signals] { return signals.requested(); };
  const auto outcome = run_training(inputs, std::cout);
  return outcome == TrainOutcome::kStopped ? signals.exit_status() : 0;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_for_reuse();
  StopSignals signals;
  try {
    return run(argc, argv, signals);
  } catch (const ConfigError& error) {
    std::cerr << "ddprun-train: configuration error: " << error.what() << '\n';
    return kExitUsage;
  } catch (const SnapshotError& error) {
    std::cerr << "ddprun-train: " << error.what() << '\n';
    return kExitError;
  } catch (const c10::Error& error) {
    std::cerr << "ddprun-train: error: " << error.what_without_backtrace() << '\n';
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "ddprun-train: error: " << error.what() << '\n';
    return kExitError;
  }
}
