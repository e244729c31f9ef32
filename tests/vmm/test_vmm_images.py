#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Feeds the VMM broken images and checks each message and exit status;
the loader against the Multiboot specification (header flags, a header
out of place, modules, memory map, a 1 GiB module stopped by SIGTERM
while it loads).

usage: test_vmm_images.py VMM GUEST_DIR GUEST_TOOLS_DIR
Exit: 0 all passed, 1 a check failed, 77 skipped (no usable /dev/kvm)."""
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

import vmmtest
from vmmtest import check, expect

vmmtest.init(sys.argv)
GUESTS, TOOLS = vmmtest.GUESTS, vmmtest.TOOLS


def guest(name):
    return os.path.join(GUESTS, name + ".elf")


def test_images(tmp):
    expect(["/nonexistent/k.elf"], 111, "cannot read kernel", "missing file")
    notelf = os.path.join(tmp, "notelf.elf")
    with open(notelf, "w") as f:
        f.write("this is not an ELF file\n" * 10)
    expect([notelf], 111, "is not an ELF file", "not an ELF")
    with open(guest("hello"), "rb") as f:
        img = f.read()
    for cut, msg in [(40, "truncated ELF header"),
                     (60, "truncated ELF program headers"),
                     (200, "truncated ELF segment")]:
        path = os.path.join(tmp, "trunc%d.elf" % cut)
        with open(path, "wb") as f:
            f.write(img[:cut])
        expect([path], 111, msg, "ELF cut at %d bytes" % cut)
    elf64 = os.path.join(tmp, "elf64.elf")
    with open(elf64, "wb") as f:
        f.write(img[:4] + b"\x02" + img[5:])
    expect([elf64], 111, "is not an ELF32 i386 image", "ELF64 header")
    expect([guest("nomb")], 111, "no multiboot header", "no multiboot header")
    # the first PT_LOAD moved onto the ACPI tables' area
    phoff, phentsize = struct.unpack_from("<I", img, 28)[0], \
        struct.unpack_from("<H", img, 42)[0]
    low = bytearray(img)
    for i in range(struct.unpack_from("<H", img, 44)[0]):
        off = phoff + i * phentsize
        if struct.unpack_from("<I", img, off)[0] == 1:  # PT_LOAD
            struct.pack_into("<II", low, off + 8, 0xf0000, 0xf0000)
            break
    path = os.path.join(tmp, "acpi-area.elf")
    with open(path, "wb") as f:
        f.write(bytes(low))
    expect([path], 111, "overlaps the ACPI tables' area",
           "kernel over the ACPI tables refused")
    expect(["--module", "/nonexistent/mod"], 110, "missing KERNEL",
           "module without kernel")
    expect(["--module", "/nonexistent/mod", guest("hello")], 111,
           "cannot read module", "missing module")
    # not regular files: refused at once, a FIFO's open never blocks
    fifo = os.path.join(tmp, "kernel.fifo")
    os.mkfifo(fifo)
    expect([fifo], 111, "is not a regular file", "a FIFO as the kernel",
           timeout=2)
    expect([tmp], 111, "is not a regular file", "a directory as the kernel",
           timeout=2)
    expect(["/dev/zero"], 111, "is not a regular file",
           "/dev/zero as the kernel", timeout=2)
    expect(["--module", fifo, guest("hello")], 111, "is not a regular file",
           "a FIFO as --module", timeout=2)


def multiboot_variant(img, flags_or=0, byte_at=None):
    """@img with its multiboot header's flags or'ed with @flags_or (the
    checksum kept right), and/or bytes set at offsets (@byte_at: {off: v})."""
    out = bytearray(img)
    for off in range(0, min(len(img), 8192) - 11, 4):
        magic, flags, csum = struct.unpack_from("<III", img, off)
        if magic == 0x1BADB002 and (magic + flags + csum) & 0xffffffff == 0:
            flags |= flags_or
            struct.pack_into("<II", out, off + 4, flags,
                             (-(magic + flags)) & 0xffffffff)
            break
    for off, v in (byte_at or {}).items():
        out[off] = v
    return bytes(out)


def test_loader_spec(tmp):
    """The loader follows the Multiboot spec and reads headers first."""
    h = guest("hello")
    with open(h, "rb") as f:
        img = f.read()

    def image(name, data):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    for bit, what in [(2, "video mode (flag 2)"),
                      (3, "an undefined requirement (flag 3)"),
                      (15, "an undefined requirement (flag 15)")]:
        expect([image("mb-flag%d.elf" % bit,
                      multiboot_variant(img, 1 << bit))], 111,
               "requires what this loader does not provide",
               "multiboot header requiring %s: refused" % what)
    expect([image("mb-aout.elf", multiboot_variant(img, 1 << 16))], 111,
           "a.out kludge", "multiboot header asking for the a.out kludge "
           "(flag 16): refused")
    what = "an optional multiboot flag it does not know (17): runs"
    if not vmmtest.scripted_skip(what):
        expect([image("mb-flag17.elf", multiboot_variant(img, 1 << 17))],
               0, "", what, stdout_has="hello")
    expect([image("be.elf", multiboot_variant(img, byte_at={5: 2}))], 111,
           "(big-endian", "big-endian ELF header: refused")
    expect([image("x86-64.elf", multiboot_variant(img, byte_at={18: 62}))],
           111, "(ELF machine 62", "ELF32 for x86-64 (EM_X86_64): refused")
    expect([image("dyn.elf", multiboot_variant(img, byte_at={16: 3}))], 111,
           "is not an executable (ELF type 3)", "ELF of type ET_DYN: refused")

    # Headers first: a 1 TiB sparse file is judged by its first bytes, and
    # a kernel followed by 1 TiB of nothing loads, its segments only.
    big = os.path.join(tmp, "big-notelf.elf")
    with open(big, "wb") as f:
        f.write(b"not an ELF file\n")
        f.truncate(1 << 40)
    expect([big], 111, "is not an ELF file",
           "a 1 TiB file that is not ELF: refused from its header", timeout=5)
    with open(big, "wb") as f:
        f.write(img)
        f.truncate(1 << 40)
    what = "a kernel in a 1 TiB file: only its segments are read"
    if not vmmtest.scripted_skip(what):
        expect([big], 0, "", what, stdout_has="hello", timeout=10)
    os.unlink(big)

    # A stop signal during loading ends it. Pending at the start (the
    # child starts with SIGTERM blocked, as a signal sent before the VMM
    # blocks it would be): the kernel is not loaded, the guest never runs.
    def blocked():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    p = vmmtest.popen([h], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True,
                      preexec_fn=blocked)
    p.send_signal(signal.SIGTERM)
    rc, out, err = vmmtest.communicate(p, 10)
    check(rc == 143 and "stopped by SIGTERM while loading the kernel" in err
          and "hello" not in out,
          "SIGTERM pending when loading starts: exit 143 before the guest "
          "runs", "exit %s\nstdout: %s\nstderr: %s" % (rc, out, err))
    # In the middle of a 1 GiB module: acted on within a second.
    mod = os.path.join(tmp, "big.mod")
    with open(mod, "wb") as f:
        f.truncate(1 << 30)
    p = vmmtest.popen(["--mem", "1536M", "--module", mod, h],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True)

    def rchar():
        try:
            with open("/proc/%d/io" % p.pid) as f:
                return next(int(l.split()[1]) for l in f
                            if l.startswith("rchar:"))
        except (OSError, StopIteration):
            return 0
    vmmtest.poll_until(lambda: rchar() >= 32 << 20 or p.poll() is not None,
                       10)
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    rc, out, err = vmmtest.communicate(p, 10)
    took = time.monotonic() - sent
    check(rc == 143 and "stopped by SIGTERM while loading the module" in err
          and took < 1.0,
          "SIGTERM while a 1 GiB module loads: exit 143 within 1 s "
          "(%.2f s)" % took, "exit %s\nstdout: %s\nstderr: %s"
          % (rc, out, err))
    os.unlink(mod)


def main():
    skip = vmmtest.vm_or_skip()
    if skip:
        return skip
    with tempfile.TemporaryDirectory() as tmp:
        test_images(tmp)
        test_loader_spec(tmp)
    return vmmtest.finish()


if __name__ == "__main__":
    sys.exit(main())
