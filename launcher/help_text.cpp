#include "launcher/help_text.hpp"

#include <string_view>

#include "launcher/option_table.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kWidth = 100;
constexpr std::string_view kIndent = "      ";

constexpr std::string_view kIntroduction =
    "usage: ddprun [OPTIONS] ENTRY_POINT [ARGS...]\n"
    "\n"
    "Starts the workers of a distributed PyTorch job on this node and keeps them running:\n"
    "a drop-in replacement for torchrun with the same options, defaults, worker environment\n"
    "and exit codes. Run one ddprun per node; under Slurm, `srun ddprun train` needs no flags.\n"
    "\n"
    "Entry point: the first word that is not an option. It and everything after it belong to\n"
    "the workers; options after it are passed to them untouched.\n"
    "  script.py ARGS          python -u script.py ARGS ($PYTHON_EXEC, else python3 on PATH)\n"
    "  -m MODULE ARGS          python -u -m MODULE ARGS\n"
    "  --no-python PROG ARGS   PROG ARGS, run directly\n"
    "  train ARGS              the bundled LibTorch minGPT trainer (ddprun-train next to\n"
    "                          ddprun; a pip install builds it against the environment's\n"
    "                          torch on first use); `ddprun-train --help` lists its ARGS\n"
    "                          CONFIG file: its keys + minGPT-ddp's defaults; else preset default\n"
    "\n"
    "Options may be written --a-b or --a_b, --opt VALUE or --opt=VALUE, and may be\n"
    "abbreviated when unambiguous. Each option's default can be set with PET_<NAME>, the\n"
    "underscore name in capitals (PET_NPROC_PER_NODE=4); flags read PET_<NAME>=0 or 1.\n"
    "The command line wins over PET_*, which wins over Slurm's environment.\n";

constexpr std::string_view kClosing =
    "\n"
    "Environment variables (besides PET_*), as torchrun reads them:\n"
    "  TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE  --tee's line prefix, with ${role_name}, ${rank},\n"
    "                                         ${local_rank} (and ddprun's ${hostname})\n"
    "  TORCH_ELASTIC_SHUTDOWN_TIMEOUT         --shutdown-timeout's default, in seconds\n"
    "  TORCHELASTIC_ENABLE_FILE_TIMER=1       the file-timer watchdog: workers get\n"
    "                                         TORCHELASTIC_TIMER_FILE, its named pipe\n"
    "                                         ($TORCHELASTIC_TIMER_FILE, else a fresh\n"
    "                                         <tmp>/watchdog_timer_<uuid4> per start); an\n"
    "                                         expired scope: stacks captured, then its signal\n"
    "                                         (no py-spy: see --watchdog-timeout on Python)\n"
    "  USE_LIBUV                              passed to the workers: 0 makes the stores they\n"
    "                                         host use PyTorch's legacy TCPStore server\n"
    "  TORCHELASTIC_HEALTH_CHECK_PORT=N       ddprun serves the agent's health on 0.0.0.0:N\n"
    "                                         (torchrun starts no server): GET gives 200, or\n"
    "                                         503 once the agent's loop made no progress for\n"
    "                                         DDPRUN_HEALTH_CHECK_TIMEOUT s (torchrun's 60);\n"
    "                                         /metrics for Prometheus, /job/ a live page of\n"
    "                                         the job (its URL is printed at the start)\n"
    "  DDPRUN_JOB_PAGE_STACKS=1               the job page's stacks button works without a\n"
    "                                         job secret too (with one it always does)\n"
    "  TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=S\n"
    "                                         after the stop's SIGKILL, ddprun waits at most S\n"
    "                                         seconds (default 60, also when empty or 0) for\n"
    "                                         each worker to be reaped; one still there (D\n"
    "                                         state: wedged on a GPU or NIC) is named,\n"
    "                                         abandoned, never signalled again, and the job\n"
    "                                         restarts or exits (torchrun reads it for its\n"
    "                                         own D-state health check)\n"
    "  DDPRUN_RDZV_SECRET_FILE=PATH           the job secret (ddprun's own; torchrun has none):\n"
    "                                         a file only its owner may read (chmod 600);\n"
    "                                         --rdzv-conf secret_file=PATH wins over it\n"
    "  DDPRUN_RDZV_SECRET=S                   the job secret itself, for schedulers that pass\n"
    "                                         it so (slurm/mingpt.sbatch and\n"
    "                                         mingpt-requeue.sbatch make one per job). With a\n"
    "                                         secret, c10d/static agents prove it to the store\n"
    "                                         (HMAC challenge; it never crosses the wire) and\n"
    "                                         the store serves the agents' keys only to them.\n"
    "                                         At least 16 bytes: head -c 32 /dev/urandom |\n"
    "                                         base64. No child of ddprun sees it (nor\n"
    "                                         DDPRUN_ETCD_PASSWORD)\n"
    "  TORCHELASTIC_ERROR_FILE                ddprun copies the root cause's error file here\n"
    "  PYTHON_EXEC                            the Python that runs scripts and -m modules\n"
    "  CUDA_VISIBLE_DEVICES                   the GPUs of --nproc-per-node gpu,\n"
    "                                         --virtual-local-rank and --numa-binding\n"
    "\n"
    "Exit status:\n"
    "  0      every worker finished successfully\n"
    "  1      a worker failed (after --max-restarts restarts), or the rendezvous failed\n"
    "         (timeout, closed, store unreachable)\n"
    "  2      the command line was wrong; nothing was started\n"
    "  128+N  ddprun was stopped by signal N, which it forwarded to the workers (143 for\n"
    "         SIGTERM). torchrun exits 1 here; ddprun differs on purpose, so that a requeue\n"
    "         wrapper can tell \"stopped\" from \"failed\".\n"
    "\n"
    "Examples:\n"
    "  ddprun --standalone --nproc-per-node 2 train\n"
    "  ddprun --nnodes 2 --nproc-per-node gpu --rdzv-backend c10d --rdzv-endpoint node1:29400 \\\n"
    "         --rdzv-id job42 train.py --epochs 3\n"
    "  srun --nodes 2 --ntasks-per-node 1 ddprun train\n"
    "  ddprun --print-config --nnodes 1:4 -m mypkg.train\n"
    "  ddprun stacks --rdzv-backend c10d --rdzv-endpoint node1:29400 --rdzv-id job42\n"
    "\n"
    "`ddprun stacks --help`: every rank's stacks of a running job, on demand.\n";

