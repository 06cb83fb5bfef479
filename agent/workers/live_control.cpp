#include "agent/workers/live_control.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ddprun::agent {

std::string live_control_running(const RoundInfo& round) {
  std::ostringstream text;
  text << "ddprun-live 1\n"
       << "generation " << round.round << "\n"
       << "state running\n"
       << "base_rank " << round.base_global_rank << "\n"
       << "world_size " << round.world_size << "\n"
       << "master_addr " << round.master_addr << "\n"
       << "master_port " << round.master_port << "\n"
       << "restart_count " << round.restart_count << "\n";
  return text.str();
}

std::string live_control_reforming(uint64_t generation) {
  return "ddprun-live 1\ngeneration " + std::to_string(generation) + "\nstate reforming\n";
}

void write_live_control(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << text;
    file.close();
    if (!file) {
      throw std::runtime_error("cannot write the live-recovery control file " + temporary + ": " +
                               std::strerror(errno));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot replace the live-recovery control file " + path + ": " +
                             std::strerror(errno));
  }
}

std::string live_joined_path(const std::string& control_path, int local_rank) {
  return control_path + ".joined." + std::to_string(local_rank);
}

bool worker_joined_live(const std::string& control_path, int local_rank, pid_t pid) {
  std::ifstream file(live_joined_path(control_path, local_rank));
  long long written = -1;
  return file >> written && written == static_cast<long long>(pid);
}

LiveKeepDecision decide_live_keep(const std::vector<LiveWorker>& workers) {
  if (workers.empty()) {
    return {false, "no worker runs here"};
  }
  for (const auto& worker : workers) {
    if (!worker.running) {
      return {false, "local rank " + std::to_string(worker.local_rank) + " has exited"};
    }
    if (!worker.joined) {
      return {false, "local rank " + std::to_string(worker.local_rank) +
                         " did not join the live-recovery protocol (no joined file with its pid)"};
    }
  }
  return {true, ""};
}

}  // namespace ddprun::agent
