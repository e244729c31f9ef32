#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Model-check one of the Promela models with Spin and report the results
# as TAP:
#  - sysidle.pml: the full-system-idle protocol of the sysidle library;
#  - tk_handshake.pml: the VMM's handshake between the timekeeper vCPU
#    thread and the housekeeping thread (tk_state, force_req, the kick);
#  - halt_wait.pml: a vCPU's HLT wait (halt polling, the timer it serves
#    itself) against the threads that post to it;
#  - bridge_stop.pml: the libvirt bridge's lock-free flags (the list's
#    staleness, the event loop's quit) and its bounded stop.
# Each model has its own table of checks below, chosen by the file name.
#
#   check-model.sh SPIN CC MODEL.pml WORKDIR [INCLUDED...]
#
# SPIN is the spin executable, CC a C compiler for the generated verifiers
# (pan), MODEL.pml the model and WORKDIR a scratch directory (created; the
# files made there are removed at exit, except the logs of a check that
# did not give the expected result). INCLUDED are the files the model
# #includes (tk_handshake.pml is split by concern into several), copied
# next to it.
#
# Every check is one exhaustive Spin run:
#  - the correct model must satisfy every property: "errors: 0" and a
#    complete search (no depth-limit truncation, no out-of-memory);
#  - deliberately false properties of the correct model (non-vacuity) and
#    the injected faults must be reported as violated by the right
#    property: a failed assertion of that property's never claim (safety)
#    or an acceptance cycle (liveness, under weak fairness).
# What else each fault breaks is printed as TAP comments.
#
# Environment (optional): SYSIDLE_MODEL_NWORKERS (sysidle.pml only; default
# 2; the expected results are established for 2), SYSIDLE_MODEL_CFLAGS
# (default -O0: the state spaces are small, compiling pan dominates the run
# time).

set -euo pipefail

if [ "$#" -lt 4 ]; then
	echo "usage: $0 SPIN CC MODEL.pml WORKDIR [INCLUDED...]" >&2
	exit 2
fi
spin=$1
cc=$2
model=$3
work=$4
shift 4
# The included files, by absolute path, and their names in WORKDIR.
included=()
included_names=()
for inc in "$@"; do
	if [ ! -r "$inc" ]; then
		echo "$0: cannot read $inc" >&2
		exit 2
	fi
	included+=("$(cd "$(dirname "$inc")" && pwd)/$(basename "$inc")")
	included_names+=("$(basename "$inc")")
done

nworkers=${SYSIDLE_MODEL_NWORKERS:-2}
pan_cflags=${SYSIDLE_MODEL_CFLAGS:--O0}
run_timeout=300     # seconds, per Spin/compiler/verifier run
depth=1000000       # pan -m: far above the depth the searches reach
hashbits=22         # pan -w: 2^22 slots (32 MB); exhaustive storage anyway
# pan -f needs NFAIR * 4 > number of processes (sysidle.pml: workers +
# clock + timekeeper + init + never claim; tk_handshake.pml: 3 + init +
# never claim) + 1.
nfair=$(( (nworkers + 5) / 4 + 1 ))

case $nworkers in
'' | *[!0-9]*) echo "SYSIDLE_MODEL_NWORKERS must be a number" >&2; exit 2 ;;
esac
if [ ! -r "$model" ]; then
	echo "$0: cannot read $model" >&2
	exit 2
fi

name=$(basename "$model")
case $name in
sysidle.pml | tk_handshake.pml | halt_wait.pml | bridge_stop.pml) ;;
*) echo "$0: no checks defined for $name" >&2; exit 2 ;;
esac
model=$(cd "$(dirname "$model")" && pwd)/$name
mkdir -p "$work"
cd "$work"
work=$(pwd)

cleanup()
{
	rm -f pan.b pan.c pan.h pan.m pan.p pan.t pan.tmp pan-* \
		_spin_nvr.tmp "$name" "$name.trail" run.log replay.log \
		${included_names[@]+"${included_names[@]}"}
}
trap cleanup EXIT
cleanup
rm -f failed-*.log
# Spin and pan run on a local copy: pan writes its trail next to it, and
# the replay of a trail (spin -t) reads it from there; the files it
# includes are found next to it.
cp "$model" "$name"
for inc in ${included[@]+"${included[@]}"}; do
	cp "$inc" .
done

