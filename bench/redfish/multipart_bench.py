#!/usr/bin/env python3
"""bench/redfish part (c): multipart push of a 256 MiB artifact to kiln-bmc's
MultipartHttpPushUri through kiln's HttpClient (build/bench/kiln-bench-multipart)
vs `curl -F` to the same endpoint of the same emulator, in the same run,
rounds alternating which goes first. Writes bench/results/redfish-multipart.json.

Usage: bench/redfish/multipart_bench.py [--size-mib 256] [--rounds 3]
       [--build build] [--out bench/results/redfish-multipart.json]
Run from anywhere; paths default relative to the repository root.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASSWORD = "bench-multipart"  # emulator test password, passed by environment


def make_artifact(path, size_mib):
    block = os.urandom(1 << 20)  # incompressible, so no layer can cheat
    with open(path, "wb") as f:
        f.write(b"KILN-FW BIOS bench-multipart\n")
        for _ in range(size_mib):
            f.write(block)


def timed(argv, env):
    """Runs argv; returns (seconds, exit code, stdout, stderr)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=600)
    seconds = time.monotonic() - start
    return seconds, proc.returncode, out.decode(), err.decode()


def peak_rss_mib_of_child(argv, env):
    """Runs argv once under wait4 to read its own peak RSS (MiB)."""
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execvpe(argv[0], argv, env)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed while measuring its RSS")
    return usage.ru_maxrss / 1024.0


def vm_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "redfish-multipart.json"))
    ap.add_argument("--mockup", default=os.path.join(ROOT, "..", "shared", "redfish", "mockups",
                                                     "dmtf-public-rackmount1"))
    args = ap.parse_args()

    bmc_bin = os.path.join(args.build, "kiln-bmc")
    pusher = os.path.join(args.build, "bench", "kiln-bench-multipart")
    for path in (bmc_bin, pusher):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"multipart_bench: {path} is not built (ninja -C build kiln-bmc kiln-bench-multipart)")
    if not shutil.which("curl"):
        raise SystemExit("multipart_bench: curl is not installed")

    work = tempfile.mkdtemp(prefix="kiln-bench-multipart-")
    env = dict(os.environ, KILN_BMC_PASSWORD=PASSWORD)
    bmc = None
    try:
        artifact = os.path.join(work, "artifact.bin")
        make_artifact(artifact, args.size_mib)
        size = os.path.getsize(artifact)
        spool = os.path.join(work, "spool")
        os.mkdir(spool)
        bmc = subprocess.Popen(
            [bmc_bin, "--mockup", args.mockup, "--port", "0", "--task-seconds", "0", "--restart-seconds", "0",
             "--spool-dir", spool, "--image-max-bytes", str(size + (1 << 20))],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = bmc.stdout.readline()
        if not line.startswith("bmc 0: "):
            raise SystemExit("multipart_bench: kiln-bmc did not start: " + line + bmc.stderr.read())
        base = line.split()[2]
        push_uri = base + "/redfish/v1/UpdateService/update-multipart"
        target = "/redfish/v1/UpdateService/FirmwareInventory/BIOS"

        kiln_argv = [pusher, "--url", push_uri, "--file", artifact, "--target", target]
        curl_argv = ["curl", "-sS", "--max-time", "600", "-o", os.devnull, "-w", "%{http_code}",
                     "-u", "admin:" + PASSWORD,
                     "-F", 'UpdateParameters={"Targets":["%s"],"@Redfish.OperationApplyTime":"Immediate"};'
                           'type=application/json' % target,
                     "-F", "UpdateFile=@%s;type=application/octet-stream" % artifact,
                     push_uri]
        kiln_s, curl_s = [], []
        for r in range(args.rounds):
            order = [("kiln", kiln_argv), ("curl", curl_argv)]
            if r % 2:
                order.reverse()
            for name, argv in order:
                seconds, rc, out, err = timed(argv, env)
                ok = rc == 0 and (json.loads(out)["status"] == 202 if name == "kiln" else out.strip() == "202")
                if not ok:
                    raise SystemExit(f"multipart_bench: {name} push failed (rc {rc}): {out} {err}")
                (kiln_s if name == "kiln" else curl_s).append(seconds)
        kiln_rss = peak_rss_mib_of_child(kiln_argv, env)
        curl_rss = peak_rss_mib_of_child(curl_argv, env)
        bmc_hwm = vm_hwm_mib(bmc.pid)
        leftovers = os.listdir(spool)

        kiln_med, curl_med = statistics.median(kiln_s), statistics.median(curl_s)
        mib = size / (1 << 20)
        result = {
            "benchmark": "redfish-multipart",
            "artifact_mib": round(mib, 1),
            "rounds": args.rounds,
            "kiln_http_client_s": kiln_s,
            "curl_f_s": curl_s,
            "kiln_median_s": kiln_med,
            "curl_median_s": curl_med,
            "kiln_vs_curl_ratio": kiln_med / curl_med,
            "kiln_mib_per_s": mib / kiln_med,
            "curl_mib_per_s": mib / curl_med,
            "kiln_client_peak_rss_mib": round(kiln_rss, 1),
            "curl_peak_rss_mib": round(curl_rss, 1),
            "kiln_bmc_peak_rss_mib": round(bmc_hwm, 1) if bmc_hwm else None,
            "spool_files_left": len(leftovers),
            "note": "wall time of each client process until the 202; the emulator spools and hashes the image "
                    "before answering, the same for both clients",
        }
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2, sort_keys=True)
            f.write("\n")
        print(json.dumps(result, indent=2, sort_keys=True))
    finally:
        if bmc is not None:
            bmc.terminate()
            try:
                bmc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                bmc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
