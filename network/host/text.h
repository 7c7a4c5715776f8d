// Small text helpers for reading what host commands print.
#pragma once

#include <string>

namespace kiln::network::host {

// Without leading and trailing blanks and line ends.
inline std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
    const size_t i = s.find_first_not_of(" \t\n");
    return i == std::string::npos ? "" : s.substr(i);
}

// The first line of a command's output, for error messages.
inline std::string first_line(const std::string& s) {
    const std::string t = trim(s);
    return t.substr(0, t.find('\n'));
}

}  // namespace kiln::network::host
