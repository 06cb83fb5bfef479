#include "agent/stacks/stack_capture_plan.hpp"

#include <filesystem>

namespace ddprun::agent {

StackCapturePlan plan_stack_capture(const std::vector<StackTarget>& targets,
                                    const std::string& log_dir, const StackTools& tools,
                                    const StackCaptureOptions& options) {
  StackCapturePlan plan;
  plan.stacks_dir = (std::filesystem::path(log_dir) / "stacks").string();
  for (const StackTarget& target : targets) {
    TargetCapturePlan entry;
    entry.target = target;
    entry.output_path = (std::filesystem::path(plan.stacks_dir) /
                         ("rank" + std::to_string(target.global_rank) + ".txt"))
                            .string();
    const std::string pid = std::to_string(target.pid);
    if (options.python && tools.py_spy) {
      std::vector<std::string> argv{*tools.py_spy, "dump", "--pid", pid};
      argv.emplace_back(target.stopped ? "--nonblocking" : "--native");
      entry.commands.push_back(CaptureCommand{StackKind::kPython, argv, options.tool_timeout});
    }
    if (options.native && tools.eu_stack) {
      entry.commands.push_back(CaptureCommand{
          StackKind::kNative, {*tools.eu_stack, "-s", "-m", "-p", pid}, options.tool_timeout});
    } else if (options.native && tools.gdb) {
      entry.commands.push_back(CaptureCommand{StackKind::kNative,
                                              {*tools.gdb, "-p", pid, "-batch", "-nx", "-ex",
                                               "set pagination off", "-ex", "thread apply all bt"},
                                              options.tool_timeout});
    }
    plan.targets.push_back(std::move(entry));
  }
  return plan;
}

std::string stack_section_header(const CaptureCommand& command) {
  std::string line(kStackSectionMarker);
  line += command.kind == StackKind::kPython ? "python stacks:" : "native stacks:";
  for (const std::string& arg : command.argv) {
    line += ' ';
    line += arg.find(' ') == std::string::npos ? arg : "'" + arg + "'";
  }
  return line;
}

}  // namespace ddprun::agent
