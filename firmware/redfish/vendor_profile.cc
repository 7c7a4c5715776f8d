#include "firmware/redfish/vendor_profile.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

namespace kiln::redfish {

using nlohmann::json;

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

VendorProfile make_generic() {
    VendorProfile p;
    p.vendor = Vendor::Generic;
    p.name = "generic";
    p.bios = {
        {"sriov", {"SriovGlobalEnable", "Sriov", "SRIOV", "SRIOVSupport"}},
        {"iommu", {"IommuSupport", "ProcAmdIoVt", "IntelProcVtd", "VTd", "IOMMU"}},
        {"acs", {"PcieAcs", "ACSControl", "ACS"}},
        {"above_4g_decoding", {"MmioAbove4Gb", "Above4GDecoding", "Above4G"}},
    };
    return p;
}

VendorProfile make_dell() {
    VendorProfile p;
    p.vendor = Vendor::Dell;
    p.name = "dell";
    p.bios = {
        {"sriov", {"SriovGlobalEnable"}},
        {"iommu", {"IommuSupport", "ProcVirtualization"}},
        {"acs", {"PcieAcs", "AcsControl"}},
        {"above_4g_decoding", {"MmioAbove4Gb"}},
    };
    p.clear_job_queue = true;
    p.job_queue_suffix = "/Oem/Dell/Jobs";
    p.retry_conflict = true;
    p.busy_message_ids = {"RAC0218", "SUP0108", "JobQueueBusy"};
    return p;
}

VendorProfile make_hpe() {
    VendorProfile p;
    p.vendor = Vendor::Hpe;
    p.name = "hpe";
    p.bios = {
        {"sriov", {"Sriov"}},
        {"iommu", {"ProcAmdIoVt", "IntelProcVtd"}},
        {"acs",
         {"PcieAcs", "AcsControl"},
         "Enabled",
         "Disabled",
         "this BMC lists no ACS attribute (some iLO BIOSes do not expose one)"},
        {"above_4g_decoding",
         {"Above4GDecoding", "MmioAbove4Gb"},
         "Enabled",
         "Disabled",
         "this BMC lists no above-4G attribute (some iLO BIOSes do not expose one)"},
    };
    p.update_without_task_monitor = true;
    p.busy_message_ids = {"iLO.2.15.SystemInPost", "SystemInPost", "UnableToModifyDuringSystemPOST"};
    return p;
}

VendorProfile make_supermicro() {
    VendorProfile p;
    p.vendor = Vendor::Supermicro;
    p.name = "supermicro";
    p.bios = {
        {"sriov", {"SR-IOVSupport", "SRIOVSupport", "SR_IOVSupport"}},
        {"iommu", {"IOMMU", "IntelVTForDirectedI/O(VT-d)", "IntelVT_dSupport"}},
        {"acs", {"ACSControl", "PCIeACS"}},
        {"above_4g_decoding", {"Above4GDecoding", "Above4GEncoding"}},
    };
    return p;
}

VendorProfile make_lenovo() {
    VendorProfile p;
    p.vendor = Vendor::Lenovo;
    p.name = "lenovo";
    p.bios = {
        {"sriov", {"SystemOobCustom_SRIOV", "DevicesandIOPorts_SRIOV", "PCIConfiguration_SRIOV"}, "Enable", "Disable"},
        {"iommu",
         {"Processors_IntelVirtualizationTechnologyforDirectedIO", "Processors_IOMMU", "Processors_VTd"},
         "Enable",
         "Disable"},
        {"acs", {"DevicesandIOPorts_PCIeACS", "Processors_ACS"}, "Enable", "Disable"},
        {"above_4g_decoding", {"DevicesandIOPorts_MMIOAbove4GB", "Memory_MMIOAbove4GB"}, "Enable", "Disable"},
    };
    p.settings_fallback_suffix = "/Pending";
    return p;
}

VendorProfile make_openbmc() {
    VendorProfile p = make_generic();
    p.vendor = Vendor::OpenBmc;
    p.name = "openbmc";
    p.multipart_only = true;
    return p;
}

bool contains_ci(const std::string& haystack, const std::string& needle) {
    return lower(haystack).find(lower(needle)) != std::string::npos;
}

std::string str_at(const json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
    return "";
}

std::optional<Vendor> from_text(const std::string& text) {
    if (text.empty()) return std::nullopt;
    if (contains_ci(text, "dell") || contains_ci(text, "idrac")) return Vendor::Dell;
    if (contains_ci(text, "hpe") || contains_ci(text, "ilo") || text == "Hp" || text == "HP") return Vendor::Hpe;
    if (contains_ci(text, "supermicro")) return Vendor::Supermicro;
    if (contains_ci(text, "lenovo") || contains_ci(text, "xcc")) return Vendor::Lenovo;
    if (contains_ci(text, "openbmc")) return Vendor::OpenBmc;
    return std::nullopt;
}

}  // namespace