now_ms() { date +%s%3N; }
t_start=$(now_ms)

# ---- the checks: expect|variant|kind|property|description ----
#
# variant: correct (poll timekeeper), free (any timekeeper call sequence),
#          no_wake, no_reset (the injected faults, poll timekeeper)
# kind:    noclaim (assertions + invalid end states, no never claim),
#          safety (-DSAFETY, never claim of the property),
#          liveness (acceptance cycles under weak fairness: pan -a -f)
if [ "$name" = sysidle.pml ]; then
checks=(
"pass|correct|noclaim|-|correct model: assertions (a wakeup reaches only a timekeeper in FULL_NOTED) hold, no deadlock"
"pass|correct|safety|no_run_in_full|correct model: safety 'no_run_in_full' holds"
"pass|correct|safety|tk_sleep_safe|correct model: safety 'tk_sleep_safe' holds"
"pass|correct|safety|noted_only_asleep|correct model: safety 'noted_only_asleep' holds"
"pass|correct|liveness|worker_running_wakes_tk|correct model: liveness 'worker_running_wakes_tk' holds under weak fairness"
"pass|correct|liveness|all_idle_tk_stops|correct model: liveness 'all_idle_tk_stops' holds under weak fairness"
"fail|correct|safety|full_noted_unreachable|correct model (non-vacuity): FULL_NOTED is reachable, 'full_noted_unreachable' violated"
"fail|correct|safety|tk_never_sleeps|correct model (non-vacuity): the timekeeper goes to sleep, 'tk_never_sleeps' violated"
"fail|correct|safety|never_woken|correct model (non-vacuity): a worker wakes the timekeeper, 'never_woken' violated"
"fail|correct|liveness|never_all_idle_forever|correct model (non-vacuity): a fair run with all workers idle for good exists, 'never_all_idle_forever' violated"
"pass|free|noclaim|-|correct model, any timekeeper call sequence: assertions hold, no deadlock"
"pass|free|safety|no_run_in_full|correct model, any timekeeper call sequence: safety 'no_run_in_full' holds"
"pass|free|safety|tk_sleep_safe|correct model, any timekeeper call sequence: safety 'tk_sleep_safe' holds"
"pass|free|safety|noted_only_asleep|correct model, any timekeeper call sequence: safety 'noted_only_asleep' holds"
"fail|no_wake|liveness|worker_running_wakes_tk|fault NO_WAKE: liveness 'worker_running_wakes_tk' violated as expected"
"fail|no_reset|safety|no_run_in_full|fault NO_RESET: safety 'no_run_in_full' violated as expected"
)

# What else the faults break, and how the model fares with two concurrent
# sysidle_scan() callers (the threading contract in sysidle.h allows them;
# the variant is not part of the verified configuration): reported as
# comments, not asserted.
infos=(
"no_wake|noclaim|-"
"no_wake|safety|no_run_in_full"
"no_wake|safety|tk_sleep_safe"
"no_wake|safety|noted_only_asleep"
"no_wake|liveness|all_idle_tk_stops"
"no_reset|noclaim|-"
"no_reset|safety|tk_sleep_safe"
"no_reset|safety|noted_only_asleep"
"no_reset|liveness|worker_running_wakes_tk"
"no_reset|liveness|all_idle_tk_stops"
"concurrent|safety|no_run_in_full"
"concurrent|safety|tk_sleep_safe"
)

variant_defines()
{
	case $1 in
	correct) echo "" ;;
	free) echo "-DTK_FREE" ;;
	no_wake) echo "-DFAULT_NO_WAKE" ;;
	no_reset) echo "-DFAULT_NO_RESET" ;;
	concurrent) echo "-DCONCURRENT_SCAN" ;;
	*) echo "unknown variant $1" >&2; return 1 ;;
	esac
}
spin_defs=-DNWORKERS=$nworkers
header="$nworkers workers"

variant_label()
{
	case $1 in
	no_wake) echo "fault NO_WAKE" ;;
	no_reset) echo "fault NO_RESET" ;;
	concurrent) echo "variant CONCURRENT_SCAN (second sysidle_scan thread)" ;;
	*) echo "$1" ;;
	esac
}
infos_title="what else the faults break; concurrent scanners"

elif [ "$name" = halt_wait.pml ]; then

