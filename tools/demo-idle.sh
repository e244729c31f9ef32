#!/bin/sh
# The main demo: idle.elf on 4 vCPUs under --sysidle. The VMM prints each
# full-system-idle state change with its time (ms since the VM started),
# the tick stopping at FULL_NOTED, and its restart when a key wakes the
# guest; the guest prints its jiffies against the TSC after each wake.
# Interactive: type a key and Enter to wake the guest, Ctrl-C to stop.
# Not interactive: the demo sends the keys itself and stops after 8 s.
set -u
BUILD=${1:-build}
VMM="$BUILD/vmm"
IMAGE="$BUILD/guest-tools/idle.elf"
set -- --sysidle --sysidle-log - --cpus 4 --append 'hz=250' "$IMAGE"

# No usable /dev/kvm (a host without KVM, or a VM without nested
# virtualisation): say so, show the same state machine on simulated CPUs,
# and end with the VMM's status for it (112), since no guest ran.
# (-c first: a read-write redirection would create a missing file.)
if ! [ -c /dev/kvm ] || ! { : <>/dev/kvm; } 2>/dev/null; then
	"$VMM" "$IMAGE" >/dev/null # its one line on why /dev/kvm cannot be opened
	echo "demo: the VM demo needs /dev/kvm. The same state machine on" \
	     "simulated CPUs instead (make run-library):"
	"$BUILD/sysidle-demo"
	echo "demo: no guest was run on this host (exit 112)"
	exit 112
fi

if [ -t 0 ]; then
	echo "demo: idle.elf on 4 vCPUs under --sysidle. Type a key and Enter" \
	     "to wake the guest; Ctrl-C to stop."
	"$VMM" "$@"
	status=$?
	[ "$status" -eq 130 ] && status=0 # stopped with Ctrl-C: a normal end
	exit "$status"
fi

echo "demo: idle.elf on 4 vCPUs under --sysidle; a key is sent at 3 s and" \
     "at 5.5 s, the VM is stopped at 8 s."
{
	sleep 3
	echo "demo: sending a key to the guest" >&2
	printf 'x'
	sleep 2.5
	echo "demo: sending another key" >&2
	printf 'y'
	sleep 10
} | timeout -s INT 8 "$VMM" "$@"
status=$?
# timeout's 124: the VM ran until we stopped it, which is the plan.
[ "$status" -eq 124 ] && status=0
exit "$status"
