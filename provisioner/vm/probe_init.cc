// /init of kiln's probe guest: a direct-boot kernel with a one-file
// initramfs. It prints the readiness marker (guest_contract.h) on the
// console (ttyS0 with console=ttyS0), then waits to be powered off; with
// kiln.poweroff on the kernel command line it powers off by itself.
// Used by the accelerator probe and by the lifecycle tests.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>
#include <cstring>

namespace {
void say(const char* s) {
    (void)!write(1, s, std::strlen(s));
}
}  // namespace

int main() {
    char cmdline[1024] = {0};
    mount("proc", "/proc", "proc", 0, "");
    int fd = open("/proc/cmdline", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
        if (n > 0) cmdline[n] = 0;
        close(fd);
    }
    say("KILN_READY {\"guest\":\"kiln-probe\",\"init\":\"probe_init\"}\n");
    if (strstr(cmdline, "kiln.poweroff")) {
        sync();
        reboot(RB_POWER_OFF);
    }
    for (;;) pause();
}
