#!/usr/bin/env python3
"""bench/redfish (s): firmware waves at the task-time bound (issue 20).

One `kiln apply --stage firmware` flashes N emulated BMCs whose update tasks run
T seconds (kiln-bmc --task-seconds), at `parallel` = P. With P >= N every task
can run at once, so the bound on the wall time is T; in general it is
ceil(N / P) * T. Each run is given as N:P; every run gets fresh BMCs from one
kiln-bmc process.

The change is a BIOS firmware update only (no BIOS attribute, so no reset and
POST ride on the bound), with a small image (--image-kib): the point is the
waits, not loopback bandwidth (part b pushes 4 MiB images).

Writes, per run: wall seconds, the bound, their ratio, kiln's peak threads and
peak RSS (sampled every 0.5 s from /proc), kiln-bmc's threads and RSS, and how
many BMCs were flashed exactly once, read back from each BMC.

With --baseline-kiln (run.sh: KILN_BENCH_BASELINE_KILN), the first run is
also made with that kiln binary, just before, on its own fresh kiln-bmc of
this build: "baseline" holds its figures and "ratio_over_baseline" this
build's wall and kiln CPU over the baseline's, same machine, same load.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import time

import workers_bench as wb


def proc_field(pid, name):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith(name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    """user + system CPU seconds of a live process, from /proc/PID/stat."""
    try:
        fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def one_run(args, bmcs, parallel, index, kiln=None):
    kiln = kiln or os.path.join(args.build, "kiln")
    kiln_bmc = os.path.join(args.build, "kiln-bmc")
    log = os.path.join(args.work, "bmc-s%d.log" % index)
    procs, urls = wb.start_bmcs(kiln_bmc, args.mockup, bmcs, log, per_process=bmcs, task_seconds=args.task_seconds)
    try:
        bmc_pid = procs[0].pid
        fleet = wb.write_fleet(os.path.join(args.work, "s%d" % index), urls, parallel=parallel,
                               image_bytes=args.image_kib * 1024, bios=False)
        err = os.path.join(args.work, "s%d.err" % index)
        load_before = os.getloadavg()[0]
        start = time.monotonic()
        p = subprocess.Popen([kiln, "apply", fleet, "--stage", "firmware"], stdout=subprocess.DEVNULL,
                             stderr=open(err, "w"))
        threads = rss_kib = fds = 0
        while p.poll() is None:
            threads = max(threads, proc_field(p.pid, "Threads"))
            try:
                fds = max(fds, len(os.listdir("/proc/%d/fd" % p.pid)))
            except OSError:
                pass
            rss_kib = max(rss_kib, proc_field(p.pid, "VmHWM"))
            time.sleep(0.5)
        wall = time.monotonic() - start
        load_after = os.getloadavg()[0]
        kiln_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        kiln_cpu = kiln_cpu.ru_utime + kiln_cpu.ru_stime - args.cpu_before
        args.cpu_before += kiln_cpu
        once, _ = wb.read_back(urls, bios=False)
        bmc_threads = proc_field(bmc_pid, "Threads")
        bmc_cpu = cpu_seconds(bmc_pid)
        bmc_rss_kib = proc_field(bmc_pid, "VmHWM")
    finally:
        for q in procs:
            q.terminate()
            q.wait()
        # Reaped now, kiln-bmc's CPU joins RUSAGE_CHILDREN: not the next run's kiln.
        c = resource.getrusage(resource.RUSAGE_CHILDREN)
        args.cpu_before = c.ru_utime + c.ru_stime
    bound = math.ceil(bmcs / parallel) * args.task_seconds
    return {
        "bmcs": bmcs,
        "parallel": parallel,
        "task_seconds": args.task_seconds,
        "wall_seconds": round(wall, 2),
        "bound_seconds": bound,
        "wall_over_bound": round(wall / bound, 3),
        "exit_code": p.returncode,
        "kiln_peak_threads": threads,
        "kiln_peak_rss_mib": round(rss_kib / 1024, 1),
        "kiln_peak_open_files": fds,
        "kiln_cpu_seconds": round(kiln_cpu, 1),
        "kiln_bmc_cpu_seconds": round(bmc_cpu, 1),
        "kiln_bmc_threads": bmc_threads,
        "kiln_bmc_peak_rss_mib": round(bmc_rss_kib / 1024, 1),
        "bmcs_flashed_exactly_once": once,
        # The machine is shared: its 1-minute load average before and after
        # (kiln and kiln-bmc alone make about 2).
        "load_average_1m": [round(load_before, 2), round(load_after, 2)],
        "stderr_tail": open(err).read()[-400:] if p.returncode else "",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--mockup", required=True)
    ap.add_argument("--task-seconds", type=int, default=60)
    ap.add_argument("--image-kib", type=int, default=64)
    ap.add_argument("--runs", default="5000:5000,256:64", help="N:P,... (BMCs:parallel)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--baseline-kiln", help="a kiln binary built at an earlier commit, for the first run")
    ap.add_argument("--baseline-label", default="")
    args = ap.parse_args()
    # kiln keeps an idle connection (3 open files) per node in flight and 4
    # files per thread (engine/open_files.h): more room than this machine's
    # default hard limit of 20,000 does no harm. Root may raise it; the
    # children inherit it.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, 65536), max(hard, 65536)))
    except (ValueError, OSError):
        pass
    args.cpu_before = 0.0  # children's CPU so far (kiln runs; kiln-bmc is read from /proc)
    runs = []
    baseline = None
    for i, spec in enumerate(args.runs.split(",")):
        n, p = (int(x) for x in spec.split(":"))
        if i == 0 and args.baseline_kiln:
            baseline = one_run(args, n, p, 100, kiln=args.baseline_kiln)
            baseline["kiln"] = args.baseline_label or args.baseline_kiln
        runs.append(one_run(args, n, p, i))
    extra = {}
    if baseline:
        extra = {"baseline": baseline, "ratio_over_baseline": {
            "wall_seconds": round(runs[0]["wall_seconds"] / baseline["wall_seconds"], 3),
            "kiln_cpu_seconds": round(runs[0]["kiln_cpu_seconds"] / max(baseline["kiln_cpu_seconds"], 0.1), 3)}}
    print(json.dumps(dict({
        "runs": runs,
        "change": "BIOS firmware update per BMC, %d KiB image, no BIOS attribute" % args.image_kib,
        "note": "one machine: kiln-bmc and kiln share its 2 cores; bound = ceil(bmcs / parallel) * task_seconds",
        "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }, **extra)))


if __name__ == "__main__":
    main()
