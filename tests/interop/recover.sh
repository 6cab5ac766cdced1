#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Checks run_scenario.sh's recovery from a guest that stops answering:
# the guest's vCPU is stopped (vm.sh pause), as the guest whose
# virtio-net driver stopped taking its rings was (docs/testing.md); a
# scenario run through run_scenario.sh must then fail its first run, find
# the guest silent, reboot it and pass its second run, and the guest must
# answer afterwards.  Without the recovery the scenario fails.
#
#   recover.sh SCENARIO_ARGS...
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=$here/vm.sh

"$vm" require || exit
"$vm" pause || { echo "FAIL: vm.sh pause failed"; exit 1; }
if "$vm" answers; then
	echo "FAIL: the paused guest still runs commands"
	exit 1
fi
out=$("$here/run_scenario.sh" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
fail=0
((rc == 0)) || { echo "FAIL: the scenario did not pass after the reboot (exit $rc)"; fail=1; }
grep -q '^== rebooting it' <<<"$out" ||
	{ echo "FAIL: run_scenario.sh did not reboot the silent guest"; fail=1; }
"$vm" answers || { echo "FAIL: the guest does not answer after the scenario"; fail=1; }
((fail)) && exit 1
echo "PASS: the silent guest was rebooted and the scenario passed on its second run"
