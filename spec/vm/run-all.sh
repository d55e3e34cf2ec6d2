#!/bin/bash
# Opt-in VM tests (npm run test:vm): each script boots guests with the
# project's rig (spec/vm/rig, images under /var/tmp/ernic-rig) and exits
# non-zero on failure. Needs root. The rig is brought up to date first (only
# what changed is rebuilt). E2E_RIG=DIR runs the same tests on another rig with
# the same run-guest.sh interface instead (a second opinion); VM_TESTS="ionic-eth rdma-verbs" runs a subset.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "VM tests need root"; exit 2; }
if [ -z "${E2E_RIG:-}" ]; then
  bash "$HERE/rig/build.sh" || { echo "the VM rig could not be built (spec/vm/rig/build.sh)"; echo "0 passed, 1 failed"; exit 1; }
fi
TESTS=${VM_TESTS:-vfio-user-demo idio16-record ionic-eth ionic-offloads rdma-verbs rdma-nvme nvmeof s3 mesh-two-guests roce-rxe ops-counters p4}
pass=0 failn=0
for name in $TESTS; do
  t=$HERE/$name.sh
  echo "##### $name.sh"
  if bash "$t"; then pass=$((pass + 1)); else failn=$((failn + 1)); fi
done
echo "$pass passed, $failn failed"
[ $failn = 0 ]
