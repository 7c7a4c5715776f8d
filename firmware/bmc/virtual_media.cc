#include "firmware/bmc/virtual_media.h"

#include <algorithm>

namespace kiln::bmc {

using nlohmann::json;

namespace {
const std::string kInsert = "VirtualMedia.InsertMedia";

std::optional<RedfishMessage> want_bool(const json& params, const char* name, bool* out) {
    auto it = params.find(name);
    if (it == params.end()) return std::nullopt;
    if (!it->is_boolean()) return messages::action_parameter_value_format_error(it->dump(), name, kInsert);
    *out = it->get<bool>();
    return std::nullopt;
}
}  // namespace

bool is_virtual_media(const json& body) {
    return body.is_object() && body.value("@odata.type", "").rfind("#VirtualMedia.v", 0) == 0;
}

json with_media_actions(json body, const std::string& uri) {
    if (!body.contains("Actions") || !body["Actions"].is_object()) body["Actions"] = json::object();
    json& actions = body["Actions"];
    if (!actions.contains("#VirtualMedia.InsertMedia")) {
        actions["#VirtualMedia.InsertMedia"] = {{"target", uri + "/Actions/VirtualMedia.InsertMedia"}};
    }
    if (!actions.contains("#VirtualMedia.EjectMedia")) {
        actions["#VirtualMedia.EjectMedia"] = {{"target", uri + "/Actions/VirtualMedia.EjectMedia"}};
    }
    return body;
}

std::optional<RedfishMessage> insert_media(json& body, const json& params) {
    auto image = params.find("Image");
    if (image == params.end()) return messages::action_parameter_missing(kInsert, "Image");
    if (!image->is_string() || image->get<std::string>().empty()) {
        return messages::action_parameter_value_format_error(image->dump(), "Image", kInsert);
    }
    const std::string uri = image->get<std::string>();
    if (uri.rfind("http://", 0) != 0 && uri.rfind("https://", 0) != 0 && uri.rfind("nfs://", 0) != 0 &&
        uri.rfind("cifs://", 0) != 0) {
        return messages::action_parameter_value_format_error(uri, "Image", kInsert);
    }
    bool inserted = true, write_protected = true;
    if (auto err = want_bool(params, "Inserted", &inserted)) return err;
    if (auto err = want_bool(params, "WriteProtected", &write_protected)) return err;
    for (const char* name : {"TransferProtocolType", "TransferMethod", "UserName", "Password", "MediaType"}) {
        auto it = params.find(name);
        if (it != params.end() && !it->is_string()) {
            return messages::action_parameter_value_format_error(it->dump(), name, kInsert);
        }
    }
    for (const auto& [key, value] : params.items()) {
        static const std::vector<std::string> known = {
            "Image",          "Inserted", "WriteProtected", "TransferProtocolType",
            "TransferMethod", "UserName", "Password",       "MediaType"};
        if (std::find(known.begin(), known.end(), key) == known.end()) {
            return messages::action_parameter_not_supported(key, kInsert);
        }
    }
    // Drop userinfo and query from what is shown: they may carry credentials.
    std::string shown = uri.substr(0, uri.find_first_of("?#"));
    if (auto at = shown.find('@'); at != std::string::npos && shown.find("://") < at) {
        shown.erase(shown.find("://") + 3, at + 1 - (shown.find("://") + 3));
    }
    body["Image"] = shown;
    body["ImageName"] = shown.substr(shown.find_last_of('/') + 1);
    body["Inserted"] = inserted;
    body["WriteProtected"] = write_protected;
    body["ConnectedVia"] = "URI";
    if (params.contains("TransferProtocolType")) body["TransferProtocolType"] = params["TransferProtocolType"];
    return std::nullopt;
}

void eject_media(json& body) {
    body["Image"] = "";  // as iLO shows an empty drive (null trips some clients)
    body["ImageName"] = "";
    body["Inserted"] = false;
    body["ConnectedVia"] = "NotConnected";
    body.erase("TransferProtocolType");
}

}  // namespace kiln::bmc
