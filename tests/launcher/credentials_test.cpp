// The credentials in the launcher's hands: taken out of the process's environment (zeroed where
// they lay), wiped in the launcher's copies, read from files without stray copies; and etcd's
// user refused over plain http unless insecure_auth=1 says so.

#include "launcher/credentials.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/key_material.hpp"
#include "launcher/etcd_password.hpp"
#include "launcher/usage_error.hpp"
#include "launcher_test_support.hpp"

using namespace ddprun::launcher;
using namespace ddprun::launcher::testing;

namespace {

// The environment entry "NAME=..." as it lies in memory, or nullptr.
char* environment_entry(const std::string& name) {
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::string_view(*entry).starts_with(name + "="))
      return *entry;
  }
  return nullptr;
}

// A file of mode 0600 in a fresh folder, both removed with it.
class PrivateFile {
 public:
  explicit PrivateFile(const std::string& contents) {
    char pattern[] = "/tmp/ddprun-credentials-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    path_ = dir_ + "/key";
    std::ofstream(path_) << contents;
    std::filesystem::permissions(
        path_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  ~PrivateFile() { std::filesystem::remove_all(dir_); }
  PrivateFile(const PrivateFile&) = delete;
  PrivateFile& operator=(const PrivateFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

const std::vector<std::string> kEtcdJob = {"--rdzv_backend", "etcd", "--rdzv_endpoint",
                                           "127.0.0.1:2379", "--rdzv_conf"};

std::vector<std::string> etcd_job(const std::string& rdzv_conf) {
  std::vector<std::string> args = kEtcdJob;
  args.insert(args.end(), {rdzv_conf, "s.py"});
  return args;
}

}  // namespace

TEST_CASE("the credentials leave the process's environment, zeroed where they lay") {
  ::setenv("DDPRUN_RDZV_SECRET", "process-env-secret-0123456789", 1);
  ::setenv("DDPRUN_ETCD_PASSWORD", "process-env-password", 1);
  ::setenv("DDPRUN_RDZV_SECRET_FILE", "/run/job.key", 1);
  char* secret_entry = environment_entry("DDPRUN_RDZV_SECRET");
  REQUIRE(secret_entry != nullptr);
  const std::size_t secret_entry_size = std::string_view(secret_entry).size();

  take_credentials_out_of_process_environment();
  CHECK(std::getenv("DDPRUN_RDZV_SECRET") == nullptr);
  CHECK(std::getenv("DDPRUN_ETCD_PASSWORD") == nullptr);
  // A path is no secret: it stays, for the children to read the file if they may.
  CHECK(std::getenv("DDPRUN_RDZV_SECRET_FILE") == std::string("/run/job.key"));
  // The bytes the entry held (setenv's copy stays allocated) are zero after "NAME=".
  const std::string_view name = "DDPRUN_RDZV_SECRET=";
  CHECK(std::string_view(secret_entry, name.size()) == name);
  CHECK(std::all_of(secret_entry + name.size(), secret_entry + secret_entry_size,
                    [](char c) { return c == '\0'; }));
  ::unsetenv("DDPRUN_RDZV_SECRET_FILE");
}

TEST_CASE("the launcher's copies of the credentials are wiped once used") {
  Environment env{{"DDPRUN_RDZV_SECRET", "copied-secret-0123456789"},
                  {"DDPRUN_ETCD_PASSWORD", "copied-password"},
                  {"PATH", "/bin"}};
  auto resolved = resolve({"--rdzv_conf", "user=ddprun,insecure_auth=1", "--rdzv_backend", "etcd",
                           "--rdzv_endpoint", "127.0.0.1:2379", "s.py"},
                          env);
  load_etcd_password(resolved.config, env);
  REQUIRE(resolved.config.rdzv_secret);
  CHECK(resolved.config.rdzv_secret->value == "copied-secret-0123456789");
  CHECK(resolved.config.etcd->auth.password == "copied-password");
  CHECK(holds_credentials(resolved.config));

  wipe_credentials(env);
  CHECK(env == Environment{{"PATH", "/bin"}});
  wipe_credentials(resolved.config);
  CHECK(resolved.config.rdzv_secret->value.empty());
  CHECK(resolved.config.etcd->auth.password.empty());
  CHECK_FALSE(holds_credentials(resolved.config));
  CHECK_FALSE(holds_credentials(resolve({"s.py"}).config));
}

TEST_CASE("a key file is read whole, up to its bound") {
  const PrivateFile file("0123456789");
  const auto read = [&](std::size_t max_bytes) {
    const int fd = ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    try {
      std::string text = ddprun::common::read_key_file(fd, max_bytes);
      ::close(fd);
      return text;
    } catch (...) {
      ::close(fd);
      throw;
    }
  };
  CHECK(read(10) == "0123456789");
  CHECK(read(4096) == "0123456789");
  CHECK_THROWS_WITH(read(9), "more than 9 bytes");

  std::string key = "a key to forget";
  ddprun::common::wipe(key);
  CHECK(key.empty());
}

TEST_CASE("etcd's password comes from its file or DDPRUN_ETCD_PASSWORD, once per line") {
  const PrivateFile file("file password\r\n");
  auto from_file = resolve(etcd_job("user=ddprun,insecure_auth=1,password_file=" + file.path()));
  load_etcd_password(from_file.config, {{"DDPRUN_ETCD_PASSWORD", "ignored"}});
  CHECK(from_file.config.etcd->auth.password == "file password");

  auto from_env = resolve(etcd_job("user=ddprun,insecure_auth=1"));
  load_etcd_password(from_env.config, {{"DDPRUN_ETCD_PASSWORD", "variable password"}});
  CHECK(from_env.config.etcd->auth.password == "variable password");
}

TEST_CASE("etcd's user over plain http needs insecure_auth=1; https needs nothing more") {
  CHECK_THROWS_WITH(resolve(etcd_job("user=ddprun")),
                    Catch::StartsWith("--rdzv_conf: rdzv_conf user: the etcd password, and the "
                                      "token etcd trades for it, would cross the network in "
                                      "clear over http; give protocol=https") &&
                        Catch::Contains("insecure_auth"));
  CHECK_THROWS_WITH(resolve(etcd_job("user=ddprun,protocol=http,insecure_auth=0")),
                    Catch::Contains("in clear over http"));
  CHECK_THROWS_WITH(resolve(etcd_job("user=ddprun,insecure_auth=on")),
                    Catch::StartsWith("--rdzv_conf: rdzv_conf insecure_auth: 'on' is not a valid "
                                      "choice; expected 1"));
  CHECK(resolve(etcd_job("user=ddprun,insecure_auth=1"))
            .config.etcd->auth.insecure_transport_allowed);
  CHECK_FALSE(
      resolve(etcd_job("user=ddprun,protocol=https")).config.etcd->auth.insecure_transport_allowed);
  // Without a user nothing secret is sent: plain http stays as it was.
  CHECK_NOTHROW(resolve(etcd_job("protocol=http")));
}
