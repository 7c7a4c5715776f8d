#!/usr/bin/env python3
"""python3-sushy against kiln-bmc in each vendor mode (issue 14 item 3).

Usage: sushy_vendor_modes.py KILN_BMC MOCKUP_DIR
Starts kiln-bmc --vendor V on MOCKUP_DIR (DMTF's rack-mount tree) for each
mode and drives it the way a sushy user would, checking that the real
client sees the vendor's behaviour:
  dell      SimpleUpdate -> task Running with Oem.Dell.JobState Scheduled
            -> ComputerSystem.Reset -> job Completed -> the version read back
  hpe       SimpleUpdate -> the version in iLO's form ("P79 v1.50")
  openbmc   SimpleUpdate refused: 400, Base ActionParameterNotSupported
  lenovo    Bios links no settings object; <Bios>/Pending takes the PATCH
            and the reset applies it
  ami       no settings object: PATCH to the DMTF settings URI is 404, the
            Bios itself takes the PATCH, and the next reset applies it
Prints "kiln-test-skipped: ..." and exits 0 when sushy cannot be imported.
"""
import http.server
import json
import os
import subprocess
import sys
import threading
import time

try:
    import sushy
    from sushy import auth as sushy_auth
    from sushy import exceptions as sushy_exc
except ImportError as e:  # the ctest entry reports this as skipped
    print("kiln-test-skipped: python3-sushy is not installed (%s)" % e)
    sys.exit(0)

PASSWORD = "vendor-mode-pass"
SYSTEM = "/redfish/v1/Systems/437XR1138R2"
BIOS_MEMBER = "/redfish/v1/UpdateService/FirmwareInventory/BIOS"
IMAGE = b"KILN-FW BIOS 1.50\n" + b"b" * 4096


class ImageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(IMAGE)))
        self.end_headers()
        self.wfile.write(IMAGE)

    def log_message(self, *args):
        pass


def image_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ImageHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d/bios.bin" % server.server_address[1]


