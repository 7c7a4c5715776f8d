#include "firmware/bmc/firmware_image.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::bmc {

namespace {
constexpr size_t kHeadBytes = 512;
}

Result<ImageHeader> parse_image_header(std::string_view head) {
    const auto nl = head.find('\n');
    std::string line(head.substr(0, nl));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string magic = "KILN-FW ";
    auto bad = [] {
        return make_error("bmc", "bmc.image_not_kiln",
                          "the image does not start with \"KILN-FW <component> <version>\"");
    };
    if (line.compare(0, magic.size(), magic) != 0) return bad();
    std::string rest = line.substr(magic.size());
    rest.erase(0, rest.find_first_not_of(' '));
    const auto space = rest.find(' ');
    if (space == std::string::npos) return bad();
    ImageHeader h;
    h.component = rest.substr(0, space);
    h.version = rest.substr(space + 1);
    h.version.erase(0, h.version.find_first_not_of(' '));
    h.version.erase(h.version.find_last_not_of(' ') + 1);
    if (h.component.empty() || h.version.empty()) return bad();
    for (char c : line) {
        if (static_cast<unsigned char>(c) < 0x20) return bad();  // binary junk is no header
    }
    return h;
}

ImageSink::ImageSink(std::string path, int fd, size_t max_bytes)
    : path_(std::move(path)), fd_(fd), max_bytes_(max_bytes), hash_(std::make_unique<Sha256>()) {}

ImageSink::ImageSink(ImageSink&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(other.fd_),
      max_bytes_(other.max_bytes_),
      size_(other.size_),
      too_large_(other.too_large_),
      handed_over_(other.handed_over_),
      head_(std::move(other.head_)),
      hash_(std::move(other.hash_)) {
    other.fd_ = -1;
    other.handed_over_ = true;
}

ImageSink::~ImageSink() {
    if (fd_ >= 0) ::close(fd_);
    if (!handed_over_ && !path_.empty()) ::unlink(path_.c_str());
}

Result<ImageSink> ImageSink::create(const std::string& dir, size_t max_bytes) {
    std::string tmpl = dir + "/kiln-bmc-image-XXXXXX";
    int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd < 0)
        return make_error("bmc", "bmc.spool_failed",
                          "cannot create a spool file in " + dir + ": " + std::strerror(errno));
    return ImageSink(tmpl, fd, max_bytes);
}

Status ImageSink::write(const char* data, size_t n) {
    if (too_large_ || size_ + n > max_bytes_) {
        too_large_ = true;
        return make_error("bmc", "bmc.image_too_large",
                          "the image is larger than " + std::to_string(max_bytes_) + " bytes");
    }
    if (head_.size() < kHeadBytes && head_.find('\n') == std::string::npos) {
        head_.append(data, std::min(n, kHeadBytes - head_.size()));
    }
    hash_->update(std::string_view(data, n));
    size_t done = 0;
    while (done < n) {
        ssize_t w = ::write(fd_, data + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            return make_error("bmc", "bmc.spool_failed", "cannot write " + path_ + ": " + std::strerror(errno));
        }
        done += static_cast<size_t>(w);
    }
    size_ += n;
    return ok_status();
}

Result<ReceivedImage> ImageSink::finish() {
    if (fd_ >= 0 && ::close(fd_) != 0) {
        fd_ = -1;
        return make_error("bmc", "bmc.spool_failed", "cannot close " + path_ + ": " + std::strerror(errno));
    }
    fd_ = -1;
    ReceivedImage out;
    out.path = path_;
    out.sha256 = hash_->hex();
    out.size = size_;
    out.head = head_;
    handed_over_ = true;
    return out;
}

}  // namespace kiln::bmc
