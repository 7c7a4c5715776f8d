#include "firmware/stage/firmware_version.h"

#include <cctype>
#include <regex>
#include <vector>

namespace kiln::firmware {

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
}

// Product prefixes a vendor writes before the release, with no " v" to
// mark them (matched case-insensitively at the start).
const std::vector<std::string>& product_prefixes(const std::string& vendor) {
    static const std::vector<std::string> hpe = {"ilo 7 ", "ilo 6 ", "ilo 5 ", "ilo 4 ", "ilo "};
    static const std::vector<std::string> dell = {"idrac9 ", "idrac ", "bios "};
    static const std::vector<std::string> lenovo = {"xcc ", "uefi "};
    static const std::vector<std::string> none;
    if (vendor == "hpe") return hpe;
    if (vendor == "dell") return dell;
    if (vendor == "lenovo") return lenovo;
    return none;
}

// "2.46 May 11 2021" -> "2.46"; "1.2 2021-05-11" -> "1.2".
std::string drop_build_date(const std::string& s) {
    static const std::regex date(
        R"(\s+((Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\s+\d{1,2},?\s+\d{4}|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})$)",
        std::regex::icase);
    return std::regex_replace(s, date, "");
}

// Leading zeros off every all-digit dot part: "07.00.0019" -> "7.0.19".
std::string strip_zeros(const std::string& s) {
    std::string out, part;
    auto flush = [&] {
        bool digits = !part.empty();
        for (char c : part) digits = digits && std::isdigit(static_cast<unsigned char>(c));
        if (digits) {
            size_t nz = part.find_first_not_of('0');
            part = nz == std::string::npos ? "0" : part.substr(nz);
        }
        out += part;
        part.clear();
    };
    for (char c : s) {
        if (c == '.') {
            flush();
            out += '.';
        } else {
            part += c;
        }
    }
    flush();
    return out;
}

constexpr size_t kMaxNormalisedLength = 128;

}  // namespace

NormalisedVersion normalise_version(const std::string& raw, const std::string& vendor) {
    // std::regex recurses per character: a hostile megabyte "version" would
    // overflow the stack. No real version is this long; compare it as is.
    if (raw.size() > kMaxNormalisedLength) return {"", raw};
    std::string s = trim(raw);
    // Trailing notes in parentheses, possibly several: "2.52 (10/29/2021)".
    while (!s.empty() && s.back() == ')') {
        size_t open = s.rfind('(');
        if (open == std::string::npos || open == 0) break;
        s = trim(s.substr(0, open));
    }
    s = drop_build_date(s);
    NormalisedVersion v;
    std::string l = lower(s);
    for (const auto& p : product_prefixes(vendor)) {
        if (l.rfind(p, 0) == 0 && l.size() > p.size()) {
            v.label = trim(l.substr(0, p.size()));
            l = trim(l.substr(p.size()));
            break;
        }
    }
    // "<label> v<digit>...": the last such " v" marks where the release starts.
    static const std::regex labelled(R"(^(.*?)\s*\bv(\d.*)$)");
    std::smatch m;
    if (std::regex_match(l, m, labelled)) {
        std::string label = trim(m[1].str());
        if (!label.empty()) v.label = v.label.empty() ? label : v.label + " " + label;
        l = m[2].str();
    }
    v.release = strip_zeros(trim(l));
    return v;
}

bool same_version(const std::string& reported, const std::string& desired, const std::string& vendor) {
    if (reported == desired) return true;
    if (reported.empty() || desired.empty()) return false;
    NormalisedVersion r = normalise_version(reported, vendor), d = normalise_version(desired, vendor);
    if (!r.label.empty() && !d.label.empty() && r.label != d.label) return false;
    return !r.release.empty() && r.release == d.release;
}

}  // namespace kiln::firmware
