#!/usr/bin/env bash
# Simulated hosts for the multi-node tests: N network namespaces, each a "host" with one interface
# (eth0, 10.231.0.<i+1>/24) on a bridge that lives in a namespace of its own (the "switch"), so the
# hosts reach each other only over their links, as machines on one LAN do. A link can be shaped
# (tc's token bucket: a rate) or cut (ip link set down). The hosts know each other by name: each
# gets an /etc/netns/NAME-h<i>/hosts (this machine's /etc/hosts and NAME-h0.. at their addresses),
# which `ip netns exec` shows as its /etc/hosts. Needs root (CAP_NET_ADMIN), iproute2 and the
# kernel's bridge and veth drivers; nothing is installed.
#
# usage: hosts.sh up NAME N [RATE]   make hosts NAME-h0 .. NAME-h<N-1> and the switch NAME-sw;
#                                    RATE (tc units: 10gbit, 100mbit) shapes each host's egress
#        hosts.sh exec NAME I CMD... run CMD on host I (its address: 10.231.0.<I+1>)
#        hosts.sh cut NAME I         take host I's link down (its packets go nowhere)
#        hosts.sh loss NAME I PERCENT drop PERCENT (0.1 steps) of what host I sends on its link, in
#                                    the switch: every round(100/PERCENT)-th packet (nftables'
#                                    numgen counter; needs the nft program)
#        hosts.sh dropped NAME I     print the packets `loss` has dropped on host I, and sent
#        hosts.sh down NAME          remove the hosts, the switch and their links (idempotent)
#        hosts.sh left NAME          print what of NAME still exists (namespaces, links); empty if none
# NAME: at most 10 letters and digits (it prefixes the switch's interface names, 15 characters at
# most). tc's netem (delay, loss) is not used: this kernel has no sch_netem (docs/distributed.md);
# loss is made with nftables instead, and delay cannot be made (no netem, no fq for timed release).
set -euo pipefail

die() { echo "hosts.sh: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: hosts.sh up|exec|cut|down|left NAME ..."
verb=$1 name=$2
shift 2
[[ "$name" =~ ^[A-Za-z0-9]{1,10}$ ]] || die "NAME must be 1-10 letters or digits, got '$name'"
sw="$name-sw"

hosts_of() { ip netns list | awk '{print $1}' | grep -E "^$name-h[0-9]+$" || true; }

case "$verb" in
  up)
    [ $# -ge 1 ] || die "up NAME N [RATE]"
    n=$1 rate=${2:-}
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "N must be 1-16, got '$n'"
    trap '"$0" down "$name" >/dev/null 2>&1 || true' ERR  # a half-made set is removed
    ip netns add "$sw"
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    for ((i = 0; i < n; i++)); do
      h="$name-h$i"
      ip netns add "$h"
      ip -n "$h" link set lo up
      # The pair is made in the switch and one end moved into the host, named eth0 there.
      ip -n "$sw" link add "${name}p$i" type veth peer name "${name}q$i"
      ip -n "$sw" link set "${name}q$i" netns "$h"
      ip -n "$h" link set "${name}q$i" name eth0
      ip -n "$sw" link set "${name}p$i" master br0
      ip -n "$sw" link set "${name}p$i" up
      ip -n "$h" addr add "10.231.0.$((i + 1))/24" dev eth0
      ip -n "$h" link set eth0 up
      mkdir -p "/etc/netns/$h"
      { cat /etc/hosts; for ((j = 0; j < n; j++)); do echo "10.231.0.$((j + 1)) $name-h$j"; done; } >"/etc/netns/$h/hosts"
      if [ -n "$rate" ]; then
        # A token bucket at RATE on what the host sends: the link's bandwidth. The burst is a
        # millisecond's worth (at least 64 KiB), the queue 50 ms.
        ip netns exec "$h" tc qdisc add dev eth0 root tbf rate "$rate" burst 1mbit latency 50ms
      fi
    done
    trap - ERR
    ;;
  exec)
    [ $# -ge 2 ] || die "exec NAME I CMD..."
    i=$1
    shift
    exec ip netns exec "$name-h$i" "$@"
    ;;
  cut)
    [ $# -ge 1 ] || die "cut NAME I"
    ip -n "$sw" link set "${name}p$1" down
    ip -n "$name-h$1" link set eth0 down
    ;;
  loss)
    [ $# -ge 2 ] || die "loss NAME I PERCENT"
    [[ "$2" =~ ^[0-9]+(\.[0-9])?$ ]] || die "PERCENT must be a number with at most one decimal, got '$2'"
    command -v nft >/dev/null || die "loss needs nft (Debian's nftables)"
    awk -v p="$2" 'BEGIN { exit !(p > 0 && p <= 100) }' || die "PERCENT must be above 0 and at most 100, got '$2'"
    every=$(awk -v p="$2" 'BEGIN { printf "%d", 100 / p + 0.5 }')
    # On the switch's port of host I, as packets come in from the host: lost on the wire, as far as
    # the sender's TCP can tell (it must time out or see duplicate acks, and retransmit). Two rules:
    # the first drops packets EVERY, 2*EVERY, ... (counted from 1), the second counts what passes.
    # Not at random: `numgen random mod 1000 < 10` once dropped none of 826 packets in CI (a 1 in
    # 4000 chance, or a kernel whose random numgen differs), and a test cannot tell which. A counter
    # drops the same packets on every kernel, and never the first (a lost SYN costs a 1 s timeout).
    ip netns exec "$sw" nft -f - <<EOF
table netdev wtloss$1 {
  chain in {
    type filter hook ingress device "${name}p$1" priority 0; policy accept;
    numgen inc mod $every $((every - 1)) counter drop
    counter accept
  }
}
EOF
    ;;
  dropped)
    [ $# -ge 1 ] || die "dropped NAME I"
    ip netns exec "$sw" nft list chain netdev "wtloss$1" in |
      awk '/counter packets/ { for (i = 1; i < NF; ++i) if ($i == "packets") printf "%s ", $(i + 1) } END { print "" }'
    ;;
  down)
    for h in $(hosts_of); do
      ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$h" 2>/dev/null || true
    done
    rm -rf /etc/netns/"$name"-h[0-9]*
    if ip netns list | awk '{print $1}' | grep -qx "$sw"; then
      ip netns pids "$sw" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$sw"
    fi
    ;;
  left)
    hosts_of
    ls -d /etc/netns/"$name"-h[0-9]* 2>/dev/null || true
    ip netns list | awk '{print $1}' | grep -x "$sw" || true
    ip -o link show | awk -F': ' '{print $2}' | grep -E "^${name}[pq][0-9]+" || true
    ;;
  *) die "unknown verb '$verb' (up, exec, cut, loss, dropped, down, left)" ;;
esac
