#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Checks `vm.sh dump`, what a scenario prints when the guest stops
# answering (docs/testing.md, "Interop with rxe"), on the live guest: it
# must reach QEMU's monitor (the vCPU, eth0's receive and send rings) and
# the guest kernel (sysrq: blocked tasks and all tasks, on the console).
# A dump that cannot do that would leave the next hung guest as silent as
# the one that made it.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=$here/vm.sh

"$vm" require || exit

out=$("$vm" dump 2>&1)
rc=$?
fails=0
expect() {	# expect WHAT REGEX
	grep -Eq -- "$2" <<<"$out" || { echo "FAIL: the dump lacks $1 (/$2/)"; fails=1; }
}
((rc == 0)) || { echo "FAIL: vm.sh dump exited $rc"; fails=1; }
expect "QEMU's word that the guest runs" '^  VM status: running'
expect "the vCPU's registers" '^  RIP=[0-9a-f]{16} '
expect "eth0's receive ring" '^    queue_index: +0$'
expect "eth0's send ring" '^    queue_index: +1$'
expect "the guest's blocked tasks" 'sysrq: Show Blocked State'
expect "the guest's task list" 'sysrq: Show State'
expect "a task's stack (PID 1, /init)" 'task:init +state:'
if ((fails)); then
	echo "----- the dump -----"
	printf '%s\n' "$out"
	exit 1
fi
echo "vm.sh dump reached QEMU's monitor and the guest kernel ($(wc -l <<<"$out") lines)"
