#!/usr/bin/env python3
"""Drives a kiln-bmc BMC with python3-sushy, the Redfish client Ironic uses.

Usage: sushy_drive.py BASE_URL USER ATTRIBUTE VALUE [CA_PEM]
(password: $KILN_BMC_PASSWORD; CA_PEM: verify HTTPS against it, else don't verify)
Logs in with a session, reads the system and its BIOS, sets one BIOS
attribute, resets the system, reads it all back, logs out, and prints one
JSON object for the C++ test to check.
"""
import json
import os
import sys

import requests
import sushy
import urllib3
from sushy import auth as sushy_auth

urllib3.disable_warnings()


def sessions_open(base_url, user, password, verify):
    r = requests.get(base_url + "/redfish/v1/SessionService/Sessions",
                     auth=(user, password), verify=verify, timeout=10)
    r.raise_for_status()
    return r.json()["Members@odata.count"]


def main():
    base_url, user, attribute, value = sys.argv[1:5]
    verify = sys.argv[5] if len(sys.argv) > 5 else False
    password = os.environ["KILN_BMC_PASSWORD"]
    # requests lets these override a session's verify=False (psf/requests#3829).
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    out = {}
    # Session auth on its own: a fallback to Basic would hide a broken login.
    session = sushy_auth.SessionAuth(username=user, password=password)
    root = sushy.Sushy(base_url + "/redfish/v1", auth=session, verify=verify)
    out["redfish_version"] = root.redfish_version
    system = root.get_system()
    out["system_id"] = system.identity
    out["power_before"] = str(system.power_state.value if hasattr(system.power_state, "value") else system.power_state)
    out["sessions_during"] = sessions_open(base_url, user, password, verify)

    bios = system.bios
    out["attr_before"] = bios.attributes.get(attribute)
    bios.set_attribute(attribute, value)
    out["pending"] = bios.pending_attributes.get(attribute)
    out["attr_still"] = bios.attributes.get(attribute)  # not yet: needs a reset

    system.reset_system(sushy.ResetType.FORCE_RESTART)
    system.refresh()
    bios = system.bios
    bios.refresh()
    out["attr_after"] = bios.attributes.get(attribute)
    out["pending_after"] = dict(bios.pending_attributes)

    system.reset_system(sushy.ResetType.FORCE_OFF)
    system.refresh()
    out["power_after_off"] = str(system.power_state.value if hasattr(system.power_state, "value") else system.power_state)
    try:
        system.reset_system("Bogus")
        out["bogus_reset"] = "accepted"
    except sushy.exceptions.SushyError as e:
        out["bogus_reset"] = type(e).__name__

    session.close()
    out["sessions_after_logout"] = sessions_open(base_url, user, password, verify)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
