// A small, streaming XML writer for the documents kiln generates (libvirt
// domain XML, the NCCL topology file): indented two spaces, attributes in
// the order given, text and attribute values escaped. Output is stable
// byte for byte, which the golden-file tests rely on.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::vm {

class XmlWriter {
public:
    using Attrs = std::vector<std::pair<std::string, std::string>>;

    // <name a="v">, children indented below it until close().
    void open(std::string_view name, const Attrs& attrs = {});
    void close();
    // <name a="v"/>
    void empty(std::string_view name, const Attrs& attrs = {});
    // <name a="v">text</name>
    void text(std::string_view name, std::string_view value, const Attrs& attrs = {});
    // A comment on its own line (no "--" inside, as XML requires).
    void comment(std::string_view text);

    // The document so far; every open element must be closed.
    const std::string& str() const { return out_; }

    static std::string escape(std::string_view s);

private:
    void start(std::string_view name, const Attrs& attrs);
    std::string out_;
    std::vector<std::string> stack_;
};

}  // namespace kiln::vm
