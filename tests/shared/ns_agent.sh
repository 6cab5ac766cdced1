#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# mpirun's remote-shell agent (--mca plm_rsh_agent) for run_shared.sh's
# two-namespace scenarios: "ssh HOST COMMAND" where each host is a network
# namespace.  NS_AGENT_HOSTS maps each host address to its namespace and
# the interface uroce uses there:
#
#	NS_AGENT_HOSTS="10.79.14.1=ns-a:vA 10.79.14.2=ns-b:vB"
#	ns_agent.sh 10.79.14.2 orted ...	# runs orted in ns-b, UROCE_IFNAME=vB
#
# Launching only, like ssh: the command is run as given, with the one
# variable a rank on that host needs to find its device's address.
set -u
host=$1
shift
for m in ${NS_AGENT_HOSTS:-}; do
	[ "${m%%=*}" = "$host" ] || continue
	spec=${m#*=}
	exec ip netns exec "${spec%%:*}" env UROCE_IFNAME="${spec#*:}" \
		sh -c "$*"
done
echo "ns_agent: unknown host '$host' (NS_AGENT_HOSTS='${NS_AGENT_HOSTS:-}')" >&2
exit 255
