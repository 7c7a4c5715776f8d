// A check of TOML text before toml++ parses it. toml++ 3.3 (Debian 12)
// reaches __builtin_unreachable, undefined behaviour, on some non-ASCII
// characters where it expects whitespace ("mtu = 9000é"): found by fuzzing
// the fleet loader (scripts/fuzz.sh fleet-config). TOML allows non-ASCII
// only inside strings and comments, so such a file is invalid anyway; this
// finds the first such character and the loader reports it at its line and
// column without handing the text to toml++.
#pragma once

#include <optional>
#include <string_view>

namespace kiln::config {

struct TextPos {
    int line = 1;
    int column = 1;  // in characters, as toml++ counts
};

// Where the first non-ASCII character outside a string or a comment is.
std::optional<TextPos> non_ascii_outside_strings(std::string_view text);

}  // namespace kiln::config
