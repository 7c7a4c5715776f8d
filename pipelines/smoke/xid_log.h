// Xid events: the NVIDIA driver's error reports in the kernel log, one line
// each: "NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=..., GPU has
// fallen off the bus." Some codes mean the hardware needs service (a double-
// bit ECC error, a GPU fallen off the bus, an NVLink error); others are
// usually the application's (13 graphics exception, 31 page fault, 43
// stopped processing) and are listed without failing the node.
#pragma once

#include <string>
#include <vector>

#include "pipelines/smoke/check.h"

namespace kiln::smoke {

struct XidEvent {
    std::string pci;  // "0000:c6:00", as the driver prints it
    int xid = 0;
    std::string text;  // the message after the code
};

// Every Xid line of `log` (any prefix before "NVRM: Xid" is ignored).
std::vector<XidEvent> parse_xid_events(const std::string& log);

// The codes NVIDIA's Xid catalog sends to hardware service (drain, reset or
// RMA) rather than to the application: 48, 61, 62, 64, 74, 79, 94, 95, 119,
// 120. 63 (a row remapped) and 92 (a high corrected-error rate) are early
// signals, listed but not counted.
bool xid_needs_service(int xid);

// "xid_events": the events that need service, since boot; `read_error`
// non-empty: the log could not be read, which fails the check (an unread
// log is not a clean one).
Check xid_check(const std::vector<XidEvent>& events, const std::string& read_error);

// The kernel log since boot (as far as the ring buffer still holds it),
// read from /dev/kmsg without blocking: one message per line.
bool read_kernel_log(std::string* out, std::string* err);

}  // namespace kiln::smoke
