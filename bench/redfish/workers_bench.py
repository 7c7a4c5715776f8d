#!/usr/bin/env python3
"""bench/redfish (w): N emulated BMCs through the firmware stage by 4 `kiln worker`
processes sharing one PostgreSQL, against the same N by one `kiln apply` on the
SQLite journal, in the same run (issue 17's firmware benchmark).

Each side gets its own kiln-bmc process serving N BMCs (the DMTF rack-mount
tree, 1 s update tasks, 1 s restarts) and the same change per BMC: a BIOS
firmware update and one BIOS attribute. Afterwards every BMC is read back: one
update each, the attribute applied. Writes wall times, their ratio, peak RSS
per kiln process, the peak number of kiln connections to the database and the
read-back counts as JSON on stdout.

The database is the private cluster scripts/postgres.sh starts (KILN_PG_DIR,
KILN_PG_PORT in the environment, set by bench/redfish/run.sh).
"""
import argparse
import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.request


def start_bmcs(kiln_bmc, mockup, count, log, per_process=1000, task_seconds=1):
    """`count` BMCs, `per_process` to a kiln-bmc process."""
    procs, urls = [], []
    for k, first in enumerate(range(0, count, per_process)):
        n = min(per_process, count - first)
        path = "%s.%d" % (log, k)
        out = open(path, "w")
        p = subprocess.Popen([kiln_bmc, "--mockup", mockup, "--port", "0", "--bmc-count", str(n),
                              "--task-seconds", str(task_seconds), "--restart-seconds", "1"], stdout=out,
                             stderr=subprocess.STDOUT)
        procs.append(p)
        deadline = time.monotonic() + 600
        while True:
            found = re.findall(r"^bmc \d+: (\S+)", open(path).read(), re.M)
            if len(found) >= n:
                urls += found[:n]
                break
            if p.poll() is not None or time.monotonic() > deadline:
                for q in procs:
                    q.kill()
                sys.exit("kiln-bmc did not bring up %d BMCs: %s" % (n, open(path).read()[-2000:]))
            time.sleep(0.2)
    return procs, urls


