#!/bin/bash
# Runs inside the guest (4 vCPUs): a kernel RDMA consumer on our device.
# nvmet-rdma exports a file-backed namespace on the ionic netdev's address and
# nvme-rdma connects to it in the same guest, so every I/O crosses our data
# path as the kernel ULPs drive it: fast registration (REG_MR) of each I/O's
# pages, RDMA READ/WRITE by the target, SEND with invalidate, LOCAL_INV. Data
# is written and read back through the block device and compared.
# With RXE=1 the same runs over rdma_rxe on the virtio NIC as a baseline.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
modprobe -a ionic ionic_rdma nvmet nvmet-rdma nvme-rdma || { echo "FAIL - modules"; exit 1; }
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
ip addr add 10.81.0.2/24 dev $nic; ip link set $nic up; sleep 2
check "port active" "ibv_devinfo -d ionic_0 | grep -q PORT_ACTIVE"
hw() {
  for f in /sys/class/infiniband/$1/hw_counters /sys/class/infiniband/$1/ports/1/hw_counters; do
    [ -d $f ] && (cd $f && grep -H . reg_mr_wqes local_inv_wqes remote_invalidates rdma_write_bytes rdma_read_bytes send_msgs 2>/dev/null | tr '\n' ' ')
  done; echo
}
CFG=/sys/kernel/config/nvmet
export_ns() { # name ip port
  local n=$1 ip=$2 port=$3
  truncate -s 64M /tmp/$n.img
  mkdir $CFG/subsystems/$n
  echo 1 > $CFG/subsystems/$n/attr_allow_any_host
  mkdir $CFG/subsystems/$n/namespaces/1
  echo -n /tmp/$n.img > $CFG/subsystems/$n/namespaces/1/device_path
  echo 1 > $CFG/subsystems/$n/namespaces/1/enable
  mkdir $CFG/ports/$port
  echo rdma > $CFG/ports/$port/addr_trtype; echo ipv4 > $CFG/ports/$port/addr_adrfam
  echo $ip > $CFG/ports/$port/addr_traddr; echo 4420 > $CFG/ports/$port/addr_trsvcid
  ln -s $CFG/subsystems/$n $CFG/ports/$port/subsystems/$n
}
# The namespace block device of subsystem $1 (the multipath head nvmeXnY, not a path nvmeXcZnY).
dev_of() { for b in /sys/block/nvme*; do [ -e "$b" ] || continue; case $(basename $b) in *c*) continue;; esac
  [ "$(cat $b/device/subsysnqn 2>/dev/null || cat $b/device/*/subsysnqn 2>/dev/null | head -1)" = "$1" ] && basename $b; done; }
rate() { awk -v a=$1 -v b=$2 'BEGIN { printf "%.1f", 32 / (b - a) }'; }
run() { # name ip port rdma-device
  local n=$1 ip=$2 port=$3 rdev=$4
  export_ns $n $ip $port
  if ! timeout 120 nvme connect -t rdma -a $ip -s 4420 -n $n > /tmp/conn.$n 2>&1; then
    [ $rdev = ionic_0 ] && { echo "FAIL - $rdev nvme connect: $(tail -2 /tmp/conn.$n)"; fail=1; } || echo "note - $rdev nvme connect failed (baseline only)"
    return
  fi
  local blk=""; for _ in $(seq 50); do blk=$(dev_of $n); [ -n "$blk" ] && [ -b /dev/$blk ] && break; sleep 0.2; done
  echo "$rdev: nvme connect -t rdma -a $ip -> /dev/$blk ($(cat /sys/block/$blk/size) sectors)"
  head -c 32M /dev/urandom > /tmp/pattern
  local t0=$(date +%s.%N)
  dd if=/tmp/pattern of=/dev/$blk bs=256k oflag=direct status=none
  local t1=$(date +%s.%N)
  dd if=/dev/$blk of=/tmp/back bs=256k count=128 iflag=direct status=none
  local t2=$(date +%s.%N)
  if cmp -s /tmp/pattern /tmp/back; then
    echo "ok   - $rdev 32 MiB written and read back through nvme-rdma, identical"
  elif [ $rdev = ionic_0 ]; then echo "FAIL - $rdev data read back differs"; fail=1
  else echo "note - $rdev data read back differs (baseline only)"; fi
  echo "$rdev dd 256k direct: write $(rate $t0 $t1) MiB/s, read $(rate $t1 $t2) MiB/s"
  if command -v fio > /dev/null; then
    fio --name=v --filename=/dev/$blk --rw=randwrite --bs=64k --size=16M --direct=1 --ioengine=libaio --iodepth=8 \
      --verify=crc32c --do_verify=1 --output-format=terse --terse-version=3 > /tmp/fio.$n 2>&1 \
      && echo "ok   - $rdev fio randwrite 64k qd8 with crc32c verify: write $(awk -F';' '{print $48/1024}' /tmp/fio.$n | cut -c1-6) MiB/s" \
      || { [ $rdev = ionic_0 ] && { echo "FAIL - $rdev fio verify: $(tail -3 /tmp/fio.$n)"; fail=1; } || echo "note - $rdev fio failed (baseline only)"; }
  fi
  nvme disconnect -n $n > /dev/null 2>&1
  check "$rdev nvme disconnect" "[ -z \"\$(dev_of $n)\" ]"
}
echo "=== nvme-rdma on ionic_0 (rocm-ernic)"
run ernic 10.81.0.2 1 ionic_0
echo "ionic_0 hw_counters: $(hw ionic_0)"
check "REG_MR work requests reached the device" "[ \$(cat /sys/class/infiniband/ionic_0/hw_counters/reg_mr_wqes 2>/dev/null || cat /sys/class/infiniband/ionic_0/ports/1/hw_counters/reg_mr_wqes 2>/dev/null || echo 0) -gt 0 ]"
vnic=$(netdev_of virtio_net)
if [ -n "${RXE:-}" ] && [ -n "$vnic" ]; then
  modprobe rdma_rxe; ip link set $vnic up
  vip=$(ip -4 -o addr show dev $vnic | awk '{print $4}' | cut -d/ -f1)
  rdma link add rxe0 type rxe netdev $vnic && { echo "=== nvme-rdma on rxe0 (rdma_rxe on $vnic), same guest"; run rxe 10.0.2.15 2 rxe0; }
fi
dmesg | grep -iE "ionic|nvme" | grep -iE "error|fail|timeout" | tail -5 | sed 's/^/dmesg: /'
exit $fail
