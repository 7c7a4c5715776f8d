// A secret is held by reference (`env:NAME` or `file:PATH`), never by value
// in config, logs, the journal or error messages. resolve() reads the value
// at the moment of use; the caller keeps it only as long as it needs it.
#pragma once

#include <string>

#include "provisioner/core/result.h"

namespace kiln {

class Secret {
public:
    enum class Kind { Env, File };

    // Parses "env:NAME" or "file:PATH". Anything else is an error: a literal
    // secret is refused. `base_dir` resolves relative file paths.
    static Result<Secret> parse(const std::string& reference, const std::string& base_dir);

    Kind kind() const { return kind_; }
    // The reference as written, safe to print ("env:BMC_PASS").
    const std::string& reference() const { return reference_; }
    // Reads the value now: env var contents or the file (trailing newline cut).
    Result<std::string> resolve() const;

private:
    Kind kind_ = Kind::Env;
    std::string reference_;
    std::string target_;  // env var name or absolute file path
};

}  // namespace kiln