# variant: correct, no_signal, no_recheck, no_move_wake (the faults)
checks=(
"pass|correct|noclaim|-|halt wait: no invalid end state (the vCPU always leaves HLT: no wake-up lost to polling or to its own timer)"
"pass|correct|liveness|woken|halt wait: liveness 'woken' holds under weak fairness (the vCPU leaves HLT)"
"pass|correct|liveness|timer_served|halt wait: liveness 'timer_served' holds under weak fairness (a deadline due is served)"
"fail|correct|safety|poll_never_hits|halt wait (non-vacuity): a poll sees the interrupt, 'poll_never_hits' violated"
"fail|correct|safety|never_timer_fire|halt wait (non-vacuity): the vCPU's wait serves its deadline, 'never_timer_fire' violated"
"fail|no_signal|liveness|woken|halt wait, fault NO_SIGNAL: liveness 'woken' violated as expected"
"fail|no_recheck|liveness|woken|halt wait, fault NO_RECHECK: liveness 'woken' violated as expected"
"fail|no_move_wake|liveness|woken|halt wait, fault NO_MOVE_WAKE: liveness 'woken' violated as expected"
)
infos=(
"no_signal|noclaim|-"
"no_recheck|noclaim|-"
"no_move_wake|noclaim|-"
)

variant_defines()
{
	case $1 in
	correct) echo "" ;;
	no_signal) echo "-DNO_SIGNAL" ;;
	no_recheck) echo "-DNO_RECHECK" ;;
	no_move_wake) echo "-DNO_MOVE_WAKE" ;;
	*) echo "unknown variant $1" >&2; return 1 ;;
	esac
}
spin_defs=""
header="HLT wait: polling and the vCPU's own timer"

variant_label()
{
	case $1 in
	correct) echo "correct model" ;;
	no_signal) echo "fault NO_SIGNAL (a halted vCPU is not signalled)" ;;
	no_recheck) echo "fault NO_RECHECK (blocks after the poll without a look)" ;;
	no_move_wake) echo "fault NO_MOVE_WAKE (a moved deadline does not wake the wait)" ;;
	*) echo "$1" ;;
	esac
}
infos_title="what else the faults break"

elif [ "$name" = bridge_stop.pml ]; then

# variant: correct, split_exchange, no_loop_wake, no_force (the faults)
checks=(
"pass|correct|noclaim|-|bridge stop: no invalid end state (every thread ends, or waits where waiting for good is right)"
"pass|correct|safety|forced_only_hung|bridge stop: safety 'forced_only_hung' holds (the forced exit only when the main thread hangs in a libvirt call)"
"pass|correct|liveness|relist_seen|bridge stop: liveness 'relist_seen' holds under weak fairness (a lifecycle event is taken by a later scan)"
"pass|correct|liveness|stop_ends|bridge stop: liveness 'stop_ends' holds under weak fairness (a stop signal ends the process, even with a hung main thread)"
"fail|correct|safety|never_forced|bridge stop (non-vacuity): the forced exit happens, 'never_forced' violated"
"fail|correct|safety|never_relisted|bridge stop (non-vacuity): a scan takes an event, 'never_relisted' violated"
"fail|split_exchange|liveness|relist_seen|bridge stop, fault SPLIT_EXCHANGE: liveness 'relist_seen' violated as expected"
"fail|no_loop_wake|safety|forced_only_hung|bridge stop, fault NO_LOOP_WAKE: safety 'forced_only_hung' violated as expected"
"fail|no_force|liveness|stop_ends|bridge stop, fault NO_FORCE: liveness 'stop_ends' violated as expected"
)
infos=(
"no_loop_wake|noclaim|-"
"no_force|noclaim|-"
)

variant_defines()
{
	case $1 in
	correct) echo "" ;;
	split_exchange) echo "-DSPLIT_EXCHANGE" ;;
	no_loop_wake) echo "-DNO_LOOP_WAKE" ;;
	no_force) echo "-DNO_FORCE" ;;
	*) echo "unknown variant $1" >&2; return 1 ;;
	esac
}
spin_defs=""
header="libvirt bridge: the list's staleness, the event loop's quit, the bounded stop"

variant_label()
{
	case $1 in
	correct) echo "correct model" ;;
	split_exchange) echo "fault SPLIT_EXCHANGE (stale read, then cleared in another step)" ;;
	no_loop_wake) echo "fault NO_LOOP_WAKE (quit without the timeout that ends the loop's wait)" ;;
	no_force) echo "fault NO_FORCE (no forced exit)" ;;
	*) echo "$1" ;;
	esac
}
infos_title="what else the faults break"

