#!/usr/bin/env python3
"""Drives a kiln-bmc BMC's firmware update with python3-sushy.

Usage: sushy_update.py BASE_URL USER IMAGE_URI TARGET
(password: $KILN_BMC_PASSWORD; TARGET: a FirmwareInventory member URI)
Lists the systems, reads the BIOS, sets a one-time boot override to Cd,
runs UpdateService.SimpleUpdate with IMAGE_URI on TARGET, follows the task
monitor from the Location header until it stops answering 202, reads the
target's version back, and prints one JSON object for the C++ test.
"""
import json
import os
import sys
import time

import sushy
import urllib3
from sushy import auth as sushy_auth
from sushy import taskmonitor

urllib3.disable_warnings()


def main():
    base_url, user, image_uri, target = sys.argv[1:5]
    password = os.environ["KILN_BMC_PASSWORD"]
    out = {}
    session = sushy_auth.SessionAuth(username=user, password=password)
    root = sushy.Sushy(base_url + "/redfish/v1", auth=session, verify=False)
    out["systems"] = sorted(root.get_system_collection().members_identities)
    system = root.get_system()
    out["bios_attribute_count"] = len(system.bios.attributes)

    system.set_system_boot_options(target=sushy.BootSource.CD,
                                   enabled=sushy.BootSourceOverrideEnabled.ONCE)
    system.refresh()
    out["boot_target"] = system.boot.target.value if system.boot.target else None
    out["boot_enabled"] = system.boot.enabled.value if system.boot.enabled else None

    updates = root.get_update_service()
    inventory = updates.firmware_inventory
    before = inventory.get_member(target)
    out["version_before"] = before.version

    started = updates.simple_update(image_uri, targets=[target])
    location = started.response.headers["Location"]
    out["accepted_status"] = started.response.status_code
    # Sushy.get_task_monitor loads message registries Debian's package does
    # not ship, and UpdateService.get_task_monitor is broken in 4.3: build
    # the monitor as sushy does inside.
    monitor = taskmonitor.TaskMonitor(root._conn, location, redfish_version=root.redfish_version)
    # TaskMonitor.wait() passes Retry-After to time.sleep() as a string in
    # 4.3, so poll as it would, honouring Retry-After, with a deadline.
    deadline = time.monotonic() + 120
    out["polls"] = 0
    while monitor.check_is_processing:
        out["polls"] += 1
        if time.monotonic() > deadline:
            raise SystemExit("task monitor still 202 after 120 s")
        time.sleep(float(monitor.sleep_for))
    final = monitor.response.json()
    out["task_state"] = final.get("TaskState")
    out["task_status"] = final.get("TaskStatus")
    out["messages"] = [m.get("MessageId") for m in final.get("Messages", [])]

    after = inventory.get_member(target)
    after.refresh()
    out["version_after"] = after.version
    system.refresh()
    out["bios_version"] = system.bios_version
    session.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
