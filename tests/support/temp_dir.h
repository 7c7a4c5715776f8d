// A fresh folder under the system temp dir, removed on destruction.
#pragma once

#include <string>

namespace kiln::test {

class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    // Writes `text` to path()/name (creating folders) and returns the path.
    std::string write(const std::string& name, const std::string& text) const;

private:
    std::string path_;
};

std::string read_file(const std::string& path);

}  // namespace kiln::test