else # tk_handshake.pml

# variant: correct (the wake path's kick deferred; idle_stop keeping the
#          pv tick of a running vCPU, restarting at once when the
#          timekeeper is running, else re-checking at its end; a tick-only
#          wake only with the pv tick not suspended; every vCPU with a pv
#          tick; the timekeeper may stay in a tick-only window for good),
#          no_pvtick (the same, one vCPU or both without a pv tick: the
#          deferred kick's backstop timer), old_stop (idle_stop suspends
#          every pv tick, no re-check), no_reread and no_force_req (the
#          injected faults), no_tk_running_restart and no_suppressed_check
#          (the fix of the tick-only window taken away, one half each),
#          lapic_tick (the timekeeper's tick is the guest's own LAPIC timer:
#          never suspended, windows aged by the timekeeper's own exits) and
#          lapic_no_aging (its fault: windows aged by the housekeeping tick
#          only)
checks=(
"pass|correct|noclaim|-|tk handshake: no invalid end state (never blocked with the tick stopped under a timekeeper busy for good or in a tick-only window for good)"
"pass|correct|safety|stopped_busy_unrequested|tk handshake: safety 'stopped_busy_unrequested' holds (the tick is never left stopped under a busy timekeeper with no force exit or kick pending)"
"pass|correct|safety|idle_end_clean|tk handshake: safety 'idle_end_clean' holds (a run that ends with every vCPU halted ends fully idle with nothing asked: covers what the weak-fairness search does not)"
"pass|correct|safety|idle_tk_tick_off|tk handshake: safety 'idle_tk_tick_off' holds (in full idle with nothing pending the timekeeper's pv tick is suspended)"
"pass|correct|liveness|busy_stop_ends|tk handshake: liveness 'busy_stop_ends' holds under weak fairness (a tick stopped under a busy timekeeper restarts)"
"pass|correct|liveness|busy_noted_leaves|tk handshake: liveness 'busy_noted_leaves' holds under weak fairness (the timekeeper turned busy in FULL_NOTED: the state leaves FULL_NOTED)"
"pass|correct|liveness|all_idle_stops|tk handshake: liveness 'all_idle_stops' holds under weak fairness (everything halted for good: the tick stops for good)"
"pass|correct|liveness|vcpu_tick_resumes|tk handshake: liveness 'vcpu_tick_resumes' holds under weak fairness (a running vCPU's pv tick is resumed)"
"pass|correct|liveness|wake_restarts|tk handshake: liveness 'wake_restarts' holds under weak fairness (a tick stopped when a vCPU woke, the state off FULL_NOTED or the timekeeper busy, restarts)"
"pass|correct|liveness|window_stop_ends|tk handshake: liveness 'window_stop_ends' holds under weak fairness (a tick stopped under a timekeeper in a tick-only window restarts, even if the window lasts for good)"
"fail|correct|safety|stop_unreachable|tk handshake (non-vacuity): idle_stop is reached, 'stop_unreachable' violated"
"fail|correct|safety|never_force_req|tk handshake (non-vacuity): the timekeeper asks for a force exit, 'never_force_req' violated"
"fail|correct|safety|never_busy_noted|tk handshake (non-vacuity): the timekeeper turns busy in FULL_NOTED, 'never_busy_noted' violated"
"fail|correct|safety|window_never_stopped|tk handshake (non-vacuity): a tick-only window in FULL_NOTED keeps the VM fully idle, 'window_never_stopped' violated"
"fail|correct|safety|never_tk_running_stop|tk handshake (non-vacuity): idle_stop finds the timekeeper running, 'never_tk_running_stop' violated"
"fail|correct|safety|never_suppressed_irr|tk handshake (non-vacuity): a halted timekeeper has its tick vector pending under a suspended pv tick, 'never_suppressed_irr' violated"
"pass|no_pvtick|noclaim|-|tk handshake, a vCPU without pv tick (NO_PVTICK): no invalid end state"
"pass|no_pvtick|safety|idle_end_clean|tk handshake, a vCPU without pv tick (NO_PVTICK): safety 'idle_end_clean' holds"
"pass|no_pvtick|safety|idle_tk_tick_off|tk handshake, a vCPU without pv tick (NO_PVTICK): safety 'idle_tk_tick_off' holds"
"pass|no_pvtick|liveness|wake_restarts|tk handshake, a vCPU without pv tick (NO_PVTICK): liveness 'wake_restarts' holds under weak fairness (the deferred kick's backstop)"
"pass|no_pvtick|liveness|window_stop_ends|tk handshake, a vCPU without pv tick (NO_PVTICK): liveness 'window_stop_ends' holds under weak fairness"
"fail|no_pvtick|safety|never_backstop|tk handshake, a vCPU without pv tick (NO_PVTICK, non-vacuity): the backstop timer is armed, 'never_backstop' violated"
"fail|old_stop|liveness|busy_stop_ends|tk handshake, fault OLD_STOP: liveness 'busy_stop_ends' violated as expected"
"fail|old_stop|liveness|vcpu_tick_resumes|tk handshake, fault OLD_STOP: liveness 'vcpu_tick_resumes' violated as expected"
"fail|no_reread|liveness|wake_restarts|tk handshake, fault NO_REREAD: liveness 'wake_restarts' violated as expected"
"fail|no_force_req|liveness|busy_noted_leaves|tk handshake, fault NO_FORCE_REQ: liveness 'busy_noted_leaves' violated as expected"
"fail|no_tk_running_restart|safety|idle_tk_tick_off|tk handshake, fault NO_TK_RUNNING_RESTART: safety 'idle_tk_tick_off' violated as expected"
"fail|no_tk_running_restart|liveness|window_stop_ends|tk handshake, fault NO_TK_RUNNING_RESTART: liveness 'window_stop_ends' violated as expected"
"fail|no_suppressed_check|liveness|window_stop_ends|tk handshake, fault NO_SUPPRESSED_CHECK: liveness 'window_stop_ends' violated as expected"
"pass|lapic_tick|noclaim|-|tk handshake, the guest's LAPIC tick (LAPIC_TICK): no invalid end state"
"pass|lapic_tick|safety|stopped_busy_unrequested|tk handshake, the guest's LAPIC tick (LAPIC_TICK): safety 'stopped_busy_unrequested' holds"
"pass|lapic_tick|safety|idle_end_clean|tk handshake, the guest's LAPIC tick (LAPIC_TICK): safety 'idle_end_clean' holds"
"pass|lapic_tick|liveness|busy_stop_ends|tk handshake, the guest's LAPIC tick (LAPIC_TICK): liveness 'busy_stop_ends' holds under weak fairness"
"pass|lapic_tick|liveness|busy_noted_leaves|tk handshake, the guest's LAPIC tick (LAPIC_TICK): liveness 'busy_noted_leaves' holds under weak fairness"
"pass|lapic_tick|liveness|wake_restarts|tk handshake, the guest's LAPIC tick (LAPIC_TICK): liveness 'wake_restarts' holds under weak fairness"
"pass|lapic_tick|liveness|window_stop_ends|tk handshake, the guest's LAPIC tick (LAPIC_TICK): liveness 'window_stop_ends' holds under weak fairness (a window opened under the stopped tick ends: aged by the timekeeper's own exit)"
"fail|lapic_tick|safety|window_never_stopped|tk handshake, the guest's LAPIC tick (LAPIC_TICK, non-vacuity): a tick-only window keeps the VM fully idle, 'window_never_stopped' violated"
"fail|lapic_tick|safety|idle_tk_tick_off|tk handshake, the guest's LAPIC tick (LAPIC_TICK): the tick stays armed in full idle (honoured, by design), 'idle_tk_tick_off' violated"
"fail|lapic_no_aging|liveness|window_stop_ends|tk handshake, fault LAPIC_TICK NO_EXIT_AGING: liveness 'window_stop_ends' violated as expected"
)

