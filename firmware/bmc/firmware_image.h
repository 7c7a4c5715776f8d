// kiln's emulated firmware images and how they reach the disk. An image is
// any file whose first line is "KILN-FW <component> <version>" (see
// docs/kiln-bmc.md): the emulated BMC learns from it which component it is
// for and which version it carries, as a real BMC reads its package header.
//
// ImageSink receives an image in pieces (a SimpleUpdate download, a
// multipart push) and streams it to a spool file while hashing it, so a
// 256 MiB image never sits in memory; it keeps only the first line.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "provisioner/core/result.h"
#include "provisioner/core/sha256.h"

namespace kiln::bmc {

struct ImageHeader {
    std::string component;  // "BIOS", "bmc", "2"
    std::string version;    // the rest of the line: "P79 v1.46"
};

// Errors: "bmc.image_not_kiln" (no "KILN-FW <component> <version>" first line).
Result<ImageHeader> parse_image_header(std::string_view head);

struct ReceivedImage {
    std::string path;  // the spool file (the caller deletes it)
    std::string sha256;
    size_t size = 0;
    std::string head;  // the first bytes, up to the first newline or 512
};

class ImageSink {
public:
    // Creates a new spool file in `dir`. Errors: "bmc.spool_failed".
    static Result<ImageSink> create(const std::string& dir, size_t max_bytes);
    ImageSink(ImageSink&& other) noexcept;
    ImageSink& operator=(ImageSink&&) = delete;
    ImageSink(const ImageSink&) = delete;
    ~ImageSink();  // removes the file unless finish() handed it over

    // Errors: "bmc.image_too_large" (past max_bytes), "bmc.spool_failed".
    Status write(const char* data, size_t n);
    // Closes the file and hands it over.
    Result<ReceivedImage> finish();
    size_t size() const { return size_; }
    bool too_large() const { return too_large_; }

private:
    ImageSink(std::string path, int fd, size_t max_bytes);

    std::string path_;
    int fd_ = -1;
    size_t max_bytes_;
    size_t size_ = 0;
    bool too_large_ = false;
    bool handed_over_ = false;
    std::string head_;
    std::unique_ptr<Sha256> hash_;
};

}  // namespace kiln::bmc
