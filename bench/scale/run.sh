#!/usr/bin/env bash
# bench/scale: N nodes x 6 no-op stages (default 10,000; KILN_BENCH_SCALE_NODES)
# through the real engine on one PostgreSQL with 1, 2 and 4 worker processes
# (each a fresh database), and, in the same run, one process on the SQLite
# journal as the single-machine baseline. Records wall time and throughput
# (node-stages per second) with ratios against 1 worker and against SQLite,
# peak RSS per worker, and the peak number of kiln connections the server
# saw (sampled every 0.2 s). Writes bench/results/scale.json (or
# KILN_BENCH_SCALE_OUT). KILN_BENCH_SCALE_SYNC_COMMIT=off runs the server
# with synchronous_commit off (commits are not flushed one by one), to tell
# flush-bound from round-trip-bound. Each run also records the statements
# and the flushed and unflushed commits its workers' journal connections
# made, per node-stage (LeaseCounters).
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=${KILN_BENCH_SCALE_NODES:-10000}
parallel=${KILN_BENCH_SCALE_PARALLEL:-64}
bin=build/bench/scale/kiln-bench-scale
work=build/bench-scale
out=${KILN_BENCH_SCALE_OUT:-bench/results/scale.json}
sync_commit=${KILN_BENCH_SCALE_SYNC_COMMIT:-on}
[ -x "$bin" ] || { echo "scale: build $bin first (cmake --build build --target kiln-bench-scale)" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work" bench/results

# A private cluster for the benchmark: its own folder and port.
export KILN_PG_DIR="$PWD/$work/pg" KILN_PG_PORT=${KILN_BENCH_SCALE_PG_PORT:-55432} KILN_PG_DB=postgres
scripts/postgres.sh start >/dev/null
trap 'scripts/postgres.sh stop >/dev/null 2>&1 || true' EXIT
base="postgresql://postgres@127.0.0.1:$KILN_PG_PORT"
psql -q "$base/postgres" -c "ALTER SYSTEM SET synchronous_commit = $sync_commit" -c "SELECT pg_reload_conf()" >/dev/null

now() { date +%s.%N; }
for workers in 1 2 4; do
  db="scale_w$workers"
  psql -q "$base/postgres" -c "CREATE DATABASE $db" >/dev/null
  # The schema first, so the workers' clocks start on equal terms.
  psql -q "$base/$db" -c "SELECT 1" >/dev/null
  pids=()
  start=$(now)
  for w in $(seq 1 "$workers"); do
    "$bin" --store "$base/$db" --worker-id "w$w" --nodes "$nodes" --parallel "$parallel" \
      --out "$work/w${workers}-$w.json" >"$work/w${workers}-$w.log" 2>&1 &
    pids+=($!)
  done
  peak=0
  while kill -0 "${pids[@]}" 2>/dev/null; do
    c=$(psql -qtA "$base/postgres" -c \
      "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND application_name = 'kiln'" || echo 0)
    [ "$c" -gt "$peak" ] && peak=$c
    sleep 0.2
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(now)
  echo "{\"workers\": $workers, \"wall_s\": $(awk "BEGIN{print $end - $start}"), \"peak_connections\": $peak}" \
    >"$work/w${workers}.json"
  # Exactly once across the workers: one verified result per node-stage.
  psql -qtA "$base/$db" -c "SELECT count(*) FROM stage_results WHERE outcome = 'verified'" >"$work/w${workers}.verified"
  psql -qtA "$base/$db" -c "SELECT count(*) FROM actions" >"$work/w${workers}.actions"
done

start=$(now)
"$bin" --sqlite "$work/sqlite.db" --nodes "$nodes" --parallel "$parallel" --out "$work/sqlite-1.json" \
  >"$work/sqlite.log" 2>&1
end=$(now)
echo "{\"wall_s\": $(awk "BEGIN{print $end - $start}")}" >"$work/sqlite.json"

python3 - "$work" "$nodes" "$parallel" "$out" "$sync_commit" <<'PY'
import json, sys
work, nodes, parallel, out, sync_commit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
node_stages = nodes * 6
def load(p): return json.load(open(f"{work}/{p}"))
sqlite = load("sqlite.json"); sqlite_proc = load("sqlite-1.json")
sqlite_tput = node_stages / sqlite["wall_s"]
runs = []
for w in (1, 2, 4):
    r = load(f"w{w}.json")
    procs = [load(f"w{w}-{i}.json") for i in range(1, w + 1)]
    verified = int(open(f"{work}/w{w}.verified").read())
    actions = int(open(f"{work}/w{w}.actions").read())
    journal = {k: sum(p[k] for p in procs) for k in ("statements", "commits_flushed", "commits_unflushed")}
    runs.append({
        "workers": w, "wall_s": r["wall_s"], "node_stages_per_s": node_stages / r["wall_s"],
        # The journal connections' work, all workers together, per node-stage.
        "statements_per_node_stage": journal["statements"] / node_stages,
        "flushed_commits_per_node_stage": journal["commits_flushed"] / node_stages,
        "unflushed_commits_per_node_stage": journal["commits_unflushed"] / node_stages,
        # Stage attempts that ran or observed and skipped, all workers:
        # above 1 when workers observe nodes another worker brought up.
        "stage_attempts_per_node_stage": sum(p["stages_run"] + p["stages_skipped"] for p in procs) / node_stages,
        # Counted as done without observing: verified by another worker
        # during the run (engine: Leases::verified_since).
        "done_elsewhere_per_node_stage": sum(p.get("stages_done_elsewhere", 0) for p in procs) / node_stages,
        "peak_connections": r["peak_connections"],
        "peak_rss_mb_per_worker": [p["peak_rss_mb"] for p in procs],
        "actions_per_worker": [p["actions"] for p in procs],
        "verified_node_stages": verified, "action_rows": actions,
        "exactly_once": verified == node_stages and actions == node_stages,
    })
one = runs[0]["node_stages_per_s"]
for r in runs:
    r["throughput_vs_1_worker"] = r["node_stages_per_s"] / one
    r["throughput_vs_sqlite"] = r["node_stages_per_s"] / sqlite_tput
result = {
    "benchmark": "scale", "nodes": nodes, "stages": 6, "node_stages": node_stages, "parallel": parallel,
    "postgresql_synchronous_commit": sync_commit,
    "postgresql": runs,
    "sqlite_baseline": {"wall_s": sqlite["wall_s"], "node_stages_per_s": sqlite_tput,
                        "peak_rss_mb": sqlite_proc["peak_rss_mb"], "actions": sqlite_proc["actions"]},
    "note": "one machine: the workers, the PostgreSQL server and the SQLite run share its cores; "
            "the ratios are measured in the same run",
}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps(result, indent=2))
PY