# Not asserted: the strict reading of the safety property (idle_stop never
# runs while tk_state == TK_BUSY), which a benign race violates (see the
# model); what else the faults break (or, NO_REREAD, no longer breaks: see
# the model).
infos=(
"correct|safety|stop_under_busy"
"old_stop|liveness|busy_noted_leaves"
"old_stop|liveness|wake_restarts"
"no_reread|safety|stopped_busy_unrequested"
"no_force_req|liveness|busy_stop_ends"
"no_tk_running_restart|noclaim|-"
"no_suppressed_check|noclaim|-"
"lapic_no_aging|noclaim|-"
)

variant_defines()
{
	case $1 in
	correct) echo "" ;;
	no_pvtick) echo "-DNO_PVTICK" ;;
	old_stop) echo "-DOLD_STOP" ;;
	no_reread) echo "-DNO_REREAD" ;;
	no_force_req) echo "-DNO_FORCE_REQ" ;;
	no_tk_running_restart) echo "-DNO_TK_RUNNING_RESTART" ;;
	no_suppressed_check) echo "-DNO_SUPPRESSED_CHECK" ;;
	lapic_tick) echo "-DLAPIC_TICK" ;;
	lapic_no_aging) echo "-DLAPIC_TICK -DNO_EXIT_AGING" ;;
	*) echo "unknown variant $1" >&2; return 1 ;;
	esac
}
spin_defs=""
header="timekeeper / housekeeping handshake"

