#!/bin/bash
# Leaves every ENI but the boot ENI to vpc-lease: neither systemd-networkd nor amazon-ec2-net-utils may
# configure a pod ENI (bring it up with DHCP, take the pods' secondary addresses, add routes and policy rules).
# Run once per instance from user data, before kubelet starts. See README.md beside it.
#
#   vpc-lease-host-enis.sh [--files-only]
#
# --files-only writes the two files and changes nothing live (tests). VPC_LEASE_HOST_ROOT prefixes every
# path and VPC_LEASE_IMDS replaces the instance metadata endpoint: test seams only.
set -euo pipefail

root=${VPC_LEASE_HOST_ROOT:-}
imds=${VPC_LEASE_IMDS:-http://169.254.169.254}
apply=1
[[ ${1:-} == --files-only ]] && apply=0

die() { echo "vpc-lease-host-enis: $*" >&2; exit 1; }

# The boot ENI is the one whose MAC IMDS names at the top level; interfaces are found by MAC, never by name.
token=$(curl -sSf --max-time 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$imds/latest/api/token") ||
  die "IMDS did not hand out a token"
mac=$(curl -sSf --max-time 5 -H "X-aws-ec2-metadata-token: $token" "$imds/latest/meta-data/mac") ||
  die "IMDS did not name the boot ENI's MAC"
mac=${mac,,}
[[ $mac =~ ^([0-9a-f]{2}:){5}[0-9a-f]{2}$ ]] || die "IMDS answered a MAC that is not one: $mac"

primary=""
for dev in "$root"/sys/class/net/*; do
  if [[ -r $dev/address && $(<"$dev/address") == "$mac" ]]; then primary=${dev##*/}; fi
done
[[ -n $primary ]] || die "no interface has the boot ENI's MAC $mac"
[[ $primary =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || die "unexpected interface name $primary"

# systemd-networkd: the first .network file in lexical order wins, across /usr/lib, /run and /etc. 10- sorts
# before nodeadm's 70-eks-*, ec2-net-utils' generated 70-<if> and its 80-ec2.network. MACAddress= cannot be
# negated; Property= can, and INTERFACE is the kernel name alone (Name= would also match altnames).
network=$root/etc/systemd/network/10-vpc-lease-pod-enis.network
mkdir -p "${network%/*}"
cat >"$network.tmp" <<NETWORK
# Written by vpc-lease-host-enis.sh: every EC2 network interface but the boot ENI ($mac) belongs to vpc-lease.
[Match]
Driver=ena ixgbevf vif
Property=!INTERFACE=$primary

[Link]
Unmanaged=yes
NETWORK
mv "$network.tmp" "$network"

# amazon-ec2-net-utils: its udev rule starts policy-routes@<if> for every ENI, which adds the ENI's secondary
# addresses (the pods') to the host and a policy rule per address. The same file name in /etc replaces the
# package's; here it acts on the boot ENI only. A rule masked to /dev/null (EKS AMIs) stays masked.
rules=$root/etc/udev/rules.d/99-vpc-policy-routes.rules
mkdir -p "${rules%/*}"
if [[ ! -L $rules ]]; then
  cat >"$rules.tmp" <<RULES
# Written by vpc-lease-host-enis.sh: policy routes for the boot ENI ($mac) only; the others are vpc-lease's.
SUBSYSTEM=="net", ACTION=="remove", ENV{ID_NET_DRIVER}=="vif|ena|ixgbevf", RUN+="/usr/bin/systemctl disable --now refresh-policy-routes@\$name.timer policy-routes@\$name.service"
SUBSYSTEM=="net", ACTION=="add", ENV{ID_NET_DRIVER}=="vif|ena|ixgbevf", ATTR{address}=="$mac", RUN+="/usr/bin/systemctl enable --now --no-block policy-routes@\$name.service"
RULES
  mv "$rules.tmp" "$rules"
fi

((apply)) || exit 0

# ENIs attached before this ran (launch-template ENIs, or an attach that beat user data) may already be
# configured: stop ec2-net-utils' units, drop what it generated, and take back what the host added.
udevadm control --reload || true
pending=()
for dev in /sys/class/net/*; do
  name=${dev##*/}
  if [[ $name == "$primary" || ! -e $dev/device/driver ]]; then continue; fi
  case $(basename "$(readlink -f "$dev/device/driver")") in ena | ixgbevf | vif) ;; *) continue ;; esac
  systemctl disable --now "refresh-policy-routes@$name.timer" "policy-routes@$name.service" 2>/dev/null || true
  rm -rf "/run/systemd/network/70-$name.network" "/run/systemd/network/70-$name.network.d"
  pending+=("$name")
done
networkctl reload 2>/dev/null || true
for name in "${pending[@]}"; do
  ip addr flush dev "$name" scope global
  ip route flush dev "$name" table all 2>/dev/null || true
done
# ec2-net-utils' policy rules: priority = table = 10000 + 100 * network card + device index (none for the boot
# ENI). vpc-lease's own rules use other tables, and no pod exists before kubelet starts.
ip rule show | sed -nE 's/^(1[0-9]{4}):.* lookup (1[0-9]{4})( .*)?$/\1 \2/p' | while read -r prio table; do
  if [[ $prio == "$table" ]]; then ip rule del priority "$prio" table "$table"; fi
done
exit 0
