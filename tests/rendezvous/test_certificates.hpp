#pragma once
// Certificates for tests of etcd over TLS, made with the openssl command line: a CA, a member
// certificate for 127.0.0.1 (a one-member cluster) and a client certificate signed by it, and a
// second CA that signed nothing (to be distrusted with). Catch2 tests only (REQUIRE on failure).

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace ddprun::rendezvous::testing {

// A CA, a member certificate for 127.0.0.1 and a client certificate, made with the openssl
// command line in a folder this object owns.
class TestCertificates {
 public:
  TestCertificates() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ddprun-etcd-tls-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    const std::string d = dir_.string();
    const std::string quiet = " >/dev/null 2>&1";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    run("printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > " + d +
        "/server.ext");
    run("printf 'extendedKeyUsage=clientAuth\\n' > " + d + "/client.ext");
    for (const std::string ca : {"ca", "other-ca"}) {
      run("openssl req -x509" + key + " -keyout " + d + "/" + ca + ".key -out " + d + "/" + ca +
          ".pem -days 1 -subj /CN=" + ca + quiet);
    }
    for (const std::string who : {"server", "client"}) {
      run("openssl req" + key + " -keyout " + d + "/" + who + ".key -out " + d + "/" + who +
          ".csr -subj /CN=" + who + quiet);
      run("openssl x509 -req -in " + d + "/" + who + ".csr -CA " + d + "/ca.pem -CAkey " + d +
          "/ca.key -CAcreateserial -out " + d + "/" + who + ".pem -days 1 -extfile " + d + "/" +
          who + ".ext" + quiet);
    }
  }
  ~TestCertificates() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  static void run(const std::string& command) {
    INFO(command);
    REQUIRE(std::system(command.c_str()) == 0);
  }
  std::filesystem::path dir_;
};

}  // namespace ddprun::rendezvous::testing