const VendorProfile& profile_for(Vendor vendor) {
    static const std::map<Vendor, VendorProfile> profiles = {
        {Vendor::Generic, make_generic()},       {Vendor::Dell, make_dell()},     {Vendor::Hpe, make_hpe()},
        {Vendor::Supermicro, make_supermicro()}, {Vendor::Lenovo, make_lenovo()}, {Vendor::OpenBmc, make_openbmc()},
    };
    return profiles.at(vendor);
}

std::optional<Vendor> vendor_from_name(const std::string& name) {
    for (Vendor v : {Vendor::Generic, Vendor::Dell, Vendor::Hpe, Vendor::Supermicro, Vendor::Lenovo, Vendor::OpenBmc})
        if (profile_for(v).name == lower(name)) return v;
    return std::nullopt;
}

const VendorProfile& detect_vendor(const json& root, const json& manager) {
    // Redfish 1.5+ says it outright; older services through their Oem keys.
    if (auto v = from_text(str_at(root, "Vendor"))) return profile_for(*v);
    for (const json* doc : {&root, &manager}) {
        if (doc->is_object() && doc->contains("Oem") && (*doc)["Oem"].is_object())
            for (auto it = (*doc)["Oem"].begin(); it != (*doc)["Oem"].end(); ++it)
                if (auto v = from_text(it.key())) return profile_for(*v);
    }
    if (auto v = from_text(str_at(manager, "Model"))) return profile_for(*v);
    if (auto v = from_text(str_at(manager, "Manufacturer"))) return profile_for(*v);
    return profile_for(Vendor::Generic);
}

Result<BiosIntentResult> map_bios_intents(const VendorProfile& profile,
                                          const std::vector<std::pair<std::string, bool>>& intents,
                                          const json& attributes,
                                          const std::map<std::string, std::vector<std::string>>& allowed) {
    BiosIntentResult out;
    for (const auto& wanted : intents) {
        const std::string& intent = wanted.first;  // not a structured binding: lambdas capture it
        const bool on = wanted.second;
        auto m = std::find_if(profile.bios.begin(), profile.bios.end(),
                              [&](const BiosIntentMapping& b) { return b.intent == intent; });
        if (m == profile.bios.end())
            return make_error("firmware", "firmware.bios_intent",
                              fmt::format("bios intent '{}' is unknown to the {} profile", intent, profile.name));
        const std::string* found = nullptr;
        for (const auto& name : m->names)
            if (attributes.is_object() && attributes.contains(name)) {
                found = &name;
                break;
            }
        if (!found) {
            if (!m->absent_reason.empty()) {
                out.not_applicable.push_back(intent + ": " + m->absent_reason);
                continue;
            }
            std::string names;
            for (const auto& n : m->names) names += (names.empty() ? "" : ", ") + n;
            return make_error("firmware", "firmware.bios_intent",
                              fmt::format("bios intent '{}': this BMC ({} profile) has none of the attributes {}; "
                                          "set the vendor attribute under the bios profile's extra table",
                                          intent, profile.name, names));
        }
        const json& current = attributes[*found];
        json value;
        if (current.is_boolean()) {
            value = on;
        } else {
            std::string want = on ? m->on : m->off;
            auto a = allowed.find(*found);
            if (a != allowed.end() && !a->second.empty() &&
                std::find(a->second.begin(), a->second.end(), want) == a->second.end()) {
                // The registry spells it otherwise ("Enable" for "Enabled").
                std::string stem = on ? "enable" : "disable";
                auto alt = std::find_if(a->second.begin(), a->second.end(),
                                        [&](const std::string& v) { return lower(v).rfind(stem, 0) == 0; });
                if (alt == a->second.end())
                    return make_error("firmware", "firmware.bios_intent",
                                      fmt::format("bios intent '{}': attribute {} allows none of '{}' per the BMC's "
                                                  "attribute registry",
                                                  intent, *found, want));
                want = *alt;
            }
            value = want;
        }
        out.attributes[*found] = value;
    }
    return out;
}

}  // namespace kiln::redfish
