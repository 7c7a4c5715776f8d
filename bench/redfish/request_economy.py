#!/usr/bin/env python3
"""bench/redfish part (r): HTTP requests per node of the firmware stage's
flows, counted by kiln-bmc itself (/kiln-bmc/state "requests", every Redfish
request it received, logins and retries included), for kiln before and after
issue 14 item 7 (request economy), in the same run against the same
emulator:
  inventory   `kiln plan` of one node: observe (inventory, BIOS, registry)
  apply       `kiln apply --stage firmware` of one node: a BIOS firmware
              update + a BIOS attribute change, observe to verify
  latency     the same apply with every request delayed 300 ms
              (--fault-latency-ms): wall seconds
"Before" is a kiln binary built at an earlier commit (--baseline-kiln);
without one, only "after" is measured. Ratios, not absolute times, are
what to compare: the machine's speed cancels out of them.

Usage: bench/redfish/request_economy.py --build build [--baseline-kiln PATH]
       [--mockup DIR] [--latency-ms 300]
Prints {"request_economy": {...}} on stdout.
"""
import argparse
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

PASSWORD = "bench-requests"  # emulator test password, passed by environment
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_bmcs(build, mockup, count, workdir, extra):
    out = open(os.path.join(workdir, "bmc-%d.out" % len(os.listdir(workdir))), "w+")
    env = dict(os.environ, KILN_BMC_PASSWORD=PASSWORD)
    proc = subprocess.Popen([os.path.join(build, "kiln-bmc"), "--mockup", mockup, "--port", "0", "--bmc-count",
                             str(count), "--task-seconds", "1", "--restart-seconds", "1"] + extra,
                            stdout=out, stderr=subprocess.STDOUT, env=env)
    for _ in range(600):
        out.seek(0)
        urls = re.findall(r"^bmc \d+: (\S+)", out.read(), re.M)
        if len(urls) >= count:
            return proc, urls
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    out.seek(0)
    sys.exit("kiln-bmc did not come up:\n" + out.read())


def state(url):
    return json.load(urllib.request.urlopen(url + "/kiln-bmc/state", timeout=30))


def bios_attribute(url, system, name):
    auth = "Basic " + base64.b64encode(("admin:" + PASSWORD).encode()).decode()
    req = urllib.request.Request(url + system, headers={"Authorization": auth})
    bios = json.load(urllib.request.urlopen(req, timeout=30))["Bios"]["@odata.id"]
    req = urllib.request.Request(url + bios, headers={"Authorization": auth})
    return json.load(urllib.request.urlopen(req, timeout=30))["Attributes"][name]


def write_fleet(workdir, name, url, version, attribute):
    d = os.path.join(workdir, name)
    os.makedirs(os.path.join(d, "pipelines"))
    os.makedirs(os.path.join(d, "artifacts"))
    image = ("KILN-FW BIOS %s (11/01/2026)\n" % version).encode() + os.urandom(1 << 20)
    attr_name, attr_value = attribute.split("=", 1)
    with open(os.path.join(d, "artifacts", "bios.bin"), "wb") as f:
        f.write(image)
    with open(os.path.join(d, "pipelines", "fw.toml"), "w") as f:
        f.write('schema = 1\nname = "fw"\ndescription = "firmware only"\nstages = ["firmware"]\n')
    with open(os.path.join(d, "fleet.toml"), "w") as f:
        f.write('schema = 1\n[fleet]\nname = "bench"\n[limits]\nparallel = 4\nper_bmc = 1\nretries = 0\n'
                '[[racks]]\nname = "r1"\n'
                '[firmware.p]\n[[firmware.p.components]]\nname = "BIOS"\nversion = "%s"\n'
                'artifact = "artifacts/bios.bin"\nsha256 = "%s"\n'
                '[bios.b]\nattributes = { %s = "%s" }\n'
                '[defaults]\nrole = "fw"\nfirmware = "p"\nbios = "b"\n'
                'bmc = { username = "admin", password = "env:KILN_BMC_PASSWORD" }\n'
                '[[nodes]]\nname = "n0"\nrack = "r1"\nbmc = { url = "%s" }\n' % (version, hashlib.sha256(image).hexdigest(), attr_name, attr_value, url))
    return os.path.join(d, "fleet.toml")


def run_kiln(kiln, args):
    env = dict(os.environ, KILN_BMC_PASSWORD=PASSWORD)
    start = time.monotonic()
    p = subprocess.run([kiln] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)
    return p.returncode, time.monotonic() - start, p.stdout.decode(errors="replace")


