#include "provisioner/net/url.h"

#include <cctype>

namespace kiln::net {

namespace {

bool unreserved(unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

Error url_error(const std::string& why) {
    return make_error("http", "http.url", why);
}

// Where the authority ends: "https://h:1/p" -> the index of "/p"; npos-safe.
size_t authority_end(std::string_view url, size_t from) {
    size_t end = url.find_first_of("/?#", from);
    return end == std::string_view::npos ? url.size() : end;
}

}  // namespace

std::string percent_encode(std::string_view text) {
    static const char* digits = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (char ch : text) {
        auto c = static_cast<unsigned char>(ch);
        if (unreserved(c)) {
            out += ch;
        } else {
            out += '%';
            out += digits[c >> 4];
            out += digits[c & 0xF];
        }
    }
    return out;
}

Result<std::string> percent_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        int hi = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
        int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
        if (hi < 0 || lo < 0) return url_error("bad percent escape at offset " + std::to_string(i));
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

std::string join_url(std::string_view base, std::string_view path) {
    size_t sep = path.find("://");
    if (sep != std::string_view::npos && path.find('/') > sep) return std::string(path);
    if (path.empty()) return std::string(base);
    if (path.front() == '/') {
        size_t scheme_end = base.find("://");
        // No scheme: nothing to take an origin from; glue the two.
        if (scheme_end == std::string_view::npos) {
            while (!base.empty() && base.back() == '/') base.remove_suffix(1);
            return std::string(base) + std::string(path);
        }
        return std::string(base.substr(0, authority_end(base, scheme_end + 3))) + std::string(path);
    }
    while (!base.empty() && base.back() == '/') base.remove_suffix(1);
    return std::string(base) + "/" + std::string(path);
}

Result<UrlParts> split_url(std::string_view url) {
    size_t scheme_end = url.find("://");
    if (scheme_end == std::string_view::npos || scheme_end == 0) return url_error("no scheme in URL");
    std::string_view scheme = url.substr(0, scheme_end);
    if (!std::isalpha(static_cast<unsigned char>(scheme[0]))) return url_error("bad scheme in URL");
    for (char c : scheme)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.')
            return url_error("bad scheme in URL");
    for (char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
            return url_error("URL holds a space or control character");

    UrlParts parts;
    parts.scheme = lower(scheme);
    const size_t auth_begin = scheme_end + 3;
    const size_t auth_end = authority_end(url, auth_begin);
    std::string_view authority = url.substr(auth_begin, auth_end - auth_begin);
    if (size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);

    std::string_view host = authority;
    std::string_view port;
    if (!authority.empty() && authority.front() == '[') {
        size_t close = authority.find(']');
        if (close == std::string_view::npos) return url_error("unclosed '[' in URL host");
        host = authority.substr(1, close - 1);
        std::string_view rest = authority.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return url_error("junk after ']' in URL host");
            port = rest.substr(1);
        }
    } else if (size_t colon = authority.find(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
    }
    if (host.empty()) return url_error("no host in URL");
    parts.host = lower(host);

    if (!port.empty()) {
        if (port.size() > 5) return url_error("bad port in URL");
        int value = 0;
        for (char c : port) {
            if (!std::isdigit(static_cast<unsigned char>(c))) return url_error("bad port in URL");
            value = value * 10 + (c - '0');
        }
        if (value < 1 || value > 65535) return url_error("port out of range in URL");
        parts.port = value;
    } else if (parts.scheme == "http") {
        parts.port = 80;
    } else if (parts.scheme == "https") {
        parts.port = 443;
    }

    std::string_view target = url.substr(auth_end);
    if (size_t hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
    parts.target = target.empty() || target.front() != '/' ? "/" + std::string(target) : std::string(target);
    return parts;
}

std::string url_for_log(std::string_view url) {
    auto parts = split_url(url);
    if (!parts) return "<invalid url>";
    std::string out = parts->scheme + "://";
    out += parts->host.find(':') != std::string::npos ? "[" + parts->host + "]" : parts->host;
    const bool default_port = (parts->scheme == "http" && parts->port == 80) ||
                              (parts->scheme == "https" && parts->port == 443) || parts->port == 0;
    if (!default_port) out += ":" + std::to_string(parts->port);
    out += parts->target.substr(0, parts->target.find('?'));
    return out;
}

}  // namespace kiln::net
