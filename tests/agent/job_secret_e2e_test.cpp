// The job secret end to end with the real ddprun: two agents that share DDPRUN_RDZV_SECRET form
// a c10d job on loopback and finish; a third agent with a wrong secret, and a raw client that
// tries to SET junk into the job's keys without one, are refused while the job runs on.

#include <catch2/catch.hpp>

#include "e2e_support.hpp"
#include "rendezvous/store/wire_codec.hpp"
#include "rendezvous/store/wire_protocol.hpp"
#include "tests/rendezvous/raw_connection.hpp"
#include "tests/rendezvous/secret_file.hpp"
#include "tests/rendezvous/store_client.hpp"

using namespace ddprun::agent::e2e;
using ddprun::rendezvous::store::testing::RawConnection;
using ddprun::rendezvous::store::testing::SecretFile;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "e2e-job-secret-0123456789abcdef";
const std::string kRunId = "secret-e2e";

// Node `node` (127.0.0.<node>) of a 2-node c10d job whose store node 2 hosts. The worker says
// it started (and what it sees of the secret), then waits for $DIR/go.
std::vector<std::string> agent_argv(uint16_t port, int node) {
  const std::string script =
      "echo \"started ${DDPRUN_RDZV_SECRET:-without the secret}\" >> \"$DIR/started\"; while [ ! "
      "-e \"$DIR/go\" ]; do sleep 0.05; done";
  std::vector<std::string> argv = two_node_c10d_agent(port, node, kRunId, 1);
  argv.insert(argv.end(), {"--no_python", "/bin/sh", "-c", script});
  return argv;
}

std::map<std::string, std::string> environment(const TempDir& dir, const std::string& secret) {
  std::map<std::string, std::string> env{{"DIR", dir.path()}, {"OMP_NUM_THREADS", "1"}};
  if (!secret.empty()) {
    env["DDPRUN_RDZV_SECRET"] = secret;
  }
  return env;
}

std::string set_request(const std::string& key, const std::string& value) {
  namespace store = ddprun::rendezvous::store;
  namespace wire = ddprun::rendezvous::wire;
  std::string request;
  wire::append_u8(request, 0x00);  // VALIDATE
  wire::append_u32(request, store::kValidationMagic);
  wire::append_u8(request,
                  *store::opcode_for_command(store::WireGeneration::g2, store::Command::set));
  wire::append_bytes(request, key);
  wire::append_bytes(request, value);
  return request;
}

}  // namespace

TEST_CASE("a job with a secret forms and finishes; a wrong secret and a raw client are refused",
          "[job_secret]") {
  TempDir dir;
  const uint16_t port = free_port("127.0.0.2");
  Process host(agent_argv(port, 2), dir / "agent-2", environment(dir, kSecret));
  Process peer(agent_argv(port, 3), dir / "agent-3", environment(dir, kSecret));
  REQUIRE(wait_for_lines(dir / "started", 2, 60s));

  // A third agent with a wrong secret: refused at once, naming the rendezvous.
  Process intruder(agent_argv(port, 4), dir / "agent-4",
                   environment(dir, "a-wrong-job-secret-0123456789"));
  const auto intruder_status = intruder.wait_exit(30s);
  INFO(intruder.output());
  CHECK(intruder_status == 1);
  CHECK(intruder.output().find("does not know the job secret") != std::string::npos);
  CHECK(intruder.output().find("rendezvous '" + kRunId + "'") != std::string::npos);

  // A raw client without the secret that writes into the job's keys is cut off.
  RawConnection raw(port, "127.0.0.2");
  raw.send(set_request("ddprun/rdzv/" + kRunId + "/round", "junk"));
  CHECK(raw.closed_within(10000ms));

  write_file(dir / "go", "");
  const auto host_status = host.wait_exit(60s);
  const auto peer_status = peer.wait_exit(60s);
  INFO(host.output());
  INFO(peer.output());
  CHECK(host_status == 0);
  CHECK(peer_status == 0);
  CHECK(host.output().find("job secret from the environment (DDPRUN_RDZV_SECRET)") !=
        std::string::npos);
  CHECK(host.output().find(kSecret) == std::string::npos);
  CHECK(peer.output().find(kSecret) == std::string::npos);
  // The agents used the secret; their workers never got it.
  CHECK(read_file(dir / "started") == "started without the secret\nstarted without the secret\n");
}

