// Redfish error bodies (DSP0266 "Error responses"):
//   {"error": {"code": <MessageId>, "message": <text>,
//              "@Message.ExtendedInfo": [<Message>...]}}
// Message ids come from DMTF's Base registry, plus iDRAC's RAC0218 for the
// session limit, because that is what clients meet in the field.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "firmware/bmc/http_exchange.h"

namespace kiln::bmc {

struct RedfishMessage {
    std::string id;  // "Base.1.8.PreconditionFailed"
    std::string message;
    std::string resolution;
    std::vector<std::string> args;
    std::string severity = "Critical";
};

BmcResponse error_response(int status, const RedfishMessage& message);
// The Message object (as in @Message.ExtendedInfo and Task.Messages).
nlohmann::json message_json(const RedfishMessage& message);

namespace messages {
RedfishMessage resource_missing_at_uri(const std::string& uri);
RedfishMessage no_valid_session();
RedfishMessage resource_at_uri_unauthorized(const std::string& uri);
RedfishMessage session_limit_exceeded();  // iDRAC RAC0218
RedfishMessage malformed_json(const std::string& detail);
RedfishMessage payload_too_large();
RedfishMessage property_missing(const std::string& property);
RedfishMessage property_not_writable(const std::string& property);
RedfishMessage property_unknown(const std::string& property);
RedfishMessage property_value_type_error(const std::string& value, const std::string& property);
RedfishMessage property_value_not_in_list(const std::string& value, const std::string& property);
RedfishMessage precondition_failed();
RedfishMessage success();
RedfishMessage operation_not_allowed(const std::string& detail);
RedfishMessage action_not_supported(const std::string& action);
RedfishMessage action_parameter_missing(const std::string& action, const std::string& parameter);
RedfishMessage action_parameter_value_not_in_list(const std::string& value, const std::string& parameter,
                                                  const std::string& action);
RedfishMessage internal_error(const std::string& detail);
RedfishMessage service_temporarily_unavailable(unsigned retry_after_s);
RedfishMessage unsupported_media_type();
RedfishMessage action_parameter_value_format_error(const std::string& value, const std::string& parameter,
                                                   const std::string& action);
RedfishMessage action_parameter_not_supported(const std::string& parameter, const std::string& action);
// Query parameters ($expand): not offered at all, offered but not in this
// form, or a $levels beyond the service's MaxLevels.
RedfishMessage query_not_supported();
RedfishMessage query_parameter_value_format_error(const std::string& value, const std::string& parameter);
RedfishMessage query_parameter_out_of_range(const std::string& value, const std::string& parameter,
                                            const std::string& range);

// DMTF's Update registry (Update.1.0), for Task.Messages.
RedfishMessage update_successful(const std::string& image, const std::string& target);
RedfishMessage await_to_activate(const std::string& image, const std::string& target);
RedfishMessage transfer_failed(const std::string& image, const std::string& detail);
RedfishMessage verification_failed(const std::string& image, const std::string& detail);
RedfishMessage apply_failed(const std::string& image, const std::string& target);
RedfishMessage no_targets_determined(const std::string& image);
RedfishMessage target_determined(const std::string& image, const std::string& target);
}  // namespace messages

}  // namespace kiln::bmc
