#!/usr/bin/env python3
"""The inventory walk kiln's firmware stage observes, done with python3-sushy.

Usage: sushy_walk.py BASE_URL USER ITERATIONS [SYSTEM_URI]
(password: $KILN_BMC_PASSWORD)
Per iteration, with fresh resource objects (sushy re-reads each): the
systems and the node's system (SYSTEM_URI, else the first: BiosVersion,
power, boot), its Bios and the pending settings where it has one, the
managers and the first manager's FirmwareVersion, the UpdateService and
every FirmwareInventory member's Version where there is one, every chassis
and its NetworkAdapters. One session for all. Prints {"seconds", "walks"}.
"""
import json
import os
import sys
import time

import sushy
import urllib3
from sushy import auth as sushy_auth

urllib3.disable_warnings()


def walk(root, system_uri=None):
    out = {}
    systems = root.get_system_collection()
    system = systems.get_member(system_uri) if system_uri else systems.get_members()[0]
    out["bios_version"] = system.bios_version
    out["power"] = str(system.power_state)
    out["boot"] = str(system.boot.target)
    try:
        bios = system.bios
        out["attributes"] = len(bios.attributes)
        out["pending"] = len(bios.pending_attributes)
    except sushy.exceptions.MissingAttributeError:  # a blade's system: no Bios
        out["attributes"] = None
    manager = root.get_manager_collection().get_members()[0]
    out["bmc_version"] = manager.firmware_version
    try:
        versions = [item.version for item in root.get_update_service().firmware_inventory.get_members()]
    except sushy.exceptions.MissingAttributeError:  # no UpdateService
        versions = []
    out["components"] = len(versions)
    nics = 0
    for chassis in root.get_chassis_collection().get_members():
        try:
            adapters = chassis.network_adapters
        except sushy.exceptions.MissingAttributeError:
            continue
        if adapters is not None:
            nics += len(adapters.get_members())
    out["network_adapters"] = nics
    return out


def main():
    base_url, user, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
    system_uri = sys.argv[4] if len(sys.argv) > 4 else None
    password = os.environ["KILN_BMC_PASSWORD"]
    auth = sushy_auth.SessionAuth(username=user, password=password)
    root = sushy.Sushy(base_url + "/redfish/v1", auth=auth, verify=False)
    last = walk(root, system_uri)  # warm-up: login, connection
    start = time.monotonic()
    for _ in range(iterations):
        last = walk(root, system_uri)  # get_*() build fresh resource objects: every GET is made again
    seconds = time.monotonic() - start
    print(json.dumps({"seconds": seconds, "walks": iterations, "last": last}))


if __name__ == "__main__":
    main()