variant_label()
{
	case $1 in
	correct) echo "correct model" ;;
	no_pvtick) echo "variant NO_PVTICK (a vCPU without pv tick)" ;;
	old_stop) echo "fault OLD_STOP (idle_stop suspends every pv tick)" ;;
	no_reread) echo "fault NO_REREAD" ;;
	no_force_req) echo "fault NO_FORCE_REQ" ;;
	no_tk_running_restart) echo "fault NO_TK_RUNNING_RESTART (idle_stop keeps the tick stopped under a running timekeeper)" ;;
	no_suppressed_check) echo "fault NO_SUPPRESSED_CHECK (a tick-only wake under a suspended pv tick opens a window)" ;;
	lapic_tick) echo "variant LAPIC_TICK (the guest's own LAPIC tick, honoured)" ;;
	lapic_no_aging) echo "fault LAPIC_TICK NO_EXIT_AGING (windows aged only by the housekeeping tick)" ;;
	*) echo "$1" ;;
	esac
}
infos_title="strict reading; what else the faults break (NO_REREAD: what it no longer breaks)"
fi

kind_cflags()
{
	case $1 in
	noclaim) echo "-DSAFETY -DNOCLAIM" ;;
	safety) echo "-DSAFETY" ;;
	liveness) echo "-DNFAIR=$nfair" ;;
	esac
}

# Build pan-VARIANT-KIND once (spin -a, then the C compiler).
# Returns non-zero, with the error text in build_err, when that fails.
spun=""      # variant whose pan.c is in the directory
build_err=""
build()
{
	local variant=$1 kind=$2 bin="pan-$1-$2" defs log
	[ -x "$bin" ] && return 0
	defs=$(variant_defines "$variant")
	if [ "$spun" != "$variant" ]; then
		rm -f pan.c
		# shellcheck disable=SC2086
		if ! log=$(timeout "$run_timeout" "$spin" $spin_defs \
				$defs -a "$name" 2>&1) || [ ! -f pan.c ]; then
			build_err="spin -a failed: $(printf '%s' "$log" | tail -n 5)"
			spun=""
			return 1
		fi
		spun=$variant
	fi
	# shellcheck disable=SC2046,SC2086
	if ! log=$(timeout "$run_timeout" "$cc" $pan_cflags \
			$(kind_cflags "$kind") -o "$bin" pan.c 2>&1); then
		build_err="compiling pan failed: $(printf '%s' "$log" | tail -n 5)"
		return 1
	fi
	return 0
}

