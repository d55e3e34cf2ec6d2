#!/bin/bash
# Opt-in VM tests (npm run test:vm): each script boots guests with the rig in
# ../shared/e2e and exits non-zero on failure. Needs root and the rig's images.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "VM tests need root"; exit 2; }
pass=0 failn=0
for t in "$HERE"/vfio-user-demo.sh "$HERE"/idio16-record.sh "$HERE"/ionic-eth.sh "$HERE"/rdma-verbs.sh "$HERE"/rdma-nvme.sh "$HERE"/mesh-two-guests.sh; do
  echo "##### $(basename "$t")"
  if bash "$t"; then pass=$((pass + 1)); else failn=$((failn + 1)); fi
done
echo "$pass passed, $failn failed"
[ $failn = 0 ]
