#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Runs one interop scenario (scenario.sh ARGS...).  If it failed and the
# guest no longer runs a command, the guest is rebooted (vm.sh up) and the
# scenario runs once more; the second run's result is the test's.  Why:
# the emulated guest's virtio-net driver sometimes stops taking its rings
# (docs/testing.md, "A guest that stops answering"), a fault of the guest
# kernel or of QEMU's TCG, not of what uroce sent, and before this that
# scenario and every one after it failed.  A scenario that fails while the
# guest still answers fails at once.  The first run's output, with the
# dump vm.sh printed, stays in the log above the second's.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
state=${UROCE_INTEROP_STATE:-/tmp/uroce-interop}

"$here/scenario.sh" "$@"
rc=$?
((rc == 0 || rc == 77)) && exit "$rc"
"$here/vm.sh" answers && exit "$rc"
echo "== the guest stopped answering during the scenario (vm.sh's dump above):"
echo "== rebooting it, then running the scenario once more"
# (the earlier scenarios' packet accounting is kept for interop_counters:
# each line is one scenario's own count, whichever guest counted it)
acct=$(cat "$state/accounting" 2>/dev/null)
"$here/vm.sh" up || { echo "FAIL: the guest did not come back"; exit 1; }
[[ -z $acct ]] || printf '%s\n' "$acct" >"$state/accounting"
exec "$here/scenario.sh" "$@"
