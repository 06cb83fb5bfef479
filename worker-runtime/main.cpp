// ddprun-train: `ddprun [launcher options] train [config] [section.key=value ...]`.
// Reads the torchrun worker environment, the configuration (a preset, a YAML/JSON file, and
// overrides), and trains; SIGTERM (or SIGINT) stops at the ranks' next vote with a snapshot.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include "error_file.hpp"
#include "heap_tuning.hpp"
#include "sampling.hpp"
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
    "       ddprun-train sample [CONFIG] [section.key=value ...] [--snapshot PATH]\n"
    "                    [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]\n"
    "                    [--greedy]\n"
    "  CONFIG   a YAML or JSON file in minGPT-ddp's gpt2_train_cfg.yaml layout, or a preset:\n"
    "           'default' (small, trains on 2 CPU cores in about a minute) or 'mingpt'\n"
    "           (minGPT-ddp's values; reads data_config.path, default input.txt)\n"
    "           A file means its settings; keys it omits take minGPT-ddp's defaults (the\n"
    "           'mingpt' preset). Without CONFIG the 'default' preset applies.\n"
    "  overrides, e.g. trainer_config.max_epochs=2 gpt_config.n_layer=4\n"
    "  --metrics PATH   append progress as JSON lines (trainer_config.metrics_path)\n"
    "  --check-config   check the configuration and data_config.path, then exit (0, or 2\n"
    "                   naming the problem); ddprun runs it once before the rendezvous\n"
    "  trainer_config.data_loader_workers is read and has no effect: batches are cut from\n"
    "           the token tensor in-process, with no loader to feed (minGPT-ddp's YAML sets 4)\n"
    "Run under ddprun/torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) or alone.\n"
    "  trainer_config.precision=auto|fp32|tf32|bf16|fp16   auto: use_amp's choice (bf16 on\n"
    "           GPUs of compute capability 8.0+ and CPUs with native bf16, fp16 with loss\n"
    "           scaling on older GPUs, fp32 otherwise); the start line says what runs and why\n"
    "SIGTERM: the ranks agree to stop at their next vote (after the current step, or within\n"
    "about half a second of short steps), write the snapshot, exit 143.\n"
    "Snapshots (trainer_config.snapshot_path) are minGPT-ddp's: either program resumes the\n"
    "other's. On resume the optimizer's learning rate and weight decay come from the snapshot.\n"
    "  trainer_config.save_every=E   a snapshot every E epochs (minGPT-ddp's; default 1)\n"
    "  trainer_config.save_every_steps=N, save_every_seconds=S   also inside epochs, every N\n"
    "           steps and/or S seconds (default 0: off); written in the background, the step\n"
    "           pays only for the copy to host memory\n"
    "  trainer_config.keep_snapshots=K   the newest at snapshot_path, K-1 older beside it as\n"
    "           PATH.1 (the one before), PATH.2, ... (default 2); a damaged newest snapshot is\n"
    "           named in a warning and the one before it resumed\n"
    "  trainer_config.stop_after=E:S   stop once step S of epoch E is done (S 0: once epoch\n"
    "           E-1 is), with a snapshot, and exit 0: the next run goes on from there, in any\n"
    "           world size (the snapshot records the data position)\n"
    "  trainer_config.sample_tokens=N   rank 0 prints N sampled tokens after the last epoch\n"
    "           (default 200, 0: none); trainer_config.sample_every=E also every E epochs\n"
    "sample: prints PROMPT (default: the corpus's first character) and N tokens (default 200)\n"
    "  the model of CONFIG writes, from --snapshot (default trainer_config.snapshot_path), as\n"
    "  minGPT's generate(): context cropped to block_size, logits / T (default 1), the top K\n"
    "  only (default 0: all), drawn with seed S (default 1337), or the argmax with --greedy.\n"
    "  The vocabulary is data_config.path's (with truncate), as in training.\n";

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
  // --check-config: check the configuration and the corpus's path, then exit (0, or 2 naming
  // the problem). ddprun runs this once before the rendezvous, so that a bad value is said once
  // instead of by every rank of every restart.
  bool check_only = false;
  std::optional<SampleRequest> sample;  // `ddprun-train sample ...`
};

// "--name VALUE" or "--name=VALUE" at args[k]: the value (advancing k past it), or nullopt when
// args[k] is another option.
std::optional<std::string> option_value(const std::vector<std::string>& args, size_t& k,
                                        const std::string& name) {
  const auto& arg = args[k];
  if (arg == name) {
    if (k + 1 >= args.size()) {
      throw ConfigError(name + " needs a value");
    }
    return args[++k];
  }
  if (arg.rfind(name + "=", 0) == 0) {
    return arg.substr(name.size() + 1);
  }
  return std::nullopt;
}