class KilnBmc:
    def __init__(self, binary, mockup, vendor):
        env = dict(os.environ, KILN_BMC_PASSWORD=PASSWORD)
        self.proc = subprocess.Popen(
            [binary, "--mockup", mockup, "--port", "0", "--vendor", vendor, "--task-seconds", "0.3"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
        line = self.proc.stdout.readline()  # "bmc 0: http://127.0.0.1:PORT (...)"
        if not line.startswith("bmc 0: "):
            raise SystemExit("kiln-bmc did not start: " + line)
        self.url = line.split()[2]

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def connect(url):
    auth = sushy_auth.SessionAuth(username="admin", password=PASSWORD)
    return sushy.Sushy(url + "/redfish/v1", auth=auth, verify=False)


def get(root, path):
    return root._conn.get(path=path).json()


def poll_monitor(root, location, until, deadline_s=60):
    """GETs the task monitor until until(body, status) holds."""
    deadline = time.monotonic() + deadline_s
    while True:
        r = root._conn.get(path=location)
        if until(r.json(), r.status_code):
            return r.json()
        if time.monotonic() > deadline:
            raise SystemExit("task %s never got there: %s" % (location, r.text))
        time.sleep(0.1)


def check(out, name, got, want):
    out.setdefault("checks", []).append(name)
    if got != want:
        out.setdefault("failures", []).append("%s: got %r, want %r" % (name, got, want))


def dell(root, image_uri, out):
    updates = root.get_update_service()
    started = updates.simple_update(image_uri, targets=[BIOS_MEMBER])
    location = started.response.headers["Location"]
    task = poll_monitor(root, location,
                        lambda b, s: b.get("Oem", {}).get("Dell", {}).get("JobState") == "Scheduled")
    check(out, "dell task Running while its job waits", task["TaskState"], "Running")
    job_id = task["Oem"]["Dell"]["Id"]
    check(out, "dell job id", job_id.startswith("JID_"), True)
    job_uri = "/redfish/v1/Managers/BMC/Oem/Dell/Jobs/" + job_id
    check(out, "dell job Scheduled before the reset", get(root, job_uri)["JobState"], "Scheduled")
    check(out, "dell version unchanged before the reset",
          updates.firmware_inventory.get_member(BIOS_MEMBER).version, "P79 v1.45")
    root.get_system(SYSTEM).reset_system(sushy.ResetType.FORCE_RESTART)
    check(out, "dell job Completed after the reset", get(root, job_uri)["JobState"], "Completed")
    check(out, "dell version after the reset",
          updates.firmware_inventory.get_member(BIOS_MEMBER).version, "1.50")


def hpe(root, image_uri, out):
    updates = root.get_update_service()
    started = updates.simple_update(image_uri, targets=[BIOS_MEMBER])
    poll_monitor(root, started.response.headers["Location"], lambda b, s: s == 200)
    check(out, "hpe version in iLO's form", updates.firmware_inventory.get_member(BIOS_MEMBER).version,
          "P79 v1.50")


def openbmc(root, image_uri, out):
    try:
        root.get_update_service().simple_update(image_uri, targets=[BIOS_MEMBER])
        check(out, "openbmc refuses SimpleUpdate", "accepted", "refused")
    except sushy_exc.BadRequestError as e:
        ids = [m.get("MessageId", "") for m in e.body.get("@Message.ExtendedInfo", [])] if e.body else []
        check(out, "openbmc refuses SimpleUpdate",
              any(i.endswith("ActionParameterNotSupported") for i in ids), True)


def lenovo(root, image_uri, out):
    system = root.get_system(SYSTEM)
    check(out, "lenovo Bios links no settings object", "@Redfish.Settings" in get(root, SYSTEM + "/Bios"), False)
    root._conn.patch(SYSTEM + "/Bios/Pending", data={"Attributes": {"ProcHyperthreading": "Disabled"}})
    try:
        root._conn.patch(SYSTEM + "/Bios", data={"Attributes": {"ProcHyperthreading": "Disabled"}})
        check(out, "lenovo Bios itself is read-only", "accepted", "405")
    except sushy_exc.HTTPError as e:
        check(out, "lenovo Bios itself is read-only", e.status_code, 405)
    system.reset_system(sushy.ResetType.FORCE_RESTART)
    system.bios.refresh()
    check(out, "lenovo pending applied at the reset", system.bios.attributes["ProcHyperthreading"], "Disabled")


def ami(root, image_uri, out):
    system = root.get_system(SYSTEM)
    try:
        root._conn.patch(SYSTEM + "/Bios/Settings", data={"Attributes": {"ProcHyperthreading": "Disabled"}})
        check(out, "ami has no settings object", "accepted", "404")
    except sushy_exc.ResourceNotFoundError:
        check(out, "ami has no settings object", 404, 404)
    root._conn.patch(SYSTEM + "/Bios", data={"Attributes": {"ProcHyperthreading": "Disabled"}})
    system.bios.refresh()
    check(out, "ami Bios takes the PATCH, unchanged until a reset",
          system.bios.attributes["ProcHyperthreading"], "Enabled")
    system.reset_system(sushy.ResetType.FORCE_RESTART)
    system.bios.refresh()
    check(out, "ami PATCH applied at the reset", system.bios.attributes["ProcHyperthreading"], "Disabled")


def main():
    binary, mockup = sys.argv[1:3]
    server, image_uri = image_server()
    out = {}
    for vendor, flow in (("dell", dell), ("hpe", hpe), ("openbmc", openbmc), ("lenovo", lenovo), ("ami", ami)):
        bmc = KilnBmc(binary, mockup, vendor)
        try:
            root = connect(bmc.url)
            flow(root, image_uri, out)
        finally:
            bmc.close()
    server.shutdown()
    print(json.dumps(out, indent=1))
    sys.exit(1 if out.get("failures") else 0)


if __name__ == "__main__":
    main()
