# SPDX-License-Identifier: GPL-2.0-only
"""The test fleet's domains (rig.py): their XML (idle.elf, KVM or TCG, a
serial pty logged to a file wherever the domain runs), the QEMU wrapper
that plays a host out of memory, and Busy, which keeps domains out of full
idle through their serial consoles."""
import os
import shutil
import threading

from rig_host import RigError

class Busy(threading.Thread):
    """See Fleet.busy(); stop() ends it. Its output is drained (a pty
    nobody reads would block the guest's serial line)."""

    def __init__(self, fleet, names, period):
        super().__init__(daemon=True, name="busy")
        self.fleet = fleet
        self.names = list(names)
        self.period = period
        self.stopping = threading.Event()
        self.fds = {}           # name -> (pty path, fd)
        self.sent = 0

    def _fd(self, name):
        path = self.fleet.pty(name)
        if path is None:
            return None
        old = self.fds.get(name)
        if old and old[0] == path:
            return old[1]
        if old:
            os.close(old[1])
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        import termios
        import tty
        try:
            tty.setraw(fd)
        except termios.error:
            pass
        self.fds[name] = (path, fd)
        return fd

    def run(self):
        import libvirt
        while not self.stopping.is_set():
            for name in self.names:
                try:
                    fd = self.fds[name][1] if name in self.fds else \
                        self._fd(name)
                    if fd is None:
                        continue
                    os.write(fd, b"x")
                    self.sent += 1
                    while True:
                        os.read(fd, 4096)
                except BlockingIOError:
                    pass
                except (OSError, libvirt.libvirtError, RigError):
                    # it moved (its pty is gone) or is moving: find it again
                    old = self.fds.pop(name, None)
                    if old:
                        os.close(old[1])
            self.stopping.wait(self.period)

    def stop(self):
        self.stopping.set()
        self.join()
        for _, fd in self.fds.values():
            os.close(fd)
        self.fds = {}


QEMU_WRAPPER = """#!/bin/sh
# The fleet's QEMU (the domains' emulator): the machine's, but for an
# incoming migration on a host whose directory holds qemu-oom, which fails
# as QEMU does on a host out of memory (Host.out_of_memory).
if [ -e "%(dir)s/$(hostname)/qemu-oom" ]; then
	case " $* " in *" -incoming "*)
		echo "qemu-system-x86_64: cannot set up guest memory 'pc.ram': Cannot allocate memory" >&2
		exit 1 ;;
	esac
fi
exec %(qemu)s "$@"
"""


def domain_xml(name, kernel, virt, vcpus, mib, serial_log, cmdline="hz=0",
               emulator=None):
    """A domain booting @kernel (idle.elf) as a KVM (@virt "kvm") or TCG
    ("qemu") domain; its serial console a pty, logged to @serial_log (the
    same file wherever the domain runs); @emulator: QEMU's path (default
    the machine's)."""
    cpu = ("<cpu mode='host-passthrough' check='none' migratable='on'>"
           "<feature policy='disable' name='arch-capabilities'/></cpu>"
           if virt == "kvm" else "")
    return """<domain type='%s'>
  <name>%s</name>
  <memory unit='MiB'>%d</memory>
  <vcpu placement='static'>%d</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%s</kernel>
    <cmdline>%s</cmdline>
  </os>
  %s
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>%s</emulator>
    <controller type='usb' model='none'/>
    <serial type='pty'><log file='%s' append='on'/><target port='0'/></serial>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
</domain>
""" % (virt, name, mib, vcpus, kernel, cmdline, cpu,
       emulator or shutil.which("qemu-system-x86_64"), serial_log)


