#include "provisioner/vm/xml_writer.h"

namespace kiln::vm {

std::string XmlWriter::escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&apos;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

void XmlWriter::start(std::string_view name, const Attrs& attrs) {
    out_.append(stack_.size() * 2, ' ');
    out_ += '<';
    out_ += name;
    for (const auto& [k, v] : attrs) {
        out_ += ' ';
        out_ += k;
        out_ += "='";
        out_ += escape(v);
        out_ += '\'';
    }
}

void XmlWriter::open(std::string_view name, const Attrs& attrs) {
    start(name, attrs);
    out_ += ">\n";
    stack_.emplace_back(name);
}

void XmlWriter::close() {
    const std::string name = std::move(stack_.back());
    stack_.pop_back();
    out_.append(stack_.size() * 2, ' ');
    out_ += "</" + name + ">\n";
}

void XmlWriter::empty(std::string_view name, const Attrs& attrs) {
    start(name, attrs);
    out_ += "/>\n";
}

void XmlWriter::text(std::string_view name, std::string_view value, const Attrs& attrs) {
    start(name, attrs);
    out_ += '>';
    out_ += escape(value);
    out_ += "</";
    out_ += name;
    out_ += ">\n";
}

void XmlWriter::comment(std::string_view text) {
    std::string t(text);
    for (size_t p; (p = t.find("--")) != std::string::npos;) t.replace(p, 2, "- ");
    out_.append(stack_.size() * 2, ' ');
    out_ += "<!-- " + t + " -->\n";
}

}  // namespace kiln::vm
