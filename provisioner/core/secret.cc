#include "provisioner/core/secret.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln {

Result<Secret> Secret::parse(const std::string& reference, const std::string& base_dir) {
    Secret s;
    s.reference_ = reference;
    if (reference.rfind("env:", 0) == 0) {
        s.kind_ = Kind::Env;
        s.target_ = reference.substr(4);
        if (s.target_.empty()) return make_error("config", "secret.empty", "expected env:NAME with a variable name");
        for (char c : s.target_) {
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
                return make_error("config", "secret.bad_env",
                                  "expected env:NAME where NAME is letters, digits and '_'");
        }
        return s;
    }
    if (reference.rfind("file:", 0) == 0) {
        s.kind_ = Kind::File;
        std::filesystem::path p = reference.substr(5);
        if (p.empty()) return make_error("config", "secret.empty", "expected file:PATH with a path");
        if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
        s.target_ = p.lexically_normal().string();
        return s;
    }
    // Never echo the value: it may be the secret itself.
    return make_error("config", "secret.literal", "a literal secret is not allowed; write env:NAME or file:PATH");
}

Result<std::string> Secret::resolve() const {
    if (kind_ == Kind::Env) {
        const char* v = std::getenv(target_.c_str());
        if (!v)
            return make_error("secret", "secret.unset",
                              "environment variable " + target_ + " (from " + reference_ + ") is not set");
        return std::string(v);
    }
    std::ifstream in(target_, std::ios::binary);
    if (!in) return make_error("secret", "secret.unreadable", "cannot read secret file " + target_);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string v = ss.str();
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
    return v;
}

}  // namespace kiln
