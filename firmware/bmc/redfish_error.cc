#include "firmware/bmc/redfish_error.h"

#include <nlohmann/json.hpp>

#include "firmware/bmc/json_reader.h"

namespace kiln::bmc {

namespace {
const std::string kBase = "Base.1.8.";

RedfishMessage base(const std::string& name, std::string text, std::string resolution,
                    std::vector<std::string> args = {}) {
    return RedfishMessage{kBase + name, std::move(text), std::move(resolution), std::move(args)};
}
}  // namespace

nlohmann::json message_json(const RedfishMessage& m) {
    return {
        {"@odata.type", "#Message.v1_1_1.Message"},
        {"MessageId", m.id},
        {"Message", m.message},
        {"MessageArgs", m.args},
        {"Severity", m.severity},
        {"Resolution", m.resolution},
    };
}

BmcResponse error_response(int status, const RedfishMessage& m) {
    nlohmann::json info = message_json(m);
    nlohmann::json body = {{"error", {{"code", m.id}, {"message", m.message}, {"@Message.ExtendedInfo", {info}}}}};
    BmcResponse r;
    r.status = status;
    r.body = dump_json(body);
    return r;
}

namespace messages {

RedfishMessage resource_missing_at_uri(const std::string& uri) {
    return base("ResourceMissingAtURI", "The resource at the URI " + uri + " was not found.",
                "Place a valid resource at the URI or correct the URI and resubmit the request.", {uri});
}

RedfishMessage no_valid_session() {
    return base("NoValidSession", "There is no valid session established with the implementation.",
                "Establish a session before attempting any operations.");
}

RedfishMessage resource_at_uri_unauthorized(const std::string& uri) {
    return base("ResourceAtUriUnauthorized",
                "While accessing the resource at " + uri + ", the service received an authorization error.",
                "Ensure that the appropriate access is provided for the service in order for it to access the URI.",
                {uri, "Unauthorized"});
}

RedfishMessage session_limit_exceeded() {
    return RedfishMessage{"IDRAC.2.8.RAC0218",
                          "The maximum number of user sessions is reached.",
                          "Close one or more sessions and retry the operation.",
                          {}};
}

RedfishMessage malformed_json(const std::string& detail) {
    return base("MalformedJSON", "The request body submitted was malformed JSON and could not be parsed: " + detail,
                "Ensure that the request body is valid JSON and resubmit the request.");
}

RedfishMessage payload_too_large() {
    return base("PayloadTooLarge", "The supplied payload exceeds the maximum size supported by the service.",
                "Correct the request body and resubmit the request if it failed.");
}

RedfishMessage property_missing(const std::string& property) {
    return base(
        "PropertyMissing", "The property " + property + " is a required property and must be included in the request.",
        "Ensure that the property is in the request body and has a valid value and resubmit the request.", {property});
}

RedfishMessage property_not_writable(const std::string& property) {
    return base(
        "PropertyNotWritable", "The property " + property + " is a read only property and cannot be assigned a value.",
        "Remove the property from the request body and resubmit the request if the operation failed.", {property});
}

RedfishMessage property_unknown(const std::string& property) {
    return base("PropertyUnknown",
                "The property " + property + " is not in the list of valid properties for the resource.",
                "Remove the unknown property from the request body and resubmit the request if the operation failed.",
                {property});
}

RedfishMessage property_value_type_error(const std::string& value, const std::string& property) {
    return base("PropertyValueTypeError",
                "The value " + value + " for the property " + property + " is not a type that the property can accept.",
                "Correct the value for the property in the request body and resubmit the request.", {value, property});
}

RedfishMessage property_value_not_in_list(const std::string& value, const std::string& property) {
    return base(
        "PropertyValueNotInList",
        "The value " + value + " for the property " + property + " is not in the list of acceptable values.",
        "Choose a value from the enumeration list that the implementation can support and resubmit the request.",
        {value, property});
}

RedfishMessage precondition_failed() {
    return base("PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.",
                "Try the operation again using the appropriate ETag.");
}

RedfishMessage success() {
    RedfishMessage m = base("Success", "The request completed successfully.", "None.");
    m.severity = "OK";
    return m;
}

RedfishMessage operation_not_allowed(const std::string& detail) {
    return base("OperationNotAllowed", "The HTTP method is not allowed on this resource: " + detail, "None.");
}

RedfishMessage action_not_supported(const std::string& action) {
    return base("ActionNotSupported", "The action " + action + " is not supported by the resource.",
                "The action supplied cannot be resubmitted to the implementation.", {action});
}

RedfishMessage action_parameter_missing(const std::string& action, const std::string& parameter) {
    return base("ActionParameterMissing",
                "The action " + action + " requires the parameter " + parameter + " to be present in the request body.",
                "Supply the action with the required parameter in the request body when the request is resubmitted.",
                {action, parameter});
}

RedfishMessage action_parameter_value_not_in_list(const std::string& value, const std::string& parameter,
                                                  const std::string& action) {
    return base(
        "ActionParameterValueNotInList",
        "The value " + value + " for the parameter " + parameter + " in the action " + action +
            " is not in the list of acceptable values.",
        "Choose a value from the enumeration list that the implementation can support and resubmit the request.",
        {value, parameter, action});
}

RedfishMessage query_not_supported() {
    return base("QueryNotSupported", "Querying is not supported by the implementation.",
                "Remove the query parameters and resubmit the request if the operation failed.");
}

RedfishMessage query_parameter_value_format_error(const std::string& value, const std::string& parameter) {
    return base("QueryParameterValueFormatError",
                "The value " + value + " for the parameter " + parameter +
                    " is of a different format than the parameter can accept.",
                "Correct the value for the query parameter in the request and resubmit the request if the operation "
                "failed.",
                {value, parameter});
}

RedfishMessage query_parameter_out_of_range(const std::string& value, const std::string& parameter,
                                            const std::string& range) {
    return base("QueryParameterOutOfRange",
                "The value " + value + " for the query parameter " + parameter + " is out of range " + range + ".",
                "Reduce the value for the query parameter to a value that is within range.", {value, parameter, range});
}

RedfishMessage internal_error(const std::string& detail) {
    return base("InternalError", "The request failed due to an internal service error: " + detail,
                "Resubmit the request. If the problem persists, consider resetting the service.");
}

RedfishMessage service_temporarily_unavailable(unsigned retry_after_s) {
    const std::string s = std::to_string(retry_after_s);
    return base("ServiceTemporarilyUnavailable", "The service is temporarily unavailable.  Retry in " + s + " seconds.",
                "Wait for the indicated retry duration and retry the operation.", {s});
}

RedfishMessage unsupported_media_type() {
    return base("UnsupportedMediaType", "The request specifies a Content-Type for the body that is not supported.",
                "Resubmit the request with a supported Content-Type (multipart/form-data).");
}

RedfishMessage action_parameter_value_format_error(const std::string& value, const std::string& parameter,
                                                   const std::string& action) {
    return base("ActionParameterValueFormatError",
                "The value " + value + " for the parameter " + parameter + " in the action " + action +
                    " is of a different format than the parameter can accept.",
                "Correct the value for the parameter in the request body and resubmit the request if the "
                "operation failed.",
                {value, parameter, action});
}

RedfishMessage action_parameter_not_supported(const std::string& parameter, const std::string& action) {
    return base(
        "ActionParameterNotSupported",
        "The parameter " + parameter + " for the action " + action + " is not supported on the target resource.",
        "Remove the parameter supplied and resubmit the request if the operation failed.", {parameter, action});
}

namespace {
RedfishMessage update(const std::string& name, std::string text, std::string resolution, std::vector<std::string> args,
                      std::string severity) {
    RedfishMessage m{"Update.1.0." + name, std::move(text), std::move(resolution), std::move(args)};
    m.severity = std::move(severity);
    return m;
}
}  // namespace

RedfishMessage update_successful(const std::string& image, const std::string& target) {
    return update("UpdateSuccessful", "Device '" + target + "' successfully updated with '" + image + "'.", "None.",
                  {target, image}, "OK");
}

RedfishMessage await_to_activate(const std::string& image, const std::string& target) {
    return update("AwaitToActivate",
                  "Awaiting for an action to proceed with activating image '" + image + "' on '" + target + "'.",
                  "Perform the requested action to advance the update operation (reset the system).", {image, target},
                  "OK");
}

RedfishMessage transfer_failed(const std::string& image, const std::string& detail) {
    return update("TransferFailed", "Transfer of image '" + image + "' failed: " + detail + ".",
                  "Check that the image URI is reachable from the BMC and retry.", {image, detail}, "Critical");
}

RedfishMessage verification_failed(const std::string& image, const std::string& detail) {
    return update("VerificationFailed", "Verification of image '" + image + "' failed: " + detail + ".",
                  "Check the image and retry.", {image, detail}, "Critical");
}

RedfishMessage apply_failed(const std::string& image, const std::string& target) {
    return update("ApplyFailed", "Installation of image '" + image + "' to '" + target + "' failed.",
                  "Check the image and the target and retry the update.", {image, target}, "Critical");
}

RedfishMessage no_targets_determined(const std::string& image) {
    return update("NoTargetsDetermined", "No target device will be updated with image '" + image + "'.",
                  "Check the image and the Targets of the request.", {image}, "Warning");
}

RedfishMessage target_determined(const std::string& image, const std::string& target) {
    return update("TargetDetermined", "The target device '" + target + "' will be updated with image '" + image + "'.",
                  "None.", {target, image}, "OK");
}

}  // namespace messages
}  // namespace kiln::bmc
