#!/bin/bash
# Runs inside the guest (4 vCPUs): nvme-rdma against rocm-ernic's in-process
# NVMe-oF target at 192.168.200.1:4420 (nqn nvmet-test). The guest only has
# an address on the ionic netdev: the target answers ARP and ping itself.
set -u
fail=0
check() { if eval "$2"; then echo "ok   - $1"; else echo "FAIL - $1"; fail=1; fi; }
T=192.168.200.1 NQN=nvmet-test
modprobe -a ionic ionic_rdma nvme-rdma || { echo "FAIL - modules"; exit 1; }
netdev_of() { for d in /sys/class/net/*; do [ "$(basename "$(readlink -f $d/device/driver 2>/dev/null)")" = "$1" ] && basename $d; done; }
for _ in $(seq 50); do nic=$(netdev_of ionic); [ -n "$nic" ] && break; sleep 0.1; done
ip addr add 192.168.200.2/24 dev $nic; ip link set $nic up; sleep 2
check "port active" "ibv_devinfo -d ionic_0 | grep -q PORT_ACTIVE"
check "ping $T (the target answers ICMP echo)" "ping -c 2 -W 3 $T > /tmp/ping 2>&1"
echo "ip neigh: $(ip neigh show $T)"
check "ARP resolved the target (no static neighbour)" "ip neigh show $T | grep -q lladdr"
timeout 120 nvme discover -t rdma -a $T -s 4420 > /tmp/disc 2>&1; echo "nvme discover: exit $?"
sed 's/^/  /' /tmp/disc
check "nvme discover lists $NQN at $T:4420" "grep -q 'subnqn: *$NQN' /tmp/disc && grep -q 'traddr: *$T' /tmp/disc"
timeout 120 nvme connect -t rdma -n $NQN -a $T -s 4420 > /tmp/conn 2>&1; rc=$?
echo "nvme connect: exit $rc: $(cat /tmp/conn)"
[ $rc = 0 ] || { echo "FAIL - nvme connect"; dmesg | grep -iE 'nvme|ionic|rdma' | tail -15 | sed 's/^/dmesg: /'; exit 1; }
dev_of() { for b in /sys/block/nvme*; do [ -e "$b" ] || continue; case $(basename $b) in *c*) continue;; esac
  [ "$(cat $b/device/subsysnqn 2>/dev/null || cat $b/device/*/subsysnqn 2>/dev/null | head -1)" = "$1" ] && basename $b; done; }
blk=""; for _ in $(seq 50); do blk=$(dev_of $NQN); [ -n "$blk" ] && [ -b /dev/$blk ] && break; sleep 0.2; done
nvme list | sed 's/^/  /'
check "a block device for $NQN (/dev/$blk, $(cat /sys/block/$blk/size 2>/dev/null) sectors)" "[ -n '$blk' ] && [ \$(cat /sys/block/$blk/size) = 524288 ]"
check "model and serial from Identify" "nvme list | grep -q 'ERNIC0000000000001.*rocm-ernic NVMe-oF target'"
echo "I/O queues: $(ls -d /sys/class/nvme/*/nvme*c*n* 2>/dev/null | wc -l) path(s); $(grep -h . /sys/class/nvme/nvme*/queue_count 2>/dev/null | head -1) queues"
head -c 16M /dev/urandom > /tmp/pattern
dd if=/tmp/pattern of=/dev/$blk bs=256k seek=400 oflag=direct status=none
dd if=/dev/$blk of=/tmp/back bs=256k skip=400 count=64 iflag=direct status=none
check "16 MiB written and read back O_DIRECT, identical" "cmp -s /tmp/pattern /tmp/back"
mkfs.ext4 -q -F /dev/$blk && mkdir -p /mnt/ns && mount /dev/$blk /mnt/ns
head -c 8M /dev/urandom > /tmp/file
sum=$(sha256sum < /tmp/file | cut -c1-64)
cp /tmp/file /mnt/ns/file && sync && umount /mnt/ns
echo 3 > /proc/sys/vm/drop_caches
mount /dev/$blk /mnt/ns
check "ext4 on the namespace: an 8 MiB file remounted reads back with the same sha256 ($sum)" "[ \"\$(sha256sum < /mnt/ns/file | cut -c1-64)\" = $sum ]"
umount /mnt/ns
if command -v fio > /dev/null; then
  fio --name=v --filename=/dev/$blk --rw=randwrite --bs=4k --size=16M --direct=1 --ioengine=libaio --iodepth=16 --numjobs=1 \
    --verify=crc32c --do_verify=1 --output-format=terse --terse-version=3 > /tmp/fio 2>&1 \
    && echo "ok   - fio randwrite 4k qd16 with crc32c verify: $(awk -F';' '{print $49}' /tmp/fio) write IOPS" \
    || { echo "FAIL - fio verify: $(tail -3 /tmp/fio)"; fail=1; }
fi
# Make the file system again at the end, so the host finds it in the namespace file.
mkfs.ext4 -q -F /dev/$blk
nvme disconnect -n $NQN > /tmp/disc-out 2>&1; echo "nvme disconnect: $(cat /tmp/disc-out)"
check "nvme disconnect" "[ -z \"\$(dev_of $NQN)\" ]"
hw=/sys/class/infiniband/ionic_0/hw_counters; [ -d $hw ] || hw=/sys/class/infiniband/ionic_0/ports/1/hw_counters
echo "ionic_0 hw_counters: $(cd $hw 2>/dev/null && grep -H . reg_mr_wqes remote_invalidates rdma_write_bytes rdma_read_bytes send_msgs 2>/dev/null | tr '\n' ' ')"
dmesg | grep -iE "ionic|nvme" | grep -iE "error|fail|timeout|reject" | tail -5 | sed 's/^/dmesg: /'
exit $fail