constexpr std::string_view kStacksHelp =
    "usage: ddprun stacks --rdzv-backend B --rdzv-endpoint HOST:PORT --rdzv-id ID [OPTIONS]\n"
    "\n"
    "Asks every node of a running job for its workers' stacks, from any machine that reaches\n"
    "the job's rendezvous, and prints where each node wrote them. Each agent captures them as\n"
    "a hang does (py-spy for Python frames, then eu-stack or gdb; bounded by 10 s per node),\n"
    "without signalling anyone: the job goes on. The stacks land next to the workers' logs\n"
    "(<log dir>/<run id>/attempt_<n>/stacks*/rank<R>.txt, or a temporary folder without\n"
    "--log-dir) on each node. Give the job's own rendezvous options (--rdzv-backend,\n"
    "--rdzv-endpoint, --rdzv-id, --rdzv-conf for etcd's TLS and login, or "
    "--master-addr/--master-port\n"
    "for static); PET_* and Slurm's environment count as for a launch. A --standalone job's\n"
    "rendezvous is private to its agent and cannot be asked.\n"
    "\n"
    "Exit status: 0 when every node of the running round answered within 30 s, 1 otherwise\n"
    "(the output names the nodes that did not), 2 for a wrong command line.\n";

void append_wrapped(std::string& out, std::string_view text, std::string_view indent = kIndent) {
  std::size_t column = 0;
  bool line_start = true;
  while (!text.empty()) {
    const auto space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    if (line_start) {
      out += indent;
      column = indent.size();
      line_start = false;
    } else if (column + 1 + word.size() > kWidth) {
      out += '\n';
      out += indent;
      column = indent.size();
    } else {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    if (space == std::string_view::npos)
      break;
    text.remove_prefix(space + 1);
  }
  out += '\n';
}

std::string option_heading(const OptionSpec& spec) {
  std::string heading = "  ";
  if (spec.short_name != '\0')
    heading.append(1, '-').append(1, spec.short_name).append(", ");
  if (!spec.dashed.empty())
    heading.append("--").append(spec.dashed).append(", ");
  heading.append("--").append(spec.dest);
  if (!spec.value_name.empty())
    heading.append(1, ' ').append(spec.value_name);
  return heading;
}

// The options of kind kList, named from the table, and what quotes around their values do.
std::string quoting_paragraph() {
  std::string names;
  for (const auto& spec : option_table()) {
    if (spec.kind == OptionKind::kList)
      names.append(names.empty() ? "" : ", ").append(display_name(spec));
  }
  return "A list or mapping value (" + names +
         ") wrapped whole in quotes that no shell removed, as from YAML or Python's "
         "subprocess (--rdzv-conf \"'join_timeout=5,timeout=5'\"), is read without them, "
         "on the command line and in PET_*.";
}

}  // namespace

std::string stacks_help_text() {
  return std::string(kStacksHelp);
}

std::string help_text() {
  std::string out(kIntroduction);
  append_wrapped(out, quoting_paragraph(), "");
  for (const OptionGroup group :
       {OptionGroup::kNodes, OptionGroup::kWorkers, OptionGroup::kRestarts, OptionGroup::kLogs,
        OptionGroup::kEntry, OptionGroup::kExtras}) {
    out += "\n";
    out += group_title(group);
    out += ":\n";
    for (const auto& spec : option_table()) {
      if (spec.group != group)
        continue;
      out += option_heading(spec);
      out += '\n';
      append_wrapped(out, spec.help);
    }
  }
  out += kClosing;
  return out;
}

}  // namespace ddprun::launcher
