#pragma once
// The job secret: where it comes from (a file, or the environment for schedulers that pass it
// that way) and the checks it must pass. Shared by ddprun's launcher and ddprun-store, which
// take the same sources.

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddprun::rendezvous::store {

inline constexpr const char* kSecretFileVariable = "DDPRUN_RDZV_SECRET_FILE";
inline constexpr const char* kSecretVariable = "DDPRUN_RDZV_SECRET";

// A shorter secret is refused: a word or a name can be guessed, and anyone who reaches the
// store's port may try.
inline constexpr std::size_t kMinSecretBytes = 16;

// What a secret must be, for the end of an error message.
inline constexpr const char* kSecretExpectation =
    "a secret of at least 16 bytes, such as `head -c 32 /dev/urandom | base64`, in a file only "
    "its owner may read (chmod 600)";

struct JobSecret {
  std::string value;   // never printed
  std::string source;  // e.g. "file /run/job.key (--rdzv_conf secret_file)"; safe to print
};

// A secret that cannot be used: the message names the file or variable and what is wrong.
class JobSecretError : public std::runtime_error {
 public:
  JobSecretError(std::string where, std::string problem)
      : std::runtime_error(where + ": " + problem),
        where_(std::move(where)),
        problem_(std::move(problem)) {}
  const std::string& where() const { return where_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string where_;
  std::string problem_;
};

// Why a file of this mode may not hold a secret (group or others may read or write it), or
// nullopt when it may.
std::optional<std::string> secret_file_mode_problem(mode_t mode);

// The secret a text holds: trailing spaces, tabs, carriage returns and newlines (a file's final
// newline) are not part of it. Throws JobSecretError naming `where` when fewer than
// kMinSecretBytes are left.
std::string secret_from_text(std::string_view text, const std::string& where);

// Reads the secret from `path`; throws JobSecretError naming `where` (the option or variable
// that named the file) when it cannot be read, group or others may read it, or it is too short.
// The file's bytes are wiped from memory once the secret is taken out of them.
std::string read_secret_file(const std::string& path, const std::string& where);

// The job's secret from, in this order: a file option (`option_name` names it), the file named
// by DDPRUN_RDZV_SECRET_FILE, the value of DDPRUN_RDZV_SECRET (a view: the caller wipes the
// variable's value, and no copy of it is made here). nullopt: no secret anywhere.
std::optional<JobSecret> resolve_job_secret(const std::optional<std::string>& file_option,
                                            const std::string& option_name,
                                            const std::optional<std::string>& file_variable,
                                            std::optional<std::string_view> secret_variable);

}  // namespace ddprun::rendezvous::store