# probe VARIANT KIND PROPERTY MODE: one verifier run; MODE is "pass" (a
# depth overrun is an error: pan -b) or "fail". Sets:
#   verdict  holds | violated | incomplete | timeout | broken
#   detail   states stored / where the violation was found / what went wrong
#   elapsed  seconds, one decimal
verdict=""
detail=""
elapsed=""
probe()
{
	local variant=$1 kind=$2 prop=$3 mode=$4
	local t0 t1 rc=0 args errors stored reached errline depthat defs
	t0=$(now_ms)
	verdict=broken
	detail=""
	rm -f "$name.trail" run.log replay.log
	if ! build "$variant" "$kind"; then
		detail=$build_err
		t1=$(now_ms)
		elapsed=$(awk -v ms=$((t1 - t0)) 'BEGIN { printf "%.1f", ms / 1000 }')
		return 0
	fi
	args=(-m"$depth" -w"$hashbits")
	[ "$mode" = pass ] && args+=(-b)
	[ "$prop" != - ] && args+=(-N "$prop")
	[ "$kind" = liveness ] && args+=(-a -f)
	timeout "$run_timeout" "./pan-$variant-$kind" "${args[@]}" \
		>run.log 2>&1 || rc=$?
	t1=$(now_ms)
	elapsed=$(awk -v ms=$((t1 - t0)) 'BEGIN { printf "%.1f", ms / 1000 }')

	if [ "$rc" -eq 124 ]; then
		verdict=timeout
		detail="no result after ${run_timeout} s"
		return 0
	fi
	errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' run.log | tail -n 1)
	stored=$(awk '/states, stored/ { n = $1 } END { print n }' run.log)
	reached=$(sed -n 's/.*depth reached \([0-9][0-9]*\).*/\1/p' run.log |
		tail -n 1)
	if [ -z "$errors" ] || [ -z "$stored" ]; then
		detail="pan exited with status $rc without a result"
		return 0
	fi
	errline=$(grep -m 1 -E '^pan:[0-9]+: ' run.log || true)
	depthat=$(printf '%s\n' "$errline" |
		sed -n 's/.*(at depth \([0-9]*\)).*/\1/p')

	if [ "$errors" -eq 0 ]; then
		if grep -qE 'max search depth too small|depth limit reached|Search not completed|out of memory|too many processes|^pan: error|error:' run.log; then
			verdict=incomplete
			detail="search not complete: $(grep -m 1 -E 'max search depth too small|depth limit reached|Search not completed|out of memory|too many processes|error:' run.log)"
		else
			verdict=holds
			detail="states stored $stored, depth reached $reached"
		fi
		return 0
	fi

	# errors > 0: is it the property's own violation?
	if printf '%s' "$errline" | grep -qE 'depth limit reached|max search depth'; then
		verdict=incomplete
		detail="search not complete: $errline"
		return 0
	fi
	case $kind in
	liveness)
		if printf '%s' "$errline" | grep -q 'acceptance cycle'; then
			verdict=violated
			detail="acceptance cycle at depth $depthat"
		else
			detail="unexpected error: $errline"
		fi
		;;
	safety)
		# The failed assertion must be the never claim's: replay the
		# trail and look where it stops.
		defs=$(variant_defines "$variant")
		# shellcheck disable=SC2086
		timeout "$run_timeout" "$spin" $spin_defs $defs \
			-t "$name" >replay.log 2>&1 || true
		if grep -qE '_spin_nvr\.tmp:[0-9]+, Error: assertion violated' replay.log; then
			verdict=violated
			detail="never claim fails at depth $depthat"
		else
			detail="unexpected error: $errline"
		fi
		;;
	noclaim)
		verdict=violated
		detail=${errline#pan:1: }
		;;
	esac
	return 0
}

nchecks=${#checks[@]}
echo "1..$nchecks"
echo "# $name, spin: $("$spin" -V 2>&1 | head -n 1); $header; pan built with $pan_cflags"

failed=0
k=0
for spec in "${checks[@]}"; do
	k=$((k + 1))
	IFS='|' read -r expect variant kind prop desc <<<"$spec"
	probe "$variant" "$kind" "$prop" "$expect"
	if { [ "$expect" = pass ] && [ "$verdict" = holds ]; } ||
	   { [ "$expect" = fail ] && [ "$verdict" = violated ]; }; then
		echo "ok $k - $desc ($detail, ${elapsed} s)"
	else
		failed=$((failed + 1))
		echo "not ok $k - $desc: got $verdict: $detail (${elapsed} s)"
		cat run.log replay.log >"failed-$k.log" 2>/dev/null || true
		echo "# verifier output kept in $work/failed-$k.log"
	fi
done

echo "# informational (not asserted): $infos_title"
for spec in "${infos[@]}"; do
	IFS='|' read -r variant kind prop <<<"$spec"
	probe "$variant" "$kind" "$prop" fail
	label=$(variant_label "$variant")
	if [ "$prop" = - ]; then
		what="assertions / end states"
	else
		what="$kind '$prop'"
	fi
	echo "#   $label: $what: $verdict ($detail, ${elapsed} s)"
done

t_end=$(now_ms)
echo "# total $(awk -v ms=$((t_end - t_start)) 'BEGIN { printf "%.1f", ms / 1000 }') s"
[ "$failed" -eq 0 ]