TEST_CASE("an agent without the secret is refused by a job that has one", "[job_secret]") {
  TempDir dir;
  const uint16_t port = free_port("127.0.0.2");
  Process host(agent_argv(port, 2), dir / "agent-2", environment(dir, kSecret));
  Process outsider(agent_argv(port, 3), dir / "agent-3", environment(dir, ""));
  const auto outsider_status = outsider.wait_exit(60s);
  INFO(outsider.output());
  CHECK(outsider_status == 1);
  CHECK(outsider.output().find("open rendezvous (unauthenticated") != std::string::npos);
  CHECK(outsider.output().find("may have a job secret, which this agent lacks") !=
        std::string::npos);
  CHECK(outsider.output().find("rendezvous '" + kRunId + "'") != std::string::npos);
  host.signal(SIGTERM);
  CHECK(host.wait_exit(60s).has_value());
}

TEST_CASE("without a secret the start line says the rendezvous is open", "[job_secret]") {
  TempDir dir;
  Process agent({ddprun_binary(), "--standalone", "--nproc_per_node", "1", "--no_python", "true"},
                dir / "agent", environment(dir, ""));
  CHECK(agent.wait_exit(60s) == 0);
  INFO(agent.output());
  CHECK(agent.output().find("; open rendezvous (unauthenticated: no job secret)") !=
        std::string::npos);
}

TEST_CASE("secret files readable by others and empty secrets are usage errors", "[job_secret]") {
  TempDir dir;
  const SecretFile loose("a-loose-job-secret-0123456789\n", 0644);
  Process agent({ddprun_binary(), "--standalone", "--rdzv_conf", "secret_file=" + loose.path(),
                 "--no_python", "true"},
                dir / "loose", environment(dir, ""));
  CHECK(agent.wait_exit(30s) == 2);
  INFO(agent.output());
  CHECK(agent.output().find(loose.path()) != std::string::npos);
  CHECK(agent.output().find("mode 0644") != std::string::npos);

  Process empty({ddprun_binary(), "--standalone", "--no_python", "true"}, dir / "empty",
                {{"DDPRUN_RDZV_SECRET", ""}});
  CHECK(empty.wait_exit(30s) == 2);
  CHECK(empty.output().find("DDPRUN_RDZV_SECRET: the secret is empty") != std::string::npos);

  const SecretFile tight("s3cret-value-0123456789\n", 0600);
  Process printed({ddprun_binary(), "--print-config", "--standalone", "--rdzv_conf",
                   "secret_file=" + tight.path(), "--no_python", "true"},
                  dir / "printed", environment(dir, ""));
  CHECK(printed.wait_exit(30s) == 0);
  INFO(printed.output());
  CHECK(printed.output().find("s3cret-value-0123456789") == std::string::npos);
  CHECK(printed.output().find("set, from file " + tight.path()) != std::string::npos);
}

TEST_CASE("a secret of 15 bytes is refused, one of 16 accepted; trailing blanks do not count",
          "[job_secret]") {
  TempDir dir;
  const auto print_config = [&](const std::string& name, const std::string& secret_text) {
    const SecretFile file(secret_text, 0600);
    Process ddprun({ddprun_binary(), "--print-config", "--standalone", "--rdzv_conf",
                    "secret_file=" + file.path(), "--no_python", "true"},
                   dir / name, environment(dir, ""));
    const auto status = ddprun.wait_exit(30s);
    return std::pair{status, ddprun.output()};
  };
  const auto [weak_status, weak] = print_config("weak", "0123456789abcde \t\r\n");
  INFO(weak);
  CHECK(weak_status == 2);
  CHECK(weak.find("ddprun: error: --rdzv_conf secret_file ") != std::string::npos);
  CHECK(weak.find("the secret is 15 bytes long") != std::string::npos);
  CHECK(weak.find("head -c 32 /dev/urandom | base64") != std::string::npos);

  const auto [enough_status, enough] = print_config("enough", "0123456789abcdef\n");
  INFO(enough);
  CHECK(enough_status == 0);
  CHECK(enough.find("\"rdzv_secret\": \"set, from file ") != std::string::npos);

  Process weak_variable({ddprun_binary(), "--standalone", "--no_python", "true"},
                        dir / "weak-variable", {{"DDPRUN_RDZV_SECRET", "0123456789abcde"}});
  CHECK(weak_variable.wait_exit(30s) == 2);
  CHECK(weak_variable.output().find("DDPRUN_RDZV_SECRET: the secret is 15 bytes long") !=
        std::string::npos);
}
