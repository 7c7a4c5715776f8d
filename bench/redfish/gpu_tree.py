#!/usr/bin/env python3
"""A many-GPU Redfish tree for the inventory walk: a copy of a mockup with
COUNT GPU firmware members of one name added to its FirmwareInventory, the
shape tests/firmware/firmware_fixture.cc's gpu_tree() gives the firmware
tests (an HGX board lists each GPU's firmware as its own member, all named
alike). Ours, not a capture: the members' fields are the DMTF
SoftwareInventory schema's.

Usage: gpu_tree.py SRC_MOCKUP DST COUNT
"""
import json
import os
import shutil
import sys


def main():
    src, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    shutil.copytree(src, dst)
    inv_dir = os.path.join(dst, "UpdateService", "FirmwareInventory")
    with open(os.path.join(inv_dir, "index.json"), encoding="utf-8") as f:
        coll = json.load(f)
    for i in range(1, count + 1):
        ident = f"GPU_SXM_{i}"
        uri = f"/redfish/v1/UpdateService/FirmwareInventory/{ident}"
        os.makedirs(os.path.join(inv_dir, ident))
        member = {"@odata.type": "#SoftwareInventory.v1_9_0.SoftwareInventory", "@odata.id": uri, "Id": ident,
                  "Name": "GPU SXM Firmware", "Updateable": True, "Version": "92.00.19.00.11"}
        with open(os.path.join(inv_dir, ident, "index.json"), "w", encoding="utf-8") as f:
            json.dump(member, f, indent=2)
        coll["Members"].append({"@odata.id": uri})
    coll["Members@odata.count"] = len(coll["Members"])
    with open(os.path.join(inv_dir, "index.json"), "w", encoding="utf-8") as f:
        json.dump(coll, f, indent=2)


if __name__ == "__main__":
    main()
