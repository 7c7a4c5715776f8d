#!/usr/bin/env python3
# A stand-in for perftest's ib_write_bw in kiln-smoke's RDMA tests on a host
# without RDMA devices: a model of our belief of its behaviour (the real
# one's output is under tests/fixtures/smoke/perftest/, and the lab test runs
# the real one over Soft-RoCE). Server (no host argument): listens on -p,
# prints perftest's banner, serves one client, prints the table. Client
# (HOST last): connects to HOST:-p, prints the table, or perftest's errors
# when the server does not answer. Named *-down (a symlink), it fails as a
# VM whose fabric link is down does: the server takes the setup connection
# and drops it, the client gets no answer. Named *-deaf, its server never
# listens and never ends (a port that is down can keep perftest from
# listening), and its client fails as *-down's. Each run appends one line to
# $FAKE_RDMA_LOG: "server PORT" or "client PORT ok|fail", with " gpu BDF"
# after PORT when it was given --use_cuda_bus_id=BDF. --help prints a usage
# that lists the CUDA options only with FAKE_RDMA_CUDA=1 (as perftest lists
# them only when built with CUDA), and exits 1.
import os
import socket
import sys
import time

args = sys.argv[1:]
if "--help" in args:
    print(" Usage:\n  ib_write_bw            start a server and wait for connection\n"
          "  ib_write_bw <host>     connect to server at <host>\n\n Options:")
    print("  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)")
    if os.environ.get("FAKE_RDMA_CUDA") == "1":
        print("      --use_cuda=<cuda device id> Use CUDA specific device for GPUDirect RDMA testing")
        print("      --use_cuda_bus_id=<cuda full BUS id> Use CUDA specific device, based on its full PCIe address,"
              " for GPUDirect RDMA testing")
    sys.exit(1)
gpu = next((a.split("=", 1)[1] for a in args if a.startswith("--use_cuda_bus_id=")), "")
at = "%d%s" % (int(args[args.index("-p") + 1]) if "-p" in args else 18515, " gpu " + gpu if gpu else "")
port = int(args[args.index("-p") + 1]) if "-p" in args else 18515
takes_value = {"-d", "-i", "-s", "-n", "-p", "-x", "-u"}
positional = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in takes_value)]
deaf = os.path.basename(sys.argv[0]).endswith("-deaf")
down = deaf or os.path.basename(sys.argv[0]).endswith("-down")
gbit = os.environ.get("FAKE_RDMA_GBIT", "8.00")


def log(line):
    path = os.environ.get("FAKE_RDMA_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def table():
    print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
    print(" 65536      200              %s               %s   \t   0.015259" % (gbit, gbit))
    print("-" * 87)


if not positional and deaf:
    time.sleep(3600)
    sys.exit(1)

if not positional:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    print("\n************************************\n* Waiting for client to connect... *\n************************************",
          flush=True)
    c, _ = s.accept()
    log("server %s" % at)
    if down:
        c.close()
        print(" Failed to exchange data between server and clients")
        sys.exit(1)
    c.recv(64)
    c.sendall(b"ok\n")
    c.close()
    table()
    sys.exit(0)

host = positional[-1]
try:
    c = socket.create_connection((host, port), timeout=10)
except OSError:
    log("client %s fail" % at)
    print("Couldn't connect to %s:%d" % (host, port))
    print(" Unable to open file descriptor for socket connection Unable to init the socket connection")
    sys.exit(1)
c.sendall(b"hello\n")
reply = b"" if down else c.recv(64)
c.close()
if not reply:
    log("client %s fail" % at)
    print("ethernet_read_data: Couldn't read reports\n Unable to read from socket/rdma_cm\n"
          " Failed to exchange data between server and clients")
    sys.exit(1)
log("client %s ok" % at)
table()
