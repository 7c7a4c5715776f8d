// Errors as values: every fallible call in kiln returns Result<T>.
// An Error carries a domain ("config", "journal", "engine", a stage name),
// a stable machine-readable code, and a one-line message fit for the user.
// `transient` marks errors the engine may retry with backoff.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

struct Error {
    std::string domain;
    std::string code;
    std::string message;
    bool transient = false;   // worth retrying with backoff
    bool quarantine = false;  // the node must be quarantined, not just failed

    // "domain: message" — the form printed to users.
    std::string str() const { return domain.empty() ? message : domain + ": " + message; }
};

// Every code has one spelling, "<area>.<name>": lower case, words joined by
// '_' (docs/errors.md lists them). A bare name gets its domain as the area
// and '-' becomes '_', so a code built at run time keeps the form too.
// Out of line: GCC 12 inlining it into every make_error call warns of an
// uninitialised temporary that is not there (-Wmaybe-uninitialized).
[[gnu::noinline]] inline std::string dotted_code(const std::string& domain, const std::string& code) {
    std::string out = code.empty() || code.find('.') != std::string::npos ? code : domain + "." + code;
    for (char& c : out)
        if (c == '-') c = '_';
    return out;
}

inline Error make_error(std::string domain, const std::string& code, std::string message, bool transient = false) {
    std::string dotted = dotted_code(domain, code);
    return Error{std::move(domain), std::move(dotted), std::move(message), transient};
}

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
    Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : err_(std::move(error)) {}  // NOLINT: implicit by design

    bool ok() const { return !err_.has_value(); }
    explicit operator bool() const { return ok(); }
    const Error& error() const { return *err_; }

private:
    std::optional<Error> err_;
};

using Status = Result<void>;

inline Status ok_status() {
    return {};
}

}  // namespace kiln