def write_fleet(folder, urls, parallel=64, image_bytes=1 << 20, bios=True):
    os.makedirs(os.path.join(folder, "pipelines"), exist_ok=True)
    os.makedirs(os.path.join(folder, "artifacts"), exist_ok=True)
    image = b"KILN-FW BIOS P79 v1.50 (11/01/2026)\n" + os.urandom(image_bytes)
    with open(os.path.join(folder, "artifacts", "bios.bin"), "wb") as f:
        f.write(image)
    import hashlib
    sha = hashlib.sha256(image).hexdigest()
    with open(os.path.join(folder, "pipelines", "fw.toml"), "w") as f:
        f.write('schema = 1\nname = "fw"\ndescription = "firmware only"\nstages = ["firmware"]\n')
    lines = ['schema = 1', '[fleet]', 'name = "bench-workers"', '[limits]', 'parallel = %d' % parallel,
             'per_bmc = 1', 'retries = 2', 'backoff_initial = "1s"', 'backoff_max = "5s"', '[[racks]]',
             'name = "r1"', '[firmware.p]', '[[firmware.p.components]]', 'name = "BIOS"', 'version = "P79 v1.50"',
             'artifact = "artifacts/bios.bin"', 'sha256 = "%s"' % sha]
    if bios:
        lines += ['[bios.b]', 'attributes = { ProcHyperthreading = "Disabled" }']
    lines += ['[defaults]', 'role = "fw"', 'firmware = "p"'] + (['bios = "b"'] if bios else []) + [
        'bmc = { username = "admin", password = "env:KILN_BMC_PASSWORD" }']
    for i, u in enumerate(urls):
        lines += ['[[nodes]]', 'name = "n%05d"' % i, 'rack = "r1"', 'bmc = { url = "%s" }' % u]
    path = os.path.join(folder, "fleet.toml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def read_back(urls, bios=True):
    auth = "Basic " + base64.b64encode(("admin:" + os.environ["KILN_BMC_PASSWORD"]).encode()).decode()
    once = applied = 0
    for u in urls:
        state = json.load(urllib.request.urlopen(u + "/kiln-bmc/state", timeout=10))
        once += len(state["updates"]) == 1
        if not bios:
            continue
        req = urllib.request.Request(u + "/redfish/v1/Systems/437XR1138R2/Bios", headers={"Authorization": auth})
        applied += json.load(urllib.request.urlopen(req, timeout=10))["Attributes"]["ProcHyperthreading"] == "Disabled"
    return once, applied


def peak_rss_mib(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def connections(store_base, db):
    r = subprocess.run(["psql", "-qtA", store_base + "/postgres", "-c",
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND application_name = 'kiln'" % db],
                       capture_output=True, text=True)
    try:
        return int(r.stdout.strip() or 0)
    except ValueError:
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--mockup", required=True)
    ap.add_argument("--bmcs", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    kiln = os.path.join(args.build, "kiln")
    kiln_bmc = os.path.join(args.build, "kiln-bmc")
    port = os.environ["KILN_PG_PORT"]
    base = "postgresql://postgres@127.0.0.1:%s" % port
    db = "bench_workers"
    subprocess.run(["psql", "-q", base + "/postgres", "-c", "CREATE DATABASE " + db], check=True,
                   stdout=subprocess.DEVNULL)
    procs = []
    try:
        # Workers, on their own BMCs.
        bmc_w, urls_w = start_bmcs(kiln_bmc, args.mockup, args.bmcs, os.path.join(args.work, "bmc-w.log"))
        procs += bmc_w
        fleet_w = write_fleet(os.path.join(args.work, "workers"), urls_w)
        start = time.monotonic()
        workers = [subprocess.Popen([kiln, "--store", base + "/" + db, "worker", fleet_w, "--worker-id", "w%d" % i,
                                     "--lease-ttl", "30s", "--poll", "1s"],
                                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(args.work, "w%d.err" % i), "w"))
                   for i in range(1, args.workers + 1)]
        rss = [0.0] * len(workers)
        peak_conn = 0
        while any(w.poll() is None for w in workers):
            for i, w in enumerate(workers):
                if w.poll() is None:
                    rss[i] = max(rss[i], peak_rss_mib(w.pid))
            peak_conn = max(peak_conn, connections(base, db))
            time.sleep(0.5)
        workers_wall = time.monotonic() - start
        codes = [w.returncode for w in workers]
        once_w, applied_w = read_back(urls_w)
        for p in bmc_w:
            p.terminate()
            p.wait()

        # One kiln apply on the SQLite journal, on fresh BMCs.
        bmc_s, urls_s = start_bmcs(kiln_bmc, args.mockup, args.bmcs, os.path.join(args.work, "bmc-s.log"))
        procs += bmc_s
        fleet_s = write_fleet(os.path.join(args.work, "single"), urls_s)
        start = time.monotonic()
        single = subprocess.Popen([kiln, "apply", fleet_s, "--stage", "firmware"], stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(args.work, "single.err"), "w"))
        single_rss = 0.0
        while single.poll() is None:
            single_rss = max(single_rss, peak_rss_mib(single.pid))
            time.sleep(0.5)
        single_wall = time.monotonic() - start
        once_s, applied_s = read_back(urls_s)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
    print(json.dumps({
        "bmcs": args.bmcs,
        "task_seconds": 1,
        "changes": "BIOS firmware update + BIOS attribute per BMC",
        "workers": {
            "processes": args.workers,
            "wall_seconds": workers_wall,
            "exit_codes": codes,
            "peak_rss_mib_per_worker": rss,  # VmHWM, sampled every 0.5 s
            "peak_connections": peak_conn,
            "bmcs_flashed_exactly_once": once_w,
            "bmcs_bios_applied": applied_w,
        },
        "single_apply_sqlite": {
            "wall_seconds": single_wall,
            "exit_code": single.returncode,
            "peak_rss_mib": single_rss,
            "bmcs_flashed_exactly_once": once_s,
            "bmcs_bios_applied": applied_s,
        },
        "workers_vs_single_wall_ratio": workers_wall / single_wall,
        "note": "one machine: kiln-bmc, the workers and PostgreSQL share its cores; both sides measured in the same run",
    }))


if __name__ == "__main__":
    main()
