// Just enough PNG reading to tell a rendered page from a blank one: the
// size, and how many pixels differ from the top-left one. 8-bit RGB or RGBA,
// non-interlaced (what Chromium writes).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::test {

struct PngProbe {
    bool ok = false;
    std::string error;
    uint32_t width = 0, height = 0;
    uint64_t differing = 0;  // pixels unlike pixel (0,0)
};

inline PngProbe probe_png(const std::string& bytes) {
    PngProbe p;
    auto be32 = [&](size_t at) {
        return uint32_t(uint8_t(bytes[at])) << 24 | uint32_t(uint8_t(bytes[at + 1])) << 16 |
               uint32_t(uint8_t(bytes[at + 2])) << 8 | uint32_t(uint8_t(bytes[at + 3]));
    };
    if (bytes.size() < 33 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
        p.error = "not a PNG";
        return p;
    }
    std::string idat;
    int channels = 0;
    for (size_t at = 8; at + 8 <= bytes.size();) {
        const uint32_t len = be32(at);
        const std::string type = bytes.substr(at + 4, 4);
        if (at + 12 + len > bytes.size()) break;
        if (type == "IHDR") {
            p.width = be32(at + 8);
            p.height = be32(at + 12);
            const int depth = uint8_t(bytes[at + 16]), color = uint8_t(bytes[at + 17]),
                      interlace = uint8_t(bytes[at + 20]);
            channels = color == 6 ? 4 : color == 2 ? 3 : 0;
            if (depth != 8 || channels == 0 || interlace != 0) {
                p.error = "unsupported PNG layout";
                return p;
            }
        } else if (type == "IDAT") {
            idat += bytes.substr(at + 8, len);
        }
        at += 12 + len;
    }
    const size_t stride = size_t(p.width) * channels;
    std::vector<uint8_t> raw((stride + 1) * p.height);
    uLongf out_len = raw.size();
    if (channels == 0 ||
        uncompress(raw.data(), &out_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
        out_len != raw.size()) {
        p.error = "cannot inflate the image data";
        return p;
    }
    std::vector<uint8_t> prev(stride, 0), cur(stride);
    std::vector<uint8_t> first(channels);
    for (uint32_t y = 0; y < p.height; ++y) {
        const uint8_t* row = &raw[y * (stride + 1)];
        const int filter = row[0];
        for (size_t i = 0; i < stride; ++i) {
            const int a = i >= size_t(channels) ? cur[i - channels] : 0, b = prev[i],
                      c = i >= size_t(channels) ? prev[i - channels] : 0;
            int v = row[1 + i];
            switch (filter) {
                case 1:
                    v += a;
                    break;
                case 2:
                    v += b;
                    break;
                case 3:
                    v += (a + b) / 2;
                    break;
                case 4: {
                    const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
                    v += (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
                    break;
                }
                default:
                    break;
            }
            cur[i] = uint8_t(v);
        }
        if (y == 0) first.assign(cur.begin(), cur.begin() + channels);
        for (uint32_t x = 0; x < p.width; ++x)
            for (int k = 0; k < channels; ++k)
                if (cur[x * channels + k] != first[k]) {
                    ++p.differing;
                    break;
                }
        prev = cur;
    }
    p.ok = true;
    return p;
}

}  // namespace kiln::test
