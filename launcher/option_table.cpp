#include "launcher/option_table.hpp"

#include <array>
#include <cctype>

namespace ddprun::launcher {
namespace {

using enum OptionKind;
using enum OptionGroup;

// constexpr, so the table costs nothing at start-up (no static constructors).
constexpr std::array kOptions{
    // Nodes and rendezvous.
    OptionSpec{"nnodes", "", '\0', kValue, kNodes, true, "N|MIN:MAX",
               "Number of nodes, or the range an elastic job may run on. Default 1:1."},
    OptionSpec{"rdzv_backend", "rdzv-backend", '\0', kValue, kNodes, true, "static|c10d|etcd",
               "How nodes find each other: static (fixed --node-rank, store at "
               "--master-addr:--master-port), c10d (elastic, store at --rdzv-endpoint, hosted "
               "by one agent) or etcd (elastic on an etcd v3 cluster: survives the loss of any "
               "node; also etcd-v2, etcd-v3). Default static; c10d under Slurm."},
    OptionSpec{"rdzv_endpoint", "rdzv-endpoint", '\0', kList, kNodes, true, "HOST[:PORT]",
               "Rendezvous store address; IPv6 in brackets ([::1]:29400). c10d's default port "
               "is 29400. Under Slurm: the first node of the step. etcd: the members, "
               "HOST:PORT[,HOST:PORT...] (port 2379 by default)."},
    OptionSpec{"rdzv_id", "rdzv-id", '\0', kValue, kNodes, true, "ID",
               "Job id, the same on every node. Default none; JOB.STEP under Slurm."},
    OptionSpec{"rdzv_conf", "rdzv-conf", '\0', kList, kNodes, true, "K=V[,K=V...]",
               "Rendezvous settings, e.g. join_timeout=900,is_host=1. Keys: join_timeout (600), "
               "last_call_timeout (30), close_timeout (30), heartbeat_timeout (5), "
               "keep_alive_interval (5), read_timeout (60), all in seconds; "
               "keep_alive_max_attempt (3); is_host (1/0); store_type (tcp|file); "
               "secret_file (the job secret: a file only its owner may read; else "
               "DDPRUN_RDZV_SECRET_FILE or DDPRUN_RDZV_SECRET). etcd: "
               "protocol (http|https), cacert, cert, key, etcd_prefix (/); user, password_file (a "
               "file of mode 0600 holding user's password; else env DDPRUN_ETCD_PASSWORD), "
               "which need protocol=https unless insecure_auth=1 (etcd on loopback, a trusted "
               "private network)."},
    OptionSpec{"standalone", "", '\0', kFlag, kNodes, true, "",
               "Single-node job: c10d rendezvous on localhost at a free port with a fresh "
               "random id; overrides the other rendezvous options."},
    OptionSpec{"node_rank", "node-rank", '\0', kValue, kNodes, true, "RANK",
               "This node's rank for static rendezvous (0..nnodes-1). Default 0; "
               "SLURM_NODEID under Slurm."},
    OptionSpec{"master_addr", "master-addr", '\0', kValue, kNodes, true, "HOST",
               "Address of node 0 for static rendezvous without --rdzv-endpoint. "
               "Default 127.0.0.1."},
    OptionSpec{"master_port", "master-port", '\0', kValue, kNodes, true, "PORT",
               "Port of node 0 for static rendezvous without --rdzv-endpoint. Default 29500."},
    OptionSpec{"local_addr", "local-addr", '\0', kValue, kNodes, true, "HOST",
               "This node's address as the other nodes reach it. Default: the FQDN; "
               "SLURMD_NODENAME under Slurm."},

    // Workers.
    OptionSpec{"nproc_per_node", "nproc-per-node", '\0', kValue, kWorkers, true, "N|cpu|gpu|auto",
               "Workers on this node: a number, cpu (one per CPU), gpu (one per visible NVIDIA "
               "GPU, honouring CUDA_VISIBLE_DEVICES) or auto (gpu if there are GPUs, else cpu). "
               "Default 1; SLURM_GPUS_ON_NODE under Slurm."},
    OptionSpec{"role", "", '\0', kValue, kWorkers, true, "NAME",
               "Worker role name (ROLE_NAME, and the [role0]: log prefix). Default: default."},
    OptionSpec{"start_method", "start-method", '\0', kValue, kWorkers, true,
               "spawn|fork|forkserver",
               "Accepted for torchrun scripts and has no effect: every worker is a separate "
               "process started with fork and exec, so the three methods give the same worker. "
               "Default spawn."},
    OptionSpec{"numa_binding", "numa-binding", '\0', kValue, kWorkers, false,
               "node|socket|exclusive|core-complex",
               "Bind each worker to CPUs near its GPU (local rank N: visible GPU N), as torchrun: "
               "node (the GPU's NUMA node), socket (the GPU's socket), exclusive (the node's "
               "cores split between its GPUs), core-complex (one last-level cache per GPU). "
               "Linux with NVIDIA GPUs; read from sysfs, no numactl needed. Default off."},
    OptionSpec{"virtual_local_rank", "virtual-local-rank", '\0', kFlag, kWorkers, true, "",
               "Give every worker LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES=its own GPU: entry "
               "LOCAL_RANK of the agent's CUDA_VISIBLE_DEVICES, else the local rank."},

    // Restarts and signals.
    OptionSpec{"max_restarts", "max-restarts", '\0', kValue, kRestarts, true, "N",
               "How often this node restarts the worker group after a failure. Default 0."},
    OptionSpec{"recovery", "", '\0', kValue, kRestarts, true, "restart|live",
               "What a lost or joining node does to the others' workers. restart (torchrun's): "
               "every worker stops and the round starts fresh ones, which resume from the "
               "snapshot. live: the survivors keep running, build a process group for the new "
               "world and go on from the most advanced rank's state (the step in flight is "
               "applied everywhere or nowhere); a new node's workers take the state from a "
               "surviving rank, not from disk. ddprun-train takes part; another "
               "worker only if it follows README's live-recovery protocol, else it is restarted "
               "as with restart. Default restart."},
    OptionSpec{"monitor_interval", "monitor-interval", '\0', kValue, kRestarts, true, "SECONDS",
               "torchrun checks its workers this often. No effect in ddprun, accepted for "
               "torchrun's scripts: it sees each exit at once (SIGCHLD); after a first failure "
               "it holds the stop at most 0.1 s while other ranks may be failing with it, and "
               "reports every rank that failed on its own. Default 0.1."},
    OptionSpec{"signals_to_handle", "signals-to-handle", '\0', kList, kRestarts, true,
               "SIG[,SIG...]",
               "Signals forwarded to the workers before ddprun stops them. Default "
               "SIGTERM,SIGINT,SIGHUP,SIGQUIT; add SIGUSR1 for Slurm's --signal."},
    OptionSpec{"shutdown_timeout", "shutdown-timeout", '\0', kValue, kRestarts, true, "SECONDS",
               "Grace period between the stop signal and SIGKILL. Default "
               "$TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30."},

    // Logs.
    OptionSpec{"log_dir", "log-dir", '\0', kValue, kLogs, true, "DIR",
               "Base directory for worker log files (a fresh temporary directory by default; "
               "/dev/null turns files off)."},
    OptionSpec{"redirects", "", 'r', kList, kLogs, true, "0-3|RANK:0-3,...",
               "Send worker output to files in the log directory instead of the console: "
               "0 none, 1 stdout, 2 stderr, 3 both; or per local rank, e.g. 0:1,1:2. Without "
               "it workers write to ddprun's own stdout and stderr, untouched. Default 0."},
    OptionSpec{"tee", "", 't', kList, kLogs, true, "0-3|RANK:0-3,...",
               "Like --redirects, and ddprun also prints each line to its console with a "
               "[role0]: prefix ($TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE changes it); a "
               "partial line or progress bar shows at once. Default 0."},
    OptionSpec{"local_ranks_filter", "local-ranks-filter", '\0', kList, kLogs, true,
               "RANK[,RANK...]",
               "Show only these local ranks on the console; the others' console streams go to "
               "/dev/null (their log files are still written). Default: all."},
    OptionSpec{"duplicate_stdout_filters", "duplicate-stdout-filters", '\0', kList, kLogs, true,
               "TEXT[,TEXT...]",
               "Also copy the --tee'd stdout lines that contain any of these strings, "
               "prefixed, to <log_dir>/<run>/attempt_<n>/filtered_stdout.log (,, is a literal "
               "comma)."},
    OptionSpec{"duplicate_stderr_filters", "duplicate-stderr-filters", '\0', kList, kLogs, true,
               "TEXT[,TEXT...]", "The same for stderr, into filtered_stderr.log."},
    OptionSpec{"event_log_handler", "event-log-handler", '\0', kValue, kLogs, true, "NAME",
               "Where agent and rendezvous events go. Default null."},
    OptionSpec{"logs_specs", "logs-specs", '\0', kValue, kLogs, false, "default",
               "torchrun's log-layout plugin (a torchrun.logs_specs Python entry point). "
               "ddprun cannot load Python plugins: it accepts default, torchrun's own layout, "
               "which it writes, and refuses any other name before starting anything. Shape "
               "the logs with --log-dir, --redirects, --tee, --local-ranks-filter and the "
               "duplicate filters. Not read from PET_LOGS_SPECS (torchrun does not read it)."},

    // Entry point.
    OptionSpec{"module", "", 'm', kFlag, kEntry, true, "",
               "Run the entry point as a Python module: python -u -m MODULE ARGS."},
    OptionSpec{"no_python", "no-python", '\0', kFlag, kEntry, true, "",
               "Run the entry point as a program, without python -u in front."},
    OptionSpec{"run_path", "run-path", '\0', kFlag, kEntry, true, "",
               "Run the entry point as a Python script path (ignores -m and --no-python)."},

    // ddprun extras.
    OptionSpec{"print_config", "print-config", '\0', kFlag, kExtras, false, "",
               "Print the resolved launch configuration as JSON (with where each value came "
               "from) and exit without starting anything."},
    OptionSpec{"events_file", "events-file", '\0', kValue, kExtras, true, "PATH",
               "Append one JSON line per agent event (rendezvous, start, failure, restart) "
               "to PATH."},
    OptionSpec{"exit_barrier_timeout", "exit-barrier-timeout", '\0', kValue, kExtras, true,
               "SECONDS",
               "How long a node whose workers finished waits for the other nodes "
               "(torchrun has no option: always 300). Default 300."},
    OptionSpec{"watchdog_timeout", "watchdog-timeout", '\0', kValue, kExtras, true, "SECONDS",
               "Hang watchdog, opt-in per worker: a worker that has written a byte to fd "
               "$DDPRUN_HEARTBEAT_FD once (Python, per step: "
               "os.write(int(os.environ[\"DDPRUN_HEARTBEAT_FD\"]), b\".\"); `train` beats "
               "every step) and is then silent this long has the stacks of every node's workers "
               "captured (<log-dir>/<run>/attempt_<n>/stacks/ on each node with a watchdog on), "
               "is reported and SIGKILLed, and the group restarts within --max-restarts. "
               "Python frames need py-spy (next to the worker's python or on PATH); without "
               "it, Python workers get PYTHONFAULTHANDLER=1 (unless set) and a hung one gets "
               "SIGABRT first, so its traceback goes to its stderr (with --redirects or --tee, "
               "also into the stack file). "
               "Default off."},
    OptionSpec{"straggler_factor", "straggler-factor", '\0', kValue, kExtras, true, "F",
               "With --watchdog-timeout: report (never kill) a rank whose median step interval "
               "(time between its heartbeats) over --straggler-window is at least F times the "
               "job's median: one line on the round's node 0 naming rank and host, and a "
               "\"straggler\" event. In synchronous data-parallel training every rank waits "
               "for the slowest in each collective, so beat intervals even out; there a slow "
               "rank shows as a slow job, not as one rank. 0 turns it off. Default 2."},
    OptionSpec{"straggler_window", "straggler-window", '\0', kValue, kExtras, true, "SECONDS",
               "How far back --straggler-factor looks, and how often the nodes compare. "
               "Default 60."},
    OptionSpec{"health_check", "health-check", '\0', kValue, kExtras, true, "CMD",
               "Node check before each join (the first, and every re-join after a failure or "
               "membership change): CMD through /bin/sh -c must exit 0, with built-in checks: "
               "--log-dir, and for `train` its snapshot folder, writable with 64 MiB free; on a "
               "node with GPUs, every visible GPU answers nvidia-smi (when found). A node that "
               "fails does not join: it says why and checks again after "
               "--health-check-interval; the others form the round without it (MIN:MAX lets a "
               "spare take its place). `true` runs only the built-in checks. Default off."},
    OptionSpec{"health_check_timeout", "health-check-timeout", '\0', kValue, kExtras, true,
               "SECONDS",
               "How long --health-check's CMD (and the GPU query) may run before it is killed "
               "and the check fails. Default 60."},
    OptionSpec{"health_check_interval", "health-check-interval", '\0', kValue, kExtras, true,
               "SECONDS",
               "How long a node whose --health-check failed waits before it checks again. "
               "Default 30."},
    OptionSpec{"version", "", '\0', kFlag, kExtras, false, "", "Print the version and exit."},
    OptionSpec{"help", "", 'h', kFlag, kExtras, false, "", "Print this help and exit."},
};

}  // namespace

std::span<const OptionSpec> option_table() {
  return kOptions;
}

const OptionSpec* find_option(std::string_view dest) {
  for (const auto& spec : kOptions) {
    if (spec.dest == dest)
      return &spec;
  }
  return nullptr;
}

std::string pet_variable(std::string_view dest) {
  std::string name = "PET_";
  for (char c : dest)
    name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string display_name(const OptionSpec& spec) {
  return std::string("--").append(spec.dashed.empty() ? spec.dest : spec.dashed);
}

std::string_view group_title(OptionGroup group) {
  switch (group) {
    case kNodes:
      return "Nodes and rendezvous";
    case kWorkers:
      return "Workers";
    case kRestarts:
      return "Restarts and signals";
    case kLogs:
      return "Logs";
    case kEntry:
      return "Entry point";
    case kExtras:
      return "ddprun extras";
  }
  return "";
}

}  // namespace ddprun::launcher
