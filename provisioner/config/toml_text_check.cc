#include "provisioner/config/toml_text_check.h"

namespace kiln::config {

std::optional<TextPos> non_ascii_outside_strings(std::string_view text) {
    enum class In { code, comment, basic, literal, ml_basic, ml_literal };
    In in = In::code;
    TextPos pos;
    auto starts = [&](size_t i, std::string_view s) { return text.substr(i, s.size()) == s; };
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        size_t skip = 0;  // further bytes consumed with this one (no newlines among them)
        switch (in) {
            case In::code:
                if (c >= 0x80) return pos;
                if (c == '#')
                    in = In::comment;
                else if (starts(i, "\"\"\""))
                    in = In::ml_basic, skip = 2;
                else if (starts(i, "'''"))
                    in = In::ml_literal, skip = 2;
                else if (c == '"')
                    in = In::basic;
                else if (c == '\'')
                    in = In::literal;
                break;
            case In::comment:
                if (c == '\n') in = In::code;
                break;
            case In::basic:
                if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n')
                    skip = 1;
                else if (c == '"' || c == '\n')
                    in = In::code;  // a newline ends it (toml++ then reports the error)
                break;
            case In::literal:
                if (c == '\'' || c == '\n') in = In::code;
                break;
            case In::ml_basic:
                if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n')
                    skip = 1;
                else if (starts(i, "\"\"\"")) {
                    in = In::code;
                    skip = 2;
                    while (skip < 4 && i + skip + 1 < text.size() && text[i + skip + 1] == '"')
                        ++skip;  // up to 2 quotes of content
                }
                break;
            case In::ml_literal:
                if (starts(i, "'''")) {
                    in = In::code;
                    skip = 2;
                    while (skip < 4 && i + skip + 1 < text.size() && text[i + skip + 1] == '\'') ++skip;
                }
                break;
        }
        for (size_t k = 0; k <= skip && i + k < text.size(); ++k) {
            const auto b = static_cast<unsigned char>(text[i + k]);
            if (b == '\n') {
                ++pos.line;
                pos.column = 1;
            } else if ((b & 0xC0) != 0x80) {
                ++pos.column;  // continuation bytes are part of the character before
            }
        }
        i += skip;
    }
    return std::nullopt;
}

}  // namespace kiln::config