def flow_notes(kiln, fleet):
    """The stage's own per-flow tally ("BMC requests: bios 13, ..."), when it writes one."""
    rc, _, out = run_kiln(kiln, ["history", fleet, "n0"])
    m = re.search(r"BMC requests: ([^()]*) \((\d+) in all\)", out)
    if rc != 0 or not m:
        return None
    return {k: int(v) for k, v in (p.split(" ") for p in m.group(1).split(", "))}


def measure(kiln, urls, latency_url, workdir, label, a):
    out = {}
    fleet = write_fleet(workdir, label + "-plan", urls[0], a.bios_version, a.attribute)
    rc, _, text = run_kiln(kiln, ["plan", fleet])
    if rc not in (0, 2):  # plan exits 2 when there is work to do on some versions; 0 otherwise
        sys.exit("%s: kiln plan failed (%d):\n%s" % (label, rc, text))
    out["inventory_requests"] = state(urls[0])["requests"]

    fleet = write_fleet(workdir, label + "-apply", urls[1], a.bios_version, a.attribute)
    rc, seconds, text = run_kiln(kiln, ["apply", fleet, "--stage", "firmware"])
    if rc != 0:
        sys.exit("%s: kiln apply failed (%d):\n%s" % (label, rc, text))
    s = state(urls[1])
    out["apply_requests"] = s["requests"]
    out["apply_flashed_exactly_once"] = len(s["updates"]) == 1
    name, value = a.attribute.split("=", 1)
    out["apply_bios_applied"] = bios_attribute(urls[1], a.system, name) == value
    out["apply_flows"] = flow_notes(kiln, fleet)

    fleet = write_fleet(workdir, label + "-latency", latency_url, a.bios_version, a.attribute)
    rc, seconds, text = run_kiln(kiln, ["apply", fleet, "--stage", "firmware"])
    if rc != 0:
        sys.exit("%s: kiln apply at latency failed (%d):\n%s" % (label, rc, text))
    out["latency_apply_seconds"] = seconds
    out["latency_apply_requests"] = state(latency_url)["requests"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--baseline-kiln", default="")
    ap.add_argument("--baseline-label", default="")
    ap.add_argument("--mockup", default=os.path.join(ROOT, "..", "shared", "redfish", "mockups",
                                                     "dmtf-public-rackmount1"))
    ap.add_argument("--system", default="/redfish/v1/Systems/437XR1138R2")
    ap.add_argument("--bios-version", default="P79 v1.50", help="the BIOS release flashed")
    ap.add_argument("--attribute", default="ProcHyperthreading=Disabled", help="the BIOS attribute set, NAME=VALUE")
    ap.add_argument("--latency-ms", type=int, default=300)
    a = ap.parse_args()
    variants = [("after", os.path.join(a.build, "kiln"))]
    if a.baseline_kiln:
        variants.insert(0, ("before", a.baseline_kiln))
    with tempfile.TemporaryDirectory() as workdir:
        bmcdir = os.path.join(workdir, "bmc")
        os.makedirs(bmcdir)
        n = len(variants)
        plain, urls = start_bmcs(a.build, a.mockup, 2 * n, bmcdir, [])
        slow, slow_urls = start_bmcs(a.build, a.mockup, n, bmcdir, ["--fault-latency-ms", str(a.latency_ms)])
        try:
            result = {"tree": os.path.basename(os.path.normpath(a.mockup)), "latency_ms": a.latency_ms,
                      "changes": "BIOS firmware update + BIOS attribute, one node",
                      "counted_by": "kiln-bmc /kiln-bmc/state requests (every Redfish request received)"}
            for i, (label, kiln) in enumerate(variants):
                result[label] = measure(kiln, urls[2 * i:2 * i + 2], slow_urls[i], workdir, label, a)
            if a.baseline_label:
                result["before_kiln"] = a.baseline_label
            if "before" in result:
                b, f = result["before"], result["after"]
                result["ratio_before_over_after"] = {
                    "inventory_requests": b["inventory_requests"] / f["inventory_requests"],
                    "apply_requests": b["apply_requests"] / f["apply_requests"],
                    "latency_apply_seconds": b["latency_apply_seconds"] / f["latency_apply_seconds"],
                }
        finally:
            for p in (plain, slow):
                p.terminate()
                p.wait()
    print(json.dumps({"request_economy": result}))


if __name__ == "__main__":
    main()