template <typename T>
T number_option(const std::string& name, const std::string& text, T low, T high) {
  std::istringstream in(text);
  T value{};
  if (!(in >> value) || !in.eof() || value < low || value > high) {
    std::ostringstream message;
    message << name << " must be a number from " << low << " to " << high << ", got '" << text
            << "'";
    throw ConfigError(message.str());
  }
  return value;
}

// The sampling options at args[k], into `request`; false when args[k] is none of them.
bool take_sample_option(const std::vector<std::string>& args, size_t& k, SampleRequest& request) {
  auto& g = request.generation;
  if (args[k] == "--greedy") {
    g.greedy = true;
    return true;
  }
  using Setter = std::function<void(const std::string&)>;
  const std::vector<std::pair<std::string, Setter>> valued{
      {"--snapshot", [&](const std::string& v) { request.snapshot_path = v; }},
      {"--prompt", [&](const std::string& v) { request.prompt = v; }},
      {"--tokens",
       [&](const std::string& v) { g.tokens = number_option<int64_t>("--tokens", v, 0, 1000000); }},
      {"--temperature",
       [&](const std::string& v) {
         g.temperature = number_option<double>("--temperature", v, 1e-6, 1e6);
       }},
      {"--top-k",
       [&](const std::string& v) { g.top_k = number_option<int64_t>("--top-k", v, 0, 1 << 20); }},
      {"--seed",
       [&](const std::string& v) {
         g.seed = number_option<uint64_t>("--seed", v, 0, uint64_t{1} << 62);
       }},
  };
  for (const auto& [name, set] : valued) {
    if (const auto value = option_value(args, k, name)) {
      set(*value);
      return true;
    }
  }
  return false;
}

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine parsed;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == "sample") {
    args.erase(args.begin());
    parsed.sample.emplace();
  }
  std::string source;
  std::vector<std::string> overrides;
  std::string metrics;
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& arg = args[k];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      return parsed;
    }
    if (arg == "--check-config") {
      parsed.check_only = true;
      continue;
    }
    if (parsed.sample && take_sample_option(args, k, *parsed.sample)) {
      continue;
    }
    if (auto v = option_value(args, k, "--metrics")) {
      metrics = *v;
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
  if (path != kEmbeddedCorpusPath && path.find("://") != std::string::npos) {
    throw ConfigError("data_config.path " + path +
                      " is a URL; download it and pass data_config.path=<local file>");
  }
  if (command.check_only) {
    if (path != kEmbeddedCorpusPath && !std::ifstream(path)) {
      throw ConfigError("data_config.path " + path + ": cannot be read");
    }
    return 0;
  }
  if (path == kEmbeddedCorpusPath) {
    inputs.corpus_text = std::string(embedded_corpus());
    inputs.corpus_name = "the embedded default corpus";
  } else {
    inputs.corpus_text = read_file(path, "data_config.path");
    inputs.corpus_name = path;
  }
  if (command.sample) {
    run_sampling(inputs.config, inputs.corpus_text, inputs.corpus_name, *command.sample, std::cout);
    return 0;
  }
  inputs.env = read_run_environment([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  });
  inputs.stop_requested = [&signals] { return signals.requested(); };
  const auto outcome = run_training(inputs, std::cout);
  return outcome == TrainOutcome::kStopped ? signals.exit_status() : 0;
}

// The message on stderr, and in torchrun's error file for the agent's failure table.
int fail(const std::string& message, int status) {
  std::cerr << "ddprun-train: " << message << '\n';
  write_error_file("ddprun-train: " + message);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_for_reuse();
  // As in a Python worker (CPython ignores SIGPIPE): a peer's connection that breaks while Gloo
  // writes to it is an error of that collective (live recovery goes on), not the process's end.
  std::signal(SIGPIPE, SIG_IGN);
  StopSignals signals;
  try {
    return run(argc, argv, signals);
  } catch (const ConfigError& error) {
    return fail(std::string("configuration error: ") + error.what(), kExitUsage);
  } catch (const SnapshotError& error) {
    return fail(error.what(), kExitError);
  } catch (const c10::Error& error) {
    return fail(std::string("error: ") + error.what_without_backtrace(), kExitError);
  } catch (const std::exception& error) {
    return fail(std::string("error: ") + error.what(), kExitError);
  }
}
