#!/bin/sh
# Install the Debian packages the build and the tests need, only those that
# are missing. Run as root on Debian 12 (or let it tell you what to install).
set -eu

PACKAGES="gcc libc6-dev make pkg-config meson ninja-build python3 check
libsubunit-dev spin libasan8 libubsan1 libtsan2 binutils qemu-system-x86
libjson-c-dev python3-prometheus-client libvirt-dev python3-libvirt
libvirt-clients libvirt-daemon libvirt-daemon-driver-qemu clang
libclang-rt-14-dev libxml2-utils prometheus help2man mandoc groff-base tmux
systemd librsvg2-bin"

missing=""
for p in $PACKAGES; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$status" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing Debian packages:$missing" >&2
	echo "install-deps: run as root, or: sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the package list is meant
apt-get install -y -qq --no-install-recommends $missing
# prometheus is installed for promtool (the metrics tests: check metrics,
# test rules); its server is not wanted, so it does not stay running or
# start at boot where systemd runs it.
case "$missing" in
*" prometheus"*)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now prometheus.service >/dev/null 2>&1 || true
	fi ;;
esac
