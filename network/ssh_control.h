// Where kiln's pooled SSH connections live: OpenSSH master connections
// (ControlMaster) whose control sockets sit in one directory private to this
// kiln process.
//
// The directory is made on first use with mkdtemp (mode 0700, random name)
// under $XDG_RUNTIME_DIR when that is set and short, else /tmp: a unix socket
// path must fit in ~104 bytes, and no other local user may reach a socket
// that rides kiln's authenticated connection. It is removed, after its
// masters are told to exit, by close_ssh_masters(), which also runs at
// process exit (atexit).
//
// Sockets are named by a per-process counter for each distinct connection
// (host, port, user, identity, known_hosts, ssh program), not by ssh's %C
// (host, port and user only): two targets that differ in key or pinned host
// key must never share an authenticated connection.
#pragma once

#include <string>

namespace kiln::network {

// The control socket path for `connection_key` (every setting that makes an
// SSH connection distinct). `ssh_program` is what close_ssh_masters() runs to
// close that master. Empty when no private directory could be made: the
// caller then runs without multiplexing.
std::string ssh_control_socket(const std::string& connection_key, const std::string& ssh_program);

// Stops handing out the socket for `connection_key`: the next command opens a
// new master on a new path. For a master that a command timed out on (it may
// hang); commands already riding it keep going, and close_ssh_masters() still
// closes it.
void retire_ssh_control_socket(const std::string& connection_key);

// This process's control directory; "" before first use and after close.
std::string ssh_control_dir();

// Closes every master this process opened (`ssh -O exit`, a few seconds at
// most each), removes their sockets and the directory. Idempotent; a later
// multiplexed command makes a new directory.
void close_ssh_masters();

}  // namespace kiln::network
