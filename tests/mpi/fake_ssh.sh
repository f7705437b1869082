#!/bin/sh
# fake_ssh.sh [options] HOST COMMAND... — stands in for ssh as Open MPI's launch agent
# (--mca plm_rsh_agent) or Hydra's (-launcher ssh -launcher-exec) so that one machine
# plays several hosts: COMMAND (Open MPI's daemon, Hydra's proxy) runs here, in a UTS
# namespace of its own whose host name is HOST. Its ranks then count as another host's,
# so a multi-host layout can be tested on one machine.
while [ $# -gt 0 ]; do
    case $1 in
    -*) shift ;;
    *) break ;;
    esac
done
host=$1
shift
# As root a new UTS namespace is enough; elsewhere a user namespace grants it.
for ns in "-u" "-ru"; do
    if unshare $ns true 2>/dev/null; then
        exec unshare $ns sh -c "hostname '$host' && exec sh -c \"\$0\"" "$*"
    fi
done
echo "fake_ssh.sh: cannot make a UTS namespace (unshare -u)" >&2
exit 1
